//! `squadctl hooks run commit-msg|pre-push`: the work of the git hooks
//! that `hooks install` writes, callable as one line from a hook manager's
//! hook (husky, lefthook, the pre-commit framework).

use std::io::BufRead;
use std::path::Path;
use std::process::Command;

use super::check::{NULL_SHA, is_null};

/// The hooks `hooks run` runs (pre-commit is `squadctl check --staged`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum HookName {
    /// `commit-msg MESSAGE_FILE`.
    CommitMsg,
    /// `pre-push REMOTE URL`, the pushed refs on stdin.
    PrePush,
}

/// Runs one hook; the exit code stops the commit or push when non-zero.
pub(crate) fn run(root: &Path, hook: HookName, args: &[String]) -> u8 {
    let result = match hook {
        HookName::CommitMsg => commit_msg(root, args),
        HookName::PrePush => pre_push(root, args),
    };
    match result {
        Ok(code) => code,
        Err(e) => super::fail(e),
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn git(root: &Path, args: &[&str]) -> Result<std::process::Output, String> {
    Command::new("git")
        .current_dir(super::super::root::fs_path(root))
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))
}

/// commit-msg: with SQUAD_AGENT known, a `Squad-Task` trailer naming
/// another agent's task is refused (an agent claims only its own tasks);
/// then `Squad-Task: $SQUAD_TASK` is added when the message names no task,
/// and `Squad-Agent: $SQUAD_AGENT` is set (replacing one the message
/// claimed), so that `check` knows who committed.
fn commit_msg(root: &Path, args: &[String]) -> Result<u8, String> {
    let Some(file) = args.first() else {
        return Err("hooks run commit-msg takes the message file git passes the hook".into());
    };
    let text = squad_protocol::fsx::read_regular_to_string(Path::new(file), 1024 * 1024)
        .map_err(|e| format!("{file}: {e}"))?;
    let agent = env("SQUAD_AGENT");
    let task = env("SQUAD_TASK");
    if let Some(agent) = &agent {
        let named: Vec<String> = super::check::trailer_tasks(&text)
            .into_iter()
            .chain(task.clone())
            .collect();
        for t in named {
            let owner = super::check::task_owner(root, &t)?;
            if let Some(owner) = owner
                && owner != *agent
            {
                eprintln!(
                    "squad commit-msg: {file}: error[foreign-task-trailer]: `Squad-Task: {t}` names {owner}'s task, but SQUAD_AGENT={agent} is committing\n  = hint: attribute the commit to your own task (SQUAD_TASK); ask {owner} or the lead if the change belongs to {t}"
                );
                return Ok(crate::exit::PROBLEMS);
            }
        }
    }
    let mut trailers = Vec::new();
    if let Some(t) = &task {
        trailers.push(("doNothing", format!("Squad-Task: {t}")));
    }
    if let Some(a) = &agent {
        trailers.push(("replace", format!("Squad-Agent: {a}")));
    }
    for (if_exists, trailer) in trailers {
        let out = git(
            root,
            &[
                "interpret-trailers",
                "--in-place",
                "--if-exists",
                if_exists,
                "--trailer",
                &trailer,
                file,
            ],
        )?;
        if !out.status.success() {
            return Err(format!(
                "git interpret-trailers: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(crate::exit::OK)
}

/// pre-push: `squadctl check` over the commits each pushed ref adds. A new
/// branch (or a remote commit this clone lacks) starts after the newest
/// commit a remote-tracking ref of that remote has, any remote's when the
/// push goes to a URL, and from the first commit when none has any.
fn pre_push(root: &Path, args: &[String]) -> Result<u8, String> {
    let remote = args.first().map(String::as_str).unwrap_or_default();
    let remotes = git(root, &["remote"])?;
    let named = String::from_utf8_lossy(&remotes.stdout)
        .lines()
        .any(|r| r == remote);
    let exclude = if named {
        format!("--remotes={remote}")
    } else {
        "--remotes".to_string()
    };
    let program = std::env::current_exe().map_err(|e| format!("cannot find squadctl: {e}"))?;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, local_sha, _, remote_sha] = fields.as_slice() else {
            continue;
        };
        // A deleted ref pushes nothing.
        if is_null(local_sha) {
            continue;
        }
        let known = !is_null(remote_sha)
            && git(
                root,
                &["cat-file", "-e", &format!("{remote_sha}^{{commit}}")],
            )?
            .status
            .success();
        let base = if known {
            remote_sha.to_string()
        } else {
            let list = git(root, &["rev-list", local_sha, "--not", &exclude])?;
            let text = String::from_utf8_lossy(&list.stdout);
            let Some(oldest) = text.lines().last() else {
                continue;
            };
            let parent = git(
                root,
                &["rev-parse", "-q", "--verify", &format!("{oldest}^")],
            )?;
            if parent.status.success() {
                String::from_utf8_lossy(&parent.stdout).trim().to_string()
            } else {
                NULL_SHA.to_string()
            }
        };
        let status = Command::new(&program)
            .current_dir(super::super::root::fs_path(root))
            .args(["check", "--base", &base, "--head", local_sha])
            .status()
            .map_err(|e| format!("cannot run squadctl check: {e}"))?;
        if !status.success() {
            return Ok(crate::exit::PROBLEMS);
        }
    }
    Ok(crate::exit::OK)
}
