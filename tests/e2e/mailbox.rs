//! squadd's mailbox bookkeeping through the real binaries: what escalates
//! (one escalation queue and timer per session, issue 11) across
//! acknowledgements and restarts.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;

const S: &str = "20240115T100000Z-mailbox";

/// Writes a critical message from alice to bob (temporary name, renamed).
fn write_critical(root: &Path, id: &str) {
    let text = notification(id, "critical", "2024-01-15T10:00:00Z", "s", "m");
    write_alice_to_bob(&root.join(".squad/sessions").join(S), id, &text);
}

/// The path of a message in bob's `new/`, once delivered.
fn delivered(root: &Path, id: &str) -> std::path::PathBuf {
    let new = root.join(".squad/sessions").join(S).join("inbox/bob/new");
    eventually(&format!("{id} delivered"), || {
        fs::read_dir(&new)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.to_string_lossy().ends_with(&format!("-{id}.md")))
    })
}

/// How many `message-escalated` events name `id`.
fn escalations(root: &Path, id: &str) -> usize {
    audited_message(root, "message-escalated", id)
}

#[test]
fn an_acknowledged_message_never_escalates_and_a_restart_escalates_what_is_unread() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    two_agent_session(root, S);
    write_policy(
        root,
        format!("{NO_NOTICES}messages:\n  escalate_after:\n    critical: 4s\n"),
    );
    let d = Daemon::start(root);
    write_critical(root, "msg_acked");
    write_critical(root, "msg_left");
    // Acknowledged (moved to cur/, as `squadctl inbox next` does) well
    // before its 4 s.
    let acked = delivered(root, "msg_acked");
    let cur = acked.parent().unwrap().parent().unwrap().join("cur");
    fs::create_dir_all(&cur).unwrap();
    fs::rename(&acked, cur.join(acked.file_name().unwrap())).unwrap();
    delivered(root, "msg_left");
    eventually("msg_left escalated", || {
        (escalations(root, "msg_left") == 1).then_some(())
    });
    assert_eq!(escalations(root, "msg_acked"), 0, "acknowledged in time");

    // Delivered, then squadd is killed before it escalates: the restarted
    // squadd knows it only from the inbox listing, and escalates it; what
    // was escalated before is not escalated again.
    write_critical(root, "msg_across");
    delivered(root, "msg_across");
    assert_eq!(escalations(root, "msg_across"), 0, "killed before its time");
    d.kill9();
    let _d = Daemon::start(root);
    eventually("msg_across escalated after the restart", || {
        (escalations(root, "msg_across") == 1).then_some(())
    });
    assert_eq!(escalations(root, "msg_left"), 1, "escalated once");
    assert_eq!(escalations(root, "msg_acked"), 0);
}

/// Writes a question from alice to bob due for a reply at `by`.
fn write_question(root: &Path, id: &str, by: &str) {
    let s = root.join(".squad/sessions").join(S);
    let text = format!(
        "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: question\nsubject: q\nmessage: q?\nresponse_needed: true\nresponse_by: {by}\n"
    );
    fs::write(s.join(format!("role-comm-alice-to-bob-{id}.md")), text).unwrap();
}

/// Deadlines still ahead wait in the session's reply queue (one timer):
/// at the deadline the unanswered question is reported, the answered one
/// not.
#[test]
fn a_reply_deadline_ahead_is_reported_when_it_passes_unless_answered() {
    let (tmp, _) = quiet_two_agent_project(S);
    let root = tmp.path();
    let _d = Daemon::start(root);
    let by = (chrono::Utc::now() + chrono::Duration::seconds(4))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    write_question(root, "msg_q_open", &by);
    write_question(root, "msg_q_answered", &by);
    fs::write(
        root.join(".squad/sessions").join(S).join("role-comm-bob-to-alice-msg_a.md"),
        "meta:\n  message_id: msg_a\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:01:00Z\n  priority: medium\ntype: notification\nsubject: a\nmessage: a\nin_reply_to: msg_q_answered\n",
    )
    .unwrap();
    let overdue = |id: &str| audited_message(root, "response-overdue", id);
    delivered(root, "msg_q_open");
    assert_eq!(overdue("msg_q_open"), 0, "not before its deadline");
    eventually("msg_q_open reported overdue", || {
        (overdue("msg_q_open") == 1).then_some(())
    });
    assert_eq!(overdue("msg_q_answered"), 0);
}
