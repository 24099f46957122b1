//! "Which agent needs me?" (issue 38, item 7) with a real interactive
//! Claude Code session in tmux against the scripted model server: the
//! model asks for a shell command Claude Code must ask permission for; the
//! hooks `guard install --claude` installs record the agent waiting, which
//! `status --json` shows, named, and squadd tells the session's lead; once
//! the person approves, it works again.
//! (`--permission-mode default`: Claude Code 2.1.332 defaults to an "auto"
//! mode that answers such prompts itself.)

use crate::real_clis::{SESSION, cli, project};
use crate::stub_model::{Step, StubModel};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::Command;

/// tmux on its own server socket, killed when the test ends.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    fn screen(&self) -> String {
        stdout(&run(self.cmd().args(["capture-pane", "-p", "-t", "agent"])))
    }

    /// Waits for the prompt, dismissing what a newer Claude Code shows
    /// first (2.1.332: "Try the new fullscreen renderer?", Esc says not
    /// now).
    fn wait_ready(&self, stub: &StubModel) {
        let mut screen = String::new();
        for _ in 0..1200 {
            screen = self.screen();
            if screen.contains("Enter to confirm") {
                ok(run(self.cmd().args(["send-keys", "-t", "agent", "Escape"])));
            } else if screen.contains("for shortcuts") {
                return;
            }
            // Poll interval of a wait with a deadline (1200 turns).
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("no prompt:\n{screen}\n{}", stub.transcript());
    }

    /// The screen once it shows `want`.
    fn wait_for(&self, want: &str, stub: &StubModel) -> String {
        let mut screen = String::new();
        for _ in 0..1200 {
            screen = self.screen();
            if screen.contains(want) {
                return screen;
            }
            // Poll interval of a wait with a deadline (1200 turns).
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!(
            "the screen never showed {want:?}:\n{screen}\n{}",
            stub.transcript()
        );
    }
}

impl Tmux {
    /// Starts `line` in a 120x40 window named `agent`, in `dir`.
    fn start(&self, dir: &Path, line: &str) {
        let started = run(self
            .cmd()
            .args([
                "new-session",
                "-d",
                "-s",
                "agent",
                "-x",
                "120",
                "-y",
                "40",
                "-c",
            ])
            .arg(dir)
            .arg(line));
        assert_eq!(code(&started), 0, "{}", stderr(&started));
    }

    /// Types `keys` into the agent's window.
    fn keys(&self, keys: &[&str]) {
        ok(run(self
            .cmd()
            .args(["send-keys", "-t", "agent"])
            .args(keys)));
    }
}

/// Once backend is no longer waiting: nobody is waited for.
fn waits_no_more(root: &Path) {
    let v = presence(root, |p| p["state"] != "waiting");
    let items = v["needs_attention"].as_array().unwrap();
    assert!(!items.iter().any(|i| i["kind"] == "agent-waiting"), "{v:#}");
}

/// backend's entry of `status --json`'s presence list.
fn backend(v: &Value) -> &Value {
    v["presence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["agent"] == "backend")
        .unwrap()
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// backend's presence record as `status --json` shows it, once `done`.
fn presence(root: &Path, done: impl Fn(&Value) -> bool) -> Value {
    crate::daemon::eventually("backend's presence as expected", || {
        let out = run(ctl(root).args(["status", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v["presence"]
            .as_array()?
            .iter()
            .find(|p| p["agent"] == "backend" && done(p))
            .map(|_| v.clone())
    })
}

#[test]
fn an_interactive_claude_code_waiting_for_a_permission_needs_its_person() {
    let Some(claude) = cli("claude") else { return };
    if !crate::attention::have_tmux() {
        return;
    }
    let p = project();
    let out = ok(run(ctl(&p.root)
        .args([
            "guard",
            "install",
            "--claude",
            "--program",
            env!("CARGO_BIN_EXE_squadctl"),
        ])
        .env("HOME", &p.home)));
    assert!(out.contains("installed"), "{out}");
    let target = p.root.join("backend/ok.txt");
    let stub = StubModel::start(vec![Step::Shell(format!("echo hi > {}", target.display()))]);
    // A person's Claude Code: onboarding done, the API key and the
    // project accepted (what its first interactive start asks).
    let key = "sk-ant-stub-0123456789abcdefghij";
    fs::write(
        p.home.join(".claude.json"),
        serde_json::json!({
            "hasCompletedOnboarding": true,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [&key[key.len() - 20..]], "rejected": []},
            "projects": {p.root.display().to_string(): {"hasTrustDialogAccepted": true, "allowedTools": []}},
        })
        .to_string(),
    )
    .unwrap();
    // squadd, which tells the session's lead.
    let _d = crate::daemon::Daemon::start(&p.root);
    let tmux = Tmux {
        socket: p.home.join("tmux.sock"),
    };
    let line = format!(
        "env -i HOME={home} PATH={path} TERM=xterm-256color ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={key} CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 SQUAD_AGENT=backend SQUAD_TASK=task_1 SQUAD_SESSION={SESSION} {claude} --model claude-opus-4-8 --permission-mode default",
        home = p.home.display(),
        path = std::env::var("PATH").unwrap_or_default(),
        url = stub.url(),
        claude = claude.display(),
    );
    tmux.start(&p.root, &line);
    tmux.wait_ready(&stub);
    // The lead's console, already open: it shows the wait by itself.
    let top = crate::attention::start_top(&p.root, "100", "30");
    top.wait_for(&["NEEDS YOU"]);
    tmux.keys(&["Work on task_1.", "Enter"]);
    tmux.wait_for("Do you want to proceed?", &stub);
    let drawn = std::time::Instant::now();
    // Waiting for its person, named, with what it asks.
    let v = presence(&p.root, |p| p["state"] == "waiting");
    // The "within a second", measured (printed, not asserted).
    eprintln!(
        "status --json showed backend waiting {} ms after the dialog was seen",
        drawn.elapsed().as_millis()
    );
    let me = backend(&v);
    assert!(
        me["detail"]
            .as_str()
            .is_some_and(|d| d.contains("permission to use Bash") && d.contains("ok.txt")),
        "{v:#}"
    );
    assert_eq!(me["task"], "task_1");
    assert!(
        v["needs_attention"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["kind"] == "agent-waiting"
                && i["summary"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("backend is waiting for you")),
        "{v:#}"
    );
    top.wait_for(&["backend is waiting for you"]);
    // The lead is told, once, naming the agent, its task and the ask.
    let session = lead_told(
        &p.root,
        "backend on task_1 is waiting for you: permission to use Bash",
    );
    // The person approves: it works again, and nobody is waited for.
    tmux.keys(&["1"]);
    waits_no_more(&p.root);
    assert_eq!(fs::read_to_string(&target).ok().as_deref(), Some("hi\n"));
    assert_eq!(lead_messages(&session).len(), 1, "one message per wait");
}

/// Waits for squadd's first message to the lead in the real-CLI project's
/// session and checks it says `want`; the session's directory.
fn lead_told(root: &Path, want: &str) -> std::path::PathBuf {
    let session = root.join(".squad/sessions").join(SESSION);
    let told = crate::daemon::eventually("the lead is told", || {
        Some(lead_messages(&session)).filter(|m| !m.is_empty())
    });
    assert!(told[0].contains(want), "{want:?} in:\n{}", told[0]);
    session
}

/// The messages squadd wrote to the lead in `session`, by file name.
fn lead_messages(session: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(session)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("role-comm-squadd-to-lead-"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| fs::read_to_string(session.join(n)).unwrap())
        .collect()
}

/// Claude Code's hook `event` handed to `squadctl presence` for `agent`
/// (of task_1 in `session`, when given), as its settings run it.
fn hook(root: &Path, agent: &str, session: Option<&str>, event: Value) {
    hook_with(root, agent, session, &["--format", "claude"], event);
}

/// [`hook`] with `squadctl presence`'s arguments `args`.
fn hook_with(root: &Path, agent: &str, session: Option<&str>, args: &[&str], event: Value) {
    let mut c = ctl(root);
    c.arg("presence").args(args).env("SQUAD_AGENT", agent);
    if let Some(s) = session {
        c.env("SQUAD_SESSION", s).env("SQUAD_TASK", "task_1");
    }
    let out = run_with_input(&mut c, event.to_string().as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// squadd watches the presence records and tells the session's lead, with
/// a high-priority message, when an agent starts waiting for its person:
/// once per wait (the record rewritten, or Claude Code's `Notification`
/// about the same prompt, says nothing more), again for the next wait.
#[test]
fn squadd_tells_the_lead_once_when_an_agent_starts_waiting() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "waits");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let _d = crate::daemon::Daemon::start(&root);
    let event = |name: &str, extra: Value| {
        let mut e = serde_json::json!({
            "hook_event_name": name,
            "session_id": "0123abcd",
            "cwd": root.display().to_string(),
        });
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    };
    let ask = event(
        "PermissionRequest",
        serde_json::json!({"tool_name": "Bash", "tool_input": {"command": "rm -rf build"}}),
    );
    hook(&root, "backend", Some(&name), ask.clone());
    let told = crate::daemon::eventually("the lead is told", || {
        Some(lead_messages(&session)).filter(|m| !m.is_empty())
    });
    let first = std::time::Instant::now();
    let text = &told[0];
    for want in [
        "to_agent: lead",
        "priority: high",
        "subject: backend is waiting for you",
        "backend on task_1 is waiting for you: permission to use Bash: rm -rf build",
        "task_id: task_1",
    ] {
        assert!(text.contains(want), "{want:?} in:\n{text}");
    }
    // The same wait: Claude Code's Notification, the record written again.
    let notification = event(
        "Notification",
        serde_json::json!({"notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"}),
    );
    hook(&root, "backend", Some(&name), notification);
    hook(&root, "backend", Some(&name), ask.clone());
    // Another agent's wait, written after those: once squadd said it, it
    // had handled them.
    hook(&root, "frontend", None, ask.clone());
    wait_event(&root, "frontend's wait", |e| {
        e["kind"] == "agent-waiting" && e["agent"] == "frontend"
    });
    batch_finished(&root);
    assert_eq!(lead_messages(&session).len(), 1, "one message per wait");
    // The Notification kept the record's precise detail.
    let v = status_json(&root);
    let me = v["presence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["agent"] == "backend")
        .cloned()
        .unwrap();
    assert_eq!(
        me["detail"], "permission to use Bash: rm -rf build",
        "{v:#}"
    );
    // Approved (working), then asking again: a new wait, said at once and
    // told once a minute has passed since the first message (at most one
    // message per agent a minute).
    hook(
        &root,
        "backend",
        Some(&name),
        event("PostToolUse", serde_json::json!({"tool_name": "Bash"})),
    );
    hook(&root, "backend", Some(&name), ask);
    crate::daemon::eventually("the second wait is said", || {
        (events(&root)
            .iter()
            .filter(|e| e["kind"] == "agent-waiting" && e["agent"] == "backend")
            .count()
            == 2)
            .then_some(())
    });
    let told = crate::daemon::eventually_within(
        "the lead is told of the second wait",
        std::time::Duration::from_secs(120),
        || Some(lead_messages(&session)).filter(|m| m.len() == 2),
    );
    assert!(
        first.elapsed() >= std::time::Duration::from_secs(50),
        "told after {:?}",
        first.elapsed()
    );
    assert!(
        told[1]
            .contains("backend on task_1 is waiting for you: permission to use Bash: rm -rf build"),
        "{}",
        told[1]
    );
}

/// An interactive Copilot CLI (offline, the scripted model as its BYOK
/// provider) in tmux: the hooks `guard install --copilot` installs record
/// it waiting once it asks to run a shell command (its `notification` of
/// type `permission_prompt`), the lead is told, and it works again once
/// the person approves.
#[test]
fn an_interactive_copilot_cli_waiting_for_a_permission_needs_its_person() {
    let Some(copilot) = cli("copilot") else {
        return;
    };
    if !crate::attention::have_tmux() {
        return;
    }
    let p = project();
    crate::real_clis::install_guard(&p.root, &p.home, &["--copilot"]);
    let target = p.root.join("backend/ok.txt");
    let stub = StubModel::start(vec![Step::Shell(format!("echo hi > {}", target.display()))]);
    let _d = crate::daemon::Daemon::start(&p.root);
    let tmux = Tmux {
        socket: p.home.join("tmux.sock"),
    };
    let env: Vec<String> = crate::real_clis::copilot_env(&stub, &p.home, &copilot)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let line = format!(
        "env -i TERM=xterm-256color {} SQUAD_AGENT=backend SQUAD_TASK=task_1 SQUAD_SESSION={SESSION} {}",
        env.join(" "),
        copilot.display()
    );
    tmux.start(&p.root, &line);
    // A person's first start in this folder: trusted (which loads the
    // project's hooks), then the prompt.
    tmux.wait_for("Do you trust the files in this folder?", &stub);
    tmux.keys(&["Enter"]);
    tmux.wait_for("/ commands", &stub);
    tmux.keys(&["Work on task_1.", "Enter"]);
    let v = presence(&p.root, |p| p["state"] == "waiting");
    let me = backend(&v);
    assert_eq!(me["cli"], "copilot", "{v:#}");
    assert!(
        me["detail"].as_str().is_some_and(|d| d.contains("ok.txt")),
        "{v:#}"
    );
    assert_eq!(me["task"], "task_1", "{v:#}");
    let session = lead_told(&p.root, "backend on task_1 is waiting for you: Run command");
    // The person approves (the first choice) once the dialog shows (the
    // notification may come first): it works again.
    tmux.wait_for("Do you want to run this command?", &stub);
    tmux.keys(&["Enter"]);
    waits_no_more(&p.root);
    crate::daemon::eventually("the command ran", || {
        (fs::read_to_string(&target).ok().as_deref() == Some("hi\n")).then_some(())
    });
    assert_eq!(lead_messages(&session).len(), 1, "one message per wait");
}

/// An interactive Codex (the scripted model as its provider) in tmux: the
/// presence hooks `guard install --codex --trust` installs and reviews
/// record it waiting once it asks to run a command outside its sandbox
/// (its `PermissionRequest` hook, run before the approval is shown), the
/// lead is told once, and it works again once the person approves.
#[test]
fn an_interactive_codex_waiting_for_an_approval_needs_its_person() {
    let Some(codex) = cli("codex") else { return };
    if !crate::attention::have_tmux() {
        return;
    }
    let p = project();
    let target = p.root.join("backend/ok.txt");
    let stub = StubModel::start(vec![Step::Escalated(format!(
        "echo hi > {}",
        target.display()
    ))]);
    let env = crate::real_clis::codex_env(&stub, &p.home, &codex);
    let out = crate::real_clis::install_codex_guard(&p.root, &env, true);
    assert!(
        out.contains("codex: the presence hooks are trusted and will run"),
        "{out}"
    );
    let hooks: Value =
        serde_json::from_str(&fs::read_to_string(p.root.join(".codex/hooks.json")).unwrap())
            .unwrap();
    for event in [
        "UserPromptSubmit",
        "PermissionRequest",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    ] {
        assert!(
            hooks["hooks"][event]
                .to_string()
                .contains("presence --format codex"),
            "{event}: {hooks:#}"
        );
    }
    let _d = crate::daemon::Daemon::start(&p.root);
    let tmux = Tmux {
        socket: p.home.join("tmux.sock"),
    };
    let env: Vec<String> = env.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    let line = format!(
        "env -i TERM=xterm-256color {} SQUAD_AGENT=backend SQUAD_TASK=task_1 SQUAD_SESSION={SESSION} {} --ask-for-approval on-request --sandbox workspace-write",
        env.join(" "),
        codex.display()
    );
    tmux.start(&p.root, &line);
    tmux.wait_for("for shortcuts", &stub);
    // Codex reads a burst of keys as a paste (Enter in it is a newline):
    // the prompt is typed, then submitted a moment later.
    tmux.keys(&["Work on task_1."]);
    // Stays: keys within a moment of the prompt would join its paste.
    std::thread::sleep(std::time::Duration::from_millis(800));
    tmux.keys(&["Enter"]);
    tmux.wait_for("Would you like to run", &stub);
    let drawn = std::time::Instant::now();
    let v = presence(&p.root, |p| p["state"] == "waiting");
    eprintln!(
        "status --json showed backend waiting {} ms after the approval was seen",
        drawn.elapsed().as_millis()
    );
    let me = backend(&v);
    assert_eq!(me["cli"], "codex", "{v:#}");
    assert!(
        me["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("permission to use") && d.contains("ok.txt")),
        "{v:#}"
    );
    assert_eq!(me["task"], "task_1", "{v:#}");
    let session = lead_told(
        &p.root,
        "backend on task_1 is waiting for you: permission to use",
    );
    // The person approves (`y`: yes, this once): it works again.
    tmux.keys(&["y"]);
    waits_no_more(&p.root);
    crate::daemon::eventually("the command ran", || {
        (fs::read_to_string(&target).ok().as_deref() == Some("hi\n")).then_some(())
    });
    // The turn ends: idle.
    presence(&p.root, |p| p["state"] == "idle");
    assert_eq!(lead_messages(&session).len(), 1, "one message per wait");
}

/// Copilot CLI runs its notification hooks in the background: a
/// `permission_prompt` notification whose hook finishes after the hook of
/// the tool call that followed (the person approved meanwhile) does not
/// make the agent look waiting again; a newer one does.
#[test]
fn a_late_copilot_notification_does_not_undo_the_work_that_followed_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    init_session(&root, "late");
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    // Asked a second before the tool call that followed its approval.
    let asked_at = now() - 1000;
    let event = |at: i64, extra: Value| {
        let mut e = serde_json::json!({"sessionId": "c0ffee", "timestamp": at, "cwd": root.display().to_string()});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        e
    };
    let copilot = |name: &str, e: Value| {
        hook_with(
            &root,
            "backend",
            None,
            &["--format", "copilot", "--event", name],
            e,
        );
    };
    let ask = serde_json::json!({"hook_event_name": "Notification", "notification_type": "permission_prompt", "message": "Run command: ls"});
    // The tool call that followed the prompt, recorded first.
    copilot(
        "postToolUse",
        event(now(), serde_json::json!({"toolName": "bash"})),
    );
    copilot("notification", event(asked_at, ask.clone()));
    let state = |v: &Value| backend(v)["state"].as_str().map(str::to_string);
    assert_eq!(state(&status_json(&root)).as_deref(), Some("working"));
    // A prompt after it: waiting.
    copilot("notification", event(now() + 1, ask));
    let v = status_json(&root);
    assert_eq!(state(&v).as_deref(), Some("waiting"), "{v:#}");
    assert_eq!(backend(&v)["detail"], "Run command: ls", "{v:#}");
}

/// A PermissionRequest as Claude Code's hook gives it, in `root`.
fn ask_event(root: &Path, command: &str) -> Value {
    serde_json::json!({
        "hook_event_name": "PermissionRequest",
        "session_id": "0123abcd",
        "cwd": root.display().to_string(),
        "tool_name": "Bash",
        "tool_input": {"command": command},
    })
}

/// A PostToolUse (the agent works again), in `root`.
fn work_event(root: &Path) -> Value {
    serde_json::json!({
        "hook_event_name": "PostToolUse",
        "session_id": "0123abcd",
        "cwd": root.display().to_string(),
        "tool_name": "Bash",
    })
}

/// Another agent's wait with no session (said, nobody told), then
/// squadd's batch: once it is said, every record written before it was
/// read.
fn squadd_read_all(root: &Path, marker: &str) {
    hook(root, marker, None, ask_event(root, "true"));
    wait_event(root, "the marker's wait", |e| {
        e["kind"] == "agent-waiting" && e["agent"] == marker
    });
    batch_finished(root);
}

/// A wait that began while squadd was down is told once squadd is up; a
/// restart after that does not tell it again (what was told is kept in
/// `.squad/run/state.json`); a new wait while it is down is told at the
/// next start.
#[test]
fn a_wait_that_began_while_squadd_was_down_is_told_once_across_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "down");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    // squadd made the records' directory once; it is down now.
    drop(crate::daemon::Daemon::start(&root));
    hook(
        &root,
        "backend",
        Some(&name),
        ask_event(&root, "make deploy"),
    );
    assert!(lead_messages(&session).is_empty());
    let d = crate::daemon::Daemon::start(&root);
    let told = crate::daemon::eventually("the lead is told of the wait", || {
        Some(lead_messages(&session)).filter(|m| !m.is_empty())
    });
    assert!(
        told[0]
            .contains("backend on task_1 is waiting for you: permission to use Bash: make deploy"),
        "{}",
        told[0]
    );
    let (code, log) = d.terminate();
    assert_eq!(code, 0, "{log}");
    let state = fs::read_to_string(root.join(".squad/run/state.json")).unwrap();
    assert!(state.contains("waits_told"), "{state}");
    // Restarted: the same wait is not told again.
    let _d = crate::daemon::Daemon::start(&root);
    squadd_read_all(&root, "marker1");
    assert_eq!(
        lead_messages(&session).len(),
        1,
        "told once across a restart"
    );
    drop(_d);
    // A new wait while squadd is down: told at the next start.
    hook(&root, "backend", Some(&name), work_event(&root));
    hook(
        &root,
        "backend",
        Some(&name),
        ask_event(&root, "make undeploy"),
    );
    let _d = crate::daemon::Daemon::start(&root);
    let told = crate::daemon::eventually("the lead is told of the new wait", || {
        Some(lead_messages(&session)).filter(|m| m.len() == 2)
    });
    assert!(told.iter().any(|m| m.contains("make undeploy")), "{told:?}");
}

/// An agent whose waits come and go quickly (a CLI flapping, or a record
/// forged again and again) gets its lead one message, not one per wait:
/// at most one per agent a minute (the rest held back and said in one
/// message when the minute is up, if it still waits: unit-tested in
/// core/waiting.rs).
#[test]
fn a_flapping_agent_tells_its_lead_a_bounded_number_of_times() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "flaps");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let _d = crate::daemon::Daemon::start(&root);
    for i in 0..30 {
        hook(
            &root,
            "backend",
            Some(&name),
            ask_event(&root, &format!("step {i}")),
        );
        hook(&root, "backend", Some(&name), work_event(&root));
    }
    hook(
        &root,
        "backend",
        Some(&name),
        ask_event(&root, "the last step"),
    );
    squadd_read_all(&root, "marker");
    let said = events(&root)
        .iter()
        .filter(|e| e["kind"] == "agent-waiting" && e["agent"] == "backend")
        .count();
    assert!(said > 1, "squadd saw {said} waits");
    assert_eq!(
        lead_messages(&session).len(),
        1,
        "{said} waits, one message"
    );
    // It still waits, and status says so.
    let v = status_json(&root);
    assert_eq!(backend(&v)["state"], "waiting", "{v:#}");
    assert_eq!(
        backend(&v)["detail"],
        "permission to use Bash: the last step",
        "{v:#}"
    );
}

/// Records squadd refuses: a FIFO (a read of it would block), a link (to
/// another agent's record), one over 64 KiB, one that is not JSON, one
/// whose agent is not its file's name. Each is refused with a clear
/// warning in squadd's log, none hangs or stops it (a valid wait after
/// them is told), and `status` shows none of them.
#[test]
fn hostile_presence_records_are_refused_without_hanging_squadd() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "hostile");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let d = crate::daemon::Daemon::start(&root);
    let dir = root.join(".squad/run/presence");
    // A valid record elsewhere, for the link to point at.
    hook(&root, "real", Some(&name), ask_event(&root, "ls"));
    let fifo = dir.join("fifo.json");
    let made = run(Command::new("mkfifo").arg(&fifo));
    assert_eq!(code(&made), 0, "{}", stderr(&made));
    std::os::unix::fs::symlink(dir.join("real.json"), dir.join("linked.json")).unwrap();
    let mut big = fs::read_to_string(dir.join("real.json")).unwrap();
    big.insert_str(1, &format!("\"padding\": \"{}\",", "x".repeat(70 * 1024)));
    fs::write(dir.join("big.json"), big).unwrap();
    fs::write(dir.join("bad.json"), "{\"agent\": \"bad\", \"state\": ").unwrap();
    let other = fs::read_to_string(dir.join("real.json")).unwrap();
    fs::write(dir.join("thief.json"), other).unwrap();
    // squadd still answers and tells a real wait.
    hook(&root, "backend", Some(&name), ask_event(&root, "make"));
    crate::daemon::eventually("the lead is told of backend's wait", || {
        lead_messages(&session)
            .iter()
            .any(|m| m.contains("backend on task_1 is waiting"))
            .then_some(())
    });
    batch_finished(&root);
    let log = d.log();
    for (file, why) in [
        ("fifo.json", "is not a regular file"),
        ("linked.json", "is a symbolic link"),
        ("big.json", "over the limit"),
        ("bad.json", "not a presence record"),
        ("thief.json", "names agent `real`"),
    ] {
        // (A file written in two steps may be refused first as empty.)
        assert!(
            log.lines().any(|l| l.contains("presence record refused")
                && l.contains(file)
                && l.contains(why)),
            "no warning for {file} saying {why:?} in:\n{log}"
        );
    }
    let v = status_json(&root);
    let agents: Vec<&str> = v["presence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["agent"].as_str())
        .collect();
    assert_eq!(agents, ["backend", "real"], "{v:#}");
    assert!(!log.contains("panicked"), "{log}");
}

/// Another uid (`nobody`) cannot record a presence, nor plant a record:
/// `.squad/run` is squadd's and squadctl's (0700). Run as root only (the
/// test switches user with setpriv).
#[test]
fn another_uid_cannot_write_or_plant_a_presence_record() {
    use std::os::unix::fs::PermissionsExt;
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "uids");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let d = crate::daemon::Daemon::start(&root);
    // Everything above .squad/run may be read by anyone.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(root.join(".squad"), fs::Permissions::from_mode(0o755)).unwrap();
    let run_dir = root.join(".squad/run");
    let mode = fs::metadata(&run_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, ".squad/run is {mode:o}");
    let nobody = |program: &str| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", program]);
        c
    };
    // The hook as nobody: exit 0 (it never blocks the CLI), no record.
    let mut c = nobody(env!("CARGO_BIN_EXE_squadctl"));
    c.args(["--root"])
        .arg(&root)
        .args(["presence", "--format", "claude"])
        .env("SQUAD_AGENT", "intruder")
        .env("SQUAD_SESSION", &name);
    let out = run_with_input(&mut c, ask_event(&root, "rm -rf /").to_string().as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Planted by hand: refused by the kernel.
    let planted = run(nobody("sh").args([
        "-c",
        &format!("echo '{{}}' > {}/presence/planted.json", run_dir.display()),
    ]));
    assert_ne!(code(&planted), 0, "nobody wrote into .squad/run");
    assert!(
        stderr(&planted).contains("Permission denied"),
        "{}",
        stderr(&planted)
    );
    assert!(!run_dir.join("presence/intruder.json").exists());
    assert!(!run_dir.join("presence/planted.json").exists());
    squadd_read_all(&root, "marker");
    assert!(lead_messages(&session).is_empty());
    drop(d);
}
