//! `squadctl check`: CI boundary enforcement on a git diff.

use super::validate::OutputArgs;
pub(crate) use crate::changes::{NULL_SHA, is_null, trailer_tasks};
use crate::changes::{git_bytes, git_changes, judge, name_status, plans_at};
use crate::exit;
use crate::locks::load_policy;
use crate::root;
use squad_policies::check::Change;
use squad_protocol::report::{self, Totals};
use squad_protocol::tree::{SQUAD_DIR, Scope, default_threads, validate_scopes};
use std::path::{Path, PathBuf};

/// Check a change set for CI: every changed file must belong to a task and lie
/// inside that task's boundaries, outside the project-wide forbidden set;
/// protocol files follow ownership; every protocol file must validate.
///
/// Changed files come from git (`--base`, renames and deletions included),
/// from the index (`--staged`, for a pre-commit hook) or from a list
/// (`--changed FILE --task T`). A file is attributed to a task by
/// a `Squad-Task: <task_id>` trailer on the commit that changed it, else by a
/// progress update listing it in `artifacts_created`. Unattributed changes are
/// reported per policy (`check.unattributed`: error, warn or ignore).
///
/// Exit status: 0 clean, 1 violations, 2 usage or I/O failure (including a
/// checkout without `.squad/`; see docs/ci.md). Rule ids are in docs/ci.md.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Compare against this revision (e.g. `origin/main`): the commits in
    /// BASE..HEAD are checked (merges for what they changed against their
    /// first parent), judged by the task assignments of BASE. All zeros
    /// (git's null name, a first push): every commit up to HEAD.
    #[arg(long, value_name = "REV", required_unless_present_any = ["changed", "staged"])]
    pub base: Option<String>,

    /// The revision under review (default `HEAD`).
    #[arg(long, value_name = "REV", requires = "base")]
    pub head: Option<String>,

    /// Instead of git: a file with one changed path per line (`-` for stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "base", requires = "task")]
    pub changed: Option<PathBuf>,

    /// The staged changes of the commit being made (pre-commit hook). They
    /// are attributed to `--task`, else SQUAD_TASK, else SQUAD_AGENT's single
    /// in-progress task, else to tasks listing them in artifacts_created,
    /// and judged by the task assignments of HEAD.
    #[arg(long, conflicts_with_all = ["base", "changed"])]
    pub staged: bool,

    /// With `--changed` or `--staged`: the task every path is attributed to.
    #[arg(long, value_name = "T")]
    pub task: Option<String>,

    #[allow(missing_docs)]
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The staged changes, one per path; renames give both sides.
fn staged_changes(
    root: &Path,
    task: Option<String>,
    agent: Option<String>,
) -> Result<Vec<Change>, String> {
    let out = git_bytes(
        root,
        &[
            "diff",
            "--cached",
            "--relative",
            "-M",
            "-z",
            "--name-status",
        ],
    )?;
    let mut tokens = out.split(|&b| b == 0).peekable();
    let mut changes = Vec::new();
    for (status, paths) in name_status(&mut tokens) {
        for path in paths {
            changes.push(Change {
                path,
                status,
                commit: None,
                trailer_tasks: task.iter().cloned().collect(),
                agent: agent.clone(),
            });
        }
    }
    Ok(changes)
}

/// The task staged changes belong to: `--task`, SQUAD_TASK, or SQUAD_AGENT's
/// single in-progress task (as the edit-time guard finds it); and the
/// committing agent (SQUAD_AGENT).
fn staged_task(
    root: &Path,
    explicit: Option<&str>,
) -> Result<(Option<String>, Option<String>), String> {
    let env = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
    let agent = env("SQUAD_AGENT");
    if let Some(t) = explicit.map(str::to_string).or_else(|| env("SQUAD_TASK")) {
        return Ok((Some(t), agent));
    }
    match &agent {
        Some(a) => Ok((
            super::guard::find_task(root, Some(a), None)?.map(|t| t.task_id),
            agent,
        )),
        None => Ok((None, None)),
    }
}

/// The agent task `task_id` is assigned to, by HEAD's plans (the working
/// tree's before the first commit); `None` when no plan assigns it.
pub(crate) fn task_owner(root: &Path, task_id: &str) -> Result<Option<String>, String> {
    match plans_at(root, "HEAD")? {
        Some(plans) => Ok(plans
            .into_iter()
            .find(|(_, t)| t.task_id == task_id)
            .map(|(_, t)| t.agent)),
        None => Ok(super::guard::find_task(root, None, Some(task_id))
            .ok()
            .flatten()
            .map(|t| t.agent)),
    }
}

/// Runs `squadctl check`.
pub(crate) fn run(root_arg: Option<&Path>, args: Args) -> u8 {
    // The display root ("" for the current directory keeps paths relative).
    // An explicit root without .squad/ gets check's own message below
    // (what CI needs to provide), not the generic one.
    let shown = match root_arg {
        Some(r) => r.to_path_buf(),
        None => root::resolve(None).unwrap_or_default(),
    };
    let root = root::fs_path(&shown).to_path_buf();
    if !root.join(SQUAD_DIR).is_dir() {
        return super::fail(format!(
            "this checkout has no {SQUAD_DIR}/ at {}: there are no task assignments to check changes against. If your team keeps .squad/ out of git, give CI the session files first (see docs/ci.md)",
            std::fs::canonicalize(&root)
                .unwrap_or(root.clone())
                .display()
        ));
    }
    let policy = match load_policy(&root) {
        Ok(p) => p,
        Err(e) => return super::fail(e),
    };
    // In a linked git worktree of the team root, git's HEAD, index and
    // files are the worktree's (docs/worktrees.md).
    let tree = match std::env::current_dir() {
        Ok(cwd) => root::checkout_for(&root, &cwd),
        Err(_) => root.clone(),
    };
    let changes = match (&args.base, &args.changed) {
        _ if args.staged => {
            match staged_task(&root, args.task.as_deref())
                .and_then(|(t, agent)| staged_changes(&tree, t, agent))
            {
                Ok(c) => c,
                Err(e) => return super::fail(e),
            }
        }
        (Some(base), _) => {
            let head = args.head.as_deref().unwrap_or("HEAD");
            match git_changes(&tree, base, head) {
                Ok(c) => c,
                Err(e) => return super::fail(e),
            }
        }
        (None, Some(file)) => {
            let text = if file.as_os_str() == "-" {
                let mut s = String::new();
                match std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
                    Ok(_) => s,
                    Err(e) => return super::fail(format!("stdin: {e}")),
                }
            } else {
                match std::fs::read_to_string(file) {
                    Ok(t) => t,
                    Err(e) => return super::fail(format!("{}: {e}", file.display())),
                }
            };
            // `--task` names the task (there is no commit to carry a trailer).
            let tasks: Vec<String> = args.task.iter().cloned().collect();
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|p| Change {
                    path: p.to_string(),
                    status: 'M',
                    commit: None,
                    trailer_tasks: tasks.clone(),
                    agent: None,
                })
                .collect()
        }
        (None, None) => {
            return super::fail("pass --base REV, --staged, or --changed FILE --task T");
        }
    };
    // The plans changes are judged by: the base commit's, or HEAD's for a
    // commit being made; never those under review (an agent could widen
    // its own). Before the first commit there are none: the working tree's.
    let head = match (&args.base, args.staged) {
        (Some(_), false) => Some(args.head.as_deref().unwrap_or("HEAD")),
        _ => None,
    };
    let judged_rev = match (&args.base, args.staged) {
        (_, true) => Some("HEAD"),
        (Some(base), _) => Some(base.as_str()),
        _ => None,
    };
    let (changes, mut diagnostics, sessions) =
        match judge(&root, &tree, &policy, changes, judged_rev, head) {
            Ok(j) => j,
            Err(e) => return super::fail(e),
        };
    let validation = match validate_scopes(&[Scope::Root(shown.clone())], default_threads()) {
        Ok(v) => v,
        Err(e) => return super::fail(e),
    };
    diagnostics.extend(validation.diagnostics);
    diagnostics.extend(crate::skills::project_diagnostics(&shown).0);
    diagnostics.extend(crate::memory::project_diagnostics(&shown).0);
    diagnostics.extend(crate::team::project_diagnostics(&shown).0);
    let (format, color) = (args.output.format(), args.output.color());
    let mut paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    paths.sort_unstable();
    paths.dedup();
    let text = report::render(
        format,
        &diagnostics,
        Totals {
            files: paths.len(),
            sessions,
        },
        env!("CARGO_PKG_VERSION"),
        color,
    );
    if super::print(&text) != exit::OK {
        return exit::FAILURE;
    }
    if diagnostics.iter().any(|d| d.is_error()) {
        exit::PROBLEMS
    } else {
        exit::OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers() {
        let body = "Add search\n\nSome text\n\nSquad-Task: task_001\nsquad-task: task_002, task_003\nCo-authored-by: x\n";
        assert_eq!(trailer_tasks(body), ["task_001", "task_002", "task_003"]);
        assert!(trailer_tasks("no trailers").is_empty());
    }
}
