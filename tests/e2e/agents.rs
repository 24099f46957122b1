//! The agents' side of the protocol through the real `squadctl`: writers
//! (`task new`, `progress`, `report-error`, `send --task`), readers (`next`,
//! `task list|show`, `session list`, `graph`).

use crate::support::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A project with one active session; returns (tempdir, session dir).
fn project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_session(tmp.path(), "demo");
    (tmp, dir)
}

/// `task_001` for alice and `task_002` for bob, which requires it.
fn alice_then_bob(root: &Path) {
    ok(task_new(root, &["--agent", "alice", "--instruction", "a"]));
    ok(task_new(
        root,
        &words("--agent bob --instruction b --requires task_001"),
    ));
}

/// `task_001` for alice, allowed to change `src/**`.
fn alice_in_src(root: &Path) {
    ok(task_new(
        root,
        &words("--agent alice --instruction a --allow src/**"),
    ));
}

#[test]
fn writers_produce_files_that_validate() {
    let (tmp, dir) = project();
    let root = tmp.path();
    let api = words(
        "--agent alice --instruction 'build the api' --allow src/** --timeout 30m --output api=src/api.rs --criterion 'tests pass'",
    );
    assert_eq!(ok(task_new(root, &api)).trim(), "task_001");
    assert_eq!(
        ok(task_new(
            root,
            &words("--agent bob --instruction 'build the ui' --requires task_001")
        ))
        .trim(),
        "task_002"
    );
    // A whole document on stdin.
    let mut c = ctl(root);
    c.args(["task", "new", "--file", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    std::io::Write::write_all(
        child.stdin.as_mut().unwrap(),
        b"meta:\n  task_id: task_docs\n  agent: carol\n  created_at: 2024-01-15T10:00:00Z\n  priority: low\ndependencies:\n  requires: [task_002]\ninstruction: write docs\n",
    )
    .unwrap();
    assert_eq!(ok(child.wait_with_output().unwrap()).trim(), "task_docs");
    assert!(dir.join("role-plan-carol-task_docs.md").is_file());
    let plan = fs::read_to_string(dir.join("role-plan-alice-task_001.md")).unwrap();
    assert!(plan.contains("timeout: 1800"), "{plan}");
    assert!(plan.contains("api: src/api.rs"), "{plan}");

    // SQUAD_TASK / SQUAD_AGENT stand in for the flags.
    ok(run(ctl(root)
        .env("SQUAD_TASK", "task_001")
        .env("SQUAD_AGENT", "alice")
        .args([
            "progress",
            "--status",
            "in_progress",
            "--percent",
            "10",
        ])));
    ctl_ok(
        root,
        &words(
            "report-error --agent alice --task task_001 --severity error --type build --message 'linker failed' --file src/api.rs --line 3 --column 1 --tried 'cargo clean' --needs bob",
        ),
    );
    ctl_ok(
        root,
        &words(
            "send --from alice --to bob --priority high --type question --subject 'api shape?' --message 'REST or RPC?' --task task_002",
        ),
    );
    let errors: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("error-alice-"))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let v = ctl_run(root, &["validate"]);
    assert_eq!(code(&v), 0, "{}{}", stdout(&v), stderr(&v));
}

#[test]
fn refused_writes_leave_the_session_byte_identical() {
    let (tmp, dir) = project();
    let root = tmp.path();
    alice_then_bob(root);
    ctl_ok(
        root,
        &words("progress --task task_001 --status in_progress"),
    );
    let before = snapshot(&dir);
    let refused = [
        // Unknown prerequisite.
        "task new --agent carol --instruction c --requires task_999",
        // Unknown blocked task.
        "task new --agent carol --instruction c --blocks task_999",
        // A cycle: task_002 requires task_001; task_003 requires task_002 and blocks task_001.
        "task new --agent carol --instruction c --requires task_002 --blocks task_001",
        // An id already used (by another agent, and by the same agent).
        "task new --agent carol --id task_001 --instruction c",
        "task new --agent alice --id task_001 --instruction c",
        // Not an id, not an agent.
        "task new --agent carol --id nope --instruction c",
        "task new --agent Carol --instruction c",
        // Progress: unknown task, out-of-range percent, first update without status.
        "progress --task task_999 --status in_progress",
        "progress --task task_001 --percent 101",
        "progress --task task_002",
        "progress --task task_001 --check unit=green",
        // Error reports: bad agent, unknown task.
        "report-error --agent Alice --severity error --type t --message m",
        "report-error --agent alice --task task_999 --severity error --type t --message m",
        // A message about a task no plan defines.
        "send --from alice --to bob --priority low --type notification --subject s --message m --task task_999",
    ];
    for line in refused {
        let args = words(line);
        let out = ctl_run(root, &args);
        assert_ne!(code(&out), 0, "{args:?} was accepted: {}", stdout(&out));
        assert!(!stderr(&out).is_empty(), "{args:?} said nothing");
        assert_eq!(snapshot(&dir), before, "{args:?} changed the session");
    }
    // --json: the refusal and its diagnostics, for scripts.
    let out = ctl_run(
        root,
        &words("task new --agent carol --instruction c --requires task_999 --json"),
    );
    assert_eq!(code(&out), 1);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["refused"], true);
    assert_eq!(v["diagnostics"][0]["rule"], "unknown-task", "{v:#}");
    assert_eq!(snapshot(&dir), before);
    // The cycle is reported with its rule.
    let out = ctl_run(
        root,
        &words("task new --agent carol --instruction c --requires task_002 --blocks task_001"),
    );
    assert!(
        stderr(&out).contains("dependency-cycle"),
        "{}",
        stderr(&out)
    );
    assert_eq!(code(&out), 1);
}

#[test]
fn progress_keeps_what_the_previous_update_said() {
    let (tmp, dir) = project();
    let root = tmp.path();
    ok(task_new(root, &["--agent", "alice", "--instruction", "a"]));
    let p = |args: &[&str]| {
        ok(run(ctl(root)
            .args(["progress", "--task", "task_001"])
            .args(args)))
    };
    p(&[
        "--status",
        "in_progress",
        "--action",
        "writing",
        "--todo",
        "parse",
        "--todo",
        "test",
        "--check",
        "unit=not_run",
    ]);
    p(&[
        "--done",
        "parse",
        "--artifact",
        "src/parse.rs",
        "--percent",
        "50",
    ]);
    p(&["--decision", "design:use serde", "--check", "lint=passing"]);
    let file = dir.join("role-comm-alice-task_001.md");
    let text = fs::read_to_string(&file).unwrap();
    let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(v["status"], "in_progress");
    assert_eq!(v["current_action"], "writing");
    assert_eq!(v["progress_percentage"], 50);
    assert_eq!(v["completed_steps"][0], "parse");
    assert_eq!(v["remaining_steps"].as_sequence().unwrap().len(), 1);
    assert_eq!(v["remaining_steps"][0], "test");
    assert_eq!(v["artifacts_created"][0]["path"], "src/parse.rs");
    assert_eq!(v["validation_results"]["unit"]["status"], "not_run");
    assert_eq!(v["validation_results"]["lint"]["status"], "passing");
    assert_eq!(v["decisions"][0]["type"], "design");
    // Blocked with who can help; unblocking drops the blocker.
    p(&[
        "--status",
        "blocked",
        "--blocker",
        "need the schema",
        "--needs",
        "bob",
    ]);
    let v: serde_yaml::Value = serde_yaml::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["blockers"][0]["requires_agent"], "bob");
    p(&["--status", "completed", "--done", "test"]);
    let v: serde_yaml::Value = serde_yaml::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["progress_percentage"], 100);
    assert!(v["blockers"].is_null());
    assert!(v["completed_at"].is_string());
    let first_completion = v["completed_at"].clone();
    // Stays: a second later a rewritten completed_at would differ; proves it is kept.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    p(&["--action", "done"]);
    let v: serde_yaml::Value = serde_yaml::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(v["completed_at"], first_completion);
    let out = ctl_run(root, &["validate"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn session_defaults_to_the_one_that_plans_the_task_and_ambiguity_lists_candidates() {
    let (tmp, first) = project();
    let root = tmp.path();
    ok(task_new(root, &["--agent", "alice", "--instruction", "a"]));
    let second = new_session(root, "other");
    let second_name = second.file_name().unwrap().to_str().unwrap().to_string();
    // Two active sessions: a new task for an agent planned in neither is ambiguous.
    let out = task_new(root, &["--agent", "zed", "--instruction", "z"]);
    assert_eq!(code(&out), 2);
    let first_name = first.file_name().unwrap().to_str().unwrap();
    assert!(
        stderr(&out).contains(first_name) && stderr(&out).contains(&second_name),
        "{}",
        stderr(&out)
    );
    ok(task_new(
        root,
        &[
            "--session",
            &second_name,
            "--agent",
            "bob",
            "--id",
            "task_b",
            "--instruction",
            "b",
        ],
    ));
    // The task picks its session.
    ctl_ok(root, &words("progress --task task_b --status in_progress"));
    assert!(second.join("role-comm-bob-task_b.md").is_file());
    ctl_ok(
        root,
        &words("progress --task task_001 --status in_progress"),
    );
    assert!(first.join("role-comm-alice-task_001.md").is_file());
    // SQUAD_SESSION names it.
    ok(run(ctl(root).env("SQUAD_SESSION", &second_name).args([
        "task",
        "new",
        "--agent",
        "zed",
        "--instruction",
        "z",
    ])));
    assert!(second.join("role-plan-zed-task_001.md").is_file());
}

#[test]
fn readers_show_an_agents_work() {
    let (tmp, _dir) = project();
    let root = tmp.path();
    ok(task_new(
        root,
        &words(
            "--agent alice --instruction 'build the api' --allow src/api/** --output api=src/api/mod.rs",
        ),
    ));
    ok(task_new(
        root,
        &words("--agent bob --instruction 'build the ui' --requires task_001"),
    ));
    // Nothing for bob yet: exit 1.
    let out = ctl_run(root, &["next", "--agent", "bob"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let next: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &["next", "--agent", "alice", "--json"])).unwrap();
    assert_eq!(next["tasks"][0]["task_id"], "task_001");
    assert_eq!(next["tasks"][0]["ready"], true);
    assert_eq!(next["tasks"][0]["instruction"], "build the api");
    assert_eq!(next["tasks"][0]["allowed"][0], "src/api/**");
    assert_eq!(next["tasks"][0]["outputs"]["api"], "src/api/mod.rs");
    let list = ctl_ok(root, &["task", "list", "--status", "ready"]);
    assert!(
        list.contains("task_001") && !list.contains("task_002"),
        "{list}"
    );
    let show: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &["task", "show", "task_002", "--json"])).unwrap();
    assert_eq!(show["waiting_for"][0], "task_001");
    assert_eq!(show["ready"], false);
    let show: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &["task", "show", "task_001", "--json"])).unwrap();
    assert_eq!(show["waited_for_by"][0], "task_002");
    ctl_ok(root, &words("progress --task task_001 --status completed"));
    let next: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &["next", "--agent", "bob", "--json"])).unwrap();
    assert_eq!(next["tasks"][0]["task_id"], "task_002");
    let sessions: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &["session", "list", "--json"])).unwrap();
    assert_eq!(sessions["sessions"][0]["tasks_total"], 2);
    assert_eq!(sessions["sessions"][0]["tasks_completed"], 1);
    assert_eq!(sessions["sessions"][0]["status"], "active");
}

#[test]
fn graph_mermaid_snapshot_of_the_fixture_session() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("agents-graph"), tmp.path());
    let out = ctl_ok(tmp.path(), &["graph", "--format", "mermaid"]);
    assert_eq!(
        out,
        r#"flowchart TD
  task_a["task_a<br/>alice<br/>completed"]:::completed
  task_b["task_b<br/>bob<br/>in_progress"]:::in_progress
  task_c["task_c<br/>carol<br/>pending"]:::pending
  task_d["task_d<br/>dave<br/>ready"]:::ready
  task_e["task_e<br/>erin<br/>blocked"]:::blocked
  task_a --> task_b
  task_b -.->|waits| task_c
  task_e -.->|waits| task_c
  task_a --> task_d
  classDef pending fill:#eeeeee
  classDef ready fill:#bbdefb
  classDef in_progress fill:#fff59d
  classDef completed fill:#c8e6c9
  classDef blocked fill:#ffcc80
  classDef overdue fill:#ef9a9a
"#
    );
    let dot = ctl_ok(tmp.path(), &["graph", "--format", "dot"]);
    assert!(
        dot.starts_with("digraph \"20240115T100000Z-graph\" {"),
        "{dot}"
    );
    assert!(
        dot.contains("\"task_b\" -> \"task_c\" [style=dashed, label=\"waits\"];"),
        "{dot}"
    );
    assert!(dot.contains("\"task_a\" -> \"task_b\";"), "{dot}");
}

/// The shell commands of the shipped squad-protocol skill, in order.
fn skill_commands() -> Vec<String> {
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/squad-protocol/SKILL.md"),
    )
    .unwrap();
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_block = !in_block && line == "```sh";
            continue;
        }
        if in_block && !line.trim().is_empty() {
            out.push(line.to_string());
        }
    }
    out
}

#[test]
fn every_command_the_skill_shows_runs_against_a_project() {
    let (tmp, dir) = project();
    let root = tmp.path();
    ok(task_new(
        root,
        &words("--agent backend-dev --instruction 'write the parser' --allow src/**"),
    ));
    ok(task_new(
        root,
        &words("--agent frontend-dev --instruction ui --requires task_001"),
    ));
    let commands = skill_commands();
    assert!(commands.len() >= 10, "{commands:?}");
    for needed in [
        "next",
        "progress",
        "lock acquire",
        "lock release",
        "send",
        "inbox next",
        "report-error",
        "task show",
    ] {
        assert!(
            commands
                .iter()
                .any(|c| c.starts_with(&format!("squadctl {needed}"))),
            "the skill shows no `{needed}`"
        );
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_squadctl")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for c in &commands {
        let out = run(Command::new("bash")
            .args(["-c", c])
            .current_dir(root)
            .env("PATH", &path)
            .env_remove("SQUAD_ROOT")
            .env_remove("SQUAD_SESSION")
            .env("SQUAD_AGENT", "backend-dev")
            .env("SQUAD_TASK", "task_001"));
        // `next` and `inbox next` say "nothing yet" with exit 1 (the skill says so).
        let may_be_empty = c.starts_with("squadctl next") || c.starts_with("squadctl inbox next");
        assert!(
            code(&out) == 0 || (may_be_empty && code(&out) == 1),
            "`{c}` failed ({}): {}{}",
            code(&out),
            stdout(&out),
            stderr(&out)
        );
    }
    let v: serde_yaml::Value = serde_yaml::from_str(
        &fs::read_to_string(dir.join("role-comm-backend-dev-task_001.md")).unwrap(),
    )
    .unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["completed_steps"].as_sequence().unwrap().len(), 2);
    let out = ctl_run(root, &["validate"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // The task is done: frontend-dev's task is ready now.
    let next: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &words("next --agent frontend-dev --json"))).unwrap();
    assert_eq!(next["tasks"][0]["ready"], true);
}

#[test]
fn init_installs_the_skill_ignores_runtime_state_and_appends_agents_md() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::write(root.join("AGENTS.md"), "# Our agents\n").unwrap();
    let out = ctl_ok(root, &["init", "--agents-md"]);
    assert!(out.contains(".claude/skills"), "{out}");
    let shipped = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/squad-protocol/SKILL.md"),
    )
    .unwrap();
    assert_eq!(
        fs::read_to_string(root.join(".squad/skills/squad-protocol/SKILL.md")).unwrap(),
        shipped
    );
    let agents = fs::read_to_string(root.join("AGENTS.md")).unwrap();
    assert!(
        agents.starts_with("# Our agents\n\n") && agents.contains("squadctl next"),
        "{agents}"
    );
    // Again: the section is not added twice, a user's .gitignore is kept.
    fs::write(root.join(".squad/.gitignore"), "# mine\n").unwrap();
    ctl_ok(root, &["init", "--agents-md"]);
    assert_eq!(fs::read_to_string(root.join("AGENTS.md")).unwrap(), agents);
    assert_eq!(
        fs::read_to_string(root.join(".squad/.gitignore")).unwrap(),
        "# mine\n"
    );
}

#[test]
fn git_add_all_leaves_runtime_state_out_and_check_ignores_it() {
    if !has_git() {
        skip("git is not installed");
        return;
    }
    let (tmp, dir) = project();
    let root = tmp.path();
    let git = |args: &[&str]| git_ok(root, args);
    git(&["init", "-q"]);
    alice_in_src(root);
    ctl_ok(
        root,
        &words("lock acquire --agent alice --task task_001 src/a.rs"),
    );
    let inbox = dir.join("inbox/alice/new");
    fs::create_dir_all(&inbox).unwrap();
    fs::write(inbox.join("high-msg_1.md"), "x").unwrap();
    fs::write(root.join(".squad/audit.jsonl"), "{}\n").unwrap();
    fs::write(root.join(".squad/run/state.json"), "{}").unwrap();
    git(&["add", "-A"]);
    let staged = git(&["diff", "--cached", "--name-only"]);
    assert!(staged.contains("role-plan-alice-task_001.md"), "{staged}");
    for runtime in ["/inbox/", "/locks/", "audit.jsonl", ".squad/run/"] {
        assert!(!staged.contains(runtime), "{runtime} staged:\n{staged}");
    }
    // `check` says nothing about runtime paths it is handed.
    let changed = root.join("changed.txt");
    let session = dir.file_name().unwrap().to_str().unwrap();
    fs::write(
        &changed,
        format!(".squad/sessions/{session}/inbox/alice/new/high-msg_1.md\n.squad/audit.jsonl\nsrc/a.rs\n"),
    )
    .unwrap();
    let out = ctl_run(root, &words("check --changed changed.txt --task task_001"));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        !stdout(&out).contains("ownership-violation"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn completions_man_and_quiet_verbose() {
    let (tmp, _dir) = project();
    let root = tmp.path();
    for shell in ["bash", "zsh", "fish"] {
        let out = ctl_ok(root, &["completions", shell]);
        assert!(
            out.contains("report-error") && out.contains("squadctl"),
            "{shell}: {out}"
        );
    }
    let out = ctl_ok(root, &["man"]);
    assert!(out.contains(".TH squadctl 1"), "{out}");
    let pages = tmp.path().join("man");
    ctl_ok(root, &["man", "--dir", pages.to_str().unwrap()]);
    assert!(pages.join("squadctl-task-new.1").is_file());
    // -q: the id is not printed, the task is written; -v: the root is named.
    let out = ctl_run(root, &words("-q task new --agent alice --instruction a"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let out = ctl_run(root, &["-v", "task", "list"]);
    assert_eq!(code(&out), 0);
    assert!(stderr(&out).contains("project root"), "{}", stderr(&out));
    assert!(stdout(&out).contains("task_001"));
    // -q does not hide errors.
    let out = ctl_run(root, &["-q", "task", "show", "task_404"]);
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("task_404"), "{}", stderr(&out));
}

#[test]
fn session_phase_gate_and_ending_rules() {
    let (tmp, dir) = project();
    let root = tmp.path();
    let name = dir.file_name().unwrap().to_str().unwrap().to_string();
    let status = || session_status(&dir);
    ctl_ok(root, &["session", "phase", &name, "design"]);
    ctl_ok(root, &["session", "gate", &name, "requirements", "passed"]);
    ctl_ok(root, &["session", "gate", &name, "design", "in_progress"]);
    let v = status();
    assert_eq!(v["phase"], "design");
    assert_eq!(v["validation_gates"]["requirements"], "passed");
    assert_eq!(v["validation_gates"]["design"], "in_progress");
    // Bad values are refused by clap, a path is not a session.
    assert_eq!(
        code(&ctl_run(root, &["session", "phase", &name, "shipping"])),
        2
    );
    let before = snapshot(root);
    assert_ne!(
        code(&ctl_run(root, &["session", "phase", "..", "design"])),
        0
    );
    assert_eq!(snapshot(root), before);
    // complete after fail: refused without --force, nothing changed.
    ctl_ok(root, &["session", "fail", &name, "--reason", "index down"]);
    let failed = fs::read(dir.join("session-status.md")).unwrap();
    let out = ctl_run(root, &["session", "complete", &name]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(fs::read(dir.join("session-status.md")).unwrap(), failed);
    // An ended session takes no new task.
    let before = snapshot(&dir);
    let out = task_new(
        root,
        &[
            "--session",
            &name,
            "--agent",
            "alice",
            "--instruction",
            "late",
        ],
    );
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(stderr(&out).contains("failed"), "{}", stderr(&out));
    assert_eq!(snapshot(&dir), before);
    ctl_ok(root, &["session", "complete", &name, "--force"]);
    let first = status()["completed_at"].clone();
    assert!(first.is_string());
    // Stays: a second later a rewritten completed_at would differ; proves it is kept.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    ctl_ok(root, &["session", "complete", &name]);
    assert_eq!(status()["completed_at"], first);
    assert_eq!(status()["status"], "completed");
    let out = ctl_run(root, &["validate"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn next_wait_returns_when_the_agents_task_becomes_ready() {
    let (tmp, _dir) = project();
    let root = tmp.path();
    alice_then_bob(root);
    let out = ctl_run(root, &["next", "--agent", "bob", "--wait", "1s"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let waiting = ctl(root)
        .args(["next", "--agent", "bob", "--wait", "60s", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = waiting.id();
    crate::daemon::eventually("next --wait watching", || watching(pid).then_some(()));
    ctl_ok(root, &words("progress --task task_001 --status completed"));
    let start = std::time::Instant::now();
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["tasks"][0]["task_id"], "task_002");
    // Woken by the change, not by the 30 s safety look.
    assert!(start.elapsed() < std::time::Duration::from_secs(25));
}

#[test]
fn lock_commands_take_the_agent_and_task_from_the_environment() {
    let (tmp, dir) = project();
    let root = tmp.path();
    alice_in_src(root);
    // Only the environment names the agent and the task.
    let as_alice = |args: &[&str]| {
        ok(run(ctl(root)
            .env("SQUAD_AGENT", "alice")
            .env("SQUAD_TASK", "task_001")
            .args(args)))
    };
    as_alice(&["lock", "acquire", "src/a.rs"]);
    assert!(fs::read_dir(dir.join("locks")).unwrap().count() > 0);
    let listed = as_alice(&["lock", "list", "--json"]);
    assert!(listed.contains("alice"), "{listed}");
    as_alice(&["lock", "release", "--all"]);
    let listed = ctl_ok(root, &["lock", "list", "--json"]);
    assert!(!listed.contains("src/a.rs"), "{listed}");
}
