//! `squadctl check`: CI boundary enforcement on a git diff.

use super::validate::OutputArgs;
use crate::exit;
use crate::index::{Entry, scan_root};
use crate::locks::{escapes_root, load_policy};
use crate::root;
use squad_policies::boundary::normalize;
use squad_policies::check::{Change, Facts, Task, check_changes};
use squad_protocol::report::{self, Totals};
use squad_protocol::tree::{SQUAD_DIR, Scope, default_threads, validate_scopes};
use std::path::{Path, PathBuf};
use std::process::Command;

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
    /// BASE..HEAD are checked.
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
    /// in-progress task, else to tasks listing them in artifacts_created.
    #[arg(long, conflicts_with_all = ["base", "changed"])]
    pub staged: bool,

    /// With `--changed` or `--staged`: the task every path is attributed to.
    #[arg(long, value_name = "T")]
    pub task: Option<String>,

    #[allow(missing_docs)]
    #[command(flatten)]
    pub output: OutputArgs,
}

fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["-c", "core.quotePath=false"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| "git printed non-UTF-8 paths".to_string())
}

/// `Squad-Task:` trailer values of a commit message.
pub fn trailer_tasks(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| {
            let (key, value) = l.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case("squad-task")
                .then_some(value)
        })
        .flat_map(|v| v.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()))
        .map(str::to_string)
        .collect()
}

/// The changes of BASE..HEAD, one per (commit, path); renames give both sides.
fn git_changes(root: &Path, base: &str, head: &str) -> Result<Vec<Change>, String> {
    let range = format!("{base}..{head}");
    let log = git(
        root,
        &[
            "log",
            "--reverse",
            "--relative",
            "-M",
            "--name-status",
            "--format=%x1e%H%x1f%B%x1f",
            &range,
        ],
    )?;
    let mut changes = Vec::new();
    for record in log.split('\x1e').filter(|r| !r.trim().is_empty()) {
        let mut fields = record.splitn(3, '\x1f');
        let (Some(hash), Some(body), Some(files)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let tasks = trailer_tasks(body);
        for line in files.lines().filter(|l| !l.trim().is_empty()) {
            let parts: Vec<&str> = line.split('\t').collect();
            let status = parts[0].chars().next().unwrap_or('M');
            for path in &parts[1..] {
                changes.push(Change {
                    path: (*path).to_string(),
                    status,
                    commit: Some(hash.trim().to_string()),
                    trailer_tasks: tasks.clone(),
                });
            }
        }
    }
    Ok(changes)
}

/// The staged changes, one per path; renames give both sides.
fn staged_changes(root: &Path, task: Option<String>) -> Result<Vec<Change>, String> {
    let out = git(
        root,
        &["diff", "--cached", "--relative", "-M", "--name-status"],
    )?;
    let mut changes = Vec::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.split('\t');
        let status = parts.next().and_then(|s| s.chars().next()).unwrap_or('M');
        for path in parts {
            changes.push(Change {
                path: path.to_string(),
                status,
                commit: None,
                trailer_tasks: task.iter().cloned().collect(),
            });
        }
    }
    Ok(changes)
}

/// The task staged changes belong to: `--task`, SQUAD_TASK, or SQUAD_AGENT's
/// single in-progress task (as the edit-time guard finds it).
fn staged_task(root: &Path, explicit: Option<&str>) -> Result<Option<String>, String> {
    let env = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
    if let Some(t) = explicit.map(str::to_string).or_else(|| env("SQUAD_TASK")) {
        return Ok(Some(t));
    }
    match env("SQUAD_AGENT") {
        Some(agent) => Ok(super::guard::find_task(root, Some(&agent), None)?.map(|t| t.task_id)),
        None => Ok(None),
    }
}

/// Tasks, artifacts and owners from the project's session files.
fn facts(root: &Path, changes: &[Change]) -> std::io::Result<(Facts, usize)> {
    let sessions = scan_root(root, default_threads())?;
    let mut facts = Facts::default();
    for (name, s) in &sessions {
        for f in s.files.values() {
            let path = f.path_in(&s.dir);
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let rel = normalize(&rel).unwrap_or(rel);
            match &f.entry {
                Entry::Plan(p) => facts.tasks.push(Task {
                    task_id: p.task_id.clone(),
                    agent: p.agent.clone(),
                    session: name.clone(),
                    allowed: p.allowed.clone(),
                    forbidden: p.forbidden.clone(),
                }),
                Entry::Progress(p) => {
                    for a in &p.artifacts {
                        if let Ok(a) = normalize(a) {
                            facts
                                .artifacts
                                .entry(a)
                                .or_default()
                                .push(p.task_id.clone());
                        }
                    }
                    facts.owners.insert(rel, p.agent.clone());
                }
                Entry::Message(m) => {
                    facts.owners.insert(rel, m.from_agent.clone());
                }
                Entry::Error(e) => {
                    facts.owners.insert(rel, e.agent.clone());
                }
                Entry::Status(_) | Entry::Invalid => {}
            }
        }
    }
    for c in changes {
        if let Ok(p) = normalize(&c.path)
            && let Some(to) = escapes_root(root, &p)
        {
            facts.escapes.insert(p, to);
        }
    }
    Ok((facts, sessions.len()))
}

/// Runs `squadctl check`.
pub fn run(root_arg: Option<&Path>, args: Args) -> u8 {
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
    let changes = match (&args.base, &args.changed) {
        _ if args.staged => {
            match staged_task(&root, args.task.as_deref()).and_then(|t| staged_changes(&root, t)) {
                Ok(c) => c,
                Err(e) => return super::fail(e),
            }
        }
        (Some(base), _) => {
            let head = args.head.as_deref().unwrap_or("HEAD");
            match git_changes(&root, base, head) {
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
                })
                .collect()
        }
        (None, None) => {
            return super::fail("pass --base REV, --staged, or --changed FILE --task T");
        }
    };
    // Runtime state (.squad/.gitignore) is not the agents' work to check.
    let changes: Vec<Change> = changes
        .into_iter()
        .filter(|c| !crate::layout::is_runtime_path(&c.path))
        .collect();
    let (facts, sessions) = match facts(&root, &changes) {
        Ok(f) => f,
        Err(e) => return super::fail(e),
    };
    let mut diagnostics = check_changes(&policy, &facts, &changes);
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
