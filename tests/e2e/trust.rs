//! Issue 24: boundaries that hold. One table per layer (the edit-time
//! guard, `check --staged`, `check --base`, the git hooks), one row per
//! attack, each row running the real `squadctl` on a real git repository.
//!
//! Every table collects all of its failing rows before it fails, so that
//! running it against another binary shows which attacks that binary lets
//! through: `TRUST_TABLE_SQUADCTL=/path/to/old/squadctl cargo test -p
//! squad-supervisor --test e2e trust` (how each row was seen failing on the
//! code before the fix).

use crate::support::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const S: &str = ".squad/sessions/20240115T100000Z-trust";

/// The squadctl under test (another one with `TRUST_TABLE_SQUADCTL`).
fn program() -> PathBuf {
    std::env::var_os("TRUST_TABLE_SQUADCTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_squadctl")))
}

/// `program()` in `dir` with none of the agent environment or SQUAD_ROOT.
fn squad(dir: &Path) -> Command {
    let mut c = Command::new(program());
    c.current_dir(dir)
        .env_remove("SQUAD_ROOT")
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .env_remove("SQUAD_SESSION")
        .env_remove("NO_COLOR");
    c
}

fn plan(agent: &str, task: &str, allowed: &[&str]) -> String {
    let list: String = allowed.iter().map(|g| format!("    - \"{g}\"\n")).collect();
    plan_text(
        task,
        agent,
        &format!("boundaries:\n  allowed:\n{list}  forbidden: []\n"),
    )
}

fn progress(agent: &str, task: &str) -> String {
    format!(
        "meta:\n  task_id: {task}\n  agent: {agent}\n  updated_at: 2024-01-15T10:35:00Z\nstatus: in_progress\nprogress_percentage: 10\ncurrent_action: working\n"
    )
}

/// A committed project: backend (task_1: `backend/**`, `shared/**`) and
/// frontend (task_2: `frontend/**`) in progress, `secrets/**` forbidden to
/// every task, the lead is `lead`.
pub(crate) fn project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join(".squad/run")).unwrap();
    write(
        root,
        ".squad/policies.yaml",
        "boundaries:\n  forbidden:\n    - \".env\"\n    - \".git/**\"\n    - \".squad/policies.yaml\"\n    - \"secrets/**\"\ncheck:\n  unattributed: warn\nrunners:\n  lead: lead\n",
    );
    write(
        root,
        &format!("{S}/session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    );
    write(
        root,
        &format!("{S}/role-plan-backend-task_1.md"),
        &plan("backend", "task_1", &["backend/**", "shared/**"]),
    );
    write(
        root,
        &format!("{S}/role-plan-frontend-task_2.md"),
        &plan("frontend", "task_2", &["frontend/**"]),
    );
    write(
        root,
        &format!("{S}/role-comm-backend-task_1.md"),
        &progress("backend", "task_1"),
    );
    write(
        root,
        &format!("{S}/role-comm-frontend-task_2.md"),
        &progress("frontend", "task_2"),
    );
    write(root, "backend/api.rs", "fn main() {}\n");
    write(root, "frontend/app.ts", "export {}\n");
    write(root, "shared/api.ts", "export {}\n");
    write(root, ".gitignore", ".squad/run/\n");
    git_ok(root, &["init", "-q", "-b", "main"]);
    git_ok(root, &["add", "-A"]);
    git_ok(root, &["commit", "-q", "-m", "base"]);
    tmp
}

/// Fails with every failing row of a table at once.
fn report(table: &str, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{table}: {} row(s) failed with {}:\n{}",
        failures.len(),
        program().display(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Layer 1: the edit-time guard.
// ---------------------------------------------------------------------------

/// The guard's answer to `input` (`None`: allowed), run from `dir`.
pub(crate) fn guard(dir: &Path, env: &[(&str, &str)], input: &serde_json::Value) -> Option<String> {
    let mut cmd = squad(dir);
    cmd.args(["guard", "--format", "claude"])
        .envs(env.iter().copied());
    let out = run_with_input(&mut cmd, input.to_string().as_bytes());
    let text = stdout(&out);
    if text.trim().is_empty() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    Some(
        v["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap_or(&text)
            .to_string(),
    )
}

pub(crate) fn claude(cwd: &Path, tool: &str, tool_input: serde_json::Value) -> serde_json::Value {
    json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd, "permission_mode": "default",
           "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t"})
}

pub(crate) fn bash(cwd: &Path, command: &str) -> serde_json::Value {
    claude(cwd, "Bash", json!({"command": command}))
}

fn codex_patch(cwd: &Path, patch: &str) -> serde_json::Value {
    json!({"session_id": "s", "turn_id": "u", "cwd": cwd, "hook_event_name": "PreToolUse", "model": "m",
           "permission_mode": "default", "tool_name": "apply_patch", "tool_input": {"command": patch}, "tool_use_id": "c"})
}

#[test]
fn guard_table_every_attack_is_denied() {
    let tmp = project();
    let root = tmp.path();
    // Links inside the project, made before the agent's call (item 2).
    std::os::unix::fs::symlink("../frontend", root.join("backend/fe")).unwrap();
    std::os::unix::fs::symlink(format!("../{S}"), root.join("backend/sess")).unwrap();
    let backend = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    let task_only = [("SQUAD_TASK", "task_1")];
    let lead = [("SQUAD_AGENT", "lead")];
    let abs = |p: &str| root.join(p).display().to_string();
    let own_plan = format!("{S}/role-plan-backend-task_1.md");
    let slash = Path::new("/");
    // (item, attack, env, run from, input, what the deny says; None = allowed)
    type Row<'a> = (
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a Path,
        serde_json::Value,
        Option<&'a str>,
    );
    let rows: Vec<Row<'_>> = vec![
        (
            "1",
            "Write widens its own plan",
            &backend,
            root,
            claude(
                root,
                "Write",
                json!({"file_path": abs(&own_plan), "content": plan("backend", "task_1", &["**"])}),
            ),
            Some("task assignments are the lead's to write (lead), not backend's"),
        ),
        (
            "1",
            "Edit of its own plan",
            &backend,
            root,
            claude(
                root,
                "Edit",
                json!({"file_path": abs(&own_plan), "old_string": "backend/**", "new_string": "**"}),
            ),
            Some("is a task assignment"),
        ),
        (
            "1",
            "sed -i on its own plan",
            &backend,
            root,
            bash(root, &format!("sed -i 's#backend/\\*\\*#**#' {own_plan}")),
            Some("is a task assignment"),
        ),
        (
            "1",
            "mv a new plan over its own",
            &backend,
            root,
            bash(root, &format!("mv /dev/null {own_plan}")),
            Some("is a task assignment"),
        ),
        (
            "1",
            "the lead edits a plan (allowed)",
            &lead,
            root,
            claude(
                root,
                "Edit",
                json!({"file_path": abs(&own_plan), "old_string": "a", "new_string": "b"}),
            ),
            None,
        ),
        (
            "2",
            "Write through a link to another task's files",
            &backend,
            root,
            claude(
                root,
                "Write",
                json!({"file_path": abs("backend/fe/app.ts"), "content": "x"}),
            ),
            Some("backend/fe/app.ts` → `frontend/app.ts` is outside the boundaries of task_1"),
        ),
        (
            "2",
            "`..` after a link climbs from where it leads",
            &backend,
            root,
            claude(
                root,
                "Write",
                json!({"file_path": format!("{}/backend/fe/../.env", root.display()), "content": "x"}),
            ),
            Some("forbidden for every task"),
        ),
        (
            "2",
            "a link to the session reaches session-status.md",
            &backend,
            root,
            bash(root, "echo done > backend/sess/session-status.md"),
            Some("written by the supervisor only"),
        ),
        (
            "2",
            "a link to the session reaches another agent's progress",
            &backend,
            root,
            bash(root, "echo x > backend/sess/role-comm-frontend-task_2.md"),
            Some("belongs to frontend"),
        ),
        (
            "2",
            "ln -s makes a link into another task's files",
            &backend,
            root,
            bash(root, "ln -s ../frontend backend/fe2"),
            Some("outside the boundaries of task_1"),
        ),
        (
            "2",
            "cp -s makes one too",
            &backend,
            root,
            bash(root, "cd backend && cp -s ../frontend/app.ts app-link.ts"),
            Some("outside the boundaries of task_1"),
        ),
        (
            "5",
            "cd / then rm -rf the project's frontend by absolute path",
            &backend,
            slash,
            bash(slash, &format!("rm -rf {}", abs("frontend"))),
            Some("outside the boundaries of task_1"),
        ),
        (
            "5",
            "cwd outside every project, target outside too",
            &backend,
            slash,
            bash(slash, "touch /tmp/squad-trust-x/y"),
            Some("Set SQUAD_ROOT"),
        ),
        (
            "5",
            "SQUAD_TASK alone writes another agent's progress",
            &task_only,
            root,
            claude(
                root,
                "Write",
                json!({"file_path": abs(&format!("{S}/role-comm-frontend-task_2.md")), "content": "x"}),
            ),
            Some("belongs to frontend"),
        ),
        (
            "6",
            "Codex patch header indented",
            &backend,
            root,
            codex_patch(
                root,
                "*** Begin Patch\n  *** Update File: frontend/app.ts\n@@\n-a\n+b\n*** End Patch\n",
            ),
            Some("`frontend/app.ts` is outside the boundaries of task_1"),
        ),
        (
            "6",
            "Codex patch naming no file",
            &backend,
            root,
            codex_patch(
                root,
                "*** Begin Patch\n** Update File: frontend/app.ts\n@@\n-a\n+b\n*** End Patch\n",
            ),
            Some("names no file"),
        ),
        (
            "7",
            ">&file",
            &backend,
            root,
            bash(root, "echo x >&frontend/a"),
            Some("`frontend/a` is outside"),
        ),
        (
            "7",
            "&>file",
            &backend,
            root,
            bash(root, "echo x &>frontend/a"),
            Some("`frontend/a` is outside"),
        ),
        (
            "7",
            "cp --target-directory=DIR",
            &backend,
            root,
            bash(root, "cp --target-directory=frontend backend/api.rs"),
            Some("`frontend` is outside"),
        ),
        (
            "7",
            "cp -tDIR",
            &backend,
            root,
            bash(root, "cp -tfrontend backend/api.rs"),
            Some("`frontend` is outside"),
        ),
        (
            "7",
            "install -Dt DIR",
            &backend,
            root,
            bash(root, "install -Dt frontend backend/api.rs"),
            Some("`frontend` is outside"),
        ),
        (
            "7",
            "cd inside ( … ) leaks out",
            &backend,
            root,
            bash(root, "(cd backend); echo x > frontend/a"),
            Some("`frontend/a` is outside"),
        ),
        (
            "7",
            "popd",
            &backend,
            root,
            bash(root, "pushd backend; popd; echo x > frontend/a"),
            Some("`frontend/a` is outside"),
        ),
        (
            "7",
            "env -C DIR",
            &backend,
            root,
            bash(root, "env -C frontend touch a"),
            Some("`frontend/a` is outside"),
        ),
        (
            "7",
            "all-digit file name after >",
            &backend,
            root,
            bash(root, "echo x > 123"),
            Some("`123` is outside"),
        ),
        (
            "7",
            "one-operand ln",
            &backend,
            root,
            bash(root, "ln -s frontend/app.ts"),
            Some("outside the boundaries"),
        ),
        (
            "7",
            "relative write after cd \"$X\"",
            &backend,
            root,
            bash(root, "cd \"$X\" && rm -rf src"),
            Some("cannot be judged"),
        ),
        (
            "7",
            "relative write after cd -",
            &backend,
            root,
            bash(root, "cd - && touch x"),
            Some("cannot be judged"),
        ),
        (
            "-",
            "an allowed write stays allowed",
            &backend,
            root,
            bash(
                root,
                "(cd backend && touch new.rs) && echo x > backend/b.rs",
            ),
            None,
        ),
    ];
    let mut failures = Vec::new();
    for (item, attack, env, dir, input, want) in &rows {
        let got = guard(dir, env, input);
        let ok = match (&got, want) {
            (None, None) => true,
            (Some(reason), Some(w)) => reason.contains(w),
            _ => false,
        };
        if !ok {
            failures.push(format!("item {item}: {attack}: got {got:?}, want {want:?}"));
        }
    }
    report("guard", failures);
}

// ---------------------------------------------------------------------------
// Layers 2 and 3: `check --staged` and `check --base`.
// ---------------------------------------------------------------------------

/// `git` in `root` with `env` (over [`git_in`]'s clean environment).
fn git_env(root: &Path, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = git_in(root);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(&mut cmd)
}

fn commit(root: &Path, message: &str) {
    git_ok(root, &["add", "-A"]);
    git_ok(root, &["commit", "-q", "--no-verify", "-m", message]);
}

/// `squadctl check …` in `root` with `env`: (exit code, stdout + stderr).
fn check(root: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let mut cmd = squad(root);
    cmd.args(["check", "--color", "never"]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    (code(&out), format!("{}{}", stdout(&out), stderr(&out)))
}

/// Whether a check answered as a row wants: exit 1 with every `want` in
/// its report (`[]`: exit 0).
fn judged(table: &str, row: &str, got: (i32, String), want: &[&str]) -> Option<String> {
    let (c, text) = got;
    let ok = if want.is_empty() {
        c == 0
    } else {
        c == 1 && want.iter().all(|w| text.contains(w))
    };
    (!ok).then(|| format!("{table}: {row}: exit {c}, want {want:?}; report:\n{text}"))
}

const AGENT_BACKEND: &[(&str, &str)] = &[("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];

#[test]
fn check_staged_table_every_attack_is_reported() {
    let own_plan = format!("{S}/role-plan-backend-task_1.md");
    type Setup = Box<dyn Fn(&Path)>;
    type Env<'a> = &'a [(&'a str, &'a str)];
    // (item, attack, committing environment, staged change, what the report says)
    type Row<'a> = (&'a str, &'a str, Env<'a>, Setup, &'a [&'a str]);
    let rows: Vec<Row<'_>> = vec![
        (
            "1",
            "an agent widens its own plan and writes outside it",
            AGENT_BACKEND,
            Box::new(move |root: &Path| {
                write(root, &own_plan, &plan("backend", "task_1", &["**"]));
                write(root, "frontend/app.ts", "hacked\n");
            }),
            &[
                "frontend/app.ts: error[boundary-violation]",
                "error[plan-changed-by-agent]: the task assignment of task_1 was changed by backend",
                "boundaries.allowed + `**`",
            ],
        ),
        (
            "4",
            "a forbidden name holding a quote",
            &[],
            Box::new(|root: &Path| write(root, "secrets/a\"b", "k\n")),
            &["error[boundary-violation]", "forbidden by"],
        ),
        (
            "4",
            "a forbidden name holding a tab",
            &[],
            Box::new(|root: &Path| write(root, "secrets/a\tb", "k\n")),
            &["error[boundary-violation]", "forbidden by"],
        ),
        (
            "2",
            "a symlink into another task's files",
            AGENT_BACKEND,
            Box::new(|root: &Path| {
                std::os::unix::fs::symlink("../frontend", root.join("backend/fe")).unwrap()
            }),
            &[
                "error[boundary-violation]: `backend/fe` (a symlink to `frontend`) changed by backend",
            ],
        ),
        (
            "9",
            "SQUAD_TASK names another agent's (wider) task",
            &[("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_2")],
            Box::new(|root: &Path| write(root, "frontend/app.ts", "hacked\n")),
            &[
                "error[foreign-task-trailer]: task_2 is frontend's task, but SQUAD_AGENT=backend is committing",
            ],
        ),
        (
            "-",
            "an allowed change passes",
            AGENT_BACKEND,
            Box::new(|root: &Path| write(root, "backend/new.rs", "x\n")),
            &[],
        ),
    ];
    let mut failures = Vec::new();
    for (item, attack, env, setup, want) in &rows {
        let tmp = project();
        let root = tmp.path();
        setup(root);
        git_ok(root, &["add", "-A"]);
        let got = check(root, env, &["--staged"]);
        failures.extend(judged(
            "check --staged",
            &format!("item {item}: {attack}"),
            got,
            want,
        ));
    }
    report("check --staged", failures);
}

/// A branch `side` with one clean commit of backend's; main checked out again.
fn side_branch(root: &Path) {
    git_ok(root, &["checkout", "-q", "-b", "side"]);
    write(root, "backend/side.rs", "x\n");
    commit(root, "side\n\nSquad-Task: task_1");
    git_ok(root, &["checkout", "-q", "main"]);
}

#[test]
fn check_base_table_every_attack_is_reported() {
    let own_plan = format!("{S}/role-plan-backend-task_1.md");
    type Setup = Box<dyn Fn(&Path)>;
    let rows: Vec<(&str, &str, Setup, &[&str])> = vec![
        (
            "1",
            "an agent's commit widens its plan, the next writes outside it",
            Box::new(move |root: &Path| {
                write(
                    root,
                    &own_plan,
                    &plan("backend", "task_1", &["backend/**", "frontend/**"]),
                );
                commit(root, "widen\n\nSquad-Task: task_1");
                write(root, "frontend/app.ts", "hacked\n");
                commit(root, "ui\n\nSquad-Task: task_1");
            }),
            &[
                "frontend/app.ts: error[boundary-violation]",
                "error[plan-changed-by-agent]: the task assignment of task_1 was changed by backend",
                "boundaries.allowed + `frontend/**`",
            ],
        ),
        (
            "3",
            "a change made while concluding a merge",
            Box::new(|root: &Path| {
                side_branch(root);
                write(root, "backend/main.rs", "x\n");
                commit(root, "main\n\nSquad-Task: task_1");
                git_ok(root, &["merge", "-q", "--no-ff", "--no-commit", "side"]);
                write(root, "frontend/evil.ts", "x\n");
                commit(root, "Merge side\n\nSquad-Task: task_1");
            }),
            &["frontend/evil.ts: error[boundary-violation]"],
        ),
        (
            "4",
            "a forbidden name holding a quote, a backslash and a newline",
            Box::new(|root: &Path| {
                write(root, "secrets/a\"b\\c\nd", "k\n");
                commit(root, "keys");
            }),
            &["error[boundary-violation]", "forbidden by"],
        ),
        (
            "2",
            "a committed symlink into another task's files",
            Box::new(|root: &Path| {
                std::os::unix::fs::symlink("../frontend", root.join("backend/fe")).unwrap();
                commit(root, "link\n\nSquad-Task: task_1");
            }),
            &["error[boundary-violation]: `backend/fe` (a symlink to `frontend`)"],
        ),
        (
            "9",
            "a trailer naming another agent's task, committed by backend",
            Box::new(|root: &Path| {
                write(root, "frontend/app.ts", "hacked\n");
                commit(root, "ui\n\nSquad-Task: task_2\nSquad-Agent: backend");
            }),
            &[
                "error[foreign-task-trailer]: `Squad-Task: task_2`",
                "names frontend's task, but the commit was made by backend",
            ],
        ),
        (
            "-",
            "clean commits and a clean merge pass",
            Box::new(|root: &Path| {
                side_branch(root);
                write(root, "frontend/ok.ts", "x\n");
                commit(root, "ok\n\nSquad-Task: task_2\nSquad-Agent: frontend");
                git_ok(
                    root,
                    &["merge", "-q", "--no-ff", "-m", "Merge side", "side"],
                );
            }),
            &[],
        ),
    ];
    let mut failures = Vec::new();
    for (item, attack, setup, want) in &rows {
        let tmp = project();
        let root = tmp.path();
        git_ok(root, &["tag", "base"]);
        setup(root);
        let got = check(root, &[], &["--base", "base"]);
        failures.extend(judged(
            "check --base",
            &format!("item {item}: {attack}"),
            got,
            want,
        ));
    }
    report("check --base", failures);
}

// ---------------------------------------------------------------------------
// Layer 4: the git hooks.
// ---------------------------------------------------------------------------

fn executable(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

fn install_hooks(root: &Path) -> std::process::Output {
    let program = program().display().to_string();
    run(squad(root).args(["hooks", "install", "--program", &program]))
}

#[test]
fn git_hooks_table_every_attack_is_stopped() {
    let mut failures = Vec::new();

    // Item 8: husky dispatches on the hook's own file name; the team's
    // hook must keep running once squad's are installed.
    {
        let tmp = project();
        let root = tmp.path();
        // A husky-style layout (written for this test): the stub sources a
        // dispatcher that runs .husky/<its own name>.
        executable(
            &root.join(".husky/_/h"),
            "#!/bin/sh\n# husky\nn=$(basename \"$0\")\ns=$(dirname \"$(dirname \"$0\")\")/$n\n[ -f \"$s\" ] || exit 0\nsh -e \"$s\" \"$@\"\n",
        );
        executable(
            &root.join(".husky/_/pre-commit"),
            "#!/bin/sh\n. \"$(dirname \"$0\")/h\"\n",
        );
        executable(
            &root.join(".husky/pre-commit"),
            "echo ran >> \"$(git rev-parse --git-dir)/team-hook-ran\"\n",
        );
        git_ok(root, &["config", "core.hooksPath", ".husky/_"]);
        let out = install_hooks(root);
        write(root, "backend/x.rs", "x\n");
        git_ok(root, &["add", "-A"]);
        let commit_out = git_env(root, &[], &["commit", "-q", "-m", "x"]);
        let ran = root.join(".git/team-hook-ran").exists();
        let said = format!("{}{}", stdout(&out), stderr(&out));
        if !ran || !said.contains("hooks run pre-push") {
            failures.push(format!(
                "item 8: husky: the team's hook ran: {ran} (commit: {}); install said: {said}",
                stderr(&commit_out)
            ));
        }
    }

    // Item 8: pre-push of a new branch to a URL (no remote-tracking refs)
    // still checks the pushed commits.
    {
        let tmp = project();
        let root = tmp.path();
        let out = install_hooks(root);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let remote = tempfile::tempdir().unwrap();
        git_ok(remote.path(), &["init", "-q", "--bare"]);
        write(root, "secrets/key", "k\n");
        commit(root, "keys");
        let url = remote.path().display().to_string();
        let out = git_env(root, &[], &["push", "-q", &url, "HEAD:refs/heads/feature"]);
        if out.status.success() {
            failures.push(format!(
                "item 8: pre-push to a URL let a forbidden commit through: {}",
                stderr(&out)
            ));
        }
    }

    // Item 9: commit-msg refuses a trailer naming another agent's task.
    {
        let tmp = project();
        let root = tmp.path();
        let out = install_hooks(root);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        write(root, "backend/y.rs", "x\n");
        git_ok(root, &["add", "-A"]);
        let out = git_env(
            root,
            &[("SQUAD_AGENT", "backend")],
            &["commit", "-q", "-m", "y\n\nSquad-Task: task_2"],
        );
        if out.status.success() || !stderr(&out).contains("foreign-task-trailer") {
            failures.push(format!(
                "item 9: commit-msg let backend claim task_2: {}",
                stderr(&out)
            ));
        }
        // Its own task goes through, with who committed recorded.
        let out = git_env(
            root,
            &[("SQUAD_AGENT", "backend")],
            &["commit", "-q", "-m", "y"],
        );
        let msg = git_ok(root, &["log", "-1", "--format=%B"]);
        if !out.status.success() || !msg.contains("Squad-Agent: backend") {
            failures.push(format!(
                "item 9: backend's own commit: {} / message {msg:?}",
                stderr(&out)
            ));
        }
    }

    // Item 1: pre-commit judges by HEAD's plans, not the widened one.
    {
        let tmp = project();
        let root = tmp.path();
        let out = install_hooks(root);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        write(
            root,
            &format!("{S}/role-plan-backend-task_1.md"),
            &plan("backend", "task_1", &["**"]),
        );
        write(root, "frontend/app.ts", "hacked\n");
        git_ok(root, &["add", "-A"]);
        let out = git_env(root, AGENT_BACKEND, &["commit", "-q", "-m", "widen"]);
        if out.status.success() {
            failures.push(
                "item 1: pre-commit let an agent commit its widened plan and a write outside it"
                    .into(),
            );
        }
    }
    report("git hooks", failures);
}

/// Item 1 through squadctl itself: `task new` writes a task assignment, so
/// an agent that is not a lead may not run it (it could assign itself a
/// wider task and report it in progress).
#[test]
fn an_agent_cannot_assign_itself_a_task_with_squadctl() {
    let tmp = project();
    let root = tmp.path();
    let new = |agent: Option<&str>| {
        let mut cmd = squad(root);
        cmd.args(["task", "new", "--session", "20240115T100000Z-trust"])
            .args(["--agent", "backend", "--instruction", "x", "--allow", "**"]);
        if let Some(a) = agent {
            cmd.env("SQUAD_AGENT", a);
        }
        run(&mut cmd)
    };
    let plans = || {
        std::fs::read_dir(root.join(S))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("role-plan-")
            })
            .count()
    };
    let out = new(Some("backend"));
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("SQUAD_AGENT=backend is not a lead"),
        "{}",
        stderr(&out)
    );
    assert_eq!(plans(), 2, "nothing written");
    // The lead and a human may.
    assert_eq!(code(&new(Some("lead"))), 0);
    assert_eq!(code(&new(None)), 0);
}

/// A team that keeps `.squad/` out of git (docs/ci.md) has no committed
/// plans to judge by: the working tree's are used, so commits still work
/// and a write outside the task is still refused.
#[test]
fn plans_kept_out_of_git_are_read_from_the_working_tree() {
    let tmp = project();
    let root = tmp.path();
    write(root, ".gitignore", ".squad/\n");
    git_ok(root, &["rm", "-r", "-q", "--cached", ".squad"]);
    commit(root, "keep .squad local");
    write(root, "backend/ok.rs", "x\n");
    git_ok(root, &["add", "-A"]);
    let (c, out) = check(root, AGENT_BACKEND, &["--staged"]);
    assert_eq!(c, 0, "{out}");
    write(root, "frontend/app.ts", "hacked\n");
    git_ok(root, &["add", "-A"]);
    let (c, out) = check(root, AGENT_BACKEND, &["--staged"]);
    assert_eq!(c, 1, "{out}");
    assert!(
        out.contains("frontend/app.ts: error[boundary-violation]"),
        "{out}"
    );
}
