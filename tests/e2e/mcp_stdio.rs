//! `squadctl mcp` on stdio spoken to line by line, as a careless or hostile
//! client would: calls it cancels by the hundred, a client that leaves with
//! calls in flight, a message larger than any tool needs (docs/mcp.md,
//! docs/security.md "An MCP client").

use crate::support::*;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A `squadctl mcp` child with a reader thread turning its stdout into
/// JSON values.
struct RawMcp {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Value>,
}

impl RawMcp {
    /// Starts the server for `agent` in `root` and initializes it.
    fn start(root: &Path, agent: &str) -> RawMcp {
        let mut child = ctl(root)
            .args(["mcp", "--agent", agent])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let mut mcp = RawMcp {
            stdin: child.stdin.take(),
            child,
            out,
        };
        mcp.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        mcp.answer(0);
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    /// Writes one message as a line.
    fn send(&mut self, v: &Value) {
        self.send_raw(format!("{v}\n").as_bytes());
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Calls `tool` as request `id`.
    fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    /// The answer to request `id` (other messages are passed over).
    fn answer(&self, id: u64) -> Value {
        let start = Instant::now();
        loop {
            let left = Duration::from_secs(30).saturating_sub(start.elapsed());
            match self.out.recv_timeout(left) {
                Ok(v) if v["id"] == id => return v,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no answer to request {id}"),
                Err(RecvTimeoutError::Disconnected) => panic!("the server left, {id} unanswered"),
            }
        }
    }
}

impl Drop for RawMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project in which bob's only task waits on alice's: bob's `next` with
/// a wait waits.
fn project() -> (tempfile::TempDir, String) {
    crate::mcp::project()
}

/// An MCP client may not exhaust the server with calls it gave up on:
/// 520 `next` waits of ten minutes, each cancelled at once, and the next
/// call is still answered. Before issue 39 a cancelled wait kept its thread
/// for its whole time; past 512 the server answered nothing more.
#[test]
fn mcp_cancelled_waits_end_and_the_server_keeps_answering() {
    let (tmp, _session) = project();
    let mut mcp = RawMcp::start(tmp.path(), "bob");
    for id in 1..=520 {
        mcp.call(id, "next", json!({"wait": "10m"}));
        mcp.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "gave up"}}),
        );
    }
    mcp.call(1000, "lock_list", json!({}));
    let answer = mcp.answer(1000);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

/// An MCP client that leaves may not leave its server running: with two
/// ten-minute waits in flight (one cancelled), closing stdin ends the
/// process. Before issue 39 it lived on until the waits' time was up.
#[test]
fn mcp_server_ends_when_its_client_leaves() {
    let (tmp, _session) = project();
    let mut mcp = RawMcp::start(tmp.path(), "bob");
    mcp.call(1, "next", json!({"wait": "10m"}));
    mcp.call(2, "inbox_read", json!({"wait": "10m"}));
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2}}),
    );
    // Both calls are under way (a third is answered after them).
    mcp.call(3, "lock_list", json!({}));
    mcp.answer(3);
    drop(mcp.stdin.take());
    let status = crate::daemon::eventually("the server exits", || mcp.child.try_wait().unwrap());
    assert!(status.code().is_some(), "{status:?}");
}

/// An MCP client may not be left without an answer: a message larger than
/// the server reads (4 MiB) is answered with a JSON-RPC error for its id
/// naming the limit, and the next message is read as usual. Before issue
/// 39 a 16 MiB argument got no answer at all.
#[test]
fn mcp_an_over_large_message_is_answered_with_an_error() {
    let (tmp, _session) = project();
    let mut mcp = RawMcp::start(tmp.path(), "alice");
    let body = "x".repeat(17 * 1024 * 1024);
    mcp.call(
        5,
        "send",
        json!({"to": "bob", "priority": "low", "type": "notification",
            "subject": "big", "message": body}),
    );
    let answer = mcp.answer(5);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("over the limit of 4194304 bytes"),
        "{answer}"
    );
    mcp.call(6, "lock_list", json!({}));
    assert_eq!(mcp.answer(6)["result"]["isError"], false);
}
