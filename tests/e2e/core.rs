//! The daemon's incremental core seen from outside: counters squadd keeps in
//! memory stay true as agents act.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;

const S: &str = "20240115T100000Z-core";

/// `status` answers unread counts from squadd's counters (no inbox is
/// listed per request): a delivery raises them, an acknowledgement (seen
/// through the inbox watch) lowers them.
#[test]
fn unread_counters_follow_delivery_and_acknowledgement() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = root.join(".squad/sessions").join(S);
    fs::create_dir_all(&s).unwrap();
    let _d = Daemon::start(root);
    for (i, priority) in ["critical", "high"].iter().enumerate() {
        fs::write(
            s.join(format!("role-comm-alice-to-bob-msg_{i}.md")),
            notification(
                &format!("msg_{i}"),
                priority,
                &format!("2024-01-15T10:00:0{i}Z"),
                "s",
                "m",
            ),
        )
        .unwrap();
    }
    let unread = |v: &serde_json::Value| v["roots"][0]["sessions"][0]["unread"].clone();
    eventually("two unread", || {
        let v = status_json(root);
        (unread(&v) == serde_json::json!({"critical": 1, "high": 1})).then_some(())
    });
    let out = ctl_run(root, &["inbox", "next", "bob"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    eventually("the critical one acknowledged", || {
        let v = status_json(root);
        (unread(&v) == serde_json::json!({"high": 1})).then_some(())
    });
    let v = status_json(root);
    assert!(v["roots"][0]["sessions"][0]["oldest_unread_secs"].is_u64());
}
