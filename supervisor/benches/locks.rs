//! Uncontended `squadctl lock acquire` + `lock release` through the CLI,
//! process start included: what an agent's shell tool pays per lock.
//!
//! Run: `cargo bench -p squad-supervisor --bench locks` (`SQUAD_BENCH_DIR`
//! picks the file system, e.g. /dev/shm).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

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
    let mut times: Vec<Duration> = Vec::new();
    for i in 0..200 {
        let target = format!("src/file{}.rs", i % 10);
        let start = Instant::now();
        run(&[
            "lock", "acquire", &target, "--agent", "dev", "--task", "task_1",
        ]);
        run(&["lock", "release", &target, "--agent", "dev"]);
        times.push(start.elapsed());
    }
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    println!(
        "lock acquire + release through the CLI (2 processes): n={} p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        times.len(),
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    // The floor: starting the binary twice, doing nothing.
    let mut floor: Vec<Duration> = (0..200)
        .map(|_| {
            let start = Instant::now();
            run(&["--version"]);
            run(&["--version"]);
            start.elapsed()
        })
        .collect();
    floor.sort();
    println!(
        "floor: two `squadctl --version` processes: p50 {:.2} ms",
        floor[100].as_secs_f64() * 1e3
    );
}
