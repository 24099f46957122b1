//! Notify hooks under a 2,000-message burst (issue 11): the most hooks seen
//! running at once, throughput, and where the critical messages' hooks ran
//! in the order. Numbers, never assertions (see docs/performance.md).
//!
//! Each hook is `sh -c` that marks itself running (a file named by its pid),
//! sleeps 20 ms, appends its priority to a log and unmarks itself; the
//! bench samples the running set every millisecond.
//!
//! Run: `cargo bench -p squad-supervisor --bench hooks` (`SQUAD_BENCH_DIR`
//! picks the file system, `SQUAD_BENCH_MESSAGES` the burst, default 2000).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::fs;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const S: &str = "20240115T100000Z-burst";

fn message(i: usize, priority: &str) -> String {
    format!(
        "meta:\n  message_id: msg_{i:05}\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:00:00Z\n  priority: {priority}\ntype: notification\nsubject: s{i}\nmessage: m{i}\n"
    )
}

fn burst(max_concurrent: &str, n: usize) {
    let tmp = match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let root = tmp.path();
    let s = root.join(".squad/sessions").join(S);
    fs::create_dir_all(&s).unwrap();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    let (running, log) = (root.join("running"), root.join("hooks.log"));
    fs::create_dir_all(&running).unwrap();
    let script = format!(
        ": > {r}/$$; sleep 0.02; echo $SQUAD_PRIORITY >> {l}; rm -f {r}/$$",
        r = running.display(),
        l = log.display()
    );
    fs::write(
        root.join(".squad/policies.yaml"),
        format!(
            "hooks:\n  max_concurrent: {max_concurrent}\nmessages:\n  escalate_after:\n    critical: none\n    high: none\n    medium: none\n  notify:\n    bob:\n      command: [\"sh\", \"-c\", {}]\n      retries: 0\n",
            serde_json::to_string(&script).unwrap()
        ),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("notify");
    let notify = UnixDatagram::bind(&sock).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_squadd"))
        .arg("--root")
        .arg(root)
        .arg("--log")
        .arg("warn")
        .env("NOTIFY_SOCKET", &sock)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 256];
    notify.recv(&mut buf).expect("READY from squadd");
    // The burst: every tenth message critical, the rest medium, renamed in
    // as fast as one writer can.
    let t0 = Instant::now();
    for i in 0..n {
        let p = if i % 10 == 9 { "critical" } else { "medium" };
        let tmp = s.join(format!(".m{i}.partial"));
        fs::write(&tmp, message(i, p)).unwrap();
        fs::rename(
            &tmp,
            s.join(format!("role-comm-alice-to-bob-msg_{i:05}.md")),
        )
        .unwrap();
    }
    let written = t0.elapsed();
    let mut max_running = 0;
    let done = loop {
        let now_running = fs::read_dir(&running).map_or(0, |d| d.count());
        max_running = max_running.max(now_running);
        let lines = fs::read_to_string(&log).unwrap_or_default();
        if lines.lines().count() >= n {
            break lines;
        }
        if t0.elapsed() > Duration::from_secs(600) {
            eprintln!("gave up after 600 s");
            break lines;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let elapsed = t0.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    let crit: Vec<usize> = done
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "critical")
        .map(|(i, _)| i)
        .collect();
    println!(
        "max_concurrent {max_concurrent:>4}: {n} messages written in {:.0} ms; hooks done in {:.2} s ({:.0}/s); most running at once (sampled) {max_running}; critical hooks at log positions median {} last {} (of {})",
        written.as_secs_f64() * 1e3,
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        crit.get(crit.len() / 2).copied().unwrap_or(0),
        crit.last().copied().unwrap_or(0),
        done.lines().count(),
    );
}

fn main() {
    let n: usize = std::env::var("SQUAD_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!(
        "cores: {}",
        std::thread::available_parallelism().map_or(1, |c| c.get())
    );
    for max in ["auto", "32"] {
        burst(max, n);
    }
}
