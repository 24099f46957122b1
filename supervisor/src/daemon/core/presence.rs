//! A root's presence decided: what follows when watches the kernel refused
//! came back (the root is rescanned: what changed meanwhile was never
//! reported), when a directory could not be watched (said, retried), and
//! when another squadd took the root over (squadd forgets
//! its sessions and says so). The shell holds the watches, the pid lock
//! and the socket (`daemon/presence.rs`); the look for a missing root is
//! [`super::timer::root_check`].

use super::timer::Timer;
use super::{Effect, Root, RootId};
use crate::events::EventKind;
use std::path::PathBuf;
use std::time::Duration;

/// A directory of the root could not be watched: said (a `watch-error`
/// event) and, when the shell keeps it for another try (`rewatch_after`:
/// its back-off), the retry armed, never later than one already armed.
pub(crate) fn watch_failed(
    id: RootId,
    path: PathBuf,
    error: String,
    rewatch_after: Option<Duration>,
) -> Vec<Effect> {
    let mut effects = vec![Effect::Emit {
        root: id,
        session: None,
        path: Some(path),
        kind: EventKind::WatchError { error },
    }];
    if let Some(after) = rewatch_after {
        effects.push(Effect::SetTimerEarlier {
            timer: Timer::Rewatch,
            after,
        });
    }
    effects
}

/// `dirs` directories of the root are watched again: said, and the root
/// rescanned at once.
pub(crate) fn rewatched(id: RootId, dirs: usize) -> Vec<Effect> {
    vec![
        Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::WatchRestored { dirs },
        },
        Effect::SetTimer {
            timer: Timer::Rescan(id),
            after: Duration::ZERO,
        },
    ]
}

/// Another squadd (`pid`) holds the root now: it is no longer supervised,
/// everything known of its sessions is forgotten (memory and state stay
/// bounded), and that is said. The shell has already given up the pid
/// lock, socket, watches and timers.
pub(crate) fn taken_over(root: &mut Root, id: RootId, pid: String) -> Vec<Effect> {
    root.taken_over = Some(pid.clone());
    let names: Vec<String> = root.sessions.keys().cloned().collect();
    for name in names {
        root.remove_session(&name);
    }
    vec![Effect::Emit {
        root: id,
        session: None,
        path: None,
        kind: EventKind::RootTakenOver { pid },
    }]
}
