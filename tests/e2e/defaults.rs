//! Defaults that bite (issue 28 item 6): a run's time limit sized for real
//! LLM agents, and `service install` on a machine without a running service
//! manager, or without a known user.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

#[test]
fn a_run_without_any_time_limit_set_gets_an_hour_not_five_minutes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "limits");
    // An agent that waits for a gate file: it is running while we look.
    let agent = root.join("agent.sh");
    let gate = root.join("go");
    fs::write(
        &agent,
        format!(
            // Also ends when the project is gone (a failed test): never
            // left looping.
            "#!/bin/sh\nwhile [ ! -e '{}' ] && [ -d '{}' ]; do sleep 0.05; done\n'{}' progress --status completed --percent 100 -q\n",
            gate.display(),
            root.display(),
            env!("CARGO_BIN_EXE_squadctl")
        ),
    )
    .unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    // No runner timeout, no task meta.timeout, no config.json.
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  agents:\n    \"*\":\n      command: [\"{}\"]\n      max_retries: 0\n",
            agent.display()
        ),
    );
    assert!(!root.join(".squad/config.json").exists());
    ok(ctl_run(
        &root,
        &[
            "task",
            "new",
            "--id",
            "task_001",
            "--agent",
            "alice",
            "--instruction",
            "x",
        ],
    ));
    let daemon = Daemon::start(&root);
    let run = eventually("the run starts", || {
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(session.join("runs/task_001/run.json")).ok()?)
                .ok()?;
        (v["state"] == "running").then_some(v)
    });
    let at = |k: &str| chrono::DateTime::parse_from_rfc3339(run[k].as_str().unwrap()).unwrap();
    assert_eq!(
        (at("deadline") - at("started_at")).num_seconds(),
        3600,
        "{run}"
    );
    // config show says the same default.
    let cfg = ok(ctl_run(&root, &["config", "show", "--json"]));
    assert!(cfg.contains("3600000"), "{cfg}");
    fs::write(&gate, "").unwrap();
    eventually("the run ends", || {
        let t = fs::read_to_string(session.join("runs/task_001/run.json")).ok()?;
        (!t.contains("\"running\"")).then_some(())
    });
    daemon.terminate();
}

/// squadctl for `service install`, with the machine's service manager
/// played by directories under `tmp` (`systemd`: whether systemd runs,
/// `user`: whether a user manager does) and HOME/XDG dirs inside `tmp`.
fn service_ctl(tmp: &Path, systemd: bool, user: bool) -> Command {
    let sd = tmp.join("run-systemd-system");
    let rt = tmp.join("xdg-runtime");
    if systemd {
        fs::create_dir_all(&sd).unwrap();
    }
    fs::create_dir_all(&rt).unwrap();
    if user {
        fs::create_dir_all(rt.join("systemd")).unwrap();
    }
    let mut c = squadctl();
    c.env("SQUADCTL_SYSTEMD_RUNTIME", &sd)
        .env("XDG_RUNTIME_DIR", &rt)
        .env("XDG_CONFIG_HOME", tmp.join("config"))
        .env("HOME", tmp.join("home"))
        .env("USER", "ann")
        .env_remove("SUDO_USER")
        .arg("--root")
        .arg(tmp.join("project"))
        .args([
            "service",
            "install",
            "--binary",
            env!("CARGO_BIN_EXE_squadd"),
        ]);
    c
}

#[test]
fn service_install_without_a_running_systemd_says_what_to_do_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("project")).unwrap();
    for kind in ["--user", "--system"] {
        let out = run(service_ctl(tmp.path(), false, false).arg(kind));
        assert_eq!(code(&out), 1, "{kind}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("systemd is not running"), "{err}");
        assert!(err.contains("squadd --root DIR"), "says what to do: {err}");
        assert!(err.contains("nothing was written"), "{err}");
    }
    assert!(!tmp.path().join("config").exists(), "no unit written");
    // systemd runs, but no user manager for this login: --user says how to
    // get one (the "No medium found" case).
    let out = run(service_ctl(tmp.path(), true, false).arg("--user"));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("enable-linger"), "{}", stderr(&out));
    assert!(!tmp.path().join("config").exists());
    // With both, the unit is written where systemd --user reads it.
    let out = run(service_ctl(tmp.path(), true, true).arg("--user"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        tmp.path()
            .join("config/systemd/user/squadd.service")
            .is_file()
    );
    // --print and --dir never need the manager.
    let out = run(service_ctl(tmp.path(), false, false).args(["--user", "--print"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    if !cfg!(target_os = "macos") {
        let out = run(service_ctl(tmp.path(), true, true).arg("--launchd"));
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(stderr(&out).contains("not macOS"), "{}", stderr(&out));
    }
}

#[test]
fn a_system_unit_runs_as_a_known_user_never_a_made_up_one() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("project")).unwrap();
    let print = |c: &mut Command| run(c.args(["--system", "--print"]));
    // No $USER, no $SUDO_USER, no --run-as: refused, not `User=squad`.
    let out = print(service_ctl(tmp.path(), true, true).env_remove("USER"));
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(stderr(&out).contains("--run-as"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("User="));
    let out = print(service_ctl(tmp.path(), true, true).env("USER", ""));
    assert_eq!(code(&out), 2, "an empty $USER is no user");
    // $USER, then $SUDO_USER over it, then --run-as over both.
    let unit = ok(print(&mut service_ctl(tmp.path(), true, true)));
    assert!(unit.contains("\nUser=ann\n"), "{unit}");
    let unit = ok(print(
        service_ctl(tmp.path(), true, true).env("SUDO_USER", "carol"),
    ));
    assert!(unit.contains("\nUser=carol\n"), "{unit}");
    let unit = ok(print(
        service_ctl(tmp.path(), true, true).args(["--run-as", "dave"]),
    ));
    assert!(unit.contains("\nUser=dave\n"), "{unit}");
    let out =
        print(service_ctl(tmp.path(), true, true).args(["--run-as", "x\nExecStartPre=/bin/sh"]));
    assert_eq!(code(&out), 2, "a user name cannot inject unit lines");
}
