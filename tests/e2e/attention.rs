//! Issue 28, "Status tells the lead what to do": the needs-attention
//! section of `status` (human and `--json`), `status --check` and its
//! `--allow`, `task list` showing held runs, and a held run's agent not
//! counted active — through the real `squadctl`.

use crate::support::*;
use std::fs;
use std::path::Path;

/// A held run record for `task` of `agent`, as squadd writes it after
/// `squadctl stop` (docs/runners.md).
fn held_run(session: &Path, task: &str, agent: &str) {
    let name = session.file_name().unwrap().to_str().unwrap();
    let dir = session.join("runs").join(task);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("run.json"),
        format!(
            r#"{{"task":"{task}","agent":"{agent}","session":"{name}","attempt":1,"state":"stopped","pid":999999,"process_start":1,"started_at":"2024-01-15T10:00:00Z","deadline":"2024-01-15T11:00:00Z","command":["agent"],"exit":{{"at":"2024-01-15T10:05:00Z","signal":15}},"completed":false,"held":true}}"#
        ),
    )
    .unwrap();
}

/// alice blocked on task_001, bob's critical error report on task_002,
/// carol in progress on task_003 whose run is held.
fn troubled_project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let dir = init_session(root, "demo");
    for agent in ["alice", "bob", "carol"] {
        ok(task_new(root, &["--agent", agent, "--instruction", "x"]));
    }
    let progress = |task: &str, agent: &str, args: &[&str]| {
        ok(run(ctl(root)
            .args(["progress", "--task", task, "--agent", agent])
            .args(args)))
    };
    progress(
        "task_001",
        "alice",
        &["--status", "blocked", "--blocker", "need the schema"],
    );
    progress("task_003", "carol", &["--status", "in_progress"]);
    ctl_ok(
        root,
        &words(
            "report-error --agent bob --task task_002 --severity critical --type build --message 'disk full'",
        ),
    );
    held_run(&dir, "task_003", "carol");
    (tmp, dir)
}

#[test]
fn status_lists_what_needs_a_human_first_with_the_command_that_resolves_it() {
    let (tmp, dir) = troubled_project();
    let root = tmp.path();
    let session = dir.file_name().unwrap().to_str().unwrap().to_string();
    let out = ctl_run(root, &["status"]);
    let text = stdout(&out);
    assert!(text.starts_with("needs attention (3):\n"), "{text}");
    let first = text
        .find("critical report from bob on task_002: disk full")
        .expect(&text);
    let blocked = text
        .find("task_001 (alice) is blocked: need the schema")
        .expect(&text);
    let held = text
        .find("run of task_003 (carol) is held after it stopped")
        .expect(&text);
    assert!(
        first < blocked && blocked < held,
        "most severe first: {text}"
    );
    assert!(
        text.contains(&format!("→ squadctl run task_003 --session {session}")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "→ squadctl task show task_001 --session {session}"
        )),
        "{text}"
    );
    // carol's run is held: she is not active.
    let line = text.lines().find(|l| l.contains("active:")).expect(&text);
    assert!(!line.contains("carol"), "{line}");

    let v: serde_json::Value =
        serde_json::from_str(&ok(ctl_run(root, &["status", "--json"]))).unwrap();
    let kinds: Vec<&str> = v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["error-report", "blocked-task", "run-held"], "{v:#}");
    assert_eq!(
        v["needs_attention"][2]["command"],
        format!("squadctl run task_003 --session {session}")
    );

    // --check fails on them, unless each kind is allowed.
    assert_eq!(code(&ctl_run(root, &["status", "--check"])), 1);
    assert_eq!(
        code(&ctl_run(
            root,
            &words("status --check --allow error-report --allow blocked-task")
        )),
        1,
        "the held run still counts"
    );
    let out = ctl_run(
        root,
        &words("status --check --allow error-report --allow blocked-task --allow run-held"),
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = ctl_run(root, &words("status --check --allow nonsense"));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown kind `nonsense`"),
        "{}",
        stderr(&out)
    );

    // task list shows the blocked task and the held run.
    let list = ctl_ok(root, &["task", "list"]);
    let row = |t: &str| {
        list.lines()
            .find(|l| l.starts_with(t))
            .expect(&list)
            .to_string()
    };
    assert!(row("task_001").contains("blocked"), "{list}");
    assert!(row("task_003").contains("run held (stopped)"), "{list}");
    let held = ctl_ok(root, &words("task list --status held"));
    assert_eq!(held.lines().count(), 1, "{held}");
    assert!(held.starts_with("task_003"), "{held}");
}

#[test]
fn an_invalid_policy_or_config_needs_attention() {
    let (tmp, _dir) = troubled_project();
    let root = tmp.path();
    write_policy(root, "locks:\n  default_ttl: forever\n");
    fs::write(root.join(".squad/config.json"), "{\"runners\": [}\n").unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&ok(ctl_run(root, &["status", "--json"]))).unwrap();
    let kinds: Vec<&str> = v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"policy-invalid"), "{v:#}");
    assert!(kinds.contains(&"config-invalid"), "{v:#}");
    let text = stdout(&ctl_run(root, &["status"]));
    assert!(text.contains("policies.yaml"), "{text}");
    assert!(text.contains("config.json:1:"), "{text}");
}

#[test]
fn a_quiet_project_needs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    init_session(root, "demo");
    ok(task_new(root, &["--agent", "alice", "--instruction", "x"]));
    let text = ctl_ok(root, &["status"]);
    assert!(!text.contains("needs attention"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(ctl_run(root, &["status", "--json"]))).unwrap();
    assert_eq!(v["needs_attention"], serde_json::json!([]));
    assert_eq!(code(&ctl_run(root, &["status", "--check"])), 0);
}

/// Issue 28, "Policy in every check": every error of policies.yaml, each at
/// its line and column with its rule id and a hint, in `validate` and in
/// `status` (whose `--check` fails on them).
#[test]
fn validate_and_status_report_every_policy_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    init_session(root, "demo");
    write_policy(
        root,
        "locks:\n  default_ttl: forever\nretention:\n  schedule: never\nbogus: 1\n",
    );
    let out = ctl_run(root, &["validate"]);
    let text = stdout(&out);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    for at in [
        ".squad/policies.yaml:2:3",
        ".squad/policies.yaml:4:3",
        ".squad/policies.yaml:5:1",
    ] {
        assert!(text.contains(at), "{at} missing: {text}");
    }
    assert_eq!(text.matches("policy-invalid").count(), 3, "{text}");
    assert!(
        text.contains("squadd runs on the previous policy"),
        "hint: {text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&ctl_run(root, &["status", "--json"]))).unwrap();
    let policy: Vec<&serde_json::Value> = v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "policy-invalid")
        .collect();
    assert_eq!(policy.len(), 3, "{v:#}");
    assert!(
        policy[0]["summary"]
            .as_str()
            .unwrap()
            .contains("policies.yaml:2:3: policy-invalid: locks.default_ttl"),
        "{v:#}"
    );
    assert_eq!(code(&ctl_run(root, &["status", "--check"])), 1);
    assert_eq!(
        code(&ctl_run(
            root,
            &words("status --check --allow policy-invalid")
        )),
        0
    );
}

/// Issue 28, "A guided first hour": `init` ends with the next steps, each a
/// command that works on the new project, in order.
#[test]
fn init_prints_next_steps_that_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let text = ctl_ok(root, &["init"]);
    let steps = text.split("Next steps:\n").nth(1).expect(&text);
    let commands: Vec<&str> = steps
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split_once(". ").map(|(_, c)| c))
        .collect();
    assert_eq!(commands.len(), 4, "{steps}");
    assert!(commands[0].starts_with("squadd --root ."), "{steps}");
    // The squadctl steps run as printed on the fresh project.
    for c in &commands[1..] {
        let argv = words(c.strip_prefix("squadctl ").expect(c));
        let out = ctl_run(root, &argv);
        assert_eq!(code(&out), 0, "{c}: {}{}", stdout(&out), stderr(&out));
    }
    let v: serde_json::Value = serde_json::from_str(&ctl_ok(root, &["init", "--json"])).unwrap();
    assert_eq!(v["next_steps"].as_array().map(Vec::len), Some(4), "{v:#}");
    assert_eq!(v["next_steps"][3]["command"], "squadctl status");
}

/// tmux on its own server socket, killed when the test ends.
pub(crate) struct Tmux {
    pub(crate) socket: std::path::PathBuf,
}

impl Tmux {
    pub fn cmd(&self) -> std::process::Command {
        let mut c = std::process::Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    pub fn screen(&self) -> String {
        stdout(&run(self.cmd().args(["capture-pane", "-p", "-t", "top"])))
    }

    /// The screen once it shows every one of `want` (the console redraws
    /// on its own schedule: wait for it, without a timed assertion).
    pub(crate) fn wait_for(&self, want: &[&str]) -> String {
        let mut screen = String::new();
        for _ in 0..600 {
            screen = self.screen();
            if want.iter().all(|w| screen.contains(w)) {
                return screen;
            }
            // Poll interval of a wait with a deadline (600 turns), not a settle time.
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the screen never showed {want:?}:\n{screen}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// dave's task_004 becomes blocked; the console shows it by itself.
fn block_a_fourth_task(root: &Path, tmux: &Tmux) {
    ok(task_new(root, &["--agent", "dave", "--instruction", "x"]));
    ok(run(ctl(root).args([
        "progress",
        "--task",
        "task_004",
        "--agent",
        "dave",
        "--status",
        "blocked",
        "--blocker",
        "no keys",
    ])));
    tmux.wait_for(&["NEEDS YOU (4)", "task_004 (dave) is blocked"]);
}

/// Whether tmux runs here; under CI its absence fails the test (`.ci/run`
/// installs it), elsewhere the test is skipped with a loud message.
pub(crate) fn have_tmux() -> bool {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok()
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "tmux is required under CI (.ci/run installs it)"
    );
    crate::support::skip("tmux is not installed (.ci/test installs it)");
    false
}

/// `squadctl --root ROOT top` in a detached tmux session `top` of
/// WIDTH x HEIGHT, with NO_COLOR and none of the agent environment.
pub(crate) fn start_top(root: &Path, width: &str, height: &str) -> Tmux {
    let tmux = Tmux {
        socket: root.join("tmux.sock"),
    };
    let line = format!(
        "env -u SQUAD_ROOT -u SQUAD_AGENT -u SQUAD_TASK -u SQUAD_SESSION NO_COLOR=1 TERM=xterm {} --root {} top",
        env!("CARGO_BIN_EXE_squadctl"),
        root.display()
    );
    let out = run(tmux.cmd().args([
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        width,
        "-y",
        height,
        &line,
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    tmux
}

/// Issue 28, `squadctl top`: run in tmux at 60 columns with squadd down,
/// its "needs you" pane lists the blocked task, the error report and the
/// held run the test created, says squadd is down, redraws when a file
/// changes (a second task becomes blocked), and quits on q.
#[test]
fn top_in_tmux_shows_what_needs_you_and_follows_the_files() {
    if !have_tmux() {
        return;
    }
    let (tmp, _dir) = troubled_project();
    let root = tmp.path();
    let tmux = start_top(root, "60", "30");
    let screen = tmux.wait_for(&["NEEDS YOU (3)", "SESSIONS"]);
    assert!(screen.contains("squadd DOWN"), "{screen}");
    let needs = screen.find("NEEDS YOU").unwrap();
    for item in [
        "critical report from bob on task_002: disk full",
        "task_001 (alice) is blocked: need the schema",
        "run of task_003 (carol) is held",
    ] {
        let at = screen
            .find(item)
            .unwrap_or_else(|| panic!("{item}:\n{screen}"));
        assert!(
            at > needs && at < screen.find("SESSIONS").unwrap(),
            "{screen}"
        );
    }
    assert!(screen.lines().all(|l| l.chars().count() <= 60), "{screen}");

    // A file changes: the console redraws by itself (squadd is down, so
    // through inotify).
    block_a_fourth_task(root, &tmux);

    // Enter opens the selected item with the command that resolves it.
    run(tmux.cmd().args(["send-keys", "-t", "top", "Enter"]));
    tmux.wait_for(&["resolve with:"]);
    run(tmux.cmd().args(["send-keys", "-t", "top", "Enter"]));
    run(tmux.cmd().args(["send-keys", "-t", "top", "q"]));
    for _ in 0..600 {
        if code(&run(tmux.cmd().args(["has-session", "-t", "top"]))) != 0 {
            return;
        }
        // Poll interval of a wait with a deadline (600 turns), not a settle time.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("top did not quit on q:\n{}", tmux.screen());
}

/// With squadd running, `top` says so and redraws on squadd's events (no
/// file watch); when squadd stops, the console says it is down.
#[test]
fn top_follows_squadds_events_and_notices_it_stop() {
    if !have_tmux() {
        return;
    }
    let (tmp, _dir) = troubled_project();
    let root = tmp.path();
    let daemon = crate::daemon::Daemon::start(root);
    let tmux = start_top(root, "80", "40");
    tmux.wait_for(&["squadd running (pid", "NEEDS YOU (3)"]);
    block_a_fourth_task(root, &tmux);
    drop(daemon);
    tmux.wait_for(&["squadd DOWN"]);
}

/// Presses `key` in the console.
fn press(tmux: &Tmux, key: &str) {
    run(tmux.cmd().args(["send-keys", "-t", "top", key]));
}

/// Moves the selection (j/k) until the selected row (`> `) mentions
/// `needle`.
fn select(tmux: &Tmux, needle: &str) {
    for _ in 0..40 {
        let screen = tmux.screen();
        if screen
            .lines()
            .any(|l| l.starts_with("> ") && l.contains(needle))
        {
            return;
        }
        // Rows before the wanted one come first on screen: go down, and
        // from the end back up once.
        let below = screen
            .lines()
            .position(|l| l.contains(needle))
            .zip(screen.lines().position(|l| l.starts_with("> ")))
            .is_none_or(|(want, at)| want > at);
        press(tmux, if below { "j" } else { "k" });
        // Poll interval of a wait with a deadline (the loop's turns).
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("could not select {needle}:\n{}", tmux.screen());
}

fn run_json(session: &Path, task: &str) -> Option<serde_json::Value> {
    serde_json::from_str(
        &fs::read_to_string(session.join("runs").join(task).join("run.json")).ok()?,
    )
    .ok()
}

/// Issue 28 item 1, the keys: with squadd running a gated agent, `top`
/// shows the task's live run (pid, uptime, CPU, the last file its agent
/// wrote); `s` stops it (held), `r` starts it again (a second attempt),
/// `a` acknowledges the lead's message; all in tmux at 60 columns.
#[test]
fn top_keys_stop_and_start_a_run_and_acknowledge_a_message() {
    if !have_tmux() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "keys");
    let gate = root.join("go");
    let agent = root.join("agent.sh");
    fs::write(
        &agent,
        format!(
            // Also ends when the project is gone (a failed test): never
            // left looping.
            "#!/bin/sh\n'{ctl}' progress --status in_progress --percent 10 -q\nwhile [ ! -e '{gate}' ] && [ -d '{root}' ]; do sleep 0.05; done\n'{ctl}' progress --status completed --percent 100 -q\n",
            ctl = env!("CARGO_BIN_EXE_squadctl"),
            gate = gate.display(),
            root = root.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  agents:\n    alice:\n      command: [\"{}\"]\n      max_retries: 0\n",
            agent.display()
        ),
    );
    ok(task_new(
        &root,
        &["--id", "task_001", "--agent", "alice", "--instruction", "x"],
    ));
    let daemon = crate::daemon::Daemon::start(&root);
    crate::daemon::eventually("the run starts", || {
        run_json(&session, "task_001").filter(|v| v["state"] == "running")
    });
    let sent: serde_json::Value = serde_json::from_str(&ctl_ok(
        &root,
        &words("send --from bob --to lead --type question --subject hello --message hi --json"),
    ))
    .unwrap();
    let id = sent["message_id"].as_str().unwrap().to_string();

    let tmux = start_top(&root, "60", "30");
    let screen = tmux.wait_for(&[
        "squadd running",
        "task_001 in_progress alice run running pid",
        "cpu ",
        "wrote role-comm-alice-task_001.md",
        // The lead's message by sender and subject, not by id.
        "medium bob: hello (",
    ]);
    assert!(screen.contains("up "), "{screen}");
    assert!(screen.lines().all(|l| l.chars().count() <= 60), "{screen}");

    // s: the run stops and the task is held.
    select(&tmux, "task_001 in_progress");
    press(&tmux, "s");
    tmux.wait_for(&["held (stopped)"]);
    let rec = run_json(&session, "task_001").unwrap();
    assert_eq!(
        (rec["state"].as_str(), rec["held"].as_bool()),
        (Some("stopped"), Some(true)),
        "{rec}"
    );

    // r: squadd starts it again, a second attempt.
    select(&tmux, "task_001");
    press(&tmux, "r");
    tmux.wait_for(&["started task_001", "run running pid"]);
    let rec = crate::daemon::eventually("the second run", || {
        run_json(&session, "task_001").filter(|v| v["attempt"] == 2 && v["state"] == "running")
    });
    assert_eq!(rec["held"], false, "{rec}");

    // a: the lead's message is acknowledged (moved out of new/).
    select(&tmux, "bob: hello");
    press(&tmux, "a");
    tmux.wait_for(&[
        &format!("acknowledged {id}"),
        "MESSAGES FOR THE LEAD (0 unread)",
    ]);
    let inbox = ctl_ok(&root, &["inbox", "list", "lead", "--json"]);
    assert!(!inbox.contains("\"unread\": true"), "{inbox}");

    fs::write(&gate, "").unwrap();
    press(&tmux, "q");
    crate::daemon::eventually("the run ends", || {
        run_json(&session, "task_001").filter(|v| v["state"] != "running")
    });
    daemon.terminate();
}

/// With squadd down, `r` says that runs need squadd (nothing else happens).
#[test]
fn top_says_a_run_needs_squadd_when_it_is_down() {
    if !have_tmux() {
        return;
    }
    let (tmp, _dir) = troubled_project();
    let root = tmp.path();
    let tmux = start_top(root, "60", "30");
    tmux.wait_for(&["squadd DOWN", "NEEDS YOU (3)"]);
    select(&tmux, "task_003");
    press(&tmux, "r");
    tmux.wait_for(&["squadd is not running"]);
}

/// Issue 28: `graph --format text` is a readable tree (each task under the
/// tasks it waits for, one met twice marked `(above)`); piped, plain
/// `graph` stays Mermaid for scripts.
#[test]
fn graph_text_is_a_tree_and_pipes_keep_mermaid() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("agents-graph"), tmp.path());
    let tree = ctl_ok(tmp.path(), &["graph", "--format", "text"]);
    assert_eq!(
        tree,
        "session 20240115T100000Z-graph
task_a (alice, completed)
├── task_b (bob, in_progress)
│   └── task_c (carol, pending)
└── task_d (dave, ready)
task_e (erin, blocked)
└── task_c (carol, pending) (above)
"
    );
    assert!(ctl_ok(tmp.path(), &["graph"]).starts_with("flowchart TD\n"));
}

/// Issue 28: `send` without `--priority` sends a medium-priority message.
#[test]
fn send_priority_defaults_to_medium() {
    let (tmp, dir) = quiet_two_agent_project("20240115T100000Z-demo");
    let root = tmp.path();
    ctl_ok(
        root,
        &words(
            "send --from alice --to bob --type question --subject s --message m --session 20240115T100000Z-demo",
        ),
    );
    let sent: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("role-comm-alice-to-bob-"))
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let text = fs::read_to_string(dir.join(&sent[0])).unwrap();
    assert!(text.contains("priority: medium"), "{text}");
}
