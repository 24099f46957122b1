//! Runner dispatch latency (issue 17): a task's completion is renamed into
//! its session → the dependent task's runner runs its first instruction.
//! Numbers for docs/performance.md, never timed assertions.
//!
//! Each round: task `task_aN` (agent `up`, no runner) completes (its
//! progress update written to a temporary name and renamed into the session,
//! as an agent's atomic write does); `task_bN` (agent `down`) requires it.
//! The clock starts just before the rename and stops at the wall-clock time
//! the runner (`/bin/sh -c 'date +%s%N > …'`) records: it includes squadd's
//! wake-up, the re-derivation, prompt.md and run.json, fork/exec of the
//! shell and of `date`.
//!
//! Run: `cargo bench -p squad-supervisor --bench runners`. Environment:
//! `SQUAD_BENCH_DIR` (default the system temp dir; try /dev/shm),
//! `SQUAD_BENCH_ROUNDS` (default 100).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn squadctl(root: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_squadctl"))
        .current_dir(root)
        .env_remove("SQUAD_SESSION")
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let rounds: usize = std::env::var("SQUAD_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let tmp = match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = fs::canonicalize(tmp.path()).unwrap();
    squadctl(&root, &["init", "-q"]);
    let session = root.join(squadctl(&root, &["session", "new", "--slug", "bench"]).trim());
    for n in 0..rounds {
        let a = format!("task_a{n}");
        let b = format!("task_b{n}");
        squadctl(
            &root,
            &[
                "task",
                "new",
                "--id",
                &a,
                "--agent",
                "up",
                "--instruction",
                "x",
                "--allow",
                "src/**",
                "-q",
            ],
        );
        squadctl(
            &root,
            &[
                "task",
                "new",
                "--id",
                &b,
                "--agent",
                "down",
                "--instruction",
                "y",
                "--allow",
                "src/**",
                "--requires",
                &a,
                "-q",
            ],
        );
    }
    let stamps = root.join("stamps");
    fs::create_dir(&stamps).unwrap();
    fs::write(
        root.join(".squad/policies.yaml"),
        format!(
            "runners:\n  dispatch: true\n  lead: none\n  idle_after: none\n  agents:\n    down:\n      command: [\"/bin/sh\", \"-c\", \"date +%s%N > \\\"$0\\\"\", \"{}/{{task}}\"]\n      max_retries: 0\n",
            stamps.display()
        ),
    )
    .unwrap();
    fs::write(
        root.join(".squad/config.json"),
        r#"{"sessions": {"maxConcurrent": 4}}"#,
    )
    .unwrap();

    let notify_dir = tempfile::tempdir().unwrap();
    let sock = notify_dir.path().join("notify");
    let notify = UnixDatagram::bind(&sock).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_squadd"))
        .arg("--root")
        .arg(&root)
        .env("NOTIFY_SOCKET", &sock)
        .env("RUST_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = notify.recv(&mut buf).expect("READY from squadd");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"));

    let mut ms = Vec::with_capacity(rounds);
    for n in 0..rounds {
        let a = format!("task_a{n}");
        let b = format!("task_b{n}");
        let text = format!(
            "# Progress Update\nmeta:\n  task_id: {a}\n  agent: up\n  updated_at: 2026-01-01T00:00:00Z\nstatus: completed\nprogress_percentage: 100\ncompleted_at: 2026-01-01T00:00:00Z\n"
        );
        let tmp_path = root.join(format!(".bench-{n}.tmp"));
        fs::write(&tmp_path, text).unwrap();
        let t0 = now_ns();
        fs::rename(&tmp_path, session.join(format!("role-comm-up-{a}.md"))).unwrap();
        let stamp = stamps.join(&b);
        let waited = Instant::now();
        let started: u128 = loop {
            if let Ok(t) = fs::read_to_string(&stamp)
                && let Ok(v) = t.trim().parse()
            {
                break v;
            }
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "{b} never started"
            );
            std::thread::sleep(Duration::from_micros(200));
        };
        ms.push((started.saturating_sub(t0)) as f64 / 1e6);
        // The previous run of `down` must end (one run per agent) and be
        // reaped before the next round: squadd looks every 200 ms.
        let rec = session.join("runs").join(&b).join("run.json");
        let waited = Instant::now();
        while !fs::read_to_string(&rec).is_ok_and(|t| t.contains("\"exit\"")) {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "{b} never ended"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "task completed -> dependent's runner started ({rounds} rounds): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms[ms.len() - 1]
    );
}
