//! Finding the project root a command works on.

use squad_protocol::tree::{SQUAD_DIR, find_root};
use std::path::{Path, PathBuf};

/// The project root: `--root` when given, else the nearest directory at or
/// above the current one holding `.squad/`.
///
/// Returned as a path to print: relative (empty for the current directory)
/// when the root is the current directory, so diagnostics read
/// `.squad/sessions/…` rather than a long absolute path.
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(root) = explicit {
        return Ok(root.to_path_buf());
    }
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    match find_root(&cwd) {
        Some(root) if root == cwd => Ok(PathBuf::new()),
        Some(root) => Ok(root),
        None => Err(format!(
            "no `{SQUAD_DIR}/` directory here or in any parent of {}; run `squadctl init` or pass --root",
            cwd.display()
        )),
    }
}

/// The directory to operate in for commands that create things (`init`):
/// `--root` or the current directory.
pub fn here(explicit: Option<&Path>) -> PathBuf {
    explicit.map_or_else(PathBuf::new, Path::to_path_buf)
}

/// A path usable for file system calls: the empty path means `.`.
pub fn fs_path(p: &Path) -> &Path {
    if p.as_os_str().is_empty() {
        Path::new(".")
    } else {
        p
    }
}
