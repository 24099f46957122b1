//! Issue 11 ("wrong answers"): squadd's answers that were wrong, each with
//! its regression test through the real binaries.

use crate::daemon::{Daemon, counters, eventually, plan, progress};
use crate::support::{audit_log, code, copy_tree, ctl_run, exit_within, notification, stdout};
use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

const S: &str = "20240115T100000Z-answers";

/// A root with one session holding `task_a` (alice).
fn project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join(".squad/sessions").join(S);
    fs::create_dir_all(&s).unwrap();
    fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    fs::write(
        s.join("role-plan-alice-task_a.md"),
        plan("task_a", "alice", &[]),
    )
    .unwrap();
    (tmp, s)
}

/// The audit lines of one kind.
fn audited(root: &Path, kind: &str) -> Vec<serde_json::Value> {
    audit_log(root)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == kind)
        .collect()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// squadd as a user that file permissions apply to: root reads a mode-000
/// file anyway, so as root the daemon runs as `nobody` over a root it owns.
struct Unprivileged(Child);

impl Unprivileged {
    fn start(root: &Path) -> Unprivileged {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_squadd"));
        cmd.arg("--root").arg(root);
        if is_root() {
            chown_tree(root, 65534);
            cmd.uid(65534).gid(65534);
        }
        cmd.stderr(std::process::Stdio::null());
        Unprivileged(cmd.spawn().unwrap())
    }
}

impl Drop for Unprivileged {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn chown_tree(path: &Path, id: u32) {
    std::os::unix::fs::chown(path, Some(id), Some(id)).unwrap();
    if path.is_dir() {
        for e in fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path(), id);
        }
    }
}

/// chmod 000 then 644 of a protocol file: squadd counted the file only
/// after its content changed (`tasks_total` stayed 1), because attribute
/// changes were not events and a read error was sticky.
#[test]
fn a_file_made_readable_again_is_read() {
    let (tmp, session) = project();
    let root = tmp.path();
    let _d = Unprivileged::start(root);
    eventually("squadd started", || {
        (counters(&session)? == (0, 1, "active".into())).then_some(())
    });
    let b = session.join("role-plan-bob-task_b.md");
    {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o000)
            .open(&b)
            .unwrap();
        f.write_all(plan("task_b", "bob", &[]).as_bytes()).unwrap();
    }
    eventually("the unreadable file reported", || {
        audited(root, "file-invalid")
            .iter()
            .any(|v| {
                v["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("role-plan-bob-task_b.md"))
            })
            .then_some(())
    });
    assert_eq!(counters(&session).unwrap().1, 1);
    fs::set_permissions(&b, fs::Permissions::from_mode(0o644)).unwrap();
    eventually("the file counted once readable", || {
        (counters(&session)? == (0, 2, "active".into())).then_some(())
    });
    assert_eq!(audited(root, "file-fixed").len(), 1);
}

fn message(id: &str, priority: &str, created: &str) -> String {
    notification(id, priority, created, "s", "m")
}

fn now_stamp(offset: chrono::Duration) -> String {
    (chrono::Utc::now() + offset).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Every critical message was marked `late` (deliver_within.critical is
/// 0 s and no delivery takes 0 s): a delivery within squadd's reaction time
/// is on time; one written long before squadd saw it is late.
#[test]
fn a_prompt_critical_delivery_is_on_time() {
    let (tmp, session) = project();
    let root = tmp.path();
    let _d = Daemon::start(root);
    fs::write(
        session.join("role-comm-alice-to-bob-msg_now.md"),
        message("msg_now", "critical", &now_stamp(chrono::Duration::zero())),
    )
    .unwrap();
    fs::write(
        session.join("role-comm-alice-to-bob-msg_old.md"),
        message("msg_old", "critical", "2024-01-15T10:00:00Z"),
    )
    .unwrap();
    // squadd's own notices (tasks ready) are delivered too: count ours.
    let delivered = eventually("both delivered", || {
        let v: Vec<_> = audited(root, "message-delivered")
            .into_iter()
            .filter(|v| v["message_id"] == "msg_now" || v["message_id"] == "msg_old")
            .collect();
        (v.len() == 2).then_some(v)
    });
    let late = |id: &str| {
        delivered
            .iter()
            .find(|v| v["message_id"] == id)
            .map(|v| v["late"].clone())
    };
    assert_eq!(late("msg_now"), Some(serde_json::json!(false)));
    assert_eq!(late("msg_old"), Some(serde_json::json!(true)));
}

/// summary.md said "dependency violations: 0" although a violation event
/// fired: by the session's end the prerequisite had completed, and only
/// violations still standing were counted.
#[test]
fn the_summary_counts_violations_that_happened() {
    let (tmp, session) = project();
    let root = tmp.path();
    fs::write(
        session.join("role-plan-bob-task_b.md"),
        plan("task_b", "bob", &["task_a"]),
    )
    .unwrap();
    let _d = Daemon::start(root);
    fs::write(
        session.join("role-comm-bob-task_b.md"),
        progress("task_b", "bob", "in_progress"),
    )
    .unwrap();
    eventually("the violation reported", || {
        (!audited(root, "dependency-violation").is_empty()).then_some(())
    });
    fs::write(
        session.join("role-comm-alice-task_a.md"),
        progress("task_a", "alice", "completed"),
    )
    .unwrap();
    fs::write(
        session.join("role-comm-bob-task_b.md"),
        progress("task_b", "bob", "completed"),
    )
    .unwrap();
    let summary = eventually("summary written", || {
        fs::read_to_string(session.join("summary.md")).ok()
    });
    assert!(summary.contains("- dependency violations: 1"), "{summary}");
    assert!(
        summary.contains("- dependency violation: `task_b` ran before `task_a` completed"),
        "{summary}"
    );
}

fn state_json(root: &Path) -> String {
    fs::read_to_string(root.join(".squad/run/state.json")).unwrap_or_default()
}

/// state.json (and squadd's memory) kept every session ever seen: sessions
/// deleted or archived, while squadd runs or while it was down, are pruned.
#[test]
fn state_forgets_sessions_deleted_or_archived() {
    let (tmp, session) = project();
    let root = tmp.path();
    fs::write(
        session.join("role-comm-alice-task_a.md"),
        progress("task_a", "alice", "in_progress"),
    )
    .unwrap();
    let other = root.join(".squad/sessions/20240116T100000Z-other");
    copy_tree(&session, &other);
    // Left by a run before: a session deleted while squadd was down.
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::write(
        root.join(".squad/run/state.json"),
        r#"{"version":0,"task_starts":{"20230101T000000Z-gone":{"task_x":"2023-01-01T00:00:00Z"}},"escalated":{"20230101T000000Z-gone":["msg_1"]}}"#,
    )
    .unwrap();
    let _d = Daemon::start(root);
    let state = state_json(root);
    assert!(
        state.contains(S) && state.contains("20240116T100000Z-other"),
        "{state}"
    );
    assert!(!state.contains("20230101T000000Z-gone"), "{state}");

    fs::remove_dir_all(&session).unwrap();
    eventually("the deleted session pruned", || {
        (!state_json(root).contains(S)).then_some(())
    });
    fs::create_dir_all(root.join(".squad/archives")).unwrap();
    fs::rename(&other, root.join(".squad/archives/20240116T100000Z-other")).unwrap();
    eventually("the archived session pruned", || {
        (!state_json(root).contains("20240116T100000Z-other")).then_some(())
    });
}

/// A task id reused by a later session was listed as both completed and
/// pending in shared-context.json, with nothing to tell the two apart: a
/// task is (session, id), and each entry names its session.
#[test]
fn the_shared_context_names_each_tasks_session() {
    let (tmp, session) = project();
    let root = tmp.path();
    fs::write(
        session.join("role-comm-alice-task_a.md"),
        progress("task_a", "alice", "completed"),
    )
    .unwrap();
    let later = root.join(".squad/sessions/20240116T100000Z-later");
    fs::create_dir_all(&later).unwrap();
    fs::write(
        later.join("role-plan-alice-task_a.md"),
        plan("task_a", "alice", &[]),
    )
    .unwrap();
    let _d = Daemon::start(root);
    let ctx: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(root.join(".claude/context/shared-context.json")).unwrap(),
    )
    .unwrap();
    let done = &ctx["tasks_completed"];
    let pending = &ctx["tasks_pending"];
    assert_eq!(done.as_array().map(Vec::len), Some(1), "{ctx:#}");
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{ctx:#}");
    assert_eq!(done[0]["task"], "task_a");
    assert_eq!(done[0]["session"], S);
    assert_eq!(pending[0]["task"], "task_a");
    assert_eq!(pending[0]["session"], "20240116T100000Z-later");
}

/// Runs `squadctl ARGS` in `root`: its exit code and its JSON output.
fn ctl_json(root: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let out = ctl_run(root, args);
    let v = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    (code(&out), v)
}

fn daemon_state(root: &Path) -> Option<String> {
    ctl_json(root, &["status", "--json"]).1["daemon"]["state"]
        .as_str()
        .map(str::to_string)
}

fn health(root: &Path) -> (i32, serde_json::Value) {
    ctl_json(root, &["health", "--json"])
}

/// A removed socket was never bound again (squadctl said "not running"
/// while squadd ran), and after `.squad/` was deleted and recreated squadd
/// kept running blind while a second squadd could start beside it.
#[test]
fn a_removed_socket_is_bound_again_and_a_recreated_root_taken_back() {
    let (tmp, _) = project();
    let root = tmp.path();
    let d = Daemon::start(root);
    fs::remove_file(root.join(".squad/run/squadd.sock")).unwrap();
    eventually("squadctl reaches squadd again", || {
        (daemon_state(root)? == "running").then_some(())
    });

    // squadd may make a directory inside while it goes (its presence
    // folder, as it sees the root change): removed once nothing is added.
    eventually("`.squad` removed", || {
        fs::remove_dir_all(root.join(".squad")).ok()
    });
    let out = ctl_run(root, &["init"]);
    assert_eq!(code(&out), 0);
    eventually("squadd supervises the recreated root", || {
        (daemon_state(root)? == "running").then_some(())
    });
    let session = root.join(".squad/sessions").join(S);
    fs::create_dir(&session).unwrap();
    fs::write(
        session.join("role-plan-alice-task_a.md"),
        plan("task_a", "alice", &[]),
    )
    .unwrap();
    eventually("a file of the recreated root counted", || {
        (counters(&session)?.1 == 1).then_some(())
    });
    // (The exit code also says what the disk is like: not asserted.)
    let (_, health) = health(root);
    let checks = health["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "root" && c["verdict"] == "ok"),
        "{health:#}"
    );

    // A second squadd is refused: the first holds the new pid lock.
    let mut second = Command::new(env!("CARGO_BIN_EXE_squadd"))
        .arg("--root")
        .arg(root)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(
        exit_within(&mut second, std::time::Duration::from_secs(20)),
        Some(1),
        "a second squadd started beside the first"
    );
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

/// Sessions that could not be watched at the inotify limit stayed
/// unwatched after watches were free again (their messages never
/// delivered) while `health` said ok. The limit is played by
/// `SQUADD_MAX_WATCHES` (squadd's share of it), which fails a watch the
/// way the kernel's limit does.
#[test]
fn unwatched_directories_are_retried_and_reported() {
    let (tmp, first) = project();
    let root = tmp.path();
    // How many watches squadd takes for this root as it is (on a restart:
    // the first run creates directories it then watches).
    Daemon::start(root).terminate();
    let d = Daemon::start(root);
    let watches = health(root).1["watches"].as_u64().unwrap();
    d.terminate();

    let limit = watches.to_string();
    let _d = Daemon::start_with_env(root, &[("SQUADD_MAX_WATCHES", limit.as_str())]);
    let second = root.join(".squad/sessions/20240116T100000Z-second");
    fs::create_dir(&second).unwrap();
    let (code, v) = eventually("the unwatched session reported", || {
        let (code, v) = health(root);
        (v["unwatched"].as_array()?.len() == 1).then_some((code, v))
    });
    assert_eq!(code, 1, "{v:#}");
    assert!(
        v["unwatched"][0]
            .as_str()
            .unwrap()
            .ends_with("20240116T100000Z-second"),
        "{v:#}"
    );
    fs::write(
        second.join("role-plan-bob-task_b.md"),
        plan("task_b", "bob", &[]),
    )
    .unwrap();
    // Watches become free: the first session goes.
    fs::remove_dir_all(&first).unwrap();
    eventually("the second session watched and its file counted", || {
        (counters(&second)?.1 == 1).then_some(())
    });
    let v = eventually("health ok again", || {
        let (_, v) = health(root);
        (v["unwatched"].as_array()?.is_empty()).then_some(v)
    });
    assert!(
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "unwatched" && c["verdict"] == "ok"),
        "{v:#}"
    );
    assert!(!audited(root, "watch-restored").is_empty());
}

/// Deleting 3 files gave 5 `file-removed` events: each removal is one
/// event (this test could not reproduce the extra two on this main; it
/// holds the count to exactly one per file, attribute events included).
#[test]
fn each_removed_file_is_one_event() {
    let (tmp, session) = project();
    let root = tmp.path();
    let files = [
        ("role-plan-bob-task_b.md", plan("task_b", "bob", &[])),
        (
            "role-comm-alice-task_a.md",
            progress("task_a", "alice", "in_progress"),
        ),
        (
            "role-comm-alice-to-bob-msg_1.md",
            message("msg_1", "high", "2024-01-15T10:00:00Z"),
        ),
    ];
    for (name, text) in &files {
        fs::write(session.join(name), text).unwrap();
    }
    let _d = Daemon::start(root);
    for (name, _) in &files {
        fs::remove_file(session.join(name)).unwrap();
    }
    eventually("the removals applied", || {
        (counters(&session)? == (0, 1, "active".into())).then_some(())
    });
    // Stays: proves nothing more happens; late duplicates would arrive
    // within this.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let removed = audited(root, "file-removed");
    assert_eq!(removed.len(), 3, "{removed:#?}");
}

/// `daemon::removing_a_session_while_supervised_succeeds` was flaky under
/// load: when `rm -rf` took longer than squadd's removal delay (the
/// remover descheduled on a busy machine) and had already removed
/// session-status.md, squadd wrote a fresh one into the directory being
/// emptied and the removal failed (ENOTEMPTY). Played here by a slow
/// removal, the status file first.
#[test]
fn a_slow_removal_of_a_session_is_never_written_into() {
    let (tmp, session) = project();
    let root = tmp.path();
    for i in 0..4 {
        fs::write(
            session.join(format!("role-plan-dev-task_{i}.md")),
            plan(&format!("task_{i}"), "dev", &[]),
        )
        .unwrap();
    }
    let _d = Daemon::start(root);
    let mut names: Vec<_> = fs::read_dir(&session)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "session-status.md")
        .collect();
    names.insert(0, "session-status.md".into());
    // squadd's notices (tasks ready) made inbox/ too: a directory goes
    // like `rm -rf` takes it, whole.
    for name in names {
        let path = session.join(name);
        if path.is_dir() {
            fs::remove_dir_all(&path).unwrap();
        } else {
            fs::remove_file(&path).unwrap();
        }
        // Stays (pacing): each removal lands while squadd may be writing into the session.
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    fs::remove_dir(&session).expect("squadd wrote into the session being removed");
}
