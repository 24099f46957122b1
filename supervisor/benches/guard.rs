//! One `squadctl guard` call, process start included: what every tool call
//! of an agent pays before it runs. Measures a realistic project (10
//! sessions of 8 tasks each, 20 live locks) for the decisions a session
//! sends most: a read, an allowed write, a locked write, a shell command.
//!
//! Run: `cargo bench -p squad-supervisor --bench guard`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    for s in 0..10 {
        let dir = root.join(format!(".squad/sessions/20240115T1000{s:02}Z"));
        fs::create_dir_all(&dir).unwrap();
        for t in 0..8 {
            let (agent, task) = (format!("agent-{t}"), format!("task_{s}_{t}"));
            fs::write(
                dir.join(format!("role-plan-{agent}-{task}.md")),
                format!("meta:\n  task_id: {task}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\nboundaries:\n  allowed:\n    - area-{t}/**\n    - shared/**\n  forbidden:\n    - area-{t}/secret/**\n"),
            )
            .unwrap();
        }
    }
    let exe = env!("CARGO_BIN_EXE_squadctl");
    for t in 1..8 {
        for k in 0..3 {
            let out = Command::new(exe)
                .current_dir(root)
                .args([
                    "lock",
                    "acquire",
                    &format!("shared/f{t}_{k}.rs"),
                    "--agent",
                    &format!("agent-{t}"),
                    "--task",
                    &format!("task_9_{t}"),
                    "--ttl",
                    "1h",
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let cwd = root.display().to_string();
    let claude = |tool: &str, input: serde_json::Value| {
        serde_json::json!({"session_id": "s", "transcript_path": "/t", "cwd": cwd, "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "tool_use_id": "t"})
        .to_string()
    };
    let cases = [
        (
            "read (Read)",
            claude(
                "Read",
                serde_json::json!({"file_path": format!("{cwd}/area-0/a.rs")}),
            ),
        ),
        (
            "allowed write (Write)",
            claude(
                "Write",
                serde_json::json!({"file_path": format!("{cwd}/area-0/a.rs"), "content": "x".repeat(4096)}),
            ),
        ),
        (
            "locked write, denied (Edit)",
            claude(
                "Edit",
                serde_json::json!({"file_path": format!("{cwd}/shared/f1_0.rs"), "old_string": "a", "new_string": "b"}),
            ),
        ),
        (
            "shell command (Bash)",
            claude(
                "Bash",
                serde_json::json!({"command": "cargo test 2>&1 | tee area-0/log.txt"}),
            ),
        ),
    ];
    let call = |input: &str| {
        let mut child = Command::new(exe)
            .current_dir(root)
            .arg("guard")
            .env("SQUAD_AGENT", "agent-0")
            .env("SQUAD_TASK", "task_9_0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    for (name, input) in &cases {
        let answer = call(input);
        let mut times: Vec<Duration> = (0..300)
            .map(|_| {
                let start = Instant::now();
                call(input);
                start.elapsed()
            })
            .collect();
        times.sort();
        let pct =
            |p: f64| times[((times.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
        println!(
            "guard, {name}: n={} p50 {:.2} ms p99 {:.2} ms max {:.2} ms ({})",
            times.len(),
            pct(0.5),
            pct(0.99),
            pct(1.0),
            if answer.is_empty() {
                "allowed"
            } else {
                "denied"
            }
        );
    }
    // The floor: starting the binary, doing nothing.
    let mut floor: Vec<Duration> = (0..300)
        .map(|_| {
            let start = Instant::now();
            Command::new(exe).arg("--version").output().unwrap();
            start.elapsed()
        })
        .collect();
    floor.sort();
    println!(
        "floor (squadctl --version): p50 {:.2} ms p99 {:.2} ms",
        floor[floor.len() / 2].as_secs_f64() * 1e3,
        floor[(floor.len() - 1) * 99 / 100].as_secs_f64() * 1e3
    );
}
