//! `runners.worktree_setup` and `runners.worktree_cleanup` (issue 44 item
//! 5, docs/worktrees.md): lines run in a run's new worktree before its
//! agent starts, with the run's cleared environment, bounded by a time
//! limit; a failing setup holds the run with its output; cleanup runs
//! before squadd removes a merged worktree.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// An agent that says what its worktree held when it started (`.env`
/// copied by the setup), writes its work and completes.
const AGENT: &str = r#"#!/bin/sh
echo "agent $SQUAD_TASK $(cat .env 2>/dev/null || echo no-env)" >> "$SQUAD_ROOT/trace.log"
mkdir -p src && echo "work of $SQUAD_TASK" > "src/$SQUAD_TASK.txt" || exit 3
"$SQUADCTL" progress --status completed --percent 100 -q
"#;

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

/// A git repository (`.squad/`, `.env` and the trace ignored) whose runner
/// runs [`AGENT`] in worktrees, with `extra` (YAML lines) under `runners:`;
/// the main checkout holds an uncommitted `.env`.
fn project(extra: &str) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    init_session(&root, "setup");
    let agent = root.join("agent.sh");
    fs::write(&agent, AGENT).unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  worktree: true\n  retry_backoff: 1h\n{extra}  agents:\n    \"*\":\n      command: [\"{}\"]\n      max_retries: 0\n      env:\n        SQUADCTL: \"{}\"\n",
            agent.display(),
            env!("CARGO_BIN_EXE_squadctl"),
        ),
    );
    fs::write(
        root.join(".gitignore"),
        "/.squad/\n/agent.sh\n/trace.log\n.env\n",
    )
    .unwrap();
    write(&root, "README.md", "project\n");
    git_ok(&root, &["init", "-q", "-b", "main"]);
    git_ok(&root, &["add", "-A"]);
    git_ok(&root, &["commit", "-q", "-m", "start"]);
    fs::write(root.join(".env"), "API=local\n").unwrap();
    Project { _tmp: tmp, root }
}

fn trace(root: &Path) -> String {
    fs::read_to_string(root.join("trace.log")).unwrap_or_default()
}

fn new_task(root: &Path) {
    crate::worktree::tree_task(root, "task_1", "alpha");
}

#[test]
fn setup_runs_before_the_agent_with_the_runs_environment_and_cleanup_before_removal() {
    if !crate::worktree::git_or_skip() {
        return;
    }
    let p = project(
        "  worktree_setup:\n    - cp \"$SQUAD_ROOT/.env\" .\n    - echo \"setup $SQUAD_TASK secret=[${SQUAD_TEST_SECRET:-}] $(pwd)\" >> \"$SQUAD_ROOT/trace.log\"\n  worktree_cleanup:\n    - echo \"cleanup $SQUAD_TASK $(cat .env)\" >> \"$SQUAD_ROOT/trace.log\"\n",
    );
    // squadd's own environment holds a secret no setup line may see.
    let _d = Daemon::start_with_env(&p.root, &[("SQUAD_TEST_SECRET", "s3cr3t")]);
    new_task(&p.root);
    let r = crate::worktree::settled_run(&p.root, "task_1");
    assert_eq!(r["merge"]["state"], "merged", "{r:#}");
    let tree = r["worktree"].as_str().unwrap();
    let t = trace(&p.root);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines,
        [
            format!("setup task_1 secret=[] {tree}").as_str(),
            "agent task_1 API=local",
            "cleanup task_1 API=local",
        ],
        "{t}"
    );
    // The copied .env stays out of the branch (the team ignores it), and
    // the setup's output is in run.log, before the agent's.
    let files = git_ok(&p.root, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!files.contains(".env"), "{files}");
    let log = fs::read_to_string(
        crate::worktree::walk(&p.root.join(".squad/sessions"))
            .into_iter()
            .find(|f| f.ends_with("runs/task_1/run.log"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        log.contains("[squadd: worktree setup: cp \"$SQUAD_ROOT/.env\" .]"),
        "{log}"
    );
    assert!(log.contains("[squadd: worktree cleanup: echo"), "{log}");
    // What a trivial setup costs (docs/worktrees.md quotes it).
    let done = crate::worktree::walk(&p.root.join(".squad/sessions"))
        .into_iter()
        .find(|f| f.ends_with("runs/task_1/setup.json"))
        .unwrap();
    let v: Value = serde_json::from_str(&fs::read_to_string(done).unwrap()).unwrap();
    eprintln!("worktree setup of 2 trivial lines took {} ms", v["took_ms"]);
}

/// The run of task_1 as `runs --all --json` shows it once it failed.
fn failed_run(root: &Path) -> Value {
    eventually("the run failed to start", || {
        let out = run(ctl(root).args(["runs", "--all", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v.as_array()?
            .iter()
            .find(|r| r["task"] == "task_1" && r["state"] == "failed")
            .cloned()
    })
}

fn lead_message(root: &Path) -> String {
    eventually("a message to the lead", || {
        crate::worktree::walk(&root.join(".squad/sessions"))
            .into_iter()
            .find(|f| {
                f.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("role-comm-squadd-to-lead-"))
            })
            .and_then(|f| fs::read_to_string(f).ok())
    })
}

#[test]
fn a_failing_setup_holds_the_run_with_the_tail_of_its_output() {
    if !crate::worktree::git_or_skip() {
        return;
    }
    let p = project(
        "  worktree_setup:\n    - 'echo installing; echo \"npm ERR! missing: left-pad\" >&2; exit 7'\n    - echo never >> \"$SQUAD_ROOT/trace.log\"\n",
    );
    let _d = Daemon::start(&p.root);
    new_task(&p.root);
    let r = failed_run(&p.root);
    assert_eq!(r["held"], true, "{r:#}");
    let tail = r["log_tail"].to_string();
    assert!(tail.contains("npm ERR! missing: left-pad"), "{r:#}");
    let text = lead_message(&p.root);
    assert!(text.contains("worktree setup"), "{text}");
    assert!(text.contains("exited 7"), "{text}");
    assert!(text.contains("npm ERR! missing: left-pad"), "{text}");
    // The agent never started, nor did the lines after the failing one.
    assert_eq!(trace(&p.root), "", "nothing ran after the failure");
    let audit = audit_log(&p.root).unwrap_or_default();
    assert!(audit.contains("\"kind\":\"run-failed\""), "{audit}");
}

#[test]
fn a_setup_past_its_time_limit_is_killed_and_the_run_held() {
    if !crate::worktree::git_or_skip() {
        return;
    }
    let p =
        project("  worktree_setup_timeout: 1s\n  worktree_setup:\n    - echo fetching; sleep 60\n");
    let _d = Daemon::start(&p.root);
    new_task(&p.root);
    let r = failed_run(&p.root);
    assert_eq!(r["held"], true, "{r:#}");
    let text = lead_message(&p.root);
    assert!(text.contains("did not finish within 1s"), "{text}");
    assert!(text.contains("fetching"), "{text}");
    assert_eq!(trace(&p.root), "", "the agent never started");
}

#[test]
fn a_bad_setup_line_is_refused_at_its_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    init_session(root, "demo");
    write_policy(
        root,
        "runners:\n  worktree_setup:\n    - npm ci\n    - cp {root}/.env .\n  worktree_setup_timeout: soon\n",
    );
    let out = ctl_run(root, &["validate"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    for at in [
        ".squad/policies.yaml:2:3: error[policy-invalid]: runners.worktree_setup[1]: `{root}`",
        ".squad/policies.yaml:5:3: error[policy-invalid]: runners.worktree_setup_timeout",
    ] {
        assert!(text.contains(at), "{at} missing: {text}");
    }
    assert!(text.contains("$SQUAD_ROOT"), "{text}");
}
