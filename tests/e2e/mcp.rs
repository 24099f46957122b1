//! `squadctl mcp` driven by the official MCP Python SDK (`mcp`, pinned and
//! installed by `.ci/run` into a venv): the tools run a whole task against a
//! running squadd, refusals are tool errors that change nothing, and the
//! server says when a message lands in the agent's inbox.

use crate::daemon::Daemon;
use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The venv's Python with `mcp` installed: `SQUAD_MCP_PYTHON`, else the one
/// `.ci/run` makes. None (with a loud message) when absent outside CI; in
/// CI its absence fails the test.
fn python() -> Option<PathBuf> {
    ci_tool(
        "SQUAD_MCP_PYTHON",
        "mcp-venv/bin/python",
        &["-c", "import mcp"],
        "Python with the `mcp` package",
    )
}

/// Runs the client script's `scenario` against `root`; its JSON report.
fn client(python: &Path, root: &Path, session: &str, scenario: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/scripts/mcp_client.py");
    let out = run(std::process::Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_squadctl"))
        .arg(root)
        .arg(session)
        .arg(scenario));
    assert!(out.status.success(), "client failed: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

/// A project with one session in which alice has `task_001` (src/**) and
/// bob `task_002`, which requires it; no supervisor notices, so inboxes hold
/// only messages.
fn project() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let session = init_session(root, "mcp");
    write_policy(root, NO_NOTICES);
    ok(task_new(
        root,
        &words("--agent alice --instruction 'shape the API' --allow src/**"),
    ));
    ok(task_new(
        root,
        &words("--agent bob --instruction 'use the API' --allow src/** --requires task_001"),
    ));
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    (tmp, name)
}

/// The steps of a report, by tool.
fn steps<'a>(report: &'a Value, agent: &str, tool: &str) -> Vec<&'a Value> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["agent"] == agent && s["tool"] == tool)
        .collect()
}

#[test]
fn mcp_client_runs_a_whole_task_against_squadd() {
    let Some(python) = python() else { return };
    let (tmp, session) = project();
    let root = tmp.path();
    let _daemon = Daemon::start(root);
    let report = client(&python, root, &session, "task");

    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    for t in [
        "next",
        "task_show",
        "task_list",
        "progress",
        "report_error",
        "send",
        "reply",
        "inbox_list",
        "inbox_read",
        "inbox_ack",
        "lock_acquire",
        "lock_release",
        "lock_list",
        "memory_add",
        "memory_query",
        "task_new",
        "session_phase",
        "session_gate",
        "session_complete",
        "session_fail",
    ] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    assert_eq!(
        report["schemas"]["lock_acquire"]["required"],
        serde_json::json!(["targets", "task"])
    );
    assert!(
        report["resources"].as_array().unwrap().len() >= 4,
        "{}",
        report["resources"]
    );

    // Every step but bob's conflicting lock succeeded.
    for s in report["steps"].as_array().unwrap() {
        let refused = s["agent"] == "bob" && s["tool"] == "lock_acquire";
        assert_eq!(s["is_error"], refused, "{s}");
    }
    let conflict = &steps(&report, "bob", "lock_acquire")[0]["text"];
    assert!(conflict.as_str().unwrap().contains("alice"), "{conflict}");

    // The reply went to alice, about her task, answering bob's question.
    let read = steps(&report, "alice", "inbox_read");
    let reply: Value = serde_json::from_str(read[0]["text"].as_str().unwrap()).unwrap();
    let content = reply["content"].as_str().unwrap();
    assert!(content.contains("in_reply_to"), "{content}");
    assert!(
        content.contains("task_001") && content.contains("Re: api shape?"),
        "{content}"
    );
    // alice's server told her of it without being asked.
    let updates = report["updates"]["alice"].as_array().unwrap();
    assert!(
        updates.iter().any(|u| u == "squad://agent/inbox"),
        "{updates:?}"
    );
    // bob's, that his task became ready when alice completed hers.
    let updates = report["updates"]["bob"].as_array().unwrap();
    assert!(
        updates.iter().any(|u| u == "squad://agent/tasks"),
        "{updates:?}"
    );

    // The files say the same as the tools.
    let s = root.join(".squad/sessions").join(&session);
    let progress = std::fs::read_to_string(s.join("role-comm-alice-task_001.md")).unwrap();
    assert!(progress.contains("status: completed"), "{progress}");
    let status = session_status(&s);
    assert!(status["completed_at"].is_string(), "{status:?}");
    assert!(
        ctl_ok(root, &["lock", "list", "--json"]).contains("[]")
            || !ctl_ok(root, &["lock", "list"]).contains("src/api.rs")
    );
}

#[test]
fn mcp_refused_writes_are_tool_errors_and_change_nothing() {
    let Some(python) = python() else { return };
    let (tmp, session) = project();
    let root = tmp.path();
    let before = snapshot(root);
    let report = client(&python, root, &session, "refuse");
    for s in report["steps"].as_array().unwrap() {
        assert_eq!(s["is_error"], true, "{s}");
    }
    // The same text the CLI prints for the same refusal.
    let cli = run(ctl(root).args([
        "progress",
        "--json",
        "--agent",
        "alice",
        "--task",
        "task_nope",
        "--status",
        "in_progress",
    ]));
    assert_ne!(code(&cli), 0);
    let tool = &steps(&report, "alice", "progress")[0]["text"];
    assert_eq!(
        tool.as_str().unwrap(),
        format!("{}{}", stderr(&cli), stdout(&cli))
    );
    let after = snapshot(root);
    let changed: Vec<_> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        // The empty mutex the lock commands create on first use (runtime
        // state under .squad/run/, git-ignored); the CLI creates it too.
        .filter(|k| !(k.as_path() == Path::new(".squad/run/locks.mutex") && after[*k].is_empty()))
        .collect();
    assert!(changed.is_empty(), "refused tool calls changed {changed:?}");
}

#[test]
fn mcp_install_merges_into_each_cli_config_and_never_clobbers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    ctl_ok(&root, &["init"]);
    let install = |args: &[&str]| {
        run(ctl(&root)
            .env("HOME", &home)
            .env_remove("CODEX_HOME")
            .args(["mcp", "install", "--json"])
            .args(args))
    };
    // Someone else's servers and settings are kept.
    write(
        &root,
        ".mcp.json",
        r#"{"mcpServers":{"docs":{"command":"docs-mcp"}}}"#,
    );
    write(
        &root,
        ".codex/config.toml",
        "model = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs\"\n",
    );
    let out = install(&["--claude", "--codex"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(claude["mcpServers"]["docs"]["command"], "docs-mcp");
    assert_eq!(
        claude["mcpServers"]["squad"]["args"],
        serde_json::json!(["mcp"])
    );
    let squadctl = claude["mcpServers"]["squad"]["command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(Path::new(&squadctl).is_absolute(), "{squadctl}");
    let codex = std::fs::read_to_string(root.join(".codex/config.toml")).unwrap();
    assert!(
        codex.starts_with("model = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs\"\n"),
        "{codex}"
    );
    assert!(codex.contains("[mcp_servers.squad]\ncommand = "), "{codex}");
    // Again: nothing changes.
    let before = snapshot(&root);
    let again: Value = serde_json::from_str(&stdout(&install(&["--claude", "--codex"]))).unwrap();
    assert!(
        again
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["changed"] == false),
        "{again}"
    );
    assert_eq!(snapshot(&root), before);
    // Copilot: per user only.
    let out = install(&["--copilot"]);
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("--user"), "{}", stderr(&out));
    let out = install(&["--copilot", "--user"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let copilot: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".copilot/mcp-config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(copilot["mcpServers"]["squad"]["type"], "local");
    // A broken file is refused with its position and left as it was.
    std::fs::write(home.join(".claude.json"), "{\n  \"projects\": ,\n}\n").unwrap();
    let out = install(&["--claude", "--user"]);
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains(".claude.json: 2:"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".claude.json")).unwrap(),
        "{\n  \"projects\": ,\n}\n"
    );
}
