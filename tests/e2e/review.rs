//! The review gate (issue 44 item 3, docs/review.md): with
//! `runners.merge: review` (or a plan's `meta.merge: review`) a completed
//! worktree run's branch waits for the lead instead of merging: listed by
//! `squadctl review`, shown with each file's verdict, needing attention
//! (`status --check` fails); approved it merges (judged again) and its
//! dependents run; sent back with a comment a new run starts on the same
//! branch, its earlier commit in place and the comment in its prompt and
//! its agent's inbox; rejected main stays untouched, the branch is kept
//! and the run is recorded rejected. Only the lead may decide.

use crate::support::*;
use crate::worktree::{git_or_skip, tree_project};
use serde_json::Value;
use std::path::Path;

/// The fake agent: records, per run, the branch its worktree is on,
/// whether its prompt holds the lead's comment (`COMMENT-` marker) and
/// whether the earlier run's commit is on its branch; appends a line to
/// `src/<task>.txt` (left uncommitted: squadd commits it), reports
/// completed.
const REVIEW_AGENT: &str = r#"#!/bin/sh
branch=$(git symbolic-ref --short -q HEAD)
if grep -q "COMMENT-" "$SQUAD_PROMPT_FILE"; then prompt=comment; else prompt=plain; fi
if git log --format=%s | grep -q "left uncommitted"; then earlier=yes; else earlier=no; fi
echo "$SQUAD_TASK: branch=$branch prompt=$prompt earlier=$earlier" >> "$TRACE"
mkdir -p src && echo "work of $SQUAD_TASK" >> "src/$SQUAD_TASK.txt" || exit 3
"$SQUADCTL" progress --status completed --percent 100 -q || exit 5
"#;

/// A worktree-mode project whose runner is [`REVIEW_AGENT`] and whose
/// `runners.merge` is `merge`.
pub(crate) fn review_project(merge: &str) -> crate::worktree::TreeProject {
    let p = tree_project("", false);
    std::fs::write(p.root.join("agent.sh"), REVIEW_AGENT).unwrap();
    let policy = std::fs::read_to_string(p.root.join(".squad/policies.yaml")).unwrap();
    let policy = policy.replacen(
        "  worktree: true\n",
        &format!("  worktree: true\n  merge: {merge}\n"),
        1,
    );
    write_policy(&p.root, policy);
    p
}

pub(crate) fn task(root: &Path, id: &str, agent: &str, requires: Option<&str>, review: bool) {
    let instruction = format!("do {id}");
    let mut args = vec![
        "--id",
        id,
        "--agent",
        agent,
        "--instruction",
        &instruction,
        "--allow",
        "src/**",
    ];
    if let Some(r) = requires {
        args.extend(["--requires", r]);
    }
    if review {
        args.push("--review");
    }
    ok(task_new(root, &args));
}

pub(crate) fn review_events(root: &Path, task: &str, action: &str) -> Vec<Value> {
    events(root)
        .into_iter()
        .filter(|e| kind_of(e) == "review" && e["task_id"] == task && e["action"] == action)
        .collect()
}

/// The `n`th `waiting` review event of `task`.
pub(crate) fn waits(root: &Path, task: &str, n: usize) -> Value {
    crate::daemon::eventually_within(
        &format!("{task} waits for review ({n})"),
        std::time::Duration::from_secs(120),
        || review_events(root, task, "waiting").into_iter().nth(n - 1),
    )
}

pub(crate) fn tree_state(session: &Path, task: &str) -> String {
    let text = std::fs::read_to_string(session.join(format!("runs/{task}/worktree.json"))).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["state"].as_str().unwrap_or_default().to_string()
}

pub(crate) fn on_main(root: &Path, path: &str) -> bool {
    run(std::process::Command::new("git").current_dir(root).args([
        "cat-file",
        "-e",
        &format!("main:{path}"),
    ]))
    .status
    .success()
}

/// An agent (SQUAD_AGENT set to a non-lead) asking any review action is
/// refused, and nothing changes.
fn agent_refused(p: &crate::worktree::TreeProject, task: &str) {
    let before = events(&p.root).len();
    for args in [
        vec!["review", "approve", task],
        vec!["review", "reject", task, "-m", "no"],
        vec!["review", "changes", task, "-m", "COMMENT-forged"],
    ] {
        let out = run(ctl(&p.root).env("SQUAD_AGENT", "bravo").args(&args));
        assert_ne!(code(&out), 0, "{args:?}: {}", stdout(&out));
        assert!(stderr(&out).contains("not a lead"), "{}", stderr(&out));
    }
    batch_finished(&p.root);
    assert_eq!(tree_state(&p.session, task), "review");
    let after = events(&p.root);
    assert!(
        !after[before..]
            .iter()
            .any(|e| kind_of(e) == "review" || kind_of(e) == "agent-spawned"),
        "{after:#?}"
    );
}

/// A task whose plan asks for review (`--review`, the policy's merge is
/// `auto`): its branch waits, listed with its verdicts, needing attention;
/// its dependent and the session wait; the lead is told; an agent may not
/// decide; the lead's approval merges it, then the dependent runs and
/// the session completes.
#[test]
fn an_approved_branch_is_merged_then_its_dependent_runs_and_the_session_completes() {
    if !git_or_skip() {
        return;
    }
    let p = review_project("auto");
    let d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, true);
    task(&p.root, "task_b", "bravo", Some("task_a"), false);
    let e = waits(&p.root, "task_a", 1);
    assert_eq!(e["detail"], "1 file, +1 \u{2212}0", "{e}");
    batch_finished(&p.root);
    assert_eq!(tree_state(&p.session, "task_a"), "review");
    assert!(!on_main(&p.root, "src/task_a.txt"));

    // `review --json` lists it with its verdicts.
    let list: Value = serde_json::from_str(&ctl_ok(&p.root, &["review", "--json"])).unwrap();
    let items = list.as_array().unwrap();
    assert_eq!(items.len(), 1, "{list:#}");
    let w = &items[0];
    assert_eq!(w["task"], "task_a", "{w}");
    assert_eq!(w["agent"], "alpha", "{w}");
    assert_eq!(w["branch"], "squad/task_a", "{w}");
    assert_eq!(
        (w["files"].as_u64(), w["added"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        (w["boundary"].as_str(), w["locks"].as_str()),
        (Some("ok"), Some("ok"))
    );
    assert!(w["age_secs"].as_i64().is_some(), "{w}");
    let text = ctl_ok(&p.root, &["review"]);
    assert!(text.contains("task_a") && text.contains("alpha"), "{text}");
    // `review show`: the diff, each file with its verdict.
    let show = ctl_ok(&p.root, &["review", "show", "task_a"]);
    assert!(show.contains("src/task_a.txt  ok"), "{show}");
    assert!(show.contains("+work of task_a"), "{show}");
    let shown: Value =
        serde_json::from_str(&ctl_ok(&p.root, &["review", "show", "task_a", "--json"])).unwrap();
    assert_eq!(shown["files"][0]["path"], "src/task_a.txt", "{shown:#}");
    assert_eq!(shown["files"][0]["verdict"], "ok", "{shown:#}");

    // Needs attention; `status --check` fails; the dependent waits.
    let v = status_json(&p.root);
    let item = v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "review-waiting")
        .cloned()
        .unwrap_or_else(|| panic!("{v:#}"));
    assert!(
        item["command"]
            .as_str()
            .unwrap()
            .contains("squadctl review approve task_a"),
        "{item}"
    );
    let ready = v["roots"][0]["sessions"][0]["ready"].to_string();
    assert!(!ready.contains("task_b"), "{ready}");
    let check = run(ctl(&p.root).args(["status", "--check"]));
    assert_ne!(code(&check), 0, "{}", stdout(&check));
    let all = events(&p.root);
    assert!(
        !all.iter()
            .any(|e| kind_of(e) == "agent-spawned" && e["task_id"] == "task_b"),
        "{all:#?}"
    );
    assert!(
        !all.iter().any(|e| kind_of(e) == "session-ended"),
        "{all:#?}"
    );
    // The lead is told.
    crate::daemon::eventually("the lead is told", || {
        crate::worktree::walk(&p.session).into_iter().find(|f| {
            std::fs::symlink_metadata(f).is_ok_and(|m| m.is_file())
                && std::fs::read_to_string(f).is_ok_and(|t| {
                    t.contains("to_agent: lead") && t.contains("review waiting: task_a (1 file")
                })
        })
    });

    // `top` lists it under what needs you.
    if crate::attention::have_tmux() {
        let tmux = crate::attention::start_top(&p.root, "200", "40");
        tmux.wait_for(&["NEEDS YOU", "squad/task_a of task_a waits for your review"]);
        run(tmux.cmd().args(["kill-server"]));
    }

    agent_refused(&p, "task_a");

    // The lead approves: merged, the dependent runs, the session completes.
    let approved = ctl_ok(&p.root, &["review", "approve", "task_a"]);
    assert!(approved.contains("task_a merged"), "{approved}");
    assert!(on_main(&p.root, "src/task_a.txt"));
    assert_eq!(review_events(&p.root, "task_a", "approved").len(), 1);
    let ended = crate::daemon::eventually_within(
        "session-ended",
        std::time::Duration::from_secs(120),
        || {
            events(&p.root)
                .into_iter()
                .find(|e| kind_of(e) == "session-ended")
        },
    );
    assert_eq!(ended["status"], "completed", "{ended}");
    assert!(on_main(&p.root, "src/task_b.txt"), "task_b merged (auto)");
    let trace = std::fs::read_to_string(&p.trace).unwrap();
    assert!(trace.contains("task_b: branch=squad/task_b"), "{trace}");
    let check = run(ctl(&p.root).args(["status", "--check"]));
    assert_eq!(code(&check), 0, "{}{}", stdout(&check), stderr(&check));
    d.terminate();
}

/// `review changes`: the comment reaches the agent's inbox and the next
/// run's prompt; that run starts on the same branch with the earlier
/// commit; its end waits for review again. Then `review reject`: main
/// untouched, the branch kept, the run recorded rejected.
#[test]
fn changes_start_a_new_run_on_the_same_branch_with_the_comment_and_reject_keeps_main_untouched() {
    if !git_or_skip() {
        return;
    }
    let p = review_project("review");
    let base = git_ok(&p.root, &["rev-parse", "main"]).trim().to_string();
    let d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, false);
    waits(&p.root, "task_a", 1);
    batch_finished(&p.root);
    agent_refused(&p, "task_a");

    let sent = ctl_ok(
        &p.root,
        &[
            "review",
            "changes",
            "task_a",
            "-m",
            "COMMENT-42 handle the empty list",
        ],
    );
    assert!(sent.contains("task_a sent back"), "{sent}");
    let e = review_events(&p.root, "task_a", "changes");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["detail"], "COMMENT-42 handle the empty list");
    // The second run waits for review again.
    let again = waits(&p.root, "task_a", 2);
    assert_eq!(again["detail"], "1 file, +2 \u{2212}0", "{again}");
    let trace = std::fs::read_to_string(&p.trace).unwrap();
    let runs: Vec<&str> = trace.lines().filter(|l| l.starts_with("task_a:")).collect();
    assert_eq!(
        runs,
        vec![
            "task_a: branch=squad/task_a prompt=plain earlier=no",
            "task_a: branch=squad/task_a prompt=comment earlier=yes",
        ],
        "{trace}"
    );
    let prompt = std::fs::read_to_string(p.session.join("runs/task_a/prompt.md")).unwrap();
    assert!(prompt.contains("## Changes asked in review"), "{prompt}");
    assert!(
        prompt.contains("COMMENT-42 handle the empty list"),
        "{prompt}"
    );
    // The comment is in alpha's inbox.
    let inbox: Value =
        serde_json::from_str(&ctl_ok(&p.root, &["inbox", "list", "alpha", "--json"])).unwrap();
    let comment = inbox["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["subject"] == "changes asked in review of task_a")
        .unwrap_or_else(|| panic!("{inbox:#}"));
    let text = std::fs::read_to_string(p.root.join(comment["path"].as_str().unwrap())).unwrap();
    assert!(text.contains("COMMENT-42 handle the empty list"), "{text}");

    // Rejected: main untouched, the branch kept, the run rejected.
    let rejected = ctl_ok(
        &p.root,
        &["review", "reject", "task_a", "-m", "wrong approach"],
    );
    assert!(rejected.contains("task_a rejected"), "{rejected}");
    let e = review_events(&p.root, "task_a", "rejected");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0]["detail"], "wrong approach");
    assert_eq!(tree_state(&p.session, "task_a"), "rejected");
    assert_eq!(git_ok(&p.root, &["rev-parse", "main"]).trim(), base);
    assert!(!on_main(&p.root, "src/task_a.txt"));
    let branch = git_ok(&p.root, &["show", "squad/task_a:src/task_a.txt"]);
    assert_eq!(branch, "work of task_a\nwork of task_a\n");
    let runs: Value = serde_json::from_str(&ctl_ok(&p.root, &["runs", "--all", "--json"])).unwrap();
    let rec = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task"] == "task_a")
        .cloned()
        .unwrap_or_else(|| panic!("{runs:#}"));
    assert_eq!(rec["state"], "rejected", "{rec:#}");
    assert_eq!(rec["completed"], false, "{rec:#}");
    // Nothing waits for review any more, nothing starts it again.
    let list = ctl_ok(&p.root, &["review", "--json"]);
    assert_eq!(list.trim(), "[]");
    batch_finished(&p.root);
    let trace = std::fs::read_to_string(&p.trace).unwrap();
    assert_eq!(
        trace.lines().filter(|l| l.starts_with("task_a:")).count(),
        2
    );
    d.terminate();
}

/// merge: auto (the default) is unchanged: a completed run merges at
/// once, with no `review` event and nothing to review.
#[test]
fn merge_auto_merges_at_once_with_nothing_to_review() {
    if !git_or_skip() {
        return;
    }
    let p = review_project("auto");
    let d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, false);
    wait_event(&p.root, "merged", |e| {
        kind_of(e) == "worktree-merge" && e["state"] == "merged"
    });
    assert!(on_main(&p.root, "src/task_a.txt"));
    assert!(!events(&p.root).iter().any(|e| kind_of(e) == "review"));
    assert_eq!(ctl_ok(&p.root, &["review", "--json"]).trim(), "[]");
    d.terminate();
}

/// The review-waiting item's command, followed as a person would: show,
/// decide, approve; the item is gone and `status --check` passes.
#[test]
fn a_waiting_review_is_resolved_by_its_command() {
    if !git_or_skip() {
        return;
    }
    let p = review_project("review");
    let _d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, false);
    waits(&p.root, "task_a", 1);
    batch_finished(&p.root);
    let item = crate::resolve::the_item(&p.root, "review-waiting");
    let command = item["command"].as_str().unwrap();
    let acted = crate::resolve::follow(&p.root, command, |step| {
        assert!(step.starts_with("decide"), "{step}");
    });
    assert_eq!(acted.len(), 1, "{command}");
    crate::resolve::resolved(&p.root, "review-waiting");
    assert!(on_main(&p.root, "src/task_a.txt"));
}

/// A `merge:` that is neither `auto` nor `review`, in the policy or in a
/// plan, is refused with its file, line and column and the values allowed.
#[test]
fn a_wrong_merge_value_is_refused_where_it_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let session = init_session(&root, "merge");
    write_policy(&root, "runners:\n  worktree: true\n  merge: later\n");
    let out = run(ctl(&root).args(["validate"]));
    assert_ne!(code(&out), 0);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(said.contains(".squad/policies.yaml:3:3"), "{said}");
    assert!(
        said.contains("`auto`") && said.contains("`review`"),
        "{said}"
    );
    write_policy(&root, "runners:\n  worktree: true\n");
    std::fs::write(
        session.join("role-plan-alpha-task_a.md"),
        plan_text("task_a", "alpha", "")
            .replace("priority: high\n", "priority: high\n  merge: later\n"),
    )
    .unwrap();
    let out = run(ctl(&root).args(["validate"]));
    assert_ne!(code(&out), 0);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(said.contains("role-plan-alpha-task_a.md:6:10"), "{said}");
    assert!(said.contains("allowed: review"), "{said}");
}

/// Approval is judged again at merge time: a file outside the task's
/// boundaries committed on the branch while it waited (by the agent, or
/// anyone with the worktree) holds it at merge; main never gets it.
#[test]
fn an_approved_branch_changed_while_it_waited_is_judged_again_and_held() {
    if !git_or_skip() {
        return;
    }
    let p = review_project("review");
    let _d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, false);
    waits(&p.root, "task_a", 1);
    batch_finished(&p.root);
    let tree = p
        .root
        .join(".squad/worktrees")
        .join(p.session.file_name().unwrap())
        .join("task_a");
    std::fs::write(tree.join("secret.txt"), "not mine\n").unwrap();
    git_ok(&tree, &["add", "secret.txt"]);
    git_ok(
        &tree,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@example.com",
            "commit",
            "-q",
            "-m",
            "later",
        ],
    );
    // `review show` already says so.
    let show = ctl_ok(&p.root, &["review", "show", "task_a"]);
    assert!(show.contains("secret.txt  refused"), "{show}");
    let out = run(ctl(&p.root).args(["review", "approve", "task_a"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("task_a held at merge"),
        "{}",
        stdout(&out)
    );
    assert_eq!(tree_state(&p.session, "task_a"), "held");
    assert!(!on_main(&p.root, "secret.txt") && !on_main(&p.root, "src/task_a.txt"));
    let v = status_json(&p.root);
    let kinds: Vec<&str> = v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"branch-held") && !kinds.contains(&"review-waiting"),
        "{kinds:?}"
    );
}

/// squadd killed (-9) while a review waits: the restarted squadd finds
/// the branch waiting (worktree.json), merges nothing by itself, keeps
/// the dependent waiting, and the lead's approval then merges it.
#[test]
fn a_review_waiting_when_squadd_is_killed_still_waits_after_the_restart() {
    if !git_or_skip() {
        return;
    }
    let p = review_project("review");
    let d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, false);
    task(&p.root, "task_b", "bravo", Some("task_a"), false);
    waits(&p.root, "task_a", 1);
    batch_finished(&p.root);
    d.kill9();
    let d = crate::daemon::Daemon::start(&p.root);
    batch_finished(&p.root);
    assert_eq!(tree_state(&p.session, "task_a"), "review");
    assert!(!on_main(&p.root, "src/task_a.txt"));
    let all = events(&p.root);
    assert!(
        !all.iter()
            .any(|e| kind_of(e) == "agent-spawned" && e["task_id"] == "task_b"),
        "{all:#?}"
    );
    let approved = ctl_ok(&p.root, &["review", "approve", "task_a"]);
    assert!(approved.contains("task_a merged"), "{approved}");
    wait_event(&p.root, "task_b spawned", |e| {
        kind_of(e) == "agent-spawned" && e["task_id"] == "task_b"
    });
    d.terminate();
}
