//! `squadctl guard`: the real binary answering the hook inputs of Claude
//! Code, Codex and Copilot CLI on stdin, and `guard install|uninstall`.

use crate::support::*;
use serde_json::{Value, json};
use std::fs;
use std::path::Path;

const SESSION: &str = "20240115T100000Z-guard";

fn plan(agent: &str, task: &str, allowed: &[&str], forbidden: &[&str]) -> String {
    let list = |v: &[&str]| {
        v.iter()
            .map(|g| format!("    - \"{g}\"\n"))
            .collect::<String>()
    };
    let forbidden = if forbidden.is_empty() {
        "    []\n".to_string()
    } else {
        list(forbidden)
    };
    plan_text(
        task,
        agent,
        &format!(
            "boundaries:\n  allowed:\n{}  forbidden:\n{forbidden}",
            list(allowed)
        ),
    )
}

fn progress(agent: &str, task: &str, status: &str) -> String {
    format!(
        "meta:\n  task_id: {task}\n  agent: {agent}\n  updated_at: 2024-01-15T10:35:00Z\nstatus: {status}\nprogress_percentage: 10\ncurrent_action: working\n"
    )
}

/// Two agents' tasks with boundaries; frontend holds a lock on
/// `shared/api.ts`; `backend/out` is a symlink out of the project.
fn project() -> (tempfile::TempDir, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = format!(".squad/sessions/{SESSION}");
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    write(
        root,
        &format!("{s}/role-plan-backend-task_1.md"),
        &plan(
            "backend",
            "task_1",
            &["backend/**", "shared/**"],
            &["backend/secrets/**"],
        ),
    );
    write(
        root,
        &format!("{s}/role-plan-frontend-task_2.md"),
        &plan("frontend", "task_2", &["frontend/**", "shared/**"], &[]),
    );
    write(
        root,
        &format!("{s}/role-comm-backend-task_1.md"),
        &progress("backend", "task_1", "in_progress"),
    );
    write(
        root,
        &format!("{s}/role-comm-frontend-task_2.md"),
        &progress("frontend", "task_2", "in_progress"),
    );
    write(root, "backend/api.rs", "fn main() {}\n");
    write(root, "shared/api.ts", "export {}\n");
    std::os::unix::fs::symlink(outside.path(), root.join("backend/out")).unwrap();
    let out = ctl_run(
        root,
        &words("lock acquire shared/api.ts --agent frontend --task task_2 --ttl 1h"),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (tmp, outside)
}

/// Runs the guard with `input` on stdin: (exit code, stdout, stderr).
fn guard(
    root: &Path,
    env: &[(&str, &str)],
    format: Option<&str>,
    input: &str,
) -> (i32, String, String) {
    let mut cmd = ctl(root);
    cmd.arg("guard");
    if let Some(f) = format {
        cmd.args(["--format", f]);
    }
    cmd.envs(env.iter().copied());
    let out = run_with_input(&mut cmd, input.as_bytes());
    (code(&out), stdout(&out), stderr(&out))
}

/// What the guard answered, read back from the tool's own shape: `None`
/// for allow, the reason for deny.
fn verdict(tool: &str, (code, out, err): &(i32, String, String)) -> Option<String> {
    assert_eq!(*code, 0, "{tool}: exit {code}: {out}{err}");
    if out.trim().is_empty() {
        return None;
    }
    let v: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{tool}: {e}: {out}"));
    let answer = if tool.starts_with("copilot") {
        &v
    } else {
        &v["hookSpecificOutput"]
    };
    if !tool.starts_with("copilot") {
        assert_eq!(answer["hookEventName"], "PreToolUse", "{out}");
    }
    assert_eq!(answer["permissionDecision"], "deny", "{tool}: {out}");
    Some(
        answer["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .to_string(),
    )
}

/// The input each tool sends to write `path` (as the tool names it).
fn input(tool: &str, cwd: &Path, path: &str) -> String {
    let cwd = cwd.display().to_string();
    let abs = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let claude = |name: &str, tool_input: Value| {
        json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd, "permission_mode": "default",
               "hook_event_name": "PreToolUse", "tool_name": name, "tool_input": tool_input, "tool_use_id": "toolu_1"})
    };
    let codex = |name: &str, command: String| {
        json!({"session_id": "s", "turn_id": "t", "transcript_path": null, "cwd": cwd, "hook_event_name": "PreToolUse",
               "model": "m", "permission_mode": "default", "tool_name": name, "tool_input": {"command": command}, "tool_use_id": "c1"})
    };
    let copilot = |name: &str, args: Value, as_string: bool| {
        let args = if as_string {
            Value::String(args.to_string())
        } else {
            args
        };
        json!({"sessionId": "s", "timestamp": 1_704_067_200_000u64, "cwd": cwd, "toolName": name, "toolArgs": args})
    };
    match tool {
        "claude-write" => claude("Write", json!({"file_path": abs, "content": "x"})),
        "claude-edit" => claude(
            "Edit",
            json!({"file_path": abs, "old_string": "a", "new_string": "b", "replace_all": false}),
        ),
        "claude-bash" => claude(
            "Bash",
            json!({"command": format!("echo x > '{path}'"), "description": "write"}),
        ),
        "codex-patch" => codex(
            "apply_patch",
            format!("*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch\n"),
        ),
        "codex-bash" => codex("Bash", format!("sed -i 's/a/b/' {path}")),
        "copilot-create" => copilot("create", json!({"path": abs, "file_text": "x"}), true),
        "copilot-edit" => copilot(
            "edit",
            json!({"path": path, "old_str": "a", "new_str": "b"}),
            false,
        ),
        "copilot-bash" => copilot(
            "bash",
            json!({"command": format!("tee {path} < /dev/null"), "description": "d"}),
            true,
        ),
        _ => unreachable!(),
    }
    .to_string()
}

/// A malformed input of each tool: the guard must deny, never allow.
fn malformed(tool: &str) -> &'static str {
    match tool {
        "claude-write" => {
            r#"{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"content":"x"}}"#
        }
        "claude-edit" => {
            r#"{"hook_event_name":"PreToolUse","tool_name":"Edit","tool_input":{"file_path":7}}"#
        }
        "claude-bash" => {
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":["ls"]}}"#
        }
        "codex-patch" => {
            r#"{"turn_id":"t","tool_name":"apply_patch","tool_input":{"command":"--- a/x\n+++ b/x\n"}}"#
        }
        "codex-bash" => r#"{"turn_id":"t","tool_name":"Bash","tool_input":"not an object"}"#,
        "copilot-create" => r#"{"toolName":"create","toolArgs":"{\"path\": "}"#,
        "copilot-edit" => r#"{"toolName":"edit","toolArgs":{"old_str":"a"}}"#,
        "copilot-bash" => r#"{"toolName":"bash","toolArgs":"#,
        _ => unreachable!(),
    }
}

const TOOLS: &[&str] = &[
    "claude-write",
    "claude-edit",
    "claude-bash",
    "codex-patch",
    "codex-bash",
    "copilot-create",
    "copilot-edit",
    "copilot-bash",
];

fn format_of(tool: &str) -> &'static str {
    tool.split('-').next().map_or("claude", |f| match f {
        "codex" => "codex",
        "copilot" => "copilot",
        _ => "claude",
    })
}

#[test]
fn decision_table_for_every_tool() {
    let (tmp, outside) = project();
    let root = tmp.path();
    let env = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    let outside_file = outside.path().join("x.txt").display().to_string();
    let rows: &[(&str, &str, Option<&str>)] = &[
        ("allowed", "backend/api.rs", None),
        (
            "forbidden",
            "backend/secrets/key.pem",
            Some("forbidden for task_1 by boundaries.forbidden[0] `backend/secrets/**`"),
        ),
        (
            "project-forbidden",
            ".env",
            Some("forbidden for every task by the project policy"),
        ),
        (
            "not-allowed",
            "frontend/app.ts",
            Some("outside the boundaries of task_1"),
        ),
        (
            "locked",
            "shared/api.ts",
            Some("locked by frontend (task_2, exclusive lock on `shared/api.ts`"),
        ),
        (
            "protocol-file",
            &format!(".squad/sessions/{SESSION}/session-status.md"),
            Some("written by the supervisor only"),
        ),
        (
            "outside-root",
            &outside_file,
            Some("outside the project root"),
        ),
        (
            "dot-dot-escape",
            "backend/../../escape.txt",
            Some("outside the project root"),
        ),
        (
            "symlink-escape",
            "backend/out/x.txt",
            Some("through a symlink to"),
        ),
    ];
    for tool in TOOLS {
        for (name, path, want) in rows {
            // Every row is answered both with the format detected and forced.
            for format in [None, Some(format_of(tool))] {
                let got = verdict(tool, &guard(root, &env, format, &input(tool, root, path)));
                match (got, want) {
                    (None, None) => {}
                    (Some(reason), Some(w)) => {
                        assert!(reason.contains(w), "{tool} {name}: {reason}")
                    }
                    (got, want) => panic!("{tool} {name} ({format:?}): got {got:?}, want {want:?}"),
                }
            }
        }
        // Malformed input: denied with the rule id and a place, in the
        // tool's own shape when it is forced.
        let forced = verdict(
            tool,
            &guard(root, &env, Some(format_of(tool)), malformed(tool)),
        )
        .unwrap_or_else(|| panic!("{tool}: malformed input allowed"));
        assert!(forced.contains("guard-bad-input"), "{tool}: {forced}");
    }
    // Undetectable garbage without --format: exit 2 with the reason on stderr.
    let (c, out, err) = guard(root, &env, None, "not json");
    assert_eq!((c, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("stdin:1:2: guard-bad-input"), "{err}");
}

#[test]
fn a_session_of_two_agents_is_answered_right() {
    let (tmp, _outside) = project();
    let root = tmp.path();
    let backend = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    // frontend's task is inferred from its single in-progress task.
    let frontend = [("SQUAD_AGENT", "frontend")];
    let cwd = root.display().to_string();
    let claude = |name: &str, tool_input: Value| {
        json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd, "permission_mode": "default",
               "hook_event_name": "PreToolUse", "tool_name": name, "tool_input": tool_input, "tool_use_id": "t"}).to_string()
    };
    let abs = |p: &str| format!("{cwd}/{p}");
    type Step<'a> = (&'a [(&'a str, &'a str)], String, Option<&'a str>);
    let steps: Vec<Step<'_>> = vec![
        (&backend, claude("Read", json!({"file_path": abs("frontend/app.ts")})), None),
        (&backend, claude("Glob", json!({"pattern": "**/*.rs"})), None),
        (&backend, claude("Grep", json!({"pattern": "fn", "path": cwd})), None),
        (&backend, claude("WebFetch", json!({"url": "https://example.com", "prompt": "p"})), None),
        (&backend, claude("TodoWrite", json!({"todos": []})), None),
        (&backend, claude("mcp__github__create_issue", json!({"title": "x"})), None),
        (&backend, claude("Write", json!({"file_path": abs("backend/new.rs"), "content": "x"})), None),
        (&backend, claude("Edit", json!({"file_path": abs("backend/api.rs"), "old_string": "a", "new_string": "b"})), None),
        (&backend, claude("MultiEdit", json!({"file_path": abs("backend/api.rs"), "edits": [{"old_string": "a", "new_string": "b"}]})), None),
        (&backend, claude("NotebookEdit", json!({"notebook_path": abs("frontend/n.ipynb"), "new_source": "x"})), Some("outside the boundaries of task_1")),
        (&backend, claude("Bash", json!({"command": "cargo test 2>&1 | tail -5"})), None),
        (&backend, claude("Bash", json!({"command": "git status && git diff"})), None),
        (&backend, claude("Bash", json!({"command": "git checkout -- backend/api.rs"})), None),
        (&backend, claude("Bash", json!({"command": "git stash"})), Some("`git stash` rewrites the whole working tree while frontend (task_2) holds a lock on `shared/api.ts`")),
        (&backend, claude("Bash", json!({"command": "git reset --hard HEAD"})), Some("whole working tree")),
        (&backend, claude("Bash", json!({"command": "rm -rf shared"})), Some("locked by frontend")),
        (&backend, claude("Bash", json!({"command": "cat > backend/gen.rs <<'EOF'\necho > frontend/x\nEOF"})), None),
        (&backend, claude("Bash", json!({"command": "cd frontend && rm -rf src"})), Some("`frontend/src` is outside the boundaries of task_1")),
        (&backend, claude("Bash", json!({"command": "mv backend/api.rs frontend/api.rs"})), Some("frontend/api.rs")),
        (&backend, claude("Write", json!({"file_path": abs(&format!(".squad/sessions/{SESSION}/role-comm-backend-task_1.md")), "content": "x"})), None),
        (&backend, claude("Write", json!({"file_path": abs(&format!(".squad/sessions/{SESSION}/role-comm-frontend-task_2.md")), "content": "x"})), Some("belongs to frontend")),
        (&backend, claude("Write", json!({"file_path": abs(".squad/policies.yaml"), "content": "x"})), Some("forbidden for every task")),
        (&frontend, claude("Write", json!({"file_path": abs("shared/api.ts"), "content": "x"})), None),
        (&frontend, claude("Write", json!({"file_path": abs("backend/api.rs"), "content": "x"})), Some("outside the boundaries of task_2")),
        (&frontend, claude("Bash", json!({"command": "git stash"})), None),
        (&frontend,
         json!({"session_id": "s", "turn_id": "u", "cwd": cwd, "hook_event_name": "PreToolUse", "model": "m", "permission_mode": "default",
                "tool_name": "apply_patch", "tool_input": {"command": "*** Begin Patch\n*** Add File: frontend/new.ts\n+x\n*** Update File: frontend/app.ts\n*** Move to: backend/app.ts\n*** End Patch\n"}, "tool_use_id": "c"}).to_string(),
         Some("`backend/app.ts` is outside the boundaries of task_2")),
        (&frontend, json!({"sessionId": "s", "timestamp": 1, "cwd": cwd, "toolName": "view", "toolArgs": "{\"path\":\"backend/api.rs\"}"}).to_string(), None),
        (&frontend, json!({"sessionId": "s", "timestamp": 1, "cwd": cwd, "toolName": "create", "toolArgs": "{\"path\":\"frontend/c.ts\",\"file_text\":\"x\"}"}).to_string(), None),
    ];
    for (i, (env, input, want)) in steps.iter().enumerate() {
        let tool = if input.contains("toolName") {
            "copilot"
        } else {
            "claude"
        };
        let got = verdict(tool, &guard(root, env, None, input));
        match (got, want) {
            (None, None) => {}
            (Some(reason), Some(w)) => assert!(reason.contains(w), "step {i}: {reason}"),
            (got, want) => panic!("step {i} {input}: got {got:?}, want {want:?}"),
        }
    }
    // An agent with two tasks in progress must say which one.
    let s = format!(".squad/sessions/{SESSION}");
    write(
        root,
        &format!("{s}/role-plan-frontend-task_3.md"),
        &plan("frontend", "task_3", &["docs/**"], &[]),
    );
    write(
        root,
        &format!("{s}/role-comm-frontend-task_3.md"),
        &progress("frontend", "task_3", "in_progress"),
    );
    let reason = verdict(
        "claude",
        &guard(
            root,
            &frontend,
            None,
            &claude("Write", json!({"file_path": abs("frontend/a.ts")})),
        ),
    )
    .unwrap();
    assert!(
        reason.contains("has 2 tasks in progress (task_2, task_3); set SQUAD_TASK"),
        "{reason}"
    );
    // An unreadable policy fails closed; reads still go through.
    write(root, ".squad/policies.yaml", "boundaries: [unclosed\n");
    let reason = verdict(
        "claude",
        &guard(
            root,
            &backend,
            None,
            &claude("Write", json!({"file_path": abs("backend/a.rs")})),
        ),
    )
    .unwrap();
    assert!(
        reason.contains("cannot use the project policy") && reason.contains("policies.yaml"),
        "{reason}"
    );
    assert!(
        verdict(
            "claude",
            &guard(
                root,
                &backend,
                None,
                &claude("Read", json!({"file_path": abs("backend/a.rs")}))
            )
        )
        .is_none()
    );
    // A SQUAD_TASK without an assignment fails closed too.
    fs::remove_file(root.join(".squad/policies.yaml")).unwrap();
    let reason = verdict(
        "claude",
        &guard(
            root,
            &[("SQUAD_TASK", "task_9")],
            None,
            &claude("Write", json!({"file_path": abs("backend/a.rs")})),
        ),
    )
    .unwrap();
    assert!(
        reason.contains("SQUAD_TASK=task_9 names no task assignment"),
        "{reason}"
    );
}

#[test]
fn install_keeps_unrelated_hooks_and_uninstall_restores_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad")).unwrap();
    let settings = r#"{
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./audit.sh"}]}],
    "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write"}]}]
  }
}
"#;
    write(root, ".claude/settings.json", settings);
    let sq = |args: &[&str]| {
        let out = run(ctl(root).args(args));
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    // A dry run prints the diff and writes nothing.
    let d = sq(&["guard", "install", "--claude", "--dry-run"]);
    // The hook runs this squadctl by its absolute path (a CLI started from
    // a desktop launcher has no squadctl on its PATH).
    let squadctl = env!("CARGO_BIN_EXE_squadctl");
    assert!(
        d.contains(&format!(
            "+            \"command\": \"{squadctl} guard --format claude\""
        )),
        "{d}"
    );
    assert!(
        d.contains("             \"command\": \"./audit.sh\""),
        "{d}"
    );
    assert_eq!(
        fs::read_to_string(root.join(".claude/settings.json")).unwrap(),
        settings
    );

    sq(&["guard", "install", "--claude"]);
    let v: Value =
        serde_json::from_str(&fs::read_to_string(root.join(".claude/settings.json")).unwrap())
            .unwrap();
    let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2);
    assert_eq!(pre[0]["hooks"][0]["command"], "./audit.sh");
    assert_eq!(
        pre[1]["hooks"][0]["command"],
        format!("{squadctl} guard --format claude")
    );
    assert_eq!(
        v["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
        "prettier --write"
    );
    assert_eq!(v["permissions"]["allow"][0], "Bash(npm test)");
    assert!(sq(&["guard", "install", "--claude"]).contains("already installed"));

    sq(&["guard", "uninstall", "--claude"]);
    let after: Value =
        serde_json::from_str(&fs::read_to_string(root.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(after, serde_json::from_str::<Value>(settings).unwrap());

    // Codex and Copilot files are created, and Copilot's goes away again.
    sq(&["guard", "install", "--codex"]);
    let v: Value =
        serde_json::from_str(&fs::read_to_string(root.join(".codex/hooks.json")).unwrap()).unwrap();
    assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Bash|apply_patch");
    sq(&["guard", "install", "--copilot"]);
    let v: Value =
        serde_json::from_str(&fs::read_to_string(root.join(".github/hooks/squad.json")).unwrap())
            .unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(
        v["hooks"]["preToolUse"][0]["bash"],
        format!("{squadctl} guard --format copilot")
    );
    sq(&["guard", "uninstall", "--copilot"]);
    assert!(!root.join(".github/hooks/squad.json").exists());

    // --user goes to the user's settings ($HOME, $CODEX_HOME, ~/.copilot).
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join("codex-home");
    let user = |args: &[&str]| {
        run(ctl(root)
            .env("HOME", home.path())
            .env("CODEX_HOME", &codex_home)
            .args(args))
    };
    assert_eq!(code(&user(&["guard", "install", "--claude", "--user"])), 0);
    assert!(home.path().join(".claude/settings.json").is_file());
    assert_eq!(code(&user(&["guard", "install", "--codex", "--user"])), 0);
    assert!(codex_home.join("hooks.json").is_file());
    // Copilot's user-level hooks directory (loaded by `copilot -p` with no
    // folder trust).
    let out = run(ctl(root)
        .env("HOME", home.path())
        .env_remove("COPILOT_HOME")
        .args(["guard", "install", "--copilot", "--user"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(home.path().join(".copilot/hooks/squad.json").is_file());

    // A settings file that is not JSON is never clobbered.
    write(root, ".claude/settings.json", "{ broken");
    let out = ctl_run(root, &["guard", "install", "--claude"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("not valid JSON"), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(root.join(".claude/settings.json")).unwrap(),
        "{ broken"
    );
}

fn git(root: &Path, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = git_in(root);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn git_hooks_refuse_forbidden_commits_add_trailers_and_chain_existing_hooks() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_tree(&fixture("seed"), root);
    git_ok(root, &["init", "-q", "-b", "main"]);
    // core.hooksPath is respected, and an existing hook there keeps running.
    git_ok(root, &["config", "core.hooksPath", ".githooks"]);
    let existing = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/existing-ran\"\n";
    write(root, ".githooks/pre-commit", existing);
    fs::set_permissions(
        root.join(".githooks/pre-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    git_ok(root, &["add", "-A"]);
    git_ok(root, &["commit", "-q", "-m", "base"]);
    assert_eq!(
        fs::read_to_string(root.join(".git/existing-ran")).unwrap(),
        "ran\n"
    );

    let program = env!("CARGO_BIN_EXE_squadctl");
    let out = ctl_run(root, &["hooks", "install", "--program", program]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The team's hook is tracked: chained where it is, never renamed
    // (git_hooks.rs has the dispatcher case).
    assert!(
        stdout(&out).contains(".githooks/pre-commit is tracked by git"),
        "{}",
        stdout(&out)
    );
    assert!(!root.join(".githooks/pre-commit.pre-squad").exists());
    assert_eq!(
        fs::read_to_string(root.join(".githooks/pre-commit")).unwrap(),
        existing
    );

    // A commit touching a path outside the task's boundaries is refused.
    let task = [("SQUAD_TASK", "task_001")];
    write(root, "frontend/src/components/UserSearch.tsx", "x\n");
    git_ok(root, &["add", "frontend"]);
    let out = git(root, &task, &["commit", "-q", "-m", "sneak"]);
    assert!(!out.status.success(), "the forbidden commit went through");
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("frontend/src/components/UserSearch.tsx")
            && said.contains("boundary-violation"),
        "{said}"
    );
    assert_eq!(
        fs::read_to_string(root.join(".git/existing-ran")).unwrap(),
        "ran\nran\n",
        "the existing hook ran first"
    );
    git_ok(root, &["reset", "-q"]);
    fs::remove_file(root.join("frontend/src/components/UserSearch.tsx")).unwrap();

    // An allowed commit goes through and gets the trailer, once.
    write(root, "backend/src/routes/users.ts", "export {}\n");
    git_ok(root, &["add", "backend"]);
    let out = git(root, &task, &["commit", "-q", "-m", "Add users route"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let msg = git_ok(root, &["log", "-1", "--format=%B"]);
    assert_eq!(msg.trim_end(), "Add users route\n\nSquad-Task: task_001");
    write(root, "backend/src/services/userService.ts", "export {}\n");
    git_ok(root, &["add", "backend"]);
    let out = git(
        root,
        &task,
        &["commit", "-q", "-m", "Service\n\nSquad-Task: task_001"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        git_ok(root, &["log", "-1", "--format=%B"])
            .matches("Squad-Task")
            .count(),
        1
    );

    // pre-push checks the pushed range: a commit that skipped pre-commit
    // (--no-verify) is refused at push time.
    let remote = tempfile::tempdir().unwrap();
    git_ok(remote.path(), &["init", "-q", "--bare"]);
    git_ok(
        root,
        &[
            "remote",
            "add",
            "origin",
            &remote.path().display().to_string(),
        ],
    );
    git_ok(root, &["push", "-q", "origin", "main"]);
    write(root, ".env", "SECRET=1\n");
    git_ok(root, &["add", ".env"]);
    let out = git(
        root,
        &task,
        &["commit", "-q", "--no-verify", "-m", "secret"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = git(root, &[], &["push", "-q", "origin", "main"]);
    assert!(
        !out.status.success(),
        "the push of a forbidden change went through"
    );
    assert!(
        stdout(&out).contains(".env") || stderr(&out).contains(".env"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    // uninstall restores what was there.
    let out = ctl_run(root, &["hooks", "uninstall"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(root.join(".githooks/pre-commit")).unwrap(),
        existing
    );
    assert!(
        !root.join(".githooks/commit-msg").exists() && !root.join(".githooks/pre-push").exists()
    );
    assert!(!root.join(".githooks/pre-commit.pre-squad").exists());
    assert_eq!(
        git_ok(root, &["config", "core.hooksPath"]).trim(),
        ".githooks"
    );
}

#[test]
fn check_staged_attributes_the_index_to_the_committing_task() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    copy_tree(&fixture("seed"), root);
    git_ok(root, &["init", "-q", "-b", "main"]);
    git_ok(root, &["add", "-A"]);
    git_ok(root, &["commit", "-q", "-m", "base"]);
    write(root, "frontend/src/components/UserSearch.tsx", "x\n");
    git_ok(root, &["add", "frontend"]);
    let check = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = ctl(root);
        cmd.args(["check", "--staged", "--color", "never"])
            .args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = run(&mut cmd);
        (code(&out), stdout(&out))
    };
    // The agent's single in-progress task (task_001) does not allow it.
    let (c, out) = check(&[("SQUAD_AGENT", "backend-system-architect")], &[]);
    assert_eq!(c, 1, "{out}");
    assert!(
        out.contains("frontend/src/components/UserSearch.tsx: error[boundary-violation]"),
        "{out}"
    );
    // The frontend task does.
    let (c, out) = check(&[("SQUAD_TASK", "task_010")], &[]);
    assert_eq!(c, 0, "{out}");
    let (c, out) = check(&[], &["--task", "task_010"]);
    assert_eq!(c, 0, "{out}");
    // Nobody claims it: a warning, per the default policy.
    let (c, out) = check(&[], &[]);
    assert_eq!(c, 0, "{out}");
    assert!(out.contains("warning[unattributed-change]"), "{out}");
}

/// Regression: the reason for refusing writes under an unusable task
/// assignment quoted its first diagnostic, which may be a warning (an
/// unknown field at the top) rather than the error that makes it unusable.
#[test]
fn an_unusable_plan_is_refused_with_its_first_error_not_a_warning() {
    let (tmp, _outside) = project();
    let root = tmp.path();
    let text = plan("backend", "task_1", &["backend/**"], &[])
        .replace("meta:\n", "zz_extra: 1\nmeta:\n")
        .replace("priority: high", "priority: whenever");
    write(
        root,
        &format!(".squad/sessions/{SESSION}/role-plan-backend-task_1.md"),
        &text,
    );
    let cwd = root.display().to_string();
    let input = json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd,
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": format!("{cwd}/backend/new.rs"), "content": "x"},
        "tool_use_id": "t"})
    .to_string();
    let env = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    let reason = verdict("claude", &guard(root, &env, None, &input)).expect("denied");
    assert!(reason.contains("cannot be used"), "{reason}");
    assert!(!reason.contains("unknown-field"), "{reason}");
    assert!(reason.contains("priority"), "{reason}");
}

/// The guard's cache of plan verdicts (.squad/run/guard-plans/) never
/// answers for a plan that changed: a plan narrowed in place with the same
/// length and the same mtime is obeyed at the next call, and a planted
/// entry (garbage, or a link to a lying entry) is ignored.
#[test]
fn a_cached_plan_verdict_follows_every_edit_of_the_plan() {
    let (tmp, _outside) = project();
    let root = tmp.path();
    let cwd = root.display().to_string();
    let write_to = |path: &str| {
        json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
            "tool_input": {"file_path": format!("{cwd}/{path}"), "content": "x"},
            "tool_use_id": "t"})
        .to_string()
    };
    let env = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    let ask = |path: &str| verdict("claude", &guard(root, &env, None, &write_to(path)));
    assert_eq!(ask("backend/api.rs"), None);
    let cache = root.join(".squad/run/guard-plans");
    let entries: Vec<_> = fs::read_dir(&cache).unwrap().collect();
    assert_eq!(entries.len(), 1, "one entry after the first call");
    assert_eq!(ask("backend/api.rs"), None, "answered from the cache");
    // Narrowed: `backend/**` becomes `backand/**`, same length, same mtime.
    let plan_path = root.join(format!(
        ".squad/sessions/{SESSION}/role-plan-backend-task_1.md"
    ));
    let text = fs::read_to_string(&plan_path).unwrap();
    let mtime = fs::metadata(&plan_path).unwrap().modified().unwrap();
    let narrowed = text.replacen("backend/**", "backand/**", 1);
    assert_eq!(narrowed.len(), text.len());
    fs::write(&plan_path, &narrowed).unwrap();
    fs::File::options()
        .write(true)
        .open(&plan_path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let reason = ask("backend/api.rs").expect("denied by the narrowed plan");
    assert!(
        reason.contains("outside the boundaries of task_1"),
        "{reason}"
    );
    assert_eq!(ask("backand/x.rs"), None);
    // Planted entries: garbage, then a link to an entry that would allow.
    let entry = fs::read_dir(&cache)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // The true entry with only its verdict widened: would allow anything.
    let good = fs::read_to_string(&entry).unwrap();
    let at = good.find("\"verdict\"").unwrap();
    let lying = format!("{}{}", &good[..at], good[at..].replace("backand/**", "**"));
    assert_ne!(lying, good);
    fs::write(&entry, "{\"format\": 1, garbage").unwrap();
    assert!(ask("backend/api.rs").is_some(), "garbage entry ignored");
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("lie.json"), &lying).unwrap();
    fs::remove_file(&entry).unwrap();
    std::os::unix::fs::symlink(outside.path().join("lie.json"), &entry).unwrap();
    assert!(ask("backend/api.rs").is_some(), "linked entry not followed");
    assert_eq!(
        fs::read_to_string(outside.path().join("lie.json")).unwrap(),
        lying
    );
}

/// The record file of frontend's lock in `project()`.
fn frontend_record(root: &Path) -> std::path::PathBuf {
    let dir = root.join(format!(".squad/sessions/{SESSION}/locks"));
    let mut found: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

/// The guard reads the records `squadctl lock` writes by a fast path of
/// their exact layout (issue 23); any other layout of the same lock goes
/// through the full JSON parse and still holds, and a record that parses
/// neither way holds on everything: no layout lets a write past a lock.
#[test]
fn a_lock_record_in_any_layout_holds_the_guard() {
    let (tmp, _outside) = project();
    let root = tmp.path();
    let env = [("SQUAD_AGENT", "backend"), ("SQUAD_TASK", "task_1")];
    let path = frontend_record(root);
    let written = fs::read_to_string(&path).unwrap();
    let record: Value = serde_json::from_str(&written).unwrap();
    let at = |key: &str| {
        let t = chrono::DateTime::parse_from_rfc3339(record[key].as_str().unwrap()).unwrap();
        t.with_timezone(&chrono::FixedOffset::east_opt(7200).unwrap())
            .to_rfc3339()
    };
    // Keys in another order, timestamps with an offset, an escape in a name.
    let mut reordered = serde_json::Map::new();
    reordered.insert("expires_at".into(), json!(at("expires_at")));
    reordered.insert("acquired_at".into(), json!(at("acquired_at")));
    for (k, v) in record.as_object().unwrap() {
        reordered.entry(k.clone()).or_insert(v.clone());
    }
    let escaped = written.replace("\"task_2\"", "\"task_\\u0032\"");
    assert_ne!(escaped, written);
    let layouts = [
        ("as written", written.clone(), "locked by frontend (task_2"),
        (
            "compact",
            serde_json::to_string(&record).unwrap(),
            "locked by frontend (task_2",
        ),
        (
            "reordered, offsets",
            serde_json::to_string_pretty(&reordered).unwrap(),
            "locked by frontend (task_2",
        ),
        ("an escape", escaped, "locked by frontend (task_2"),
        (
            "truncated",
            written[..written.len() / 2].to_string(),
            "unreadable lock record",
        ),
    ];
    for (name, text, want) in layouts {
        fs::write(&path, &text).unwrap();
        let got = verdict(
            "claude-write",
            &guard(
                root,
                &env,
                None,
                &input("claude-write", root, "shared/api.ts"),
            ),
        );
        assert!(
            got.as_deref().is_some_and(|r| r.contains(want)),
            "{name}: {got:?}\n{text}"
        );
    }
}

/// Every protocol file the guard reads (the lock records, the plan) is
/// checked by one `fstat` on its open descriptor, not two (issue 23: the
/// guard reads a few dozen files per tool call).
#[test]
fn the_guard_checks_each_file_it_reads_with_one_fstat() {
    let Some(strace) = crate::notices::strace() else {
        return;
    };
    let (tmp, _outside) = project();
    let root = tmp.path();
    for (i, target) in ["shared/a.ts", "shared/b/**", "frontend/x.ts"]
        .iter()
        .enumerate()
    {
        let out = ctl_run(
            root,
            &[
                "lock",
                "acquire",
                target,
                "--agent",
                "frontend",
                "--task",
                "task_2",
                "--ttl",
                &format!("{}h", i + 1),
            ],
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let trace = root.join(".squad/run/guard.strace");
    let mut cmd = std::process::Command::new(strace);
    cmd.current_dir(root)
        .args([
            "-y",
            "-e",
            "trace=openat,statx,fstat,newfstatat,close",
            "-o",
        ])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_squadctl"))
        .arg("guard")
        .env("SQUAD_AGENT", "backend")
        .env("SQUAD_TASK", "task_1");
    let out = run_with_input(
        &mut cmd,
        input("claude-write", root, "backend/api.rs").as_bytes(),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let trace = fs::read_to_string(&trace).unwrap();
    // With -y a call on a descriptor names its file: `statx(3</…/x.json>, "", …`.
    let mut checks: std::collections::BTreeMap<String, usize> = Default::default();
    for line in trace.lines() {
        let Some((call, rest)) = line.split_once('(') else {
            continue;
        };
        let on_fd = rest
            .split_once('<')
            .is_some_and(|(fd, _)| !fd.is_empty() && fd.bytes().all(|b| b.is_ascii_digit()));
        if matches!(call, "statx" | "fstat" | "newfstatat")
            && on_fd
            && let Some(file) = rest.split_once('<').and_then(|(_, r)| r.split_once('>'))
            && (file.0.ends_with(".json") && file.0.contains("/locks/")
                || file.0.contains("/role-plan-"))
        {
            *checks.entry(file.0.to_string()).or_default() += 1;
        }
    }
    let records = checks.keys().filter(|f| f.contains("/locks/")).count();
    assert_eq!(records, 4, "every record read: {checks:?}\n{trace}");
    assert!(
        checks
            .keys()
            .any(|f| f.contains("/role-plan-backend-task_1.md")),
        "the plan read: {checks:?}"
    );
    for (file, n) in &checks {
        assert_eq!(*n, 1, "{file} checked {n} times\n{trace}");
    }
}
