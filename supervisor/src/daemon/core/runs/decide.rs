//! The decisions of run supervision, free of I/O: from a run's record, what
//! was seen of its process and the time (`now`), what to do. No file,
//! process or clock is touched here; the core turns them into effects (`core/runs.rs`)
//! (signals through [`crate::runners::Processes`], records, events, word to
//! the lead).

use crate::events::EventKind;
use crate::runners::{Ended, Exit, RunRecord, RunState, Signal};
use chrono::{DateTime, Utc};
use squad_policies::runners::{AfterExit, RunnersPolicy};
use std::time::Duration;

/// What supervision remembers of a live run beside its record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Watch {
    /// When SIGTERM was sent (time limit or `squadctl stop`).
    pub(crate) term_at: Option<DateTime<Utc>>,
    /// Whether SIGKILL was sent.
    pub(crate) killed: bool,
    /// Whether `agent-idle` was reported.
    pub(crate) idle_reported: bool,
    /// When the leader was seen ended: from then on the run is stopping
    /// until nothing of it is left.
    pub(crate) stopping_since: Option<DateTime<Utc>>,
}

/// How long past the grace squadd keeps ending what is left of a run
/// before it records the run ended anyway (a process it may not signal,
/// one stuck in the kernel): the pool must not stay blocked for ever.
pub(crate) const LINGER: Duration = Duration::from_secs(5);

/// The signal for what is left of a run whose leader ended: SIGTERM, then
/// SIGKILL once the grace has passed (at once when the run was killed
/// already at its time limit).
pub(crate) fn leftover_signal(
    watch: &mut Watch,
    policy: &RunnersPolicy,
    now: DateTime<Utc>,
) -> Signal {
    let since = *watch.stopping_since.get_or_insert(now);
    if watch.killed || add(since, policy.grace).is_some_and(|at| now >= at) {
        Signal::Kill
    } else {
        Signal::Term
    }
}

/// Whether a stopping run has ended: nothing of it left and its output
/// drained, or the grace and [`LINGER`] passed.
pub(crate) fn gone(
    watch: &Watch,
    policy: &RunnersPolicy,
    left: usize,
    drained: bool,
    now: DateTime<Utc>,
) -> bool {
    let given_up = watch
        .stopping_since
        .and_then(|since| add(since, policy.grace))
        .and_then(|at| add(at, LINGER))
        .is_some_and(|at| now >= at);
    (left == 0 && drained) || given_up
}

/// One thing to do for a live run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Signal the run's process group.
    Signal(Signal),
    /// Emit an event about the run.
    Event(EventKind),
}

/// `a + d`, or `None` past the calendar's end: no clock addition in run
/// supervision may panic, whatever a policy or config.json says.
pub(crate) fn add(a: DateTime<Utc>, d: Duration) -> Option<DateTime<Utc>> {
    a.checked_add_signed(chrono::Duration::from_std(d).ok()?)
}

/// When a run started at `started` with time limit `limit` must stop: the
/// calendar's end when the sum overflows (never, in practice).
pub(crate) fn deadline(started: DateTime<Utc>, limit: Duration) -> DateTime<Utc> {
    add(started, limit).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// One look at a run whose process is still alive: SIGTERM at the deadline
/// (`agent-timeout`), SIGKILL once `grace` has passed since the SIGTERM,
/// `agent-idle` once when no protocol file naming the agent was written for
/// `idle_after` (`last_write` is asked only then: it reads the session).
pub(crate) fn look(
    rec: &RunRecord,
    watch: &mut Watch,
    policy: &RunnersPolicy,
    last_write: impl FnOnce() -> Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<Step> {
    let mut steps = Vec::new();
    match watch.term_at {
        None if now >= rec.deadline => {
            watch.term_at = Some(now);
            steps.push(Step::Signal(Signal::Term));
            let limit = (rec.deadline - rec.started_at).num_seconds();
            steps.push(Step::Event(EventKind::AgentTimeout {
                task_id: rec.task.clone(),
                agent: rec.agent.clone(),
                limit_secs: u64::try_from(limit).unwrap_or(0),
            }));
        }
        Some(term) if !watch.killed && add(term, policy.grace).is_some_and(|at| now >= at) => {
            watch.killed = true;
            steps.push(Step::Signal(Signal::Kill));
        }
        _ => {}
    }
    if let Some(limit) = policy.idle_after
        && !watch.idle_reported
    {
        let last = last_write().map_or(rec.started_at, |w| w.max(rec.started_at));
        let idle = (now - last).to_std().unwrap_or_default();
        if idle >= limit {
            watch.idle_reported = true;
            steps.push(Step::Event(EventKind::AgentIdle {
                task_id: rec.task.clone(),
                agent: rec.agent.clone(),
                idle_secs: idle.as_secs(),
            }));
        }
    }
    steps
}

/// What follows the end of a run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exited {
    /// The record to keep (state, exit, retry or hold).
    pub(crate) rec: RunRecord,
    /// `agent-exited`.
    pub(crate) event: EventKind,
    /// Word to the lead, when the run ended without completing and nobody
    /// stopped it by hand (the shell appends the tail of run.log).
    pub(crate) tell_lead: Option<String>,
}

/// A run ended: its new record, the event, and word to the lead. A stopped
/// run is held for a human; otherwise the policy decides (done, a retry
/// after the backoff, or held once the retries are used up).
pub(crate) fn exited(
    mut rec: RunRecord,
    watch: &Watch,
    policy: &RunnersPolicy,
    completed: bool,
    ended: Ended,
    now: DateTime<Utc>,
) -> Exited {
    let decision = squad_policies::runners::after_exit(
        policy.runner_for(&rec.agent),
        policy,
        rec.attempt,
        completed,
        now,
    );
    rec.exit = Some(Exit {
        at: now,
        code: ended.code,
        signal: ended.signal,
    });
    rec.completed = completed;
    if rec.state == RunState::Running {
        rec.state = if rec.over_budget.is_some() {
            RunState::OverBudget
        } else if watch.term_at.is_some() {
            RunState::TimedOut
        } else {
            RunState::Exited
        };
    }
    let next = match (&decision, rec.state) {
        (AfterExit::Done, _) => "done".to_string(),
        // Over budget: spending more is a human's call.
        (_, RunState::OverBudget) => {
            rec.held = true;
            "over budget; held for a human (`squadctl run`)".to_string()
        }
        // Stopped by hand: a human decides what comes next.
        (_, RunState::Stopped) => {
            rec.held = true;
            "stopped; held for a human (`squadctl run`)".to_string()
        }
        (AfterExit::Retry { at, attempt }, _) => {
            rec.retry_at = Some(*at);
            format!("run {attempt} at {}", at.to_rfc3339())
        }
        (AfterExit::GiveUp, _) => {
            rec.held = true;
            "retries used up; held for a human (`squadctl run`)".to_string()
        }
    };
    let tell_lead = (!completed && rec.state != RunState::Stopped).then(|| {
        let how = match (rec.state, ended.code, ended.signal) {
            (RunState::TimedOut, ..) => "was stopped at its time limit".to_string(),
            (RunState::OverBudget, ..) => format!(
                "was stopped over its budget ({})",
                rec.over_budget.as_deref().unwrap_or_default()
            ),
            (_, Some(c), _) => format!("exited with code {c}"),
            (_, None, Some(s)) => format!("was killed by signal {s}"),
            _ => "ended".to_string(),
        };
        format!(
            "Run {} of {} by {} {how} without reporting `completed`. Next: {next}.",
            rec.attempt, rec.task, rec.agent
        )
    });
    let event = EventKind::AgentExited {
        task_id: rec.task.clone(),
        agent: rec.agent.clone(),
        code: ended.code,
        signal: ended.signal,
        completed,
        next,
        usage: rec.usage.clone().map(Box::new),
    };
    Exited {
        rec,
        event,
        tell_lead,
    }
}

/// What a restarted squadd found of a run recorded as running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Its process, alive and recognised (pid, start time, environment).
    Alive,
    /// It had a process (a pid was recorded) that is gone now.
    Gone,
    /// No pid was recorded and no process of the run exists: squadd died
    /// between the record and the spawn, so nothing was started (or what
    /// started ended before its pid could be recorded).
    NeverStarted,
}

/// What to do with a run recorded as running, after a restart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Restart {
    /// Supervised again as before.
    Adopt(RunRecord),
    /// Lost: recorded; word to the lead unless the task completed; held
    /// (squadd never starts a second run of a task it cannot prove ended).
    Lost {
        /// The record to keep.
        rec: RunRecord,
        /// Word to the lead.
        tell_lead: Option<String>,
    },
    /// Never started: recorded as lost but not held, due now and with its
    /// run number given back, so dispatch starts the same run again.
    Redispatch(RunRecord),
}

/// A run recorded as `running` met by a restarted squadd.
pub(crate) fn restarted(
    mut rec: RunRecord,
    found: Found,
    completed: bool,
    now: DateTime<Utc>,
) -> Restart {
    if found == Found::Alive {
        return Restart::Adopt(rec);
    }
    rec.state = RunState::Lost;
    rec.exit = Some(Exit {
        at: now,
        code: None,
        signal: None,
    });
    rec.completed = completed;
    if found == Found::NeverStarted && !completed {
        rec.held = false;
        rec.retry_at = Some(now);
        rec.attempt = rec.attempt.saturating_sub(1);
        return Restart::Redispatch(rec);
    }
    rec.held = true;
    let tell_lead = (!completed).then(|| {
        format!(
            "Run lost: {} of {} (pid {}) was running when squadd stopped and is gone now. It is not restarted automatically; `squadctl run {}` starts it again.",
            rec.task, rec.agent, rec.pid, rec.task
        )
    });
    Restart::Lost { rec, tell_lead }
}
