//! Latency of an MCP tool call of `squadctl mcp` against the same command run
//! as a process (issue 29). Numbers for docs/performance.md, never timed
//! assertions.
//!
//! The server is driven over its stdio with newline-delimited JSON-RPC, as
//! an agent host does: `initialize`, then rounds of `tools/call` for
//! `task_list` (a read) and `progress` (a validated atomic write). The CLI
//! side spawns `squadctl task list --json` / `squadctl progress` each round,
//! what an agent with a shell pays.
//!
//! Run: `cargo bench -p squad-supervisor --bench mcp`. Environment:
//! `SQUAD_BENCH_DIR` (default the system temp dir), `SQUAD_BENCH_ROUNDS`
//! (default 200).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn squadctl(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_squadctl"))
        .current_dir(root)
        .env_remove("SQUAD_SESSION")
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .args(args)
        .output()
        .unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn report(what: &str, mut us: Vec<f64>) {
    us.sort_by(f64::total_cmp);
    println!(
        "{what:<34} n={:<4} p50 {:>8.0} us  p99 {:>8.0} us",
        us.len(),
        percentile(&us, 0.5),
        percentile(&us, 0.99)
    );
}

fn main() {
    let rounds: usize = std::env::var("SQUAD_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let tmp = match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = tmp.path();
    assert!(squadctl(root, &["init"]).status.success());
    assert!(
        squadctl(root, &["session", "new", "--slug", "bench"])
            .status
            .success()
    );
    for i in 0..20 {
        let agent = if i == 0 { "alice" } else { "bob" };
        let out = squadctl(
            root,
            &[
                "task",
                "new",
                "--agent",
                agent,
                "--instruction",
                "work",
                "--allow",
                "src/**",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let mut server = Command::new(env!("CARGO_BIN_EXE_squadctl"))
        .current_dir(root)
        .args(["mcp", "--agent", "alice"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to = server.stdin.take().unwrap();
    let mut from = BufReader::new(server.stdout.take().unwrap());
    let mut id = 0u64;
    let mut rpc = |method: &str, params: serde_json::Value| -> serde_json::Value {
        id += 1;
        let req =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(to, "{req}").unwrap();
        to.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(from.read_line(&mut line).unwrap() > 0, "server closed");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    let init = rpc(
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    );
    assert!(init["result"].is_object(), "{init}");

    let (mut mcp_read, mut mcp_write, mut cli_read, mut cli_write) =
        (vec![], vec![], vec![], vec![]);
    for i in 0..rounds {
        let t = Instant::now();
        let r = rpc(
            "tools/call",
            serde_json::json!({"name": "task_list", "arguments": {}}),
        );
        mcp_read.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(r["result"]["isError"], false, "{r}");

        let t = Instant::now();
        let out = squadctl(root, &["task", "list", "--json"]);
        cli_read.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(out.status.success());

        let action = format!("step {i}");
        let t = Instant::now();
        let r = rpc(
            "tools/call",
            serde_json::json!({"name": "progress", "arguments": {"task": "task_001", "status": "in_progress", "action": action}}),
        );
        mcp_write.push(t.elapsed().as_secs_f64() * 1e6);
        assert_eq!(r["result"]["isError"], false, "{r}");

        let t = Instant::now();
        let out = squadctl(
            root,
            &[
                "progress", "--agent", "alice", "--task", "task_001", "--action", &action,
            ],
        );
        cli_write.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    report("mcp tools/call task_list", mcp_read);
    report("cli squadctl task list --json", cli_read);
    report("mcp tools/call progress", mcp_write);
    report("cli squadctl progress", cli_write);
    let _ = server.kill();
    let _ = server.wait();
}
