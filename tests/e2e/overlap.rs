//! Overlap told before merge (issue 44 item 4, docs/worktrees.md): two
//! unmerged worktree runs changing the same file are told to the lead (a
//! `branch-overlap` event, one message, a needs-attention item) while both
//! still work, before either merges; runs changing different files are not.

use crate::support::*;
use crate::worktree::{git_or_skip, settled_run, tree_project, tree_task};
use serde_json::Value;
use std::path::Path;

/// The fake agent: writes `src/<task>.txt`, with `$MODE=conflict` also
/// `src/shared.txt`, reports `in_progress` (squadd looks at its branch),
/// notes that in `$TRACE`, waits for `$GATE`, then reports completed.
const OVERLAP_AGENT: &str = r#"#!/bin/sh
mkdir -p src && echo "work of $SQUAD_TASK" > "src/$SQUAD_TASK.txt" || exit 3
if [ "$MODE" = conflict ]; then echo "$SQUAD_TASK" > src/shared.txt; fi
"$SQUADCTL" progress --status in_progress --percent 50 -q || exit 5
echo "$SQUAD_TASK" >> "$TRACE"
while [ ! -e "$GATE" ]; do sleep 0.05; done
"$SQUADCTL" progress --status completed --percent 100 -q || exit 5
"#;

fn project(mode: &str) -> crate::worktree::TreeProject {
    let p = tree_project(mode, true);
    std::fs::write(p.root.join("agent.sh"), OVERLAP_AGENT).unwrap();
    p
}

/// The lead's messages in the session whose subject starts with `prefix`
/// (each once: the message files, not their inbox copies).
fn told_lead(session: &Path, prefix: &str) -> Vec<String> {
    let subject = format!("subject: '{prefix}");
    crate::worktree::walk(session)
        .into_iter()
        .filter(|f| !f.starts_with(session.join("inbox")))
        .filter(|f| std::fs::symlink_metadata(f).is_ok_and(|m| m.is_file()))
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter(|t| t.contains("to_agent: lead") && t.contains(&subject))
        .collect()
}

fn overlap_items(root: &Path) -> Vec<Value> {
    let v = status_json(root);
    v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "branch-overlap")
        .cloned()
        .collect()
}

/// Both runs change src/shared.txt and wait at the gate: the lead is told
/// once (event, message naming both tasks and the file, an item whose
/// command, followed, settles it) while neither can merge; opening the
/// gate, the overlap's event precedes every merge.
#[test]
fn two_runs_changing_one_file_are_told_to_the_lead_before_either_merges() {
    if !git_or_skip() {
        return;
    }
    let p = project("conflict");
    let _d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_1", "alpha");
    tree_task(&p.root, "task_2", "bravo");
    let e = wait_event(&p.root, "branch-overlap", |e| {
        kind_of(e) == "branch-overlap" && e["other"].is_string()
    });
    assert_eq!(e["task_id"], "task_1", "{e}");
    assert_eq!(e["other"], "task_2", "{e}");
    assert_eq!(e["files"], serde_json::json!(["src/shared.txt"]), "{e}");
    let told = crate::daemon::eventually("the lead is told", || {
        let t = told_lead(&p.session, "overlap: ");
        (!t.is_empty()).then_some(t)
    });
    assert!(
        told[0].contains("overlap: task_1 and task_2 both change src/shared.txt"),
        "{}",
        told[0]
    );
    // Every progress update of both is looked at; the pair is told once.
    crate::daemon::eventually("both runs reported progress", || {
        let t = std::fs::read_to_string(&p.trace).unwrap_or_default();
        (t.lines().count() == 2).then_some(())
    });
    batch_finished(&p.root);
    assert_eq!(told_lead(&p.session, "overlap: ").len(), 1);
    let all = events(&p.root);
    assert!(
        !all.iter().any(|e| kind_of(e) == "worktree-merge"),
        "nothing merges behind the gate: {all:#?}"
    );

    let items = overlap_items(&p.root);
    assert_eq!(items.len(), 1, "{items:#?}");
    let summary = items[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("task_1 and task_2 both change src/shared.txt"),
        "{summary}"
    );
    let check = run(ctl(&p.root).args(["status", "--check"]));
    assert_ne!(code(&check), 0, "{}", stdout(&check));
    // Its command, followed: the lead decides (a person's step), then
    // acknowledges; the item is gone and `status --check` passes.
    let command = items[0]["command"].as_str().unwrap();
    let acted = crate::resolve::follow(&p.root, command, |step| {
        assert!(step.contains("task_1 and task_2"), "{step}");
    });
    assert_eq!(acted.len(), 1, "{command}");
    crate::resolve::resolved(&p.root, "branch-overlap");

    std::fs::write(p.root.join("go"), "").unwrap();
    settled_run(&p.root, "task_1");
    settled_run(&p.root, "task_2");
    let all = events(&p.root);
    let at = |k: &str| all.iter().position(|e| kind_of(e) == k);
    let (told_at, merged_at) = (at("branch-overlap"), at("worktree-merge"));
    assert!(
        told_at.is_some() && merged_at.is_some() && told_at < merged_at,
        "{all:#?}"
    );
    assert_eq!(told_lead(&p.session, "overlap: ").len(), 1);
}

/// Two runs changing different files: squadd looks at each progress
/// update and says nothing; both merge.
#[test]
fn two_runs_changing_different_files_are_not_told() {
    if !git_or_skip() {
        return;
    }
    let p = project("");
    let _d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_1", "alpha");
    tree_task(&p.root, "task_2", "bravo");
    crate::daemon::eventually("both runs reported progress", || {
        let t = std::fs::read_to_string(&p.trace).unwrap_or_default();
        (t.lines().count() == 2).then_some(())
    });
    std::fs::write(p.root.join("go"), "").unwrap();
    for task in ["task_1", "task_2"] {
        let r = settled_run(&p.root, task);
        assert_eq!(r["merge"]["state"], "merged", "{r:#}");
    }
    batch_finished(&p.root);
    let all = events(&p.root);
    assert!(
        !all.iter().any(|e| kind_of(e) == "branch-overlap"),
        "{all:#?}"
    );
    assert!(told_lead(&p.session, "overlap: ").is_empty());
    assert!(told_lead(&p.session, "conflict ahead: ").is_empty());
    assert!(overlap_items(&p.root).is_empty());
}
