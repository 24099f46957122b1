//! `review changes` resumes the agent CLI's own conversation (issue 44
//! items 3 and B, docs/runners.md "Resuming the agent's conversation"): the
//! first run's output names its session id, squadd records it, and the run
//! the lead's `review changes` starts is the same CLI line with `--resume
//! ID` (a stand-in `claude`: the real CLIs' ids are recorded in
//! `real_clis`).

use crate::support::*;
use crate::worktree::{git_or_skip, tree_project, tree_task};
use serde_json::Value;

/// A stand-in named `claude`: records its arguments, prints a Claude Code
/// `system`/`init` line naming its session, writes its file, completes.
const FAKE_CLAUDE: &str = r#"#!/bin/sh
echo "$SQUAD_TASK: $*" >> "$TRACE"
echo '{"type":"system","subtype":"init","session_id":"b43718b3-0374-4e13-8a51-986afaea3241","model":"m"}'
mkdir -p src && echo "work of $SQUAD_TASK" >> "src/$SQUAD_TASK.txt" || exit 3
"$SQUADCTL" progress --status completed --percent 100 -q || exit 5
"#;

fn waits(root: &std::path::Path, n: usize) {
    crate::daemon::eventually(&format!("task_a waits for review ({n})"), || {
        (events(root)
            .iter()
            .filter(|e| e["kind"] == "review" && e["action"] == "waiting")
            .count()
            >= n)
            .then_some(())
    });
}

#[test]
fn review_changes_resumes_the_clis_recorded_conversation() {
    use std::os::unix::fs::PermissionsExt;
    if !git_or_skip() {
        return;
    }
    let p = tree_project("", false);
    let bin = p.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(&claude, FAKE_CLAUDE).unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let policy = std::fs::read_to_string(p.root.join(".squad/policies.yaml")).unwrap();
    let agent = p.root.join("agent.sh").display().to_string();
    let policy = policy
        .replacen(
            "  worktree: true\n",
            "  worktree: true\n  merge: review\n",
            1,
        )
        .replacen(
            &format!("[\"{agent}\"]"),
            &format!("[\"{}\", \"-p\", \"do {{task}}\"]", claude.display()),
            1,
        )
        .replacen(
            "      max_retries: 0\n",
            "      max_retries: 0\n      guard: off\n",
            1,
        );
    write_policy(&p.root, policy);
    let _d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_a", "alpha");
    waits(&p.root, 1);
    batch_finished(&p.root);
    let runs: Value = serde_json::from_str(&ctl_ok(&p.root, &["runs", "--all", "--json"])).unwrap();
    assert_eq!(
        runs[0]["conversation"], "b43718b3-0374-4e13-8a51-986afaea3241",
        "{runs:#}"
    );
    ctl_ok(
        &p.root,
        &["review", "changes", "task_a", "-m", "handle the empty list"],
    );
    waits(&p.root, 2);
    let trace = std::fs::read_to_string(&p.trace).unwrap();
    let lines: Vec<&str> = trace.lines().collect();
    assert_eq!(
        lines,
        [
            "task_a: -p do task_a",
            "task_a: --resume b43718b3-0374-4e13-8a51-986afaea3241 -p do task_a",
        ],
        "{trace}"
    );
}
