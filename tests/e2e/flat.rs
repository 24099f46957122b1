//! Agent commands cost the same however many messages and notices the
//! session holds (issue 43 item 1). Counted the way it breaks: every file
//! the real `squadctl` opens (strace), for each agent command and MCP tool,
//! in two projects that differ only in the session's traffic between other
//! agents (10 messages or 1,000, half of them squadd's notices). Before
//! the fix, `send` and every command resolving its session parsed every
//! message of the session, and `inbox list` read them all again.

use crate::support::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const SESSION: &str = "20240115T100000Z-flat";

/// A session in which alice has `task_alice` (`src/**`) and bob `task_bob`, no
/// notices, one message from bob delivered to alice (`msg_hello`), and
/// `traffic` messages alice neither sent nor receives: carol's to dave and
/// squadd's notices to bob.
fn project(traffic: usize) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let s = two_agent_session(root, SESSION);
    write_plan(
        &s,
        "task_alice",
        "alice",
        "boundaries:\n  allowed:\n    - src/**\n",
    );
    write_policy(root, NO_NOTICES);
    let message = |from: &str, to: &str, id: &str| {
        format!(
            "meta:\n  message_id: {id}\n  from_agent: {from}\n  to_agent: {to}\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: notification\nsubject: s {id}\nmessage: m\n"
        )
    };
    for i in 0..traffic {
        let (from, to, id) = if i % 2 == 0 {
            ("carol", "dave", format!("msg_{i:05}"))
        } else {
            ("squadd", "bob", format!("msg_squadd_task_ready_{i:016x}"))
        };
        fs::write(
            s.join(format!("role-comm-{from}-to-{to}-{id}.md")),
            message(from, to, &id),
        );
    }
    let hello = message("bob", "alice", "msg_hello");
    fs::write(s.join("role-comm-bob-to-alice-msg_hello.md"), &hello);
    let created = chrono::DateTime::parse_from_rfc3339("2024-01-15T10:00:00Z")
        .unwrap()
        .to_utc();
    let name = squad_policies::messages::inbox_name(
        squad_protocol::model::Priority::Medium,
        created,
        "msg_hello",
    );
    fs::write(s.join("inbox/alice/new").join(name), &hello);
    tmp
}

/// `std::fs::write` creating the parent directory.
mod fs {
    pub fn write(path: impl AsRef<std::path::Path>, text: impl AsRef<[u8]>) {
        let path = path.as_ref();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// The files opened in a trace of `strace -f -e trace=open,openat`, in
/// order; the kernel's own files aside (glibc's malloc reads
/// `/proc/sys/vm/overcommit_memory` when a thread's arena is first
/// trimmed, or not, as the threads happen to run: not the session's size).
fn opened(trace: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(trace).unwrap();
    text.lines()
        .filter_map(|l| {
            let call = l.split_once(' ').map_or(l, |(_, r)| r).trim_start();
            let args = call
                .strip_prefix("openat(")
                .or_else(|| call.strip_prefix("open("))?;
            Some(args.split('"').nth(1).unwrap_or("?").to_string())
        })
        .filter(|path| !path.starts_with("/proc/") && !path.starts_with("/sys/"))
        .collect()
}

/// `squadctl ARGS` in `root` under strace: its exit code and the files it
/// opened.
fn traced(strace: &str, root: &Path, args: &[&str]) -> (i32, String, Vec<String>) {
    let trace = root.join(".squad/run/ctl.strace");
    let out = run(Command::new(strace)
        .current_dir(root)
        .args(["-f", "-qq", "-e", "trace=open,openat", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_squadctl"))
        .args(args)
        .env_remove("SQUAD_SESSION")
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK"));
    let files = opened(&trace);
    std::fs::remove_file(&trace).unwrap();
    (code(&out), stderr(&out), files)
}

/// `squadctl mcp --agent alice` in `root` under strace, driven over its
/// stdio (newline-delimited JSON-RPC: `initialize`, then one `tools/call`
/// of `tool` with `arguments`): whether the call succeeded and the files
/// the server opened.
fn traced_tool(strace: &str, root: &Path, tool: &str, arguments: Value) -> (bool, Vec<String>) {
    let trace = root.join(".squad/run/mcp.strace");
    let mut server = Command::new(strace)
        .current_dir(root)
        .args(["-f", "-qq", "-e", "trace=open,openat", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_squadctl"))
        .args(["mcp", "--agent", "alice"])
        .env_remove("SQUAD_SESSION")
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to = server.stdin.take().unwrap();
    let mut from = BufReader::new(server.stdout.take().unwrap());
    let mut call = |id: u64, method: &str, params: Value| -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(to, "{req}").unwrap();
        to.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(from.read_line(&mut line).unwrap() > 0, "the server closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let init = call(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}}),
    );
    assert!(init["result"].is_object(), "{init}");
    let r = call(
        2,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    );
    drop(to);
    assert!(server.wait().unwrap().success());
    let files = opened(&trace);
    std::fs::remove_file(&trace).unwrap();
    (r["result"]["isError"] == false, files)
}

/// What differs between two lists of opened files, for a failure message.
fn extra(small: &[String], big: &[String]) -> String {
    let mut more: Vec<&String> = big.iter().filter(|f| !small.contains(f)).collect();
    let n = more.len();
    more.truncate(8);
    format!("{n} more, e.g. {more:#?}")
}

#[test]
fn agent_commands_open_as_many_files_with_1000_messages_as_with_10() {
    let Some(strace) = crate::notices::strace() else {
        return;
    };
    let (small, big) = (project(10), project(1000));
    let commands: &[&[&str]] = &[
        &[
            "send",
            "--from",
            "alice",
            "--to",
            "bob",
            "--type",
            "question",
            "--subject",
            "s",
            "--message",
            "m",
        ],
        &[
            "send",
            "--from",
            "alice",
            "--to",
            "bob",
            "--task",
            "task_bob",
            "--type",
            "request",
            "--subject",
            "s",
            "--message",
            "m",
        ],
        &[
            "progress",
            "--task",
            "task_alice",
            "--status",
            "in_progress",
            "--action",
            "x",
        ],
        &["next", "--agent", "alice", "--json"],
        &["inbox", "list", "alice", "--json"],
        &["inbox", "list", "alice"],
        &["inbox", "next", "alice", "--peek", "--json"],
        &["inbox", "show", "alice", "msg_hello", "--json"],
        // After the inbox commands: a reply acknowledges the message it
        // answers (issue 40), and `inbox next` would find nothing unread.
        &["reply", "msg_hello", "--from", "alice", "--message", "ok"],
        &["task", "list", "--json"],
        &[
            "lock",
            "acquire",
            "src/a.rs",
            "--agent",
            "alice",
            "--task",
            "task_alice",
            "--ttl",
            "1h",
        ],
        &[
            "report-error",
            "--agent",
            "alice",
            "--severity",
            "warning",
            "--type",
            "build",
            "--message",
            "x",
        ],
    ];
    for args in commands {
        let (code_small, err_small, opened_small) = traced(strace, small.path(), args);
        let (code_big, err_big, opened_big) = traced(strace, big.path(), args);
        assert_eq!(code_small, 0, "{args:?}: {err_small}");
        assert_eq!(code_big, 0, "{args:?}: {err_big}");
        assert_eq!(
            opened_big.len(),
            opened_small.len(),
            "{args:?} opened {} files with 1,000 messages, {} with 10: {}",
            opened_big.len(),
            opened_small.len(),
            extra(&opened_small, &opened_big)
        );
    }
    let tools: &[(&str, Value)] = &[
        ("inbox_list", json!({})),
        (
            "send",
            json!({"to": "bob", "priority": "medium", "type": "notification", "subject": "s", "message": "m"}),
        ),
        ("next", json!({})),
        ("progress", json!({"task": "task_alice", "action": "y"})),
    ];
    for (tool, arguments) in tools {
        let (ok_small, opened_small) = traced_tool(strace, small.path(), tool, arguments.clone());
        let (ok_big, opened_big) = traced_tool(strace, big.path(), tool, arguments.clone());
        assert!(ok_small && ok_big, "{tool} failed");
        assert_eq!(
            opened_big.len(),
            opened_small.len(),
            "MCP {tool} opened {} files with 1,000 messages, {} with 10: {}",
            opened_big.len(),
            opened_small.len(),
            extra(&opened_small, &opened_big)
        );
    }
}
