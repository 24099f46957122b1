//! Which session a command means: the one resolver behind every agent-facing
//! command (`task new`, `progress`, `report-error`, `send`, `next`, `task …`).
//!
//! `--session` (or `SQUAD_SESSION`) names it; otherwise it is the one active
//! session that defines the task or agent the command is about. Several
//! candidates are an error that lists them, never a guess.

use crate::index::{SessionIndex, scan_session};
use squad_protocol::model::SessionState;
use squad_protocol::tree::session_dirs;
use std::path::Path;

/// What the wanted session must define.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Defines<'a> {
    /// A plan for this task id.
    Task(&'a str),
    /// A plan assigned to this agent; when no active session has one, the only
    /// active session (an agent's first task is planned into it).
    Agent(&'a str),
    /// Nothing: the only active session.
    Any,
}

fn defines(index: &SessionIndex, what: Defines<'_>) -> bool {
    match what {
        Defines::Task(t) => index.plans().any(|p| p.task_id == t),
        Defines::Agent(a) => index.plans().any(|p| p.agent == a),
        Defines::Any => true,
    }
}

/// The session directory `named` (loaded), or the one active session that
/// defines `what`.
pub(crate) fn resolve(
    root: &Path,
    named: Option<&str>,
    what: Defines<'_>,
) -> Result<SessionIndex, String> {
    if let Some(name) = named {
        let dir = crate::root::named_session(root, name)?;
        return scan_session(&dir).map_err(|e| format!("{}: {e}", dir.display()));
    }
    let mut active = Vec::new();
    for dir in session_dirs(root).map_err(|e| e.to_string())? {
        // Ended sessions are no candidates; one whose status file is
        // missing or unreadable counts as active, as squadd derives it.
        if super::message::session_state(&dir).is_some_and(|s| s != SessionState::Active) {
            continue;
        }
        // A session removed while we look is simply not a candidate.
        if let Ok(index) = scan_session(&dir) {
            active.push(index);
        }
    }
    let total_active = active.len();
    let mut found: Vec<SessionIndex> = Vec::new();
    let mut rest = Vec::new();
    for s in active {
        if defines(&s, what) {
            found.push(s);
        } else {
            rest.push(s);
        }
    }
    if found.is_empty() && matches!(what, Defines::Agent(_)) && rest.len() == 1 {
        found = std::mem::take(&mut rest);
    }
    if found.is_empty()
        && let Defines::Task(t) = what
        && let Some((dir, state)) = ended_home(root, t)
    {
        return Err(format!(
            "task `{}` belongs to session `{}`, which is {state}",
            crate::text::escape(t),
            crate::text::escape(&dir)
        ));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(match what {
            Defines::Task(t) => format!(
                "no active session plans task `{}` ({total_active} active); check the id or pass --session",
                crate::text::escape(t)
            ),
            _ if total_active == 0 => {
                "no active session; create one with `squadctl session new` or pass --session"
                    .to_string()
            }
            _ => format!(
                "{total_active} active sessions and none plans work for this agent; pass --session (one of: {})",
                names(&rest)
            ),
        }),
        n => Err(format!(
            "{n} active sessions match; pass --session (one of: {})",
            names(&found)
        )),
    }
}

/// The latest session (by directory name, which starts with its start
/// time) that has ended, with its state: what `task list` shows when no
/// session is active.
pub(crate) fn latest_ended(root: &Path) -> Option<(SessionIndex, SessionState)> {
    session_dirs(root).ok()?.into_iter().rev().find_map(|dir| {
        let state = super::message::session_state(&dir)?;
        if state == SessionState::Active {
            return None;
        }
        Some((scan_session(&dir).ok()?, state))
    })
}

/// The ended session that plans `task`, loaded, with its state (`task
/// show` reads it).
pub(crate) fn ended_session_of(root: &Path, task: &str) -> Option<(SessionIndex, SessionState)> {
    let (name, state) = ended_home(root, task)?;
    let dir = crate::root::named_session(root, &name).ok()?;
    Some((scan_session(&dir).ok()?, state))
}

/// An ended session that plans `task` (to say so rather than "unknown").
fn ended_home(root: &Path, task: &str) -> Option<(String, SessionState)> {
    session_dirs(root).ok()?.into_iter().find_map(|dir| {
        let state = super::message::session_state(&dir)?;
        if state == SessionState::Active {
            return None;
        }
        let index = scan_session(&dir).ok()?;
        defines(&index, Defines::Task(task)).then(|| (index.name.clone(), state))
    })
}

fn names(sessions: &[SessionIndex]) -> String {
    sessions
        .iter()
        .map(|s| crate::text::escape(&s.name).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
