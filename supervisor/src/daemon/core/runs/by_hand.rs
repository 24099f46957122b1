//! `squadctl run|stop` in the core: the task named, the checks (the
//! policy's, the pool), the run started or stopped, the answer
//! ([`Effect::RunReply`]).

use super::{RunKey, start_run};
use crate::daemon::core::timer::Timer;
use crate::daemon::core::{Effect, Now, Root, RootId};
use crate::runners::RunState;
use squad_policies::runners::Candidate;
use squad_protocol::model::TaskStatus;

/// The `runs` method of the control socket: `list` answers with the live
/// runs; `run` and `stop` need a task; any other action is refused.
pub(crate) fn asked(root: &mut Root, id: RootId, asked: super::Asked, now: Now) -> Vec<Effect> {
    let super::Asked {
        action,
        session,
        task,
        text,
    } = asked;
    let refused = |e: RunError| {
        vec![Effect::RunReply {
            root: id,
            reply: Err(e),
        }]
    };
    match (action.as_str(), task) {
        ("list", _) => vec![Effect::RunsListed {
            root: id,
            runs: root.runs.live(),
        }],
        ("run" | "stop" | "merge" | "drop" | "approve" | "changes" | "reject", None) => {
            refused(RunError::NoTask)
        }
        ("run", Some(task)) => by_hand(root, id, session.as_deref(), &task, now),
        ("stop", Some(task)) => stop(root, id, session.as_deref(), &task),
        // A held branch merged again or given up (docs/worktrees.md).
        (action @ ("merge" | "drop"), Some(task)) => {
            super::handover::by_hand(root, id, session.as_deref(), &task, action == "drop", now)
        }
        // The review gate (docs/review.md).
        (action @ ("approve" | "changes" | "reject"), Some(task)) => {
            super::review::asked(root, id, action, session.as_deref(), &task, text, now)
        }
        (other, _) => refused(RunError::UnknownAction(other.to_string())),
    }
}

/// `squadctl run TASK`: the run started by hand (same checks, except that
/// held tasks and used-up retries may start), or why not.
pub(crate) fn by_hand(
    root: &mut Root,
    id: RootId,
    session: Option<&str>,
    task: &str,
    now: Now,
) -> Vec<Effect> {
    let c = match candidate(root, session, task).and_then(|c| {
        let pool = root.runs.pool();
        squad_policies::runners::may_start(&root.policy.runners, &c, &pool, now.wall, true)
            .map_err(RunError::Wait)?;
        if pool.running >= pool.max_concurrent {
            return Err(RunError::Wait(squad_policies::runners::Wait::PoolFull));
        }
        Ok(c)
    }) {
        Ok(c) => c,
        Err(e) => {
            return vec![Effect::RunReply {
                root: id,
                reply: Err(e),
            }];
        }
    };
    start_run(root, id, c, true, now)
}

/// `squadctl stop TASK`: SIGTERM to the run's group (SIGKILL after the
/// grace at a later look); once sent ([`stopped`]) the run is recorded
/// `stopped` (then held).
pub(crate) fn stop(root: &Root, id: RootId, session: Option<&str>, task: &str) -> Vec<Effect> {
    match root
        .runs
        .live
        .iter()
        .find(|(_, l)| l.rec.task == task && session.is_none_or(|s| s == l.rec.session))
    {
        Some((key, live)) => vec![Effect::StopRun {
            root: id,
            run: key.clone(),
            pid: live.rec.pid,
        }],
        None => vec![Effect::RunReply {
            root: id,
            reply: Err(RunError::NotRunning(task.to_string())),
        }],
    }
}

/// SIGTERM reached a run stopped by hand.
pub(crate) fn stopped(root: &mut Root, id: RootId, run: &RunKey, now: Now) -> Vec<Effect> {
    let Some(live) = root.runs.live.get_mut(run) else {
        return Vec::new();
    };
    live.rec.state = RunState::Stopped;
    // A run already stopping keeps its first SIGTERM's time: asking again
    // must not put its SIGKILL off.
    live.watch.term_at.get_or_insert(now.wall);
    vec![
        super::record(&live.dir, &live.rec),
        Effect::SetTimerEarlier {
            timer: Timer::Runs,
            after: super::POLL,
        },
        Effect::RunReply {
            root: id,
            reply: Ok((live.rec.session.clone(), live.rec.pid)),
        },
    ]
}

/// The candidate `squadctl run` names (the task in `session`, or in the
/// one session that plans it), whatever its past runs.
fn candidate(root: &Root, session: Option<&str>, task: &str) -> Result<Candidate, RunError> {
    let mut found = Vec::new();
    for (name, core) in &root.sessions {
        if session.is_some_and(|s| s != name) {
            continue;
        }
        if let Some(t) = core.tasks().get(task) {
            found.push((name.clone(), t.clone(), core.ended().is_some()));
        }
    }
    let (name, t, ended) = match found.len() {
        0 => return Err(RunError::NotPlanned(task.to_string())),
        1 => found.remove(0),
        _ => {
            return Err(RunError::Ambiguous {
                task: task.to_string(),
                sessions: found
                    .iter()
                    .map(|f| f.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    };
    if ended {
        return Err(RunError::Ended(name));
    }
    if t.state == TaskStatus::Completed {
        return Err(RunError::Completed(task.to_string()));
    }
    if !t.unmet.is_empty() {
        return Err(RunError::Waiting {
            task: task.to_string(),
            unmet: t.unmet.join(", "),
        });
    }
    let branches = super::handover::waiting_for(root, &name, task);
    if !branches.is_empty() {
        return Err(RunError::Waiting {
            task: task.to_string(),
            unmet: super::handover::waiting_words(&branches),
        });
    }
    let past = root.runs.past.get(&(name.clone(), task.to_string()));
    Ok(Candidate {
        session: name,
        task: task.to_string(),
        agent: t.agent.clone(),
        priority: t.priority,
        attempts: past.map_or(0, |p| p.attempt),
        retry_at: None,
        held: false,
    })
}

/// Why `squadctl run|stop` (the `runs` method of the control socket) was
/// refused or a run could not start; its text is the reply's error, the
/// `run-failed` event's and the lead's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum RunError {
    /// `run` or `stop` without a task.
    #[error("give the task")]
    NoTask,
    /// An action other than list, run and stop.
    #[error("unknown runs action `{0}` (list, run, stop, merge, drop, approve, changes, reject)")]
    UnknownAction(String),
    /// No session plans the task.
    #[error("no session plans `{0}`")]
    NotPlanned(String),
    /// Several sessions plan it and none was named.
    #[error("`{task}` is planned in several sessions ({sessions}); pass --session")]
    Ambiguous {
        /// The task.
        task: String,
        /// The sessions, comma-separated.
        sessions: String,
    },
    /// The session ended.
    #[error("session `{0}` has ended")]
    Ended(String),
    /// The task is completed.
    #[error("`{0}` is completed")]
    Completed(String),
    /// The task waits for others.
    #[error("`{task}` waits for {unmet}")]
    Waiting {
        /// The task.
        task: String,
        /// What it waits for, comma-separated.
        unmet: String,
    },
    /// The runner policy says not now.
    #[error("{}", .0.reason())]
    Wait(squad_policies::runners::Wait),
    /// `merge`/`drop` of a task whose branch is not held.
    #[error("`{0}` has no branch held at merge")]
    NotHeld(String),
    /// `approve`/`changes`/`reject` of a task whose branch does not wait
    /// for review.
    #[error("`{0}` has no branch waiting for review (`squadctl review` lists those that do)")]
    NotInReview(String),
    /// `changes` without a comment.
    #[error("say what to change: `-m TEXT`")]
    NoComment,
    /// `stop` of a task with no live run.
    #[error("`{0}` has no run in progress")]
    NotRunning(String),
    /// The task has no valid assignment to run from.
    #[error("{0}: no valid task assignment")]
    NoPlan(String),
    /// No runner of the policy names the agent.
    #[error("no runner for {0}")]
    NoRunner(String),
    /// The runner's process could not start (the shell's reason: the run's
    /// folder, its prompt, the guard check or the spawn).
    #[error("{0}")]
    Start(String),
    /// SIGTERM could not be sent to the run's group (`squadctl stop`).
    #[error("{0}")]
    Signal(String),
}
