//! Finding the project root a command works on.

use squad_protocol::teamdir;
use squad_protocol::tree::{SQUAD_DIR, find_root, session_dirs, sessions_dir};
use std::path::{Path, PathBuf};

/// Why no project root or session was found: the message names the path
/// looked at and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// `--root` (or `SQUAD_ROOT`) names a directory that is not a project.
    #[error(
        "{shown}: no `{SQUAD_DIR}/` directory there, so it is not a squad project (from --root or SQUAD_ROOT); check the path, or run `squadctl init --root {shown}` to make it one"
    )]
    NotAProject {
        /// The given root, escaped for the terminal.
        shown: String,
    },
    /// `--root` names a directory without a team directory.
    #[error(
        "{shown}: no team directory there (.squad/ or the legacy .ai-team/), so it is not a squad project (from --root or SQUAD_ROOT); check the path, or run `squadctl init --root {shown}` to make it one"
    )]
    NoTeamThere {
        /// The given root, escaped for the terminal.
        shown: String,
    },
    /// No `.squad/`, but a team in the legacy `.ai-team/` (the Squad CLI's
    /// older name): `init` migrates it.
    #[error(
        "no `{SQUAD_DIR}/` directory in {}, whose team is in the legacy `.ai-team/`: run `squadctl --root {} init` to migrate it to `{SQUAD_DIR}/` (as `squad upgrade --migrate-directory` does) and lay out squadd's files",
        project.display(),
        project.display()
    )]
    LegacyTeam {
        /// The project holding `.ai-team/`.
        project: PathBuf,
    },
    /// The current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(#[source] std::io::Error),
    /// No project at or above the current directory.
    #[error(
        "no `{SQUAD_DIR}/` directory here or in any parent of {}; run `squadctl init` or pass --root",
        cwd.display()
    )]
    NotFound {
        /// Where the search started.
        cwd: PathBuf,
    },
    /// No team directory at or above the current directory.
    #[error(
        "no team directory (.squad/ or .ai-team/) here or in any parent of {}; pass --root, run `squadctl init`, or import a team with `squadctl import FILE`",
        cwd.display()
    )]
    NoTeamFound {
        /// Where the search started.
        cwd: PathBuf,
    },
    /// `--session` is a path, not a name.
    #[error(
        "--session `{shown}` is not a session name: name a directory in {} (not a path)",
        sessions.display()
    )]
    NotASessionName {
        /// The name given, escaped for the terminal.
        shown: String,
        /// The sessions directory of the root.
        sessions: PathBuf,
    },
    /// The sessions directory cannot be listed.
    #[error("{}: {source}", sessions.display())]
    Sessions {
        /// The sessions directory of the root.
        sessions: PathBuf,
        /// Why listing failed.
        #[source]
        source: std::io::Error,
    },
    /// No session directory of that name.
    #[error("no session `{shown}` in {}: it {what}", sessions.display())]
    NoSession {
        /// The name given, escaped for the terminal.
        shown: String,
        /// The sessions directory of the root.
        sessions: PathBuf,
        /// What is there instead.
        what: &'static str,
    },
}

// The commands not yet converted report errors as `String`: `?` keeps
// working in them until they are.
impl From<RootError> for String {
    fn from(e: RootError) -> Self {
        e.to_string()
    }
}

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
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf, RootError> {
    if let Some(root) = explicit {
        if let Some(found) = teamdir::worktree_of_team(fs_path(root)) {
            note_through_main_checkout(&found);
            return Ok(found.root);
        }
        // An explicit root that is not a project (a typo, a stale
        // SQUAD_ROOT) would otherwise answer "nothing here" and exit 0.
        if !fs_path(root).join(SQUAD_DIR).is_dir() {
            if fs_path(root).join(teamdir::LEGACY_TEAM_DIR).is_dir() {
                return Err(RootError::LegacyTeam {
                    project: root.to_path_buf(),
                });
            }
            return Err(RootError::NotAProject {
                shown: crate::text::escape(&root.display().to_string()).into_owned(),
            });
        }
        return Ok(root.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(RootError::CurrentDir)?;
    match teamdir::find_squad_root(&cwd) {
        Some(found) if found.through_main_checkout() => {
            note_through_main_checkout(&found);
            Ok(found.root)
        }
        Some(found) if found.root == cwd => Ok(PathBuf::new()),
        Some(found) => Ok(found.root),
        None => match cwd
            .ancestors()
            .find(|d| d.join(teamdir::LEGACY_TEAM_DIR).is_dir())
        {
            Some(project) => Err(RootError::LegacyTeam {
                project: project.to_path_buf(),
            }),
            None => Err(RootError::NotFound { cwd }),
        },
    }
}

/// Says once per process, on stderr, that the root is not the working
/// checkout's own: a command run in a worktree acts on the team's state,
/// and whoever reads its output should know which.
fn note_through_main_checkout(found: &teamdir::SquadRoot) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) || crate::verbosity::quiet() {
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
pub fn team_project(explicit: Option<&Path>) -> Result<PathBuf, RootError> {
    use squad_protocol::teamdir;
    if let Some(root) = explicit {
        if teamdir::locate(root).is_none() {
            return Err(RootError::NoTeamThere {
                shown: crate::text::escape(&root.display().to_string()).into_owned(),
            });
        }
        return Ok(root.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(RootError::CurrentDir)?;
    for dir in cwd.ancestors() {
        if teamdir::locate(dir).is_some() {
            return Ok(if dir == cwd {
                PathBuf::new()
            } else {
                dir.to_path_buf()
            });
        }
    }
    Err(RootError::NoTeamFound { cwd })
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
pub fn named_session(root: &Path, name: &str) -> Result<PathBuf, RootError> {
    let shown = crate::text::escape(name).into_owned();
    let simple = !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\'])
        && Path::new(name).components().count() == 1;
    if !simple {
        return Err(RootError::NotASessionName {
            shown,
            sessions: sessions_dir(root),
        });
    }
    let dirs = session_dirs(root).map_err(|source| RootError::Sessions {
        sessions: sessions_dir(root),
        source,
    })?;
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
    Err(RootError::NoSession {
        shown,
        sessions: sessions_dir(root),
        what,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callers match on the kind of failure; the text stays the one the
    /// e2e tests and the docs quote.
    #[test]
    fn a_session_that_is_a_path_or_missing_is_a_typed_error_with_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".squad/sessions/20240101T000000Z")).unwrap();
        let sessions = sessions_dir(root);
        let e = named_session(root, "../x").unwrap_err();
        assert!(matches!(e, RootError::NotASessionName { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "--session `../x` is not a session name: name a directory in {} (not a path)",
                sessions.display()
            )
        );
        let e = named_session(root, "nope").unwrap_err();
        assert!(
            matches!(
                e,
                RootError::NoSession {
                    what: "does not exist",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "no session `nope` in {}: it does not exist",
                sessions.display()
            )
        );
        assert_eq!(
            named_session(root, "20240101T000000Z").unwrap(),
            sessions.join("20240101T000000Z")
        );
        let e = resolve(Some(&root.join("elsewhere"))).unwrap_err();
        assert!(matches!(e, RootError::NotAProject { .. }), "{e:?}");
        let shown = root.join("elsewhere").display().to_string();
        assert_eq!(
            e.to_string(),
            format!(
                "{shown}: no `.squad/` directory there, so it is not a squad project (from --root or SQUAD_ROOT); check the path, or run `squadctl init --root {shown}` to make it one"
            )
        );
    }
}
