//! Decisions the shell made until issue 22's last review, now the core's:
//! which status files are re-read under the locks taken for their write,
//! when the decisions inbox is merged and tried again, which team memory
//! upkeep follows a retention run, what is owed when squadd stops, and the
//! order in which a batch's due timers are taken in. The shell takes the
//! locks, merges, writes and reports; it decides none of it.

use super::outputs::StatusLock;
use super::timer::Timer;
use super::{Effect, Input, Now, Root, RootId, next_run};
use crate::events::EventKind;
use std::time::Duration;

/// How soon squadd tries an inbox merge again while a `squadctl memory`
/// command holds the team's memory lock (squadd never waits on it).
pub(crate) const MEMORY_LOCK_RETRY: Duration = Duration::from_millis(500);

/// One step of the inputs decided here (the rest are
/// [`super::Core::step`]'s own arms).
pub(crate) fn step(root: &mut Root, id: RootId, input: Input<'_>, now: Now) -> Vec<Effect> {
    match input {
        Input::StatusLocksTaken { sessions } => status_locks_taken(id, sessions),
        Input::MemoryInboxMerged(merged) => memory_inbox_merged(id, merged),
        Input::Shutdown {
            reason,
            armed,
            socket_ours,
        } => shutdown(id, reason, &armed, socket_ours),
        Input::RootOpened(read) => opened(root, id, read, now),
        Input::HookDone {
            session,
            to,
            message_id,
            error,
        } => hook_done(id, session, to, message_id, error),
        // Decided in `Core::step` itself.
        _ => Vec::new(),
    }
}

/// What taking one session's lock for a status write gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockTaken {
    /// Session directory name.
    pub session: String,
    /// The lock.
    pub lock: StatusLock,
    /// Held by the caller already (a session edit, which re-read the file
    /// itself under it).
    pub callers: bool,
}

/// The sessions' locks were taken: the status file of each session whose
/// lock squadd took itself is re-read under it (a busy lock protects
/// nothing, and the caller of an edit read its own), then the files are
/// looked at for their write ([`Effect::LookAtStatuses`]).
pub(crate) fn status_locks_taken(id: RootId, taken: Vec<LockTaken>) -> Vec<Effect> {
    let mut effects: Vec<Effect> = taken
        .iter()
        .filter(|t| !t.callers && t.lock != StatusLock::Busy)
        .map(|t| Effect::RereadStatus {
            root: id,
            session: t.session.clone(),
        })
        .collect();
    let sessions = taken.into_iter().map(|t| (t.session, t.lock)).collect();
    effects.push(Effect::LookAtStatuses { root: id, sessions });
    effects
}

/// How a merge of the decisions inbox went ([`Effect::MergeMemoryInbox`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoryMerge {
    /// Merged, nothing to merge, no team, or failed (logged by the shell).
    Done,
    /// A `squadctl memory` command holds the team's memory lock.
    LockBusy,
}

/// The decisions inbox's timer fired: merged if the policy in force still
/// merges (it may have changed since the timer was armed).
pub(crate) fn memory_inbox_due(root: &Root, id: RootId) -> Vec<Effect> {
    if root.policy.memory.merge {
        vec![Effect::MergeMemoryInbox(id)]
    } else {
        Vec::new()
    }
}

/// A merge of the decisions inbox went as `merged`: a busy memory lock
/// has it tried again shortly.
pub(crate) fn memory_inbox_merged(id: RootId, merged: MemoryMerge) -> Vec<Effect> {
    match merged {
        MemoryMerge::Done => Vec::new(),
        MemoryMerge::LockBusy => vec![Effect::SetTimer {
            timer: Timer::MemoryInbox(id),
            after: MEMORY_LOCK_RETRY,
        }],
    }
}

/// The team memory upkeep a retention run that took the gc lock is
/// followed by: the parts the policy enables, or nothing.
pub(crate) fn memory_upkeep(root: &Root, id: RootId) -> Option<Effect> {
    let memory = root.policy.memory;
    (memory.merge || memory.archive.is_some()).then_some(Effect::MemoryUpkeep { root: id, memory })
}

/// squadd stops: the writes its armed timers coalesce are owed and made
/// now (the shared context before the state, as the timers would), the
/// stop is said, and the control socket removed if it is this squadd's.
pub(crate) fn shutdown(
    id: RootId,
    reason: String,
    armed: &[Timer],
    socket_ours: bool,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    if armed.contains(&Timer::Context(id)) {
        effects.push(Effect::WriteSharedContextNow(id));
    }
    if armed.contains(&Timer::SaveState(id)) {
        effects.push(Effect::SaveState(id));
    }
    effects.push(Effect::Emit {
        root: id,
        session: None,
        path: None,
        kind: EventKind::Stopping { reason },
    });
    if socket_ours {
        effects.push(Effect::RemoveSocket(id));
    }
    effects
}

/// A batch's due timers in the order they are taken in: roots to rescan
/// first (before the batch's settled paths), then the tasks whose deadline
/// passed (by session), then the timers fired after the batch's writes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DueTimers {
    /// Roots re-read from scratch, before the settled paths.
    pub rescans: Vec<RootId>,
    /// Tasks re-derived without a file change, by (root, session), after
    /// the paths and before the batch's writes.
    pub tasks: Vec<(RootId, String, Vec<String>)>,
    /// Every due timer, fired after the batch's writes in the order due
    /// (earliest first; [`super::timer::fire`]).
    pub fire: Vec<Timer>,
    /// Whether any of them is work a STATUS= line would count (not the
    /// line itself, the watchdog, a trim or the runs' check).
    pub worked: bool,
}

/// Orders a batch's due timers (`due`: as the queue gave them, earliest
/// first).
pub(crate) fn due_timers(due: Vec<Timer>) -> DueTimers {
    let mut order = DueTimers::default();
    let mut tasks: std::collections::BTreeMap<(RootId, String), Vec<String>> = Default::default();
    for t in &due {
        match t {
            Timer::Rescan(i) => order.rescans.push(*i),
            Timer::TaskDue {
                root,
                session,
                task,
            } => tasks
                .entry((*root, session.clone()))
                .or_default()
                .push(task.clone()),
            _ => {}
        }
        order.worked |= !matches!(
            t,
            Timer::StatusLine | Timer::Watchdog | Timer::Trim | Timer::Runs
        );
    }
    order.tasks = tasks.into_iter().map(|((r, s), t)| (r, s, t)).collect();
    order.fire = due;
    order
}

/// A batch of at least this many paths is a burst, after which freed
/// memory is returned to the OS ([`super::scan::TRIM_DELAY`] after the
/// last such batch).
pub(crate) const TRIM_AFTER_PATHS: usize = 64;

/// How long the STATUS= summary may lag the changes it counts.
pub(crate) const STATUS_LINE_DELAY: Duration = Duration::from_secs(1);

/// What a batch of `paths` settled paths and due timers that `worked`
/// arms: the trim after a burst (moved on while the burst lasts), and the
/// STATUS= line when a service manager listens (it walks every session:
/// at most once a second after changes).
pub(crate) fn batch_timers(paths: usize, worked: bool, status_listened: bool) -> Vec<Effect> {
    let mut effects = Vec::new();
    if paths >= TRIM_AFTER_PATHS {
        effects.push(Effect::SetTimer {
            timer: Timer::Trim,
            after: super::scan::TRIM_DELAY,
        });
    }
    if status_listened && (worked || paths > 0) {
        effects.push(Effect::SetTimerEarlier {
            timer: Timer::StatusLine,
            after: STATUS_LINE_DELAY,
        });
    }
    effects
}

/// A root was opened at start-up with its policy as read: a valid one is
/// in force; a refused one never stops squadd (under systemd that is a
/// restart loop): it runs on the defaults, says so naming the field, and
/// holds retention, since the defaults' could delete what the refused
/// policy kept. With `cluster:`, nothing supervisor-owned is written
/// before the lease is this host's ([`super::outputs::leadership`]). The
/// lock table is looked at at once.
pub(crate) fn opened(
    root: &mut Root,
    id: RootId,
    read: Result<Box<squad_policies::Policy>, crate::locks::PolicyLoadError>,
    now: Now,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    match read {
        Ok(policy) => {
            root.policy = *policy;
            root.policy_refused = None;
            root.next_gc = next_run(&root.policy, now.wall);
        }
        Err(error) => {
            let error = format!(
                "{error}; running on the default policy, retention held until the policy is valid"
            );
            root.policy = squad_policies::Policy::defaults();
            root.policy_refused = Some(error.clone());
            root.next_gc = None;
            effects.push(Effect::Emit {
                root: id,
                session: None,
                path: Some(
                    root.root
                        .join(squad_protocol::tree::SQUAD_DIR)
                        .join("policies.yaml"),
                ),
                kind: EventKind::PolicyRefused { error },
            });
        }
    }
    root.leads = root.policy.cluster.is_none();
    if let Some(at) = root.next_gc {
        effects.push(Effect::SetTimerAt {
            timer: Timer::Retention(id),
            at,
        });
    }
    effects.push(Effect::SetTimer {
        timer: Timer::Locks(id),
        after: Duration::ZERO,
    });
    effects
}

/// A notify command finished: a failure (after its retries) is said; a
/// success says nothing (the hook journal has it).
pub(crate) fn hook_done(
    id: RootId,
    session: String,
    to: String,
    message_id: String,
    error: Option<String>,
) -> Vec<Effect> {
    error
        .map(|error| Effect::Emit {
            root: id,
            session: Some(session),
            path: None,
            kind: EventKind::NotifyFailed {
                to,
                message_id,
                error,
            },
        })
        .into_iter()
        .collect()
}
