//! `squadctl guard doctor` and squadd's refusal to start an agent CLI that
//! would run without the guard (issue 25). A stand-in `claude` (a shell
//! script: doctor judges Claude Code by its hook file alone) keeps these
//! tests independent of npm; the Codex lines, which need the real CLI, are
//! in real_clis.rs.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A stand-in `claude`: prints a version, or reports its task completed.
const CLAUDE: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "9.9.9 (stand-in Claude Code)"; exit 0; fi
echo "started $SQUAD_TASK" >> "$TRACE"
"$SQUADCTL" progress --status completed --percent 100 -q
"#;

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    session: PathBuf,
    trace: PathBuf,
    home: PathBuf,
}

/// A project whose runner starts the stand-in claude for every agent;
/// `extra` goes into the runner entry (`guard: off`).
fn project(extra: &str) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("proj");
    let home = base.join("home");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&home).unwrap();
    let session = init_session(&root, "doctor");
    let bin = base.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    fs::write(&claude, CLAUDE).unwrap();
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
    let trace = base.join("trace.log");
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  retry_backoff: 1h\n  agents:\n    \"*\":\n      command: [\"{}\", \"-p\", \"{{prompt_file}}\"]\n      max_retries: 0\n{extra}      env:\n        TRACE: \"{}\"\n        SQUADCTL: \"{}\"\n        HOME: \"{}\"\n",
            claude.display(),
            trace.display(),
            env!("CARGO_BIN_EXE_squadctl"),
            home.display(),
        ),
    );
    Project {
        _tmp: tmp,
        root,
        session,
        trace,
        home,
    }
}

fn doctor(p: &Project, json: bool) -> (i32, String) {
    let mut c = ctl(&p.root);
    c.args(["guard", "doctor"]).env("HOME", &p.home);
    if json {
        c.arg("--json");
    }
    let out = run(&mut c);
    (code(&out), stdout(&out) + &stderr(&out))
}

fn new_task(root: &Path, id: &str) {
    ok(run(ctl(root).args([
        "task",
        "new",
        "--id",
        id,
        "--agent",
        "backend",
        "--instruction",
        "x",
        "--allow",
        "src/**",
    ])));
}

fn started(p: &Project) -> usize {
    fs::read_to_string(&p.trace)
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_claude_runner_without_its_hook_file_is_refused_until_the_guard_is_installed() {
    let p = project("");
    // Doctor: the missing hook file, its fix, exit 1 (a runner starts it).
    let (status, out) = doctor(&p, false);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("claude: UNGUARDED"), "{out}");
    assert!(out.contains(".claude/settings.json: missing"), "{out}");
    assert!(
        out.contains("fix: squadctl guard install --claude"),
        "{out}"
    );
    let (status, out) = doctor(&p, true);
    assert_eq!(status, 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["clis"][0]["cli"], "claude");
    assert_eq!(v["clis"][0]["blocks_dispatch"], true);
    // status --check fails on it too.
    let out = run(ctl(&p.root)
        .args(["status", "--check"])
        .env("HOME", &p.home));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("would run unguarded"),
        "{}",
        stderr(&out)
    );

    // squadd refuses to start it, says why in a run-failed event and tells
    // the lead; the task is held.
    let d = Daemon::start_with_env(&p.root, &[("HOME", p.home.to_str().unwrap())]);
    new_task(&p.root, "task_1");
    let log = eventually("the refusal is audited", || {
        let log = audit_log(&p.root).unwrap_or_default();
        log.contains("\"kind\":\"run-failed\"").then_some(log)
    });
    assert!(log.contains("claude would run unguarded"), "{log}");
    assert!(log.contains("squadctl guard install --claude"), "{log}");
    let to_lead = eventually("a message to the lead", || {
        fs::read_dir(&p.session)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|n| {
                n.file_name()
                    .is_some_and(|f| f.to_string_lossy().starts_with("role-comm-squadd-to-lead-"))
            })
    });
    let text = fs::read_to_string(to_lead).unwrap();
    assert!(text.contains("would run unguarded"), "{text}");
    assert_eq!(started(&p), 0, "the unguarded CLI never started");

    // Installed: doctor passes and `squadctl run` starts it, to completion.
    ok(run(ctl(&p.root)
        .args(["guard", "install", "--claude"])
        .env("HOME", &p.home)));
    let (status, out) = doctor(&p, false);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("claude: guarded"), "{out}");
    ok(run(ctl(&p.root).args(["run", "task_1"])));
    eventually("the run completes", || {
        let out = run(ctl(&p.root).args(["runs", "--all", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v.as_array()?
            .iter()
            .any(|r| r["task"] == "task_1" && r["completed"] == true)
            .then_some(())
    });
    assert_eq!(started(&p), 1);
    drop(d);
}

#[test]
fn guard_off_lets_squadd_start_an_unguarded_runner_and_doctor_warns() {
    let p = project("      guard: off\n");
    let (status, out) = doctor(&p, false);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("allowed by `guard: off`"), "{out}");
    let _d = Daemon::start_with_env(&p.root, &[("HOME", p.home.to_str().unwrap())]);
    new_task(&p.root, "task_1");
    eventually("the run starts", || (started(&p) == 1).then_some(()));
}

#[test]
fn a_bad_guard_value_is_refused_with_the_field() {
    let p = project("      guard: maybe\n");
    let out = run(ctl(&p.root).args(["guard", "doctor"]));
    assert_eq!(code(&out), 2);
    let text = stdout(&out) + &stderr(&out);
    assert!(text.contains("guard"), "{text}");
    assert!(text.contains("`maybe` is not `on` or `off`"), "{text}");
}

#[test]
fn a_copilot_runner_needs_trust_folder_for_repository_hooks_or_the_user_install() {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let (root, home) = (base.join("proj"), base.join("home"));
    fs::create_dir_all(root.join(".squad")).unwrap();
    fs::create_dir_all(&home).unwrap();
    let policy = |extra: &str| {
        format!(
            "runners:\n  agents:\n    frontend:\n      command: [\"copilot\", \"-p\", \"Read {{prompt_file}}\", \"--allow-all-tools\"{extra}]\n      env:\n        HOME: \"{}\"\n",
            home.display()
        )
    };
    let doctor = || {
        let out = run(ctl(&root)
            .args(["guard", "doctor"])
            .env("HOME", &home)
            .env_remove("COPILOT_HOME"));
        (code(&out), stdout(&out) + &stderr(&out))
    };
    write_policy(&root, policy(""));
    ok(run(ctl(&root)
        .args(["guard", "install", "--copilot"])
        .env("HOME", &home)));
    let (status, out) = doctor();
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("FAIL  folder trust"), "{out}");
    assert!(out.contains("add \"--trust-folder\""), "{out}");
    write_policy(&root, policy(", \"--trust-folder\""));
    let (status, out) = doctor();
    assert_eq!(status, 0, "{out}");
    write_policy(&root, policy(""));
    ok(run(ctl(&root)
        .args(["guard", "install", "--copilot", "--user"])
        .env("HOME", &home)
        .env_remove("COPILOT_HOME")));
    let (status, out) = doctor();
    assert_eq!(status, 0, "{out}");
    assert!(
        out.contains(".copilot/hooks/squad.json: guard installed"),
        "{out}"
    );
}
