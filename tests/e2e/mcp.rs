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
pub(crate) fn python() -> Option<PathBuf> {
    ci_tool(
        "SQUAD_MCP_PYTHON",
        "mcp-venv/bin/python",
        &["-c", "import mcp"],
        "Python with the `mcp` package",
    )
}

/// Runs the client script's `scenario` against `root`; its JSON report.
fn client(python: &Path, root: &Path, session: &str, scenario: &str) -> Value {
    client_over(python, root, session, scenario, &serde_json::json!({}))
}

/// [`client`], reaching the agents named in `urls` (agent -> URL) over
/// Streamable HTTP.
fn client_over(python: &Path, root: &Path, session: &str, scenario: &str, urls: &Value) -> Value {
    client_with(
        python,
        root,
        session,
        scenario,
        urls,
        &serde_json::json!({}),
    )
}

/// [`client_over`] with a bearer token for each agent named in `tokens`.
pub(crate) fn client_with(
    python: &Path,
    root: &Path,
    session: &str,
    scenario: &str,
    urls: &Value,
    tokens: &Value,
) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/scripts/mcp_client.py");
    let out = run(std::process::Command::new(python)
        .env("SQUAD_MCP_URLS", urls.to_string())
        .env("SQUAD_MCP_TOKENS", tokens.to_string())
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
pub(crate) fn project() -> (tempfile::TempDir, String) {
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

/// The lead's tools (the policy's lead only).
const LEAD_TOOLS: [&str; 5] = [
    "task_new",
    "session_phase",
    "session_gate",
    "session_complete",
    "session_fail",
];

/// A JSON array of strings.
fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect()
}

#[test]
fn mcp_client_runs_a_whole_task_against_squadd() {
    let Some(python) = python() else { return };
    let (tmp, session) = project();
    let root = tmp.path();
    let _daemon = Daemon::start(root);
    let report = client(&python, root, &session, "task");

    let tools = names(&report["tools"]);
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
        "inbox_show",
        "inbox_ack",
        "lock_acquire",
        "lock_release",
        "lock_list",
        "memory_add",
        "memory_query",
    ] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    let lead_tools = names(&report["lead_tools"]);
    for t in LEAD_TOOLS {
        assert!(!tools.contains(&t), "{t} offered to alice: {tools:?}");
        assert!(
            lead_tools.contains(&t),
            "{t} missing for the lead: {lead_tools:?}"
        );
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
    // bob peeked (inbox_read peek, inbox_show) before reading: still
    // unread then, with sender and subject.
    let peeked = &report["bob_inbox_after_peek"]["messages"][0];
    assert_eq!(peeked["unread"], true, "{peeked}");
    assert_eq!(peeked["from"], "alice", "{peeked}");
    let shown = &steps(&report, "bob", "inbox_show")[0]["text"];
    let shown: Value = serde_json::from_str(shown.as_str().unwrap()).unwrap();
    assert_eq!(shown["subject"], "api shape?", "{shown}");
    assert_eq!(shown["unread"], true, "{shown}");
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
    // A typo of a recipient: refused through MCP as on the command line.
    let sends = steps(&report, "alice", "send");
    let typo = sends[1]["text"].as_str().unwrap();
    assert!(typo.contains("did you mean `bob`?"), "{typo}");
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

/// Task assignments and session edits are the lead's: an agent's server
/// does not list them, and refuses them when called anyway, with the CLI's
/// text, writing nothing. (Before, every agent's server listed and ran them:
/// an agent could assign itself a task with wider boundaries or end the
/// session.)
#[test]
fn mcp_lead_tools_are_listed_for_and_run_by_the_lead_only() {
    let Some(python) = python() else { return };
    let (tmp, session) = project();
    let root = tmp.path();
    let before = snapshot(root);
    let report = client(&python, root, &session, "lead_only");
    let alice = names(&report["alice_tools"]);
    let lead = names(&report["lead_tools"]);
    for t in LEAD_TOOLS {
        assert!(!alice.contains(&t), "{t} offered to alice: {alice:?}");
        assert!(lead.contains(&t), "{t} not offered to the lead: {lead:?}");
    }
    assert!(alice.contains(&"progress"), "{alice:?}");
    let calls: Vec<&Value> = report["steps"].as_array().unwrap().iter().collect();
    assert_eq!(calls.len(), 5, "{calls:?}");
    for s in &calls {
        assert_eq!(s["is_error"], true, "{s}");
        assert!(
            s["text"]
                .as_str()
                .unwrap()
                .contains("SQUAD_AGENT=alice is not a lead"),
            "{s}"
        );
    }
    // Word for word what the CLI says to alice.
    let as_alice = |args: &[&str]| {
        let out = run(ctl(root).env("SQUAD_AGENT", "alice").args(args));
        assert_ne!(code(&out), 0, "{args:?}: {}", stdout(&out));
        format!("{}{}", stderr(&out), stdout(&out))
    };
    let task_new = as_alice(&[
        "task",
        "new",
        "--json",
        "--agent",
        "alice",
        "--instruction",
        "widen",
        "--session",
        &session,
        "--allow",
        "**",
    ]);
    assert_eq!(calls[0]["text"].as_str().unwrap(), task_new);
    let complete = as_alice(&["session", "complete", "--json", "--", &session]);
    assert_eq!(calls[1]["text"].as_str().unwrap(), complete);
    assert!(
        complete.contains("session edits are the lead's"),
        "{complete}"
    );
    let after = snapshot(root);
    assert_eq!(before, after, "refused lead tools changed the tree");
    // The lead (the default policy's runners.lead) and a human may.
    let out = run(ctl(root)
        .env("SQUAD_AGENT", "lead")
        .args(["session", "phase", "--", &session, "quality"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    ok(run(ctl(root).args([
        "session", "gate", "--", &session, "design", "passed",
    ])));
}

/// A `squadctl mcp --http 127.0.0.1:0` server for one agent, stopped (and
/// reaped) when dropped.
pub(crate) struct HttpServer {
    child: std::process::Child,
    pub url: String,
    /// The bearer token the server wrote at start, and its file.
    pub token: String,
    pub token_file: PathBuf,
}

impl HttpServer {
    pub fn start(root: &Path, agent: &str) -> HttpServer {
        Self::start_on(root, agent, "127.0.0.1:0")
    }

    /// [`HttpServer::start`] on `addr` (e.g. the port of a stopped one).
    pub fn start_on(root: &Path, agent: &str, addr: &str) -> HttpServer {
        use std::io::BufRead;
        let mut child = ctl_root(root)
            .args(["mcp", "--agent", agent, "--http", addr])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().map(|l| l.unwrap()).unwrap_or_default();
        // Keep draining stderr so a warning never blocks or breaks the server.
        std::thread::spawn(move || lines.for_each(drop));
        let (url, token_file) = first
            .split_once("listening on ")
            .and_then(|(_, rest)| rest.trim().strip_suffix(')')?.split_once(" (token in "))
            .map(|(u, t)| (u.to_string(), PathBuf::from(t)))
            .unwrap_or_else(|| panic!("no address and token announced: {first:?}"));
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let token = std::fs::read_to_string(&token_file)
            .unwrap()
            .trim()
            .to_string();
        HttpServer {
            child,
            url,
            token,
            token_file,
        }
    }

    /// The raw HTTP answer to an `initialize` POST with extra `headers`,
    /// carrying the server's token.
    fn post_initialize(&self, headers: &str) -> String {
        self.post_initialize_as(&format!(
            "{headers}Authorization: Bearer {}\r\n",
            self.token
        ))
    }

    /// The raw HTTP answer to an `initialize` POST with exactly `headers`
    /// (and the request's own).
    pub fn post_initialize_as(&self, headers: &str) -> String {
        use std::io::{Read, Write};
        let authority = self
            .url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp");
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let mut s = std::net::TcpStream::connect(authority).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\n{headers}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let mut buf = [0u8; 4096];
        // The status line is all we need; an SSE answer stays open.
        while !answer.contains("\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        answer
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `--http`: the same tools, resources and notifications over Streamable
/// HTTP (the whole-task scenario with alice and bob on HTTP servers, the
/// lead on stdio).
#[test]
fn mcp_over_streamable_http_runs_a_whole_task() {
    let Some(python) = python() else { return };
    let (tmp, session) = project();
    let root = tmp.path();
    let _daemon = Daemon::start(root);
    let alice = HttpServer::start(root, "alice");
    let bob = HttpServer::start(root, "bob");
    let urls = serde_json::json!({"alice": alice.url, "bob": bob.url});
    let tokens = serde_json::json!({"alice": alice.token, "bob": bob.token});
    let report = client_with(&python, root, &session, "task", &urls, &tokens);
    let tools = names(&report["tools"]);
    assert!(tools.contains(&"lock_acquire"), "{tools:?}");
    assert!(!tools.contains(&"task_new"), "{tools:?}");
    for s in report["steps"].as_array().unwrap() {
        let refused = s["agent"] == "bob" && s["tool"] == "lock_acquire";
        assert_eq!(s["is_error"], refused, "{s}");
    }
    // Notifications reach an HTTP client too.
    let updates = report["updates"]["alice"].as_array().unwrap();
    assert!(
        updates.iter().any(|u| u == "squad://agent/inbox"),
        "{updates:?}"
    );
    let updates = report["updates"]["bob"].as_array().unwrap();
    assert!(
        updates.iter().any(|u| u == "squad://agent/tasks"),
        "{updates:?}"
    );
    let progress = std::fs::read_to_string(
        root.join(".squad/sessions")
            .join(&session)
            .join("role-comm-alice-task_001.md"),
    )
    .unwrap();
    assert!(progress.contains("status: completed"), "{progress}");
}

/// `--http` listens on loopback only and refuses what a web page could send:
/// a non-loopback address is refused at start with a clear error; a request
/// naming another `Host` (DNS rebinding) or carrying an `Origin` is refused.
#[test]
fn mcp_http_is_loopback_only_and_refuses_browsers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    ctl_ok(root, &["init"]);
    for addr in ["0.0.0.0:0", "192.0.2.1:8765", "[::]:0"] {
        let out = run(ctl_root(root).args(["mcp", "--agent", "alice", "--http", addr]));
        assert_eq!(code(&out), 2, "{addr}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is not a loopback address"),
            "{addr}: {}",
            stderr(&out)
        );
    }
    let out = run(ctl_root(root).args(["mcp", "--agent", "alice", "--http", "localhost"]));
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("use e.g. 127.0.0.1:8765"),
        "{}",
        stderr(&out)
    );

    let server = HttpServer::start(root, "alice");
    let authority = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let ok = server.post_initialize(&format!("Host: {authority}\r\n"));
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let rebound = server.post_initialize("Host: attacker.example\r\n");
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    let browser = server.post_initialize(&format!(
        "Host: {authority}\r\nOrigin: http://{authority}\r\n"
    ));
    assert!(browser.starts_with("HTTP/1.1 403"), "{browser}");
}
