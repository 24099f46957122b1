//! `squadctl hooks install|uninstall`: git hooks behind the edit-time guard.
//!
//! - `pre-commit` runs `squadctl check --staged`;
//! - `commit-msg` runs `squadctl hooks run commit-msg`: refuses a
//!   `Squad-Task` trailer naming another agent's task, adds `Squad-Task:
//!   $SQUAD_TASK` when the message has none and `Squad-Agent: $SQUAD_AGENT`;
//! - `pre-push` runs `squadctl hooks run pre-push`: `squadctl check` over
//!   each pushed range.
//!
//! An existing hook is kept as `<name>.pre-squad` and run first (its failure
//! stops the commit or push as before); `uninstall` puts it back. The hooks
//! directory is git's (`git rev-parse --git-path hooks`), so `core.hooksPath`
//! is respected. Hooks a hook manager owns (husky, lefthook, the pre-commit
//! framework) are not renamed, since some dispatch on their own file name:
//! install refuses and prints the one line to add to each of the team's
//! hooks instead.

use std::path::{Path, PathBuf};
use std::process::Command;

mod chain;

/// The line that marks a hook as ours.
const MARKER: &str = "# squad-supervisor hook: installed by `squadctl hooks install`";

/// The suffix an existing hook is kept under.
const CHAINED: &str = "pre-squad";

/// The hooks written.
const HOOKS: &[&str] = &["pre-commit", "commit-msg", "pre-push"];

/// Install or remove the git hooks that enforce boundaries at commit and push.
#[derive(Debug, clap::Subcommand)]
pub enum HooksCommand {
    /// Write pre-commit (`check --staged`), commit-msg (`Squad-Task` trailer
    /// from SQUAD_TASK) and pre-push (`check` over the pushed range); an
    /// existing hook is kept as `<name>.pre-squad` and still runs first.
    Install(HooksArgs),
    /// Remove our hooks and restore the ones they replaced.
    Uninstall(HooksArgs),
    /// Run one hook's check: the line a hook manager's hook calls
    /// (`squadctl hooks run commit-msg "$1"`, `squadctl hooks run pre-push
    /// "$@"` with git's input on stdin).
    Run(RunArgs),
}

/// Arguments of `hooks run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The hook.
    #[arg(value_enum)]
    pub hook: super::hook_run::HookName,
    /// The arguments git gave the hook.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Arguments of `hooks install|uninstall`.
#[derive(Debug, clap::Args)]
pub struct HooksArgs {
    /// The squadctl the hooks run (looked up on PATH unless a path is given).
    #[arg(long, value_name = "PATH", default_value = "squadctl")]
    pub program: String,
}

fn script(name: &str, program: &str) -> String {
    let kept = format!("\"$hook_dir/{name}.{CHAINED}\"");
    script_chained(name, program, Some(&kept))
}

/// Our hook `name`, running `chained` (a shell word: the hook it follows)
/// first when there is one.
fn script_chained(name: &str, program: &str, chained: Option<&str>) -> String {
    let program = super::guard::quoted(program);
    let head = format!(
        "#!/bin/sh\n{MARKER}; `squadctl hooks uninstall` restores the previous hook.\nhook_dir=$(dirname \"$0\")\n"
    );
    let chain = |stdin: bool| {
        let Some(chained) = chained else {
            return String::new();
        };
        let feed = if stdin {
            "printf '%s\\n' \"$input\" | "
        } else {
            ""
        };
        format!("if [ -x {chained} ]; then\n  {feed}{chained} \"$@\" || exit $?\nfi\n")
    };
    match name {
        "pre-commit" => format!("{head}{}exec {program} check --staged\n", chain(false)),
        "commit-msg" => format!(
            "{head}{}exec {program} hooks run commit-msg \"$1\"\n",
            chain(false)
        ),
        _ => format!(
            "{head}input=$(cat)\n{}printf '%s\\n' \"$input\" | exec {program} hooks run pre-push \"$@\"\n",
            chain(true)
        ),
    }
}

/// The line each hook of a hook manager needs, to call ours.
fn manager_lines(program: &str) -> String {
    let program = super::guard::quoted(program);
    format!(
        "  pre-commit:  {program} check --staged\n  commit-msg:  {program} hooks run commit-msg \"$1\"\n  pre-push:    {program} hooks run pre-push \"$@\"\n"
    )
}

/// The hook manager that owns the hooks directory, if one does: husky
/// (its hooks dispatch on their own file name, so a renamed one silently
/// stops running), lefthook or the pre-commit framework (which rewrite the
/// hooks they own).
fn hook_manager(dir: &Path) -> Option<(&'static str, &'static str)> {
    if dir.components().any(|c| c.as_os_str() == ".husky") {
        return Some(("husky", "the team's .husky/<hook> files"));
    }
    for name in HOOKS.iter().copied().chain(["h", "husky.sh"]) {
        let path = dir.join(name);
        if is_ours(&path) {
            continue;
        }
        let Ok(text) = squad_protocol::fsx::read_regular_to_string(&path, 1024 * 1024) else {
            continue;
        };
        if text.contains("husky") {
            return Some(("husky", "the team's .husky/<hook> files"));
        }
        if text.contains("lefthook") {
            return Some((
                "lefthook",
                "lefthook.yml (`<hook>: commands: squad: run: <line>`), then `lefthook install`",
            ));
        }
        if text.contains("pre-commit.com") || text.contains("File generated by pre-commit") {
            return Some((
                "the pre-commit framework",
                ".pre-commit-config.yaml (a `repo: local` hook with `language: system`, `pass_filenames: false`, `stages: [<hook>]` and `entry: <line>`)",
            ));
        }
    }
    None
}

/// Why `squadctl hooks install|uninstall` changed nothing (or stopped).
#[derive(Debug, thiserror::Error)]
enum HooksError {
    /// git could not be started.
    #[error("cannot run git: {0}")]
    Git(#[source] std::io::Error),
    /// The root is not in a git repository.
    #[error("{} is not in a git repository: {said}", root.display())]
    NotARepo { root: PathBuf, said: String },
    /// A hook manager owns the hooks.
    #[error(
        "the git hooks in {} belong to {manager}; renaming them would stop the team's own hooks (some dispatch on their file name), so nothing was changed. Add one line to each hook in {place}:\n{lines}",
        dir.display()
    )]
    Managed {
        dir: PathBuf,
        manager: String,
        place: String,
        lines: String,
    },
    /// A foreign hook and a kept one are both there.
    #[error(
        "{} exists and so does {}; move one of them away first (nothing was changed for {name})",
        path.display(),
        kept.display()
    )]
    BothThere {
        path: PathBuf,
        kept: PathBuf,
        name: &'static str,
    },
    /// A hook or its directory could not be written, moved or removed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An I/O error on `path`.
fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> HooksError + '_ {
    move |source| HooksError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn hooks_dir(root: &Path) -> Result<PathBuf, HooksError> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--git-path", "hooks"])
        .output()
        .map_err(HooksError::Git)?;
    if !out.status.success() {
        return Err(HooksError::NotARepo {
            root: root.to_path_buf(),
            said: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(root.join(dir))
}

fn is_ours(path: &Path) -> bool {
    squad_protocol::fsx::read_regular_to_string(path, 1024 * 1024).is_ok_and(|t| t.contains(MARKER))
}

/// Runs `squadctl hooks …`.
pub(crate) fn run(root_arg: Option<&Path>, cmd: HooksCommand) -> u8 {
    let root = crate::root::fs_path(&crate::root::here(root_arg)).to_path_buf();
    let dir = match hooks_dir(&root) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let result = match cmd {
        HooksCommand::Install(a) => match hook_manager(&dir) {
            Some((manager, place)) => Err(HooksError::Managed {
                dir: dir.clone(),
                manager: manager.to_string(),
                place: place.to_string(),
                lines: manager_lines(&a.program),
            }),
            None => {
                if let Some(w) = super::program::unreachable_warning(&a.program, "the git hooks") {
                    super::warn(w);
                }
                match (chain::chained_by(&dir), chain::dispatcher(&root, &dir)) {
                    // Installed beside a dispatcher before: again, the same way.
                    (Some((team, previous)), _) => chain::install(
                        &root,
                        &team,
                        Some(previous),
                        &a.program,
                        "installed beside them before",
                    ),
                    (None, Some(why)) => chain::install(&root, &dir, None, &a.program, &why),
                    (None, None) => install(&dir, &a.program),
                }
            }
        },
        HooksCommand::Uninstall(_) => match chain::chained_by(&dir) {
            Some((team, previous)) => chain::uninstall(&root, &dir, &team, previous),
            None => uninstall(&dir),
        },
        HooksCommand::Run(a) => return super::hook_run::run(&root, a.hook, &a.args),
    };
    match result {
        Ok(lines) => super::print(&lines),
        Err(e) => super::fail(e),
    }
}

fn install(dir: &Path, program: &str) -> Result<String, HooksError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let mut report = String::new();
    for name in HOOKS {
        let path = dir.join(name);
        let kept = dir.join(format!("{name}.{CHAINED}"));
        let exists = std::fs::symlink_metadata(&path).is_ok();
        if exists && !is_ours(&path) {
            if std::fs::symlink_metadata(&kept).is_ok() {
                return Err(HooksError::BothThere { path, kept, name });
            }
            std::fs::rename(&path, &kept).map_err(io_error(&path))?;
            report.push_str(&format!(
                "{name}: kept the existing hook as {}, run first\n",
                kept.display()
            ));
        }
        squad_protocol::write_atomic_with(&path, script(name, program).as_bytes(), Some(0o755))
            .map_err(io_error(&path))?;
        report.push_str(&format!("{name}: installed {}\n", path.display()));
    }
    Ok(report)
}

fn uninstall(dir: &Path) -> Result<String, HooksError> {
    let mut report = String::new();
    for name in HOOKS {
        let path = dir.join(name);
        let kept = dir.join(format!("{name}.{CHAINED}"));
        if !is_ours(&path) {
            report.push_str(&format!("{name}: not ours, left alone\n"));
            continue;
        }
        std::fs::remove_file(&path).map_err(io_error(&path))?;
        if std::fs::symlink_metadata(&kept).is_ok() {
            std::fs::rename(&kept, &path).map_err(io_error(&kept))?;
            report.push_str(&format!("{name}: restored the previous hook\n"));
        } else {
            report.push_str(&format!("{name}: removed\n"));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A foreign hook whose kept copy is already there stops the install
    /// with a typed error naming both, and changes nothing.
    #[test]
    fn a_foreign_hook_and_its_kept_copy_stop_the_install() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path();
        let path = hooks.join("pre-commit");
        let kept = hooks.join(format!("pre-commit.{CHAINED}"));
        std::fs::write(&path, "#!/bin/sh\nexec make lint\n").unwrap();
        std::fs::write(&kept, "#!/bin/sh\nexit 0\n").unwrap();
        let e = install(hooks, "squadctl").unwrap_err();
        assert!(
            matches!(
                &e,
                HooksError::BothThere {
                    name: "pre-commit",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{} exists and so does {}; move one of them away first (nothing was changed for pre-commit)",
                path.display(),
                kept.display()
            )
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\nexec make lint\n"
        );
    }

    #[test]
    fn hook_managers_are_recognised_and_plain_hooks_are_not() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("pre-commit", "#!/bin/sh\nexec make lint\n", None),
            (
                "pre-commit",
                "#!/bin/sh\ncall_lefthook run \"pre-commit\" \"$@\"\n",
                Some("lefthook"),
            ),
            (
                "pre-push",
                "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n",
                Some("the pre-commit framework"),
            ),
            (
                "h",
                "#!/usr/bin/env sh\n# husky dispatcher\n",
                Some("husky"),
            ),
        ];
        for (name, text, want) in cases {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(tmp.path().join(name), text).unwrap();
            assert_eq!(hook_manager(tmp.path()).map(|m| m.0), *want, "{text}");
        }
        // A directory inside .husky/ is husky's, whatever it holds.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".husky/_");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(hook_manager(&dir).map(|m| m.0), Some("husky"));
        // Our own hooks never count as a manager's.
        let tmp = tempfile::tempdir().unwrap();
        let ours = script("pre-commit", "squadctl");
        std::fs::write(tmp.path().join("pre-commit"), ours).unwrap();
        assert_eq!(hook_manager(tmp.path()), None);
    }
}
