//! Creating a project's `.squad/` layout (docs/protocol.md, "On-disk layout").

use crate::safefs::Dir;
use squad_protocol::tree::{ARCHIVES_DIR, RUN_DIR, SESSIONS_DIR, SQUAD_DIR};
use std::io;
use std::path::{Path, PathBuf};

/// Creates (or opens) `name` in `parent` without following a link: a
/// symlink planted at `.squad`, `.squad/run`… is refused, never used.
fn create_dir(parent: &Dir, name: &str, created: &mut Vec<PathBuf>) -> io::Result<Dir> {
    let existed = parent.contains(name);
    let dir = parent.create_dir(std::ffi::OsStr::new(name), 0o777)?;
    if !existed {
        created.push(dir.path().to_path_buf());
    }
    Ok(dir)
}

/// Creates `.squad/` with `sessions/`, `archives/` and `run/` (mode 0700)
/// under `root`; returns the directories it created. Existing directories
/// are left alone, except that `run/` is always made 0700.
pub fn create_layout(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut created = Vec::new();
    let squad = create_dir(&Dir::open_root(root)?, SQUAD_DIR, &mut created)?;
    create_dir(&squad, SESSIONS_DIR, &mut created)?;
    create_dir(&squad, ARCHIVES_DIR, &mut created)?;
    let run = create_dir(&squad, RUN_DIR, &mut created)?;
    // Through the descriptor: the directory checked is the one changed.
    run.chmod(0o700)?;
    Ok(created)
}
