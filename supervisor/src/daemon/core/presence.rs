//! A root's presence decided: what follows when watches the kernel refused
//! came back (the root is rescanned: what changed meanwhile was never
//! reported), when a directory could not be watched (said, retried), and
//! when the pid lock or control socket of a recreated `.squad/` was taken
//! again (said; a pid lock another squadd holds gives the root up), when
//! the skills were read again, and when another squadd took the root over (squadd forgets
//! its sessions and says so). The shell holds the watches, the pid lock
//! and the socket (`daemon/presence.rs`); the look for a missing root is
//! [`super::timer::root_check`].

use super::timer::Timer;
use super::{Effect, Root, RootId};
use crate::events::EventKind;
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR};
use std::path::PathBuf;
use std::time::Duration;

/// How taking the root's pid lock again went (`.squad/` was recreated
/// without it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PidLock {
    /// Ours again (the shell holds it and reopened the audit log).
    Taken,
    /// Another squadd holds it (its pid): it took the root over.
    Held(String),
    /// It could not be taken (logged): tried again at the next check.
    Failed,
}

/// The pid lock of a recreated `.squad/` was tried: taken again (said),
/// held by another squadd (the root is given up: the shell lets go of
/// what it holds, then [`taken_over`]), or not taken (nothing; the next
/// check tries again).
pub(crate) fn pid_lock(id: RootId, outcome: PidLock) -> Vec<Effect> {
    match outcome {
        PidLock::Taken => vec![Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::ControlRestored {
                reason: "pid lock taken again: .squad/ was recreated".into(),
            },
        }],
        PidLock::Held(pid) => vec![Effect::GiveUpRoot { root: id, pid }],
        PidLock::Failed => Vec::new(),
    }
}

/// The control socket (`socket`) was bound again (its file was removed or
/// replaced): `.squad/run` watched again (a removal of the new socket is
/// seen), then said.
pub(crate) fn socket_bound(root: &Root, id: RootId, socket: PathBuf) -> Vec<Effect> {
    vec![
        Effect::Watch {
            root: id,
            dir: root.root.join(SQUAD_DIR).join(RUN_DIR),
        },
        Effect::Emit {
            root: id,
            session: None,
            path: Some(socket),
            kind: EventKind::ControlRestored {
                reason: "control socket bound again".into(),
            },
        },
    ]
}

/// The root's skills and team were read again: what `status` reports.
pub(crate) fn skills_read(
    root: &mut Root,
    skills: crate::skills::SkillsHealth,
    team: crate::team::TeamHealth,
) -> Vec<Effect> {
    root.skills = skills;
    root.team = team;
    Vec::new()
}

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
