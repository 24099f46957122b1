//! What each timer does when it fires: one match over every kind of
//! [`Timer`], returning the effects. Timers that only start a piece of work
//! the shell does (a re-read, a write) name it; those with a decision
//! (a held-back status, a wrap-up, reply deadlines, the look for a missing
//! root) decide here.

use super::{Effect, Now, Root, replies};
use crate::daemon::roots::RootId;
use crate::daemon::timers::Timer;
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::collections::BTreeSet;
use std::time::Duration;

/// The first look for a missing root comes after this; the wait doubles
/// up to [`ROOT_CHECK_MAX`] while it stays missing.
pub const ROOT_CHECK_FIRST: Duration = Duration::from_millis(500);
/// The longest wait between looks for a missing root.
pub const ROOT_CHECK_MAX: Duration = Duration::from_secs(10);

/// The effects of one due timer. `root`: the core of the timer's root (for
/// a timer of a root); `changed`: the sessions the same batch changed (a
/// held-back status write of one is already done).
pub fn fire(
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
        Timer::Retention(id) => vec![Effect::RunRetention(id)],
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
        Timer::MemoryInbox(id) => vec![Effect::MergeMemoryInbox(id)],
        Timer::RootCheck(id) => vec![Effect::CheckRoot(id)],
        Timer::Rewatch => vec![Effect::Rewatch],
        Timer::Trim => vec![Effect::TrimMemory],
        Timer::Watchdog => vec![Effect::Watchdog],
    }
}

/// The shell looked for a root's `.squad/sessions` (`present`): a root
/// that came back is rescanned, one still there has its control checked,
/// one still missing is looked for again later, less and less often.
pub fn root_check(root: &mut Root, id: RootId, present: bool) -> Vec<Effect> {
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
