//! What a run's worktree gets before its agent starts (docs/worktrees.md,
//! "What a worktree gets"): the guard's hook settings for the runner's CLI,
//! carried over from the main checkout whether or not they are committed,
//! and kept out of every commit of the run's branch.

use crate::runners::check::{Env, format_of, var};
use crate::runners::hook_file::{carry_guard, hook_file_path};
use crate::worktree::{WorktreeError, git};
use squad_policies::guard_doctor::Cli;
use squad_policies::runners::{RunnerSpec, RunnersPolicy};
use squad_protocol::fsx::{ReadError, read_regular_to_string};
use std::path::{Path, PathBuf};

/// The largest hook file read.
const MAX_HOOK_FILE: u64 = 4 * 1024 * 1024;

/// Why a run's worktree could not be made ready.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// git failed on the worktree.
    #[error(transparent)]
    Git(#[from] WorktreeError),
    /// A hook file could not be read, merged or written.
    #[error("{}: {why}", path.display())]
    Hook {
        /// The hook file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

/// What was done to a worktree for the guard.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Guarded {
    /// The hook file written into the worktree (relative to it), when one
    /// was.
    pub written: Option<String>,
}

/// Gives the worktree of a run of `spec` the guard's settings for the
/// runner's CLI: the guard's entry of the main checkout's project hook
/// file (the one `squadctl guard install` writes) merged into the
/// worktree's copy of that file when the copy lacks it (not committed, or
/// committed without it). The file written never reaches a commit: an
/// untracked one is ignored by a `.gitignore` beside it that ignores only
/// itself and the file, a tracked one is marked `skip-worktree` in the
/// worktree's own index. Nothing is recorded in a CLI's own settings
/// (Codex's trust stays the person's). A runner that is not a known agent
/// CLI, or says `guard: off`, gets nothing.
pub(crate) fn guard_tree(
    root: &Path,
    tree: &Path,
    spec: &RunnerSpec,
) -> Result<Guarded, StartError> {
    let mut done = Guarded::default();
    if spec.guard_off {
        return Ok(done);
    }
    let Some(cli) = spec.command.first().and_then(|p| Cli::of_program(p)) else {
        return Ok(done);
    };
    let env: Env = spec.env.clone().into_iter().collect();
    let format = format_of(cli);
    let get = |name: &str| var(&env, name);
    let hook_error = |path: &Path| {
        let path = path.to_path_buf();
        move |why: String| StartError::Hook { path, why }
    };
    let main_file = hook_file_path(root, format, false, &get).map_err(hook_error(root))?;
    let tree_file = hook_file_path(tree, format, false, &get).map_err(hook_error(root))?;
    let from = match read_regular_to_string(&main_file, MAX_HOOK_FILE) {
        Ok(text) => text,
        // Nothing to carry: the user's own hook file, or none (then the
        // pre-start check refuses the run).
        Err(ReadError::NotFound) => return Ok(done),
        Err(e) => return Err(hook_error(&main_file)(e.to_string())),
    };
    let into = match read_regular_to_string(&tree_file, MAX_HOOK_FILE) {
        Ok(text) => Some(text),
        Err(ReadError::NotFound) => None,
        Err(e) => return Err(hook_error(&tree_file)(e.to_string())),
    };
    // The main checkout's file not being JSON is the doctor's to report.
    let Ok(carried) = carry_guard(&from, into.as_deref(), format) else {
        if into.is_some() && carry_guard(&from, None, format).is_ok() {
            return Err(hook_error(&tree_file)(
                "the worktree's copy (committed in the branch) is not a JSON object the guard's entry can be added to".into(),
            ));
        }
        return Ok(done);
    };
    let rel = tree_file
        .strip_prefix(tree)
        .map(|r| r.display().to_string())
        .unwrap_or_default();
    if let Some(text) = carried {
        crate::safefs::write_atomic_under(tree, &tree_file, text.as_bytes(), 0o644, Some(0o755))
            .map_err(|e| hook_error(&tree_file)(e.to_string()))?;
        keep_out_of_git(tree, &rel)?;
        done.written = Some(rel);
    }
    Ok(done)
}

/// Keeps `rel` (a file squadd wrote into the worktree) out of every commit
/// of the run's branch, the agent's own `git add -A` included: a tracked
/// file is marked `skip-worktree` in the worktree's index; an untracked
/// one is named, with the ignore file itself, in a `.gitignore` beside it.
fn keep_out_of_git(tree: &Path, rel: &str) -> Result<(), StartError> {
    let tracked = |p: &str| git(tree, &["ls-files", "--error-unmatch", "--", p]).is_ok();
    if tracked(rel) {
        git(tree, &["update-index", "--skip-worktree", "--", rel])?;
        return Ok(());
    }
    let path = Path::new(rel);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new(""));
    let ignore_rel = dir.join(".gitignore");
    let ignore = tree.join(&ignore_rel);
    let existing = match read_regular_to_string(&ignore, MAX_HOOK_FILE) {
        Ok(t) => t,
        Err(ReadError::NotFound) => String::new(),
        Err(e) => {
            return Err(StartError::Hook {
                path: ignore,
                why: e.to_string(),
            });
        }
    };
    let mut text = existing.clone();
    for line in [format!("/{name}"), "/.gitignore".to_string()] {
        if !text.lines().any(|l| l == line) {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&line);
            text.push('\n');
        }
    }
    if text != existing {
        crate::safefs::write_atomic_under(tree, &ignore, text.as_bytes(), 0o644, Some(0o755))
            .map_err(|e| StartError::Hook {
                path: ignore.clone(),
                why: e.to_string(),
            })?;
        let ignore_rel = ignore_rel.display().to_string();
        if tracked(&ignore_rel) {
            git(
                tree,
                &["update-index", "--skip-worktree", "--", &ignore_rel],
            )?;
        }
    }
    Ok(())
}

/// A worktree made to look at, as a run's would start (`guard doctor`):
/// detached at the main checkout's HEAD, beside the runs' worktrees
/// (`.squad/worktrees/.doctor/`, where retention does not look), with only the agent CLIs' settings checked out and the
/// guard's settings carried over as [`guard_tree`] carries them for a run.
/// Removed when dropped.
pub(crate) struct ScratchTree {
    root: PathBuf,
    path: PathBuf,
}

/// The folder of the doctor's scratch worktrees in `.squad/worktrees/`.
pub(crate) const SCRATCH_DIR: &str = ".doctor";

/// The agent CLIs' settings in a checkout (what a scratch tree holds).
const CLI_SETTINGS: [&str; 4] = [".claude", ".codex", ".github/hooks", ".gemini"];

impl ScratchTree {
    /// Makes the scratch worktree of `root` for the worktree runners of
    /// `runners`.
    pub(crate) fn make(root: &Path, runners: &RunnersPolicy) -> Result<ScratchTree, StartError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = crate::worktree::ensure_dir(root)?.join(SCRATCH_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| StartError::Hook {
            path: dir.clone(),
            why: e.to_string(),
        })?;
        let path = dir.join(format!("{}-{nanos}", std::process::id()));
        let path_text = path.display().to_string();
        git(
            root,
            &[
                "worktree",
                "add",
                "--no-checkout",
                "--detach",
                &path_text,
                "HEAD",
            ],
        )?;
        let tree = ScratchTree {
            root: root.to_path_buf(),
            path,
        };
        let mut ls = vec!["ls-tree", "-r", "--name-only", "HEAD", "--"];
        ls.extend(CLI_SETTINGS);
        let files = git(root, &ls)?;
        if !files.trim().is_empty() {
            let mut checkout = vec!["checkout", "HEAD", "--"];
            checkout.extend(files.lines());
            git(&tree.path, &checkout)?;
        }
        for spec in runners.agents.values() {
            if spec.worktree.unwrap_or(runners.worktree) {
                guard_tree(root, &tree.path, spec)?;
            }
        }
        Ok(tree)
    }

    /// Its directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchTree {
    fn drop(&mut self) {
        let path = self.path.display().to_string();
        if let Err(e) = git(&self.root, &["worktree", "remove", "--force", &path]) {
            tracing::warn!(error = %e, "cannot remove the doctor's scratch worktree");
        }
    }
}

/// `runners.worktree_setup` for one run: its lines and how they run.
pub(crate) struct Setup<'a> {
    /// The shell lines.
    pub lines: &'a [String],
    /// The time limit for all of them.
    pub limit: std::time::Duration,
    /// The run's environment (cleared: `runners::run_env`).
    pub env: &'a [(String, String)],
    /// run.log's cap.
    pub log_max: u64,
}

/// The record of a worktree's setup that succeeded, in the run's folder.
const SETUP_DONE: &str = "setup.json";

/// Runs the setup lines in the run's worktree unless they already
/// succeeded there (a retry, or `squadctl run` of a held task, reuses the
/// worktree): `fresh` says the worktree was just made. Returns how long
/// the lines took (zero when none ran).
pub(crate) fn set_up(
    tree: &Path,
    run_dir: &Path,
    fresh: bool,
    setup: &Setup<'_>,
) -> Result<std::time::Duration, crate::runners::setup::SetupError> {
    let marker = run_dir.join(SETUP_DONE);
    if fresh {
        // A record of an earlier worktree's setup says nothing of this one.
        let _ = crate::safefs::remove_project_file(&marker);
    }
    if setup.lines.is_empty() {
        return Ok(std::time::Duration::ZERO);
    }
    let same = |text: String| {
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        (v["tree"] == serde_json::json!(tree) && v["lines"] == serde_json::json!(setup.lines))
            .then_some(())
    };
    if !fresh
        && read_regular_to_string(&marker, 64 * 1024)
            .ok()
            .and_then(same)
            .is_some()
    {
        return Ok(std::time::Duration::ZERO);
    }
    let took = crate::runners::setup::run_lines(
        "worktree setup",
        setup.lines,
        tree,
        setup.env,
        setup.limit,
        run_dir,
        setup.log_max,
    )?;
    let record = serde_json::json!({
        "tree": tree,
        "lines": setup.lines,
        "took_ms": took.as_millis() as u64,
    });
    if let Err(e) =
        crate::safefs::write_project_file(&marker, format!("{record}\n").as_bytes(), None)
    {
        tracing::warn!(error = %e, "cannot record a worktree's setup; a retry runs it again");
    }
    tracing::info!(worktree = %tree.display(), took_ms = took.as_millis() as u64, "worktree setup done");
    Ok(took)
}
