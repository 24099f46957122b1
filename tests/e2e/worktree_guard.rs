//! A run's worktree is guarded whether or not the guard's hook files are
//! committed, and is judged where the run starts (issue 44 item 2,
//! docs/worktrees.md "What a worktree gets"). A stand-in `claude` (doctor
//! and squadd's check judge Claude Code by its hook files, proven by
//! running the guard) keeps these tests independent of npm; the real
//! Claude Code and Codex are in real_clis_worktree.rs.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A stand-in `claude`: prints a version; in a run, keeps a copy of the
/// hook file it found in its working directory, commits its work with
/// `git add -A` (as agents do) and reports its task completed.
const CLAUDE: &str = r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "9.9.9 (stand-in Claude Code)"; exit 0; fi
echo "started $SQUAD_TASK $(pwd)" >> "$TRACE"
cp .claude/settings.json "$TRACE.settings" 2>/dev/null
mkdir -p src && echo "work of $SQUAD_TASK" > "src/$SQUAD_TASK.txt"
git add -A && git -c user.name=a -c user.email=a@example.com commit -q -m "work" || exit 4
"$SQUADCTL" progress --status completed --percent 100 -q
"#;

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    trace: PathBuf,
    home: PathBuf,
    claude: PathBuf,
}

/// A git repository with a squad project (`.squad/` ignored) whose runner
/// starts the stand-in claude, and the guard installed for Claude Code in
/// the main checkout, not committed.
fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("proj");
    let home = base.join("home");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&home).unwrap();
    init_session(&root, "guarded");
    let bin = base.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    fs::write(&claude, CLAUDE).unwrap();
    fs::set_permissions(&claude, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(root.join(".gitignore"), "/.squad/\n").unwrap();
    write(&root, "README.md", "project\n");
    git_ok(&root, &["init", "-q", "-b", "main"]);
    git_ok(&root, &["add", "-A"]);
    git_ok(&root, &["commit", "-q", "-m", "start"]);
    ok(run(ctl(&root)
        .args(["guard", "install", "--claude", "--program"])
        .arg(env!("CARGO_BIN_EXE_squadctl"))
        .env("HOME", &home)));
    let p = Project {
        _tmp: tmp,
        root,
        trace: base.join("trace.log"),
        home,
        claude,
    };
    policy(&p, true);
    p
}

fn policy(p: &Project, worktree: bool) {
    write_policy(
        &p.root,
        format!(
            "runners:\n  dispatch: true\n  worktree: {worktree}\n  retry_backoff: 1h\n  agents:\n    \"*\":\n      command: [\"{}\", \"-p\", \"{{prompt_file}}\"]\n      max_retries: 0\n      env:\n        TRACE: \"{}\"\n        SQUADCTL: \"{}\"\n        HOME: \"{}\"\n",
            p.claude.display(),
            p.trace.display(),
            env!("CARGO_BIN_EXE_squadctl"),
            p.home.display(),
        ),
    );
}

fn doctor(p: &Project) -> (i32, Value) {
    let out = run(ctl(&p.root)
        .args(["guard", "doctor", "--json"])
        .env("HOME", &p.home));
    let v = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    (code(&out), v)
}

fn new_task(root: &std::path::Path, id: &str) {
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

#[test]
fn a_worktree_run_gets_the_uncommitted_guard_and_the_merge_leaves_it_out() {
    if !crate::worktree::git_or_skip() {
        return;
    }
    let p = project();
    // The doctor judges a worktree made as a run's: guarded, since squadd
    // carries the guard's settings into it.
    let (status, v) = doctor(&p);
    assert_eq!(status, 0, "{v:#}");
    assert_eq!(v["clis"][0]["guarded"], true, "{v:#}");
    assert_eq!(v["clis"][0]["lines"][0]["check"], "worktree", "{v:#}");
    let _d = Daemon::start_with_env(&p.root, &[("HOME", p.home.to_str().unwrap())]);
    new_task(&p.root, "task_1");
    let r = crate::worktree::settled_run(&p.root, "task_1");
    assert_eq!(r["merge"]["state"], "merged", "{r:#}");
    // The run found the guard in its worktree's own settings file.
    let settings = fs::read_to_string(p.trace.with_extension("log.settings")).unwrap_or_default();
    assert!(
        settings.contains("guard --format claude"),
        "the worktree's .claude/settings.json at start: {settings:?}"
    );
    // Its `git add -A` and squadd's leftovers commit left it out: nothing
    // of `.claude/` reached the session's branch.
    let tree = git_ok(&p.root, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(tree.contains("src/task_1.txt"), "{tree}");
    assert!(!tree.contains(".claude"), "{tree}");
    let log = git_ok(&p.root, &["log", "--stat", "--format=%s", "main"]);
    assert!(!log.contains(".claude"), "{log}");
}

#[test]
fn a_worktree_that_would_run_unguarded_is_refused_and_doctor_says_so() {
    if !crate::worktree::git_or_skip() {
        return;
    }
    let p = project();
    // The branch turns Claude Code's hooks off; the main checkout's copy
    // of that file is deleted (not committed): the main checkout is
    // guarded, a run's worktree (made from the branch) is not.
    write(
        &p.root,
        ".claude/settings.local.json",
        "{\"disableAllHooks\": true}\n",
    );
    git_ok(&p.root, &["add", ".claude/settings.local.json"]);
    git_ok(&p.root, &["commit", "-q", "-m", "hooks off"]);
    fs::remove_file(p.root.join(".claude/settings.local.json")).unwrap();
    // Runs in the main checkout would be guarded…
    policy(&p, false);
    let (status, v) = doctor(&p);
    assert_eq!(status, 0, "{v:#}");
    assert_eq!(v["clis"][0]["guarded"], true, "{v:#}");
    // …runs in worktrees would not: the doctor says so and exits 1.
    policy(&p, true);
    let (status, v) = doctor(&p);
    assert_eq!(status, 1, "{v:#}");
    assert_eq!(v["clis"][0]["guarded"], false, "{v:#}");
    assert_eq!(v["clis"][0]["blocks_dispatch"], true, "{v:#}");
    assert!(v.to_string().contains("disableAllHooks"), "{v:#}");
    let out = run(ctl(&p.root)
        .args(["status", "--check"])
        .env("HOME", &p.home));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // squadd judges the worktree the run would start in, and does not
    // start it: the task is held, the lead told why.
    let _d = Daemon::start_with_env(&p.root, &[("HOME", p.home.to_str().unwrap())]);
    new_task(&p.root, "task_1");
    let log = eventually("the refusal is audited", || {
        let log = audit_log(&p.root).unwrap_or_default();
        log.contains("\"kind\":\"run-failed\"").then_some(log)
    });
    assert!(log.contains("claude would run unguarded"), "{log}");
    assert!(log.contains("worktree"), "{log}");
    assert!(log.contains("disableAllHooks"), "{log}");
    assert!(
        fs::read_to_string(&p.trace).unwrap_or_default().is_empty(),
        "the unguarded CLI never started"
    );
}
