//! `squadctl run` and `squadctl stop` in the model: the inputs the shell
//! steps for them (`processes.rs`, `answer_runs`: `Input::RunByHand`,
//! `Input::RunStop`, then `Input::RunStopped` once SIGTERM was sent), and
//! the oracle's own rule for the answer (docs/runners.md: the same checks
//! as dispatch, except that a held task, or one out of retries or in its
//! backoff, may start; `stop` answers for a run in progress).

use super::world::World;
use super::*;
use crate::daemon::core::runs::by_hand::RunError;
use crate::runners::RunState;
use squad_policies::runners::Wait;
use squad_protocol::model::SessionState;

/// What the oracle expects `squadctl run|stop` to answer: started (or
/// stopping) in this session, or refused for this reason.
#[derive(Debug, PartialEq)]
enum Answer {
    Ok(String),
    NotPlanned,
    Ambiguous,
    Ended,
    Completed,
    Waiting,
    TaskRunning,
    AgentBusy,
    PoolFull,
    Start,
    NotRunning,
}

fn answer_of(reply: &Result<(String, u32), RunError>) -> Answer {
    match reply {
        Ok((s, _)) => Answer::Ok(s.clone()),
        Err(RunError::NotPlanned(_)) => Answer::NotPlanned,
        Err(RunError::Ambiguous { .. }) => Answer::Ambiguous,
        Err(RunError::Ended(_)) => Answer::Ended,
        Err(RunError::Completed(_)) => Answer::Completed,
        Err(RunError::Waiting { .. }) => Answer::Waiting,
        Err(RunError::Wait(Wait::TaskRunning)) => Answer::TaskRunning,
        Err(RunError::Wait(Wait::AgentBusy)) => Answer::AgentBusy,
        Err(RunError::Wait(Wait::PoolFull)) => Answer::PoolFull,
        Err(RunError::Start(_)) => Answer::Start,
        Err(RunError::NotRunning(_)) => Answer::NotRunning,
        Err(e) => panic!("an answer the model never expects: {e:?}"),
    }
}

impl World {
    /// `squadctl run task_N [--session S]` on root `r`, its answer checked
    /// against the oracle's.
    pub(super) fn run_by_hand(&mut self, r: usize, session: Option<usize>, task: u8) {
        let session = session.map(|s| SESSIONS[s].to_string());
        let task = format!("task_{task}");
        let want = self.expect_run(r, session.as_deref(), &task);
        self.reply = None;
        // As the control socket hands it over (`processes.rs`).
        let asked = crate::daemon::core::runs::Asked {
            action: "run".into(),
            session,
            task: Some(task),
            text: None,
        };
        self.step(id(r), Input::RunsAsked(asked));
        let got = self.reply.take().map(|reply| answer_of(&reply));
        assert_eq!(got, Some(want), "root {r}: squadctl run");
    }

    /// `squadctl stop task_N [--session S]` on root `r`.
    pub(super) fn stop_by_hand(&mut self, r: usize, session: Option<usize>, task: u8) {
        let session = session.map(|s| SESSIONS[s].to_string());
        let task = format!("task_{task}");
        let live: Vec<String> = self.snaps[r]
            .records
            .iter()
            .filter(|((s, t), rec)| {
                *t == task && session.as_ref().is_none_or(|n| n == s) && in_progress(rec)
            })
            .map(|((s, _), _)| s.clone())
            .collect();
        self.reply = None;
        let asked = crate::daemon::core::runs::Asked {
            action: "stop".into(),
            session,
            task: Some(task),
            text: None,
        };
        self.step(id(r), Input::RunsAsked(asked));
        let got = self.reply.take().map(|reply| answer_of(&reply));
        match got {
            Some(Answer::Ok(s)) => {
                assert!(live.contains(&s), "root {r}: stopped {s}, live {live:?}")
            }
            got => assert!(
                live.is_empty() && got == Some(Answer::NotRunning),
                "root {r}: stop answered {got:?}, live {live:?}"
            ),
        }
    }

    /// The oracle's answer to `squadctl run`, from the snapshot alone.
    fn expect_run(&self, r: usize, session: Option<&str>, task: &str) -> Answer {
        let snap = &self.snaps[r];
        let want = Known::from_scratch(snap, self.now);
        let found: Vec<(&String, &crate::derive::SessionView)> = want
            .sessions
            .iter()
            .filter(|(n, _)| session.is_none_or(|s| s == n.as_str()))
            .filter(|(_, s)| s.view.tasks.iter().any(|t| t.task_id == task))
            .map(|(n, s)| (n, &s.view))
            .collect();
        let (name, view) = match found.as_slice() {
            [] => return Answer::NotPlanned,
            [one] => *one,
            _ => return Answer::Ambiguous,
        };
        let Some(t) = view.tasks.iter().find(|t| t.task_id == task) else {
            return Answer::NotPlanned;
        };
        if matches!(view.status, SessionState::Completed | SessionState::Failed) {
            return Answer::Ended;
        }
        if t.state == TaskStatus::Completed {
            return Answer::Completed;
        }
        if !t.unmet.is_empty() {
            return Answer::Waiting;
        }
        let live: Vec<_> = snap
            .records
            .iter()
            .filter(|(_, rec)| in_progress(rec))
            .collect();
        if live.iter().any(|((s, k), _)| s == name && k == task) {
            return Answer::TaskRunning;
        }
        if live.iter().any(|(_, rec)| rec.agent == t.agent) {
            return Answer::AgentBusy;
        }
        let max = usize::try_from(snap.config.sessions.max_concurrent).unwrap_or(usize::MAX);
        if live.len() >= max {
            return Answer::PoolFull;
        }
        if self.broken.contains(&id(r)) {
            return Answer::Start;
        }
        Answer::Ok(name.clone())
    }
}

/// Whether a record is of a run in progress: running, or stopped by hand
/// and not ended yet (stopping: it keeps its place in the pool).
pub(super) fn in_progress(rec: &crate::runners::RunRecord) -> bool {
    rec.state == RunState::Running || (rec.state == RunState::Stopped && rec.exit.is_none())
}
