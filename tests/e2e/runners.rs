//! Agent runners (issue 17) with the real binaries: squadd starts a fake
//! agent (a shell script) for each ready task; the agent reads its prompt,
//! reports with `squadctl progress` and completes.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The fake agent. It appends `start <task> <ns>` / `end <task> <ns>` to
/// `$TRACE`, checks its prompt names its task, reports in progress, works
/// (`$WORK` seconds, or until `$GATE` exists), reports completed and exits.
/// `$MODE=fail` exits 3 without reporting; `$MODE=env` prints its
/// environment and exits 3; `$MODE=args` prints its arguments after the
/// prompt and `$SQUAD_MODEL`, and exits 3; `$MODE=hang` starts a child and sleeps forever;
/// `$MODE=escape` double-forks a child into a session of its own that
/// ignores SIGTERM, then sleeps; `$MODE=flood` leaves a child that ignores
/// SIGTERM writing output as fast as it can, writes twice the 64 KB log cap
/// itself (so the cap is passed before it exits, however loaded the
/// machine), and exits.
const AGENT: &str = r#"#!/bin/sh
now() { date +%s%N; }
echo "start $SQUAD_TASK $(now)" >> "$TRACE"
grep -q "$SQUAD_TASK" "$1" || { echo "prompt $1 does not name $SQUAD_TASK"; exit 9; }
case "$MODE" in
  fail) echo "failing on purpose"; exit 3 ;;
  env) env; echo "PATH=[$PATH]"; echo "secret=[$SQUAD_TEST_SECRET]"; exit 3 ;;
  args) shift; echo "argv=[$*]"; echo "model=[${SQUAD_MODEL-unset}]"; exit 3 ;;
  escape) sh -c 'setsid sh -c "trap \"\" TERM; echo escaped \$\$ >> \"$TRACE\"; exec >/dev/null 2>&1; while :; do sleep 0.1; done" &'; sleep 1000; exit 0 ;;
  flood) sh -c 'trap "" TERM; while :; do echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef; done' &
    i=0; while [ $i -lt 2100 ]; do echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef; i=$((i+1)); done; exit 0 ;;
  hang) sleep 1000 & echo "child $!" >> "$TRACE"; sleep 1000; exit 0 ;;
esac
"$SQUADCTL" progress --status in_progress --percent 10 --action "working" -q || exit 4
if [ -n "$GATE" ]; then
  while [ ! -e "$GATE" ]; do sleep 0.05; done
else
  sleep "${WORK:-0.3}"
fi
echo "output after the work"
echo "end $SQUAD_TASK $(now)" >> "$TRACE"
"$SQUADCTL" progress --status completed --percent 100 -q || exit 5
"#;

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    session: PathBuf,
    trace: PathBuf,
}

/// A project with one session, the fake agent installed as the runner of
/// every agent (`extra` is appended to its runner entry), and config.json.
fn project(env: &[(&str, &str)], runner_extra: &str, runners_extra: &str, config: &str) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "runs");
    let agent = root.join("fake-agent.sh");
    fs::write(&agent, AGENT).unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    let trace = root.join("trace.log");
    let mut env_yaml = format!(
        "        TRACE: \"{}\"\n        SQUADCTL: \"{}\"\n",
        trace.display(),
        env!("CARGO_BIN_EXE_squadctl")
    );
    for (k, v) in env {
        env_yaml.push_str(&format!("        {k}: \"{v}\"\n"));
    }
    let policy = format!(
        "runners:\n  dispatch: true\n{runners_extra}  agents:\n    \"*\":\n      command: [\"{}\", \"{{prompt_file}}\"]\n      env:\n{env_yaml}{runner_extra}",
        agent.display()
    );
    write_policy(&root, policy);
    fs::write(root.join(".squad/config.json"), config).unwrap();
    Project {
        _tmp: tmp,
        root,
        session,
        trace,
    }
}

fn task(root: &Path, id: &str, agent: &str, requires: &[&str]) {
    let mut c = ctl(root);
    c.args([
        "task",
        "new",
        "--id",
        id,
        "--agent",
        agent,
        "--instruction",
        &format!("do {id}"),
        "--allow",
        "src/**",
    ]);
    if !requires.is_empty() {
        c.arg("--requires").args(requires);
    }
    ok(run(&mut c));
}

/// [`project`] whose agents work until the returned gate file exists.
fn gated_project(runners_extra: &str, config: &str) -> (Project, PathBuf) {
    let p = project(&[("GATE", "/nonexistent")], "", runners_extra, config);
    let gate = p.root.join("go");
    // The gate path is known only now: rewrite the policy with it.
    let policy = fs::read_to_string(p.root.join(".squad/policies.yaml"))
        .unwrap()
        .replace("/nonexistent", &gate.display().to_string());
    write_policy(&p.root, policy);
    (p, gate)
}

/// How many runs the agents' trace shows started.
fn starts(p: &Project) -> usize {
    trace(p).iter().filter(|e| e.0 == "start").count()
}

fn trace(p: &Project) -> Vec<(String, String, u128)> {
    fs::read_to_string(&p.trace)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((
                w.next()?.to_string(),
                w.next()?.to_string(),
                w.next()?.parse().ok()?,
            ))
        })
        .collect()
}

fn audit(root: &Path) -> String {
    audit_log(root).unwrap_or_default()
}

/// Waits until the session's status says completed.
fn wait_completed(p: &Project) {
    eventually("the session completes", || {
        session_completed(p).then_some(())
    });
}

fn session_completed(p: &Project) -> bool {
    fs::read_to_string(p.session.join("session-status.md"))
        .unwrap_or_default()
        .contains("status: completed")
}

#[test]
fn five_dependent_tasks_run_to_session_completed_with_no_human_step() {
    let p = project(
        &[],
        "",
        "",
        r#"{"version": 1, "sessions": {"maxConcurrent": 2}}"#,
    );
    let _d = Daemon::start(&p.root);
    // t3 after t1; t4 after t1, t2; t5 after t3, t4.
    task(&p.root, "task_t1", "alpha", &[]);
    task(&p.root, "task_t2", "bravo", &[]);
    task(&p.root, "task_t3", "charlie", &["task_t1"]);
    task(&p.root, "task_t4", "delta", &["task_t1", "task_t2"]);
    task(&p.root, "task_t5", "echo", &["task_t3", "task_t4"]);
    wait_completed(&p);

    let t = trace(&p);
    let starts: Vec<_> = t.iter().filter(|e| e.0 == "start").collect();
    assert_eq!(starts.len(), 5, "each task ran once: {t:?}");
    // Never more than maxConcurrent at once (start..end of each run).
    let mut running = 0;
    let mut max = 0;
    let mut events: Vec<_> = t.iter().map(|e| (e.2, e.0 == "start")).collect();
    events.sort();
    for (_, start) in events {
        running += if start { 1 } else { -1 };
        max = max.max(running);
    }
    assert!(max <= 2, "at most 2 at once, saw {max}: {t:?}");
    assert_eq!(max, 2, "the pool was used: {t:?}");
    // Dependents started only after their requirements ended.
    let at = |kind: &str, task: &str| {
        t.iter()
            .find(|e| e.0 == kind && e.1 == task)
            .map(|e| e.2)
            .unwrap()
    };
    for (task, reqs) in [
        ("task_t3", &["task_t1"][..]),
        ("task_t4", &["task_t1", "task_t2"][..]),
        ("task_t5", &["task_t3", "task_t4"][..]),
    ] {
        for r in reqs {
            assert!(at("start", task) > at("end", r), "{task} before {r} ended");
        }
    }
    // The records, the prompt, the events.
    let run_dir = p.session.join("runs/task_t5");
    // The session completes on the agent's report; its exit is seen after.
    let rec: serde_json::Value = eventually("the last run's exit is recorded", || {
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(run_dir.join("run.json")).ok()?).ok()?;
        (v["state"] == "exited").then_some(v)
    });
    assert_eq!(rec["completed"], true);
    assert_eq!(rec["exit"]["code"], 0);
    let prompt = fs::read_to_string(run_dir.join("prompt.md")).unwrap();
    assert!(prompt.contains("do task_t5"), "{prompt}");
    let log = eventually("the pool empties", || {
        let log = audit(&p.root);
        log.contains("\"kind\":\"pool-empty\"").then_some(log)
    });
    assert_eq!(
        log.matches("\"kind\":\"agent-spawned\"").count(),
        5,
        "{log}"
    );
    assert!(log.contains("\"kind\":\"agent-exited\""));
    assert!(log.contains("\"kind\":\"pool-empty\""));
    // squadctl runs --all sees the five ended runs.
    let runs: serde_json::Value =
        serde_json::from_str(&ctl_ok(&p.root, &["runs", "--all", "--json"])).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 5);
}

#[test]
fn dispatch_is_off_by_default() {
    let p = project(&[], "", "", "{}");
    write_policy(&p.root, "");
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    eventually("squadd saw the task", || {
        fs::read_to_string(p.session.join("session-status.md"))
            .ok()?
            .contains("tasks_total: 1")
            .then_some(())
    });
    // The batch that counted the task ends with the runners' dispatch: done.
    batch_finished(&p.root);
    assert!(!p.session.join("runs").exists());
    assert!(trace(&p).is_empty());
}

fn pid_alive(pid: i32) -> bool {
    // kill -0 through the shell's kill: no libc in the tests.
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
        && !fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn a_hanging_agent_is_killed_with_its_group_and_reported() {
    let p = project(
        &[("MODE", "hang")],
        "      timeout: 1s\n      max_retries: 0\n",
        "  grace: 500ms\n",
        "{}",
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    let child: i32 = eventually("the agent started its child", || {
        fs::read_to_string(&p.trace)
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("child ")?.trim().parse().ok())
    });
    eventually("the run is reported timed out", || {
        let rec = fs::read_to_string(p.session.join("runs/task_t1/run.json")).ok()?;
        rec.contains("\"timed-out\"").then_some(())
    });
    let log = audit(&p.root);
    assert!(log.contains("\"kind\":\"agent-timeout\""), "{log}");
    eventually("the agent's child is gone too", || {
        (!pid_alive(child)).then_some(())
    });
    // The lead is told, through a protocol message squadd wrote.
    eventually("a message to the lead", || {
        fs::read_dir(&p.session)
            .ok()?
            .flatten()
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("role-comm-squadd-to-lead-")
            })
            .then_some(())
    });
}

#[test]
fn an_agent_that_exits_early_is_retried_then_escalated() {
    let p = project(
        &[("MODE", "fail")],
        "      max_retries: 1\n",
        "  retry_backoff: 200ms\n",
        "{}",
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    eventually("the retry gave up", || {
        let rec = fs::read_to_string(p.session.join("runs/task_t1/run.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&rec).ok()?;
        (v["attempt"] == 2 && v["held"] == true).then_some(())
    });
    assert_eq!(starts(&p), 2, "one run and one retry");
    // run.json is written first, then the event, then the message.
    let log = eventually("both exits audited", || {
        let log = audit(&p.root);
        (log.matches("\"kind\":\"agent-exited\"").count() == 2).then_some(log)
    });
    assert!(log.contains("retries used up"), "{log}");
    let messages = eventually("two messages to the lead", || {
        let m: Vec<String> = fs::read_dir(&p.session)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("role-comm-squadd-to-lead-"))
            .collect();
        (m.len() == 2).then_some(m)
    });
    let text = fs::read_to_string(p.session.join(&messages[0])).unwrap();
    assert!(text.contains("priority: high"), "{text}");
    // With the tail of run.log, which holds the agent's output.
    assert!(text.contains("failing on purpose"), "{text}");
    let log = fs::read_to_string(p.session.join("runs/task_t1/run.log")).unwrap();
    assert!(log.contains("failing on purpose"), "{log}");
    // Held: nothing more starts, and it validates.
    // Stays: proves nothing happens; a third start would show by now.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(starts(&p), 2);
    ctl_ok(&p.root, &["validate"]);
}

#[test]
fn after_kill_9_live_runs_are_readopted_and_no_task_runs_twice() {
    let (p, gate) = gated_project("", "{}");
    let d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    task(&p.root, "task_t2", "bravo", &[]);
    task(&p.root, "task_t3", "charlie", &["task_t1"]);
    eventually("both ready tasks run", || (starts(&p) == 2).then_some(()));
    // A kill between the spawn and the pid's record is the next test's.
    for t in ["task_t1", "task_t2"] {
        eventually("the pid is recorded", || {
            let v: serde_json::Value = serde_json::from_str(
                &fs::read_to_string(p.session.join("runs").join(t).join("run.json")).ok()?,
            )
            .ok()?;
            (v["pid"].as_u64()? > 0).then_some(())
        });
    }
    d.kill9();
    let d = Daemon::start(&p.root);
    let start = std::time::Instant::now();
    while audit(&p.root).matches("\"kind\":\"run-adopted\"").count() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "not re-adopted:\n{}\n{}",
            audit(&p.root),
            fs::read_to_string(p.session.join("runs/task_t1/run.json")).unwrap_or_default()
        );
        // Poll interval of a wait with a deadline (30 s).
        std::thread::sleep(Duration::from_millis(10));
    }
    let runs = ctl_ok(&p.root, &["runs", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(v[0]["state"], "running");
    assert!(v[0]["rss_bytes"].as_u64().is_some(), "{runs}");
    let status: serde_json::Value =
        serde_json::from_str(&ctl_ok(&p.root, &["status", "--json"])).unwrap();
    assert_eq!(status["runs"].as_array().unwrap().len(), 2);
    let human = ctl_ok(&p.root, &["runs"]);
    assert!(human.contains("task_t1 (alpha) running run 1"), "{human}");
    fs::write(&gate, "").unwrap();
    wait_completed(&p);
    let t = trace(&p);
    for id in ["task_t1", "task_t2", "task_t3"] {
        let n = t.iter().filter(|e| e.0 == "start" && e.1 == id).count();
        assert_eq!(n, 1, "{id} ran {n} times: {t:?}");
    }
    drop(d);
}

#[test]
fn config_show_and_validate() {
    let p = project(
        &[],
        "",
        "",
        "{\n  \"version\": 1,\n  \"defaultModel\": \"m1\",\n  \"sessions\": {\"maxConcurrent\": \"two\"}\n}\n",
    );
    let out = ctl_run(&p.root, &["config", "validate"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("config.json:4:16: error[config-bad-type]"),
        "{}",
        stdout(&out)
    );
    fs::write(
        p.root.join(".squad/config.json"),
        "{\"version\": 1, \"defaultModel\": \"m1\", \"x-other-tool\": true}",
    )
    .unwrap();
    let show: serde_json::Value =
        serde_json::from_str(&ctl_ok(&p.root, &["config", "show", "--json"])).unwrap();
    assert_eq!(show["models"]["default"], "m1");
    assert_eq!(
        show["provenance"]["models.default"],
        "config.json: defaultModel"
    );
    assert_eq!(show["provenance"]["sessions.maxConcurrent"], "default");
    let schema: serde_json::Value =
        serde_json::from_str(&ctl_ok(&p.root, &["config", "schema"])).unwrap();
    assert!(schema["properties"]["sessions"].is_object());
    let same: serde_json::Value =
        serde_json::from_str(&ctl_ok(&p.root, &["schema", "config"])).unwrap();
    assert_eq!(same, schema);
}

#[test]
fn stop_holds_a_task_and_run_starts_it_again_by_hand() {
    let (p, gate) = gated_project("  grace: 200ms\n  idle_after: 300ms\n", "{}");
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    eventually("the run starts", || (starts(&p) == 1).then_some(()));
    // It reported in progress, then wrote nothing: idle.
    eventually("agent-idle", || {
        audit(&p.root)
            .contains("\"kind\":\"agent-idle\"")
            .then_some(())
    });
    // A second start by hand is refused: the task has a run.
    let out = ctl_run(&p.root, &["run", "task_t1"]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("already has a run"),
        "{}",
        stderr(&out)
    );
    ctl_ok(&p.root, &["stop", "task_t1"]);
    eventually("the stop is recorded", || {
        let v: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(p.session.join("runs/task_t1/run.json")).ok()?,
        )
        .ok()?;
        (v["state"] == "stopped" && v["held"] == true && v["exit"].is_object()).then_some(())
    });
    // Stays: proves nothing happens; a held task that starts again would show by now.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(starts(&p), 1, "held");
    let out = ctl_ok(&p.root, &["run", "task_t1"]);
    assert!(out.starts_with("started task_t1"), "{out}");
    fs::write(&gate, "").unwrap();
    wait_completed(&p);
    assert_eq!(starts(&p), 2);
    let out = ctl_run(&p.root, &["stop", "task_t1"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn config_json_is_hot_reloaded_and_an_invalid_edit_keeps_the_previous() {
    let (p, gate) = gated_project("", r#"{"sessions": {"maxConcurrent": 1}}"#);
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    task(&p.root, "task_t2", "bravo", &[]);
    task(&p.root, "task_t3", "charlie", &[]);
    eventually("one run", || (starts(&p) == 1).then_some(()));
    // An invalid edit is refused: still one at a time.
    fs::write(
        p.root.join(".squad/config.json"),
        r#"{"sessions": {"maxConcurrent": 0}}"#,
    )
    .unwrap();
    eventually("the refusal is reported", || {
        audit(&p.root).contains("config-bad-value").then_some(())
    });
    // Stays: proves nothing happens; a run started under the bad config would show by now.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(starts(&p), 1);
    // A valid one is in force at once.
    fs::write(
        p.root.join(".squad/config.json"),
        r#"{"sessions": {"maxConcurrent": 3}}"#,
    )
    .unwrap();
    eventually("three runs", || (starts(&p) == 3).then_some(()));
    fs::write(&gate, "").unwrap();
    wait_completed(&p);
}

#[test]
fn validate_reports_config_json_problems() {
    let p = project(
        &[],
        "",
        "",
        "{\n  \"sessions\": {\"maxConcurrent\": 0}\n}\n",
    );
    let out = ctl_run(&p.root, &["validate", "--json"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("config-bad-value"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn a_run_whose_pid_was_never_recorded_is_found_and_readopted() {
    let (p, gate) = gated_project("", "{}");
    let d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    let rec_path = p.session.join("runs/task_t1/run.json");
    eventually("the run starts and its pid is recorded", || {
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&rec_path).ok()?).ok()?;
        (v["pid"].as_u64()? > 0).then_some(())
    });
    d.kill9();
    // As if squadd died between the spawn and the second write of run.json.
    let mut v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&rec_path).unwrap()).unwrap();
    let pid = v["pid"].clone();
    v["pid"] = 0.into();
    v["process_start"] = 0.into();
    fs::write(&rec_path, serde_json::to_string(&v).unwrap()).unwrap();
    let _d = Daemon::start(&p.root);
    eventually("re-adopted", || {
        audit(&p.root)
            .contains("\"kind\":\"run-adopted\"")
            .then_some(())
    });
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&rec_path).unwrap()).unwrap();
    assert_eq!(v["pid"], pid, "the runner itself, not its children");
    fs::write(&gate, "").unwrap();
    wait_completed(&p);
    assert_eq!(starts(&p), 1);
}

#[test]
fn a_symlinked_runs_folder_is_never_written_through() {
    let p = project(&[], "", "", "{}");
    let elsewhere = p.root.join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, p.session.join("runs")).unwrap();
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    eventually("the start is refused and reported", || {
        audit(&p.root)
            .contains("\"kind\":\"run-failed\"")
            .then_some(())
    });
    assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());
    assert!(trace(&p).is_empty());
}

/// Issue 26 item 6: a secret in squadd's environment (a service's
/// `EnvironmentFile`, a CI secret) reaches neither the agent nor the tail of
/// run.log sent to the lead; a name in `runners.pass_env` does, and PATH
/// leads with the folder of squadctl.
#[test]
fn a_secret_in_squadds_environment_never_reaches_an_agent() {
    let p = project(
        &[("MODE", "env")],
        "      max_retries: 0\n",
        "  pass_env: [SQUAD_TEST_PASSED]\n",
        "{}",
    );
    let _d = Daemon::start_with_env(
        &p.root,
        &[
            ("SQUAD_TEST_SECRET", "hunter2-secret"),
            ("SQUAD_TEST_PASSED", "passed-by-name"),
        ],
    );
    task(&p.root, "task_t1", "alpha", &[]);
    let message = eventually("the lead is told, with the log's tail", || {
        fs::read_dir(&p.session).ok()?.flatten().find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("role-comm-squadd-to-lead-")
                .then(|| fs::read_to_string(e.path()).ok())
                .flatten()
        })
    });
    let log = fs::read_to_string(p.session.join("runs/task_t1/run.log")).unwrap();
    assert!(
        log.contains("SQUAD_TASK=task_t1"),
        "the agent printed its env: {log}"
    );
    assert!(log.contains("secret=[]"), "{log}");
    assert!(!log.contains("hunter2"), "{log}");
    assert!(log.contains("SQUAD_TEST_PASSED=passed-by-name"), "{log}");
    let squadctl_dir = Path::new(env!("CARGO_BIN_EXE_squadctl")).parent().unwrap();
    assert!(
        log.contains(&format!("PATH=[{}:", squadctl_dir.display())),
        "{log}"
    );
    assert!(message.contains("secret=[]"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

/// Issue 38 item 1: squadd names no model of its own. With none in
/// config.json, `--model {model}` and `--model={model}` are left out of
/// the run's command line and `SQUAD_MODEL` is unset, so the agent CLI
/// uses its own current default; a configured model is passed.
#[test]
fn a_run_gets_a_model_option_only_when_config_json_names_a_model() {
    for (config, argv, model) in [
        ("{}", "argv=[]", "model=[unset]"),
        (
            r#"{"models": {"default": "claude-opus-4-8"}}"#,
            "argv=[--model claude-opus-4-8 --model=claude-opus-4-8]",
            "model=[claude-opus-4-8]",
        ),
    ] {
        let p = project(&[("MODE", "args")], "      max_retries: 0\n", "", config);
        let policy = fs::read_to_string(p.root.join(".squad/policies.yaml"))
            .unwrap()
            .replace(
                "\"{prompt_file}\"]",
                "\"{prompt_file}\", \"--model\", \"{model}\", \"--model={model}\"]",
            );
        write_policy(&p.root, policy);
        let _d = Daemon::start(&p.root);
        task(&p.root, "task_m1", "alpha", &[]);
        let log = p.session.join("runs/task_m1/run.log");
        eventually("the agent printed its arguments", || {
            fs::read_to_string(&log)
                .ok()
                .filter(|l| l.contains("model=["))
        });
        let log = fs::read_to_string(&log).unwrap();
        assert!(log.contains(argv), "{config}: {log}");
        assert!(log.contains(model), "{config}: {log}");
        let prompt = fs::read_to_string(p.session.join("runs/task_m1/prompt.md")).unwrap();
        if config == "{}" {
            assert!(prompt.contains("your CLI's default model"), "{prompt}");
        } else {
            assert!(prompt.contains("model `claude-opus-4-8`"), "{prompt}");
        }
        let show = ctl_ok(&p.root, &["config", "show"]);
        let expected = if config == "{}" {
            "models.default = unset (the agent CLI's own default)  (default)"
        } else {
            "models.default = \"claude-opus-4-8\"  (config.json: models.default)"
        };
        assert!(show.contains(expected), "{show}");
    }
}

/// Issue 26 item 7: squadd killed between a run's record and its spawn
/// leaves a `running` run.json without a pid and no process: the run is
/// started again (the same run number), not held for a human.
#[test]
fn a_run_recorded_but_never_started_is_dispatched_again() {
    let p = project(&[], "", "", "{}");
    task(&p.root, "task_t1", "alpha", &[]);
    let dir = p.session.join("runs/task_t1");
    fs::create_dir_all(&dir).unwrap();
    let now = chrono::Utc::now().to_rfc3339();
    let record = serde_json::json!({
        "task": "task_t1", "agent": "alpha",
        "session": p.session.file_name().unwrap().to_string_lossy(),
        "attempt": 1, "state": "running", "pid": 0, "process_start": 0,
        "started_at": now, "deadline": now, "command": [],
    });
    fs::write(dir.join("run.json"), record.to_string()).unwrap();
    let _d = Daemon::start(&p.root);
    wait_completed(&p);
    assert_eq!(starts(&p), 1, "{:?}", trace(&p));
    let v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(v["attempt"], 1, "the same run number: {v}");
    assert_eq!(v["held"], false, "{v}");
    let to_lead = fs::read_dir(&p.session)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("role-comm-squadd-to-lead-")
        })
        .count();
    assert_eq!(to_lead, 0, "nothing for a human to do");
}

/// Issue 26 item 8: the largest value validation accepts in every duration
/// and count field of config.json and policies.yaml, with runs dispatched,
/// failing and scheduled for retry: squadd neither panics nor stops
/// answering, and stops cleanly.
#[test]
fn the_largest_accepted_durations_and_counts_never_stop_squadd() {
    let max = "3650d";
    let p = project(
        &[("MODE", "fail")],
        "      max_retries: 4294967295\n",
        &format!(
            "  grace: {max}\n  idle_after: {max}\n  retry_backoff: {max}\n  log_max_size: 18446744073709551615\n"
        ),
        "{\"sessions\": {\"defaultTimeoutMs\": 315360000000, \"maxConcurrent\": 100000, \"compactionThreshold\": 1}}",
    );
    let runners = fs::read_to_string(p.root.join(".squad/policies.yaml")).unwrap();
    let rest = format!(
        "locks:\n  default_ttl: {max}\n  max_ttl: {max}\nretention:\n  archive_completed_after: {max}\n  delete_archived_after: {max}\n  delete_failed_after: {max}\nmemory:\n  archive_older_than: {max}\n  archive_max_size: 18446744073709551615\nmessages:\n  deliver_within:\n    critical: {max}\n    high: {max}\n    medium: {max}\n  low_max_wait: {max}\n  escalate_after:\n    critical: {max}\n    high: {max}\n    medium: {max}\n    low: {max}\nhooks:\n  max_concurrent: 1024\nskills:\n  prompt_budget_tokens: 18446744073709551615\n"
    );
    write_policy(&p.root, format!("{rest}{runners}"));
    ctl_ok(&p.root, &["validate"]);
    ok(run(ctl(&p.root).args(["config", "validate"])));
    let d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    eventually("the run failed and its retry is scheduled", || {
        let rec = fs::read_to_string(p.session.join("runs/task_t1/run.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&rec).ok()?;
        (v["state"] == "exited" && v["retry_at"].is_string()).then_some(())
    });
    ok(run(ctl(&p.root).args([
        "send",
        "--from",
        "alpha",
        "--to",
        "bravo",
        "--new-agent",
        "--priority",
        "critical",
        "--type",
        "notification",
        "--subject",
        "s",
        "--message",
        "m",
    ])));
    let status = ctl_ok(&p.root, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["daemon"]["state"], "running", "{status}");
    assert_eq!(d.terminate().0, 0, "squadd stops cleanly");
}

/// The pid of the escaped child (`$MODE=escape`), once it is there.
fn escaped(p: &Project) -> i32 {
    eventually("the agent's child escaped its group", || {
        fs::read_to_string(&p.trace)
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("escaped ")?.trim().parse().ok())
    })
}

fn run_json(p: &Project) -> serde_json::Value {
    serde_json::from_str(
        &fs::read_to_string(p.session.join("runs/task_t1/run.json")).unwrap_or_default(),
    )
    .unwrap_or_default()
}

/// Issue 26 item 4: a child that double-forks, `setsid`s (out of the run's
/// process group) and ignores SIGTERM is ended with its run at the time
/// limit: when the run is recorded ended, nothing of it is left.
#[test]
fn an_escaped_child_ends_with_its_run_at_the_time_limit() {
    let p = project(
        &[("MODE", "escape")],
        "      timeout: 1s\n      max_retries: 0\n",
        "  grace: 500ms\n",
        "{}",
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    let child = escaped(&p);
    eventually("the run is recorded timed out", || {
        (run_json(&p)["state"] == "timed-out").then_some(())
    });
    assert!(
        !pid_alive(child),
        "the escaped child {child} outlived its run"
    );
}

/// The same after `squadctl stop`.
#[test]
fn an_escaped_child_ends_with_its_run_after_stop() {
    let p = project(
        &[("MODE", "escape")],
        "      max_retries: 0\n",
        "  grace: 500ms\n",
        "{}",
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    let child = escaped(&p);
    ctl_ok(&p.root, &["stop", "task_t1"]);
    eventually("the stopped run is recorded ended", || {
        let v = run_json(&p);
        (v["state"] == "stopped" && v["exit"].is_object()).then_some(())
    });
    assert!(
        !pid_alive(child),
        "the escaped child {child} outlived its run"
    );
}

/// Issue 26 item 5: a child writing as fast as it can, ignoring SIGTERM,
/// after its leader exited: run.log never exceeds its cap (sampled as fast
/// as the test can, until the run is recorded ended).
#[test]
fn run_log_never_exceeds_its_cap_even_after_the_leader_exits() {
    let cap = 64 * 1024;
    let p = project(
        &[("MODE", "flood")],
        "      max_retries: 0\n",
        "  grace: 2s\n  log_max_size: 64KB\n",
        "{}",
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    let log = p.session.join("runs/task_t1/run.log");
    let mut largest = 0;
    let mut samples = 0;
    let start = std::time::Instant::now();
    while !run_json(&p)["exit"].is_object() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run never ended"
        );
        if let Ok(m) = fs::metadata(&log) {
            largest = largest.max(m.len());
            samples += 1;
        }
    }
    let text = fs::read_to_string(&log).unwrap();
    assert!(
        largest <= cap,
        "run.log reached {largest} bytes (cap {cap})"
    );
    assert!(text.len() as u64 <= cap);
    assert!(
        text.starts_with("[squadd: run.log exceeded 65536 bytes"),
        "the writer did pass the cap ({samples} samples)"
    );
}

/// The run's output pipe outlives squadd: an agent writing while squadd is
/// down (killed, restarting) is not killed by SIGPIPE; it finishes its task.
#[test]
fn an_agent_writing_while_squadd_is_down_is_not_killed() {
    let (p, gate) = gated_project("", "{}");
    let d = Daemon::start(&p.root);
    task(&p.root, "task_t1", "alpha", &[]);
    eventually("the run starts and its pid is recorded", || {
        (run_json(&p)["pid"].as_u64()? > 0).then_some(())
    });
    d.kill9();
    fs::write(&gate, "").unwrap();
    eventually("the agent wrote its output and went on", || {
        trace(&p)
            .iter()
            .any(|e| e.0 == "end" && e.1 == "task_t1")
            .then_some(())
    });
    let _d = Daemon::start(&p.root);
    wait_completed(&p);
    assert_eq!(starts(&p), 1);
}
