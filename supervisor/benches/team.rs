//! `squadctl export` and `squadctl import`, process start included: the
//! real squad-head team (3 agents, 5 skills, ~200 KB) and a generated team
//! of 100 agents (charter 4 KB, history 8 KB each). Import time is mostly
//! fsync: every file and directory of the new team is synced before the
//! one rename that publishes it.
//!
//! Run: `cargo bench -p squad-supervisor --bench team`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

fn squadctl(root: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_squadctl"))
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let p = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name:<40} n={:<3} p50 {:>8.1} ms  p99 {:>8.1} ms",
        times.len(),
        p(0.5).as_secs_f64() * 1e3,
        p(0.99).as_secs_f64() * 1e3
    );
}

fn generated(root: &Path, agents: usize) {
    let team = root.join(".squad");
    std::fs::create_dir_all(team.join("casting")).unwrap();
    let mut roster =
        String::from("# T\n\n## Members\n\n| Name | Role | Charter | Status |\n|--|--|--|--|\n");
    for i in 0..agents {
        let name = format!("agent{i:03}");
        roster.push_str(&format!(
            "| {name} | Dev | `.squad/agents/{name}/charter.md` | ✅ |\n"
        ));
        let dir = team.join("agents").join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("charter.md"),
            format!(
                "# {name}\n\n- **Role:** Dev\n\n{}",
                "charter text ".repeat(300)
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("history.md"),
            format!("# {name}\n\n## Learnings\n\n{}", "a learning. ".repeat(700)),
        )
        .unwrap();
    }
    roster.push_str("\n## Project Context\n\n- **Owner:** bench\n");
    std::fs::write(team.join("team.md"), roster).unwrap();
    std::fs::write(team.join("routing.md"), "# Routing\n").unwrap();
    std::fs::write(team.join("casting/registry.json"), "{}\n").unwrap();
}

fn bench(label: &str, source: &Path, runs: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.squad");
    let file_arg = file.to_str().unwrap();
    let mut export = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        squadctl(source, &["export", "--out", file_arg]);
        export.push(t.elapsed());
    }
    let mut import = Vec::new();
    for i in 0..runs {
        let dest: PathBuf = tmp.path().join(format!("dest{i}"));
        std::fs::create_dir_all(&dest).unwrap();
        let t = Instant::now();
        squadctl(&dest, &["import", file_arg]);
        import.push(t.elapsed());
    }
    let size = std::fs::metadata(&file).unwrap().len();
    report(&format!("export {label} ({} KB)", size / 1024), export);
    report(&format!("import {label}"), import);
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad/squad-head");
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    copy_tree(&corpus.join(".squad"), &real.join(".squad"));
    copy_tree(&corpus.join(".copilot"), &real.join(".copilot"));
    bench("squad-head", &real, 20);
    let big = tmp.path().join("big");
    generated(&big, 100);
    bench("100 agents", &big, 10);
}
