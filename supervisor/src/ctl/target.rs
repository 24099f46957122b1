//! Which session a command means: the one resolver behind every agent-facing
//! command (`task new`, `progress`, `report-error`, `send`, `next`, `task …`).
//!
//! `--session` (or `SQUAD_SESSION`) names it; otherwise it is the one active
//! session that defines the task or agent the command is about. Several
//! candidates are an error that lists them, never a guess.
//!
//! Its work does not grow with the messages a session holds (issue 43
//! item 1): a session plans a task or an agent only if a task assignment's
//! *name* says so (a valid assignment's name is built from its content), so
//! only sessions with such a name are read, and what is read of the session
//! taken is its [work](load_work): status, task assignments, progress
//! updates and error reports, never a message or a notice.

use crate::index::{SessionIndex, load_session};
use squad_protocol::FileKind;
use squad_protocol::model::SessionState;
use squad_protocol::tree::session_dirs;
use std::path::{Path, PathBuf};

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

/// The protocol files of a session other than its messages (notices are
/// messages too), by name: one directory listing, no file opened.
pub(crate) fn work_files(dir: &Path) -> std::io::Result<Vec<(PathBuf, FileKind)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        match FileKind::from_file_name(name) {
            Some(FileKind::Message) | None => {}
            Some(kind) => files.push((dir.join(name), kind)),
        }
    }
    files.sort();
    Ok(files)
}

/// A session's work as the agent commands see it: its status file, task
/// assignments, progress updates and error reports, and the session rules
/// among them. What a command writes (a plan, a progress update, an error
/// report) is checked against these alone: no session rule relates such a
/// file to a message.
pub(crate) fn load_work(dir: &Path) -> std::io::Result<SessionIndex> {
    load_session(dir, work_files(dir)?)
}

/// The (agent, task id) a task assignment's file name names:
/// `role-plan-<agent>-<task_id>.md`; agent names hold no `_`, so the first
/// `-task_` ends the agent.
fn plan_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_prefix("role-plan-")?.strip_suffix(".md")?;
    let (agent, _) = stem.split_once("-task_")?;
    Some((agent, &stem[agent.len() + 1..]))
}

/// Whether a task assignment of `files` may define `what`, by its name:
/// false means no valid assignment does.
fn may_define(files: &[(PathBuf, FileKind)], what: Defines<'_>) -> bool {
    let named = |keep: &dyn Fn(&str, &str) -> bool| {
        files.iter().any(|(path, kind)| {
            *kind == FileKind::TaskAssignment
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(plan_name)
                    .is_some_and(|(agent, task)| keep(agent, task))
        })
    };
    match what {
        Defines::Task(t) => named(&|_, task| task == t),
        Defines::Agent(a) => named(&|agent, _| agent == a),
        Defines::Any => true,
    }
}

/// An active session considered: its listing, and its work once read.
struct Candidate {
    dir: PathBuf,
    files: Vec<(PathBuf, FileKind)>,
    index: Option<SessionIndex>,
}

impl Candidate {
    fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Whether the session defines `what`, reading its work only when a
    /// task assignment's name says it may. `None`: it vanished meanwhile.
    fn defines(&mut self, what: Defines<'_>) -> Option<bool> {
        if !may_define(&self.files, what) {
            return Some(false);
        }
        if matches!(what, Defines::Any) {
            return Some(true);
        }
        let index = load_session(&self.dir, std::mem::take(&mut self.files)).ok()?;
        Some(defines(self.index.insert(index), what))
    }

    /// Its work, loaded now if `defines` did not need to.
    fn load(self) -> std::io::Result<SessionIndex> {
        match self.index {
            Some(index) => Ok(index),
            None => load_session(&self.dir, self.files),
        }
    }
}

/// The session directory `named` (its work loaded), or the one active
/// session that defines `what`.
pub(crate) fn resolve(
    root: &Path,
    named: Option<&str>,
    what: Defines<'_>,
) -> Result<SessionIndex, String> {
    if let Some(name) = named {
        let dir = crate::root::named_session(root, name)?;
        return load_work(&dir).map_err(|e| format!("{}: {e}", dir.display()));
    }
    let mut found: Vec<Candidate> = Vec::new();
    let mut rest: Vec<Candidate> = Vec::new();
    for dir in session_dirs(root).map_err(|e| e.to_string())? {
        // Ended sessions are no candidates; one whose status file is
        // missing or unreadable counts as active, as squadd derives it.
        if super::message::session_state(&dir).is_some_and(|s| s != SessionState::Active) {
            continue;
        }
        // A session removed while we look is simply not a candidate.
        let Ok(files) = work_files(&dir) else {
            continue;
        };
        let mut c = Candidate {
            dir,
            files,
            index: None,
        };
        match c.defines(what) {
            Some(true) => found.push(c),
            Some(false) => rest.push(c),
            None => {}
        }
    }
    let total_active = found.len() + rest.len();
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
        1 => {
            let c = found.remove(0);
            let dir = c.dir.display().to_string();
            c.load().map_err(|e| format!("{dir}: {e}"))
        }
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
        Some((crate::index::scan_session(&dir).ok()?, state))
    })
}

/// The ended session that plans `task`, loaded, with its state (`task
/// show` reads it).
pub(crate) fn ended_session_of(root: &Path, task: &str) -> Option<(SessionIndex, SessionState)> {
    let (name, state) = ended_home(root, task)?;
    let dir = crate::root::named_session(root, &name).ok()?;
    Some((crate::index::scan_session(&dir).ok()?, state))
}

/// The directory of the session [`resolve`] would take, when it is found
/// without listing the session (`send` without `--task`): a named session,
/// or for an agent the only active session (taken whatever its plans say).
/// `None`: [`resolve`] decides (and names any error).
pub(crate) fn quick_dir(root: &Path, named: Option<&str>, what: Defines<'_>) -> Option<PathBuf> {
    if let Some(name) = named {
        return crate::root::named_session(root, name).ok();
    }
    if matches!(what, Defines::Agent(_)) {
        let mut active = session_dirs(root).ok()?;
        active.retain(|dir| {
            super::message::session_state(dir).is_none_or(|s| s == SessionState::Active)
        });
        if let [only] = active.as_slice() {
            return Some(only.clone());
        }
    }
    None
}

/// An ended session that plans `task` (to say so rather than "unknown").
fn ended_home(root: &Path, task: &str) -> Option<(String, SessionState)> {
    session_dirs(root).ok()?.into_iter().find_map(|dir| {
        let state = super::message::session_state(&dir)?;
        if state == SessionState::Active {
            return None;
        }
        let mut c = Candidate {
            files: work_files(&dir).ok()?,
            dir,
            index: None,
        };
        c.defines(Defines::Task(task))?.then(|| (c.name(), state))
    })
}

fn names(sessions: &[Candidate]) -> String {
    sessions
        .iter()
        .map(|s| crate::text::escape(&s.name()).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_name_says_its_agent_and_task() {
        assert_eq!(
            plan_name("role-plan-backend-dev-task_001.md"),
            Some(("backend-dev", "task_001"))
        );
        assert_eq!(
            plan_name("role-plan-a-task_x-task_y.md"),
            Some(("a", "task_x-task_y"))
        );
        assert_eq!(plan_name("role-plan-a.md"), None);
        assert_eq!(plan_name("role-comm-a-task_1.md"), None);
    }
}
