//! `squadctl memory query` of a 1 MB decisions.md, process start included
//! (issue 23 item 4, issue 43 item 4), against its floors in the same run,
//! sample by sample alternated: `cat` of the file (what grep pays), one
//! `squadctl --version` start, and that start plus the in-process parse of
//! the same file (and the in-process parse + dating of every entry for
//! `--after`). Numbers, never assertions (see docs/performance.md).
//!
//! Run: `cargo bench -p squad-supervisor --bench memory`
//! (`SQUAD_BENCH_SAMPLES`, default 100 per arm; `SQUAD_BENCH_SQUADCTL`,
//! another squadctl build to measure).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

#[path = "support/cpu.rs"]
mod cpu;
#[path = "../../protocol/benches/support/memory_file.rs"]
mod memory_file;

use cpu::pct;
use squad_protocol::memory;
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let n: usize = std::env::var("SQUAD_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir_all(root.join(".squad")).unwrap();
    let src = memory_file::decisions_md(1024 * 1024);
    std::fs::write(root.join(".squad/decisions.md"), &src).unwrap();
    // `SQUAD_BENCH_SQUADCTL`: another build to measure (before/after).
    let exe = std::env::var("SQUAD_BENCH_SQUADCTL")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_squadctl").to_string());
    // Output read through a pipe, as a script or an agent's tool reads it;
    // `cat` is the grep-like floor: a process start and the file read.
    let run = |args: &[&str]| -> usize {
        let (program, args) = match args.split_first() {
            Some((&"cat", rest)) => ("cat", rest),
            _ => (exe.as_str(), args),
        };
        let out = Command::new(program)
            .current_dir(root)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout.len()
    };
    let arms: [(&str, &[&str]); 5] = [
        ("squadctl --version", &["--version"]),
        ("cat decisions.md", &["cat", ".squad/decisions.md"]),
        ("memory query (every entry)", &["memory", "query"]),
        (
            "memory query --after 2026-06-01 (dates every entry)",
            &["memory", "query", "--after", "2026-06-01"],
        ),
        ("memory query --json", &["memory", "query", "--json"]),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); arms.len()];
    let mut cpu_t: Vec<Vec<Duration>> = vec![Vec::new(); arms.len()];
    let mut parse = Vec::new();
    let mut parse_dated = Vec::new();
    let mut out_bytes = vec![0; arms.len()];
    // Interleaved, so that the machine's load moves every arm alike.
    for _ in 0..n {
        for (k, (_, args)) in arms.iter().enumerate() {
            let (w, c) = cpu::measure(|| out_bytes[k] = run(args));
            times[k].push(w);
            cpu_t[k].push(c);
        }
        let t = Instant::now();
        let text = std::fs::read_to_string(root.join(".squad/decisions.md")).unwrap();
        let doc = memory::parse(&text);
        let entries = doc.entries().count();
        parse.push(t.elapsed());
        let dated = doc.entries().filter_map(|e| e.moment()).count();
        parse_dated.push(t.elapsed());
        assert!(entries > dated / 2);
    }
    let entries = memory::parse(&src).entries().count();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "memory query: {} bytes, {entries} entries, n={n} per arm (alternated); load average {}",
        src.len(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let start = pct(&mut times[0], 0.5);
    let start_cpu = pct(&mut cpu_t[0], 0.5);
    let (pp, pd) = (pct(&mut parse, 0.5), pct(&mut parse_dated, 0.5));
    println!(
        "in-process read + parse: p50 {pp:.2} ms p99 {:.2} ms; + dating every entry: p50 {pd:.2} ms",
        pct(&mut parse, 0.99)
    );
    let cat = pct(&mut times[1], 0.5);
    for (k, (name, _)) in arms.iter().enumerate() {
        let floor = if k == 3 { start + pd } else { start + pp };
        let floor_cpu = floor - start + start_cpu;
        let (p50, p99) = (pct(&mut times[k], 0.5), pct(&mut times[k], 0.99));
        let c50 = pct(&mut cpu_t[k], 0.5);
        if k < 2 {
            println!("{name:<52} wall p50 {p50:>6.2} ms p99 {p99:>6.2} ms; CPU p50 {c50:>6.2} ms");
        } else {
            // Issue 43 item 4's target: ≤ 2 × a process start + 2 ms.
            let target = 2.0 * start + 2.0;
            println!(
                "{name:<52} wall p50 {p50:>6.2} ms p99 {p99:>6.2} ms; CPU p50 {c50:>6.2} ms ({} B out); / (start + parse): wall {:.2}x, CPU {:.2}x; / cat {:.2}x; / --version {:.2}x; target 2 x start + 2 ms = {target:.2} ms: {}",
                out_bytes[k],
                p50 / floor,
                c50 / floor_cpu,
                p50 / cat,
                p50 / start,
                if p50 <= target { "met" } else { "MISSED" }
            );
        }
    }
}
