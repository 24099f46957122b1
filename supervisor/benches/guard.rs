//! One `squadctl guard` call, process start included: what every tool call
//! of an agent pays before it runs. Measures a realistic project (10
//! sessions of 8 tasks each, 20 live locks) for the decisions a session
//! sends most: a read, an allowed write, a locked write, a shell command.
//!
//! Run: `cargo bench -p squad-supervisor --bench guard`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

#[path = "support/cpu.rs"]
mod cpu;

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};

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
    // Every case interleaved with the floor (one `squadctl --version`
    // start), so that the machine's load moves them alike; wall clock and
    // CPU time.
    let n = 300;
    let answers: Vec<Vec<u8>> = cases.iter().map(|(_, input)| call(input)).collect();
    let mut wall = vec![Vec::new(); cases.len()];
    let mut cpu_t = vec![Vec::new(); cases.len()];
    let (mut floor_wall, mut floor_cpu) = (Vec::new(), Vec::new());
    for _ in 0..n {
        for (k, (_, input)) in cases.iter().enumerate() {
            let (w, c) = cpu::measure(|| {
                call(input);
            });
            wall[k].push(w);
            cpu_t[k].push(c);
        }
        let (w, c) = cpu::measure(|| {
            Command::new(exe).arg("--version").output().unwrap();
        });
        floor_wall.push(w);
        floor_cpu.push(c);
    }
    let (fw, fc) = (
        cpu::pct(&mut floor_wall, 0.5),
        cpu::pct(&mut floor_cpu, 0.5),
    );
    for (k, (name, _)) in cases.iter().enumerate() {
        let (w50, c50) = (cpu::pct(&mut wall[k], 0.5), cpu::pct(&mut cpu_t[k], 0.5));
        println!(
            "guard, {name}: n={n} wall p50 {w50:.2} ms p99 {:.2} ms; CPU p50 {c50:.2} ms; ours/floor p50: wall {:.2}x, CPU {:.2}x ({})",
            cpu::pct(&mut wall[k], 0.99),
            w50 / fw,
            c50 / fc,
            if answers[k].is_empty() {
                "allowed"
            } else {
                "denied"
            }
        );
    }
    println!(
        "floor (squadctl --version): wall p50 {fw:.2} ms p99 {:.2} ms; CPU p50 {fc:.2} ms (target: guard within 1.3x)",
        cpu::pct(&mut floor_wall, 0.99),
    );
}
