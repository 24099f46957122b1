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

/// squadd started without a service manager (no `NOTIFY_SOCKET`, so no
/// STATUS= line timer), killed when dropped.
struct Bare(std::process::Child);

impl Drop for Bare {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The event loop's wake-ups so far (`health --json`), without the calls
/// that asked (each `squadctl` call is a wake-up of its own).
fn wake_ups(root: &std::path::Path) -> (u64, u64) {
    let out = ctl_run(root, &["health", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let t = &v["turns"];
    let total = t["total"].as_u64().unwrap();
    let calls = t["calls"].as_u64().unwrap();
    (total - calls, t["yields"].as_u64().unwrap())
}

/// How many shared-context writes squadd has reported.
fn contexts_written(root: &std::path::Path) -> usize {
    events(root)
        .iter()
        .filter(|e| e["kind"] == "output-written" && e["output"] == "shared-context")
        .count()
}

/// Issue 22's last miss: one progress update woke the sans-I/O core's
/// event loop about 7 times (the update; squadd's own status write, audit
/// line and session lock; the audit log settling; the shared context's
/// timer and its write's completion; the audit log again), each turn
/// through the runtime twice (two yields), where the loop before the core
/// woke about half as often. Counters, not timings: 4 wake-ups per update
/// now (the update, squadd's own status write seen, the context's timer,
/// its write done) and one yield; the bound leaves one more of each for a
/// watcher that hands one event over in two pieces on a loaded machine.
#[test]
fn one_progress_update_costs_a_bounded_number_of_wake_ups() {
    const UPDATES: u64 = 5;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = root.join(".squad/sessions").join(S);
    fs::create_dir_all(&s).unwrap();
    fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for i in 0..UPDATES {
        write_plan(&s, &format!("task_{i}"), "bench", "");
    }
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_squadd"))
        .arg("--root")
        .arg(root)
        .env_remove("NOTIFY_SOCKET")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _d = Bare(child);
    eventually("squadd answers", || {
        (code(&ctl_run(root, &["status", "--json"])) == 0).then_some(())
    });
    eventually("the start-up's shared context written", || {
        (contexts_written(root) >= 1).then_some(())
    });
    batch_finished(root);
    let (turns0, yields0) = wake_ups(root);
    for i in 0..UPDATES {
        let written = contexts_written(root);
        let staging = s.join(format!(".task_{i}.partial"));
        fs::write(
            &staging,
            format!(
                "meta:\n  task_id: task_{i}\n  agent: bench\n  updated_at: 2024-01-15T11:00:00Z\nstatus: completed\n"
            ),
        )
        .unwrap();
        fs::rename(&staging, s.join(format!("role-comm-bench-task_{i}.md"))).unwrap();
        eventually("the task counted completed", || {
            (session_status(&s)["tasks_completed"].as_u64() == Some(i + 1)).then_some(())
        });
        // Everything the update leads to is done once the shared context
        // it changed is written (20 ms after the change, off the loop).
        eventually("the shared context written again", || {
            (contexts_written(root) > written).then_some(())
        });
        batch_finished(root);
    }
    let (turns, yields) = wake_ups(root);
    let (turns, yields) = (turns - turns0, yields - yields0);
    assert!(
        turns <= 5 * UPDATES,
        "{turns} wake-ups of the event loop for {UPDATES} progress updates (at most 5 each)"
    );
    assert!(
        yields <= 2 * UPDATES,
        "{yields} yields to the runtime for {UPDATES} progress updates (at most 2 each)"
    );
}
