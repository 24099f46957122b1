//! `squadctl mcp --http` as agent CLIs reach it (issue 39 item 2): `mcp
//! install --http` gives each CLI the way to read the running server's
//! token (never the token itself, which is new at every start), and a
//! connection is its server's agent, whatever it asks for.

use crate::daemon::Daemon;
use crate::mcp::HttpServer;
use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// `Host: …\r\n` for `server`, plus `Authorization: <auth>` when given.
fn headers(server: &HttpServer, auth: Option<&str>) -> String {
    let authority = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut h = format!("Host: {authority}\r\n");
    if let Some(a) = auth {
        h.push_str(&format!("Authorization: {a}\r\n"));
    }
    h
}

/// The status line of `server`'s answer to an `initialize` with `auth`.
fn status(server: &HttpServer, auth: Option<&str>) -> String {
    let answer = server.post_initialize_as(&headers(server, auth));
    answer.lines().next().unwrap_or_default().to_string()
}

/// What Claude Code's `headersHelper` prints, run as Claude Code runs it
/// (by the shell), from another directory and with none of the squad
/// variables set.
fn run_helper(helper: &str, cwd: &Path) -> std::process::Output {
    run(std::process::Command::new("sh")
        .arg("-c")
        .arg(helper)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin"))
}

#[test]
fn mcp_install_http_gives_each_cli_the_running_servers_token() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    ctl_ok(&root, &["init"]);
    let server = HttpServer::start(&root, "alice");
    let install = |agent: Option<&str>, url: &str, clis: &[&str]| {
        let mut cmd = ctl(&root);
        cmd.env("HOME", &home).env_remove("CODEX_HOME").arg("mcp");
        if let Some(a) = agent {
            cmd.args(["--agent", a]);
        }
        run(cmd.args(["install", "--json", "--http", url]).args(clis))
    };
    let out = install(
        Some("alice"),
        &server.url,
        &["--claude", "--codex", "--gemini"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        report
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["url"] == server.url.as_str()),
        "{report}"
    );
    // No configuration file holds the token: it is read at connection.
    for file in [
        root.join(".mcp.json"),
        root.join(".codex/config.toml"),
        root.join(".gemini/settings.json"),
    ] {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&server.token), "{}: {text}", file.display());
    }

    // Claude Code: an HTTP entry whose headersHelper prints the header.
    let claude: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    let entry = &claude["mcpServers"]["squad"];
    assert_eq!(entry["type"], "http", "{entry}");
    assert_eq!(entry["url"], server.url.as_str(), "{entry}");
    let helper = entry["headersHelper"].as_str().unwrap().to_string();
    let out = run_helper(&helper, &home);
    assert_eq!(code(&out), 0, "{helper}: {}", stderr(&out));
    let given: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let bearer = format!("Bearer {}", server.token);
    assert_eq!(given, serde_json::json!({"Authorization": bearer}));
    let auth = given["Authorization"].as_str().unwrap();
    assert_eq!(status(&server, Some(auth)), "HTTP/1.1 200 OK");

    // Codex and Gemini CLI: the token from SQUAD_MCP_TOKEN, which `mcp
    // token` prints.
    let codex = std::fs::read_to_string(root.join(".codex/config.toml")).unwrap();
    assert!(
        codex.contains(&format!(
            "[mcp_servers.squad]\nurl = \"{}\"\nbearer_token_env_var = \"SQUAD_MCP_TOKEN\"\n",
            server.url
        )),
        "{codex}"
    );
    let gemini: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".gemini/settings.json")).unwrap())
            .unwrap();
    let entry = &gemini["mcpServers"]["squad"];
    assert_eq!(entry["httpUrl"], server.url.as_str(), "{entry}");
    assert_eq!(
        entry["headers"]["Authorization"], "Bearer $SQUAD_MCP_TOKEN",
        "{entry}"
    );
    let printed = ctl_ok(&root, &["mcp", "--agent", "alice", "token", &server.url]);
    assert_eq!(printed.trim(), server.token);

    // A restart on the same port makes a new token; the same entry reads
    // it, and the old one opens nothing.
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_string();
    let (url, old) = (server.url.clone(), server.token.clone());
    drop(server);
    let again = HttpServer::start_on(&root, "alice", &format!("127.0.0.1:{port}"));
    assert_eq!(again.url, url);
    assert_ne!(again.token, old);
    let out = run_helper(&helper, &home);
    let given: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(given["Authorization"], format!("Bearer {}", again.token));
    assert_eq!(
        status(&again, Some(&format!("Bearer {old}"))),
        "HTTP/1.1 401 Unauthorized"
    );
    // bob has no server on that port: no token for him.
    let out = run(ctl(&root).args(["mcp", "--agent", "bob", "token", &url]));
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("bob-"), "{}", stderr(&out));

    // Refused, changing nothing: Copilot CLI (fixed headers only), no
    // agent, a URL that is not a loopback server's.
    let (project, user) = (snapshot(&root), snapshot(&home));
    for (agent, url, clis, says) in [
        (
            Some("alice"),
            url.as_str(),
            &["--copilot", "--user"][..],
            "Copilot CLI takes fixed headers only",
        ),
        (
            Some("alice"),
            url.as_str(),
            &["--claude", "--copilot", "--user"][..],
            "Copilot CLI takes fixed headers only",
        ),
        (None, url.as_str(), &["--claude"][..], "name the agent"),
        (
            Some("alice"),
            "http://192.0.2.1:8765/mcp",
            &["--claude"][..],
            "not the URL of a loopback server",
        ),
        (
            Some("alice"),
            "http://127.0.0.1/mcp",
            &["--claude"][..],
            "not the URL of a loopback server",
        ),
    ] {
        let out = install(agent, url, clis);
        assert_ne!(code(&out), 0, "{clis:?} {url}");
        assert!(
            stderr(&out).contains(says),
            "{clis:?} {url}: {}",
            stderr(&out)
        );
    }
    assert!(
        snapshot(&root) == project && snapshot(&home) == user,
        "a refused install wrote"
    );
}

/// A connection to alice's server is alice, whatever it asks: a client
/// holding her token cannot send as bob, read or acknowledge bob's inbox,
/// or lock for bob's task; her token does not open bob's server (nor his
/// hers); a request without a token, or with a previous start's, is
/// refused before any tool runs.
#[test]
fn mcp_http_a_connection_cannot_act_as_another_agent() {
    let Some(python) = crate::mcp::python() else {
        return;
    };
    let (tmp, session) = crate::mcp::project();
    let root = tmp.path();
    let _daemon = Daemon::start(root);
    let alice = HttpServer::start(root, "alice");
    let bob = HttpServer::start(root, "bob");
    let unauthorized = "HTTP/1.1 401 Unauthorized";
    for (server, auth, what) in [
        (
            &bob,
            Some(format!("Bearer {}", alice.token)),
            "alice's token at bob's server",
        ),
        (
            &alice,
            Some(format!("Bearer {}", bob.token)),
            "bob's token at alice's server",
        ),
        (&bob, None, "no token"),
    ] {
        assert_eq!(status(server, auth.as_deref()), unauthorized, "{what}");
    }

    let urls = serde_json::json!({"alice": alice.url, "bob": bob.url});
    let tokens = serde_json::json!({"alice": alice.token, "bob": bob.token});
    let report = crate::mcp::client_with(&python, root, &session, "impersonate", &urls, &tokens);
    let peeked = &report["bob_peek"];
    assert_eq!(peeked["from"], "alice", "sent as bob: {peeked}");
    let id = peeked["message_id"].as_str().unwrap();
    let steps = report["steps"].as_array().unwrap();
    let alice_step = |tool: &str| {
        steps
            .iter()
            .find(|s| s["agent"] == "alice" && s["tool"] == tool)
            .unwrap_or_else(|| panic!("no {tool} step: {report}"))
    };
    for tool in ["inbox_show", "inbox_ack", "lock_acquire"] {
        assert_eq!(alice_step(tool)["is_error"], true, "{}", alice_step(tool));
    }
    for tool in ["inbox_list", "inbox_read"] {
        let text = alice_step(tool)["text"].as_str().unwrap();
        assert!(
            !text.contains(id),
            "{tool} showed alice bob's message: {text}"
        );
    }
    // bob's message is still his, unread.
    let listed = &report["bob_list"]["messages"];
    let mine = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["message_id"] == id)
        .unwrap_or_else(|| panic!("bob lost his message: {listed}"));
    assert_eq!(mine["unread"], true, "{mine}");
    // No file speaks for bob.
    let dir = root.join(".squad/sessions").join(&session);
    let forged: Vec<_> = crate::worktree::walk(&dir)
        .into_iter()
        .filter(|f| f.to_string_lossy().contains("role-comm-bob-to-"))
        .collect();
    assert!(forged.is_empty(), "{forged:?}");

    // A previous start's token opens nothing after a restart.
    let port = bob
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .to_string();
    let old = bob.token.clone();
    drop(bob);
    let bob = HttpServer::start_on(root, "bob", &format!("127.0.0.1:{port}"));
    assert_eq!(status(&bob, Some(&format!("Bearer {old}"))), unauthorized);
    let fresh = format!("Bearer {}", bob.token);
    assert_eq!(status(&bob, Some(&fresh)), "HTTP/1.1 200 OK");
}
