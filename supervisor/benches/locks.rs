//! Uncontended `squadctl lock acquire` + `lock release` through the CLI,
//! process start included: what an agent's shell tool pays per lock.
//!
//! Run: `cargo bench -p squad-supervisor --bench locks` (`SQUAD_BENCH_DIR`
//! picks the file system, e.g. /dev/shm).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

#[path = "support/cpu.rs"]
mod cpu;

use std::fs;
use std::process::Command;

fn main() {
    let tmp = match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = tmp.path();
    let s = root.join(".squad/sessions/20240115T100000Z");
    fs::create_dir_all(&s).unwrap();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::write(
        s.join("role-plan-dev-task_1.md"),
        "meta:\n  task_id: task_1\n  agent: dev\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\nboundaries:\n  allowed:\n    - src/**\n",
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_squadctl");
    let run = |args: &[&str]| {
        let out = Command::new(exe)
            .current_dir(root)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // Interleaved with the floor (two `squadctl --version` starts), so that
    // the machine's load moves both alike; wall clock and CPU time.
    let (mut wall, mut cpu, mut floor_wall, mut floor_cpu) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..200 {
        let target = format!("src/file{}.rs", i % 10);
        let (w, c) = cpu::measure(|| {
            run(&[
                "lock", "acquire", &target, "--agent", "dev", "--task", "task_1",
            ]);
            run(&["lock", "release", &target, "--agent", "dev"]);
        });
        wall.push(w);
        cpu.push(c);
        let (w, c) = cpu::measure(|| {
            run(&["--version"]);
            run(&["--version"]);
        });
        floor_wall.push(w);
        floor_cpu.push(c);
    }
    let (fw, fc) = (
        cpu::pct(&mut floor_wall, 0.5),
        cpu::pct(&mut floor_cpu, 0.5),
    );
    println!(
        "lock acquire + release through the CLI (2 processes): n={} wall p50 {:.2} ms p99 {:.2} ms max {:.2} ms; CPU p50 {:.2} ms p99 {:.2} ms",
        wall.len(),
        cpu::pct(&mut wall, 0.5),
        cpu::pct(&mut wall, 0.99),
        cpu::pct(&mut wall, 1.0),
        cpu::pct(&mut cpu, 0.5),
        cpu::pct(&mut cpu, 0.99),
    );
    println!(
        "floor: two `squadctl --version` processes: wall p50 {fw:.2} ms, CPU p50 {fc:.2} ms; ours/floor p50: wall {:.2}x, CPU {:.2}x (target 1.5x)",
        cpu::pct(&mut wall, 0.5) / fw,
        cpu::pct(&mut cpu, 0.5) / fc,
    );
}
