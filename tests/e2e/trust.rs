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
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
fn project() -> tempfile::TempDir {
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
fn guard(dir: &Path, env: &[(&str, &str)], input: &serde_json::Value) -> Option<String> {
    let mut cmd = squad(dir);
    cmd.args(["guard", "--format", "claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("squadctl starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
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

fn claude(cwd: &Path, tool: &str, tool_input: serde_json::Value) -> serde_json::Value {
    json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd, "permission_mode": "default",
           "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t"})
}

fn bash(cwd: &Path, command: &str) -> serde_json::Value {
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
