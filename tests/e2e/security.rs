//! The threat model's "may not"s (docs/security.md), each tried the way
//! its actor would: an agent in its run, the repository's contents, another
//! local user. Tests of older guarantees live beside their features
//! (trust.rs, hardening.rs, worktree.rs); the table in docs/security.md
//! names them all.

use crate::support::*;
use crate::worktree::{git_or_skip, settled_run, tree_project, tree_task};
use std::path::Path;

/// A `git` that logs each call's subcommand and `$SQUAD_TEST_SECRET` to
/// `log`, then runs the real one; in `dir`, to lead squadd's PATH.
fn logging_git(dir: &Path, log: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let git = dir.join("git");
    std::fs::write(
        &git,
        format!(
            "#!/bin/sh\necho \"git $* secret=[$SQUAD_TEST_SECRET]\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The repository's contents may not run as squadd: a run plants every hook
/// squadd's git could run (its leftovers commit, its merge, the worktree's
/// removal) into the shared `.git/hooks`, and squadd's environment holds a
/// secret. None runs, and no git squadd starts sees the secret. Before
/// issue 39 the post-commit, post-merge and reference-transaction hooks
/// ran, with the secret in their environment.
#[test]
fn squadd_runs_no_hook_an_agent_planted_in_the_shared_repository() {
    if !git_or_skip() {
        return;
    }
    let p = tree_project("hook", false);
    let bin = p.root.join("bin");
    let git_log = p.root.join("git.log");
    logging_git(&bin, &git_log);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let d = crate::daemon::Daemon::start_with_env(
        &p.root,
        &[("SQUAD_TEST_SECRET", "hunter2"), ("PATH", &path)],
    );
    tree_task(&p.root, "task_2", "bravo");
    let r = settled_run(&p.root, "task_2");
    assert_eq!(r["merge"]["state"], "merged", "{r:#}");
    // The agent did plant them (its own git runs them from now on).
    let hooks = git_ok(&p.root, &["rev-parse", "--git-common-dir"]);
    let hooks = p.root.join(hooks.trim()).join("hooks");
    assert!(hooks.join("post-merge").is_file());
    assert!(hooks.join("post-commit").is_file());
    let ran = std::fs::read_to_string(p.root.join("hooks.log")).unwrap_or_default();
    assert!(ran.is_empty(), "hooks squadd ran: {ran}");
    // squadd's git did commit the leftovers and merge, without the secret.
    let calls = std::fs::read_to_string(&git_log).unwrap();
    for sub in [" commit ", " merge ", " worktree "] {
        assert!(calls.contains(sub), "squadd ran `{sub}`: {calls}");
    }
    assert!(
        !calls.contains("hunter2"),
        "git saw squadd's secret: {calls}"
    );
    d.terminate();
}
