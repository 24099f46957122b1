//! Issue 26 (hardening III): faults found by attacking squadd and squadctl,
//! each with its regression test through the real binaries.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;

const S: &str = "20240115T100000Z-harden3";

/// Issue 26 item 9: squadd re-parsed a file's raw text to place its
/// anchored fields (`meta.task_id`, `meta.agent`) at index time, skipping
/// the depth check the validator makes: one 100 KB deeply nested progress
/// file stopped the socket for minutes. Now it is refused unparsed there
/// too, and a critical message written right after it is delivered while
/// the status request answers.
#[test]
fn a_deeply_nested_progress_file_does_not_stall_delivery() {
    let (tmp, s) = quiet_two_agent_project(S);
    let root = tmp.path();
    let _d = Daemon::start(root);
    fs::write(
        s.join("role-comm-alice-task_alice.md"),
        format!(
            "meta:\n  task_id: task_alice\n  agent: alice\n  updated_at: 2024-01-15T11:00:00Z\nstatus: in_progress\nnotes: {}\n",
            "[".repeat(100_000)
        ),
    )
    .unwrap();
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification("msg_1", "critical", "2024-01-15T10:00:00Z", "s", "m"),
    );
    let inbox = s.join("inbox/bob/new");
    eventually("the critical message delivered", || {
        fs::read_dir(&inbox)
            .ok()?
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with("msg_1.md"))
            .then_some(())
    });
    // The deep file is reported where it passes 64 levels, unparsed.
    let v = status_json(root);
    let text = v.to_string();
    assert!(
        text.contains("nesting deeper than 64 levels (not parsed)"),
        "{text}"
    );
}

/// The names in `dir` (empty when it does not exist).
fn names(dir: &std::path::Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 26 item 11: a second message reusing a `message_id` was never
/// delivered, silently: no event, and its sender was never told. It is
/// still not delivered (its recipient would take it for the first), but
/// refused visibly: a `message-refused` audit event naming the clash, and
/// a notice to its sender naming the file that keeps the id.
#[test]
fn a_reused_message_id_is_refused_with_an_event_and_a_notice_to_its_sender() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = two_agent_session(root, S);
    let _d = Daemon::start(root);
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification("msg_1", "high", "2024-01-15T10:00:00Z", "first", "m"),
    );
    eventually("the first delivered to bob", || {
        names(&s.join("inbox/bob/new"))
            .iter()
            .any(|n| n.ends_with("-msg_1.md"))
            .then_some(())
    });
    // bob answers with the same id: his file sorts after alice's.
    fs::write(
        s.join("role-comm-bob-to-alice-msg_1.md"),
        "meta:\n  message_id: msg_1\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:05:00Z\n  priority: high\ntype: notification\nsubject: second\nmessage: m\n",
    )
    .unwrap();
    eventually("the refusal audited", || {
        (audited_message(root, "message-refused", "msg_1") == 1).then_some(())
    });
    let audit = audit_log(root).unwrap_or_default();
    let line = audit
        .lines()
        .find(|l| l.contains("\"kind\":\"message-refused\""))
        .unwrap();
    assert!(
        line.contains("role-comm-bob-to-alice-msg_1.md")
            && line.contains("role-comm-alice-to-bob-msg_1.md"),
        "{line}"
    );
    // bob is told, naming the clash.
    let notice = eventually("a notice to bob about the clash", || {
        names(&s.join("inbox/bob/new"))
            .into_iter()
            .filter(|n| n.contains("msg_squadd_"))
            .map(|n| fs::read_to_string(s.join("inbox/bob/new").join(n)).unwrap_or_default())
            .find(|t| t.contains("role-comm-bob-to-alice-msg_1.md") && t.contains("msg_1"))
    });
    assert!(
        notice.contains("role-comm-alice-to-bob-msg_1.md"),
        "{notice}"
    );
    // Not delivered: alice's inbox holds no msg_1.
    assert!(
        !names(&s.join("inbox/alice/new"))
            .iter()
            .any(|n| n.ends_with("-msg_1.md")),
        "{:?}",
        names(&s.join("inbox/alice/new"))
    );
}
