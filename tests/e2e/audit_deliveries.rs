//! Issue 41.7: every delivery audited. A kill -9 while squadd delivers a
//! backlog at start left delivered messages with no audit line (262 of
//! 2,000 after one kill): each delivery was said only once the whole batch
//! was durable, and the next squadd found the copies delivered and said
//! nothing of them.

use crate::daemon::Daemon;
use crate::support::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const S: &str = "20240115T100000Z-audit";

/// Message ids in bob's inbox (new and cur), with how often each occurs.
fn inbox_ids(root: &Path) -> BTreeMap<String, usize> {
    inbox_message_ids(&root.join(".squad/sessions").join(S), "bob")
}

/// `message-delivered` lines of the audit log, by message id.
fn audited(root: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for l in audit_log(root).unwrap_or_default().lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue; // a line a kill cut short
        };
        if v["kind"] == "message-delivered" {
            *out.entry(v["message_id"].as_str().unwrap_or("").to_string())
                .or_insert(0) += 1;
        }
    }
    out
}

#[test]
fn kill_9_while_squadd_delivers_a_backlog_leaves_no_delivery_unaudited() {
    let (tmp, session) = quiet_two_agent_project(S);
    let root = tmp.path();
    let mut seed: u64 = 0x4107_0000_0000_5eed;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let per_round = 500;
    let mut written = 0;
    let mut cut = 0;
    for round in 0..4 {
        // A backlog written while squadd is down.
        for _ in 0..per_round {
            write_numbered_message(&session, written, ["critical", "high", "low"][written % 3]);
            written += 1;
        }
        let before = inbox_ids(root).len();
        let target = before + 1 + rand(per_round as u64 - 1) as usize;
        let mut child = Command::new(env!("CARGO_BIN_EXE_squadd"))
            .arg("--root")
            .arg(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Killed once its start has delivered `target` messages: in the
        // middle of its first batch, before it is said.
        let start = Instant::now();
        while inbox_ids(root).len() < target && start.elapsed() < Duration::from_secs(60) {
            // Poll interval of the wait, not a settle time.
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = child.kill();
        let _ = child.wait();
        let delivered = inbox_ids(root);
        let said = audited(root);
        let unsaid = delivered
            .keys()
            .filter(|id| !said.contains_key(*id))
            .count();
        eprintln!(
            "round {round}: killed with {} delivered, {unsaid} of them not yet audited",
            delivered.len()
        );
        cut += unsaid;
    }
    // A last start delivers what the kills interrupted and says what the
    // killed squadds delivered without saying.
    let d = Daemon::start(root);
    let delivered = inbox_ids(root);
    assert_eq!(delivered.len(), written, "nothing lost");
    assert!(delivered.values().all(|n| *n == 1), "nothing twice");
    let said = audited(root);
    let unsaid: Vec<&String> = delivered
        .keys()
        .filter(|id| !said.contains_key(*id))
        .collect();
    assert!(
        unsaid.is_empty(),
        "{} delivered, not audited: {:?}…",
        unsaid.len(),
        &unsaid[..unsaid.len().min(10)]
    );
    assert!(said.values().all(|n| *n == 1), "a delivery audited twice");
    assert_eq!(said.len(), written);
    // The test cut deliveries short of their line (else it proves nothing).
    assert!(cut > 0, "no kill landed between a delivery and its line");
    // A clean restart says nothing again, not even a delivery whose mark
    // a kill left after its line was written (the audit log says it).
    drop(d);
    let inbox = session.join("inbox/bob");
    let said_one = std::fs::read_dir(inbox.join("new"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let mark = inbox
        .join("tmp")
        .join(format!("{}.999999", said_one.to_string_lossy()));
    std::fs::hard_link(inbox.join("new").join(&said_one), &mark).unwrap();
    let _d = Daemon::start(root);
    assert!(audited(root).values().all(|n| *n == 1));
    assert_eq!(audited(root).len(), written);
    assert!(!mark.exists(), "the mark is removed");
}
