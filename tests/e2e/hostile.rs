//! Issue 10: what kill -9, odd inputs and a broken policy leave behind, and
//! that squadd copes (tests ported from the unmerged `harden2` branch and
//! adapted to main's behaviour).

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;
use std::process::Command;

const SEED: &str = "20240115T100000Z-user-search";
const S: &str = "20240115T100000Z-hostile";

/// Writes `path` (and its parents) with a modification time five minutes
/// ago: the leftover of a writer killed long before.
fn touch_old(path: &Path) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, "partial").unwrap();
    let out = Command::new("touch")
        .args(["-d", "5 minutes ago"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

/// Temporaries of writers killed mid-write (inbox `tmp/`, `locks/`,
/// `.session-status.md.tmp.*`) were never removed. squadd sweeps its own
/// naming, older than a minute, at start; fresh ones (a write in progress)
/// and other people's files stay.
#[test]
fn stale_temporaries_of_killed_writers_are_swept_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_tree(&fixture("seed"), root);
    let s = root.join(".squad/sessions").join(SEED);
    let stale = [
        s.join(".session-status.md.tmp.999999.0"),
        s.join("locks/.x.json.tmp.999999.3"),
        s.join("inbox/bob/tmp/0-critical-20240115T103600.000Z-msg_a.md.999999"),
        root.join(".squad/run/.state.json.tmp.999999.0"),
        root.join(".claude/context/.shared-context.json.tmp.999999.1"),
    ];
    for p in &stale {
        touch_old(p);
    }
    let fresh = s.join("locks/.y.json.tmp.999999.4");
    fs::write(&fresh, "in progress").unwrap();
    let foreign = s.join("notes.tmp");
    touch_old(&foreign);
    // Not a file squadd writes there: left alone.
    let other = root.join(".claude/context/.notes.md.tmp.999999.2");
    touch_old(&other);
    let old_dir = s.join(".z.tmp.999999.5");
    fs::create_dir_all(&old_dir).unwrap();
    let d = Daemon::start(root);
    // READY comes after the start-up scan and its sweep.
    for p in &stale {
        assert!(!p.exists(), "{} swept", p.display());
    }
    assert!(
        fresh.exists(),
        "a fresh temporary may be a write in progress"
    );
    assert!(foreign.exists(), "not our naming");
    assert!(other.exists(), "not a file squadd writes");
    assert!(old_dir.is_dir(), "directories are never swept");
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

/// `.session-status.md.tmp.*` of a killed writer was carried into the
/// archive. Archiving sweeps stale temporaries first; a fresh one (a write
/// in flight) goes along untouched.
#[test]
fn archiving_leaves_stale_temporaries_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let name = "20200101T000000Z-done";
    let s = root.join(".squad/sessions").join(name);
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::create_dir_all(&s).unwrap();
    fs::write(
        s.join("session-status.md"),
        "session_id: sess_done\nstarted_at: 2020-01-01T00:00:00Z\nstatus: completed\ncompleted_at: 2020-01-02T00:00:00Z\n",
    )
    .unwrap();
    touch_old(&s.join(".session-status.md.tmp.999999.0"));
    touch_old(&s.join("inbox/bob/tmp/x.md.999999"));
    touch_old(&s.join("locks/.l.json.tmp.999999.1"));
    fs::write(s.join(".summary.md.tmp.999999.2"), "in flight").unwrap();
    let out = ctl_run(root, &["gc"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let archived = root.join(".squad/archives").join(name);
    assert!(archived.join("session-status.md").exists(), "archived");
    assert!(!s.exists(), "moved, not copied");
    for gone in [
        ".session-status.md.tmp.999999.0",
        "inbox/bob/tmp/x.md.999999",
        "locks/.l.json.tmp.999999.1",
    ] {
        assert!(!archived.join(gone).exists(), "{gone} carried along");
    }
    assert!(archived.join(".summary.md.tmp.999999.2").exists());
}

/// A project with two agents and no notices (the test counts inboxes).
fn project() -> tempfile::TempDir {
    quiet_two_agent_project(S).0
}

/// Writes a message file from `from` to bob with `id` and `created_at`;
/// returns its file name.
fn write_message_as(root: &Path, from: &str, id: &str, created_at: &str) -> String {
    let s = root.join(".squad/sessions").join(S);
    let name = format!("role-comm-{from}-to-bob-{id}.md");
    fs::write(
        s.join(&name),
        format!(
            "meta:\n  message_id: {id}\n  from_agent: {from}\n  to_agent: bob\n  created_at: {created_at}\n  priority: critical\ntype: notification\nsubject: from {from}\nmessage: m\n"
        ),
    )
    .unwrap();
    name
}

/// bob's messages as `squadctl inbox list bob --json` shows them.
fn listed(root: &Path) -> Option<Vec<serde_json::Value>> {
    let out = ctl_run(root, &["inbox", "list", "bob", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
    v["messages"].as_array().cloned()
}

/// A message created at `0000-01-01T00:00:00+01:00` (before year 0 in UTC)
/// and one in a 250-byte file name both reach bob's inbox under names
/// `inbox list` parses. One `message_id` used by two senders is main's
/// documented `duplicate-message-id`: the first by file name is delivered,
/// the second is reported (naming the rule) and not delivered.
#[test]
fn odd_times_long_names_and_reused_ids_all_reach_the_inbox() {
    let tmp = project();
    let root = tmp.path();
    let d = Daemon::start(root);
    write_message_as(root, "alice", "msg_year0", "0000-01-01T00:00:00+01:00");
    let long_id = format!(
        "msg_{}",
        "x".repeat(250 - "role-comm-alice-to-bob-msg_.md".len())
    );
    let long = write_message_as(root, "alice", &long_id, "2024-01-15T10:00:00Z");
    assert_eq!(long.len(), 250);
    write_message_as(root, "alice", "msg_same", "2024-01-15T10:00:01Z");
    let msgs = eventually("three messages listed", || {
        listed(root).filter(|m| m.len() == 3)
    });
    // Written once alice's is delivered: the first by file name is the
    // first seen (a reuse seen first cannot be called back).
    let reused = write_message_as(root, "carol", "msg_same", "2024-01-15T10:00:02Z");
    let ids: Vec<&str> = msgs
        .iter()
        .map(|m| m["message_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"msg_year0"), "{ids:?}");
    // The inbox name (and so `inbox list`) carries a long id shortened to
    // its first 96 bytes, `_h` and a hash (docs/daemon.md).
    assert!(
        ids.iter()
            .any(|i| i.starts_with(&long_id[..96]) && i.len() == 96 + 2 + 16),
        "{ids:?}"
    );
    let same: Vec<_> = msgs
        .iter()
        .filter(|m| m["message_id"] == "msg_same")
        .collect();
    assert_eq!(same.len(), 1, "{msgs:?}");
    assert!(
        same[0]["path"]
            .as_str()
            .is_some_and(|p| p.contains("T100001.000Z")),
        "alice's, the first by file name: {msgs:?}"
    );
    // Every inbox name fits a file name.
    for e in fs::read_dir(root.join(".squad/sessions").join(S).join("inbox/bob/new")).unwrap() {
        let n = e.unwrap().file_name();
        assert!(n.len() <= 255, "{n:?}");
    }
    let problem = eventually("the reused id reported", || {
        let out = ctl_run(root, &["status", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        v["roots"][0]["sessions"][0]["problems"]
            .as_array()?
            .iter()
            .find(|p| p["rule"] == "duplicate-message-id")
            .cloned()
    });
    assert!(
        problem["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(&reused)),
        "{problem}"
    );
    let audit = audit_log(root).unwrap();
    assert!(!audit.contains("output-failed"), "{audit}");
    let out = ctl_run(root, &["validate", "--color", "never"]);
    assert!(
        stdout(&out).contains(&format!("{reused}:"))
            && stdout(&out).contains("error[duplicate-message-id]"),
        "{}",
        stdout(&out)
    );
    // Reported, and not delivered (the report comes from the same apply
    // that would have delivered it); nor after a restart.
    assert_eq!(listed(root).map(|m| m.len()), Some(3));
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
    let d = Daemon::start(root);
    assert_eq!(listed(root).map(|m| m.len()), Some(3));
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

/// `escalate_after.high: 100000000d` made squadd refuse the root and exit 1
/// on every start: under systemd `Restart=on-failure`, a restart loop. It
/// now runs on the defaults with a `policy-refused` event naming the field,
/// delivers, and holds retention (the defaults could delete what the
/// refused policy kept) until a valid policy arrives; a later invalid edit
/// keeps that valid policy.
#[test]
fn an_invalid_policy_at_start_runs_on_the_defaults_and_names_the_field() {
    let tmp = project();
    let root = tmp.path();
    let policy = root.join(".squad/policies.yaml");
    fs::write(
        &policy,
        format!("{NO_NOTICES}messages:\n  escalate_after:\n    high: 100000000d\n"),
    )
    .unwrap();
    let d = Daemon::start(root);
    let audit = audit_log(root).unwrap();
    let refused = audit
        .lines()
        .find(|l| l.contains("\"kind\":\"policy-refused\""))
        .unwrap_or_else(|| panic!("no policy-refused in {audit}"));
    assert!(
        refused.contains("messages.escalate_after.high")
            && refused.contains("3650d")
            && refused.contains("default policy"),
        "{refused}"
    );
    let status = || {
        let out = ctl_run(root, &["status", "--json"]);
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let v = status();
    assert_eq!(v["daemon"]["state"], "running", "{v}");
    assert!(
        v["roots"][0]["next_retention_run"].is_null(),
        "retention held: {v}"
    );
    write_message_as(root, "alice", "msg_on_defaults", "2024-01-15T10:00:00Z");
    // (On the defaults notices are on: bob's inbox holds squadd's too.)
    eventually("delivered on the defaults", || {
        listed(root)?
            .iter()
            .any(|m| m["message_id"] == "msg_on_defaults")
            .then_some(())
    });
    // A valid policy takes over, retention with it.
    fs::write(
        &policy,
        format!("{NO_NOTICES}retention:\n  schedule: '0 42 * * * *'\n"),
    )
    .unwrap();
    eventually("valid policy loaded", || {
        let next = status()["roots"][0]["next_retention_run"]
            .as_str()?
            .to_string();
        next.ends_with(":42:00Z").then_some(())
    });
    // A later invalid edit keeps it.
    fs::write(
        &policy,
        "messages:\n  deliver_within:\n    medium: 18446744073709551615\n",
    )
    .unwrap();
    let refused = eventually("the edit refused", || {
        let audit = audit_log(root)?;
        audit
            .lines()
            .find(|l| l.contains("messages.deliver_within.medium"))
            .map(str::to_string)
    });
    assert!(
        refused.contains("\"kind\":\"policy-refused\"") && refused.contains("previous policy"),
        "{refused}"
    );
    let next = status()["roots"][0]["next_retention_run"].clone();
    assert!(
        next.as_str().is_some_and(|n| n.ends_with(":42:00Z")),
        "the previous valid policy stays: {next}"
    );
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

/// squadd's open descriptors, by number.
fn open_fds(pid: u32) -> std::collections::BTreeSet<u64> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Sets squadd's soft RLIMIT_NOFILE (the hard one stays, so it can be
/// raised back).
fn set_soft_nofile(pid: u32, soft: u64) {
    let out = Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={soft}:"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 10: a read or a delivery failing because squadd is out of file
/// descriptors (EMFILE) is the machine's fault, never the file's: it is
/// retried, no `file-invalid`/`unreadable` is recorded against the message,
/// and once descriptors are free again it is delivered (a failed delivery
/// was dropped until the next restart).
#[test]
fn a_read_failing_with_emfile_is_retried_never_blamed_on_the_file() {
    let tmp = project();
    let root = tmp.path();
    let d = Daemon::start(root);
    let pid = d.pid();
    let soft: u64 = fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap();
    // The lowest free descriptor number as the limit: the next open fails.
    let fds = open_fds(pid);
    let lowest_free = (0..).find(|n| !fds.contains(n)).unwrap();
    set_soft_nofile(pid, lowest_free);
    let name = write_message_as(root, "alice", "msg_emfile", "2024-01-15T10:00:00Z");
    let s = root.join(".squad/sessions").join(S);
    // squadd has tried (to read or to deliver the message) and met the
    // limit: what it did then is what is asserted.
    eventually("squadd out of descriptors", || {
        d.log().contains("Too many open files").then_some(())
    });
    assert!(
        !s.join("inbox/bob/new").exists()
            || fs::read_dir(s.join("inbox/bob/new")).unwrap().count() == 0,
        "delivered without a descriptor?"
    );
    set_soft_nofile(pid, soft);
    eventually("delivered once descriptors are free", || {
        listed(root)?
            .iter()
            .any(|m| m["message_id"] == "msg_emfile")
            .then_some(())
    });
    let audit = audit_log(root).unwrap();
    for line in audit.lines().filter(|l| l.contains(&name)) {
        assert!(
            !line.contains("file-invalid") && !line.contains("unreadable"),
            "blamed on the file: {line}"
        );
    }
    let (code, log) = d.terminate();
    assert_eq!(code, 0);
    // The limit did bite (the read or the delivery failed) and the message
    // still arrived.
    assert!(log.contains("Too many open files"), "{log}");
}

/// Issue 26 item 13: a kill -9 while squadd runs (of squadctl, or of a
/// previous squadd's writer) leaves temporaries after the start-up sweep;
/// the next retention run removes them, and only them.
#[test]
fn stale_temporaries_appearing_while_squadd_runs_go_at_the_next_retention_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_tree(&fixture("seed"), root);
    write_policy(root, "retention:\n  schedule: '* * * * * *'\n");
    let d = Daemon::start(root);
    let s = root.join(".squad/sessions").join(SEED);
    let stale = [
        s.join(".session-status.md.tmp.999999.0"),
        root.join(".squad/run/.state.json.tmp.999999.0"),
        root.join(".claude/context/.shared-context.json.tmp.999999.1"),
    ];
    for p in &stale {
        touch_old(p);
    }
    let other = root.join(".claude/context/.notes.md.tmp.999999.2");
    touch_old(&other);
    eventually("swept by a retention run", || {
        stale.iter().all(|p| !p.exists()).then_some(())
    });
    assert!(other.exists(), "not a file squadd writes");
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}
