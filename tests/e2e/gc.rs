//! `squadctl gc` against other gcs, deep trees, interrupted deletions and a
//! future `--now` (issue 11), through the real binary.

use crate::support::*;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// A completed session, long past its archive age.
fn completed(root: &Path, name: &str) {
    // Built beside the root's sessions and renamed in whole: a running
    // squadd that saw the empty directory first would write its own status
    // file over this one (seen once in a full run: the session stayed active).
    let staging = root.join(format!(".staging-{name}"));
    fs::create_dir_all(&staging).unwrap();
    fs::write(
        staging.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2023-01-01T00:00:00Z\nstatus: completed\ncompleted_at: 2023-01-02T00:00:00Z\n",
    )
    .unwrap();
    fs::create_dir_all(root.join(".squad/sessions")).unwrap();
    fs::rename(&staging, root.join(".squad/sessions").join(name)).unwrap();
}

/// A failed session, long past its delete age, with `levels` nested
/// directories of artifacts.
fn failed_deep(root: &Path, name: &str, levels: usize) {
    let dir = root.join(".squad/sessions").join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2023-01-01T00:00:00Z\nstatus: failed\nfailed_at: 2023-01-02T00:00:00Z\n",
    )
    .unwrap();
    let mut deep = dir.join("artifacts");
    for _ in 0..levels {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("out.txt"), "x").unwrap();
}

fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join(".squad/sessions")).unwrap();
    tmp
}

/// squadctl with at most `n` open files.
fn with_fd_limit(cmd: &mut std::process::Command, n: u64) -> &mut std::process::Command {
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

#[test]
fn two_gcs_at_once_neither_fails_nor_repeats_the_others_work() {
    let tmp = project();
    let root = tmp.path();
    // Mixed case on purpose: names are reported as they are.
    for i in 0..120 {
        completed(root, &format!("20230101T{i:06}Z-Plan"));
    }
    let spawn = || {
        ctl(root)
            .arg("gc")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for out in [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()] {
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        assert!(!stdout(&out).contains("FAILED"), "{}", stdout(&out));
    }
    assert_eq!(
        fs::read_dir(root.join(".squad/archives")).unwrap().count(),
        120
    );
    let audit = audit_log(root).unwrap();
    assert!(!audit.contains("retention-failed"), "{audit}");
    assert_eq!(audit.matches("\"kind\":\"session-archived\"").count(), 120);
}

#[test]
fn a_gc_waits_for_the_running_one_or_says_it_is_running() {
    let tmp = project();
    let root = tmp.path();
    completed(root, "20230101T000000Z-a");
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    // Another gc (or squadd's retention) holds the lock.
    let held = fs::File::create(root.join(".squad/run/gc.lock")).unwrap();
    held.lock().unwrap();
    let out = ctl_run(root, &["gc", "--wait", "0s"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("another gc is running"),
        "{}",
        stderr(&out)
    );
    assert!(
        root.join(".squad/sessions/20230101T000000Z-a").exists(),
        "nothing done"
    );
    // A dry run only reads: it does not wait.
    let out = ctl_run(root, &["gc", "--dry-run", "--wait", "0s"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Released while gc waits (it sleeps between two tries of the lock):
    // the waiting gc goes ahead.
    let gc = ctl(root)
        .args(["gc", "--wait", "20s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = gc.id();
    crate::daemon::eventually("gc waits for the lock", || sleeping(pid).then_some(()));
    drop(held);
    let out = gc.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(root.join(".squad/archives/20230101T000000Z-a").exists());
}

#[test]
fn a_tree_deeper_than_the_fd_limit_is_deleted_completely() {
    let tmp = project();
    let root = tmp.path();
    failed_deep(root, "20230101T000000Z-deep", 200);
    let out = run(with_fd_limit(ctl(root).arg("gc"), 64));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        fs::read_dir(root.join(".squad/sessions")).unwrap().count(),
        0,
        "nothing left, not even a .deleting-* remnant"
    );
}

#[test]
fn an_interrupted_deletion_is_reported_and_finished_by_the_next_run() {
    let tmp = project();
    let root = tmp.path();
    // What a deletion cut short (a crash, an error) leaves.
    let remnant = root.join(".squad/archives/.deleting-20230101T000000Z-x-4242");
    fs::create_dir_all(remnant.join("artifacts/a/b")).unwrap();
    fs::write(remnant.join("artifacts/a/b/big.bin"), "x").unwrap();
    let out = ctl_run(root, &["gc", "--dry-run"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("would finish  archives .deleting-20230101T000000Z-x-4242")
            && stdout(&out).contains("1 interrupted deletion(s) to finish"),
        "{}",
        stdout(&out)
    );
    let out = ctl_run(root, &["gc"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(!remnant.exists());
    let audit = audit_log(root).unwrap();
    assert!(audit.contains("an interrupted deletion"), "{audit}");
}

#[test]
fn a_future_now_plans_only() {
    let tmp = project();
    let root = tmp.path();
    completed(root, "20230101T000000Z-a");
    let out = ctl_run(root, &["gc", "--now", "2999-01-01T00:00:00Z"]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("--dry-run"), "{}", stderr(&out));
    assert!(root.join(".squad/sessions/20230101T000000Z-a").exists());
    let out = ctl_run(root, &["gc", "--dry-run", "--now", "2999-01-01T00:00:00Z"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let help = stdout(&run(squadctl().args(["gc", "--help"])));
    assert!(help.contains("only with --dry-run"), "{help}");
}

#[test]
fn a_schedule_that_never_fires_is_refused_naming_the_field() {
    let tmp = project();
    let root = tmp.path();
    write_policy(root, "retention:\n  schedule: '0 0 0 30 2 *'\n");
    let out = ctl_run(root, &["gc", "--dry-run"]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("retention.schedule")
            && stderr(&out).contains("no run within a year"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn squadd_s_scheduled_retention_waits_for_a_running_gc() {
    use crate::daemon::{Daemon, eventually};
    let tmp = project();
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    write_policy(root, "retention:\n  schedule: '* * * * * *'\n");
    // squadctl gc (or another squadd) is running.
    let held = fs::File::create(root.join(".squad/run/gc.lock")).unwrap();
    held.lock().unwrap();
    let d = Daemon::start(root);
    completed(root, "20230101T000000Z-a");
    // Several scheduled runs come and go (squadd logs each one the lock
    // turns away; no event records it): none acts under the lock.
    eventually("two scheduled runs turned away by the gc lock", || {
        (d.log().matches("another gc holds the gc lock").count() >= 2).then_some(())
    });
    assert!(root.join(".squad/sessions/20230101T000000Z-a").exists());
    drop(held);
    eventually("archived once the lock is free", || {
        root.join(".squad/archives/20230101T000000Z-a")
            .exists()
            .then_some(())
    });
    let audit = audit_log(root).unwrap();
    assert!(!audit.contains("retention-failed"), "{audit}");
}
