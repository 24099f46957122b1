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

/// A control check's step as the shell saw it ([`super::Input::Control`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlInput {
    /// The check is due (a root check found the root, a listing begins).
    Due,
    /// What the shell sees of the root's control now.
    Seen {
        /// Whether `.squad/sessions` is a directory.
        sessions_dir: bool,
        /// Whether `.squad/` is a directory (without sessions: another
        /// tool's, which took the place of the one it moved away).
        squad_dir: bool,
        /// Whether the pid lock squadd holds is the one at the root's
        /// `.squad/run/squadd.pid`.
        pid_lock: bool,
        /// Whether the socket squadd listens on is the one at the root's
        /// path.
        socket: bool,
        /// Whether this check already tried to take the pid lock.
        tried: bool,
    },
}

/// What a control check does next ([`Effect::Control`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlNext {
    /// Bring back the root's own entries an interrupted import left
    /// aside, then say what is seen.
    Recover,
    /// Recreate `.squad/run`, take the pid lock again, say how it went
    /// ([`super::Input::PidLockTried`]), then what is seen.
    TakePidLock,
    /// Bind the control socket again (the old listener first); the
    /// check's last step.
    BindSocket,
    /// Nothing (more) to do: squadd supervises the root.
    Supervised,
    /// The root is another squadd's: not supervised, not checked.
    GivenUp,
}

/// A control check, one step at a time: a root taken over is not
/// checked; a root whose `.squad/sessions` is missing waits for the root
/// check; the pid lock is taken again once per check (not taken: the
/// socket waits for the next check); the socket is bound only once the
/// pid lock is ours.
pub(crate) fn control(root: &Root, id: RootId, input: ControlInput) -> Vec<Effect> {
    let next = match input {
        _ if root.taken_over.is_some() => ControlNext::GivenUp,
        ControlInput::Due => ControlNext::Recover,
        // Nothing there: left to the root check. A `.squad/` without
        // sessions (another tool's import moved ours away) gets squadd's
        // control, so that `health` and `status` answer and say why.
        ControlInput::Seen {
            sessions_dir: false,
            squad_dir: false,
            ..
        } => ControlNext::Supervised,
        ControlInput::Seen {
            pid_lock: false,
            tried: false,
            ..
        } => ControlNext::TakePidLock,
        ControlInput::Seen {
            pid_lock: false, ..
        } => ControlNext::Supervised,
        ControlInput::Seen { socket: false, .. } => ControlNext::BindSocket,
        ControlInput::Seen { .. } => ControlNext::Supervised,
    };
    vec![Effect::Control { root: id, next }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::core::tests::{id, now, root};
    use crate::daemon::core::{Core, Input};

    fn seen(sessions_dir: bool, pid_lock: bool, socket: bool, tried: bool) -> ControlInput {
        ControlInput::Seen {
            sessions_dir,
            squad_dir: sessions_dir,
            pid_lock,
            socket,
            tried,
        }
    }

    fn next(r: &mut Root, input: ControlInput) -> ControlNext {
        let effects = Core::new(id(0), r).step(Input::Control(input), now(0));
        match effects.as_slice() {
            [Effect::Control { root, next }] if *root == id(0) => *next,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_control_check_recovers_then_takes_the_pid_lock_once_then_binds_the_socket_last() {
        let mut r = root();
        assert_eq!(next(&mut r, ControlInput::Due), ControlNext::Recover);
        // Missing: left to the root check, nothing taken or bound.
        for (p, s, t) in [
            (false, false, false),
            (true, false, true),
            (false, true, false),
        ] {
            assert_eq!(next(&mut r, seen(false, p, s, t)), ControlNext::Supervised);
        }
        // The pid lock first, whatever the socket; once per check.
        assert_eq!(
            next(&mut r, seen(true, false, false, false)),
            ControlNext::TakePidLock
        );
        assert_eq!(
            next(&mut r, seen(true, false, true, false)),
            ControlNext::TakePidLock
        );
        // Not taken: the socket waits for the next check.
        assert_eq!(
            next(&mut r, seen(true, false, false, true)),
            ControlNext::Supervised
        );
        // Ours: the socket bound again if it is not in place.
        assert_eq!(
            next(&mut r, seen(true, true, false, true)),
            ControlNext::BindSocket
        );
        assert_eq!(
            next(&mut r, seen(true, true, false, false)),
            ControlNext::BindSocket
        );
        assert_eq!(
            next(&mut r, seen(true, true, true, false)),
            ControlNext::Supervised
        );
    }

    #[test]
    fn a_squad_dir_another_tool_put_in_place_gets_the_pid_lock_and_the_socket() {
        // Issue 41.6: `squad import --force` moved `.squad/` (sessions,
        // run/) away and made a new one: health stopped answering.
        let mut r = root();
        let other = |pid_lock, socket, tried| ControlInput::Seen {
            sessions_dir: false,
            squad_dir: true,
            pid_lock,
            socket,
            tried,
        };
        assert_eq!(
            next(&mut r, other(false, false, false)),
            ControlNext::TakePidLock
        );
        assert_eq!(
            next(&mut r, other(true, false, true)),
            ControlNext::BindSocket
        );
        assert_eq!(
            next(&mut r, other(true, true, true)),
            ControlNext::Supervised
        );
    }

    #[test]
    fn a_root_taken_over_is_never_checked_again() {
        let mut r = root();
        r.taken_over = Some("4242".into());
        assert_eq!(next(&mut r, ControlInput::Due), ControlNext::GivenUp);
        assert_eq!(
            next(&mut r, seen(true, false, false, false)),
            ControlNext::GivenUp
        );
        assert_eq!(
            next(&mut r, seen(true, true, false, true)),
            ControlNext::GivenUp
        );
    }
}
