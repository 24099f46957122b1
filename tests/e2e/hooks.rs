//! Notify hooks under a burst and across restarts (issue 11): bounded
//! concurrency in priority order, at least once.

use crate::daemon::{Daemon, eventually};
use crate::support::{write_numbered_message, write_policy};
use std::fs;
use std::path::Path;

const S: &str = "20240115T100000Z-hooks";

pub(crate) fn project(policy: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join(".squad/sessions").join(S);
    fs::create_dir_all(&s).unwrap();
    fs::create_dir_all(tmp.path().join(".squad/run")).unwrap();
    fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    write_policy(tmp.path(), policy);
    tmp
}

/// Writes message `i` as an agent would (see [`write_numbered_message`]).
pub(crate) fn write_message(root: &Path, i: usize, priority: &str) {
    write_numbered_message(&root.join(".squad/sessions").join(S), i, priority);
}

/// A notify policy for bob running `script` (sh) with at most `max` at once.
/// No escalations: their re-notifications would run hooks too.
pub(crate) fn policy(max: usize, script: &str) -> String {
    format!(
        "hooks:\n  max_concurrent: {max}\nmessages:\n  escalate_after:\n    critical: none\n    high: none\n    medium: none\n  notify:\n    bob:\n      command: [\"sh\", \"-c\", {}]\n      timeout: 30s\n      retries: 0\n",
        serde_json::to_string(script).unwrap()
    )
}

fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_burst_runs_at_most_max_concurrent_hooks() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, log) = (tmp.path().join("running"), tmp.path().join("hook.log"));
    fs::create_dir_all(&run).unwrap();
    // Each hook counts the hooks running beside it (itself included).
    let script = format!(
        ": > {run}/$$; n=$(ls {run} | wc -l); echo $n >> {log}; sleep 0.2; rm -f {run}/$$",
        run = run.display(),
        log = log.display()
    );
    let p = project(&policy(3, &script));
    let root = p.path();
    let _d = Daemon::start(root);
    for i in 0..45 {
        write_message(root, i, "medium");
    }
    let seen = eventually("all 45 hooks ran", || {
        let l = lines(&log);
        (l.len() >= 45).then_some(l)
    });
    let max: usize = seen
        .iter()
        .map(|l| l.trim().parse::<usize>().unwrap())
        .max()
        .unwrap();
    assert!(max <= 3, "{max} hooks ran at once (limit 3): {seen:?}");
    assert_eq!(seen.len(), 45, "each once");
}

#[test]
fn a_critical_message_s_hook_goes_before_those_already_queued() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, go) = (tmp.path().join("hook.log"), tmp.path().join("go"));
    // Each hook logs its priority, then waits for the test's go.
    let script = format!(
        "echo $SQUAD_PRIORITY >> {}; while [ ! -e {} ]; do sleep 0.02; done",
        log.display(),
        go.display()
    );
    let p = project(&policy(1, &script));
    let root = p.path();
    let _d = Daemon::start(root);
    for i in 0..8 {
        write_message(root, i, "medium");
    }
    // The first is running (one at a time); the other seven wait.
    eventually("the first hook started", || {
        (!lines(&log).is_empty()).then_some(())
    });
    write_message(root, 100, "critical");
    let new = root.join(".squad/sessions").join(S).join("inbox/bob/new");
    eventually("the critical message delivered (its hook queued)", || {
        fs::read_dir(&new)
            .ok()?
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().contains("msg_00100"))
            .then_some(())
    });
    fs::write(&go, "").unwrap();
    let seen = eventually("all 9 hooks ran", || {
        let l = lines(&log);
        (l.len() >= 9).then_some(l)
    });
    assert_eq!(
        seen[1], "critical",
        "critical next, ahead of the queued: {seen:?}"
    );
}

#[test]
fn hooks_pending_or_running_at_sigterm_run_after_a_restart() {
    pending_hooks_survive(|d| {
        let (code, _) = d.terminate();
        assert_eq!(code, 0);
    });
}

#[test]
fn hooks_pending_or_running_at_kill_9_run_after_a_restart() {
    pending_hooks_survive(Daemon::kill9);
}

fn pending_hooks_survive(stop: impl FnOnce(Daemon)) {
    let tmp = tempfile::tempdir().unwrap();
    let (log, running) = (tmp.path().join("hook.log"), tmp.path().join("running"));
    fs::create_dir_all(&running).unwrap();
    // Logged when the hook finishes (a hook stopped halfway has not run):
    // the critical one at once, the others once the test says go. Each
    // marks itself running by its pid.
    let go = tmp.path().join("go");
    let script = format!(
        ": > {r}/$$; if [ \"$SQUAD_PRIORITY\" != critical ]; then while [ ! -e {g} ]; do sleep 0.02; done; fi; echo \"$SQUAD_MESSAGE_PATH\" >> {l}; rm -f {r}/$$",
        r = running.display(),
        g = go.display(),
        l = log.display()
    );
    let p = project(&policy(4, &script));
    let root = p.path();
    let d = Daemon::start(root);
    write_message(root, 0, "critical");
    for i in 1..12 {
        write_message(root, i, "high");
    }
    eventually("the critical message's hook finished", || {
        (!lines(&log).is_empty()).then_some(())
    });
    // Some hooks are running, the rest queued. squadd stops, and with it
    // the hooks it started (as systemd stops a service's whole cgroup).
    stop(d);
    for e in fs::read_dir(&running).unwrap() {
        let pid = e.unwrap().file_name().to_string_lossy().into_owned();
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid])
            .stderr(std::process::Stdio::null())
            .status();
    }
    assert_eq!(lines(&log).len(), 1, "only the critical hook finished");
    fs::write(&go, "").unwrap();
    let _d = Daemon::start(root);
    let seen = eventually("every message's hook ran", || {
        let l = lines(&log);
        (0..12)
            .all(|i| l.iter().any(|p| p.ends_with(&format!("msg_{i:05}.md"))))
            .then_some(l)
    });
    // At least once: only hooks cut off mid-run (at most 4) run twice.
    assert!(seen.len() <= 16, "{seen:?}");
    // And the journal no longer holds work once everything is done.
    eventually("the journal says all done", || {
        let j = fs::read_to_string(root.join(".squad/run/hooks.jsonl")).ok()?;
        let pending = j.matches("\"op\":\"pending\"").count();
        let done = j.matches("\"op\":\"done\"").count();
        (pending == done).then_some(())
    });
}

/// Runs `squadctl ARGS` in `root`: its exit code and its JSON output.
fn ctl_json(root: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let out = crate::support::run(crate::support::squadctl().args(args).current_dir(root));
    let v = serde_json::from_str(&crate::support::stdout(&out)).unwrap_or_default();
    (crate::support::code(&out), v)
}

/// The named check of `health --json`.
fn check<'a>(h: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    h["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {h:#}"))
}

#[test]
fn health_and_status_show_hooks_queued_behind_a_blocking_one_then_done() {
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    // Each hook waits for the test's go: one runs, the rest queue.
    let script = format!("while [ ! -e {} ]; do sleep 0.02; done", go.display());
    let p = project(&policy(1, &script));
    let root = p.path();
    let _d = Daemon::start(root);
    for i in 0..20 {
        write_message(root, i, "medium");
    }
    let h = eventually("health shows 19 queued behind 1 running", || {
        let (_, h) = ctl_json(root, &["health", "--json"]);
        let hooks = &h["hooks"][0];
        (hooks["queued"] == 19 && hooks["running"] == 1).then_some(h)
    });
    let hooks = &h["hooks"][0];
    assert_eq!(hooks["max_concurrent"], 1, "{h:#}");
    assert_eq!(hooks["configured"], true, "{h:#}");
    assert!(hooks["oldest_queued_secs"].is_u64(), "{h:#}");
    assert_eq!(hooks["failed"], 0, "{h:#}");
    let queue = check(&h, "hooks");
    assert_eq!(queue["verdict"], "ok", "a young queue is fine: {queue}");
    assert!(
        queue["value"]
            .as_str()
            .unwrap()
            .starts_with("19 queued, oldest waiting"),
        "{queue}"
    );
    // Human output names the check too.
    let out = crate::support::run(crate::support::squadctl().arg("health").current_dir(root));
    let text = crate::support::stdout(&out);
    assert!(text.contains("19 queued"), "{text}");
    // status --json has the same figures per root.
    let (_, s) = ctl_json(root, &["status", "--json"]);
    assert_eq!(s["roots"][0]["hooks"]["queued"], 19, "{s:#}");
    assert_eq!(s["roots"][0]["hooks"]["running"], 1, "{s:#}");
    let out = crate::support::run(crate::support::squadctl().arg("status").current_dir(root));
    let text = crate::support::stdout(&out);
    assert!(text.contains("hooks: 19 queued (oldest"), "{text}");

    fs::write(&go, "").unwrap();
    let h = eventually("every hook ran", || {
        let (_, h) = ctl_json(root, &["health", "--json"]);
        (h["hooks"][0]["succeeded"] == 20).then_some(h)
    });
    let hooks = &h["hooks"][0];
    assert_eq!(hooks["queued"], 0, "{h:#}");
    assert_eq!(hooks["running"], 0, "{h:#}");
    assert!(hooks["oldest_queued_secs"].is_null(), "{h:#}");
    assert_eq!(check(&h, "hook-failures")["verdict"], "ok", "{h:#}");
}

#[test]
fn health_shows_a_failing_hook_warn_then_critical_when_it_keeps_failing() {
    let p = project(&policy(1, "echo no >&2; exit 3"));
    let root = p.path();
    let _d = Daemon::start(root);
    write_message(root, 0, "high");
    let (code, h) = eventually("health shows the failure", || {
        let (code, h) = ctl_json(root, &["health", "--json"]);
        (h["hooks"][0]["failed"] == 1).then_some((code, h))
    });
    let hooks = &h["hooks"][0];
    assert_eq!(hooks["failed_last_hour"], 1, "{h:#}");
    assert_eq!(hooks["consecutive_failures"], 1, "{h:#}");
    assert!(
        hooks["last_error"]
            .as_str()
            .unwrap()
            .contains("exited with exit status: 3"),
        "{h:#}"
    );
    let failures = check(&h, "hook-failures");
    assert_eq!(failures["verdict"], "warn", "{failures}");
    assert_eq!(code, 1, "a warning exits 1");
    for i in 1..5 {
        write_message(root, i, "high");
    }
    let h = eventually("five failures in a row", || {
        let (_, h) = ctl_json(root, &["health", "--json"]);
        (h["hooks"][0]["consecutive_failures"] == 5).then_some(h)
    });
    assert_eq!(check(&h, "hook-failures")["verdict"], "critical", "{h:#}");
    let out = crate::support::run(crate::support::squadctl().arg("health").current_dir(root));
    let text = crate::support::stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("CRITICAL hook-failures") && l.contains("5 in a row")),
        "{text}"
    );
}
