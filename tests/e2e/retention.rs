//! Session end, retention (`squadctl gc`) and policy reload through the real
//! binaries.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;

const NOW: &str = "2024-06-01T12:00:00Z";

fn at(hours_before: i64) -> String {
    let now = chrono::DateTime::parse_from_rfc3339(NOW).unwrap();
    (now - chrono::Duration::hours(hours_before)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn session(root: &Path, place: &str, name: &str, status_yaml: &str) -> std::path::PathBuf {
    let dir = root.join(".squad").join(place).join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("session-status.md"),
        format!(
            "session_id: sess_{}\nstarted_at: 2023-01-01T00:00:00Z\n{status_yaml}",
            name.replace('-', "_")
        ),
    )
    .unwrap();
    dir
}

/// Sessions of every kind and age, relative to NOW.
fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    session(
        root,
        "sessions",
        "20240530T000000Z-completed-25h",
        &format!("status: completed\ncompleted_at: {}\n", at(25)),
    );
    session(
        root,
        "sessions",
        "20240601T000000Z-completed-1h",
        &format!("status: completed\ncompleted_at: {}\n", at(1)),
    );
    session(
        root,
        "sessions",
        "20240520T000000Z-failed-8d",
        &format!("status: failed\nfailed_at: {}\n", at(8 * 24)),
    );
    session(
        root,
        "sessions",
        "20240528T000000Z-failed-2d",
        &format!("status: failed\nfailed_at: {}\n", at(2 * 24)),
    );
    session(
        root,
        "archives",
        "20240401T000000Z-archived-31d",
        &format!(
            "status: completed\ncompleted_at: {}\narchived_at: {}\n",
            at(40 * 24),
            at(31 * 24)
        ),
    );
    session(
        root,
        "archives",
        "20240520T000000Z-archived-3d",
        &format!(
            "status: completed\ncompleted_at: {}\narchived_at: {}\n",
            at(5 * 24),
            at(3 * 24)
        ),
    );
    session(
        root,
        "sessions",
        "20230601T000000Z-active-1y",
        "status: active\n",
    );
    let locked = session(
        root,
        "sessions",
        "20240520T000000Z-completed-locked",
        &format!("status: completed\ncompleted_at: {}\n", at(48)),
    );
    fs::create_dir_all(locked.join("locks")).unwrap();
    fs::write(
        locked.join("locks/dev--task_1--0.json"),
        r#"{"targets":["src/x"],"mode":"exclusive","agent":"dev","task_id":"task_1","session":"20240520T000000Z-completed-locked","host":"h","acquired_at":"2024-01-01T00:00:00Z","expires_at":"2999-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    // A symlink pointing outside .squad/, named like an old completed session.
    let outside = tmp.path().join("outside-victim");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("precious.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink(&outside, root.join(".squad/sessions/20240101T000000Z-link"))
        .unwrap();
    tmp
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn dry_run_plans_and_the_real_run_does_exactly_that() {
    let tmp = fixture();
    let root = tmp.path();
    let out = ctl_run(root, &["gc", "--dry-run", "--json", "--now", NOW]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let acts: Vec<(String, String, String)> = v["plan"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().into(),
                a["verb"].as_str().unwrap().into(),
                a["rule"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        acts,
        [
            (
                "20240520T000000Z-failed-8d".into(),
                "delete".into(),
                "retention.delete_failed_after".into()
            ),
            (
                "20240530T000000Z-completed-25h".into(),
                "archive".into(),
                "retention.archive_completed_after".into()
            ),
            (
                "20240401T000000Z-archived-31d".into(),
                "delete".into(),
                "retention.delete_archived_after".into()
            ),
        ]
    );
    let skips: Vec<String> = v["plan"]["skips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s["name"].as_str().unwrap(),
                s["reason"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        skips.contains(
            &"20240101T000000Z-link: is a symbolic link; links are never followed".to_string()
        ),
        "{skips:?}"
    );
    assert!(
        skips.contains(&"20240520T000000Z-completed-locked: holds 1 live lock(s)".to_string()),
        "{skips:?}"
    );
    // The dry run changed nothing.
    let before_sessions = names(&root.join(".squad/sessions"));
    assert_eq!(before_sessions.len(), 7);

    let human = stdout(&ctl_run(root, &["gc", "--dry-run", "--now", NOW]));
    assert!(human.contains("would archive sessions 20240530T000000Z-completed-25h  (retention.archive_completed_after reached: 1d1h since completed_at"), "{human}");
    assert!(
        human.ends_with("1 to archive, 2 to delete, 2 skipped, 4 kept\n"),
        "{human}"
    );
    // What stays says why and until when (issue 40 item 6).
    for kept in [
        "keep          sessions 20230601T000000Z-active-1y  (active: kept until it completes or fails)",
        "keep          sessions 20240601T000000Z-completed-1h  (completed_at 1h ago; archived 1d after it (retention.archive_completed_after), in 23h)",
        "keep          archives 20240520T000000Z-archived-3d  (archived_at 3d ago; deleted 30d after it (retention.delete_archived_after), in 27d)",
    ] {
        assert!(human.contains(kept), "{kept}\n{human}");
    }

    let out = ctl_run(root, &["gc", "--now", NOW]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        names(&root.join(".squad/sessions")),
        [
            "20230601T000000Z-active-1y",
            "20240101T000000Z-link",
            "20240520T000000Z-completed-locked",
            "20240528T000000Z-failed-2d",
            "20240601T000000Z-completed-1h",
        ]
    );
    assert_eq!(
        names(&root.join(".squad/archives")),
        [
            "20240520T000000Z-archived-3d",
            "20240530T000000Z-completed-25h"
        ]
    );
    // archived_at recorded in the archive's own status.
    let st = fs::read_to_string(
        root.join(".squad/archives/20240530T000000Z-completed-25h/session-status.md"),
    )
    .unwrap();
    // The real time, not --now: an archive's age is never stamped ahead.
    let stamped = st
        .lines()
        .find_map(|l| l.strip_prefix("archived_at: "))
        .unwrap_or_else(|| panic!("{st}"));
    let stamped = chrono::DateTime::parse_from_rfc3339(stamped).unwrap();
    assert!(
        (chrono::Utc::now() - stamped.with_timezone(&chrono::Utc)).num_seconds() < 600,
        "{st}"
    );
    // The symlink's target is untouched.
    assert_eq!(
        fs::read_to_string(tmp.path().join("outside-victim/precious.txt")).unwrap(),
        "keep me"
    );
    // Audited.
    let audit = audit_log(root).unwrap();
    assert_eq!(audit.matches("\"kind\":\"session-archived\"").count(), 1);
    assert_eq!(audit.matches("\"kind\":\"session-deleted\"").count(), 2);
    // Running again does nothing more.
    let out = ctl_run(root, &["gc", "--now", NOW]);
    assert!(
        stdout(&out).ends_with("0 to archive, 0 to delete, 2 skipped, 5 kept\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_existing_archive_is_never_overwritten_and_mtime_is_a_named_fallback() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    session(
        root,
        "sessions",
        "20240101T000000Z-dup",
        "status: completed\n",
    );
    session(
        root,
        "archives",
        "20240101T000000Z-dup",
        "status: completed\n",
    );
    let out = ctl_run(
        root,
        &words("gc --dry-run --json --now 2030-01-01T00:00:00Z"),
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        v["plan"]["skips"][0]["reason"],
        "an archive named 20240101T000000Z-dup already exists; it is not overwritten"
    );
    assert_eq!(
        v["plan"]["actions"][0]["since_source"], "directory mtime",
        "the archive itself, by mtime"
    );
}

#[test]
fn bad_schedules_are_refused_with_the_field_named() {
    let tmp = fixture();
    let root = tmp.path();
    write_policy(root, "retention:\n  schedule: '0 3 * * *'\n");
    let out = ctl_run(root, &["gc", "--dry-run"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("retention.schedule") && stderr(&out).contains("write `0 0 3 * * *`"),
        "{}",
        stderr(&out)
    );
    // squadd runs on it (on the defaults, retention held), naming the field
    // in a policy-refused event: an exit would be a restart loop.
    let d = Daemon::start(root);
    let audit = audit_log(root).unwrap();
    assert!(
        audit
            .lines()
            .any(|l| l.contains("\"kind\":\"policy-refused\"") && l.contains("retention.schedule")),
        "{audit}"
    );
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

#[test]
fn session_complete_and_fail_end_sessions_and_the_daemon_wraps_them_up() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    assert_eq!(code(&ctl_run(root, &["init"])), 0);
    let out = ctl_run(root, &["session", "new", "--slug", "a", "--json"]);
    let a = serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = root.join(".squad/sessions").join(&a);
    fs::write(dir.join("scratch.tmp"), "x").unwrap();
    fs::create_dir_all(dir.join("artifacts/tmp")).unwrap();
    fs::write(dir.join("artifacts/keep.txt"), "keep").unwrap();
    let _d = Daemon::start(root);
    let out = ctl_run(
        root,
        &[
            "session",
            "fail",
            &a,
            "--reason",
            "the index service was down",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let summary = eventually("summary written", || {
        fs::read_to_string(dir.join("summary.md")).ok()
    });
    assert!(summary.contains("status: **failed**"), "{summary}");
    assert!(!dir.join("scratch.tmp").exists() && !dir.join("artifacts/tmp").exists());
    assert!(dir.join("artifacts/keep.txt").exists());
    let st = fs::read_to_string(dir.join("session-status.md")).unwrap();
    assert!(
        st.contains("status: failed")
            && st.contains("failed_at:")
            && st.contains("failure_reason: the index service was down"),
        "{st}"
    );
    let out = ctl_run(root, &["session", "complete", "no-such-session"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn policy_edits_are_reloaded_and_invalid_ones_keep_the_previous_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let _d = Daemon::start(root);
    let status = || {
        let out = ctl_run(root, &["status", "--json"]);
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let before = status()["roots"][0]["next_retention_run"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        before.ends_with(":17:00Z"),
        "default: hourly at :17 ({before})"
    );
    write_policy(root, "retention:\n  schedule: '0 42 * * * *'\n");
    eventually("policy reloaded", || {
        let next = status()["roots"][0]["next_retention_run"]
            .as_str()?
            .to_string();
        next.ends_with(":42:00Z").then_some(())
    });
    let audit = audit_log(root).unwrap();
    assert!(audit.contains("\"kind\":\"policy-reloaded\""), "{audit}");
    write_policy(root, "retention:\n  schedule: 'whenever'\n");
    let audit = eventually("invalid policy refused", || {
        let audit = audit_log(root)?;
        audit.contains("retention.schedule").then_some(audit)
    });
    let refused = audit
        .lines()
        .find(|l| l.contains("retention.schedule"))
        .unwrap();
    assert!(refused.contains("\"kind\":\"policy-refused\""), "{refused}");
    let next = status()["roots"][0]["next_retention_run"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        next.ends_with(":42:00Z"),
        "the previous valid policy stays: {next}"
    );
}

#[test]
fn service_install_writes_the_unit_and_prints_how_to_enable_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    fs::create_dir_all(&root).unwrap();
    let units = tmp.path().join("units");
    let squadd = env!("CARGO_BIN_EXE_squadd");
    let out = run(ctl_root(&root)
        .args(["service", "install", "--user", "--binary", squadd, "--dir"])
        .arg(&units));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("systemctl --user enable --now squadd.service"),
        "{}",
        stdout(&out)
    );
    let unit = fs::read_to_string(units.join("squadd.service")).unwrap();
    let root = fs::canonicalize(&root).unwrap();
    let squadd = fs::canonicalize(squadd).unwrap();
    assert!(
        unit.contains(&format!(
            "ExecStart={} --root {}",
            squadd.display(),
            root.display()
        )),
        "{unit}"
    );
    assert!(unit.contains("Type=notify") && unit.contains("WatchdogSec="));

    let out = run(ctl_root(&root)
        .args([
            "service", "install", "--system", "--print", "--run-as", "ann", "--binary",
        ])
        .arg(&squadd));
    let unit = stdout(&out);
    assert!(
        unit.contains(&format!("ReadWritePaths={}", root.display())),
        "{unit}"
    );
    assert!(unit.contains("ProtectSystem=strict") && unit.contains("NoNewPrivileges=yes"));

    let out = run(ctl_root(&root)
        .args(["service", "install", "--launchd", "--print", "--binary"])
        .arg(&squadd));
    assert!(
        stdout(&out).contains("<string>--root</string>"),
        "{}",
        stdout(&out)
    );

    let out = run(squadctl()
        .args(["service", "uninstall", "--user", "--dir"])
        .arg(&units));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!units.join("squadd.service").exists());
    let out = run(squadctl()
        .args(["service", "uninstall", "--user", "--dir"])
        .arg(&units));
    assert_eq!(code(&out), 2, "not installed");
    // install needs a root.
    let out = run(squadctl().args(["service", "install", "--print"]));
    assert_eq!(code(&out), 2);
}
