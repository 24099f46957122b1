//! The per-session edit locks (`.squad/run/session-<name>.lock`, taken by
//! `squadctl session …` edits and squadd's status writes) go with their
//! session: `gc` removes the lock files of sessions it archived or deleted,
//! and of sessions removed by hand, unless someone holds one.

use crate::support::*;
use std::fs;
use std::path::Path;

const DONE: &str = "20230101T000000Z-done";
const FAILED: &str = "20230101T000000Z-failed";
const ACTIVE: &str = "20240101T000000Z-active";
const GONE: &str = "20240101T000000Z-gone";
const HELD: &str = "20240101T000000Z-held";

fn lock_file(root: &Path, session: &str) -> std::path::PathBuf {
    root.join(".squad/run")
        .join(format!("session-{session}.lock"))
}

fn set_status(root: &Path, session: &str, text: &str) {
    fs::write(
        root.join(".squad/sessions")
            .join(session)
            .join("session-status.md"),
        format!("session_id: sess_1\nstarted_at: 2023-01-01T00:00:00Z\n{text}"),
    )
    .unwrap();
}

#[test]
fn gc_removes_the_edit_locks_of_sessions_that_went_unless_held() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    ctl_ok(root, &["init"]);
    for s in [DONE, FAILED, ACTIVE, GONE, HELD] {
        fs::create_dir_all(root.join(".squad/sessions").join(s)).unwrap();
        set_status(root, s, "status: active\n");
        // An edit made with squadd down takes the session's lock.
        ctl_ok(root, &["session", "phase", s, "design"]);
        assert!(lock_file(root, s).exists(), "{s}");
    }
    set_status(
        root,
        DONE,
        "status: completed\ncompleted_at: 2023-01-02T00:00:00Z\n",
    );
    set_status(
        root,
        FAILED,
        "status: failed\nfailed_at: 2023-01-02T00:00:00Z\n",
    );
    for s in [GONE, HELD] {
        fs::remove_dir_all(root.join(".squad/sessions").join(s)).unwrap();
    }
    // Someone holds HELD's lock (an edit in progress).
    let held = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock_file(root, HELD))
        .unwrap();
    held.lock().unwrap();
    ctl_ok(root, &["gc"]);
    assert!(root.join(".squad/archives").join(DONE).is_dir());
    assert!(!root.join(".squad/sessions").join(FAILED).exists());
    for (s, kept) in [
        (DONE, false),
        (FAILED, false),
        (GONE, false),
        (ACTIVE, true),
        (HELD, true),
    ] {
        assert_eq!(lock_file(root, s).exists(), kept, "{s}");
    }
    assert!(root.join(".squad/run/gc.lock").exists());
    // Let go: the next gc removes it.
    drop(held);
    ctl_ok(root, &["gc"]);
    assert!(!lock_file(root, HELD).exists());
    // The kept session's lock still serves.
    ctl_ok(root, &["session", "phase", ACTIVE, "implementation"]);
    assert!(lock_file(root, ACTIVE).exists());
}
