//! Creating a project's `.squad/` layout (docs/protocol.md, "On-disk layout").

use squad_protocol::tree::{ARCHIVES_DIR, RUN_DIR, SESSIONS_DIR, SQUAD_DIR};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

fn create_dir(path: &Path, created: &mut Vec<PathBuf>) -> io::Result<()> {
    match fs::create_dir(path) {
        Ok(()) => {
            created.push(path.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `.squad/` with `sessions/`, `archives/` and `run/` (mode 0700)
/// under `root`; returns the directories it created. Existing directories
/// are left alone, except that `run/` is always made 0700.
pub fn create_layout(root: &Path) -> io::Result<Vec<PathBuf>> {
    let squad = root.join(SQUAD_DIR);
    let mut created = Vec::new();
    create_dir(&squad, &mut created)?;
    create_dir(&squad.join(SESSIONS_DIR), &mut created)?;
    create_dir(&squad.join(ARCHIVES_DIR), &mut created)?;
    let run = squad.join(RUN_DIR);
    create_dir(&run, &mut created)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&run, fs::Permissions::from_mode(0o700))?;
    }
    Ok(created)
}
