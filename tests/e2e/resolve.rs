//! Notices that resolve (issue 40 item 4): a notice of squadd's whose fact
//! is gone never escalates nor counts as an overdue reply, and the
//! overdue-reply item's own command clears it.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;

/// The id of the first unread message in `agent`'s inboxes whose id
/// starts with `prefix`, once delivered.
fn delivered(root: &Path, agent: &str, prefix: &str) -> String {
    eventually(&format!("a {prefix} message delivered to {agent}"), || {
        let v: serde_json::Value =
            serde_json::from_str(&ctl_ok(root, &["inbox", "list", agent, "--json"])).ok()?;
        v["messages"]
            .as_array()?
            .iter()
            .filter(|m| m["unread"] == true)
            .filter_map(|m| m["message_id"].as_str())
            .find(|id| id.starts_with(prefix))
            .map(str::to_string)
    })
}

fn overdue_replies(root: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&ctl_ok(root, &["status", "--json"])).unwrap();
    v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "overdue-reply")
        .cloned()
        .collect()
}

/// With squadd stopped: high messages escalate a second after delivery;
/// lead sends frontend a live high message; squadd starts again. Returns
/// squadd and the live message's id once it escalated (the wait that
/// shows the notices due before it were looked at).
fn restart_with_a_live_message(root: &Path, kind: &str) -> (Daemon, String) {
    write_policy(root, "messages:\n  escalate_after:\n    high: 1s\n");
    ok(run(ctl(root)
        .args([
            "send",
            "--from",
            "lead",
            "--to",
            "frontend",
            "--priority",
            "high",
        ])
        .args([
            "--type",
            kind,
            "--subject",
            "api?",
            "--message",
            "flat or nested?",
        ])));
    let d = Daemon::start(root);
    let live = delivered(root, "frontend", "msg_2");
    eventually("the live message escalated", || {
        (audited_message(root, "message-escalated", &live) == 1).then_some(())
    });
    (d, live)
}

/// The invalid-file notice of a plan fixed while squadd was down is due
/// at the restart and moot: never escalated, never an overdue reply; a
/// live message of the same priority, delivered after it, escalates, and
/// the command its overdue-reply item shows clears the item.
#[test]
fn a_notice_whose_file_was_fixed_never_escalates_and_an_overdue_reply_is_cleared_by_its_command() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "moot");
    write_policy(&root, "messages:\n  escalate_after:\n    high: 1h\n");
    write_plan(
        &session,
        "task_001",
        "frontend",
        "boundries:\n  allowed: [\"src/**\"]\n",
    );
    let d = Daemon::start(&root);
    let notice = delivered(&root, "frontend", "msg_squadd_invalid_");
    d.terminate();
    // Fixed while squadd is down; escalation now due a second after delivery.
    write_plan(
        &session,
        "task_001",
        "frontend",
        "boundaries:\n  allowed: [\"src/**\"]\n",
    );
    let (d, live) = restart_with_a_live_message(&root, "question");
    assert_eq!(
        audited_message(&root, "message-escalated", &notice),
        0,
        "the moot notice was due first and never escalated"
    );
    let items = overdue_replies(&root);
    assert_eq!(items.len(), 1, "{items:?}");
    let command = items[0]["command"].as_str().unwrap().to_string();
    assert!(
        command.contains(&format!("inbox ack frontend {live}")),
        "{command}"
    );
    // The command shown resolves the item: run it as written.
    for part in command.split("; ") {
        let words = shlex_words(part);
        assert_eq!(words[0], "squadctl", "{part}");
        ok(run(ctl(&root).args(&words[1..])));
    }
    assert!(overdue_replies(&root).is_empty());
    let check = ctl_run(&root, &["status", "--check"]);
    assert_eq!(code(&check), 0, "{}", stdout(&check));
    d.terminate();
}

/// A command line split into words (no quoting in these commands).
fn shlex_words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The overdue notice of a task completed while squadd was down is moot
/// at the restart: never escalated, never an overdue reply; a live
/// message delivered after it escalates (the wait that shows the notice
/// was looked at).
#[test]
fn the_overdue_notice_of_a_task_since_completed_never_escalates() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    init_session(&root, "late");
    write_policy(&root, "messages:\n  escalate_after:\n    high: 1h\n");
    ok(task_new(
        &root,
        &words("--agent frontend --instruction x --allow src/** --timeout 1s"),
    ));
    ctl_ok(
        &root,
        &words("progress --agent frontend --task task_001 --status in_progress"),
    );
    let d = Daemon::start(&root);
    let notice = delivered(&root, "frontend", "msg_squadd_overdue_");
    d.terminate();
    ctl_ok(
        &root,
        &words("progress --agent frontend --task task_001 --status completed"),
    );
    let (d, _live) = restart_with_a_live_message(&root, "notification");
    assert_eq!(audited_message(&root, "message-escalated", &notice), 0);
    let replies = overdue_replies(&root);
    assert!(
        replies
            .iter()
            .all(|i| !i["summary"].as_str().unwrap().contains(&notice)),
        "{replies:?}"
    );
    d.terminate();
}
