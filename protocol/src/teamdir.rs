//! Finding a project's team directory (the roster, charters, skills,
//! decisions and memory of seeds 000–002).
//!
//! One lookup, used by every team, skill and memory feature:
//!
//! 1. `<project>/.squad/` when it is a directory;
//! 2. else `<project>/.ai-team/` (the legacy name);
//! 3. else, when the project is a linked git worktree (its `.git` is a file
//!    `gitdir: …/.git/worktrees/<name>`), the main checkout's `.squad/` or
//!    `.ai-team/`, as the Squad CLI does: a worktree shares its team with
//!    the checkout it was made from.
//!
//! Symlinks are not followed for the team directory itself: a `.squad` that
//! is a symlink is not a team directory.

use std::path::{Path, PathBuf};

/// The current team directory name.
pub const TEAM_DIR: &str = ".squad";
/// The legacy team directory name, read when `.squad/` is absent.
pub const LEGACY_TEAM_DIR: &str = ".ai-team";

/// Where a project's team directory was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamDir {
    /// The team directory itself (`…/.squad` or `…/.ai-team`).
    pub path: PathBuf,
    /// The project the directory belongs to (the main checkout when
    /// [`TeamDir::from_main_checkout`] is set).
    pub project: PathBuf,
    /// Found under the legacy name `.ai-team/`.
    pub legacy: bool,
    /// Found in the main checkout of the git worktree `project` is.
    pub from_main_checkout: bool,
}

fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

fn in_project(project: &Path) -> Option<(PathBuf, bool)> {
    let current = project.join(TEAM_DIR);
    if is_real_dir(&current) {
        return Some((current, false));
    }
    let legacy = project.join(LEGACY_TEAM_DIR);
    if is_real_dir(&legacy) {
        return Some((legacy, true));
    }
    None
}

/// The main checkout of the linked git worktree at `project`, when it is one.
///
/// A linked worktree's `.git` is a file `gitdir: <main>/.git/worktrees/<name>`;
/// that directory's `commondir` file names the shared `.git` directory
/// (relative to it), whose parent is the main checkout.
pub fn main_checkout(project: &Path) -> Option<PathBuf> {
    let dot_git = project.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if !meta.is_file() {
        return None;
    }
    let text = crate::fsx::read_regular_to_string(&dot_git, 64 * 1024).ok()?;
    let gitdir = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let gitdir = if Path::new(gitdir).is_absolute() {
        PathBuf::from(gitdir)
    } else {
        project.join(gitdir)
    };
    let common = crate::fsx::read_regular_to_string(&gitdir.join("commondir"), 64 * 1024).ok()?;
    let common = common.trim();
    let common = if Path::new(common).is_absolute() {
        PathBuf::from(common)
    } else {
        gitdir.join(common)
    };
    let common = common.canonicalize().ok()?;
    let main = common.parent()?.to_path_buf();
    let here = project.canonicalize().ok()?;
    (main != here).then_some(main)
}

/// The squad root a command started in some directory works on, and the
/// checkout (the tree of source files) it works in.
///
/// The two differ in a linked git worktree: sessions, locks, inboxes, the
/// policy and squadd's socket are the team's, under the main checkout's
/// `.squad/`, while the files an agent edits are the worktree's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SquadRoot {
    /// The directory holding the team's `.squad/` (the main checkout when
    /// reached through a worktree).
    pub root: PathBuf,
    /// The checkout the start directory lies in: the linked worktree, or
    /// `root` itself.
    pub checkout: PathBuf,
}

impl SquadRoot {
    /// Whether the root was reached through a linked worktree's main
    /// checkout (so it is not the start directory's own checkout).
    pub fn through_main_checkout(&self) -> bool {
        self.root != self.checkout
    }
}

/// The linked git worktree at `dir` and its main checkout, when that main
/// checkout holds a squad root (`.squad/`).
pub fn worktree_of_team(dir: &Path) -> Option<SquadRoot> {
    let main = main_checkout(dir)?;
    main.join(TEAM_DIR).is_dir().then(|| SquadRoot {
        root: main,
        checkout: dir.to_path_buf(),
    })
}

/// The squad root of a command working at `start`: the nearest directory at
/// or above it that is either a linked git worktree whose main checkout has
/// `.squad/` (the team root is then the main checkout's, even when the
/// worktree carries a `.squad/` of its own: that is a committed copy, not
/// the team's live state), or a directory with `.squad/`.
pub fn find_squad_root(start: &Path) -> Option<SquadRoot> {
    start.ancestors().find_map(|dir| {
        worktree_of_team(dir).or_else(|| {
            dir.join(TEAM_DIR).is_dir().then(|| SquadRoot {
                root: dir.to_path_buf(),
                checkout: dir.to_path_buf(),
            })
        })
    })
}

/// The team directory of the project at `project`, per the module's rules.
pub fn locate(project: &Path) -> Option<TeamDir> {
    if let Some((path, legacy)) = in_project(project) {
        return Some(TeamDir {
            path,
            project: project.to_path_buf(),
            legacy,
            from_main_checkout: false,
        });
    }
    let main = main_checkout(project)?;
    let (path, legacy) = in_project(&main)?;
    Some(TeamDir {
        path,
        project: main,
        legacy,
        from_main_checkout: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn prefers_squad_over_legacy() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(".ai-team")).unwrap();
        let t = locate(dir.path()).unwrap();
        assert!(t.legacy);
        fs::create_dir(dir.path().join(".squad")).unwrap();
        let t = locate(dir.path()).unwrap();
        assert!(!t.legacy);
        assert_eq!(t.path, dir.path().join(".squad"));
    }

    #[test]
    fn none_without_a_team() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(locate(dir.path()), None);
    }

    #[test]
    fn a_worktree_uses_the_main_checkouts_team() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        let wt = dir.path().join("wt");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        fs::create_dir_all(main.join(".squad")).unwrap();
        fs::create_dir_all(&wt).unwrap();
        fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let t = locate(&wt).unwrap();
        assert!(t.from_main_checkout);
        assert_eq!(t.path, main.canonicalize().unwrap().join(".squad"));
        // A team of the worktree's own wins.
        fs::create_dir(wt.join(".ai-team")).unwrap();
        assert!(!locate(&wt).unwrap().from_main_checkout);
    }

    #[test]
    fn a_worktree_with_a_relative_gitdir_finds_the_legacy_team_of_its_main_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        let wt = dir.path().join("wt");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        fs::create_dir_all(main.join(".ai-team")).unwrap();
        fs::create_dir_all(&wt).unwrap();
        fs::write(wt.join(".git"), "gitdir: ../main/.git/worktrees/wt\n").unwrap();
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let t = locate(&wt).unwrap();
        assert!(t.from_main_checkout && t.legacy);
        assert_eq!(t.path, main.canonicalize().unwrap().join(".ai-team"));
        // The main checkout itself is no worktree of itself.
        assert!(!locate(&main).unwrap().from_main_checkout);
    }

    #[test]
    fn a_worktree_inside_the_main_checkout_works_on_the_main_checkouts_squad_root() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        // The worktree sits inside the main checkout and carries a committed
        // `.squad/` of its own: neither makes it the team root.
        let wt = main.join("trees/wt");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        fs::create_dir_all(main.join(".squad/sessions")).unwrap();
        fs::create_dir_all(wt.join(".squad")).unwrap();
        fs::create_dir_all(wt.join("src/deep")).unwrap();
        fs::write(wt.join(".git"), "gitdir: ../../.git/worktrees/wt\n").unwrap();
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let found = find_squad_root(&wt.join("src/deep")).unwrap();
        assert_eq!(found.root, main.canonicalize().unwrap());
        assert_eq!(found.checkout, wt);
        assert!(found.through_main_checkout());
        // In the main checkout itself, the root is its own.
        let own = find_squad_root(&main.join(".git")).unwrap();
        assert_eq!(own.root, main);
        assert!(!own.through_main_checkout());
        // A main checkout without a squad root leaves the worktree's own.
        fs::remove_dir_all(main.join(".squad")).unwrap();
        let alone = find_squad_root(&wt).unwrap();
        assert_eq!(alone.root, wt);
        assert!(!alone.through_main_checkout());
    }

    #[test]
    fn a_team_file_where_the_directory_goes_is_not_a_team() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".squad"), "not a dir").unwrap();
        fs::create_dir(dir.path().join(".ai-team")).unwrap();
        assert!(locate(dir.path()).unwrap().legacy);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_team_dir_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".squad")).unwrap();
        assert_eq!(locate(dir.path()), None);
    }
}
