//! squadd benchmarks: numbers (see docs/performance.md), never timed assertions.
//!
//! Every latency is seen by one inotify reader of the benchmark (never by
//! polling a file or a directory), and every latency harness has a floor
//! arm in the same run: a bare rename into a watched directory seen by that
//! same reader. Each prints ours / floor.
//!
//! 1. `latency`: a task assignment renamed into a session directory → the
//!    moment session-status.md reflects it, at 10 and at 500 files/s; p50,
//!    p99, max.
//! 2. `complete` (issue 23): sessions of chained tasks; a progress update
//!    completes a task and readies its dependent: rename → session-status.md
//!    counts it, rename → the task-ready notice in the assignee's inbox, and
//!    the notice's delivery minus the status write; shipped policy (notices
//!    on) and `notices.task_ready: false`.
//! 3. `messages` (issue 23): a message to an agent with a `notify` hook →
//!    its file in `inbox/<agent>/new/`.
//! 4. `startup`: 1,000 sessions × (status + 5 task assignments + 5 progress
//!    updates: 11 files a session), every task in progress and long overdue
//!    (5,000 overdue notices owed) → READY=1, squadd's CPU until READY,
//!    RSS, when the last notice file exists, the load average; with
//!    notices off; restart; CPU used over an idle period.
//! 5. `growth` (issue 9): one session with 2,000 tasks whose messages grow to
//!    5,000, beside 1,000 small sessions. Once the task-ready notices owed
//!    at start are written (after READY: their time is printed), synced to
//!    disk and squadd idle (steady state), at 0, 500 and 5,000 messages:
//!    rename of a progress update → session-status.md, and rename of a
//!    message → its file in the recipient's `inbox/<agent>/new/`, p50/p99;
//!    the syscalls of one change (`strace -c -f` attached for a window of
//!    changes, when strace is installed); then wake-ups over an idle period
//!    (voluntary context switches of every squadd thread).
//! 6. `burst` (issue 11): 50,000 messages renamed into one session as fast as
//!    they can be written; the time until every one is in its recipient's
//!    inbox, and squadd's RSS before, right after and once the burst is
//!    over (what a delivered message costs while squadd runs on).
//!
//! Run: `cargo bench -p squad-supervisor --bench daemon`. Environment:
//! `SQUAD_BENCH_DIR` (where to create roots; default the system temp dir,
//! try /dev/shm for tmpfs), `SQUAD_BENCH_IDLE_SECS` (default 60),
//! `SQUAD_BENCH_SESSIONS` (default 1000), `SQUAD_BENCH_BURST` (default
//! 50000), `SQUAD_BENCH_SAMPLES` (samples per arm: growth default 40,
//! complete and messages default 200; a p99 worth trusting needs a few
//! hundred), `SQUAD_BENCH_SQUADD` (the squadd binary to measure; default
//! this build's). Run parts by name: `… --bench daemon -- complete messages`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use notify::{EventKind, RecursiveMode, Watcher};
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tempdir() -> tempfile::TempDir {
    match std::env::var_os("SQUAD_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

struct Daemon {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The squadd under test: `SQUAD_BENCH_SQUADD` when set (another build,
/// e.g. an older tree's, for a before/after run of this same harness), else
/// this build's.
fn squadd() -> PathBuf {
    std::env::var_os("SQUAD_BENCH_SQUADD").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_squadd")),
        PathBuf::from,
    )
}

/// Starts squadd and returns it with the time to READY=1.
fn start(root: &Path) -> (Daemon, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("notify");
    let notify = UnixDatagram::bind(&sock).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let t0 = Instant::now();
    let child = Command::new(squadd())
        .arg("--root")
        .arg(root)
        .arg("--log")
        .arg("warn")
        .env("NOTIFY_SOCKET", &sock)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = notify.recv(&mut buf).expect("READY from squadd");
    let ready = t0.elapsed();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"));
    (Daemon { child, _dir: dir }, ready)
}

fn plan(i: usize) -> String {
    format!(
        "meta:\n  task_id: task_{i:05}\n  agent: bench\n  created_at: 2024-01-15T10:30:00Z\n  priority: high\n  timeout: 300\ninstruction: |\n  Create a REST API endpoint for user search with pagination.\nboundaries:\n  allowed:\n    - backend/src/routes/users_{i}.ts\n  forbidden:\n    - frontend/**\nsuccess_criteria:\n  - Tests achieve 80% coverage\n"
    )
}

/// Waits until the number of inbox files under `sessions` has not changed
/// for a second (at most two minutes): (files, time waited).
fn settle_inboxes(sessions: &Path) -> (usize, Duration) {
    let count = || -> usize {
        let Ok(dirs) = fs::read_dir(sessions) else {
            return 0;
        };
        dirs.flatten()
            .filter_map(|d| fs::read_dir(d.path().join("inbox")).ok())
            .flat_map(|agents| agents.flatten())
            .filter_map(|a| fs::read_dir(a.path().join("new")).ok())
            .map(|files| files.count())
            .sum()
    };
    let start = Instant::now();
    let (mut last, mut same_since) = (count(), Instant::now());
    while start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(200));
        let n = count();
        if n != last {
            (last, same_since) = (n, Instant::now());
        } else if same_since.elapsed() >= Duration::from_secs(1) {
            break;
        }
    }
    (last, start.elapsed().saturating_sub(same_since.elapsed()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// How many samples took longer than `limit` ms.
fn over(samples: &[Duration], limit: f64) -> usize {
    samples.iter().filter(|d| ms(**d) > limit).count()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn tasks_total(path: &Path) -> Option<usize> {
    let text = fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("tasks_total: "))
        .and_then(|n| n.trim().parse().ok())
}

/// Renames `count` task assignments into `sessions` session directories
/// (round robin) at `rate` files/s and measures, per file, the time from the
/// rename until its session's session-status.md counts it.
fn latency(rate: f64, count: usize, sessions: usize) {
    let tmp = tempdir();
    let root = tmp.path();
    let dirs: Vec<PathBuf> = (0..sessions)
        .map(|s| root.join(format!(".squad/sessions/20240115T{s:06}Z-bench")))
        .collect();
    for d in &dirs {
        fs::create_dir_all(d).unwrap();
    }
    let floor_dir = root.join("floor");
    fs::create_dir_all(&floor_dir).unwrap();
    let (_daemon, _) = start(root);

    // Observe every change of every session-status.md with its time; the
    // floor arm's bare renames are seen by the same watcher.
    let (tx, rx) = mpsc::channel::<(Instant, usize, usize)>();
    let (floor_tx, floor_rx) = mpsc::channel::<(Instant, PathBuf)>();
    let watched = dirs.clone();
    let floor_watched = floor_dir.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(e) = res else { return };
        if !matches!(e.kind, EventKind::Modify(_) | EventKind::Create(_)) {
            return;
        }
        let at = Instant::now();
        for p in &e.paths {
            if p.parent() == Some(floor_watched.as_path()) {
                let _ = floor_tx.send((at, p.clone()));
            } else if p.file_name().is_some_and(|n| n == "session-status.md")
                && let Some(s) = watched.iter().position(|d| p.parent() == Some(d.as_path()))
                && let Some(n) = tasks_total(p)
            {
                let _ = tx.send((at, s, n));
            }
        }
    })
    .unwrap();
    for d in &dirs {
        watcher.watch(d, RecursiveMode::NonRecursive).unwrap();
    }
    watcher
        .watch(&floor_dir, RecursiveMode::NonRecursive)
        .unwrap();

    let interval = Duration::from_secs_f64(1.0 / rate);
    let begin = Instant::now();
    // (session, its count after this file, rename time)
    let mut sent = Vec::with_capacity(count);
    let mut per_session = vec![0usize; sessions];
    for i in 1..=count {
        let due = begin + interval * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let s = i % sessions;
        let staging = dirs[s].join(format!(".plan-{i}.partial"));
        fs::write(&staging, plan(i)).unwrap();
        let t0 = Instant::now();
        fs::rename(
            &staging,
            dirs[s].join(format!("role-plan-bench-task_{i:05}.md")),
        )
        .unwrap();
        per_session[s] += 1;
        sent.push((s, per_session[s], t0));
    }
    // Collect observations until every session reflects all its files.
    let mut seen: Vec<(Instant, usize, usize)> = Vec::new();
    let mut latest = vec![0usize; sessions];
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest != per_session && Instant::now() < deadline {
        if let Ok(obs) = rx.recv_timeout(Duration::from_millis(100)) {
            latest[obs.1] = latest[obs.1].max(obs.2);
            seen.push(obs);
        }
    }
    let mut lat: Vec<Duration> = sent
        .iter()
        .filter_map(|(s, n, t0)| {
            seen.iter()
                .find(|(at, s2, n2)| s2 == s && n2 >= n && at >= t0)
                .map(|(at, _, _)| *at - *t0)
        })
        .collect();
    // The floor arm, same watcher, same rate: a bare rename into a watched
    // directory.
    let mut floor = Vec::new();
    let begin = Instant::now();
    for j in 1..=count.min(200) {
        let due = begin + interval * j as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let staging = floor_dir.join(format!(".floor-{j}.partial"));
        fs::write(&staging, "x\n").unwrap();
        let name = format!("floor-{j}");
        let t0 = Instant::now();
        fs::rename(&staging, floor_dir.join(&name)).unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let Ok((at, p)) = floor_rx.recv_timeout(left) else {
                break;
            };
            if at >= t0 && p.file_name().is_some_and(|n| n == name.as_str()) {
                floor.push(at - t0);
                break;
            }
        }
    }
    let ratio = p50(&mut lat) / p50(&mut floor);
    println!(
        "latency @ {rate:>5.0} files/s into {sessions:>3} session(s): {}; floor {}; ours/floor p50 {ratio:.1}x",
        summary(&mut lat),
        summary(&mut floor),
    );
}

fn proc_stat_cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after ")".
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn rss_kib(pid: u32) -> Option<u64> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
}

/// The notices squadd wrote into the sessions under `base` (files
/// `role-comm-squadd-to-…`).
fn notices_written(base: &Path) -> usize {
    let Ok(sessions) = fs::read_dir(base) else {
        return 0;
    };
    sessions
        .filter_map(Result::ok)
        .filter_map(|s| fs::read_dir(s.path()).ok())
        .flat_map(|d| d.filter_map(Result::ok))
        .filter(|f| {
            f.file_name()
                .to_string_lossy()
                .starts_with("role-comm-squadd-to-")
        })
        .count()
}

/// Start-up with overdue work (issue 23 items 2 and 5): `sessions`
/// sessions of 5 tasks each, every task in progress since 2024 with a
/// 300 s timeout, so every one is overdue (5,000 with the default 1,000
/// sessions) and, with the shipped policy, owed an overdue notice. Time to
/// READY=1, RSS, and when the last notice file exists (counted every
/// 250 ms: a throughput figure, not a latency); the same tree again with
/// notices off; then a restart and an idle period with notices on.
fn startup_and_idle() {
    let sessions: usize = env_or("SQUAD_BENCH_SESSIONS", 1000);
    let idle: u64 = env_or("SQUAD_BENCH_IDLE_SECS", 60);
    for notices in [false, true] {
        let tmp = tempdir();
        let root = tmp.path();
        let base: PathBuf = root.join(".squad/sessions");
        fs::create_dir_all(&base).unwrap();
        if !notices {
            fs::write(
                root.join(".squad/policies.yaml"),
                "notices:\n  task_ready: false\n  task_overdue: false\n",
            )
            .unwrap();
        }
        for s in 0..sessions {
            let dir = base.join(format!("20240115T{s:06}Z"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(
                dir.join("session-status.md"),
                "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\nphase: design\n",
            )
            .unwrap();
            for t in 0..5 {
                let i = s * 10 + t;
                fs::write(dir.join(format!("role-plan-bench-task_{i:05}.md")), plan(i)).unwrap();
                fs::write(
                    dir.join(format!("role-comm-bench-task_{i:05}.md")),
                    format!("meta:\n  task_id: task_{i:05}\n  agent: bench\n  updated_at: 2024-01-15T10:35:00Z\nstatus: in_progress\nprogress_percentage: 50\nartifacts_created:\n  - path: backend/src/routes/users_{i}.ts\n"),
                )
                .unwrap();
            }
        }
        let label = if notices {
            "notices on "
        } else {
            "notices off"
        };
        // First start: writes every status file, the shared context and
        // (notices on) one overdue notice per task.
        let t0 = Instant::now();
        let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let (first, cold) = start(root);
        // squadd's CPU (user + system, every thread) until READY: read at
        // once (the backlog written after READY adds to it from here).
        let cpu_ready = proc_stat_cpu_ticks(first.child.id()).unwrap_or(0) as f64 / 100.0;
        let rss_ready = rss_kib(first.child.id()).unwrap_or(0);
        let expected = if notices { sessions * 5 } else { 0 };
        let mut written = notices_written(&base);
        let end = Instant::now() + Duration::from_secs(300);
        while written < expected && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(250));
            written = notices_written(&base);
        }
        let all_told = t0.elapsed();
        let rss_told = rss_kib(first.child.id()).unwrap_or(0);
        println!(
            "start-up ({label}), {sessions} sessions × (status + 5 assignments + 5 progress), {} overdue tasks: READY=1 after {:.0} ms, squadd CPU until READY {:.2} s (RSS {:.1} MiB); {written}/{expected} notice files after {:.0} ms (RSS then {:.1} MiB); load average before: {}",
            sessions * 5,
            ms(cold),
            cpu_ready,
            rss_ready as f64 / 1024.0,
            ms(all_told),
            rss_told as f64 / 1024.0,
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        );
        drop(first);
        if !notices {
            continue;
        }
        // Second start: the steady state after a restart (nothing to write).
        let (daemon, warm) = start(root);
        let pid = daemon.child.id();
        let rss = rss_kib(pid).unwrap_or(0);
        println!(
            "start-up ({label}): restart {:.0} ms; RSS {:.1} MiB",
            ms(warm),
            rss as f64 / 1024.0
        );
        let ticks_per_sec = 100.0; // USER_HZ on Linux
        let before = proc_stat_cpu_ticks(pid).unwrap_or(0);
        std::thread::sleep(Duration::from_secs(idle));
        let after = proc_stat_cpu_ticks(pid).unwrap_or(0);
        let cpu = (after - before) as f64 / ticks_per_sec;
        println!(
            "idle {idle} s: CPU {:.3} s = {:.4} % of one core; RSS {:.1} MiB",
            cpu,
            cpu / idle as f64 * 100.0,
            rss_kib(pid).unwrap_or(0) as f64 / 1024.0
        );
    }
}

/// When message number `minute` was created: 2024-01-15T10:00:00Z plus that
/// many minutes (the growth part names its inbox file from it).
fn created(minute: usize) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2024-01-15T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc)
        + chrono::Duration::minutes(minute as i64)
}

fn message(id: &str, to: &str, minute: usize) -> String {
    format!(
        "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: {to}\n  created_at: {}\n  priority: medium\ntype: notification\nsubject: s\nmessage: m\n",
        created(minute).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )
}

fn voluntary_switches(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Waits until `f` is true (at most 120 s); false on timeout.
fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// Attaches `strace -c -f` to squadd while `work` runs; the total syscall
/// count, when strace is available.
fn syscalls_during(pid: u32, work: impl FnOnce()) -> Option<u64> {
    let out = tempfile::NamedTempFile::new().ok()?;
    let mut strace = Command::new("strace")
        .args(["-c", "-f", "-p", &pid.to_string(), "-o"])
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    std::thread::sleep(Duration::from_millis(500));
    work();
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill")
        .args(["-INT", &strace.id().to_string()])
        .status();
    let _ = strace.wait();
    let text = fs::read_to_string(out.path()).ok()?;
    text.lines()
        .find(|l| l.trim_end().ends_with("total"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse().ok())
}

/// Waits until squadd's CPU time stays the same for `quiet` (at most 30 s);
/// false on timeout.
fn wait_idle(pid: u32, quiet: Duration) -> bool {
    let end = Instant::now() + Duration::from_secs(30);
    let (mut last, mut since) = (proc_stat_cpu_ticks(pid), Instant::now());
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
        let now = proc_stat_cpu_ticks(pid);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= quiet {
            return true;
        }
    }
    false
}

fn tasks_completed(path: &Path) -> Option<usize> {
    let text = fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("tasks_completed: "))
        .and_then(|n| n.trim().parse().ok())
}

/// The growth benchmark's project under `base`: `small` sessions of two
/// tasks and one big session of `tasks` tasks (returned).
fn growth_project(base: &Path, small: usize, tasks: usize) -> PathBuf {
    for s in 0..small {
        let dir = base.join(format!("20240116T{s:06}Z"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("session-status.md"),
            "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
        )
        .unwrap();
        for t in 0..2 {
            fs::write(dir.join(format!("role-plan-bench-task_{t:05}.md")), plan(t)).unwrap();
        }
    }
    let big = base.join("20240115T100000Z-big");
    fs::create_dir_all(&big).unwrap();
    fs::write(
        big.join("session-status.md"),
        "session_id: sess_big\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for i in 0..tasks {
        fs::write(big.join(format!("role-plan-bench-task_{i:05}.md")), plan(i)).unwrap();
    }
    big
}

fn growth() {
    let small: usize = env_or("SQUAD_BENCH_SESSIONS", 1000);
    let idle: u64 = env_or("SQUAD_BENCH_IDLE_SECS", 60);
    let samples: usize = env_or("SQUAD_BENCH_SAMPLES", 40).max(1);
    let changes = 20;
    // Each size completes `samples + changes` tasks with progress updates:
    // the session holds at least that many for every size.
    let tasks = 2000.max(3 * (samples + changes));
    let tmp = tempdir();
    let root = tmp.path();
    let base = root.join(".squad/sessions");
    let big = growth_project(&base, small, tasks);
    let (daemon, ready) = start(root);
    let pid = daemon.child.id();
    println!(
        "growth: {small} small sessions + one of {tasks} tasks on {}: READY in {:.0} ms",
        root.display(),
        ms(ready)
    );
    // The task-ready notices owed at start (every task is ready) are
    // written after READY since issue 23 (before it, within READY): the
    // samples measure a change's path, so they start once that backlog is
    // written (the backlog has its own figures in `startup`).
    let settled = settle_inboxes(&base);
    println!(
        "growth: the start-up notices ({} inbox files) written {:.0} ms after READY",
        settled.0,
        ms(settled.1)
    );
    // Steady state: the backlog's writes on disk (a `sync`: their
    // write-back made the first samples' fsyncs wait 70+ ms behind it) and
    // squadd idle (no CPU tick for half a second): the samples measure one
    // change, not the tail of start-up.
    let quiet = Instant::now();
    let _ = Command::new("sync").status();
    let idle_for = wait_idle(pid, Duration::from_millis(500));
    println!(
        "growth: then synced and squadd idle after {:.0} ms{}",
        ms(quiet.elapsed()),
        if idle_for { "" } else { " (not idle: gave up)" }
    );
    let status = big.join("session-status.md");
    let inbox = big.join("inbox/bob/new");
    let carol = big.join("inbox/carol/new");
    let floor_dir = root.join("floor");
    fs::create_dir_all(&carol).unwrap();
    fs::create_dir_all(&floor_dir).unwrap();
    // Detection by inotify (one reader for ours and the floor), not by
    // polling the files.
    let reader = Reader::new(&[&big, &carol, &floor_dir]);
    let mut floor_n = 0usize;
    let mut messages = 0usize;
    let mut next_task = 0usize;
    let mut next_msg = 0usize;
    let rename_in = |name: &str, text: &str| {
        let staging = big.join(format!(".{name}.partial"));
        fs::write(&staging, text).unwrap();
        let t0 = Instant::now();
        fs::rename(&staging, big.join(name)).unwrap();
        t0
    };
    for level in [0usize, 500, 5000] {
        // Grow the backlog of messages to `level` (delivered to bob).
        while messages < level {
            let id = format!("msg_g{messages:05}");
            rename_in(
                &format!("role-comm-alice-to-bob-{id}.md"),
                &message(&id, "bob", messages),
            );
            messages += 1;
        }
        if level > 0 {
            wait_for(|| fs::read_dir(&inbox).map_or(0, |d| d.count()) >= level);
        }
        // rename → status: a progress update completes one more task.
        let mut to_status = Vec::new();
        let mut floor = Vec::new();
        for _ in 0..samples {
            let i = next_task;
            next_task += 1;
            let before = tasks_completed(&status).unwrap_or(0);
            reader.drain();
            let t0 = rename_in(
                &format!("role-comm-bench-task_{i:05}.md"),
                &format!(
                    "meta:\n  task_id: task_{i:05}\n  agent: bench\n  updated_at: 2024-01-15T11:00:00Z\nstatus: completed\n"
                ),
            );
            if let Some(at) = reader.until(t0, |p| {
                p == status && tasks_completed(&status).unwrap_or(0) > before
            }) {
                to_status.push(at - t0);
            }
            std::thread::sleep(Duration::from_millis(10));
            floor_n += 1;
            if let Some(f) = floor_sample(&reader, &floor_dir, floor_n) {
                floor.push(f);
            }
            std::thread::sleep(Duration::from_millis(15));
        }
        // rename → inbox: a message to carol.
        let mut to_inbox = Vec::new();
        for _ in 0..samples {
            let id = format!("msg_c{next_msg:05}");
            let name = squad_policies::messages::inbox_name(
                squad_protocol::model::Priority::Medium,
                created(next_msg),
                &id,
            );
            reader.drain();
            let t0 = rename_in(
                &format!("role-comm-alice-to-carol-{id}.md"),
                &message(&id, "carol", next_msg),
            );
            next_msg += 1;
            if let Some(at) = reader.until(t0, |p| {
                p.parent() == Some(carol.as_path())
                    && p.file_name().is_some_and(|n| n == name.as_str())
            }) {
                to_inbox.push(at - t0);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        to_status.sort();
        to_inbox.sort();
        let floor_p50 = p50(&mut floor);
        // Syscalls of one change: 20 progress updates under strace.
        let calls = syscalls_during(pid, || {
            for _ in 0..changes {
                let i = next_task;
                next_task += 1;
                let before = tasks_completed(&status).unwrap_or(0);
                rename_in(
                    &format!("role-comm-bench-task_{i:05}.md"),
                    &format!(
                        "meta:\n  task_id: task_{i:05}\n  agent: bench\n  updated_at: 2024-01-15T11:00:00Z\nstatus: completed\n"
                    ),
                );
                reader.until(Instant::now() - Duration::from_secs(1), |p| {
                    p == status && tasks_completed(&status).unwrap_or(0) > before
                });
                std::thread::sleep(Duration::from_millis(60));
            }
        });
        println!(
            "  {level:>5} messages: rename→status p50 {:>7.3} ms p99 {:>7.3} ms max {:>7.3} ms (n={}, {} over 5 ms); rename→inbox p50 {:>7.3} ms p99 {:>7.3} ms max {:>7.3} ms (n={}, {} over 5 ms); syscalls per progress update: {}",
            ms(percentile(&to_status, 0.5)),
            ms(percentile(&to_status, 0.99)),
            ms(percentile(&to_status, 1.0)),
            to_status.len(),
            over(&to_status, 5.0),
            ms(percentile(&to_inbox, 0.5)),
            ms(percentile(&to_inbox, 0.99)),
            ms(percentile(&to_inbox, 1.0)),
            to_inbox.len(),
            over(&to_inbox, 5.0),
            calls.map_or_else(
                || "n/a (no strace)".to_string(),
                |c| format!("{:.0}", c as f64 / changes as f64)
            ),
        );
        println!(
            "  {level:>5} messages: floor (bare rename, same reader) {}; ours/floor p50: status {:.1}x, inbox {:.1}x",
            summary(&mut floor),
            ms(percentile(&to_status, 0.5)) / floor_p50,
            ms(percentile(&to_inbox, 0.5)) / floor_p50,
        );
    }
    // Idle: let the shared-context and state write-behind settle first.
    std::thread::sleep(Duration::from_secs(2));
    let before = voluntary_switches(pid);
    let cpu_before = proc_stat_cpu_ticks(pid).unwrap_or(0);
    std::thread::sleep(Duration::from_secs(idle));
    let after = voluntary_switches(pid);
    let cpu_after = proc_stat_cpu_ticks(pid).unwrap_or(0);
    println!(
        "  idle {idle} s with {} sessions: {} wake-ups (voluntary context switches, all threads), CPU {:.2} s; RSS {:.1} MiB",
        small + 1,
        after - before,
        (cpu_after - cpu_before) as f64 / 100.0,
        rss_kib(pid).unwrap_or(0) as f64 / 1024.0
    );
}

fn burst() {
    let count: usize = env_or("SQUAD_BENCH_BURST", 50_000);
    let tmp = tempdir();
    let root = tmp.path();
    let dir = root.join(".squad/sessions/20240115T100000Z-burst");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for agent in ["alice", "bob", "carol"] {
        fs::write(
            dir.join(format!("role-plan-{agent}-task_{agent}.md")),
            format!("meta:\n  task_id: task_{agent}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\n"),
        )
        .unwrap();
    }
    let (daemon, _) = start(root);
    let pid = daemon.child.id();
    std::thread::sleep(Duration::from_secs(1));
    let before = rss_kib(pid).unwrap_or(0);
    let t0 = Instant::now();
    for i in 0..count {
        let to = ["bob", "carol"][i % 2];
        let id = format!("msg_b{i:06}");
        let staging = dir.join(format!(".{id}.partial"));
        fs::write(&staging, message(&id, to, i)).unwrap();
        fs::rename(
            &staging,
            dir.join(format!("role-comm-alice-to-{to}-{id}.md")),
        )
        .unwrap();
    }
    let written = t0.elapsed();
    let delivered = || {
        ["bob", "carol"]
            .iter()
            .map(|a| fs::read_dir(dir.join("inbox").join(a).join("new")).map_or(0, |d| d.count()))
            .sum::<usize>()
    };
    let mut peak = before;
    let end = Instant::now() + Duration::from_secs(900);
    while delivered() < count && Instant::now() < end {
        peak = peak.max(rss_kib(pid).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(200));
    }
    let done = t0.elapsed();
    let right_after = rss_kib(pid).unwrap_or(0);
    // Once the burst is over: squadd may still rescan (its own deliveries'
    // inbox events overflow the queue) and returns freed memory 2 s after;
    // the lowest of 20 s of samples is what it holds.
    let mut after = u64::MAX;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(500));
        let now = rss_kib(pid).unwrap_or(0);
        peak = peak.max(now);
        after = after.min(now);
    }
    let n = delivered();
    // Rescans the burst cost (the notification queue overflowed), from the
    // audit log.
    let rescans = fs::read_to_string(root.join(".squad/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"kind\":\"rescanned\""))
        .count();
    println!("burst: {rescans} rescan(s) during and after the burst");
    println!(
        "burst: {count} messages written in {:.1} s, {n} delivered after {:.1} s ({:.0}/s); RSS before {:.1} MiB, peak {:.1} MiB, right after {:.1} MiB, settled (lowest of the next 20 s) {:.1} MiB = {:.0} B per delivered message held",
        written.as_secs_f64(),
        done.as_secs_f64(),
        n as f64 / done.as_secs_f64(),
        before as f64 / 1024.0,
        peak as f64 / 1024.0,
        right_after as f64 / 1024.0,
        after as f64 / 1024.0,
        (after.saturating_sub(before) * 1024) as f64 / n.max(1) as f64,
    );
}

/// One inotify reader for a whole harness: every create or rename-into
/// event of the watched directories, with the time the callback saw it.
/// squadd's output and the floor arm's bare renames are seen by this same
/// reader, so the floor includes what the reader itself costs.
struct Reader {
    _watcher: notify::RecommendedWatcher,
    rx: mpsc::Receiver<(Instant, PathBuf)>,
}

impl Reader {
    fn new(dirs: &[&Path]) -> Reader {
        let (tx, rx) = mpsc::channel();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(e) = res else { return };
            if !matches!(e.kind, EventKind::Modify(_) | EventKind::Create(_)) {
                return;
            }
            let at = Instant::now();
            for p in e.paths {
                let _ = tx.send((at, p));
            }
        })
        .unwrap();
        for d in dirs {
            watcher.watch(d, RecursiveMode::NonRecursive).unwrap();
        }
        Reader {
            _watcher: watcher,
            rx,
        }
    }

    /// Drops what was seen so far.
    fn drain(&self) {
        while self.rx.try_recv().is_ok() {}
    }

    /// The time of the first event at or after `t0` for which `done` holds
    /// (given the path; it may read the file), within 30 s.
    fn until(&self, t0: Instant, mut done: impl FnMut(&Path) -> bool) -> Option<Instant> {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            let (at, p) = self.rx.recv_timeout(left).ok()?;
            if at >= t0 && done(&p) {
                return Some(at);
            }
        }
    }
}

/// Latency percentiles of one arm: "n=… p50 … p99 … max …".
fn summary(samples: &mut [Duration]) -> String {
    if samples.is_empty() {
        return "n=0".into();
    }
    samples.sort();
    format!(
        "n={:>4} p50 {:>7.3} ms p99 {:>7.3} ms max {:>7.3} ms",
        samples.len(),
        ms(percentile(samples, 0.5)),
        ms(percentile(samples, 0.99)),
        ms(samples[samples.len() - 1]),
    )
}

fn p50(samples: &mut [Duration]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort();
    ms(percentile(samples, 0.5))
}

/// The floor arm: a bare rename into a watched directory, seen by `reader`.
fn floor_sample(reader: &Reader, dir: &Path, j: usize) -> Option<Duration> {
    let staging = dir.join(format!(".floor-{j}.partial"));
    fs::write(&staging, "x\n").unwrap();
    let name = format!("floor-{j}");
    let target = dir.join(&name);
    reader.drain();
    let t0 = Instant::now();
    fs::rename(&staging, &target).unwrap();
    let at = reader.until(t0, |p| p.file_name().is_some_and(|n| n == name.as_str()))?;
    let _ = fs::remove_file(&target);
    Some(at - t0)
}

/// A file in `dir` whose name is not hidden (squadd's and writers'
/// temporaries are).
fn visible(p: &Path, dir: &Path) -> bool {
    p.parent() == Some(dir)
        && p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.starts_with('.'))
}

/// Issue 23 item 5: what users do. Sessions of chained tasks (task k
/// requires task k-1, one assignee); each sample renames in a progress
/// update completing the next task, which readies its dependent, so
/// squadd writes the status and (notices on) a task-ready notice and its
/// delivery. Measured by one inotify reader: rename → session-status.md
/// counts it, rename → the ready notice in the assignee's inbox, and the
/// notice's delivery minus the status write; beside it, the floor arm.
/// Run with the shipped policy (notices on) and with `task_ready: false`.
fn complete() {
    let samples: usize = env_or("SQUAD_BENCH_SAMPLES", 200).max(1);
    let sessions = 10usize;
    let per = samples / sessions + 2;
    for notices in [true, false] {
        let tmp = tempdir();
        let root = tmp.path();
        fs::create_dir_all(root.join(".squad")).unwrap();
        if !notices {
            fs::write(
                root.join(".squad/policies.yaml"),
                "notices:\n  task_ready: false\n",
            )
            .unwrap();
        }
        let floor_dir = root.join("floor");
        fs::create_dir_all(&floor_dir).unwrap();
        let dirs: Vec<PathBuf> = (0..sessions)
            .map(|s| root.join(format!(".squad/sessions/20240115T{s:06}Z-chain")))
            .collect();
        for d in &dirs {
            fs::create_dir_all(d.join("inbox/dev/new")).unwrap();
            fs::write(
                d.join("session-status.md"),
                "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
            )
            .unwrap();
            for k in 0..per {
                let requires = if k == 0 {
                    String::new()
                } else {
                    format!("dependencies:\n  requires:\n    - task_{:05}\n", k - 1)
                };
                fs::write(
                    d.join(format!("role-plan-dev-task_{k:05}.md")),
                    format!(
                        "meta:\n  task_id: task_{k:05}\n  agent: dev\n  created_at: 2024-01-15T10:30:00Z\n  priority: high\ninstruction: |\n  Step {k}.\n{requires}"
                    ),
                )
                .unwrap();
            }
        }
        let (_daemon, _) = start(root);
        let inboxes: Vec<PathBuf> = dirs.iter().map(|d| d.join("inbox/dev/new")).collect();
        let mut watched: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        watched.extend(inboxes.iter().map(PathBuf::as_path));
        watched.push(&floor_dir);
        let reader = Reader::new(&watched);
        // Let start-up notices (task_00000 ready) settle.
        if notices {
            wait_for(|| {
                inboxes
                    .iter()
                    .all(|i| fs::read_dir(i).map_or(0, |d| d.count()) >= 1)
            });
        }
        std::thread::sleep(Duration::from_millis(300));
        let (mut to_status, mut to_inbox, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        let mut gap_ms: Vec<f64> = Vec::new();
        for j in 0..samples {
            let (s, k) = (j % sessions, j / sessions);
            let dir = &dirs[s];
            let status = dir.join("session-status.md");
            let inbox = &inboxes[s];
            let delivered_before = fs::read_dir(inbox).map_or(0, |d| d.count());
            let staging = dir.join(format!(".done-{k}.partial"));
            fs::write(
                &staging,
                format!("meta:\n  task_id: task_{k:05}\n  agent: dev\n  updated_at: 2024-01-15T11:00:00Z\nstatus: completed\n"),
            )
            .unwrap();
            reader.drain();
            let t0 = Instant::now();
            fs::rename(&staging, dir.join(format!("role-comm-dev-task_{k:05}.md"))).unwrap();
            let (mut at_status, mut at_inbox) = (None, None);
            let end = Instant::now() + Duration::from_secs(30);
            while (at_status.is_none() || (notices && at_inbox.is_none())) && Instant::now() < end {
                let Ok((at, p)) = reader.rx.recv_timeout(Duration::from_secs(1)) else {
                    continue;
                };
                if at_status.is_none() && p == status && tasks_completed(&status).unwrap_or(0) > k {
                    at_status = Some(at);
                }
                if notices
                    && at_inbox.is_none()
                    && visible(&p, inbox)
                    && fs::read_dir(inbox).map_or(0, |d| d.count()) > delivered_before
                {
                    at_inbox = Some(at);
                }
            }
            if let Some(a) = at_status {
                to_status.push(a - t0);
            }
            if let Some(b) = at_inbox {
                to_inbox.push(b - t0);
            }
            if let (Some(a), Some(b)) = (at_status, at_inbox) {
                gap_ms.push(if b >= a { ms(b - a) } else { -ms(a - b) });
            }
            std::thread::sleep(Duration::from_millis(10));
            if let Some(f) = floor_sample(&reader, &floor_dir, j) {
                floor.push(f);
            }
            std::thread::sleep(Duration::from_millis(15));
        }
        let (ps, pf) = (p50(&mut to_status), p50(&mut floor));
        let label = if notices {
            "notices on "
        } else {
            "notices off"
        };
        println!(
            "complete ({label}): rename→status {}",
            summary(&mut to_status)
        );
        if notices {
            let pi = p50(&mut to_inbox);
            gap_ms.sort_by(f64::total_cmp);
            let gp = |p: f64| {
                gap_ms
                    .get(((gap_ms.len().max(1) - 1) as f64 * p).round() as usize)
                    .copied()
                    .unwrap_or(f64::NAN)
            };
            println!(
                "complete ({label}): rename→ready notice in inbox {}",
                summary(&mut to_inbox)
            );
            println!(
                "complete ({label}): notice delivered minus status written: n={} p50 {:+.3} ms p99 {:+.3} ms (negative: before the status)",
                gap_ms.len(),
                gp(0.5),
                gp(0.99)
            );
            println!(
                "complete ({label}): ours/floor p50: status {:.1}x, inbox {:.1}x",
                ps / pf,
                pi / pf
            );
        } else {
            println!("complete ({label}): ours/floor p50: status {:.1}x", ps / pf);
        }
        println!(
            "complete ({label}): floor (bare rename seen by the same reader) {}",
            summary(&mut floor)
        );
    }
}

/// Issue 23 item 5: messages sent with a notify hook configured for the
/// recipient (the hook runs `true`): rename of a message → its file in
/// the recipient's `inbox/<agent>/new/`, by the same inotify reader as the
/// floor arm beside it.
fn messages() {
    let samples: usize = env_or("SQUAD_BENCH_SAMPLES", 200).max(1);
    let tmp = tempdir();
    let root = tmp.path();
    let dir = root.join(".squad/sessions/20240115T100000Z-msg");
    let inbox = dir.join("inbox/bob/new");
    let floor_dir = root.join("floor");
    fs::create_dir_all(&inbox).unwrap();
    fs::create_dir_all(&floor_dir).unwrap();
    fs::write(
        root.join(".squad/policies.yaml"),
        "messages:\n  notify:\n    bob:\n      command: [\"true\"]\n      retries: 0\n",
    )
    .unwrap();
    fs::write(
        dir.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for agent in ["alice", "bob"] {
        fs::write(
            dir.join(format!("role-plan-{agent}-task_{agent}.md")),
            format!("meta:\n  task_id: task_{agent}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\n"),
        )
        .unwrap();
    }
    let (_daemon, _) = start(root);
    let reader = Reader::new(&[&inbox, &floor_dir]);
    std::thread::sleep(Duration::from_millis(300));
    let (mut to_inbox, mut floor) = (Vec::new(), Vec::new());
    for j in 0..samples {
        let id = format!("msg_h{j:05}");
        let name = squad_policies::messages::inbox_name(
            squad_protocol::model::Priority::Medium,
            created(j),
            &id,
        );
        let staging = dir.join(format!(".{id}.partial"));
        fs::write(&staging, message(&id, "bob", j)).unwrap();
        reader.drain();
        let t0 = Instant::now();
        fs::rename(
            &staging,
            dir.join(format!("role-comm-alice-to-bob-{id}.md")),
        )
        .unwrap();
        if let Some(at) = reader.until(t0, |p| {
            p.parent() == Some(inbox.as_path()) && p.file_name().is_some_and(|n| n == name.as_str())
        }) {
            to_inbox.push(at - t0);
        }
        std::thread::sleep(Duration::from_millis(10));
        if let Some(f) = floor_sample(&reader, &floor_dir, j) {
            floor.push(f);
        }
        std::thread::sleep(Duration::from_millis(15));
    }
    let ratio = p50(&mut to_inbox) / p50(&mut floor);
    println!(
        "messages (notify hook on): rename→inbox {}",
        summary(&mut to_inbox)
    );
    println!("messages (notify hook on): floor {}", summary(&mut floor));
    println!("messages (notify hook on): ours/floor p50 {ratio:.1}x");
}

fn main() {
    // `cargo bench` passes --bench; a filter selects one part.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if wants("latency") {
        latency(10.0, 100, 10);
        latency(500.0, 2000, 100);
        // Stress: every file into one session, which grows to 2,000 tasks.
        latency(500.0, 2000, 1);
    }
    if wants("complete") {
        complete();
    }
    if wants("messages") {
        messages();
    }
    if wants("startup") {
        startup_and_idle();
    }
    if wants("growth") {
        growth();
    }
    if wants("burst") {
        burst();
    }
}
