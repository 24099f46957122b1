//! Issue 28 item 5, the inbox for people: `inbox list`/`next` show sender,
//! type, subject, priority and age (and `--json` adds them to its fields);
//! `inbox show` and `inbox next --peek` read without acknowledging;
//! `reply` answers with the right type, task and subject.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// bob's inbox as JSON.
fn inbox(root: &Path, agent: &str) -> Value {
    serde_json::from_str(&ctl_ok(root, &["inbox", "list", agent, "--json"])).unwrap()
}

#[test]
fn inbox_shows_sender_subject_and_age_and_reads_without_acknowledging() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    init_session(root, "people");
    write_policy(root, NO_NOTICES);
    ok(task_new(
        root,
        &words("--agent bob --instruction 'use the API'"),
    ));
    let _daemon = Daemon::start(root);
    let id = ctl_ok(
        root,
        &[
            "send",
            "--from",
            "alice",
            "--to",
            "bob",
            "--type",
            "question",
            "--priority",
            "high",
            "--subject",
            "api shape?",
            "--message",
            "flat or nested?",
            "--task",
            "task_001",
        ],
    )
    .trim()
    .to_string();
    let v = eventually("delivered to bob", || {
        let v = inbox(root, "bob");
        (v["messages"].as_array()?.len() == 1).then_some(v)
    });
    let m = &v["messages"][0];
    // The fields it had, and the ones a person reads first.
    for key in ["session", "message_id", "priority", "unread", "path"] {
        assert!(!m[key].is_null(), "{key} missing: {m}");
    }
    assert_eq!(m["message_id"], id.as_str());
    assert_eq!(m["from"], "alice");
    assert_eq!(m["type"], "question");
    assert_eq!(m["subject"], "api shape?");
    assert_eq!(m["task"], "task_001");
    assert!(m["age_seconds"].is_i64(), "{m}");
    assert!(m["created_at"].is_string(), "{m}");

    // The human list: sender, type, subject, priority and age on the line.
    let list = ctl_ok(root, &["inbox", "list", "bob"]);
    let line = list.lines().find(|l| l.contains(&id)).unwrap_or_default();
    for part in ["*", "high", "alice", "question", "api shape?"] {
        assert!(line.contains(part), "{part} not in {line:?}\n{list}");
    }
    assert!(
        line.split_whitespace()
            .any(|w| w.ends_with('s') && w[..w.len() - 1].parse::<u32>().is_ok()),
        "no age in {line:?}"
    );
    assert!(
        !line.contains(".squad/"),
        "a path instead of the subject: {line:?}"
    );

    // show and next --peek read it and leave it unread.
    let shown = ctl_ok(root, &["inbox", "show", "bob", &id]);
    assert!(
        shown.contains("from alice")
            && shown.contains("api shape?")
            && shown.contains("flat or nested?"),
        "{shown}"
    );
    let peek: Value =
        serde_json::from_str(&ctl_ok(root, &["inbox", "next", "bob", "--peek", "--json"])).unwrap();
    assert_eq!(peek["message_id"], id.as_str());
    assert_eq!(peek["unread"], true);
    assert!(
        peek["content"]
            .as_str()
            .unwrap()
            .contains("flat or nested?")
    );
    assert_eq!(
        inbox(root, "bob")["messages"][0]["unread"],
        true,
        "peeking acknowledged it"
    );

    // next acknowledges, and says who and what.
    let read = ctl_ok(root, &["inbox", "next", "bob"]);
    assert!(
        read.contains("from alice") && read.contains("api shape?"),
        "{read}"
    );
    assert_eq!(inbox(root, "bob")["messages"][0]["unread"], false);
    // A read message can still be shown.
    let shown: Value =
        serde_json::from_str(&ctl_ok(root, &["inbox", "show", "bob", &id, "--json"])).unwrap();
    assert_eq!(shown["unread"], false);
    assert_eq!(shown["subject"], "api shape?");

    // reply: to alice, a notification about task_001, answering the question.
    let out = run(ctl(root)
        .env("SQUAD_AGENT", "bob")
        .args(["reply", &id, "--message", "flat"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let answer = eventually("the reply delivered to alice", || {
        let v = inbox(root, "alice");
        v["messages"].as_array()?.first().cloned()
    });
    assert_eq!(answer["from"], "bob");
    assert_eq!(answer["type"], "notification");
    assert_eq!(answer["task"], "task_001");
    assert_eq!(answer["in_reply_to"], id.as_str());
    assert_eq!(answer["subject"], "Re: api shape?");
    assert_eq!(answer["priority"], "medium");

    // An id that is not in the inbox: a clear error, nothing printed.
    let out = run(ctl(root).args(["inbox", "show", "bob", "msg_nope"]));
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains("no message msg_nope in bob's inbox"),
        "{}",
        stderr(&out)
    );
    // The agent comes from SQUAD_AGENT when not named.
    let out = run(ctl(root)
        .env("SQUAD_AGENT", "bob")
        .args(["inbox", "show", &id]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}
