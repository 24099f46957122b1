//! Issue 43 item 7: squadd at the user's inotify limits, reached for real.
//! squadd runs in a user namespace of its own (`unshare --user
//! --map-root-user`, which needs no privilege where user namespaces are
//! allowed), whose `/proc/sys/user/max_inotify_instances` and
//! `max_inotify_watches` bound squadd alone: the kernel then refuses it as
//! it refuses a user whose editors and IDEs hold every instance or watch,
//! without taking them from the other tests and programs of this user.
//!
//! No instance left: squadd used to refuse to start ("Too many open files
//! (os error 24)"); it polls every directory instead. No watch left for a
//! directory: changes there were missed until a retry found a watch free;
//! it is polled meanwhile. Either way a file written is still taken, and
//! `health`, `status` and the log say why and which limit to raise.

use crate::daemon::{Daemon, counters, eventually, plan};
use crate::support::{code, ctl_run, skip, stdout};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const S: &str = "20240115T100000Z-limits";

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

/// The command line that runs squadd with `/proc/sys/user/<setting>` set
/// to `value` in a user namespace of its own; `None` (a loud skip; a
/// failure in CI) where user namespaces are not allowed.
fn limited(setting: &str, value: u64) -> Option<Vec<String>> {
    let script = format!("echo {value} > /proc/sys/user/{setting} && exec \"$0\" \"$@\"");
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c", &script, "true"])
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        let why = probe.map_or_else(
            |e| e.to_string(),
            |o| String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "CI: cannot lower {setting} in a user namespace: {why}"
        );
        skip(&format!(
            "no user namespace to lower {setting} in ({}); allow unprivileged user namespaces",
            why.trim()
        ));
        return None;
    }
    Some(
        ["unshare", "--user", "--map-root-user", "sh", "-c", &script]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    )
}

fn start_limited(root: &Path, wrapper: &[String]) -> Daemon {
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    Daemon::start_wrapped(&[root], &wrapper, &[])
}

fn health(root: &Path) -> (i32, serde_json::Value) {
    let out = ctl_run(root, &["health", "--json"]);
    let v = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    (code(&out), v)
}

/// The `name` check of a health report.
fn check<'a>(h: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    h["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or(&serde_json::Value::Null)
}

#[test]
fn with_no_inotify_instance_left_squadd_starts_polls_and_says_which_limit() {
    let Some(wrapper) = limited("max_inotify_instances", 0) else {
        return;
    };
    let (tmp, session) = project();
    let root = tmp.path();
    let d = start_limited(root, &wrapper);
    // Written after READY: no watch reports it, the poll does.
    fs::write(
        session.join("role-plan-bob-task_b.md"),
        plan("task_b", "bob", &[]),
    )
    .unwrap();
    eventually("the new plan counted (polled)", || {
        (counters(&session)?.1 == 2).then_some(())
    });
    let (code, h) = health(root);
    assert_eq!(code, 1, "a warning: {h:#}");
    let why = h["polling"].as_str().unwrap_or_default();
    assert!(why.contains("fs.inotify.max_user_instances"), "{h:#}");
    assert!(why.contains("sudo sysctl"), "{h:#}");
    assert_eq!(check(&h, "watcher")["value"], "polling", "{h:#}");
    assert_eq!(check(&h, "watcher")["verdict"], "warn", "{h:#}");
    let status = stdout(&ctl_run(root, &["status"]));
    assert!(
        status.contains("POLLING for changes") && status.contains("max_user_instances"),
        "{status}"
    );
    let log = d.log();
    assert!(log.contains("max_user_instances"), "{log}");
    assert!(!log.contains("cannot watch files"), "{log}");
}

#[test]
fn a_directory_left_without_a_watch_is_polled_and_said() {
    // How many watches squadd takes for this root (a first run creates the
    // directories it then watches; the second is the one counted).
    let (tmp, _) = project();
    let root = tmp.path();
    Daemon::start(root).terminate();
    let d = Daemon::start(root);
    let watches = health(root).1["watches"].as_u64().unwrap();
    d.terminate();

    // Exactly those: a new session's directory gets none.
    let Some(wrapper) = limited("max_inotify_watches", watches) else {
        return;
    };
    let d = start_limited(root, &wrapper);
    let second = root.join(".squad/sessions/20240116T100000Z-second");
    fs::create_dir(&second).unwrap();
    let h = eventually("the new session reported unwatched", || {
        let (_, h) = health(root);
        (h["unwatched"].as_array()?.len() == 1).then_some(h)
    });
    assert!(
        h["unwatched"][0]
            .as_str()
            .unwrap()
            .ends_with("20240116T100000Z-second"),
        "{h:#}"
    );
    // Written into the unwatched directory: taken by the poll.
    fs::write(
        second.join("role-plan-bob-task_b.md"),
        plan("task_b", "bob", &[]),
    )
    .unwrap();
    eventually("the plan in the unwatched session counted", || {
        (counters(&second)?.1 == 1).then_some(())
    });
    // And a change to it after that (a second poll sees a new stamp).
    fs::write(
        second.join("role-plan-carol-task_c.md"),
        plan("task_c", "carol", &[]),
    )
    .unwrap();
    eventually("the second plan counted", || {
        (counters(&second)?.1 == 2).then_some(())
    });
    let (code, h) = health(root);
    assert_eq!(code, 1, "a warning: {h:#}");
    assert_eq!(check(&h, "unwatched")["verdict"], "warn", "{h:#}");
    // The session's directory, and the inboxes its task-ready notices
    // made there: every one polled, every one counted.
    let unwatched = h["unwatched"].as_array().map_or(0, Vec::len);
    assert!(unwatched >= 1, "{h:#}");
    let why = h["polling"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("{unwatched} director"))
            && why.contains("could not be watched")
            && why.contains("fs.inotify.max_user_watches"),
        "{h:#}"
    );
    assert_eq!(check(&h, "watcher")["verdict"], "warn", "{h:#}");
    let status = stdout(&ctl_run(root, &["status"]));
    assert!(
        status.contains("POLLING for changes") && status.contains("max_user_watches"),
        "{status}"
    );
    drop(d);
}
