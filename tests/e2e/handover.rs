//! Hand-over on the branch (issue 44 item 1, docs/worktrees.md): in
//! worktree mode a task's dependents start from the session's branch with
//! its prerequisites' work merged, the session ends only after its last
//! merge, and a branch held at merge keeps its dependents and its session
//! waiting, shows under "needs attention" (`status --json`, `status
//! --check`, `top`) with the command that settles it, and is told to the
//! lead by what happened.

use crate::support::*;
use crate::worktree::{git_or_skip, tree_project};
use serde_json::Value;
use std::path::Path;

/// The fake agent: records the files of `src/` its worktree holds at start
/// (`TASK: a b c`), writes `src/<task>.txt`, the task `held` also
/// `secret.txt` (outside its boundaries), reports completed, then lingers
/// as real CLIs do while they wrap up: the window in which a dependent
/// started on `completed` would miss this work.
const CHAIN_AGENT: &str = r#"#!/bin/sh
echo "$SQUAD_TASK: $(ls src 2>/dev/null | tr '\n' ' ')" >> "$TRACE"
mkdir -p src && echo "work of $SQUAD_TASK" > "src/$SQUAD_TASK.txt" || exit 3
if [ "$SQUAD_TASK" = task_held ]; then echo "not mine" > secret.txt; fi
"$SQUADCTL" progress --status completed --percent 100 -q || exit 5
sleep 0.3
"#;

/// A worktree-mode project (see `worktree::tree_project`) whose runner is
/// [`CHAIN_AGENT`].
fn chain_project() -> crate::worktree::TreeProject {
    let p = tree_project("", false);
    std::fs::write(p.root.join("agent.sh"), CHAIN_AGENT).unwrap();
    p
}

/// A task on `src/**` for `agent`, merged as the policy says.
fn task(root: &Path, id: &str, agent: &str, requires: Option<&str>) {
    crate::review::task(root, id, agent, requires, false);
}

/// Twenty runs, each requiring the one before: every dependent's worktree
/// holds every prerequisite's file when its agent starts, and
/// `session-ended` comes after the last merge. Before issue 44 a dependent
/// started on its prerequisite's `completed`, before the merge.
#[test]
fn each_of_twenty_chained_runs_starts_with_its_prerequisites_work_and_the_session_ends_after_the_last_merge()
 {
    if !git_or_skip() {
        return;
    }
    let p = chain_project();
    let d = crate::daemon::Daemon::start(&p.root);
    let ids: Vec<String> = (1..=20).map(|i| format!("task_{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let agent = format!("agent-{}", i % 3);
        task(
            &p.root,
            id,
            &agent,
            i.checked_sub(1).map(|j| ids[j].as_str()),
        );
    }
    // Twenty runs one after the other: a loaded machine (the suite runs
    // tests in parallel) stretches them past `eventually`'s 30 s.
    let ended = crate::daemon::eventually_within(
        "session-ended",
        std::time::Duration::from_secs(300),
        || {
            events(&p.root)
                .into_iter()
                .find(|e| kind_of(e) == "session-ended")
        },
    );
    assert_eq!(ended["status"], "completed", "{ended}");
    let trace = std::fs::read_to_string(&p.trace).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let line = trace
            .lines()
            .find(|l| l.starts_with(&format!("{id}:")))
            .unwrap_or_else(|| panic!("{id} ran:\n{trace}"));
        for before in &ids[..i] {
            assert!(
                line.contains(&format!("{before}.txt")),
                "{id} started without {before}'s work: {line}\n{trace}"
            );
        }
    }
    // Every merge is said before the session's end.
    let events = events(&p.root);
    let end_at = events
        .iter()
        .position(|e| kind_of(e) == "session-ended")
        .unwrap();
    let merges: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| kind_of(e) == "worktree-merge")
        .map(|(i, e)| {
            assert_eq!(e["state"], "merged", "{e}");
            i
        })
        .collect();
    assert_eq!(merges.len(), 20, "{events:#?}");
    assert!(merges.iter().all(|m| *m < end_at), "{events:#?}");
    for id in &ids {
        git_ok(&p.root, &["show", &format!("main:src/{id}.txt")]);
    }
    d.terminate();
}

/// A branch held at merge: its dependent does not start, the session does
/// not end, `status --json` lists it under `needs_attention` with the
/// command that settles it, `status --check` fails, `top` shows it, `task
/// show` says what the dependent waits for, the lead is told what
/// happened; an agent may not drop it; the lead's `merge --drop` lets the
/// dependent and the session go on, the branch kept.
#[test]
fn a_branch_held_at_merge_needs_attention_and_holds_its_dependent_and_session_until_dropped() {
    if !git_or_skip() {
        return;
    }
    let p = chain_project();
    let base = git_ok(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    let d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_held", "alpha", None);
    task(&p.root, "task_after", "bravo", Some("task_held"));
    let e = wait_event(&p.root, "held at merge", |e| {
        kind_of(e) == "worktree-merge" && e["state"] == "held"
    });
    assert_eq!(e["detail"], "1 file outside the task's boundaries", "{e}");
    // What squadd decides after the hold is done before the absences below.
    batch_finished(&p.root);

    let v = status_json(&p.root);
    let items = v["needs_attention"].as_array().unwrap();
    let item = items
        .iter()
        .find(|i| i["kind"] == "branch-held")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(item["task"], "task_held", "{item}");
    let summary = item["summary"].as_str().unwrap();
    assert!(
        summary.contains("held at merge: 1 file outside the task's boundaries"),
        "{summary}"
    );
    let command = item["command"].as_str().unwrap();
    assert!(command.contains("squadctl merge task_held"), "{command}");
    let ready = v["roots"][0]["sessions"][0]["ready"].to_string();
    assert!(!ready.contains("task_after"), "not ready: {ready}");
    let check = run(ctl(&p.root).args(["status", "--check"]));
    assert_ne!(code(&check), 0, "{}", stdout(&check));
    let said = format!("{}{}", stdout(&check), stderr(&check));
    assert!(said.contains("held at merge"), "{said}");

    // The dependent waits, and says why.
    let show = ctl_ok(&p.root, &["task", "show", "task_after", "--json"]);
    let show: Value = serde_json::from_str(&show).unwrap();
    assert_eq!(show["ready"], false, "{show:#}");
    let waits = show["waiting_for_merge"].to_string();
    assert!(
        waits.contains("task_held (held at merge: 1 file outside"),
        "{waits}"
    );
    let text = ctl_ok(&p.root, &["task", "show", "task_after"]);
    assert!(text.contains("waits for the merge of: task_held"), "{text}");
    let all = events(&p.root);
    assert!(
        !all.iter()
            .any(|e| kind_of(e) == "agent-spawned" && e["task_id"] == "task_after"),
        "{all:#?}"
    );
    assert!(
        !all.iter().any(|e| kind_of(e) == "session-ended"),
        "{all:#?}"
    );

    // The lead is told what happened, not "run of held failed".
    let told = crate::daemon::eventually("the lead is told", || {
        crate::worktree::walk(&p.session).into_iter().find(|f| {
            // Regular files only: a run's folder holds its output's FIFO.
            let file = std::fs::symlink_metadata(f).is_ok_and(|m| m.is_file());
            file && std::fs::read_to_string(f).is_ok_and(|t| {
                t.contains("to_agent: lead")
                    && t.contains("subject: 'held at merge: 1 file outside the task''s boundaries'")
            })
        })
    });
    let told = std::fs::read_to_string(told).unwrap();
    assert!(!told.contains("run of task_held failed"), "{told}");
    assert!(
        told.contains("squadctl merge task_held --session"),
        "{told}"
    );

    // `top` lists it under what needs you.
    if crate::attention::have_tmux() {
        let tmux = crate::attention::start_top(&p.root, "200", "40");
        tmux.wait_for(&["NEEDS YOU", "squad/task_held of task_held is held at merge"]);
        run(tmux.cmd().args(["kill-server"]));
    }

    // An agent may not settle it.
    let refused =
        run(ctl(&p.root)
            .env("SQUAD_AGENT", "bravo")
            .args(["merge", "task_held", "--drop"]));
    assert_ne!(code(&refused), 0);
    assert!(
        stderr(&refused).contains("not a lead"),
        "{}",
        stderr(&refused)
    );

    // The lead drops it: the dependent starts, the session ends, main
    // never got the held work and the branch is kept.
    let dropped = ctl_ok(&p.root, &["merge", "task_held", "--drop"]);
    assert!(dropped.contains("task_held dropped"), "{dropped}");
    // Twenty runs one after the other: a loaded machine (the suite runs
    // tests in parallel) stretches them past `eventually`'s 30 s.
    let ended = crate::daemon::eventually_within(
        "session-ended",
        std::time::Duration::from_secs(300),
        || {
            events(&p.root)
                .into_iter()
                .find(|e| kind_of(e) == "session-ended")
        },
    );
    assert_eq!(ended["status"], "completed", "{ended}");
    let trace = std::fs::read_to_string(&p.trace).unwrap();
    assert!(
        trace.lines().any(|l| l.starts_with("task_after:")),
        "{trace}"
    );
    git_ok(&p.root, &["show", "main:src/task_after.txt"]);
    assert!(!p.root.join("secret.txt").exists());
    git_ok(&p.root, &["rev-parse", "--verify", "squad/task_held"]);
    git_ok(&p.root, &["merge-base", "--is-ancestor", &base, "main"]);
    assert!(
        run(std::process::Command::new("git")
            .current_dir(&p.root)
            .args(["merge-base", "--is-ancestor", "squad/task_held", "main"]))
        .status
        .code()
            != Some(0),
        "the held branch is not in main"
    );
    d.terminate();
}

/// The held branch's command, followed as a person would: its person step
/// (fix the branch) done on the branch's worktree, then the `squadctl merge`
/// it names merges the fixed branch, judged again; the item is gone and
/// `status --check` passes (issue 40 item 4's rule for every kind).
#[test]
fn a_held_branch_is_resolved_by_its_command() {
    if !git_or_skip() {
        return;
    }
    let p = chain_project();
    let _d = crate::daemon::Daemon::start(&p.root);
    task(&p.root, "task_held", "alpha", None);
    wait_event(&p.root, "held at merge", |e| {
        kind_of(e) == "worktree-merge" && e["state"] == "held"
    });
    batch_finished(&p.root);
    let v = status_json(&p.root);
    let item = v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "branch-held")
        .cloned()
        .unwrap_or_else(|| panic!("{v:#}"));
    let command = item["command"].as_str().unwrap();
    // The branch's worktree, as git lists it.
    let list = git_ok(&p.root, &["worktree", "list", "--porcelain"]);
    let tree = list
        .split("\n\n")
        .find(|w| w.contains("task_held"))
        .and_then(|w| w.lines().next())
        .and_then(|l| l.strip_prefix("worktree "))
        .unwrap_or_else(|| panic!("no worktree of task_held: {list}"))
        .to_string();
    let acted = crate::resolve::follow(&p.root, command, |step| {
        assert!(step.starts_with("fix the branch squad/"), "{step}");
        git_ok(Path::new(&tree), &["rm", "-q", "secret.txt"]);
        // Every commit of the branch is judged: the fix rewrites the one
        // that added the file.
        git_ok(Path::new(&tree), &["commit", "-q", "--amend", "--no-edit"]);
    });
    assert_eq!(acted.len(), 1, "{command}");
    crate::resolve::resolved(&p.root, "branch-held");
    wait_event(&p.root, "merged", |e| {
        kind_of(e) == "worktree-merge" && e["state"] == "merged"
    });
}
