//! Issue 10 (hardening): faults found by attacking squadd and squadctl, each
//! with its regression test through the real binaries.

use crate::support::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// 100 KB of nested `[` took 22 s to validate (the YAML parser is quadratic
/// in the depth): it is refused unparsed, at the place it passes 64 levels.
#[test]
fn deep_nesting_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let name = "role-plan-backend-task_1.md";
    let text = format!(
        "meta:\n  task_id: task_1\n  agent: backend\n  created_at: 2024-01-15T10:30:00Z\n  priority: high\ninstruction: {}\n",
        "[".repeat(100_000)
    );
    fs::write(dir.path().join(name), text).unwrap();
    let out = run(squadctl()
        .args(["validate", "--color", "never", name])
        .current_dir(dir.path()));
    let printed = stdout(&out);
    assert!(
        printed.contains(&format!(
            "{name}:6:77: error[yaml-syntax]: nesting deeper than 64 levels (not parsed)"
        )),
        "{printed}"
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
}

const S: &str = "20240115T100000Z-harden";
/// A session that completed long ago: squadd writes its summary.md at start
/// and the every-second retention run archives it.
const D: &str = "20240110T100000Z-done";

/// Whether a planted link points at a directory or a file outside.
#[derive(Clone, Copy, Debug)]
enum Target {
    Dir,
    File,
}

/// Plants a link at `at` to `outside` (a directory) or to its `file`.
fn plant_link(at: &Path, outside: &Path, target: Target) {
    fs::create_dir_all(at.parent().unwrap()).unwrap();
    let to = match target {
        Target::Dir => outside.to_path_buf(),
        Target::File => outside.join("file"),
    };
    symlink(&to, at).unwrap();
}

/// Every path squadd creates or writes in a root, with what it expects
/// there. The symlink test plants a link at each: a new kind of file squadd
/// writes belongs in this table. `S` and `D` are the sessions; a name ending
/// in `*` is the one file squadd writes with that prefix (found in a run
/// without links).
const OWN_PATHS: &[(&str, Target)] = &[
    (".squad", Target::Dir),
    (".squad/sessions", Target::Dir),
    (".squad/sessions/S", Target::Dir),
    (".squad/sessions/D/summary.md", Target::File),
    (
        ".squad/sessions/S/role-comm-squadd-to-alice-*",
        Target::File,
    ),
    (".squad/run/session-S.lock", Target::File),
    (".squad/archives", Target::Dir),
    (".squad/sessions/S/runs", Target::Dir),
    (".squad/sessions/S/runs/task_alice", Target::Dir),
    (".squad/sessions/S/runs/task_alice/prompt.md", Target::File),
    (".squad/sessions/S/runs/task_alice/run.json", Target::File),
    (".squad/sessions/S/runs/task_alice/run.log", Target::File),
    (".squad/run", Target::Dir),
    (".squad/run/squadd.pid", Target::File),
    (".squad/run/state.json", Target::File),
    (".squad/run/squadd.sock", Target::File),
    (".squad/run/hooks.jsonl", Target::File),
    (".squad/audit.jsonl", Target::File),
    (".squad/sessions/S/session-status.md", Target::File),
    (".squad/sessions/S/inbox", Target::Dir),
    (".squad/sessions/S/inbox/bob", Target::Dir),
    (".squad/sessions/S/inbox/bob/new", Target::Dir),
    (".squad/sessions/S/inbox/bob/tmp", Target::Dir),
    (".claude", Target::Dir),
    (".claude/context", Target::Dir),
    (".claude/context/shared-context.json", Target::File),
];

fn project(root: &Path) {
    let s = two_agent_session(root, S);
    let done = root.join(".squad/sessions").join(D);
    fs::create_dir_all(&done).unwrap();
    fs::write(
        done.join("session-status.md"),
        "session_id: sess_done\nstarted_at: 2024-01-10T10:00:00Z\nstatus: completed\ncompleted_at: 2024-01-10T11:00:00Z\n",
    )
    .unwrap();
    // Retention every second (archives D); every ready task run by a
    // runner that prints a line (runs/<task>/prompt.md, run.json, run.log).
    write_policy(
        root,
        "retention:\n  schedule: '* * * * * *'\nrunners:\n  dispatch: true\n  agents:\n    \"*\":\n      command: [\"/bin/sh\", \"-c\", \"echo ran\"]\n",
    );
    fs::write(
        s.join("role-comm-alice-to-bob-msg_1.md"),
        notification("msg_1", "critical", "2024-01-15T10:00:00Z", "s", "m"),
    )
    .unwrap();
}

/// [`project`] at `p` in a new temporary directory (links planted there
/// may point next to it); returns the directory and the root.
fn project_in_tmp() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    project(&root);
    (tmp, root)
}

/// Everything under `dir`: relative path, mode, content.
fn snapshot(dir: &Path) -> Vec<(String, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = fs::symlink_metadata(&d).unwrap();
        let rel = d.strip_prefix(dir).unwrap().display().to_string();
        if m.is_dir() {
            out.push((rel, m.permissions().mode(), Vec::new()));
            for e in fs::read_dir(&d).unwrap() {
                stack.push(e.unwrap().path());
            }
        } else if m.is_file() {
            out.push((rel, m.permissions().mode(), fs::read(&d).unwrap()));
        } else {
            // A socket or FIFO squadd made there.
            out.push((rel, m.permissions().mode(), b"(special)".to_vec()));
        }
    }
    out.sort();
    out
}

/// squadd never writes, truncates, appends to or chmods anything through a
/// symlink planted where it expects its own file or directory (`.squad/run`
/// → elsewhere was chmod 0700 with its state.json replaced; `squadd.pid` →
/// a file was truncated; `audit.jsonl` → appended to; `inbox/<agent>` and
/// `.claude` → written into).
#[test]
fn squadd_never_writes_through_a_planted_symlink() {
    // Runs squadd on `root` long enough to start, deliver the backlog, write
    // outputs, state (behind by 20 ms), shared context, notices, summaries,
    // runs and one retention pass.
    fn run_squadd(root: &Path, log: &Path) {
        let log = fs::File::create(log).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_squadd"))
            .arg("--root")
            .arg(root)
            .stderr(log)
            .spawn()
            .unwrap();
        // Stays: squadd runs long enough to do all of the above; no event marks the end.
        std::thread::sleep(Duration::from_millis(2000));
        let _ = child.kill();
        let _ = child.wait();
    }
    let sessions = |rel: &str| {
        rel.replace("/S/", &format!("/{S}/"))
            .replace("/D/", &format!("/{D}/"))
            .replace("session-S.", &format!("session-{S}."))
            .replace("/S", &format!("/{S}"))
    };
    let mut failures = Vec::new();
    // Without links: every row is a path squadd writes (so a row can fail).
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("p");
    project(&clean);
    let under = |all: &[(String, u32, Vec<u8>)], rel: &str| -> Vec<(String, u32, Vec<u8>)> {
        all.iter()
            .filter(|(p, _, _)| p == rel || p.starts_with(&format!("{rel}/")))
            .cloned()
            .collect()
    };
    let before = snapshot(&clean);
    run_squadd(&clean, &tmp.path().join("squadd.log"));
    let after = snapshot(&clean);
    let mut resolved = Vec::new();
    for &(rel, target) in OWN_PATHS {
        let rel = sessions(rel);
        let rel = match rel.strip_suffix('*') {
            Some(prefix) => {
                let (dir, start) = prefix.rsplit_once('/').unwrap();
                let found = fs::read_dir(clean.join(dir)).ok().and_then(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .find(|n| n.starts_with(start))
                });
                match found {
                    Some(n) => format!("{dir}/{n}"),
                    None => {
                        failures.push(format!("{rel}: not written without a link"));
                        continue;
                    }
                }
            }
            None => rel,
        };
        // A directory squadd made or wrote into; a file (or the socket)
        // squadd made or changed, where it is or in the archived session.
        let written = match target {
            Target::Dir => clean.join(&rel).is_dir() && under(&before, &rel) != under(&after, &rel),
            Target::File => [rel.clone(), rel.replace("/sessions/", "/archives/")]
                .iter()
                .any(|r| under(&before, r) != under(&after, r) && !under(&after, r).is_empty()),
        };
        if !written {
            failures.push(format!("{rel}: not written without a link"));
        }
        resolved.push((rel, target));
    }
    for (rel, target) in resolved {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        let outside = tmp.path().join("outside");
        project(&root);
        let at = root.join(&rel);
        if fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            // The link's target holds what was there, so squadd finds its
            // input through it and would write there if it followed.
            copy_tree(&at, &outside);
            fs::remove_dir_all(&at).unwrap();
        } else {
            let _ = fs::remove_file(&at);
        }
        fs::create_dir_all(outside.join("sub")).unwrap();
        fs::write(outside.join("file"), "keep\n").unwrap();
        fs::write(outside.join("sub/state.json"), "keep\n").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o755)).unwrap();
        plant_link(&at, &outside, target);
        let before = snapshot(&outside);
        run_squadd(&root, &tmp.path().join("squadd.log"));
        if snapshot(&outside) != before {
            failures.push(format!(
                "{rel}: the target outside changed: {:?}",
                snapshot(&outside)
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// [`project`], plus a task allowed `src/**` (for locks) and a delivered
/// message in bob's inbox (for `inbox ack`).
fn ctl_project(root: &Path) {
    project(root);
    let s = root.join(".squad/sessions").join(S);
    write_plan(
        &s,
        "task_lock",
        "alice",
        "boundaries:\n  allowed:\n    - src/**\n",
    );
    // An entry waiting in the decisions inbox (for `memory merge`).
    ctl_ok(
        root,
        &words("memory add --type decision --summary setup --author bob --details d"),
    );
    let new = s.join("inbox/bob/new");
    fs::create_dir_all(&new).unwrap();
    fs::write(
        new.join("0-critical-20240115T100000Z-msg_1.md"),
        fs::read(s.join("role-comm-alice-to-bob-msg_1.md")).unwrap(),
    )
    .unwrap();
}

/// The command of the rows of [`CTL_WRITES`] that `lock acquire` writes.
const LOCK_ACQUIRE: &str = "lock acquire --session S --agent alice --task task_lock src/x";

/// Every path squadctl writes (creates, replaces, appends to, renames into,
/// locks) for the command that writes it (a command line, see [`words`]).
/// The symlink test plants a link at each: a new squadctl write belongs in
/// this table. `S` is the session.
const CTL_WRITES: &[(&str, Target, &str)] = &[
    (".squad", Target::Dir, "init"),
    ("AGENTS.md", Target::File, "init"),
    (".squad/sessions", Target::Dir, "session new --slug x"),
    (
        ".squad/sessions/S",
        Target::Dir,
        "send --session S --from alice --to bob --priority high --type notification --subject s --message m",
    ),
    (
        ".squad/sessions/S",
        Target::Dir,
        "task new --session S --agent alice --id task_new --instruction x",
    ),
    (
        ".squad/sessions/S",
        Target::Dir,
        "progress --session S --task task_alice --agent alice --status in_progress --percent 10",
    ),
    (
        ".squad/sessions/S",
        Target::Dir,
        "report-error --session S --task task_alice --agent alice --severity error --type build --message m",
    ),
    (".squad/sessions/S/locks", Target::Dir, LOCK_ACQUIRE),
    (".squad/run", Target::Dir, LOCK_ACQUIRE),
    (".squad/run/locks.mutex", Target::File, LOCK_ACQUIRE),
    (".squad/audit.jsonl", Target::File, LOCK_ACQUIRE),
    (".squad/run/gc.lock", Target::File, "gc"),
    (
        ".squad/sessions/S/inbox/bob/cur",
        Target::Dir,
        "inbox ack bob msg_1",
    ),
    (".squad/decisions/inbox", Target::Dir, "memory merge"),
    (
        ".claude",
        Target::Dir,
        "guard install --claude --program /bin/true",
    ),
    (
        ".codex",
        Target::Dir,
        "guard install --codex --program /bin/true",
    ),
    (
        ".github",
        Target::Dir,
        "guard install --copilot --program /bin/true",
    ),
    (
        ".squad/skills",
        Target::Dir,
        "skills new my-skill --description 'Does x. Use when y.'",
    ),
    (
        ".squad/decisions/inbox",
        Target::Dir,
        "memory add --type decision --summary s --author alice --details d",
    ),
];

/// squadctl never writes through a symlink an agent planted where it
/// writes: for every row of [`CTL_WRITES`], the outside target is unchanged
/// (the command refuses naming the link, or replaces the link itself).
#[test]
fn squadctl_never_writes_through_a_planted_symlink() {
    let mut failures = Vec::new();
    for &(rel, target, line) in CTL_WRITES {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        let outside = tmp.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("file"), "keep\n").unwrap();
        ctl_project(&root);
        // The command works on an untouched project (so the row can fail:
        // a refusal below is about the link).
        let clean = tmp.path().join("clean");
        ctl_project(&clean);
        let args: Vec<&str> = words(line)
            .into_iter()
            .map(|a| if a == "S" { S } else { a })
            .collect();
        // Task assignments are the lead's (issue 24): `task new` runs as it.
        let agent = if args.starts_with(&["task", "new"]) {
            "lead"
        } else {
            "alice"
        };
        let as_alice = |root: &Path| run(ctl(root).env("SQUAD_AGENT", agent).args(&args));
        let ok = as_alice(&clean);
        if !ok.status.success() {
            failures.push(format!(
                "{rel} ({}): fails without a link: {}",
                args.join(" "),
                String::from_utf8_lossy(&ok.stderr).trim()
            ));
            continue;
        }
        let at = root.join(
            rel.replace("/S/", &format!("/{S}/"))
                .replace("/S", &format!("/{S}")),
        );
        if fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            // The link's target holds what was there, so the command finds
            // its input and would write through if it followed.
            fs::remove_dir_all(&outside).unwrap();
            copy_tree(&at, &outside);
            fs::remove_dir_all(&at).unwrap();
        } else {
            let _ = fs::remove_file(&at);
        }
        plant_link(&at, &outside, target);
        let before = snapshot(&outside);
        let out = as_alice(&root);
        let after = snapshot(&outside);
        if after != before {
            failures.push(format!(
                "{rel} ({}): the target outside changed (exit {:?}, {}): {after:?}",
                args.join(" "),
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Every path someone else can create that squadd or squadctl opens. The
/// FIFO test plants a FIFO at each: a new kind of file read belongs here.
const READ_PATHS: &[&str] = &[
    ".squad/policies.yaml",
    ".squad/audit.jsonl",
    ".squad/run/state.json",
    ".squad/run/squadd.pid",
    ".claude/context/shared-context.json",
    ".squad/sessions/S/session-status.md",
    ".squad/sessions/S/role-plan-alice-task_alice.md",
    ".squad/sessions/S/role-comm-alice-to-bob-msg_1.md",
    ".squad/sessions/S/locks/x.json",
    ".squad/sessions/S/inbox/bob/new/0-critical-20240115T100000Z-msg_1.md",
    ".squad/team.md",
    ".squad/agents/alice/charter.md",
    ".squad/skills/demo/SKILL.md",
    ".squad/config.json",
    ".squad/decisions.md",
    ".squad/decisions/inbox/*",
    ".squad/run/hooks.jsonl",
];

/// [`project`] with every file of [`READ_PATHS`] in place (a team, a
/// skill, config.json, memory, a delivered message), so a FIFO planted at
/// one is met where the file was.
fn read_project(root: &Path) {
    ctl_project(root);
    let squad = root.join(".squad");
    for (rel, text) in [
        (
            "team.md",
            "# Team\n\n## Members\n\n| Name | Role | Charter |\n|---|---|---|\n| alice | Dev | .squad/agents/alice/charter.md |\n",
        ),
        ("agents/alice/charter.md", "# alice — Dev\n"),
        (
            "skills/demo/SKILL.md",
            "---\nname: demo\ndescription: Does x. Use when y.\n---\nbody\n",
        ),
        ("config.json", "{}\n"),
        ("decisions.md", "# Decisions\n"),
        ("run/hooks.jsonl", ""),
    ] {
        fs::create_dir_all(squad.join(rel).parent().unwrap()).unwrap();
        fs::write(squad.join(rel), text).unwrap();
    }
}

/// A FIFO (or any non-file) where a file is expected never hangs squadd or
/// squadctl: squadd becomes ready or refuses with an error, answers, and
/// stops on SIGTERM; `status`, `lock list`, `gc --dry-run`, `inbox next`,
/// `validate`, `team validate`, `skills list`, `config show` and `memory
/// validate` return.
#[test]
fn a_fifo_at_any_path_read_never_hangs_squadd_or_squadctl() {
    use std::os::unix::net::UnixDatagram;
    let mut failures = Vec::new();
    for rel in READ_PATHS {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        read_project(&root);
        let mut at = root.join(rel.replace("/S/", &format!("/{S}/")));
        if let Some(prefix) = rel.strip_suffix("/*") {
            // The one file there (its name is chosen by squadctl).
            at = fs::read_dir(root.join(prefix))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
        }
        let _ = fs::remove_file(&at);
        fs::create_dir_all(at.parent().unwrap()).unwrap();
        let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "{rel}");
        let sock = tmp.path().join("notify.sock");
        let notify = UnixDatagram::bind(&sock).unwrap();
        notify
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let log = fs::File::create(tmp.path().join("squadd.log")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_squadd"))
            .arg("--root")
            .arg(&root)
            .env("NOTIFY_SOCKET", &sock)
            .stderr(log)
            .spawn()
            .unwrap();
        let mut buf = [0u8; 4096];
        let ready = loop {
            match notify.recv(&mut buf) {
                Ok(n) if String::from_utf8_lossy(&buf[..n]).contains("READY=1") => break true,
                Ok(_) => continue,
                // A signal to the test process (another test's child
                // exiting) interrupts the wait; it is not squadd's answer.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break false,
            }
        };
        if !ready && child.try_wait().unwrap().is_none() {
            failures.push(format!("{rel}: squadd neither ready nor stopped in 15 s"));
        }
        for args in [
            &["status", "--json"][..],
            &["lock", "list"][..],
            &["gc", "--dry-run"][..],
            &["inbox", "next", "bob"][..],
            &["validate"][..],
            &["team", "validate"][..],
            &["skills", "list"][..],
            &["config", "show"][..],
            &["memory", "validate"][..],
        ] {
            let mut ctl = squadctl()
                .args(args)
                .current_dir(&root)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            if exit_within(&mut ctl, Duration::from_secs(15)).is_none() {
                failures.push(format!("{rel}: squadctl {args:?} hung"));
            }
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        if exit_within(&mut child, Duration::from_secs(15)).is_none() {
            failures.push(format!("{rel}: squadd ignored SIGTERM"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `squadctl gc` racing a swap of `.squad/sessions` for a symlink to a
/// directory outside the root, with same-named directories there: nothing
/// outside the root ever changes (acting by path deleted them 2 in 150
/// rounds). Bounded: 200 rounds, well under a minute.
#[test]
fn gc_racing_a_symlink_swap_of_sessions_never_touches_the_outside() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("victim");
    let names: Vec<String> = (0..6)
        .map(|i| format!("2024010{}T000000Z-failed", i + 1))
        .collect();
    for n in &names {
        fs::create_dir_all(outside.join(n)).unwrap();
        fs::write(outside.join(n).join("session-status.md"), "session_id: sess_victim\nstarted_at: 2023-01-01T00:00:00Z\nstatus: failed\nfailed_at: 2023-01-02T00:00:00Z\n").unwrap();
        fs::write(outside.join(n).join("precious"), "keep\n").unwrap();
    }
    let before = snapshot(&outside);
    for round in 0..200 {
        let root = tmp.path().join(format!("p{round}"));
        let sessions = root.join(".squad/sessions");
        fs::create_dir_all(root.join(".squad/run")).unwrap();
        for n in &names {
            fs::create_dir_all(sessions.join(n)).unwrap();
            fs::write(sessions.join(n).join("session-status.md"), "session_id: sess_x\nstarted_at: 2023-01-01T00:00:00Z\nstatus: failed\nfailed_at: 2023-01-02T00:00:00Z\n").unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let stop = stop.clone();
            let (sessions, outside) = (sessions.clone(), outside.clone());
            let real = root.join(".squad/sessions.real");
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if fs::rename(&sessions, &real).is_ok() {
                        let _ = symlink(&outside, &sessions);
                        // Stays (pacing): the swap races gc at random instants.
                        std::thread::sleep(Duration::from_micros(300));
                        let _ = fs::remove_file(&sessions);
                        let _ = fs::rename(&real, &sessions);
                        // Stays (pacing): the swap races gc at random instants.
                        std::thread::sleep(Duration::from_micros(300));
                    }
                }
            })
        };
        let _ = ctl_run(&root, &["gc", "--now", "2024-06-01T12:00:00Z"]);
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(snapshot(&outside), before, "round {round}");
    }
}

fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// `events --follow` clients that leave give their descriptor back at once,
/// not at the next event (300 short-lived followers on an idle daemon
/// exhausted a 256-fd limit), and concurrent followers are capped.
#[test]
fn followers_that_leave_are_noticed_at_once_and_followers_are_capped() {
    use crate::daemon::{Daemon, eventually};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let (_tmp, root) = project_in_tmp();
    let d = Daemon::start(&root);
    let sock = root.join(".squad/run/squadd.sock");
    let request = b"{\"protocol_version\":1,\"method\":\"events\",\"follow\":true}\n";
    // Stays: squadd's start-up work (notices, their deliveries, the hook
    // journal) opens files of its own for a moment and no event marks its
    // end: count once it is quiet.
    std::thread::sleep(Duration::from_millis(500));
    let baseline = open_fds(d.pid());
    for _ in 0..100 {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(request).unwrap();
        drop(s);
    }
    eventually("the followers' descriptors are closed", || {
        // 100 leaked followers would be 100 more; a margin for squadd's
        // own short-lived files.
        (open_fds(d.pid()) <= baseline + 10).then_some(())
    });
    // At most 64 at once; the next is told why.
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(request).unwrap();
        held.push(s);
    }
    // Every one of them taken in before the next: squadd sends a follower
    // its backlog once it holds a follower's slot.
    for s in &held {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut first = String::new();
        BufReader::new(s)
            .read_line(&mut first)
            .expect("a follower's first line (its backlog)");
    }
    let mut extra = UnixStream::connect(&sock).unwrap();
    extra.write_all(request).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(&extra);
    let refused = loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break String::new();
        }
        if line.contains("too many event followers") {
            break line;
        }
    };
    assert!(
        refused.contains("too many event followers (64)"),
        "{refused}"
    );
    drop(held);
    assert_eq!(d.terminate().0, 0);
}

/// A policy duration past the maximum is refused with its field named
/// (`escalate_after.high: 100000000d` crashed squadd on every start; a
/// bare 2^64-1 silently became 0).
#[test]
fn durations_past_the_maximum_are_refused_naming_the_field() {
    let (tmp, root) = project_in_tmp();
    for (text, field) in [
        (
            "messages:\n  escalate_after:\n    high: 100000000d\n",
            "messages.escalate_after.high",
        ),
        ("locks:\n  max_ttl: 18446744073709551615\n", "locks.max_ttl"),
    ] {
        write_policy(&root, text);
        let out = ctl_run(&root, &["gc", "--dry-run"]);
        assert_eq!(code(&out), 2, "{text}");
        let err = stderr(&out);
        assert!(
            err.contains(field) && err.contains("maximum of 3650d"),
            "{err}"
        );
        // squadd runs on the defaults and names the field (it used to exit,
        // a restart loop under systemd; before that it panicked).
        let log_path = tmp.path().join("squadd.log");
        let log = fs::File::create(&log_path).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_squadd"))
            .arg("--root")
            .arg(&root)
            .stderr(log)
            .spawn()
            .unwrap();
        crate::daemon::eventually("squadd names the refused field", || {
            fs::read_to_string(&log_path)
                .ok()
                .filter(|l| l.contains(field))
                .map(|_| ())
        });
        assert!(
            child.try_wait().unwrap().is_none(),
            "squadd exited: {}",
            fs::read_to_string(&log_path).unwrap_or_default()
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A session prepared under another name and then renamed into place
/// (copy-then-rename) is never indexed under the temporary name, and the
/// temporary directory is never recreated by a late write.
#[test]
fn a_session_copied_then_renamed_is_not_written_under_its_temporary_name() {
    use crate::daemon::{Daemon, eventually};
    let (_tmp, root) = project_in_tmp();
    let d = Daemon::start(&root);
    let sessions = root.join(".squad/sessions");
    let staging = sessions.join("20240116T000001Z.tmp");
    fs::create_dir(&staging).unwrap();
    for e in fs::read_dir(sessions.join(S)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            fs::copy(e.path(), staging.join(e.file_name())).unwrap();
        }
    }
    // Stays: proves nothing happens. Not a session name: squadd writes
    // nothing into it (it delivered the message into `staging/inbox/` and
    // rewrote its status file).
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        !staging.join("inbox").exists(),
        "written into a non-session"
    );
    fs::rename(&staging, sessions.join("20240116T000001Z")).unwrap();
    eventually("the renamed session's message delivered", || {
        fs::read_dir(sessions.join("20240116T000001Z/inbox/bob/new"))
            .ok()?
            .next()
            .map(|_| ())
    });
    // Stays: proves nothing happens; a re-created directory would show by now.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!staging.exists(), "the temporary directory came back");
    let leftovers: Vec<String> = fs::read_dir(sessions.join("20240116T000001Z"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(d.terminate().0, 0);
}

/// A protocol file swapped by rename between a regular file and a FIFO,
/// over and over for 2 s while squadd runs: squadd never blocks on the FIFO
/// (every read is non-blocking and checked on the open file), keeps
/// answering `squadctl status`, and stops cleanly.
#[test]
fn a_file_swapped_with_a_fifo_by_rename_never_stalls_squadd() {
    use crate::daemon::Daemon;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (tmp, root) = project_in_tmp();
    let d = Daemon::start(&root);
    let target = root
        .join(".squad/sessions")
        .join(S)
        .join("role-plan-alice-task_alice.md");
    // Staged on the same file system, outside the session.
    let stage = tmp.path().join("stage");
    fs::create_dir(&stage).unwrap();
    let (reg, fifo) = (stage.join("reg"), stage.join("fifo"));
    fs::rename(&target, &reg).unwrap();
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let swapper = {
        let (stop, swaps, target) = (stop.clone(), swaps.clone(), target.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for staged in [&reg, &fifo] {
                    fs::rename(staged, &target).unwrap();
                    // Stays (pacing): the writer races squadd.
                    std::thread::sleep(Duration::from_micros(500));
                    fs::rename(&target, staged).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Leave the plan in place, as a regular file.
            fs::rename(&reg, &target).unwrap();
        })
    };
    let start = std::time::Instant::now();
    let mut answers = 0;
    let mut failures = Vec::new();
    // squadctl falls back to reading the files when squadd does not answer
    // within 2 s: only `"state": "running"` is squadd's answer.
    let answered = |out: &Path| {
        let text = fs::read_to_string(out).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&text)
            .is_ok_and(|v| v["daemon"]["state"] == "running")
    };
    let out = tmp.path().join("status.json");
    while start.elapsed() < Duration::from_secs(2) {
        let mut ctl = squadctl()
            .args(["status", "--json"])
            .current_dir(&root)
            .stdout(fs::File::create(&out).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        match exit_within(&mut ctl, Duration::from_secs(10)) {
            Some(0) if answered(&out) => answers += 1,
            other => failures.push(format!(
                "status after {:?}: {other:?}: {}",
                start.elapsed(),
                fs::read_to_string(&out).unwrap_or_default()
            )),
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        answers > 0 && swaps.load(Ordering::Relaxed) > 100,
        "{answers} answers"
    );
    // Still answering once the swapping stops, and stops cleanly.
    let status = ctl_run(&root, &["status", "--json"]);
    assert_eq!(code(&status), 0, "{}", stderr(&status));
    fs::write(&out, stdout(&status)).unwrap();
    assert!(answered(&out), "{}", stdout(&status));
    assert_eq!(d.terminate().0, 0);
}

/// Issue 26 item 8: the largest number JSON allows in every duration and
/// count field of config.json is refused by validation with the field and
/// its maximum (it was accepted, and a run's deadline `now + 2^63 ms` would
/// overflow the clock); squadd started on it keeps running and answers.
#[test]
fn maximal_config_numbers_are_refused_and_squadd_keeps_answering() {
    let (tmp, _session) = quiet_two_agent_project(S);
    let root = tmp.path();
    fs::write(
        root.join(".squad/config.json"),
        "{\n  \"version\": 1,\n  \"sessions\": {\n    \"defaultTimeoutMs\": 9223372036854775807,\n    \"maxConcurrent\": 18446744073709551615\n  }\n}\n",
    )
    .unwrap();
    let out = ctl_run(root, &["config", "validate"]);
    let printed = stdout(&out);
    assert_eq!(code(&out), 1, "{printed}{}", stderr(&out));
    assert!(
        printed.contains("config.json:4:5: error[config-bad-value]: `sessions.defaultTimeoutMs` is 9223372036854775807, above the maximum of 315360000000"),
        "{printed}"
    );
    assert!(
        printed.contains(
            "`sessions.maxConcurrent` is 18446744073709551615, above the maximum of 100000"
        ),
        "{printed}"
    );
    let _d = crate::daemon::Daemon::start(root);
    let status = status_json(root);
    assert!(status.is_object(), "{status}");
}
