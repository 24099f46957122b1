//! One changed path decided (`Input::PathChanged`): what it is
//! ([`crate::daemon::intake::classify`], pure) and what it calls for (a
//! file read, a session directory looked at, an inbox entry looked at, a
//! config or policy re-read, a timer for a burst to end); the watcher's own
//! failures (`Input::WatcherFailed`, `Input::EventsLost`): the roots
//! rescanned. The shell reads and stats (`daemon/apply.rs`).

use super::files::FileRef;
use super::timer::Timer;
use super::{Effect, Root, RootId};
use crate::daemon::intake::{PathChange, classify};
use crate::events::EventKind;
use std::path::Path;
use std::time::Duration;

/// How long skill checks wait for a burst of skill changes (a checkout, an
/// upgrade) to end: skills are re-read once per burst.
pub(crate) const SKILLS_DELAY: Duration = Duration::from_millis(50);

/// Quiet period before squadd merges a changed decisions inbox: a burst of
/// inbox writes is merged once, and a file still being written (by an agent
/// that does not use `squadctl memory add`) is given time to be complete.
pub(crate) const MEMORY_INBOX_DELAY: Duration = Duration::from_millis(500);

/// How long after a change to the control socket or pid file squadd checks
/// them (a `.squad/` being deleted is gone by then).
pub(crate) const CONTROL_DELAY: Duration = Duration::from_millis(250);

/// A path of the root changed (a watcher event, settled).
pub(crate) fn changed(root: &Root, id: RootId, path: &Path) -> Vec<Effect> {
    if crate::daemon::runs::is_config(&root.root, path) {
        return vec![Effect::ReloadConfig(id)];
    }
    let Some(change) = classify(&root.root, &root.sessions_dir, path) else {
        return Vec::new();
    };
    let now = |timer| Effect::SetTimer {
        timer,
        after: Duration::ZERO,
    };
    match change {
        PathChange::Policy => vec![Effect::ReloadPolicy(id)],
        PathChange::Rescan => vec![now(Timer::Rescan(id))],
        // Checked a moment later: a `.squad/` being deleted is gone by
        // then, and nothing is recreated inside it.
        PathChange::Control => vec![Effect::SetTimerEarlier {
            timer: Timer::RootCheck(id),
            after: CONTROL_DELAY,
        }],
        PathChange::Skills => vec![Effect::SetTimerEarlier {
            timer: Timer::Skills(id),
            after: SKILLS_DELAY,
        }],
        // Each change restarts the quiet period.
        PathChange::MemoryInbox if root.policy.memory.merge => vec![Effect::SetTimer {
            timer: Timer::MemoryInbox(id),
            after: MEMORY_INBOX_DELAY,
        }],
        PathChange::MemoryInbox => Vec::new(),
        PathChange::SessionDir(session) => vec![Effect::LookAtSessionDir { root: id, session }],
        PathChange::LocksDir(session) => vec![
            Effect::WatchLocks { root: id, session },
            now(Timer::Locks(id)),
        ],
        PathChange::LockRecord(_) => vec![now(Timer::Locks(id))],
        PathChange::Inbox {
            session,
            agent,
            file,
        } => vec![Effect::LookAtInboxEntry {
            root: id,
            session,
            agent,
            file,
            path: path.to_path_buf(),
        }],
        // An event for a session not seen yet: the session is scanned.
        PathChange::SessionFile { session, .. } if !root.sessions.contains_key(&session) => {
            vec![Effect::LookAtSessionDir { root: id, session }]
        }
        PathChange::SessionFile {
            session,
            file,
            kind,
        } => vec![Effect::ApplyFile {
            root: id,
            file: FileRef {
                session,
                file,
                path: path.to_path_buf(),
            },
            kind,
        }],
    }
}

/// The watcher failed (`error`): said, and the root rescanned (what
/// changed meanwhile was never reported).
pub(crate) fn watcher_failed(id: RootId, error: String) -> Vec<Effect> {
    vec![
        Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::WatchError { error },
        },
        Effect::SetTimer {
            timer: Timer::Rescan(id),
            after: Duration::ZERO,
        },
    ]
}

/// Events of the root were lost (the kernel's queue overflowed): the root
/// is rescanned.
pub(crate) fn events_lost(id: RootId) -> Vec<Effect> {
    vec![Effect::SetTimer {
        timer: Timer::Rescan(id),
        after: Duration::ZERO,
    }]
}
