//! Every kind of [`Timer`] (the core's vocabulary; the shell's queue in
//! `timers.rs` holds them), and what each does when it fires: one match,
//! returning the effects. Timers that only start a piece of work
//! the shell does (a re-read, a write) name it; those with a decision
//! (a held-back status, a wrap-up, reply deadlines, the look for a missing
//! root) decide here.

use super::RootId;
use super::{Effect, Now, Root, replies};
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::collections::BTreeSet;
use std::time::Duration;

/// Something that happens at a time. A timer is identified by its value:
/// setting it again moves it, so each one exists at most once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// Re-read a root from scratch (watch overflow, `.squad/` replaced).
    Rescan(RootId),
    /// Write a session's status file that was held back because the session
    /// was only losing files (it may be being deleted).
    Status {
        /// Root index.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Wrap up a session that ended while it was only losing files (it may
    /// be being deleted: nothing is written into it before this).
    WrapUp {
        /// Root index.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// A task of a session reaches its deadline (`meta.timeout`).
    TaskDue {
        /// Root index.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Task id.
        task: String,
    },
    /// A deferred (low-priority) delivery becomes due.
    Delivery {
        /// Root index.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Recipient.
        to: String,
        /// Inbox file name.
        name: String,
    },
    /// The earliest unread message of a session reaches its escalation
    /// time. One per session, whatever the number of unread messages: the
    /// session's [`Mailbox`](super::routing::Mailbox) holds the queue, and
    /// the timer is armed again at its next deadline after firing.
    Escalation {
        /// Root index.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// The earliest `response_by` of a session's messages passes. One per
    /// session, like [`Timer::Escalation`]: the queue is in the session's
    /// [`Mailbox`](super::routing::Mailbox).
    ReplyDue {
        /// Root index.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Write the root's persisted state (written behind, coalesced).
    SaveState(RootId),
    /// Render the shared context of a root (coalesces bursts).
    Context(RootId),
    /// Re-read the lock table (a change was seen, a lock expires, or the
    /// table was busy).
    Locks(RootId),
    /// The retention schedule.
    Retention(RootId),
    /// Re-check a root's skills (coalesces a burst of skill file changes).
    Skills(RootId),
    /// Merge a root's decisions inbox after its files went quiet
    /// (docs/memory.md; only when the policy enables `memory.merge`).
    MemoryInbox(RootId),
    /// Look again for a root whose `.squad/sessions` is missing (a root
    /// deleted and recreated is a new directory no watch covers). Only
    /// while it is missing, with backoff.
    RootCheck(RootId),
    /// Retry the directories that could not be watched (inotify limit),
    /// with backoff.
    Rewatch,
    /// Give memory freed after a burst back to the OS.
    Trim,
    /// The systemd watchdog ping.
    Watchdog,
    /// Check the agent runs (exits, time limits, idleness) and dispatch
    /// (docs/runners.md): often while runs are live, else at the next retry.
    Runs,
    /// Recompute the one-line STATUS= summary (it walks every session, so
    /// at most once per second after changes).
    StatusLine,
    /// Tell the leads of agents' waits held back by the limit of one
    /// message per agent a minute (`waiting.rs`).
    WaitsHeld(RootId),
}

impl Timer {
    /// The root the timer belongs to, if any.
    pub(crate) fn root(&self) -> Option<RootId> {
        match self {
            Timer::Rescan(r)
            | Timer::SaveState(r)
            | Timer::Context(r)
            | Timer::Locks(r)
            | Timer::Retention(r)
            | Timer::Skills(r)
            | Timer::MemoryInbox(r)
            | Timer::RootCheck(r)
            | Timer::WaitsHeld(r) => Some(*r),
            Timer::Status { root, .. }
            | Timer::WrapUp { root, .. }
            | Timer::TaskDue { root, .. }
            | Timer::Delivery { root, .. }
            | Timer::Escalation { root, .. }
            | Timer::ReplyDue { root, .. } => Some(*root),
            Timer::Watchdog | Timer::StatusLine | Timer::Rewatch | Timer::Trim | Timer::Runs => {
                None
            }
        }
    }

    /// The session the timer belongs to, if any.
    pub(crate) fn session(&self) -> Option<&str> {
        match self {
            Timer::Status { session, .. }
            | Timer::WrapUp { session, .. }
            | Timer::TaskDue { session, .. }
            | Timer::Delivery { session, .. }
            | Timer::Escalation { session, .. }
            | Timer::ReplyDue { session, .. } => Some(session),
            _ => None,
        }
    }
}

/// The first look for a missing root comes after this; the wait doubles
/// up to [`ROOT_CHECK_MAX`] while it stays missing.
pub(crate) const ROOT_CHECK_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between looks for a missing root.
pub(crate) const ROOT_CHECK_MAX: Duration = Duration::from_secs(10);

/// The effects of one due timer. `root`: the core of the timer's root (for
/// a timer of a root); `changed`: the sessions the same batch changed (a
/// held-back status write of one is already done).
pub(crate) fn fire(
    timer: Timer,
    root: Option<&mut Root>,
    changed: &BTreeSet<(RootId, String)>,
    now: Now,
) -> Vec<Effect> {
    match timer {
        // Taken by the batch itself (re-reads and re-derivations), and the
        // runs' own check at every batch's end.
        Timer::Rescan(_) | Timer::TaskDue { .. } | Timer::Runs => Vec::new(),
        Timer::Status { root: id, session } => {
            if changed.contains(&(id, session.clone())) {
                return Vec::new();
            }
            let mut effects = vec![Effect::CancelTimer(Timer::Status {
                root: id,
                session: session.clone(),
            })];
            // Rewritten, never recreated here: a session whose status file
            // went with its other files may be being deleted.
            let has_status = root.is_some_and(|r| {
                r.sessions
                    .get(&session)
                    .is_some_and(|s| s.index().files.contains_key(SESSION_STATUS_FILE))
            });
            if has_status {
                effects.push(Effect::WriteStatuses {
                    root: id,
                    sessions: vec![session.clone()],
                });
            }
            effects.push(Effect::RecheckWaitingIfPresent { root: id, session });
            effects
        }
        Timer::WrapUp { root: id, session } => {
            let ended = root.and_then(|r| r.sessions.get(&session).and_then(|s| s.ended()));
            match ended {
                Some(status) => vec![Effect::WrapUpIfPresent {
                    root: id,
                    session,
                    status: status.to_string(),
                }],
                None => Vec::new(),
            }
        }
        Timer::Context(id) => vec![Effect::WriteSharedContext(id)],
        Timer::SaveState(id) => vec![Effect::SaveState(id)],
        Timer::Locks(id) => vec![Effect::RefreshLocks(id)],
        Timer::Retention(id) => match root {
            Some(r) => super::outputs::retention_due(r, id, now),
            None => Vec::new(),
        },
        Timer::Skills(id) => vec![Effect::RefreshSkills(id)],
        Timer::Delivery {
            root,
            session,
            to,
            name,
        } => vec![Effect::OfferWaiting {
            root,
            session,
            to,
            name,
        }],
        Timer::Escalation { root, session } => vec![Effect::RunEscalations { root, session }],
        Timer::ReplyDue { root: id, session } => match root {
            Some(r) => replies::due(r, id, &session, now),
            None => Vec::new(),
        },
        Timer::StatusLine => vec![Effect::StatusLine],
        Timer::MemoryInbox(id) => match root {
            Some(r) => super::upkeep::memory_inbox_due(r, id),
            None => Vec::new(),
        },
        Timer::RootCheck(id) => vec![Effect::CheckRoot(id)],
        Timer::WaitsHeld(id) => match root {
            Some(r) => super::waiting::held_due(r, id, now.wall),
            None => Vec::new(),
        },
        Timer::Rewatch => vec![Effect::Rewatch],
        Timer::Trim => vec![Effect::TrimMemory],
        Timer::Watchdog => vec![Effect::Watchdog],
    }
}

/// The shell looked for a root's `.squad/sessions` (`present`): a root
/// that came back is rescanned, one still there has its control checked,
/// one still missing is looked for again later, less and less often.
pub(crate) fn root_check(root: &mut Root, id: RootId, present: bool) -> Vec<Effect> {
    if root.taken_over.is_some() {
        Vec::new()
    } else if present {
        if root.missing {
            vec![Effect::SetTimer {
                timer: Timer::Rescan(id),
                after: Duration::ZERO,
            }]
        } else {
            vec![Effect::CheckControl(id)]
        }
    } else if root.missing {
        root.check_after = (root.check_after * 2).min(ROOT_CHECK_MAX);
        vec![Effect::SetTimer {
            timer: Timer::RootCheck(id),
            after: root.check_after,
        }]
    } else {
        Vec::new()
    }
}
