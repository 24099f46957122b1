//! Cluster-wide lock acquire + release (docs/cluster.md) through the CLI
//! over loopback NATS, beside the local lock path in the same run,
//! interleaved so that the machine's load moves both alike: what an agent's
//! shell tool pays per lock with and without `cluster:`.
//!
//! One nats-server (JetStream, `replicas: 1`) on 127.0.0.1; two checkouts,
//! each with its squadd: one with `cluster:`, one without. The cluster path
//! is the local one plus a control-socket round trip to squadd and its KV
//! create (and delete) on NATS.
//!
//! Run: `SQUAD_NATS_SERVER=/path/to/nats-server cargo bench -p
//! squad-supervisor --bench cluster_locks` (`.ci/run` installs the pinned
//! server and exports the variable).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

#[path = "support/cpu.rs"]
mod cpu;

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn squadctl(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_squadctl"))
        .current_dir(root)
        .args(args)
        .output()
        .unwrap()
}

/// A checkout with one plan (agent `dev`, task `task_1`, `src/**`) and
/// `policy`.
fn checkout(dir: &Path, policy: &str) -> PathBuf {
    let root = dir.to_path_buf();
    let s = root.join(".squad/sessions/20240115T100000Z");
    fs::create_dir_all(&s).unwrap();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::write(
        s.join("role-plan-dev-task_1.md"),
        "meta:\n  task_id: task_1\n  agent: dev\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\nboundaries:\n  allowed:\n    - src/**\n",
    )
    .unwrap();
    fs::write(root.join(".squad/policies.yaml"), policy).unwrap();
    root
}

fn squadd(root: &Path) -> Killed {
    Killed(
        Command::new(env!("CARGO_BIN_EXE_squadd"))
            .arg("--root")
            .arg(root)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits for `ready` (up to a minute).
fn wait(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn main() {
    let Some(server) = std::env::var_os("SQUAD_NATS_SERVER") else {
        eprintln!(
            "cluster_locks: SQUAD_NATS_SERVER is not set (`.ci/run` installs nats-server); skipped"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let store = tmp.path().join("js");
    let _nats = Killed(
        Command::new(server)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let local = checkout(&tmp.path().join("local"), "");
    let clustered = checkout(
        &tmp.path().join("cluster"),
        &format!(
            "cluster:\n  nats: [\"nats://127.0.0.1:{port}\"]\n  project: bench\n  replicas: 1\n"
        ),
    );
    let _d1 = squadd(&local);
    let _d2 = squadd(&clustered);
    wait("the local squadd answers", || {
        squadctl(&local, &["events", "--json"]).status.success()
    });
    wait("the clustered squadd connects to NATS", || {
        squadctl(&clustered, &["cluster", "status", "--json"])
            .status
            .success()
    });
    let cycle = |root: &Path, target: &str| {
        let out = squadctl(
            root,
            &[
                "lock", "acquire", target, "--agent", "dev", "--task", "task_1",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = squadctl(root, &["lock", "release", target, "--agent", "dev"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // A first cycle each creates the bucket and warms the caches.
    cycle(&clustered, "src/warm.rs");
    cycle(&local, "src/warm.rs");
    let n: usize = std::env::var("SQUAD_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let (mut cw, mut cc, mut lw, mut lc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let target = format!("src/file{}.rs", i % 10);
        let (w, c) = cpu::measure(|| cycle(&clustered, &target));
        cw.push(w);
        cc.push(c);
        let (w, c) = cpu::measure(|| cycle(&local, &target));
        lw.push(w);
        lc.push(c);
    }
    for (name, w, c) in [
        ("cluster (loopback NATS)", &mut cw, &mut cc),
        ("local (flock)", &mut lw, &mut lc),
    ] {
        println!(
            "lock acquire + release, {name}: n={} wall p50 {:.2} ms p99 {:.2} ms max {:.2} ms; squadctl CPU p50 {:.2} ms",
            w.len(),
            cpu::pct(w, 0.5),
            cpu::pct(w, 0.99),
            cpu::pct(w, 1.0),
            cpu::pct(c, 0.5),
        );
    }
}
