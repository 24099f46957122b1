//! The agent commands against the session's size (issue 43 item 1): each
//! command an agent runs, through the CLI (a process per call, what an
//! agent's shell tool pays) and through `squadctl mcp` (a tool call in the
//! running server), with 0, 1,000 and 10,000 messages in the session, and
//! the floors in the same run: a durable atomic write (temporary file,
//! fsync, rename, directory fsync) in the session's file system, and the
//! start of a process (`squadctl --version`). Numbers for
//! docs/performance.md, never timed assertions.
//!
//! The session's messages are traffic the agent neither sent nor
//! receives (carol's to dave, squadd's notices to bob), as in a long
//! session; alice has one delivered message. Samples alternate between the
//! sizes (and the floors) so that a busy machine slows them alike; writes
//! are undone after each sample (a sent message removed, a lock released)
//! so that every size stays put.
//!
//! Run: `cargo bench -p squad-supervisor --bench agents`. Environment:
//! `SQUAD_BENCH_DIR` (the file system; default the system temp dir),
//! `SQUAD_BENCH_ROUNDS` (samples per command and size; default 40),
//! `SQUAD_BENCH_SIZES` (comma-separated message counts; default
//! 0,1000,10000), `SQUAD_BENCH_SQUADCTL` (the binary measured; default
//! this build's).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

#[path = "support/cpu.rs"]
mod cpu;

use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const SESSION: &str = "20240115T100000Z-bench";

/// The squadctl measured: `SQUAD_BENCH_SQUADCTL` (another build, e.g. the
/// tree before a change), else this build's.
fn exe() -> PathBuf {
    std::env::var_os("SQUAD_BENCH_SQUADCTL").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_squadctl")),
        PathBuf::from,
    )
}

fn squadctl(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(exe())
        .current_dir(root)
        .env_remove("SQUAD_SESSION")
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .args(args)
        .output()
        .unwrap()
}

/// A project whose session holds `messages` messages between other agents,
/// alice's and bob's tasks and one message delivered to alice.
fn project(base: &Path, messages: usize) -> PathBuf {
    let root = base.join(format!("m{messages}"));
    let s = root.join(".squad/sessions").join(SESSION);
    fs::create_dir_all(&s).unwrap();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::write(
        root.join(".squad/policies.yaml"),
        "notices:\n  task_ready: false\n  task_overdue: false\n  file_invalid: false\n  dependency_violation: false\n",
    )
    .unwrap();
    fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for (agent, task) in [("alice", "task_001"), ("bob", "task_002")] {
        fs::write(
            s.join(format!("role-plan-{agent}-{task}.md")),
            format!("meta:\n  task_id: {task}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\nboundaries:\n  allowed:\n    - src/**\n"),
        )
        .unwrap();
    }
    let message = |from: &str, to: &str, id: &str| {
        format!(
            "meta:\n  message_id: {id}\n  from_agent: {from}\n  to_agent: {to}\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: notification\nsubject: s {id}\nmessage: a message of a long session\n"
        )
    };
    for i in 0..messages {
        let (from, to, id) = if i % 2 == 0 {
            ("carol", "dave", format!("msg_{i:06}"))
        } else {
            ("squadd", "bob", format!("msg_squadd_task_ready_{i:016x}"))
        };
        fs::write(
            s.join(format!("role-comm-{from}-to-{to}-{id}.md")),
            message(from, to, &id),
        )
        .unwrap();
    }
    // The recipients' inboxes, as squadd leaves them once it delivered
    // the traffic (their content is not what is measured).
    for agent in ["bob", "dave"] {
        fs::create_dir_all(s.join("inbox").join(agent).join("cur")).unwrap();
    }
    let hello = message("bob", "alice", "msg_hello");
    fs::write(s.join("role-comm-bob-to-alice-msg_hello.md"), &hello).unwrap();
    let inbox = s.join("inbox/alice/new");
    fs::create_dir_all(&inbox).unwrap();
    fs::write(
        inbox.join("2-medium-20240115T100000.000Z-msg_hello.md"),
        &hello,
    )
    .unwrap();
    root
}

/// The floor: one durable atomic write of a small file into `dir`.
fn durable_write(dir: &Path, i: usize) -> Duration {
    let t = Instant::now();
    let tmp = dir.join(format!(".floor-{i}.tmp"));
    let mut f = fs::File::create(&tmp).unwrap();
    f.write_all(&[b'x'; 300]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let to = dir.join("floor.md");
    fs::rename(&tmp, &to).unwrap();
    fs::File::open(dir).unwrap().sync_all().unwrap();
    t.elapsed()
}

/// A `squadctl mcp --agent alice` server driven over its stdio.
struct Server {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    id: u64,
}

impl Server {
    fn start(root: &Path) -> Server {
        let mut child = Command::new(exe())
            .current_dir(root)
            .env_remove("SQUAD_SESSION")
            .env_remove("SQUAD_AGENT")
            .args(["mcp", "--agent", "alice"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let to = child.stdin.take().unwrap();
        let from = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server {
            child,
            to,
            from,
            id: 0,
        };
        let init = s.rpc(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        assert!(init["result"].is_object(), "{init}");
        s
    }

    fn rpc(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let req = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        writeln!(self.to, "{req}").unwrap();
        self.to.flush().unwrap();
        loop {
            let mut line = String::new();
            assert!(self.from.read_line(&mut line).unwrap() > 0, "server closed");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == self.id {
                return v;
            }
        }
    }

    /// One tool call: its text result (asserting success).
    fn call(&mut self, tool: &str, arguments: Value) -> String {
        let r = self.rpc("tools/call", json!({"name": tool, "arguments": arguments}));
        assert_eq!(r["result"]["isError"], false, "{tool}: {r}");
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

impl Server {
    /// CPU time the server's threads have run so far (their
    /// `/proc/<pid>/task/*/schedstat`, in ns).
    fn cpu(&self) -> Duration {
        let tasks = format!("/proc/{}/task", self.child.id());
        let ns: u64 = fs::read_dir(tasks)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
                    .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        Duration::from_nanos(ns)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes the file a command's JSON output names (`path`), so that the
/// session keeps its size.
fn undo(json_text: &str) {
    if let Ok(v) = serde_json::from_str::<Value>(json_text)
        && let Some(p) = v["path"].as_str()
    {
        let _ = fs::remove_file(p);
    }
}

/// One agent command through the CLI: its arguments, and what undoes it.
struct Cli {
    name: &'static str,
    args: &'static [&'static str],
    after: fn(&Path, &str),
}

const CLI: &[Cli] = &[
    Cli {
        name: "send",
        args: &[
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
            "--json",
        ],
        after: |_, out| undo(out),
    },
    Cli {
        name: "reply",
        args: &[
            "reply",
            "msg_hello",
            "--from",
            "alice",
            "--message",
            "ok",
            "--json",
        ],
        after: |_, out| undo(out),
    },
    Cli {
        name: "progress",
        args: &[
            "progress",
            "--task",
            "task_001",
            "--status",
            "in_progress",
            "--action",
            "x",
        ],
        after: |_, _| {},
    },
    Cli {
        name: "next",
        args: &["next", "--agent", "alice", "--json"],
        after: |_, _| {},
    },
    Cli {
        name: "inbox list",
        args: &["inbox", "list", "alice", "--json"],
        after: |_, _| {},
    },
    Cli {
        name: "inbox next --peek",
        args: &["inbox", "next", "alice", "--peek", "--json"],
        after: |_, _| {},
    },
    Cli {
        name: "inbox show",
        args: &["inbox", "show", "alice", "msg_hello", "--json"],
        after: |_, _| {},
    },
    Cli {
        name: "lock acquire",
        args: &[
            "lock", "acquire", "src/a.rs", "--agent", "alice", "--task", "task_001", "--ttl", "1h",
        ],
        after: |root, _| {
            let out = squadctl(root, &["lock", "release", "src/a.rs", "--agent", "alice"]);
            assert!(out.status.success());
        },
    },
];

/// One MCP tool call: its name, arguments, and whether it writes a file
/// to remove afterwards.
const TOOLS: &[(&str, &str, bool)] = &[
    ("inbox_list", "{}", false),
    (
        "send",
        r#"{"to": "bob", "priority": "medium", "type": "notification", "subject": "s", "message": "m"}"#,
        true,
    ),
    ("progress", r#"{"task": "task_001", "action": "y"}"#, false),
    ("next", "{}", false),
];

/// p50 and p99 in ms.
fn summary(samples: &mut [Duration]) -> (f64, f64) {
    (cpu::pct(samples, 0.5), cpu::pct(samples, 0.99))
}

fn main() {
    let rounds: usize = std::env::var("SQUAD_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let sizes: Vec<usize> = std::env::var("SQUAD_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![0, 1_000, 10_000]);
    let tmp = match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let roots: Vec<PathBuf> = sizes.iter().map(|&n| project(tmp.path(), n)).collect();
    let floor_dir = tmp.path().join("floor");
    fs::create_dir_all(&floor_dir).unwrap();
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "agent commands vs messages in the session ({rounds} samples each; load average at start: {})",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );

    // Floors, alternated with everything else below.
    let (mut write_floor, mut start_floor, mut start_cpu) = (Vec::new(), Vec::new(), Vec::new());
    let mut n_floor = 0usize;
    let mut floors = |wf: &mut Vec<Duration>, sf: &mut Vec<Duration>, sc: &mut Vec<Duration>| {
        n_floor += 1;
        wf.push(durable_write(&floor_dir, n_floor));
        let (wall, used) = cpu::measure(|| {
            assert!(squadctl(&floor_dir, &["--version"]).status.success());
        });
        sf.push(wall);
        sc.push(used);
    };

    // CLI: per command, sizes alternated sample by sample.
    let mut cli: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); sizes.len()]; CLI.len()];
    let mut cli_cpu = cli.clone();
    for _ in 0..rounds {
        for (c, cmd) in CLI.iter().enumerate() {
            for (k, root) in roots.iter().enumerate() {
                let mut out = None;
                let (wall, used) = cpu::measure(|| out = Some(squadctl(root, cmd.args)));
                let out = out.unwrap();
                cli[c][k].push(wall);
                cli_cpu[c][k].push(used);
                assert!(
                    out.status.success(),
                    "{}: {}",
                    cmd.name,
                    String::from_utf8_lossy(&out.stderr)
                );
                (cmd.after)(root, &String::from_utf8_lossy(&out.stdout));
            }
            floors(&mut write_floor, &mut start_floor, &mut start_cpu);
        }
    }

    // MCP: one server per size, calls alternated the same way.
    let mut servers: Vec<Server> = roots.iter().map(|r| Server::start(r)).collect();
    let mut mcp: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); sizes.len()]; TOOLS.len()];
    let mut mcp_cpu = mcp.clone();
    for _ in 0..rounds {
        for (c, (tool, args, writes)) in TOOLS.iter().enumerate() {
            for (k, server) in servers.iter_mut().enumerate() {
                let (t, c0) = (Instant::now(), server.cpu());
                let text = server.call(tool, serde_json::from_str(args).unwrap());
                mcp[c][k].push(t.elapsed());
                mcp_cpu[c][k].push(server.cpu().saturating_sub(c0));
                if *writes {
                    undo(&text);
                }
            }
            floors(&mut write_floor, &mut start_floor, &mut start_cpu);
        }
    }
    drop(servers);

    let (wf50, wf99) = summary(&mut write_floor);
    let (sf50, sf99) = summary(&mut start_floor);
    let (sc50, _) = summary(&mut start_cpu);
    println!("floor: durable atomic write   wall p50 {wf50:>7.2} ms  p99 {wf99:>7.2} ms");
    println!(
        "floor: squadctl --version     wall p50 {sf50:>7.2} ms  p99 {sf99:>7.2} ms  CPU p50 {sc50:>6.2} ms"
    );
    let header = sizes
        .iter()
        .map(|n| format!("{n:>6} msgs: wall p50 / p99, CPU p50 (x empty)"))
        .collect::<Vec<_>>()
        .join(" | ");
    println!("{:<22} {header}", "command");
    let row = |what: String, wall: &mut [Vec<Duration>], used: &mut [Vec<Duration>]| {
        let stats: Vec<(f64, f64, f64)> = wall
            .iter_mut()
            .zip(used.iter_mut())
            .map(|(w, u)| {
                let (p50, p99) = summary(w);
                (p50, p99, summary(u).0)
            })
            .collect();
        let (base, base_cpu) = (stats[0].0, stats[0].2);
        let cells = stats
            .iter()
            .map(|(p50, p99, c50)| {
                format!(
                    "{p50:>7.2} / {p99:>7.2} ms ({:.2}x), CPU {c50:>6.2} ms ({:.2}x)",
                    p50 / base,
                    c50 / base_cpu
                )
            })
            .collect::<Vec<_>>()
            .join(" | ");
        println!("{what:<22} {cells}");
    };
    for (c, cmd) in CLI.iter().enumerate() {
        row(format!("cli {}", cmd.name), &mut cli[c], &mut cli_cpu[c]);
    }
    for (c, (tool, _, _)) in TOOLS.iter().enumerate() {
        row(format!("mcp {tool}"), &mut mcp[c], &mut mcp_cpu[c]);
    }
}
