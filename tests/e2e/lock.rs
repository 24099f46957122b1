//! `squadctl lock` through the real binary: races between processes, stale
//! locks, waiting, hostile targets, corrupt records.

use crate::support::*;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SESSION: &str = "20240115T100000Z-locks";

/// A project with `n` agents (`agent-0`…), each assigned `task_<i>` allowed
/// to change `shared/**` and `own-<i>/**`.
fn project(n: usize) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join(".squad/sessions").join(SESSION);
    fs::create_dir_all(&s).unwrap();
    fs::create_dir_all(tmp.path().join(".squad/run")).unwrap();
    for i in 0..n {
        fs::write(
            s.join(format!("role-plan-agent-{i}-task_{i}.md")),
            format!(
                "meta:\n  task_id: task_{i}\n  agent: agent-{i}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\nboundaries:\n  allowed:\n    - shared/**\n    - own-{i}/**\n  forbidden:\n    - shared/secret/**\n"
            ),
        )
        .unwrap();
    }
    tmp
}

fn lock(root: &Path, i: usize, args: &[&str]) -> Command {
    let mut c = squadctl();
    c.current_dir(root)
        .args(["lock", "acquire"])
        .args(args)
        .args([
            "--agent",
            &format!("agent-{i}"),
            "--task",
            &format!("task_{i}"),
        ]);
    c
}

fn race(targets: impl Fn(usize) -> Vec<String>) {
    let tmp = project(20);
    let root = tmp.path();
    let children: Vec<_> = (0..20)
        .map(|i| {
            let t = targets(i);
            let args: Vec<&str> = t.iter().map(String::as_str).collect();
            lock(root, i, &args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let winners: Vec<usize> = (0..20).filter(|i| code(&outs[*i]) == 0).collect();
    assert_eq!(winners.len(), 1, "exactly one winner: {winners:?}");
    let winner = format!("agent-{}", winners[0]);
    for (i, out) in outs.iter().enumerate() {
        if i == winners[0] {
            continue;
        }
        assert_eq!(code(out), 1, "agent-{i}: {}", stderr(out));
        assert!(
            stderr(out).contains(&format!("by {winner} (task task_{})", winners[0])),
            "agent-{i} names the winner: {}",
            stderr(out)
        );
    }
}

#[test]
fn twenty_processes_race_for_one_path_and_exactly_one_wins() {
    race(|_| vec!["shared/file.txt".into()]);
}

#[test]
fn twenty_processes_race_with_overlapping_globs_and_exactly_one_wins() {
    let globs = [
        "shared/**",
        "shared/src/*.rs",
        "shared/src/**",
        "shared/src/a.rs",
    ];
    race(|i| vec![globs[i % globs.len()].to_string()]);
}

#[test]
fn all_or_none() {
    let tmp = project(2);
    let root = tmp.path();
    assert_eq!(code(&run(&mut lock(root, 0, &["shared/b.txt"]))), 0);
    let out = run(&mut lock(root, 1, &["shared/a.txt", "shared/b.txt"]));
    assert_eq!(code(&out), 1);
    // shared/a.txt was not taken either: agent-0 can take it.
    assert_eq!(code(&run(&mut lock(root, 0, &["shared/a.txt"]))), 0);
}

#[test]
fn shared_locks_coexist_and_block_exclusive_ones() {
    let tmp = project(3);
    let root = tmp.path();
    assert_eq!(
        code(&run(&mut lock(root, 0, &["shared/doc.md", "--shared"]))),
        0
    );
    assert_eq!(
        code(&run(&mut lock(root, 1, &["shared/doc.md", "--shared"]))),
        0
    );
    let out = run(&mut lock(root, 2, &["shared/*.md"]));
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("locked shared by agent-"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn expired_locks_are_reclaimed_and_audited() {
    let tmp = project(2);
    let root = tmp.path();
    assert_eq!(
        code(&run(&mut lock(root, 0, &["shared/x", "--ttl", "1s"]))),
        0
    );
    assert_eq!(code(&run(&mut lock(root, 1, &["shared/x"]))), 1);
    std::thread::sleep(Duration::from_millis(1100));
    let out = run(&mut lock(root, 1, &["shared/x"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let audit = fs::read_to_string(root.join(".squad/audit.jsonl")).unwrap();
    assert!(audit.contains("\"kind\":\"lock-reclaimed\""), "{audit}");
    assert!(audit.contains("\"reason\":\"expired\""), "{audit}");
}

#[test]
fn locks_of_a_dead_process_are_reclaimed() {
    let tmp = project(2);
    let root = tmp.path();
    let mut holder = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = holder.id().to_string();
    assert_eq!(
        code(&run(&mut lock(root, 0, &["shared/x", "--pid", &pid]))),
        0
    );
    assert_eq!(
        code(&run(&mut lock(root, 1, &["shared/x"]))),
        1,
        "alive: held"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let out = run(&mut lock(root, 1, &["shared/x"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let audit = fs::read_to_string(root.join(".squad/audit.jsonl")).unwrap();
    assert!(
        audit.contains(&format!("its process {pid} is gone")),
        "{audit}"
    );
}

#[test]
fn wait_blocks_until_the_lock_is_free() {
    let tmp = project(2);
    let root = tmp.path();
    assert_eq!(code(&run(&mut lock(root, 0, &["shared/x"]))), 0);
    let start = Instant::now();
    let waiter = lock(root, 1, &["shared/x", "--wait", "20s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let out = run(squadctl()
        .current_dir(root)
        .args(["lock", "release", "shared/x", "--agent", "agent-0"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "woke on the release"
    );
    // And a wait that runs out is a refusal naming the holder.
    let out = run(&mut lock(root, 0, &["shared/x", "--wait", "200ms"]));
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("agent-1"), "{}", stderr(&out));
}

#[test]
fn hostile_targets_are_refused_with_reasons() {
    let tmp = project(1);
    let root = tmp.path();
    std::os::unix::fs::symlink("/etc", root.join("shared-link")).unwrap();
    fs::create_dir_all(root.join("shared")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("shared/escape")).unwrap();
    let long = "a/".repeat(5000);
    let cases: &[(&str, &str)] = &[
        ("../x", "contains `..`"),
        ("/etc/passwd", "absolute"),
        ("**", "matches every path"),
        ("shared/[a-", "invalid glob"),
        ("shared/escape/passwd", "symlink to /etc"),
        ("shared/secret/key", "forbidden by boundaries.forbidden[0]"),
        (".env", "forbidden by policy boundaries.forbidden[0] `.env`"),
        ("elsewhere/x", "outside task task_0's boundaries"),
        (&long, "bytes long"),
    ];
    for (target, reason) in cases {
        let out = run(&mut lock(root, 0, &[target]));
        assert_eq!(code(&out), 1, "{target}");
        assert!(
            stderr(&out).contains(reason),
            "{}: {}",
            &target[..target.len().min(40)],
            stderr(&out)
        );
    }
    // Usage errors are 2.
    let out = run(squadctl()
        .current_dir(root)
        .args(["lock", "acquire", "x", "--agent", "Bad", "--task", "task_0"]));
    assert_eq!(code(&out), 2);
}

#[test]
fn a_corrupt_record_is_reported_and_treated_as_held() {
    let tmp = project(1);
    let root = tmp.path();
    let locks = root.join(".squad/sessions").join(SESSION).join("locks");
    fs::create_dir_all(&locks).unwrap();
    fs::write(locks.join("garbage.json"), "{not json").unwrap();
    let out = run(&mut lock(root, 0, &["own-0/x"]));
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("unreadable lock record"),
        "{}",
        stderr(&out)
    );
    let out = run(squadctl().current_dir(root).args(["lock", "list"]));
    assert!(stdout(&out).contains("UNREADABLE"), "{}", stdout(&out));
    assert!(
        locks.join("garbage.json").exists(),
        "never silently dropped"
    );
}

#[test]
fn renew_extends_and_list_reports() {
    let tmp = project(1);
    let root = tmp.path();
    assert_eq!(
        code(&run(&mut lock(root, 0, &["own-0/a", "--ttl", "1m"]))),
        0
    );
    let out = run(squadctl().current_dir(root).args([
        "lock", "renew", "own-0/a", "--agent", "agent-0", "--ttl", "2h", "--json",
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let until = v["renewed"][0]["expires_at"].as_str().unwrap();
    let until = chrono::DateTime::parse_from_rfc3339(until).unwrap();
    assert!(until > chrono::Utc::now() + chrono::Duration::minutes(100));
    let out = run(squadctl()
        .current_dir(root)
        .args(["lock", "list", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["locks"][0]["lock"]["targets"][0], "own-0/a");
    assert_eq!(v["locks"][0]["state"], "held");
}

#[test]
fn re_taking_ones_own_lock_replaces_it() {
    let tmp = project(1);
    let root = tmp.path();
    for _ in 0..3 {
        assert_eq!(code(&run(&mut lock(root, 0, &["own-0/a", "own-0/b"]))), 0);
    }
    assert_eq!(code(&run(&mut lock(root, 0, &["own-0/a"]))), 0);
    let out = run(squadctl()
        .current_dir(root)
        .args(["lock", "list", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let mut targets: Vec<String> = v["locks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| {
            l["lock"]["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
        })
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        ["own-0/a", "own-0/b"],
        "one record per target, no duplicates"
    );
}

/// The table is serialized by an OS lock across processes: while another
/// process holds `.squad/run/locks.mutex`, an acquisition waits; a crash of
/// the holder releases it (the kernel drops flock locks), and a crash
/// remnant (a temporary record file) is ignored.
#[test]
fn the_table_mutex_serializes_processes_and_survives_crash_remnants() {
    let tmp = project(1);
    let root = tmp.path();
    let locks = root.join(".squad/sessions").join(SESSION).join("locks");
    fs::create_dir_all(&locks).unwrap();
    fs::write(locks.join(".agent-0--task_0--x.json.tmp.99999.0"), "{half").unwrap();
    let mutex = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(".squad/run/locks.mutex"))
        .unwrap();
    mutex.lock().unwrap();
    let mut child = lock(root, 0, &["own-0/a"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "waits for the table mutex"
    );
    drop(mutex);
    let status = child.wait().unwrap();
    assert!(status.success());
    let out = run(squadctl().current_dir(root).args(["lock", "list"]));
    assert!(!stdout(&out).contains("UNREADABLE"), "{}", stdout(&out));
}
