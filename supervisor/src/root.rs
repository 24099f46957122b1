//! Finding the project root a command works on.

use squad_protocol::teamdir;
use squad_protocol::tree::{SQUAD_DIR, find_root, session_dirs, sessions_dir};
use std::path::{Path, PathBuf};

/// The project root: `--root` when given, else the nearest directory at or
/// above the current one holding `.squad/`. Inside a linked git worktree
/// (given as `--root` or holding the current directory) whose main checkout
/// has `.squad/`, the root is the main checkout's: the team's sessions,
/// locks, inboxes, policy and squadd's socket are there (see
/// [`squad_protocol::teamdir::find_squad_root`]); a one-line note on stderr
/// says so.
///
/// Returned as a path to print: relative (empty for the current directory)
/// when the root is the current directory, so diagnostics read
/// `.squad/sessions/…` rather than a long absolute path.
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(root) = explicit {
        if let Some(found) = teamdir::worktree_of_team(fs_path(root)) {
            note_through_main_checkout(&found);
            return Ok(found.root);
        }
        // An explicit root that is not a project (a typo, a stale
        // SQUAD_ROOT) would otherwise answer "nothing here" and exit 0.
        if !fs_path(root).join(SQUAD_DIR).is_dir() {
            return Err(format!(
                "{}: no `{SQUAD_DIR}/` directory there, so it is not a squad project (from --root or SQUAD_ROOT); check the path, or run `squadctl init --root {}` to make it one",
                crate::text::escape(&root.display().to_string()),
                crate::text::escape(&root.display().to_string())
            ));
        }
        return Ok(root.to_path_buf());
    }
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    match teamdir::find_squad_root(&cwd) {
        Some(found) if found.through_main_checkout() => {
            note_through_main_checkout(&found);
            Ok(found.root)
        }
        Some(found) if found.root == cwd => Ok(PathBuf::new()),
        Some(found) => Ok(found.root),
        None => Err(format!(
            "no `{SQUAD_DIR}/` directory here or in any parent of {}; run `squadctl init` or pass --root",
            cwd.display()
        )),
    }
}

/// Says once per process, on stderr, that the root is not the working
/// checkout's own: a command run in a worktree acts on the team's state,
/// and whoever reads its output should know which.
fn note_through_main_checkout(found: &teamdir::SquadRoot) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) || crate::ctl::quiet() {
        return;
    }
    let program = std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "squadctl".into());
    eprintln!(
        "{program}: note: using the team root {} (the main checkout of the git worktree {})",
        crate::text::escape(&found.root.display().to_string()),
        crate::text::escape(&found.checkout.display().to_string())
    );
}

/// The checkout whose files a command at `cwd` working on the squad root
/// `root` judges paths against: the linked git worktree at or above `cwd`
/// whose main checkout is `root`, else `root` itself.
pub fn checkout_for(root: &Path, cwd: &Path) -> PathBuf {
    let team = std::fs::canonicalize(fs_path(root)).unwrap_or_else(|_| root.to_path_buf());
    cwd.ancestors()
        .find_map(|dir| teamdir::worktree_of_team(dir).filter(|f| f.root == team))
        .map_or_else(|| root.to_path_buf(), |f| f.checkout)
}

/// The project of a team-directory feature (team, export, skills): `--root`
/// when it has a team directory, else the nearest directory at or above the
/// current one with one. The team directory is `protocol::teamdir`'s one
/// lookup: `.squad/`, else the legacy `.ai-team/`, else a worktree's main
/// checkout's.
pub fn team_project(explicit: Option<&Path>) -> Result<PathBuf, String> {
    use squad_protocol::teamdir;
    if let Some(root) = explicit {
        if teamdir::locate(root).is_none() {
            return Err(format!(
                "{}: no team directory there (.squad/ or the legacy .ai-team/), so it is not a squad project (from --root or SQUAD_ROOT); check the path, or run `squadctl init --root {}` to make it one",
                crate::text::escape(&root.display().to_string()),
                crate::text::escape(&root.display().to_string())
            ));
        }
        return Ok(root.to_path_buf());
    }
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
    for dir in cwd.ancestors() {
        if teamdir::locate(dir).is_some() {
            return Ok(if dir == cwd {
                PathBuf::new()
            } else {
                dir.to_path_buf()
            });
        }
    }
    Err(format!(
        "no team directory (.squad/ or .ai-team/) here or in any parent of {}; pass --root, run `squadctl init`, or import a team with `squadctl import FILE`",
        cwd.display()
    ))
}

/// The project a directory already belongs to: the nearest directory above
/// it (not itself) that holds `.squad/`.
pub fn enclosing_project(dir: &Path) -> Option<PathBuf> {
    let absolute = std::fs::canonicalize(fs_path(dir)).ok()?;
    absolute.parent().and_then(find_root)
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

/// The directory of the session named `name` (`--session`): a real session
/// directory of the root, as every listing sees it. A path (`../../x`, an
/// absolute path), a symlink or a hidden directory is refused, so a command
/// never writes where `lock list`, `inbox list` or squadd do not look.
pub fn named_session(root: &Path, name: &str) -> Result<PathBuf, String> {
    let shown = crate::text::escape(name);
    let simple = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && Path::new(name).components().count() == 1;
    if !simple {
        return Err(format!(
            "--session `{shown}` is not a session name: name a directory in {} (not a path)",
            sessions_dir(root).display()
        ));
    }
    let dirs = session_dirs(root).map_err(|e| format!("{}: {e}", sessions_dir(root).display()))?;
    if let Some(dir) = dirs
        .iter()
        .find(|d| d.file_name().is_some_and(|n| n == name))
    {
        return Ok(dir.clone());
    }
    let what = match std::fs::symlink_metadata(sessions_dir(root).join(name)) {
        Ok(m) if m.file_type().is_symlink() => "is a symbolic link, not a session directory",
        Ok(_) => "is not a session directory",
        Err(_) => "does not exist",
    };
    Err(format!(
        "no session `{shown}` in {}: it {what}",
        sessions_dir(root).display()
    ))
}
