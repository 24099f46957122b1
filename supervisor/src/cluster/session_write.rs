//! Where a replicated version may be written: never into a session
//! directory this checkout had removed (docs/cluster.md, "Retention across
//! hosts"). A version can reach a host after the session's removal: a
//! late arrival, or a supervisor output held until the lease named its
//! publisher ([`super::accept`]) while the leader's removal record was
//! applied. Writing it would make the session directory again, and squadd
//! would find the archived session alive (it logged `session-ended` a
//! second after `session-archived`).

use squad_protocol::tree::{ARCHIVES_DIR, SQUAD_DIR, sessions_dir};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

/// Sessions removed by the cluster's retention, per root: the replication
/// task writes no arrival into a session named here that this checkout no
/// longer has (a late version must not bring it back). Shared between the
/// two tasks of a root, which start apart.
static RETIRED: LazyLock<Mutex<BTreeMap<PathBuf, BTreeSet<String>>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));

fn retired_set() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, BTreeSet<String>>> {
    // Plain data: a panic elsewhere while holding it leaves it usable.
    RETIRED.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn note_retired(root: &Path, session: &str) {
    retired_set()
        .entry(root.to_path_buf())
        .or_default()
        .insert(session.to_string());
}

/// Whether the cluster's retention removed `session` (a record of it was
/// seen by this root's squadd).
pub(crate) fn retired(root: &Path, session: &str) -> bool {
    retired_set().get(root).is_some_and(|s| s.contains(session))
}

/// What this checkout has of an arrival's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionDir {
    /// The directory is there: written into it (never made again if it
    /// vanishes meanwhile).
    Present,
    /// Never here (a session another host began): made.
    Create,
    /// Removed here (archived, or removed by the leader's retention):
    /// not written.
    Removed,
}

/// Decides, from whether `.squad/sessions/<s>` is there, whether
/// `.squad/archives/<s>` is, and whether a removal record of the cluster's
/// retention named it ([`retired`]).
pub(crate) fn session_dir(in_sessions: bool, archived_here: bool, retired: bool) -> SessionDir {
    if in_sessions {
        SessionDir::Present
    } else if archived_here || retired {
        SessionDir::Removed
    } else {
        SessionDir::Create
    }
}

/// [`session_dir`] for `session` of `root`, as the checkout is now.
pub(crate) fn session_dir_of(root: &Path, session: &str) -> SessionDir {
    session_dir(
        sessions_dir(root).join(session).is_dir(),
        root.join(SQUAD_DIR)
            .join(ARCHIVES_DIR)
            .join(session)
            .exists(),
        retired(root, session),
    )
}

/// Writes `rel` (a file name, or `<subfolder>/<name>`) into `session`'s
/// directory atomically, never through a link. The session directory is
/// made only when [`session_dir`] says `Create`; one found there is held
/// open, so when it is archived meanwhile the file goes with it and the
/// directory is not made again. `Removed`: a NotFound error, nothing
/// written.
pub(crate) fn write(
    root: &Path,
    session: &str,
    rel: &str,
    bytes: &[u8],
    mode: u32,
) -> io::Result<()> {
    let sessions = sessions_dir(root);
    let under = sessions
        .strip_prefix(root)
        .map_err(|_| io::Error::other("the sessions folder is outside the root"))?;
    let top = crate::safefs::Dir::open_root(root)?.walk(under, Some(0o755))?;
    let name = OsStr::new(session);
    let dir = match top.open_dir(name) {
        Ok(d) => d,
        // Looked at after the directory was found missing: a removal
        // notes the session retired before it moves the directory.
        Err(e) if crate::safefs::is_missing(&e) => match session_dir_of(root, session) {
            SessionDir::Create | SessionDir::Present => top.create_dir(name, 0o755)?,
            SessionDir::Removed => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("session {session} was removed here: not made again"),
                ));
            }
        },
        Err(e) => return Err(e),
    };
    match rel.split_once('/') {
        Some((sub, file)) => dir
            .create_dir(OsStr::new(sub), 0o755)?
            .write_atomic(file, bytes, mode),
        None => dir.write_atomic(rel, bytes, mode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule: a removed session is never made again by a replicated
    /// write; one that is there, or never was, is written.
    #[test]
    fn a_removed_session_is_never_made_again() {
        assert_eq!(session_dir(true, false, false), SessionDir::Present);
        // Re-created under the same name after its removal: written.
        assert_eq!(session_dir(true, true, true), SessionDir::Present);
        assert_eq!(session_dir(false, false, false), SessionDir::Create);
        assert_eq!(session_dir(false, true, false), SessionDir::Removed);
        assert_eq!(session_dir(false, false, true), SessionDir::Removed);
        assert_eq!(session_dir(false, true, true), SessionDir::Removed);
    }

    /// Through the writer: an archived session gets nothing (no directory
    /// made), a new one is made, a present one written (a conflict's
    /// subfolder too).
    #[test]
    fn the_writer_never_makes_an_archived_session_again() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let s = "20240115T100000Z-old";
        std::fs::create_dir_all(root.join(SQUAD_DIR).join(ARCHIVES_DIR).join(s)).unwrap();
        let err = write(root, s, "session-status.md", b"x", 0o644).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!sessions_dir(root).join(s).exists());
        let n = "20240115T100000Z-new";
        write(root, n, "session-status.md", b"y", 0o644).unwrap();
        write(root, n, "conflicts/a.md.h-r3", b"z", 0o644).unwrap();
        assert_eq!(
            std::fs::read(sessions_dir(root).join(n).join("conflicts/a.md.h-r3")).unwrap(),
            b"z"
        );
    }
}
