//! One changed path decided (`Input::PathChanged`): what it is
//! ([`classify`], pure) and what it calls for (a
//! file read, a session directory looked at, an inbox entry looked at, a
//! config or policy re-read, a timer for a burst to end); the watcher's own
//! failures (`Input::WatcherFailed`, `Input::EventsLost`): the roots
//! rescanned. The shell reads and stats (`daemon/apply.rs`).

use super::files::FileRef;
use super::timer::Timer;
use super::{Effect, Root, RootId};
use crate::events::EventKind;
use squad_protocol::FileKind;
use squad_protocol::atomic::is_temp_name;
use squad_protocol::config::CONFIG_FILE;
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR};
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
    if is_config(&root.root, path) {
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
        PathChange::PresenceDir => vec![Effect::Watch {
            root: id,
            dir: path.to_path_buf(),
        }],
        PathChange::Presence(agent) => vec![Effect::LookAtPresence {
            root: id,
            agent,
            path: path.to_path_buf(),
        }],
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

/// Whether `path` is the config.json of the root at `root`.
pub(crate) fn is_config(root: &Path, path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == CONFIG_FILE)
        && path.parent().and_then(Path::file_name).is_some_and(|n| {
            n == squad_protocol::tree::SQUAD_DIR || n == squad_protocol::teamdir::LEGACY_TEAM_DIR
        })
        && path.parent().and_then(Path::parent) == Some(root)
}

/// What a changed path under a root means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathChange {
    /// `.squad/policies.yaml`.
    Policy,
    /// The root, `.squad` or `.squad/sessions` itself: rescan.
    Rescan,
    /// squadd's control socket or pid file (`.squad/run/squadd.{sock,pid}`)
    /// changed: check that they are still ours.
    Control,
    /// A session directory appeared or vanished.
    SessionDir(String),
    /// A session's `locks/` directory appeared.
    LocksDir(String),
    /// A lock record changed.
    LockRecord(String),
    /// A skill directory or SKILL.md changed (docs/skills.md).
    Skills,
    /// An entry of an agent's unread inbox (`inbox/<agent>/new/<file>`)
    /// appeared or went (delivered, acknowledged).
    Inbox {
        /// Session directory name.
        session: String,
        /// The agent.
        agent: String,
        /// Inbox file name.
        file: String,
    },
    /// A file of `.squad/decisions/inbox/` changed (docs/memory.md).
    MemoryInbox,
    /// `.squad/run/presence/` appeared: watched.
    PresenceDir,
    /// An agent's presence record changed (`squadctl presence`).
    Presence(String),
    /// A protocol file of a session changed.
    SessionFile {
        /// Session directory name.
        session: String,
        /// File name.
        file: String,
        /// Its kind.
        kind: FileKind,
    },
}

/// Whether a change of `path`, under the root at `root`, can mean anything
/// to squadd: the config, or what [`classify`] names. The watcher thread
/// drops the notifications of the others before they wake the daemon
/// (squadd's own audit log and session locks change with every change:
/// each was a turn of the loop, and a bare write one more after
/// [`crate::daemon::intake`]'s settle delay, that [`changed`] then ignored).
pub(crate) fn follows(root: &Path, sessions_dir: &Path, path: &Path) -> bool {
    is_config(root, path) || classify(root, sessions_dir, path).is_some()
}

/// Classifies a changed path of the root (pure). `None`: nothing squadd
/// follows (temporary files, dot directories, other files).
pub(crate) fn classify(root: &Path, sessions_dir: &Path, path: &Path) -> Option<PathChange> {
    // Nearly every notification is under the sessions directory, and none
    // of the paths below it is the policy, a skill, a team file, the
    // memory inbox or the run directory: classified without building
    // those paths (the watcher thread asks this of every notification).
    if let Ok(rel) = path.strip_prefix(sessions_dir) {
        return classify_in_sessions(rel);
    }
    if path == root.join(SQUAD_DIR).join("policies.yaml") {
        return Some(PathChange::Policy);
    }
    if crate::skills::is_skill_path(root, path) {
        return Some(PathChange::Skills);
    }
    // Team files (docs/team.md) are re-checked with the skills, per burst.
    if crate::team::is_team_path(root, path) {
        return Some(PathChange::Skills);
    }
    if let Ok(rel) = path.strip_prefix(root.join(SQUAD_DIR).join("decisions").join("inbox")) {
        let name = rel.to_string_lossy();
        return (!is_temp_name(&name) && !name.contains('/')).then_some(PathChange::MemoryInbox);
    }
    if let Ok(rel) = path.strip_prefix(root.join(SQUAD_DIR).join(RUN_DIR)) {
        let name = rel.to_string_lossy();
        if name == "presence" {
            return Some(PathChange::PresenceDir);
        }
        if let Some(file) = name.strip_prefix("presence/") {
            let agent = file.strip_suffix(".json")?;
            return (!is_temp_name(file) && squad_protocol::IdKind::Agent.matches(agent))
                .then(|| PathChange::Presence(agent.to_string()));
        }
        return (name == "squadd.sock" || name == "squadd.pid").then_some(PathChange::Control);
    }
    // The root, .squad or .squad/sessions itself changed.
    sessions_dir.starts_with(path).then_some(PathChange::Rescan)
}

/// [`classify`] of a path below the sessions directory (`rel`: the path
/// relative to it).
fn classify_in_sessions(rel: &Path) -> Option<PathChange> {
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [] => Some(PathChange::Rescan),
        // Only directories named like sessions are sessions: a copy being
        // prepared (`20240116T000001Z.tmp`) is never indexed nor written into.
        [name, ..] if !squad_protocol::ids::is_session_dir_name(name) => None,
        [name] => Some(PathChange::SessionDir(name.clone())),
        [name, locks] if locks == crate::locks::LOCKS_DIR => {
            Some(PathChange::LocksDir(name.clone()))
        }
        [name, locks, _] if locks == crate::locks::LOCKS_DIR => {
            Some(PathChange::LockRecord(name.clone()))
        }
        [name, inbox, agent, new, file] if inbox == "inbox" && new == "new" => {
            Some(PathChange::Inbox {
                session: name.clone(),
                agent: agent.clone(),
                file: file.clone(),
            })
        }
        [name, file] => {
            if is_temp_name(file) {
                return None;
            }
            let kind = FileKind::from_file_name(file)?;
            Some(PathChange::SessionFile {
                session: name.clone(),
                file: file.clone(),
                kind,
            })
        }
        _ => None,
    }
}
