//! Message routing through the real binaries: backlogs, crashes, escalation,
//! notify hooks, routed reports, the agent CLI.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const S: &str = "20240115T100000Z-msgs";

// These tests count what inboxes hold: squadd's own notices (the fixture's
// tasks are ready) are off here and tested in notices.rs.

fn project() -> tempfile::TempDir {
    quiet_two_agent_project(S).0
}

const PRIORITIES: [&str; 4] = ["critical", "high", "medium", "low"];

/// Writes message `i` as an agent would (to a temporary name, then renamed).
fn write_message(root: &Path, i: usize, priority: &str) -> String {
    write_numbered_message(&root.join(".squad/sessions").join(S), i, priority)
}

/// Every message id in bob's inbox (new and cur), with how often it occurs.
fn inbox_ids(root: &Path) -> BTreeMap<String, usize> {
    inbox_message_ids(&root.join(".squad/sessions").join(S), "bob")
}

#[test]
fn a_backlog_written_while_down_is_delivered_once_critical_first() {
    let tmp = project();
    let root = tmp.path();
    let mut ids = Vec::new();
    for i in 0..1000 {
        // Low first on disk, so order of writing cannot explain the result.
        ids.push(write_message(root, i, PRIORITIES[3 - (i % 4)]));
    }
    let d = Daemon::start(root);
    let delivered = inbox_ids(root);
    assert_eq!(delivered.len(), 1000, "every message delivered");
    assert!(delivered.values().all(|n| *n == 1), "none twice");
    // Order of delivery, from the audit log.
    let audit = audit_log(root).unwrap();
    let order: Vec<String> = audit
        .lines()
        .filter(|l| l.contains("\"kind\":\"message-delivered\""))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["priority"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(order.len(), 1000);
    let last_critical = order.iter().rposition(|p| p == "critical").unwrap();
    let first_low = order.iter().position(|p| p == "low").unwrap();
    assert!(last_critical < first_low, "every critical before any low");
    let mut sorted = order.clone();
    sorted.sort_by_key(|p| PRIORITIES.iter().position(|x| x == p));
    assert_eq!(order, sorted, "critical, then high, then medium, then low");
    // A restart delivers nothing again.
    drop(d);
    let _d = Daemon::start(root);
    assert_eq!(inbox_ids(root).len(), 1000);
    let audit = audit_log(root).unwrap();
    assert_eq!(
        audit.matches("\"kind\":\"message-delivered\"").count(),
        1000
    );
}

#[test]
fn kill_9_in_the_middle_of_a_burst_loses_and_duplicates_nothing() {
    let tmp = project();
    let root = tmp.path();
    let mut written = 0;
    let mut seed: u64 = 0x5eed;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _round in 0..4 {
        let d = Daemon::start(root);
        let burst = 500;
        let kill_after = rand(burst as u64) as usize;
        for k in 0..burst {
            if k == kill_after {
                // Killed at a random point, mid-burst, with no warning.
                let pid = d.pid();
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
            write_message(root, written, PRIORITIES[written % 4]);
            written += 1;
        }
        d.kill9();
    }
    assert_eq!(written, 2000);
    // A last start delivers whatever the kills interrupted.
    let _d = Daemon::start(root);
    let delivered = inbox_ids(root);
    assert_eq!(delivered.len(), 2000, "nothing lost");
    assert!(delivered.values().all(|n| *n == 1), "nothing twice");
    // One audit line per delivered message (issue 41.7).
    let audit = audit_log(root).unwrap();
    for id in delivered.keys() {
        assert_eq!(
            audit
                .lines()
                .filter(|l| l.contains("\"kind\":\"message-delivered\"")
                    && l.contains(&format!("\"message_id\":\"{id}\"")))
                .count(),
            1,
            "{id}"
        );
    }
    // No half-made delivery is visible in new/ (temporary files stay in tmp/).
    let new = root.join(".squad/sessions").join(S).join("inbox/bob/new");
    for e in fs::read_dir(new).unwrap() {
        let p = e.unwrap().path();
        let text = fs::read_to_string(&p).unwrap();
        assert!(
            text.ends_with("\n") && text.contains("message_id:"),
            "{}",
            p.display()
        );
    }
}

#[test]
fn unacknowledged_messages_escalate_and_hooks_run_with_the_message_env() {
    let tmp = project();
    let root = tmp.path();
    let log = root.join("hook.log");
    write_policy(
        root,
        format!(
            "{NO_NOTICES}messages:\n  escalate_after:\n    critical: 1s\n  notify:\n    bob:\n      command: [\"sh\", \"-c\", \"echo \\\"$SQUAD_PRIORITY $SQUAD_FROM $SQUAD_TO $SQUAD_SESSION {{path}}\\\" >> {}\"]\n      timeout: 5s\n    alice:\n      command: [\"false\"]\n      retries: 0\n",
            log.display()
        ),
    );
    let _d = Daemon::start(root);
    let id = write_message(root, 1, "critical");
    let lines = eventually("hook ran twice (delivery, then escalation)", || {
        let text = fs::read_to_string(&log).ok()?;
        (text.lines().count() >= 2).then_some(text)
    });
    let first = lines.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("critical alice bob {S} ")),
        "{first}"
    );
    assert!(
        first.contains("inbox/bob/new/0-critical-") && first.ends_with(&format!("{id}.md")),
        "{first}"
    );
    let audit = audit_log(root).unwrap();
    assert!(audit.contains("\"kind\":\"message-escalated\""), "{audit}");
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&ctl_run(root, &["status", "--json"]))).unwrap();
    assert_eq!(v["roots"][0]["sessions"][0]["escalations"][0], id);
    // A failing hook is reported and blocks nothing.
    let s = root.join(".squad/sessions").join(S);
    fs::write(
        s.join("role-comm-bob-to-alice-msg_back.md"),
        "meta:\n  message_id: msg_back\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T11:00:00Z\n  priority: high\ntype: notification\nsubject: s\nmessage: m\n",
    )
    .unwrap();
    eventually("notify-failed reported", || {
        let audit = audit_log(root)?;
        audit.contains("\"kind\":\"notify-failed\"").then_some(())
    });
    assert!(
        s.join("inbox/alice/new").read_dir().unwrap().count() == 1,
        "delivered anyway"
    );
}

#[test]
fn reports_are_routed_and_overdue_replies_reported() {
    let tmp = project();
    let root = tmp.path();
    let s = root.join(".squad/sessions").join(S);
    fs::write(
        s.join("error-alice-20240115T103800Z.md"),
        "error_id: err_20240115T103800Z_ab\nagent: alice\ntask_id: task_alice\nseverity: critical\noccurred_at: 2024-01-15T10:38:00Z\nerror:\n  type: BuildBroken\n  message: linker failed\nrequires_intervention: true\nsuggested_agent: bob\n",
    )
    .unwrap();
    fs::write(
        s.join("role-comm-bob-task_bob.md"),
        "meta:\n  task_id: task_bob\n  agent: bob\n  updated_at: 2024-01-15T10:40:00Z\nstatus: blocked\nblockers:\n  - description: Need the schema\n    requires_agent: alice\n",
    )
    .unwrap();
    fs::write(
        s.join("role-comm-alice-to-bob-msg_q.md"),
        "meta:\n  message_id: msg_q\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:36:00Z\n  priority: medium\ntype: question\nsubject: q\nmessage: q?\nresponse_needed: true\nresponse_by: 2024-01-15T10:45:00Z\n",
    )
    .unwrap();
    let _d = Daemon::start(root);
    let bob: Vec<String> = s
        .join("inbox/bob/new")
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        bob.iter()
            .any(|n| n.starts_with("0-critical-20240115T103800.000Z-msg_route_")),
        "{bob:?}"
    );
    let routed = bob.iter().find(|n| n.contains("msg_route_")).unwrap();
    let text = fs::read_to_string(s.join("inbox/bob/new").join(routed)).unwrap();
    assert!(
        text.contains("Intervention requested: BuildBroken")
            && text.contains("error-alice-20240115T103800Z.md"),
        "{text}"
    );
    let alice: Vec<String> = s
        .join("inbox/alice/new")
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        alice
            .iter()
            .any(|n| n.starts_with("1-high-") && n.contains("msg_route_")),
        "blocker routed to alice (high): {alice:?}"
    );
    let audit = audit_log(root).unwrap();
    assert!(
        audit.contains("\"kind\":\"response-overdue\"")
            && audit.contains("\"message_id\":\"msg_q\""),
        "{audit}"
    );
}

#[test]
fn send_and_inbox_for_agents() {
    let tmp = project();
    let root = tmp.path();
    let out = ctl_run(
        root,
        &words(
            "send --from alice --to bob --priority low --type question --subject Pagination? --message 'limit/offset or cursor?' --task task_bob --response-by 2030-01-01T00:00:00Z --json",
        ),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let id = v["message_id"].as_str().unwrap().to_string();
    let path = v["path"].as_str().unwrap().to_string();
    assert!(
        path.ends_with(&format!("role-comm-alice-to-bob-{id}.md")),
        "{path}"
    );
    // The written file validates.
    let out = ctl_run(root, &["validate", &path]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // Refused: a recipient that is not an agent name.
    let out = ctl_run(
        root,
        &words(
            "send --from alice --to 'Bob Smith' --priority high --type request --subject s --message m",
        ),
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("not a valid agent name"),
        "{}",
        stderr(&out)
    );

    let _d = Daemon::start(root);
    let out = ctl_run(root, &["inbox", "list", "bob", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["messages"][0]["message_id"], id.as_str());
    assert_eq!(v["messages"][0]["unread"], true);
    let out = ctl_run(root, &["inbox", "next", "bob", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("limit/offset or cursor?")
    );
    // It was acknowledged by this very call: read, and moved to cur/.
    assert_eq!(v["unread"], false, "{v}");
    assert!(v["path"].as_str().unwrap().contains("/cur/"), "{v}");
    // Nothing left: exit 1 after waiting briefly.
    let out = ctl_run(root, &["inbox", "next", "bob", "--wait", "200ms"]);
    assert_eq!(code(&out), 1);
    // --wait returns as soon as a message arrives.
    let waiter = ctl(root)
        .args(["inbox", "next", "alice", "--wait", "20s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = waiter.id();
    crate::daemon::eventually("inbox next --wait watching", || watching(pid).then_some(()));
    let out = ctl_run(
        root,
        &words(
            "send --from bob --to alice --priority high --type notification --subject done --message done",
        ),
    );
    assert_eq!(code(&out), 0);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("subject: done"), "{}", stdout(&out));
    // ack by id.
    let out = ctl_run(
        root,
        &words(
            "send --from bob --to carol --new-agent --priority medium --type notification --subject x --message y",
        ),
    );
    let carol_id = stdout(&out).trim().to_string();
    eventually("delivered to carol", || {
        let out = ctl_run(root, &["inbox", "list", "carol"]);
        stdout(&out).contains(&carol_id).then_some(())
    });
    let out = ctl_run(root, &["inbox", "ack", "carol", &carol_id]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // carol has no task in the session: flagged in status.
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&ctl_run(root, &["status", "--json"]))).unwrap();
    assert_eq!(
        v["roots"][0]["sessions"][0]["recipients_without_task"][0],
        "carol"
    );
}

#[test]
fn waiting_for_a_message_sleeps_on_a_kernel_notification() {
    let tmp = project();
    let root = tmp.path();
    let mut waiter = ctl(root)
        .args(["inbox", "next", "bob", "--wait", "60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = waiter.id();
    crate::daemon::eventually("inbox next --wait watching", || watching(pid).then_some(()));
    let before = crate::lock::cpu_ticks(pid);
    // Stays: the measurement window, 5 s of waiting with nothing to wake it.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let used = crate::lock::cpu_ticks(pid) - before;
    // Under 1 % of 5 s; a polling loop costs most of a core.
    let limit = crate::lock::ticks_per_second() * 5 / 100;
    let _ = waiter.kill();
    let _ = waiter.wait();
    assert!(
        used <= limit,
        "a 5 s wait used {used} ticks (limit {limit})"
    );
}
