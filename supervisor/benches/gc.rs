//! `squadctl gc` over 10,000 sessions (a quarter each: completed long ago,
//! completed recently, failed long ago, active), through the real binary:
//! the dry-run plan, then the real run.
//!
//! Run: `cargo bench -p squad-supervisor --bench gc` (`SQUAD_BENCH_DIR`
//! picks the file system).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::fs;
use std::process::Command;
use std::time::Instant;

fn main() {
    let n: usize = std::env::var("SQUAD_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let tmp = match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    for i in 0..n {
        let dir = root.join(format!(".squad/sessions/20240101T{i:06}Z"));
        fs::create_dir_all(&dir).unwrap();
        let status = match i % 4 {
            0 => "status: completed\ncompleted_at: 2024-01-02T00:00:00Z\n",
            1 => "status: completed\ncompleted_at: 2024-06-01T11:00:00Z\n",
            2 => "status: failed\nfailed_at: 2024-01-02T00:00:00Z\n",
            _ => "status: active\n",
        };
        fs::write(
            dir.join("session-status.md"),
            format!("session_id: sess_{i}\nstarted_at: 2024-01-01T00:00:00Z\n{status}"),
        )
        .unwrap();
        fs::create_dir_all(dir.join("artifacts")).unwrap();
        fs::write(dir.join("artifacts/out.txt"), "x").unwrap();
    }
    let exe = env!("CARGO_BIN_EXE_squadctl");
    for (label, args) in [
        (
            "dry run",
            vec!["gc", "--dry-run", "--json", "--now", "2024-06-01T12:00:00Z"],
        ),
        (
            "real run",
            vec!["gc", "--json", "--now", "2024-06-01T12:00:00Z"],
        ),
    ] {
        let start = Instant::now();
        let out = Command::new(exe)
            .current_dir(root)
            .args(&args)
            .output()
            .unwrap();
        let took = start.elapsed();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        println!(
            "gc over {n} sessions, {label}: {:.0} ms ({} actions)",
            took.as_secs_f64() * 1e3,
            v["plan"]["actions"].as_array().map_or(0, Vec::len)
        );
    }
}
