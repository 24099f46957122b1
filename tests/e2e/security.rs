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

/// A run of task_2 (bravo, `src/**`) in `mode` (see `worktree::TREE_AGENT`)
/// beside task_9 (charlie, `**`, waiting for task_2), settled: its
/// `runs --json` entry, once merged or held, and the base it started from.
fn settled_attack(mode: &str) -> (crate::worktree::TreeProject, serde_json::Value, String) {
    let p = tree_project(mode, true);
    let base = git_ok(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    let d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_2", "bravo");
    ok(task_new(
        &p.root,
        &[
            "--id",
            "task_9",
            "--agent",
            "charlie",
            "--instruction",
            "everything, after task_2",
            "--allow",
            "**",
            "--requires",
            "task_2",
        ],
    ));
    // The run goes on once task_9 is there to be borrowed.
    std::fs::write(p.root.join("go"), "").unwrap();
    let r = settled_run(&p.root, "task_2");
    d.terminate();
    (p, r, base)
}

/// An agent may not borrow a wider task by writing its id into a
/// trailer: squadd judges the run's branch by the task the run was
/// started for. Before issue 39 both commits (`Squad-Task: task_9` with and
/// without `Squad-Agent: charlie`) were judged by task_9's `**` and merged.
#[test]
fn a_run_cannot_borrow_a_wider_task_by_trailer_at_merge() {
    if !git_or_skip() {
        return;
    }
    let (p, r, base) = settled_attack("trailer");
    assert_eq!(r["merge"]["state"], "held", "{r:#}");
    let reason = r["merge"]["reason"].as_str().unwrap();
    for path in ["wide/x.txt", "wider/y.txt"] {
        assert!(reason.contains(path), "{path}: {reason}");
    }
    assert!(reason.contains("task_2"), "{reason}");
    assert_eq!(git_ok(&p.root, &["rev-parse", "main"]).trim(), base);
    assert!(!p.root.join("wide/x.txt").exists());
}

/// A link's target is what a link writes: committed links under the
/// allowed `src/**` leading out of the project (`/etc`) or into `wide/`
/// (relative, and absolute through the worktree's path) are judged from
/// the commit, where the main checkout holds none of them. Before issue 39
/// the branch was merged (the check looked for the links in the main
/// checkout, where they were not yet).
#[test]
fn a_committed_symlink_is_judged_by_its_target_at_merge() {
    if !git_or_skip() {
        return;
    }
    let (p, r, base) = settled_attack("symlink");
    assert_eq!(r["merge"]["state"], "held", "{r:#}");
    let reason = r["merge"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("src/out") && reason.contains("/etc"),
        "{reason}"
    );
    assert!(reason.contains("src/area"), "{reason}");
    assert!(reason.contains("src/abs"), "{reason}");
    assert_eq!(git_ok(&p.root, &["rev-parse", "main"]).trim(), base);
}

/// A run may not land commits on the session's branch by pointing its
/// worktree's HEAD there: its branch is held, the lead is told which
/// commits went where, and no merge is made into the checkout it left out
/// of step. Before issue 39 squadd reported the run "merged" (its own
/// branch had nothing new) and said nothing of the commit on main.
#[test]
fn a_worktree_whose_head_left_its_branch_is_held_and_the_lead_told() {
    if !git_or_skip() {
        return;
    }
    let (p, r, base) = settled_attack("head");
    assert_eq!(r["merge"]["state"], "held", "{r:#}");
    let reason = r["merge"]["reason"].as_str().unwrap();
    assert!(reason.contains("HEAD names `main`"), "{reason}");
    assert!(reason.contains("straight onto main"), "{reason}");
    assert!(
        reason.contains(&format!("--base {}", &base[..12])),
        "{reason}"
    );
    let told = crate::daemon::eventually("the lead is told", || {
        crate::worktree::walk(&p.session).into_iter().find(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("squadd-to-lead"))
                && std::fs::read_to_string(f).is_ok_and(|t| t.contains("straight onto main"))
        })
    });
    assert!(told.is_file());
}

/// CI judges a committed link by its committed target, also when the
/// checkout running `check` does not hold it (it checks out another
/// revision, or the link was deleted there): an absolute link into
/// another agent's area and one out of the project are violations.
/// Before issue 39 `check --base main --head feature` passed, run from the
/// main checkout.
#[test]
fn check_judges_committed_symlinks_from_the_commit() {
    if !git_or_skip() {
        return;
    }
    let (_tmp, main, wt) = crate::worktree::repo_with_worktree("wt");
    std::fs::create_dir_all(wt.join("own-1")).unwrap();
    let into = main.canonicalize().unwrap().join("own-0/x.rs");
    std::os::unix::fs::symlink(&into, wt.join("own-1/abs")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", wt.join("own-1/out")).unwrap();
    std::os::unix::fs::symlink("../own-0/y.rs", wt.join("own-1/rel")).unwrap();
    git_ok(&wt, &["add", "-A"]);
    git_ok(&wt, &["commit", "-q", "-m", "links\n\nSquad-Task: task_1"]);
    let out = run(ctl(&main).args(["check", "--base", "main", "--head", "feature"]));
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    for (link, to) in [
        ("own-1/abs", "own-0/x.rs"),
        ("own-1/out", "/etc/passwd"),
        ("own-1/rel", "own-0/y.rs"),
    ] {
        assert!(
            text.lines().any(|l| l.contains(link) && l.contains(to)),
            "{link} -> {to}: {text}"
        );
    }
}

/// Another local user may not use an agent's MCP server over HTTP: it
/// cannot read the token (mode 0600 under `.squad/run/`), and a request
/// without it, or with another, is answered 401 before any tool runs. Each
/// start makes a new token, and the stopped server's file is gone. Before
/// issue 39 the server answered anyone on the machine (200).
#[test]
fn mcp_http_refuses_a_client_without_the_servers_token() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    ctl_ok(root, &["init"]);
    let server = crate::mcp::HttpServer::start(root, "alice");
    let authority = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let host = format!("Host: {authority}\r\n");
    for (what, auth) in [
        ("no token", String::new()),
        (
            "another token",
            format!("Authorization: Bearer {}\r\n", "0".repeat(64)),
        ),
        (
            "a token's prefix",
            format!("Authorization: Bearer {}\r\n", &server.token[..32]),
        ),
        (
            "the token as Basic",
            format!("Authorization: Basic {}\r\n", server.token),
        ),
    ] {
        let answer = server.post_initialize_as(&format!("{host}{auth}"));
        assert!(answer.starts_with("HTTP/1.1 401"), "{what}: {answer}");
    }
    let good =
        server.post_initialize_as(&format!("{host}Authorization: Bearer {}\r\n", server.token));
    assert!(good.starts_with("HTTP/1.1 200"), "{good}");
    let meta = std::fs::metadata(&server.token_file).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(server.token.len(), 64);
    assert!(server.token_file.starts_with(root.join(".squad/run")));
    // A second server (a restart) has a token of its own.
    let again = crate::mcp::HttpServer::start(root, "alice");
    assert_ne!(again.token, server.token);
}

/// The `dashes_and_sizes` scenario of the MCP client, as alice over stdio.
fn dashes_and_sizes() -> Option<(tempfile::TempDir, String, serde_json::Value)> {
    let python = crate::mcp::python()?;
    let (tmp, session) = crate::mcp::project();
    let report = crate::mcp::client_with(
        &python,
        tmp.path(),
        &session,
        "dashes_and_sizes",
        &serde_json::json!({}),
        &serde_json::json!({}),
    );
    Some((tmp, session, report))
}

/// An agent's free text is data, never an option: a Markdown bullet list as
/// a message body, `--status completed` as an action, `-x` as a todo. Before
/// issue 39 every one of these calls was refused as an unknown option (or,
/// worse, parsed as one).
#[test]
fn mcp_free_text_starting_with_a_dash_is_data() {
    let Some((tmp, session, report)) = dashes_and_sizes() else {
        return;
    };
    let steps = report["steps"].as_array().unwrap();
    for s in &steps[..4] {
        assert_eq!(s["is_error"], false, "{s}");
    }
    let dir = tmp.path().join(".squad/sessions").join(&session);
    let message = crate::worktree::walk(&dir)
        .into_iter()
        .find(|f| f.to_string_lossy().contains("role-comm-alice-to-bob"))
        .expect("the message is written");
    let text = std::fs::read_to_string(message).unwrap();
    assert!(
        text.contains("message: |-\n  - one\n  - two\n  --force\n"),
        "{text}"
    );
    assert!(text.contains("subject: -s subject"), "{text}");
    let progress = std::fs::read_to_string(dir.join("role-comm-alice-task_001.md")).unwrap();
    assert!(progress.contains("status: in_progress"), "{progress}");
    assert!(progress.contains("--status completed"), "{progress}");
}

/// A tool may not say "sent" for a message squadd will never deliver: a
/// body that makes the file larger than a protocol file may be is refused,
/// naming the limit, and nothing is written. Before issue 39 the 2 MiB send
/// answered success and the message stayed undelivered.
#[test]
fn mcp_send_over_the_message_limit_is_refused_naming_it() {
    let Some((tmp, session, report)) = dashes_and_sizes() else {
        return;
    };
    let big = &report["steps"].as_array().unwrap()[4];
    assert_eq!(big["tool"], "send", "{big}");
    assert_eq!(big["is_error"], true, "{big}");
    let text = big["text"].as_str().unwrap();
    assert!(text.contains("1048576 bytes"), "{text}");
    let dir = tmp.path().join(".squad/sessions").join(&session);
    let large = crate::worktree::walk(&dir)
        .into_iter()
        .filter(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 1024 * 1024))
        .count();
    assert_eq!(large, 0, "nothing over the limit was written");
}

/// `guard doctor --json`'s verdict on `cli` in `root`, with a stand-in of
/// each CLI on PATH (printing a version) and `home` as HOME.
fn doctor_says(root: &Path, home: &Path, bin: &Path, cli: &str) -> (bool, String) {
    let out = run(ctl(root)
        .args(["guard", "doctor", "--json"])
        .env("HOME", home)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display())));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&out), stderr(&out)));
    let verdict = v["clis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cli"] == cli)
        .unwrap_or_else(|| panic!("{cli} not judged: {v:#}"))
        .clone();
    (verdict["guarded"] == true, verdict.to_string())
}

/// The guard's own health may not be claimed when the guard will not run:
/// `guard doctor` runs the installed hook as the CLI would (its command,
/// its matcher and entry type, `disableAllHooks` in any settings file, a
/// desktop launcher's PATH) on a write the guard refuses, and says
/// "guarded" only when that write is denied. Before issue 39 every broken
/// setup below was "guarded" (the doctor only looked for the entry).
#[test]
fn guard_doctor_says_guarded_only_when_the_installed_hook_denies() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().canonicalize().unwrap();
    let (root, home, bin) = (base.join("proj"), base.join("home"), base.join("bin"));
    for d in [&root, &home, &bin] {
        std::fs::create_dir_all(d).unwrap();
    }
    ctl_ok(&root, &["init"]);
    for cli in ["claude", "copilot"] {
        let p = bin.join(cli);
        std::fs::write(&p, "#!/bin/sh\necho 9.9.9\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let settings = root.join(".claude/settings.json");
    let hook = |matcher: &str, kind: &str, command: &str| {
        serde_json::json!({"hooks": {"PreToolUse": [{"matcher": matcher, "hooks": [
            {"type": kind, "command": command, "timeout": 10}]}]}})
        .to_string()
    };
    let squadctl = env!("CARGO_BIN_EXE_squadctl");
    let good = format!("{squadctl} guard --format claude");
    // The good setup, as `guard install` writes it: guarded.
    ok(run(ctl(&root).args(["guard", "install", "--claude"])));
    let installed = std::fs::read_to_string(&settings).unwrap();
    assert!(installed.contains(&good), "{installed}");
    let (guarded, v) = doctor_says(&root, &home, &bin, "claude");
    assert!(guarded, "{v}");

    let broken = [
        (
            "a bare squadctl (not on a launcher's PATH)",
            hook(
                "Write|Edit|Bash",
                "command",
                "squadctl guard --format claude",
            ),
        ),
        (
            "a removed binary",
            hook(
                "Write|Edit|Bash",
                "command",
                "/nonexistent/squadctl guard --format claude",
            ),
        ),
        ("a matcher of Read", hook("Read", "command", &good)),
        (
            "a command that only mentions the guard",
            hook(
                "Write|Edit",
                "command",
                "true # squadctl guard --format claude",
            ),
        ),
        ("a prompt entry", hook("Write|Edit", "prompt", &good)),
    ];
    for (what, text) in broken {
        std::fs::write(&settings, &text).unwrap();
        let (guarded, v) = doctor_says(&root, &home, &bin, "claude");
        assert!(!guarded, "{what}: {v}");
        assert!(v.contains("does not guard"), "{what}: {v}");
    }
    // disableAllHooks in the local settings turns the good hook off.
    std::fs::write(&settings, &installed).unwrap();
    write(
        &root,
        ".claude/settings.local.json",
        r#"{"disableAllHooks": true}"#,
    );
    let (guarded, v) = doctor_says(&root, &home, &bin, "claude");
    assert!(!guarded, "{v}");
    assert!(v.contains("disableAllHooks"), "{v}");
    std::fs::remove_file(root.join(".claude/settings.local.json")).unwrap();
    assert!(doctor_says(&root, &home, &bin, "claude").0);

    // Copilot's repository hook runs only with --trust-folder: not guarded.
    ok(run(ctl(&root).args(["guard", "install", "--copilot"])));
    let (guarded, v) = doctor_says(&root, &home, &bin, "copilot");
    assert!(!guarded, "{v}");
    assert!(v.contains("--trust-folder"), "{v}");
    // The user install (loaded with no trust) is.
    ok(run(ctl(&root).env("HOME", &home).args([
        "guard",
        "install",
        "--copilot",
        "--user",
    ])));
    let (guarded, v) = doctor_says(&root, &home, &bin, "copilot");
    assert!(guarded, "{v}");
}

/// A notify hook may not see squadd's environment (a service token): it
/// runs with the cleared environment runs get, plus the message's
/// variables. Before issue 39 it inherited squadd's whole environment.
#[test]
fn a_notify_hook_runs_with_the_cleared_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("hook.log");
    let script = format!(
        "echo \"secret=[$SQUAD_TEST_SECRET] to=[$SQUAD_TO] path=[${{PATH:+set}}]\" >> {}",
        log.display()
    );
    let p = crate::hooks::project(&crate::hooks::policy(1, &script));
    let _d = crate::daemon::Daemon::start_with_env(p.path(), &[("SQUAD_TEST_SECRET", "hunter2")]);
    crate::hooks::write_message(p.path(), 0, "high");
    let ran = crate::daemon::eventually("the hook ran", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|t| t.contains('\n'))
    });
    assert!(ran.contains("to=[bob] path=[set]"), "{ran}");
    assert!(ran.contains("secret=[]"), "{ran}");
}

/// An agent in its run may not read squadd's environment (a service
/// token) from `/proc/<squadd>/environ`: squadd is not dumpable, so those
/// files are root's. Tried as squadd's own uid, which is the agent's: as
/// root the test runs squadd and the reader as `nobody` (root reads any
/// process's files). Before issue 39 the reader printed the token.
#[test]
fn a_process_of_squadds_uid_cannot_read_its_environment_from_proc() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("proj");
    std::fs::create_dir(&root).unwrap();
    init_session(&root, "environ");
    // As root: squadd and the reader run as nobody, squadd owning the
    // project; otherwise both are this uid already.
    let as_root = unsafe { libc::geteuid() } == 0;
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let wrap = |program: &Path| {
        let mut c = std::process::Command::new(if as_root { nobody[0] } else { "env" });
        if as_root {
            c.args(&nobody[1..]);
        }
        c.arg(program);
        c
    };
    if as_root {
        let chown = run(std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(tmp.path()));
        assert!(chown.status.success(), "{}", stderr(&chown));
    }
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let notify = tempfile::tempdir().unwrap();
    std::fs::set_permissions(notify.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = notify.path().join("notify.sock");
    let ready = std::os::unix::net::UnixDatagram::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    ready
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut squadd = wrap(Path::new(env!("CARGO_BIN_EXE_squadd")))
        .arg("--root")
        .arg(&root)
        .env("NOTIFY_SOCKET", &sock)
        .env("SQUAD_TEST_SECRET", "hunter2")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = squadd.id();
    let mut buf = [0u8; 256];
    let n = ready.recv(&mut buf).unwrap_or_else(|e| {
        let _ = squadd.kill();
        panic!("squadd did not start: {e}")
    });
    let _squadd = Kill(squadd);
    assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"));
    let read = run(wrap(Path::new("cat")).arg(format!("/proc/{pid}/environ")));
    let seen = String::from_utf8_lossy(&read.stdout);
    assert!(
        !seen.contains("hunter2"),
        "read squadd's environment, secret included ({} bytes)",
        seen.len()
    );
    assert!(!read.status.success(), "{}", stderr(&read));
}

/// An agent in its task may not write outside its boundaries through a
/// hard link: `link` (like `ln` without `-s`) onto a file outside its task
/// is denied, and so is a write, by a file tool or the shell, to a name
/// inside its boundaries that shares its file with a name outside them
/// (however that link was made). Before issue 39 all three were allowed.
#[test]
fn a_hard_link_does_not_carry_a_write_outside_the_boundaries() {
    use crate::trust::{bash, claude, guard};
    let tmp = crate::trust::project();
    let root = tmp.path();
    let backend = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    let made = guard(
        root,
        &backend,
        &bash(root, "link frontend/app.ts backend/app.ts"),
    );
    assert!(
        made.as_deref()
            .is_some_and(|d| d.contains("frontend/app.ts")),
        "{made:?}"
    );
    std::fs::hard_link(root.join("frontend/app.ts"), root.join("backend/app.ts")).unwrap();
    let path = root.join("backend/app.ts").display().to_string();
    for call in [
        claude(
            root,
            "Write",
            serde_json::json!({"file_path": path, "content": "x"}),
        ),
        bash(root, "echo x > backend/app.ts"),
    ] {
        let through = guard(root, &backend, &call);
        assert!(
            through
                .as_deref()
                .is_some_and(|d| d.contains("frontend/app.ts")),
            "{call}: {through:?}"
        );
    }
    // A file of one name is written as before.
    let own = claude(
        root,
        "Write",
        serde_json::json!({"file_path": root.join("backend/api.rs"), "content": "x"}),
    );
    assert_eq!(guard(root, &backend, &own), None);
}

/// An agent in its task may not move a git write out of its boundaries
/// with `--work-tree` or `GIT_WORK_TREE`: git then writes into that tree,
/// which is judged as a whole. Before issue 39 the guard judged the
/// pathspec as if git wrote in the project (`backend/app.ts`, allowed)
/// while git wrote `frontend/app.ts`.
#[test]
fn git_work_tree_does_not_move_a_write_out_of_the_boundaries() {
    use crate::trust::{bash, guard};
    let tmp = crate::trust::project();
    let root = tmp.path();
    let backend = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    for command in [
        "cd backend && git --work-tree=../frontend checkout HEAD -- app.ts",
        "cd backend && GIT_WORK_TREE=../frontend git checkout HEAD -- app.ts",
        "GIT_WORK_TREE=frontend git checkout HEAD -- backend/api.rs",
    ] {
        let verdict = guard(root, &backend, &bash(root, command));
        assert!(
            verdict.as_deref().is_some_and(|d| d.contains("frontend")),
            "{command}: {verdict:?}"
        );
    }
    // Its own tree, named so, is its own.
    let own = bash(root, "git --work-tree=backend checkout HEAD -- api.rs");
    assert_eq!(guard(root, &backend, &own), None);
}
