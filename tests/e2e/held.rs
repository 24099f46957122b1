//! Issue 10, "What held": the claims about crashes, races and hostile
//! clients, each checked through the real binaries (gc and squadd killed
//! mid-retention, lock races with kill -9, the control socket under bad and
//! slow clients, the watcher's queue overflowing, absurd plan timeouts).

use crate::daemon::{Daemon, eventually, plan};
use crate::support::*;
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small deterministic generator: the kill points vary, the test repeats.
fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut s = seed;
    move |n| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s % n
    }
}

const FILES_PER_SESSION: usize = 8;

/// A completed session past its archive age, with artifacts whose contents
/// name the session (so a partial or mixed-up archive shows).
fn completed(root: &Path, name: &str) {
    let dir = root.join(".squad/sessions").join(name);
    fs::create_dir_all(dir.join("artifacts")).unwrap();
    fs::write(
        dir.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2023-01-01T00:00:00Z\nstatus: completed\ncompleted_at: 2023-01-02T00:00:00Z\n",
    )
    .unwrap();
    for f in 0..FILES_PER_SESSION {
        fs::write(
            dir.join(format!("artifacts/{f}.txt")),
            format!("{name}/{f}"),
        )
        .unwrap();
    }
}

/// Every session is wholly in sessions/ or wholly in archives/ (never both,
/// never neither, never partial); returns how many are archived.
fn sessions_whole(root: &Path, names: &[String]) -> usize {
    let mut archived = 0;
    for name in names {
        let live = root.join(".squad/sessions").join(name);
        let arch = root.join(".squad/archives").join(name);
        let dir = match (live.exists(), arch.exists()) {
            (true, false) => live,
            (false, true) => {
                archived += 1;
                arch
            }
            (a, b) => panic!("{name}: in sessions/ {a}, in archives/ {b}"),
        };
        let status = fs::read_to_string(dir.join("session-status.md")).unwrap();
        let v: serde_yaml::Value = serde_yaml::from_str(&status).unwrap();
        assert_eq!(v["status"], "completed", "{name}: {status}");
        if dir.starts_with(root.join(".squad/archives")) {
            assert!(v["archived_at"].is_string(), "{name}: {status}");
        }
        for f in 0..FILES_PER_SESSION {
            let text = fs::read_to_string(dir.join(format!("artifacts/{f}.txt"))).unwrap();
            assert_eq!(text, format!("{name}/{f}"));
        }
    }
    archived
}

/// Waits until archives/ holds more than `before` sessions or `done` says
/// the process ended.
fn wait_for_archives(root: &Path, before: usize, mut done: impl FnMut() -> bool) {
    let archives = root.join(".squad/archives");
    eventually("archiving started", || {
        let n = fs::read_dir(&archives)
            .map(|d| {
                d.flatten()
                    .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                    .count()
            })
            .unwrap_or(0);
        (n > before || done()).then_some(())
    });
}

fn kill9(pid: u32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

#[test]
fn gc_killed_mid_run_leaves_every_archive_whole_and_loses_no_session() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let names: Vec<String> = (0..80).map(|i| format!("20230101T{i:06}Z-s")).collect();
    for n in &names {
        completed(root, n);
    }
    // A session that must never move.
    let active = root.join(".squad/sessions/20240101T000000Z-active");
    fs::create_dir_all(&active).unwrap();
    fs::write(
        active.join("session-status.md"),
        "session_id: sess_2\nstarted_at: 2024-01-01T00:00:00Z\nstatus: active\n",
    )
    .unwrap();
    let mut rand = xorshift(0x9c);
    let mut killed_mid_run = 0;
    for _ in 0..6 {
        let before = sessions_whole(root, &names);
        let mut gc = ctl(root)
            .arg("gc")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Killed once it has archived something, a few ms later.
        wait_for_archives(root, before, || gc.try_wait().unwrap().is_some());
        // Stays: the kill instant (random), not a wait for an effect.
        std::thread::sleep(Duration::from_millis(rand(10)));
        kill9(gc.id());
        let status = gc.wait().unwrap();
        let after = sessions_whole(root, &names);
        if status.code().is_none() && after > before && after < names.len() {
            killed_mid_run += 1;
        }
        assert!(after >= before, "an archive never moves back");
        assert!(active.join("session-status.md").exists());
    }
    assert!(killed_mid_run > 0, "at least one kill landed mid-run");
    // The next gc finishes the job; nothing was lost on the way.
    let out = ctl_run(root, &["gc"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(sessions_whole(root, &names), names.len());
    assert!(active.join("session-status.md").exists());
}

#[test]
fn squadd_killed_during_scheduled_retention_leaves_every_archive_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    write_policy(
        root,
        format!("{NO_NOTICES}retention:\n  schedule: '* * * * * *'\n"),
    );
    let mut names = Vec::new();
    let mut rand = xorshift(0x51);
    let mut killed_mid_run = 0;
    for round in 0..4 {
        // New sessions to archive each round, so every kill has work to cut.
        for i in 0..40 {
            let n = format!("20230101T{round:02}{i:04}Z-s");
            completed(root, &n);
            names.push(n);
        }
        let before = sessions_whole(root, &names);
        let mut d = Daemon::start(root);
        // The scheduled run starts within a second of READY; killed once it
        // has archived something, a few ms later.
        wait_for_archives(root, before, || d.child.try_wait().unwrap().is_some());
        // Stays: the kill instant (random), not a wait for an effect.
        std::thread::sleep(Duration::from_millis(rand(10)));
        d.kill9();
        let after = sessions_whole(root, &names);
        if after < names.len() {
            killed_mid_run += 1;
        }
    }
    assert!(killed_mid_run > 0, "at least one kill landed mid-retention");
    let d = Daemon::start(root);
    eventually("the last squadd archives every session", || {
        names
            .iter()
            .all(|n| root.join(".squad/archives").join(n).exists())
            .then_some(())
    });
    // Checked at rest: a session moving under the check is not a fault.
    let (code, log) = d.terminate();
    assert_eq!(code, 0, "{log}");
    assert_eq!(sessions_whole(root, &names), names.len());
}

const LOCK_SESSION: &str = "20240115T100000Z-locks";

/// `n` agents `agent-<i>`, each with `task_<i>` allowed to change `shared/**`.
fn lock_project(n: usize) -> tempfile::TempDir {
    numbered_agents_project(LOCK_SESSION, n, |_| {
        "boundaries:\n  allowed:\n    - shared/**\n".to_string()
    })
}

/// The lock records (`*.json`, not temporaries) and what each holds.
fn lock_records(locks: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for e in fs::read_dir(locks).into_iter().flatten() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let text = fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("corrupt lock record {name}: {e}: {text:?}"));
        assert!(v["agent"].is_string() && v["targets"].is_array(), "{text}");
        out.push(v);
    }
    out
}

#[test]
fn lock_races_with_kill_9_leave_one_holder_and_no_corrupt_record() {
    const N: usize = 12;
    let tmp = lock_project(N);
    let root = tmp.path();
    let locks = root
        .join(".squad/sessions")
        .join(LOCK_SESSION)
        .join("locks");
    let globs = [
        "shared/**",
        "shared/src/*.rs",
        "shared/src/**",
        "shared/src/a.rs",
    ];
    let mut rand = xorshift(0x10c);
    let mut contended = 0;
    for round in 0..6 {
        let mut children: Vec<_> = (0..N)
            .map(|i| {
                ctl(root)
                    .args(["lock", "acquire", globs[(i + round) % globs.len()]])
                    .args(["--agent", &format!("agent-{i}"), "--task"])
                    .arg(format!("task_{i}"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // A third of them killed mid-acquire.
        // Stays: the kill instant (random), not a wait for an effect.
        std::thread::sleep(Duration::from_millis(rand(15)));
        let victims: Vec<usize> = (0..N).filter(|i| (i + round) % 3 == 0).collect();
        for &v in &victims {
            kill9(children[v].id());
        }
        let mut winners = Vec::new();
        let mut losers = 0;
        for (i, c) in children.drain(..).enumerate() {
            let out = c.wait_with_output().unwrap();
            match out.status.code() {
                Some(0) => winners.push(i),
                Some(1) => losers += 1,
                None => assert!(victims.contains(&i), "agent-{i} died unkilled"),
                Some(c) => panic!("agent-{i} exit {c}: {}", stderr(&out)),
            }
        }
        assert!(winners.len() <= 1, "round {round}: winners {winners:?}");
        let records = lock_records(&locks);
        assert!(records.len() <= 1, "round {round}: {records:?}");
        if let [w] = winners[..] {
            assert_eq!(records.len(), 1, "round {round}");
            assert_eq!(records[0]["agent"], format!("agent-{w}"));
        }
        if losers > 0 {
            // Someone was refused: someone holds it (maybe a killed one).
            assert_eq!(records.len(), 1, "round {round}: refused by nobody");
            contended += 1;
        }
        let out = ctl_run(root, &["lock", "list"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(!stdout(&out).contains("UNREADABLE"), "{}", stdout(&out));
        // Next round starts free.
        for e in fs::read_dir(&locks).into_iter().flatten() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                fs::remove_file(p).unwrap();
            }
        }
    }
    assert!(contended > 0, "the processes did race");
}

fn sock(root: &Path) -> std::path::PathBuf {
    root.join(".squad/run/squadd.sock")
}

fn read_reply(s: &UnixStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    line
}

fn status_answers(root: &Path) {
    let v = status_json(root);
    assert!(v["roots"].is_array(), "{v}");
}

#[test]
fn the_control_socket_survives_bad_utf8_slowloris_and_idle_crowds() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    two_agent_session(root, "20240115T100000Z-sock");
    let d = Daemon::start(root);
    // Bad UTF-8: an error line, the connection closed, squadd fine.
    let mut s = UnixStream::connect(sock(root)).unwrap();
    s.write_all(b"{\"method\":\"st\xff\xfeatus\"}\n").unwrap();
    let r = read_reply(&s);
    assert!(r.contains("\"ok\":false") && r.contains("UTF-8"), "{r}");
    status_answers(root);
    // Slowloris: a byte every 200 ms, never a newline. Hung up on after
    // REQUEST_TIMEOUT (5 s) while other clients are served meanwhile.
    let sl = UnixStream::connect(sock(root)).unwrap();
    let connected = Instant::now();
    let dribbler = {
        let mut sl = sl.try_clone().unwrap();
        std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(15) {
                if sl.write_all(b"{").is_err() {
                    return start.elapsed();
                }
                // Stays (pacing): one write attempt every 200 ms until the peer goes.
                std::thread::sleep(Duration::from_millis(200));
            }
            start.elapsed()
        })
    };
    // A few hundred idle connections, never sending a byte.
    let idle: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(sock(root)).unwrap())
        .collect();
    for _ in 0..3 {
        status_answers(root);
    }
    // Served while the dribbler is still connected and unanswered.
    if connected.elapsed() < Duration::from_secs(4) {
        sl.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let e = (&sl).read(&mut b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        sl.set_nonblocking(false).unwrap();
    }
    let r = read_reply(&sl);
    assert!(r.contains("timed out waiting for a request line"), "{r}");
    let mut rest = Vec::new();
    let _ = (&sl).read_to_end(&mut rest);
    drop(sl);
    let took = dribbler.join().unwrap();
    assert!(
        took < Duration::from_secs(15),
        "the dribbler was hung up on"
    );
    // The idle crowd was hung up on too; squadd still answers.
    for mut c in idle {
        let r = read_reply(&c);
        assert!(r.contains("timed out") || r.is_empty(), "{r}");
        let _ = c.write_all(b"x");
    }
    status_answers(root);
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

#[test]
fn another_uid_is_refused_on_the_control_socket() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        crate::support::skip("needs root to connect as another uid");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    two_agent_session(root, "20240115T100000Z-uid");
    let _d = Daemon::start(root);
    // Open the way for uid 65534 so that only squadd's own check stands.
    for p in [root, &root.join(".squad"), &root.join(".squad/run")] {
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::set_permissions(sock(root), fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = squadctl();
    // `health` only asks squadd (status would fall back to the files).
    cmd.current_dir(root).arg("health");
    // SAFETY: setgid/setuid are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run(&mut cmd);
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("squadd only answers its own user"),
        "{}",
        stderr(&out)
    );
    status_answers(root);
}

/// Every message id in `agent`'s inbox and how often it occurs.
fn inbox_ids(session: &Path, agent: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for sub in ["new", "cur"] {
        let dir = session.join("inbox").join(agent).join(sub);
        for e in fs::read_dir(&dir).into_iter().flatten() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some((_, id)) = name.rsplit_once("-msg_") {
                *out.entry(format!("msg_{}", id.trim_end_matches(".md")))
                    .or_insert(0) += 1;
            }
        }
    }
    out
}

#[test]
fn a_notification_burst_past_the_queue_cap_costs_a_rescan_and_delivers_once() {
    const S: &str = "20240115T100000Z-burst";
    let (tmp, session) = quiet_two_agent_project(S);
    let root = tmp.path();
    let d = Daemon::start_with_env(root, &[("SQUADD_MAX_QUEUED", "256")]);
    const N: usize = 1000;
    // One file in 20 is broken: each must be reported once, whether its
    // notification was dropped or not (a rescan announces what it finds).
    let broken = |i: usize| i % 20 == 19;
    for i in 0..N {
        let id = format!("msg_{i:05}");
        let text = if broken(i) {
            format!("meta: [unclosed {i}\n")
        } else {
            notification(
                &id,
                "high",
                "2024-01-15T10:00:00Z",
                &format!("s{i}"),
                &format!("m{i}"),
            )
        };
        write_alice_to_bob(&session, &id, &text);
    }
    let valid = (0..N).filter(|i| !broken(*i)).count();
    let ids = eventually("every message delivered", || {
        let ids = inbox_ids(&session, "bob");
        (ids.len() == valid).then_some(ids)
    });
    assert!(ids.values().all(|n| *n == 1), "none twice");
    // The audit lines follow the inbox files (written with the batch).
    let delivered = || {
        audit_log(root)
            .unwrap()
            .matches("\"kind\":\"message-delivered\"")
            .count()
    };
    eventually("every delivery audited", || {
        (delivered() >= valid).then_some(())
    });
    assert_eq!(delivered(), valid, "each delivery audited once");
    let rescans = || {
        audit_log(root)
            .unwrap()
            .matches("\"kind\":\"rescanned\"")
            .count()
    };
    assert!(rescans() > 0, "the overflow was taken as a rescan");
    // The rescans end with the burst (a rescan does not overflow again).
    eventually("the rescans stop", || {
        let before = rescans();
        // Stays: the quiet window that shows the rescans stopped.
        std::thread::sleep(Duration::from_millis(1500));
        (rescans() == before).then_some(())
    });
    let audit = audit_log(root).unwrap();
    let invalid: Vec<&str> = audit
        .lines()
        .filter(|l| l.contains("\"kind\":\"file-invalid\""))
        .collect();
    assert_eq!(
        invalid.len(),
        N - valid,
        "each broken file reported once: {invalid:#?}"
    );
    status_answers(root);
    let (code, _) = d.terminate();
    assert_eq!(code, 0);
}

#[test]
fn absurd_plan_timeouts_are_diagnosed_and_squadd_does_not_panic() {
    const S: &str = "20240115T100000Z-timeouts";
    let (tmp, session) = quiet_two_agent_project(S);
    let root = tmp.path();
    let d = Daemon::start(root);
    let values = ["-1", "9223372036854775808", "18446744073709551616"];
    for (i, v) in values.iter().enumerate() {
        let text = plan(&format!("task_t{i}"), "alice", &[]).replacen(
            "  priority: critical\n",
            &format!("  priority: critical\n  timeout: {v}\n"),
            1,
        );
        fs::write(session.join(format!("role-plan-alice-task_t{i}.md")), text).unwrap();
    }
    let out = run(ctl(root)
        .args(["validate", "--format", "json"])
        .arg(&session));
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    for i in 0..values.len() {
        let file = format!("role-plan-alice-task_t{i}.md");
        assert!(text.contains(&file), "{file} diagnosed: {text}");
    }
    // squadd reads them, reports them, and keeps answering.
    eventually("squadd reports the bad plans", || {
        let audit = audit_log(root)?;
        (audit.matches("\"kind\":\"file-invalid\"").count() >= values.len()).then_some(())
    });
    status_answers(root);
    let (code, log) = d.terminate();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("panicked"), "{log}");
}
