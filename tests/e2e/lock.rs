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
    numbered_agents_project(SESSION, n, |i| {
        format!(
            "boundaries:\n  allowed:\n    - shared/**\n    - own-{i}/**\n  forbidden:\n    - shared/secret/**\n"
        )
    })
}

fn lock(root: &Path, i: usize, args: &[&str]) -> Command {
    let mut c = ctl(root);
    c.args(["lock", "acquire"]).args(args).args([
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
    // Stays: the 1 s lock ttl must pass; that is the point.
    std::thread::sleep(Duration::from_millis(1100));
    let out = run(&mut lock(root, 1, &["shared/x"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let audit = audit_log(root).unwrap();
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
    let audit = audit_log(root).unwrap();
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
    let pid = waiter.id();
    crate::daemon::eventually("lock acquire --wait watching", || {
        watching(pid).then_some(())
    });
    let out = ctl_run(root, &["lock", "release", "shared/x", "--agent", "agent-0"]);
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
    let out = ctl_run(root, &words("lock acquire x --agent Bad --task task_0"));
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
    let out = ctl_run(root, &["lock", "list"]);
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
    let out = ctl_run(
        root,
        &words("lock renew own-0/a --agent agent-0 --ttl 2h --json"),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let until = v["renewed"][0]["expires_at"].as_str().unwrap();
    let until = chrono::DateTime::parse_from_rfc3339(until).unwrap();
    assert!(until > chrono::Utc::now() + chrono::Duration::minutes(100));
    let out = ctl_run(root, &["lock", "list", "--json"]);
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
    let out = ctl_run(root, &["lock", "list", "--json"]);
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
    // The child has reached the table mutex and waits for it there.
    let pid = child.id();
    crate::daemon::eventually("the child waits for the table mutex", || {
        blocked_on_a_lock(pid).then_some(())
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "waits for the table mutex"
    );
    drop(mutex);
    let status = child.wait().unwrap();
    assert!(status.success());
    let out = ctl_run(root, &["lock", "list"]);
    assert!(!stdout(&out).contains("UNREADABLE"), "{}", stdout(&out));
}

/// Runs a command, killing it when it does not finish in `limit` (a hang is
/// a failure, never a stuck test run).
fn run_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{cmd:?} hung for {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Poll interval of a wait with a deadline (`limit`).
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Every lock record file under `dir`, recursively.
fn records_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(records_under(&e.path()));
        } else if e.path().extension().is_some_and(|x| x == "json")
            && e.path().parent().is_some_and(|p| p.ends_with("locks"))
        {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn session_must_name_a_real_session_directory() {
    let outer = tempfile::tempdir().unwrap();
    let tmp = project(2);
    let root = tmp.path();
    // A look-alike session outside the project, with agent-1's plan.
    let fake = outer.path().join("X");
    copy_tree(&root.join(".squad/sessions").join(SESSION), &fake);
    let link = root.join(".squad/sessions/20240116T000000Z-link");
    std::os::unix::fs::symlink(&fake, &link).unwrap();
    assert_eq!(code(&run(&mut lock(root, 0, &["shared/x"]))), 0);
    let relative = format!(
        "../../../{}/X",
        outer.path().file_name().unwrap().to_string_lossy()
    );
    for session in [
        relative.as_str(),
        fake.to_str().unwrap(),
        "20240116T000000Z-link",
        "..",
        ".",
        "",
    ] {
        let out = run(&mut lock(root, 1, &["shared/x", "--session", session]));
        assert_eq!(code(&out), 1, "--session {session:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("session"),
            "--session {session:?}: {}",
            stderr(&out)
        );
    }
    // Nothing was written outside the real session: one holder only.
    assert!(records_under(outer.path()).is_empty());
    let list = stdout(&ctl_run(root, &["lock", "list", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(v["locks"].as_array().unwrap().len(), 1, "{list}");
    // The real session by name still works.
    let out = run(&mut lock(root, 1, &["own-1/x", "--session", SESSION]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn fifos_and_other_non_files_in_locks_never_hang_the_cli() {
    let tmp = project(1);
    let root = tmp.path();
    let locks = root.join(".squad/sessions").join(SESSION).join("locks");
    fs::create_dir_all(&locks).unwrap();
    let fifo = locks.join("x.json");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    fs::create_dir(locks.join("dir.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", locks.join("zero.json")).unwrap();
    let limit = Duration::from_secs(10);
    let out = run_within(ctl(root).args(["lock", "list"]), limit);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("UNREADABLE"), "{}", stdout(&out));
    assert!(stdout(&out).contains("FIFO"), "{}", stdout(&out));
    // An unreadable record counts as held: refused, not hung.
    let out = run_within(&mut lock(root, 0, &["own-0/a"]), limit);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("unreadable"), "{}", stderr(&out));
    let out = run_within(ctl(root).args(["gc", "--dry-run"]), limit);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// Issue 10: an enormous `--ttl` is refused by its parser (naming `--ttl`
/// and the 3650d maximum), never wrapped or panicking in the expiry
/// arithmetic. The policy is the default one, so the refusal is the
/// argument's, not the policy's; the largest accepted `--ttl` still works
/// under a policy that allows it.
#[test]
fn an_enormous_ttl_is_an_error_not_a_panic() {
    let tmp = project(1);
    let root = tmp.path();
    assert!(!root.join(".squad/policies.yaml").exists());
    for ttl in ["100000000d", "18446744073709551615", "3651d"] {
        for cmd in ["acquire", "renew"] {
            let mut c = ctl(root);
            c.args(["lock", cmd, "own-0/a", "--agent", "agent-0"])
                .args(["--ttl", ttl]);
            if cmd == "acquire" {
                c.args(["--task", "task_0"]);
            }
            let out = run(&mut c);
            let err = stderr(&out);
            assert_eq!(code(&out), 2, "{cmd} --ttl {ttl}: {err}");
            assert!(
                err.contains("--ttl") && err.contains("maximum of 3650d"),
                "{cmd} --ttl {ttl}: {err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    let out = run(&mut lock(
        root,
        0,
        &["own-0/a", "--wait", "18446744073709551615"],
    ));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--wait"), "{}", stderr(&out));
    // The largest duration there is, allowed by the policy: an expiry ten
    // years out, taken.
    write_policy(root, "locks:\n  max_ttl: 3650d\n");
    let out = run(&mut lock(root, 0, &["own-0/a", "--ttl", "3650d"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// A second session planning the same task id for the same agent.
fn add_session(root: &Path, name: &str, status: Option<&str>) {
    let from = root.join(".squad/sessions").join(SESSION);
    let to = root.join(".squad/sessions").join(name);
    fs::create_dir_all(&to).unwrap();
    fs::copy(
        from.join("role-plan-agent-0-task_0.md"),
        to.join("role-plan-agent-0-task_0.md"),
    )
    .unwrap();
    if let Some(status) = status {
        fs::write(
            to.join("session-status.md"),
            format!("session_id: sess_x\nstatus: {status}\nstarted_at: 2024-01-16T00:00:00Z\n"),
        )
        .unwrap();
    }
}

#[test]
fn a_task_id_reused_by_a_later_session_is_that_session_s_task() {
    let tmp = project(1);
    let root = tmp.path();
    // The earlier session (sorts first) completed; the later one reuses task_0.
    fs::write(
        root.join(".squad/sessions").join(SESSION).join("session-status.md"),
        "session_id: sess_x\nstatus: completed\nstarted_at: 2024-01-15T10:00:00Z\ncompleted_at: 2024-01-15T12:00:00Z\n",
    )
    .unwrap();
    let later = "20240116T000000Z-later";
    add_session(root, later, Some("active"));
    let out = run(&mut lock(root, 0, &["own-0/a", "--json"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["lock"]["session"], later, "{v}");
    assert!(v["record"].as_str().unwrap().contains(later), "{v}");
    // Naming the completed session is refused: its locks ended with it.
    let out = run(&mut lock(root, 0, &["own-0/b", "--session", SESSION]));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("completed"), "{}", stderr(&out));
}

#[test]
fn an_ambiguous_task_id_needs_session_and_lists_the_candidates() {
    let tmp = project(1);
    let root = tmp.path();
    let other = "20240116T000000Z-other";
    add_session(root, other, None);
    let out = run(&mut lock(root, 0, &["own-0/a"]));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--session"), "{err}");
    assert!(err.contains(SESSION) && err.contains(other), "{err}");
    assert!(records_under(root).is_empty());
    let out = run(&mut lock(root, 0, &["own-0/a", "--session", other]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        records_under(&root.join(".squad/sessions").join(other)).len(),
        1
    );
}

#[test]
fn cli_lock_events_carry_the_real_root_in_the_audit_log() {
    let tmp = project(1);
    let root = tmp.path();
    assert_eq!(code(&run(&mut lock(root, 0, &["own-0/a"]))), 0);
    let canonical = fs::canonicalize(root).unwrap();
    let audit = audit_log(root).unwrap();
    let line: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["kind"], "lock-acquired");
    assert_eq!(line["root"], canonical.display().to_string(), "{line}");
    // squadd down: `events` shows the audit log, lock events included.
    let out = ctl_run(root, &["events"]);
    assert!(stdout(&out).contains("lock-acquired"), "{}", stdout(&out));
}

/// CPU time (user + system, in clock ticks) a process has used so far.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// Clock ticks per second (`getconf CLK_TCK`).
pub fn ticks_per_second() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn waiting_for_a_lock_sleeps_on_a_kernel_notification() {
    let tmp = project(2);
    let root = tmp.path();
    assert_eq!(code(&run(&mut lock(root, 0, &["shared/x"]))), 0);
    let mut waiter = lock(root, 1, &["shared/x", "--wait", "30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = waiter.id();
    // Past start-up (it waits on its watches), measure 5 s of waiting.
    crate::daemon::eventually("lock acquire --wait watching", || {
        watching(pid).then_some(())
    });
    let before = cpu_ticks(pid);
    // Stays: the measurement window, 5 s with nothing to wake it.
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_ticks(pid) - before;
    // Under 1 % of 5 s. A polling loop costs a large share of a core.
    let limit = ticks_per_second() * 5 / 100;
    assert!(
        used <= limit,
        "a 5 s wait used {used} ticks (limit {limit})"
    );
    // And the wait still ends on the release, at once.
    let out = ctl_run(root, &["lock", "release", "shared/x", "--agent", "agent-0"]);
    assert_eq!(code(&out), 0);
    let start = Instant::now();
    while waiter.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "woke on the release"
        );
        // Poll interval of a wait with a deadline (20 s).
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn cli_lock_events_reach_squadctl_events_numbered_by_squadd() {
    let tmp = project(1);
    let root = tmp.path();
    let _d = crate::daemon::Daemon::start(root);
    assert_eq!(code(&run(&mut lock(root, 0, &["own-0/a"]))), 0);
    let out = ctl_run(root, &["lock", "release", "own-0/a", "--agent", "agent-0"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = ctl_run(root, &["events", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let events: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let canonical = fs::canonicalize(root).unwrap().display().to_string();
    for kind in ["lock-acquired", "lock-released"] {
        let e = events
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap_or_else(|| panic!("{kind} in {}", stdout(&out)));
        assert!(e["seq"].as_u64().unwrap() > 0, "{e}");
        assert_eq!(e["root"], canonical, "{e}");
        assert_eq!(e["session"], SESSION, "{e}");
    }
    // The audit log has them once each, numbered.
    let audit = audit_log(root).unwrap();
    let acquired: Vec<serde_json::Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == "lock-acquired")
        .collect();
    assert_eq!(acquired.len(), 1, "{audit}");
    assert!(acquired[0]["seq"].as_u64().unwrap() > 0);
}

#[test]
fn a_task_of_an_ended_session_takes_no_lock() {
    let tmp = project(1);
    let root = tmp.path();
    fs::write(
        root.join(".squad/sessions").join(SESSION).join("session-status.md"),
        "session_id: sess_x\nstatus: failed\nstarted_at: 2024-01-15T10:00:00Z\nfailed_at: 2024-01-15T12:00:00Z\n",
    )
    .unwrap();
    let out = run(&mut lock(root, 0, &["own-0/a"]));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("failed"), "{}", stderr(&out));
    assert!(records_under(root).is_empty());
}
