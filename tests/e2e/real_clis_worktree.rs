//! The real Claude Code and Codex in runs of their own worktrees (issue 44
//! item 2): with the guard installed in the main checkout and its hook
//! files NOT committed, a write outside the run's boundaries inside its
//! worktree is refused by the guard, and nothing of the hook files reaches
//! the session's branch. Driven by the stub model, like real_clis.rs.

use crate::daemon::Daemon;
use crate::real_clis::{SESSION, claude_env, cli, codex_env, install_guard, project};
use crate::stub_model::{Step, StubModel};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::time::Duration;

const CLAUDE_LINE: &str = r#"["claude", "-p", "Read {prompt_file} and work on task {task} as it says.", "--permission-mode", "acceptEdits", "--allowedTools", "Bash(squadctl:*)", "--output-format", "stream-json", "--verbose"]"#;
const CODEX_LINE: &str = r#"["codex", "exec", "--json", "--sandbox", "workspace-write", "-m", "gpt-5.1-codex", "Read {prompt_file} and work on task {task} as it says."]"#;

/// The real-CLI project of real_clis.rs as a git repository on `main`
/// (`.squad/` ignored), committed before the guard is installed: the hook
/// files are the main checkout's alone. Returns the session and the path
/// the run of task_9 will work in.
fn git_project(p: &crate::real_clis::Project) -> Option<(String, std::path::PathBuf)> {
    if !crate::worktree::git_or_skip() {
        return None;
    }
    fs::remove_dir_all(p.root.join(".squad/sessions").join(SESSION)).unwrap();
    fs::write(p.root.join(".gitignore"), "/.squad/\n").unwrap();
    git_ok(&p.root, &["init", "-q", "-b", "main"]);
    git_ok(&p.root, &["add", "-A"]);
    git_ok(&p.root, &["commit", "-q", "-m", "start"]);
    let session = new_session(&p.root, "run");
    let sname = session.file_name().unwrap().to_string_lossy().into_owned();
    let tree = p.root.join(".squad/worktrees").join(&sname).join("task_9");
    Some((sname, tree))
}

/// Runs task_9 in its worktree with `command` and the CLI's `env`, to
/// its merge: the run as `runs --json` shows it, and run.log.
fn run_in_worktree(
    p: &crate::real_clis::Project,
    session: &str,
    command: &str,
    env: &[(String, String)],
    stub: &StubModel,
) -> (Value, String) {
    let env_yaml: String = env
        .iter()
        .filter(|(k, _)| k != "PATH" && k != "HOME" && k != "CODEX_HOME")
        .map(|(k, v)| format!("        {k}: \"{v}\"\n"))
        .collect();
    write_policy(
        &p.root,
        format!(
            "runners:\n  dispatch: true\n  worktree: true\n  pass_env: [CODEX_HOME]\n  agents:\n    \"*\":\n      command: {command}\n      max_retries: 0\n{}",
            if env_yaml.is_empty() {
                String::new()
            } else {
                format!("      env:\n{env_yaml}")
            }
        ),
    );
    let daemon_env: Vec<(&str, &str)> = env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "HOME" || k == "CODEX_HOME")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let daemon = Daemon::start_with_env(&p.root, &daemon_env);
    ok(run(ctl(&p.root).args([
        "task",
        "new",
        "--session",
        session,
        "--id",
        "task_9",
        "--agent",
        "backend",
        "--instruction",
        "write backend/allowed.txt",
        "--allow",
        "backend/**",
    ])));
    let log_path = p
        .root
        .join(".squad/sessions")
        .join(session)
        .join("runs/task_9/run.log");
    let settled = || {
        let out = run(ctl(&p.root).args(["runs", "--all", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v.as_array()?
            .iter()
            .find(|r| {
                r["task"] == "task_9"
                    && r["state"] != "running"
                    && r["state"] != "gone"
                    && r["merge"]["state"] != "active"
            })
            .cloned()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let run = loop {
        if let Some(r) = settled() {
            break r;
        }
        let audit = audit_log(&p.root).unwrap_or_default();
        assert!(
            !audit.contains("\"kind\":\"run-failed\""),
            "the run did not start: {audit}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not end\nrun.log:\n{}\nrequests:\n{}",
            fs::read_to_string(&log_path).unwrap_or_default(),
            stub.transcript()
        );
        // Poll interval of a wait with a deadline.
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(daemon);
    (run, fs::read_to_string(&log_path).unwrap_or_default())
}

/// What every worktree run must show: refused outside its boundaries in
/// its worktree, completed, merged, and the hook files not in the branch.
fn assert_guarded_in_worktree(
    p: &crate::real_clis::Project,
    run: &Value,
    log: &str,
    stub: &StubModel,
    hook_dir: &str,
) {
    let ctx = format!("{run:#}\n{log}\n{}", stub.transcript());
    let r = stub.tool_result(0).unwrap_or_default();
    assert!(
        r.contains("squad guard") && r.contains("task_9"),
        "step 0 result: {r}\n{ctx}"
    );
    assert_eq!(run["exit"]["code"], 0, "{ctx}");
    assert_eq!(run["completed"], true, "{ctx}");
    assert_eq!(run["merge"]["state"], "merged", "{ctx}");
    let tree = git_ok(&p.root, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!tree.contains("frontend/forbidden.txt"), "{tree}\n{ctx}");
    assert!(!p.root.join("frontend/forbidden.txt").exists(), "{ctx}");
    assert!(!tree.contains(hook_dir), "{tree}\n{ctx}");
}

#[test]
fn claude_code_in_a_worktree_is_guarded_without_committed_hook_files() {
    let Some(claude) = cli("claude") else { return };
    let p = project();
    let Some((session, tree)) = git_project(&p) else {
        return;
    };
    install_guard(&p.root, &p.home, &["--claude"]);
    let stub = StubModel::start(vec![
        Step::Write(
            tree.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Shell("squadctl progress --status completed --percent 100".into()),
    ]);
    let env = claude_env(&stub, &p.home, &claude);
    let (run, log) = run_in_worktree(&p, &session, CLAUDE_LINE, &env, &stub);
    assert_guarded_in_worktree(&p, &run, &log, &stub, ".claude");
}

#[test]
fn codex_in_a_worktree_is_guarded_without_committed_hook_files() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    let Some((session, tree)) = git_project(&p) else {
        return;
    };
    let stub = StubModel::start(vec![
        Step::Write(
            tree.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Shell("squadctl progress --status completed --percent 100".into()),
    ]);
    let env = codex_env(&stub, &p.home, &codex);
    let mut c = ctl(&p.root);
    c.args(["guard", "install", "--codex", "--trust"])
        .args(["--program", env!("CARGO_BIN_EXE_squadctl")])
        .envs(env.iter().map(|(k, v)| (k, v)));
    ok(run(&mut c));
    let (run, log) = run_in_worktree(&p, &session, CODEX_LINE, &env, &stub);
    assert_guarded_in_worktree(&p, &run, &log, &stub, ".codex");
    // Codex runs the main checkout's guard for a worktree inside it;
    // squadd recorded nothing in Codex's settings (trust stays the
    // person's).
    let config = fs::read_to_string(p.home.join(".codex/config.toml")).unwrap();
    assert!(!config.contains(".squad/worktrees"), "{config}");
}
