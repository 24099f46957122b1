//! `squadctl hooks install|uninstall`: git hooks behind the edit-time guard.
//!
//! - `pre-commit` runs `squadctl check --staged`;
//! - `commit-msg` adds a `Squad-Task: $SQUAD_TASK` trailer when the message
//!   has none;
//! - `pre-push` runs `squadctl check` over each pushed range.
//!
//! An existing hook is kept as `<name>.pre-squad` and run first (its failure
//! stops the commit or push as before); `uninstall` puts it back. The hooks
//! directory is git's (`git rev-parse --git-path hooks`), so `core.hooksPath`
//! is respected.

use std::path::{Path, PathBuf};
use std::process::Command;

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
}

/// Arguments of `hooks install|uninstall`.
#[derive(Debug, clap::Args)]
pub struct HooksArgs {
    /// The squadctl the hooks run (looked up on PATH unless a path is given).
    #[arg(long, value_name = "PATH", default_value = "squadctl")]
    pub program: String,
}

fn script(name: &str, program: &str) -> String {
    let program = super::guard::quoted(program);
    let head = format!(
        "#!/bin/sh\n{MARKER}; `squadctl hooks uninstall` restores the previous hook.\nhook_dir=$(dirname \"$0\")\n"
    );
    let chain = |stdin: bool| {
        let feed = if stdin {
            "printf '%s\\n' \"$input\" | "
        } else {
            ""
        };
        format!(
            "if [ -x \"$hook_dir/{name}.{CHAINED}\" ]; then\n  {feed}\"$hook_dir/{name}.{CHAINED}\" \"$@\" || exit $?\nfi\n"
        )
    };
    match name {
        "pre-commit" => format!("{head}{}exec {program} check --staged\n", chain(false)),
        "commit-msg" => format!(
            "{head}{}if [ -n \"$SQUAD_TASK\" ]; then\n  git interpret-trailers --in-place --if-exists doNothing --trailer \"Squad-Task: $SQUAD_TASK\" \"$1\" || exit $?\nfi\n",
            chain(false)
        ),
        _ => format!(
            "{head}input=$(cat)\n{}printf '%s\\n' \"$input\" | while read -r local_ref local_sha remote_ref remote_sha; do\n  [ -n \"$local_sha\" ] || continue\n  # A deleted ref pushes nothing.\n  case \"$local_sha\" in *[!0]*) ;; *) continue ;; esac\n  case \"$remote_sha\" in\n    *[!0]*) base=$remote_sha ;;\n    *)\n      # A new branch: the commits no ref of this remote has yet.\n      oldest=$(git rev-list \"$local_sha\" --not --remotes=\"$1\" | tail -n 1)\n      [ -n \"$oldest\" ] || continue\n      base=$(git rev-parse -q --verify \"$oldest^\") || continue ;;\n  esac\n  {program} check --base \"$base\" --head \"$local_sha\" || exit 1\ndone || exit 1\n",
            chain(true)
        ),
    }
}

fn hooks_dir(root: &Path) -> Result<PathBuf, String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--git-path", "hooks"])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{} is not in a git repository: {}",
            root.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(root.join(dir))
}

fn is_ours(path: &Path) -> bool {
    squad_protocol::fsx::read_regular_to_string(path, 1024 * 1024).is_ok_and(|t| t.contains(MARKER))
}

/// Runs `squadctl hooks …`.
pub fn run(root_arg: Option<&Path>, cmd: HooksCommand) -> u8 {
    let root = crate::root::fs_path(&crate::root::here(root_arg)).to_path_buf();
    let dir = match hooks_dir(&root) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let result = match cmd {
        HooksCommand::Install(a) => install(&dir, &a.program),
        HooksCommand::Uninstall(_) => uninstall(&dir),
    };
    match result {
        Ok(lines) => super::print(&lines),
        Err(e) => super::fail(e),
    }
}

fn install(dir: &Path, program: &str) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut report = String::new();
    for name in HOOKS {
        let path = dir.join(name);
        let kept = dir.join(format!("{name}.{CHAINED}"));
        let exists = std::fs::symlink_metadata(&path).is_ok();
        if exists && !is_ours(&path) {
            if std::fs::symlink_metadata(&kept).is_ok() {
                return Err(format!(
                    "{} exists and so does {}; move one of them away first (nothing was changed for {name})",
                    path.display(),
                    kept.display()
                ));
            }
            std::fs::rename(&path, &kept).map_err(|e| format!("{}: {e}", path.display()))?;
            report.push_str(&format!(
                "{name}: kept the existing hook as {}, run first\n",
                kept.display()
            ));
        }
        squad_protocol::write_atomic_with(&path, script(name, program).as_bytes(), Some(0o755))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        report.push_str(&format!("{name}: installed {}\n", path.display()));
    }
    Ok(report)
}

fn uninstall(dir: &Path) -> Result<String, String> {
    let mut report = String::new();
    for name in HOOKS {
        let path = dir.join(name);
        let kept = dir.join(format!("{name}.{CHAINED}"));
        if !is_ours(&path) {
            report.push_str(&format!("{name}: not ours, left alone\n"));
            continue;
        }
        std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if std::fs::symlink_metadata(&kept).is_ok() {
            std::fs::rename(&kept, &path).map_err(|e| format!("{}: {e}", kept.display()))?;
            report.push_str(&format!("{name}: restored the previous hook\n"));
        } else {
            report.push_str(&format!("{name}: removed\n"));
        }
    }
    Ok(report)
}
