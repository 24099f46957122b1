//! Hooks that dispatch on their own name, chained without moving them
//! (docs/ci.md, "Git hooks"): a team's hook in a tracked directory
//! (`core.hooksPath = .githooks`), one that reads `$0` (`basename "$0"`)
//! or a symlink to a dispatcher stops working when renamed to
//! `<name>.pre-squad`, and renaming a tracked file changes the team's tree.
//!
//! So for those, `hooks install` moves nothing: it writes its hooks into a
//! directory of its own under git's (`<git-common-dir>/squad-hooks`),
//! points `core.hooksPath` (the repository's own config) there, and each of
//! its hooks runs the team's hook first by the team's own path, so `$0` is
//! what the dispatcher expects. Every other hook the team's directory holds
//! gets a one-line forwarder. `hooks uninstall` sets `core.hooksPath` back.

use super::{HooksError, io_error, is_ours};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Our directory, under git's common directory.
const DIR: &str = "squad-hooks";

/// The file in our directory that says what it replaced.
const STATE: &str = ".squad-chained.json";

/// Every hook git runs: a team's directory may hold any of them, and each
/// must still run once `core.hooksPath` points at ours.
const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
];

/// What our directory replaced: the team's hooks directory and the
/// `core.hooksPath` value before (`None`: unset).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Chained {
    hooks_dir: PathBuf,
    hooks_path: Option<String>,
}

fn git(root: &Path, args: &[&str]) -> Result<std::process::Output, HooksError> {
    Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .map_err(HooksError::Git)
}

/// Why the hooks in `dir` must not be renamed, when they must not: one of
/// ours to write over is tracked by git, reads its own name (`$0`), or is
/// a symlink (to a dispatcher).
pub(super) fn dispatcher(root: &Path, dir: &Path) -> Option<String> {
    for name in super::HOOKS {
        let path = dir.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if is_ours(&path) {
            continue;
        }
        if meta.file_type().is_symlink() {
            return Some(format!("{} is a symlink (to a dispatcher)", path.display()));
        }
        let tracked = Command::new("git")
            .current_dir(root)
            .args(["ls-files", "--error-unmatch", "--"])
            .arg(&path)
            .output()
            .is_ok_and(|o| o.status.success());
        if tracked {
            return Some(format!("{} is tracked by git", path.display()));
        }
        let text =
            squad_protocol::fsx::read_regular_to_string(&path, 1024 * 1024).unwrap_or_default();
        if text.contains("$0") || text.contains("${0") {
            return Some(format!(
                "{} dispatches on its own name ($0)",
                path.display()
            ));
        }
    }
    None
}

/// What `dir` (git's hooks directory now) replaced, when it is ours.
pub(super) fn chained_by(dir: &Path) -> Option<(PathBuf, Option<String>)> {
    let text = squad_protocol::fsx::read_regular_to_string(&dir.join(STATE), 64 * 1024).ok()?;
    let c: Chained = serde_json::from_str(&text).ok()?;
    Some((c.hooks_dir, c.hooks_path))
}

/// Our directory for the repository at `root`.
fn our_dir(root: &Path) -> Result<PathBuf, HooksError> {
    let out = git(root, &["rev-parse", "--git-common-dir"])?;
    let common = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let dir = root.join(common).join(DIR);
    Ok(std::path::absolute(&dir).unwrap_or(dir))
}

/// Installs our hooks beside the team's `team_dir` (see the module doc),
/// `why` being what [`dispatcher`] found; `previous` is the
/// `core.hooksPath` to restore (read now when `None` and not installed).
pub(super) fn install(
    root: &Path,
    team_dir: &Path,
    previous: Option<Option<String>>,
    program: &str,
    why: &str,
) -> Result<String, HooksError> {
    let team_dir = std::fs::canonicalize(team_dir).map_err(io_error(team_dir))?;
    let ours = our_dir(root)?;
    let previous = match previous {
        Some(p) => p,
        None => {
            let out = git(root, &["config", "--local", "--get", "core.hooksPath"])?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
    };
    std::fs::create_dir_all(&ours).map_err(io_error(&ours))?;
    let state = serde_json::to_string_pretty(&Chained {
        hooks_dir: team_dir.clone(),
        hooks_path: previous,
    })
    .unwrap_or_default();
    let at = ours.join(STATE);
    squad_protocol::write_atomic_with(&at, state.as_bytes(), Some(0o644)).map_err(io_error(&at))?;
    let mut report = format!(
        "the hooks in {} are not moved: {why}; ours go in {} and run the team's first, by their own path\n",
        team_dir.display(),
        ours.display()
    );
    for name in GIT_HOOKS {
        let team = team_dir.join(name);
        let runs = std::fs::metadata(&team).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        });
        let path = ours.join(name);
        let chained = super::super::guard::quoted(&team.display().to_string());
        let text = if super::HOOKS.contains(name) {
            super::script_chained(name, program, runs.then_some(chained.as_str()))
        } else if runs {
            format!(
                "#!/bin/sh\n{}; the team's hook, run by its own path.\nexec {chained} \"$@\"\n",
                super::MARKER
            )
        } else {
            if is_ours(&path) {
                std::fs::remove_file(&path).map_err(io_error(&path))?;
            }
            continue;
        };
        squad_protocol::write_atomic_with(&path, text.as_bytes(), Some(0o755))
            .map_err(io_error(&path))?;
        if super::HOOKS.contains(name) {
            report.push_str(&format!("{name}: installed {}\n", path.display()));
        } else {
            report.push_str(&format!("{name}: forwarded to {}\n", team.display()));
        }
    }
    let out = Command::new("git")
        .current_dir(root)
        .args(["config", "--local", "core.hooksPath"])
        .arg(&ours)
        .output()
        .map_err(HooksError::Git)?;
    if !out.status.success() {
        return Err(HooksError::NotARepo {
            root: root.to_path_buf(),
            said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    report.push_str(&format!(
        "core.hooksPath: {} (was {}; `squadctl hooks uninstall` sets it back). A hook added to {} later runs once `squadctl hooks install` is run again\n",
        ours.display(),
        team_dir.display(),
        team_dir.display()
    ));
    Ok(report)
}

/// Removes our directory `dir` and sets `core.hooksPath` back.
pub(super) fn uninstall(
    root: &Path,
    dir: &Path,
    team_dir: &Path,
    previous: Option<String>,
) -> Result<String, HooksError> {
    let args: Vec<&str> = match &previous {
        Some(p) => vec!["config", "--local", "core.hooksPath", p],
        None => vec!["config", "--local", "--unset", "core.hooksPath"],
    };
    let out = git(root, &args)?;
    if !out.status.success() && previous.is_some() {
        return Err(HooksError::NotARepo {
            root: root.to_path_buf(),
            said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    std::fs::remove_dir_all(dir).map_err(io_error(dir))?;
    Ok(format!(
        "core.hooksPath: {} again; removed {} (the team's hooks in {} were never moved)\n",
        previous.as_deref().unwrap_or("unset"),
        dir.display(),
        team_dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_that_read_their_name_or_link_to_a_dispatcher_are_not_renamed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(dispatcher(dir, dir), None);
        std::fs::write(dir.join("pre-commit"), "#!/bin/sh\nexec make lint\n").unwrap();
        assert_eq!(
            dispatcher(dir, dir),
            None,
            "a plain hook is renamed as before"
        );
        for text in [
            "#!/bin/sh\nexec \"$(dirname \"$0\")/$(basename \"$0\").d/run\"\n",
            "#!/bin/sh\nexec run-hooks \"${0##*/}\"\n",
        ] {
            std::fs::write(dir.join("pre-commit"), text).unwrap();
            assert!(dispatcher(dir, dir).is_some(), "{text}");
        }
        std::fs::remove_file(dir.join("pre-commit")).unwrap();
        std::fs::write(dir.join("dispatch"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("dispatch", dir.join("commit-msg")).unwrap();
        assert!(dispatcher(dir, dir).is_some_and(|w| w.contains("symlink")));
    }
}
