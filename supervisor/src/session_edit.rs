//! Explicit edits of session-status.md (`squadctl session complete|fail|
//! phase|gate`), and the per-session lock that keeps them from racing
//! squadd's own rewrites of the file.
//!
//! squadd applies an edit itself when it runs (over its socket, see
//! [`crate::control::Method::SessionEdit`]), so the file has one writer.
//! When it does not run, squadctl edits the file under
//! `.squad/run/session-<dir>.lock`; squadd takes the same lock around every
//! status write and re-reads the file under it, so an edit made while squadd
//! starts (before its socket answers) is never overwritten by a render from
//! an older text.

use crate::safefs::Dir;
use serde::Serialize;
use squad_policies::session_edit::{FieldSet, SessionEdit, plan};
use squad_protocol::FileKind;
use squad_protocol::model::{Document, SessionStatus};
use std::fs::File;
use std::io;
use std::path::Path;

/// The lock file of session `name`, relative to `.squad/run`.
pub(crate) fn lock_name(name: &str) -> String {
    format!("session-{name}.lock")
}

/// Takes session `name`'s lock (`.squad/run/session-<name>.lock`, created
/// when missing, never through a link). With `wait`, blocks until it is
/// free; otherwise `Ok(None)` when someone else holds it. The lock is held
/// until the returned file is dropped.
pub(crate) fn lock_session(root: &Path, name: &str, wait: bool) -> io::Result<Option<File>> {
    let run = Dir::open_root(crate::root::fs_path(root))?.walk(
        &Path::new(squad_protocol::tree::SQUAD_DIR).join(squad_protocol::tree::RUN_DIR),
        None,
    )?;
    let lock = lock_name(name);
    loop {
        let file = run.open_file(&lock, libc::O_RDWR | libc::O_CREAT, 0o600)?;
        if wait {
            file.lock()?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(e)) => return Err(e),
            }
        }
        // gc removed the file while we waited for it (see `remove_lock`):
        // a lock on an unlinked file excludes nobody; take the new one.
        if still_linked(&run, &lock, &file)? {
            return Ok(Some(file));
        }
    }
}

/// Whether `file` is still the file linked as `name` in `dir`.
fn still_linked(dir: &Dir, name: &str, file: &File) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let held = file.metadata()?;
    match dir.stat(name) {
        Ok(st) => Ok(st.st_dev == held.dev() && st.st_ino == held.ino()),
        Err(e) if crate::safefs::is_missing(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes session `name`'s lock file from the run directory `run` unless
/// someone holds it: it is taken without waiting, and unlinked while held
/// (and only if it is still the file of that name). Whoever opened it
/// before finds it unlinked once they get it, and takes a new one
/// ([`lock_session`]). Returns whether it was removed.
pub(crate) fn remove_lock(run: &Dir, name: &str) -> io::Result<bool> {
    let lock = lock_name(name);
    let file = match run.open_file(&lock, libc::O_RDWR, 0) {
        Ok(f) => f,
        Err(e) if crate::safefs::is_missing(&e) => return Ok(false),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    if !still_linked(run, &lock, &file)? {
        return Ok(false);
    }
    match run.unlink(&lock) {
        Ok(()) => Ok(true),
        Err(e) if crate::safefs::is_missing(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the lock files in `run` of sessions that `sessions` (the
/// sessions directory; `None`: there is none) no longer holds: archived,
/// deleted, renamed or removed by hand. Held ones stay. Returns the
/// sessions whose lock file went.
pub(crate) fn sweep_locks(run: &Dir, sessions: Option<&Dir>) -> Vec<String> {
    let mut removed = Vec::new();
    for file in run.names().unwrap_or_default() {
        let Some(name) = file
            .strip_prefix("session-")
            .and_then(|n| n.strip_suffix(".lock"))
        else {
            continue;
        };
        if !squad_protocol::ids::is_session_dir_name(name)
            || sessions.is_some_and(|s| s.contains(name))
        {
            continue;
        }
        match remove_lock(run, name) {
            Ok(true) => removed.push(name.to_string()),
            Ok(false) => {}
            Err(e) => tracing::debug!(session = name, error = %e, "cannot remove the session lock"),
        }
    }
    removed
}

/// Why an edit was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EditError {
    /// A rule refused it (exit 1): `complete` of a failed session.
    #[error("{0}")]
    Refused(String),
    /// It could not be made (exit 2): unreadable or invalid file.
    #[error("{0}")]
    Failed(String),
}

/// What an applied edit left in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct EditOutcome {
    /// The session directory name.
    pub session: String,
    /// What was done (`completed`, `phase design`, …).
    pub said: String,
    /// Whether the file changed (completing twice changes nothing).
    pub changed: bool,
    /// `squadd` (applied over its socket) or `file` (squadd not running).
    pub via: String,
    /// The session status as recorded.
    pub status: String,
    /// The phase, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The validation gates as recorded.
    #[serde(default)]
    pub validation_gates: serde_json::Value,
    /// When it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    /// When it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// With `cluster:`, the host whose squadd (the leader) applied an edit
    /// made on a follower (docs/cluster.md, "Session edits on a follower").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The epoch that leader led with when it applied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

fn parse(path: &Path, text: &str) -> Option<SessionStatus> {
    match squad_protocol::check_text(path, FileKind::SessionStatus, text).document {
        Some(Document::SessionStatus(s)) => Some(s),
        _ => None,
    }
}

/// Applies `edit` to the status file text `text` (of `path`) at `now`:
/// the new text, validated, or why not. Fields the edit does not set, the
/// encoding and the markdown around the YAML are kept.
pub(crate) fn apply(
    path: &Path,
    text: &str,
    edit: &SessionEdit,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, EditError> {
    let now = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let current = parse(path, text);
    let fields = plan(current.as_ref(), edit, &now).map_err(|e| {
        EditError::Refused(format!("{}: {e}", crate::text::escape(&dir_name(path))))
    })?;
    let mut new = Some(text.to_string());
    for f in fields {
        new = new.and_then(|t| match f {
            FieldSet::Top(k, v) => crate::outputs::set_status_fields(&t, &[(k, v)]),
            FieldSet::Gate(g, v) => {
                crate::outputs::set_status_nested(&t, "validation_gates", g, &v)
            }
        });
    }
    let new = new.ok_or_else(|| {
        EditError::Failed(format!(
            "{}: its YAML is not a mapping; fix it first (squadctl validate)",
            path.display()
        ))
    })?;
    let report = squad_protocol::check_text(path, FileKind::SessionStatus, &new);
    if let Some(d) = report.diagnostics.iter().find(|d| d.is_error()) {
        return Err(EditError::Failed(format!("refused, nothing written: {d}")));
    }
    Ok(new)
}

fn dir_name(status_path: &Path) -> String {
    status_path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Describes the file `text` after `edit` (for `--json` and the human line).
pub(crate) fn outcome(
    path: &Path,
    text: &str,
    edit: &SessionEdit,
    changed: bool,
    via: &str,
) -> EditOutcome {
    let s = parse(path, text);
    let ts = |t: Option<squad_protocol::model::Timestamp>| {
        t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    };
    EditOutcome {
        session: dir_name(path),
        said: edit.said(),
        changed,
        via: via.into(),
        status: s
            .as_ref()
            .map_or_else(|| "unknown".into(), |s| s.status.to_string()),
        phase: s.as_ref().and_then(|s| s.phase).map(|p| p.to_string()),
        validation_gates: s
            .as_ref()
            .and_then(|s| s.validation_gates.as_ref())
            .and_then(|g| serde_json::to_value(g).ok())
            .unwrap_or(serde_json::Value::Null),
        completed_at: ts(s.as_ref().and_then(|s| s.completed_at)),
        failed_at: ts(s.as_ref().and_then(|s| s.failed_at)),
        failure_reason: s.and_then(|s| s.failure_reason),
        host: None,
        epoch: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "# Session Status\nsession_id: sess_x\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\nphase: requirements\n";

    #[test]
    fn edits_keep_other_fields_and_completing_twice_keeps_the_first_time() {
        let path = Path::new("/p/.squad/sessions/20240115T100000Z/session-status.md");
        let t1 = chrono::DateTime::parse_from_rfc3339("2024-01-15T11:00:00Z")
            .unwrap()
            .to_utc();
        let done = apply(path, STATUS, &SessionEdit::Complete { force: false }, t1).unwrap();
        let again = apply(
            path,
            &done,
            &SessionEdit::Complete { force: false },
            t1 + chrono::Duration::hours(1),
        )
        .unwrap();
        assert_eq!(done, again);
        let o = outcome(
            path,
            &again,
            &SessionEdit::Complete { force: false },
            false,
            "file",
        );
        assert_eq!(o.status, "completed");
        assert_eq!(o.completed_at.as_deref(), Some("2024-01-15T11:00:00Z"));
        assert_eq!(o.phase.as_deref(), Some("requirements"));
        assert_eq!(o.session, "20240115T100000Z");
        let failed = apply(
            path,
            STATUS,
            &SessionEdit::Fail {
                reason: "down".into(),
            },
            t1,
        )
        .unwrap();
        let refused = apply(path, &failed, &SessionEdit::Complete { force: false }, t1);
        assert!(matches!(refused, Err(EditError::Refused(_))), "{refused:?}");
        assert!(
            apply(
                path,
                "- a list\n",
                &SessionEdit::Complete { force: true },
                t1
            )
            .is_err()
        );
    }

    #[test]
    fn the_lock_is_exclusive_and_never_follows_a_link() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join(".squad/run");
        std::fs::create_dir_all(&run).unwrap();
        let held = lock_session(root.path(), "s1", true).unwrap().unwrap();
        assert!(lock_session(root.path(), "s1", false).unwrap().is_none());
        assert!(lock_session(root.path(), "s2", false).unwrap().is_some());
        drop(held);
        assert!(lock_session(root.path(), "s1", false).unwrap().is_some());
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), run.join(lock_name("s3"))).unwrap();
        assert!(lock_session(root.path(), "s3", true).is_err());
        assert!(!outside.path().join("x").exists());
    }

    fn run_dir(root: &Path) -> Dir {
        Dir::open_root(root)
            .unwrap()
            .walk(Path::new(".squad/run"), Some(0o700))
            .unwrap()
    }

    #[test]
    fn a_lock_file_is_removed_only_while_nobody_holds_it() {
        let root = tempfile::tempdir().unwrap();
        let run = run_dir(root.path());
        let path = root.path().join(".squad/run").join(lock_name("s1"));
        assert!(!remove_lock(&run, "s1").unwrap(), "no file: nothing to do");
        let held = lock_session(root.path(), "s1", false).unwrap().unwrap();
        assert!(!remove_lock(&run, "s1").unwrap());
        assert!(path.exists());
        drop(held);
        assert!(remove_lock(&run, "s1").unwrap());
        assert!(!path.exists());
        // Taken again, it is created again.
        assert!(lock_session(root.path(), "s1", false).unwrap().is_some());
        assert!(path.exists());
    }

    /// One waiting for the lock while the remover held it and unlinked the
    /// file: a lock on the unlinked file would exclude nobody (the next
    /// taker creates a new file), so the waiter takes the new one.
    #[test]
    fn a_waiter_on_a_removed_lock_file_takes_the_new_one() {
        let root = tempfile::tempdir().unwrap();
        run_dir(root.path());
        let path = root.path().join(".squad/run").join(lock_name("s1"));
        let remover = lock_session(root.path(), "s1", false).unwrap().unwrap();
        let r = root.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let f = lock_session(&r, "s1", true).unwrap().unwrap();
            // Held while the main thread tries.
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(f);
        });
        // The waiter has opened the file and waits on it.
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::remove_file(&path).unwrap();
        drop(remover);
        std::thread::sleep(std::time::Duration::from_millis(50));
        // The waiter holds the file now linked at the path: it excludes.
        assert!(path.exists());
        assert!(lock_session(root.path(), "s1", false).unwrap().is_none());
        waiter.join().unwrap();
    }

    #[test]
    fn the_sweep_removes_free_locks_of_sessions_that_are_gone() {
        let root = tempfile::tempdir().unwrap();
        let sessions = root.path().join(".squad/sessions");
        std::fs::create_dir_all(sessions.join("20240115T100000Z-here")).unwrap();
        let run = run_dir(root.path());
        for s in [
            "20240115T100000Z-here",
            "20240115T100000Z-gone",
            "20240115T100000Z-held",
        ] {
            drop(lock_session(root.path(), s, false).unwrap().unwrap());
        }
        let _held = lock_session(root.path(), "20240115T100000Z-held", false).unwrap();
        std::fs::write(root.path().join(".squad/run/session-notes.lock"), "").unwrap();
        let dir = Dir::open_root(&sessions).unwrap();
        assert_eq!(sweep_locks(&run, Some(&dir)), ["20240115T100000Z-gone"]);
        let mut left = run.names().unwrap();
        left.sort();
        assert_eq!(
            left,
            [
                "session-20240115T100000Z-held.lock",
                "session-20240115T100000Z-here.lock",
                "session-notes.lock"
            ]
        );
    }
}
