//! Notices that resolve (issue 40 item 4): a notice of squadd's whose fact
//! is gone never escalates nor counts as an overdue reply, and the
//! overdue-reply item's own command clears it.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;

/// The id of the first unread message in `agent`'s inboxes whose id
/// starts with `prefix`, once delivered.
fn delivered(root: &Path, agent: &str, prefix: &str) -> String {
    eventually(&format!("a {prefix} message delivered to {agent}"), || {
        let v: serde_json::Value =
            serde_json::from_str(&ctl_ok(root, &["inbox", "list", agent, "--json"])).ok()?;
        v["messages"]
            .as_array()?
            .iter()
            .filter(|m| m["unread"] == true)
            .filter_map(|m| m["message_id"].as_str())
            .find(|id| id.starts_with(prefix))
            .map(str::to_string)
    })
}

fn overdue_replies(root: &Path) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&ctl_ok(root, &["status", "--json"])).unwrap();
    v["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "overdue-reply")
        .cloned()
        .collect()
}

/// With squadd stopped: high messages escalate a second after delivery;
/// lead sends frontend a live high message; squadd starts again. Returns
/// squadd and the live message's id once it escalated (the wait that
/// shows the notices due before it were looked at).
fn restart_with_a_live_message(root: &Path, kind: &str) -> (Daemon, String) {
    write_policy(root, "messages:\n  escalate_after:\n    high: 1s\n");
    ok(run(ctl(root)
        .args([
            "send",
            "--from",
            "lead",
            "--to",
            "frontend",
            "--priority",
            "high",
        ])
        .args([
            "--type",
            kind,
            "--subject",
            "api?",
            "--message",
            "flat or nested?",
        ])));
    let d = Daemon::start(root);
    let live = delivered(root, "frontend", "msg_2");
    eventually("the live message escalated", || {
        (audited_message(root, "message-escalated", &live) == 1).then_some(())
    });
    (d, live)
}

/// The invalid-file notice of a plan fixed while squadd was down is due
/// at the restart and moot: never escalated, never an overdue reply; a
/// live message of the same priority, delivered after it, escalates, and
/// the command its overdue-reply item shows clears the item.
#[test]
fn a_notice_whose_file_was_fixed_never_escalates_and_an_overdue_reply_is_cleared_by_its_command() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "moot");
    write_policy(&root, "messages:\n  escalate_after:\n    high: 1h\n");
    write_plan(
        &session,
        "task_001",
        "frontend",
        "boundries:\n  allowed: [\"src/**\"]\n",
    );
    let d = Daemon::start(&root);
    let notice = delivered(&root, "frontend", "msg_squadd_invalid_");
    d.terminate();
    // Fixed while squadd is down; escalation now due a second after delivery.
    write_plan(
        &session,
        "task_001",
        "frontend",
        "boundaries:\n  allowed: [\"src/**\"]\n",
    );
    let (d, live) = restart_with_a_live_message(&root, "question");
    assert_eq!(
        audited_message(&root, "message-escalated", &notice),
        0,
        "the moot notice was due first and never escalated"
    );
    let items = overdue_replies(&root);
    assert_eq!(items.len(), 1, "{items:?}");
    let command = items[0]["command"].as_str().unwrap().to_string();
    assert!(
        command.contains(&format!("inbox ack frontend {live}")),
        "{command}"
    );
    // The command shown resolves the item: run it as written.
    for part in command.split("; ") {
        let words = shlex_words(part);
        assert_eq!(words[0], "squadctl", "{part}");
        ok(run(ctl(&root).args(&words[1..])));
    }
    assert!(overdue_replies(&root).is_empty());
    let check = ctl_run(&root, &["status", "--check"]);
    assert_eq!(code(&check), 0, "{}", stdout(&check));
    d.terminate();
}

/// A command line split into words (no quoting in these commands).
fn shlex_words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The overdue notice of a task completed while squadd was down is moot
/// at the restart: never escalated, never an overdue reply; a live
/// message delivered after it escalates (the wait that shows the notice
/// was looked at).
#[test]
fn the_overdue_notice_of_a_task_since_completed_never_escalates() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    init_session(&root, "late");
    write_policy(&root, "messages:\n  escalate_after:\n    high: 1h\n");
    ok(task_new(
        &root,
        &words("--agent frontend --instruction x --allow src/** --timeout 1s"),
    ));
    ctl_ok(
        &root,
        &words("progress --agent frontend --task task_001 --status in_progress"),
    );
    let d = Daemon::start(&root);
    let notice = delivered(&root, "frontend", "msg_squadd_overdue_");
    d.terminate();
    ctl_ok(
        &root,
        &words("progress --agent frontend --task task_001 --status completed"),
    );
    let (d, _live) = restart_with_a_live_message(&root, "notification");
    assert_eq!(audited_message(&root, "message-escalated", &notice), 0);
    let replies = overdue_replies(&root);
    assert!(
        replies
            .iter()
            .all(|i| !i["summary"].as_str().unwrap().contains(&notice)),
        "{replies:?}"
    );
    d.terminate();
}

// Issue 40 item 4, "every needs-attention item's command actually
// resolves it": per kind, the condition made as it happens, the item's
// command read from `status --json` and run as written, the item gone
// and `status --check` at 0.

/// Each kind of needs-attention item and the test (`module::name`) that
/// runs its command and sees it gone. A kind squadctl knows and this table
/// does not fails [`every_kind_has_a_test_that_runs_its_command`].
const RESOLVED_BY: &[(&str, &str)] = &[
    (
        "policy-refused",
        "resolve::a_refused_policy_is_resolved_by_its_command",
    ),
    (
        "policy-invalid",
        "resolve::an_invalid_policy_is_resolved_by_its_command",
    ),
    (
        "config-invalid",
        "resolve::an_invalid_config_is_resolved_by_its_command",
    ),
    (
        "error-report",
        "resolve::an_error_report_is_resolved_by_its_command_until_another_comes",
    ),
    (
        "blocked-task",
        "resolve::a_blocked_task_is_resolved_by_its_command_until_it_blocks_again",
    ),
    ("run-held", "resolve::a_held_run_is_resolved_by_its_command"),
    (
        "run-failed",
        "resolve::a_failed_run_is_resolved_by_its_command",
    ),
    (
        "overdue-reply",
        "resolve::a_notice_whose_file_was_fixed_never_escalates_and_an_overdue_reply_is_cleared_by_its_command",
    ),
    (
        "overdue-task",
        "resolve::an_overdue_task_is_resolved_by_its_command",
    ),
    (
        "invalid-file",
        "resolve::an_invalid_file_is_resolved_by_its_command",
    ),
    (
        "branch-held",
        "handover::a_held_branch_is_resolved_by_its_command",
    ),
    (
        "branch-overlap",
        "overlap::two_runs_changing_one_file_are_told_to_the_lead_before_either_merges",
    ),
    (
        "model-warning",
        "resolve::a_model_warning_is_resolved_by_its_command",
    ),
    (
        "session-budget",
        "resolve::a_session_budget_is_resolved_by_its_command",
    ),
    // Where .squad/ went is resolved by its `mv` command in
    // beside::squadd_says_where_another_tools_import_moved_its_root_and_resumes.
    (
        "root-missing",
        "resolve::a_missing_root_is_resolved_by_its_command",
    ),
    (
        "review-waiting",
        "review::a_waiting_review_is_resolved_by_its_command",
    ),
    (
        "agent-waiting",
        "resolve::a_waiting_agent_is_resolved_by_what_its_item_says",
    ),
];

#[test]
fn every_kind_has_a_test_that_runs_its_command() {
    let out = run(squadctl().args(["status", "--check", "--allow", "nonsense"]));
    let err = stderr(&out);
    let kinds: std::collections::BTreeSet<&str> = err
        .split("one of: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("{err}"))
        .trim()
        .split(", ")
        .collect();
    let tested: std::collections::BTreeSet<&str> = RESOLVED_BY.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds, tested,
        "a kind of needs-attention item without a test that runs its command"
    );
    // The tests named exist (the table cannot name a test that is gone).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e");
    for (_, test) in RESOLVED_BY {
        let (module, name) = test.split_once("::").unwrap();
        let text = fs::read_to_string(dir.join(format!("{module}.rs"))).unwrap();
        assert!(text.contains(&format!("fn {name}()")), "no test {test}");
    }
}

/// `status --json` of the root.
fn status_of(root: &Path) -> serde_json::Value {
    let out = ctl_run(root, &["status", "--json"]);
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)))
}

/// The items of `kind` that need attention.
fn items_of(root: &Path, kind: &str) -> Vec<serde_json::Value> {
    status_of(root)["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == kind)
        .cloned()
        .collect()
}

/// The one item of `kind`, once it needs attention.
pub(crate) fn the_item(root: &Path, kind: &str) -> serde_json::Value {
    eventually(&format!("a {kind} item"), || {
        let mut items = items_of(root, kind);
        (items.len() == 1).then(|| items.remove(0))
    })
}

/// Follows an item's command as a person would: each `; ` step in turn; a
/// step for a person (`fix FILE`, `answer …`, before `, then:` or alone)
/// is done by `act`; every squadctl command is split as the shell splits
/// it and run by the real squadctl in `root`, and must succeed. Returns
/// the steps `act` was given.
pub(crate) fn follow(root: &Path, command: &str, mut act: impl FnMut(&str)) -> Vec<String> {
    let mut acted = Vec::new();
    for step in command.split("; ") {
        let line = match step.split_once(", then: ") {
            Some((person, line)) => {
                act(person);
                acted.push(person.to_string());
                line
            }
            None if !step.starts_with("squadctl ") => {
                act(step);
                acted.push(step.to_string());
                continue;
            }
            None => step,
        };
        let words = shlex::split(line).unwrap_or_else(|| panic!("not shell words: {line}"));
        assert_eq!(words[0], "squadctl", "{command}");
        let out = run(ctl(root).args(&words[1..]));
        assert_eq!(
            code(&out),
            0,
            "`{line}` of `{command}`: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
    acted
}

/// No item of `kind` needs attention any more, and `status --check`
/// passes.
pub(crate) fn resolved(root: &Path, kind: &str) {
    eventually(&format!("no {kind} item"), || {
        items_of(root, kind).is_empty().then_some(())
    });
    let check = ctl_run(root, &["status", "--check"]);
    assert_eq!(code(&check), 0, "{}{}", stdout(&check), stderr(&check));
}

/// A project with one session; returns (tempdir, root, session dir).
fn project(slug: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, slug);
    (tmp, root, session)
}

#[test]
fn an_invalid_policy_is_resolved_by_its_command() {
    let (_tmp, root, _) = project("policy");
    write_policy(&root, "locks:\n  default_ttl: forever\n");
    let item = the_item(&root, "policy-invalid");
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        assert!(step.contains(".squad/policies.yaml"), "{step}");
        write_policy(&root, "locks:\n  default_ttl: 10m\n");
    });
    assert_eq!(acted.len(), 1, "{item}");
    resolved(&root, "policy-invalid");
}

#[test]
fn an_invalid_config_is_resolved_by_its_command() {
    let (_tmp, root, _) = project("config");
    fs::write(root.join(".squad/config.json"), "{\"runners\": [}\n").unwrap();
    let item = the_item(&root, "config-invalid");
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        assert!(step.contains(".squad/config.json"), "{step}");
        fs::write(root.join(".squad/config.json"), "{}\n").unwrap();
    });
    assert_eq!(acted.len(), 1, "{item}");
    resolved(&root, "config-invalid");
}

#[test]
fn an_invalid_file_is_resolved_by_its_command() {
    let (_tmp, root, session) = project("file");
    let extra = "boundaries:\n  allowed: [\"src/**\"]\n";
    write_plan(&session, "task_001", "frontend", "priority: [\n");
    let item = the_item(&root, "invalid-file");
    let command = item["command"].as_str().unwrap();
    let acted = follow(&root, command, |step| {
        // The file is named relative to the project root.
        let rel = step.strip_prefix("fix ").unwrap();
        assert!(root.join(rel).is_file(), "{step}");
        assert!(rel.starts_with(".squad/sessions/"), "{step}");
        write_plan(&session, "task_001", "frontend", extra);
    });
    assert_eq!(acted.len(), 1, "{command}");
    resolved(&root, "invalid-file");
}

/// The ids of the items the lead acknowledged (`status --json`).
fn acknowledged(root: &Path) -> Vec<String> {
    status_of(root)["acknowledged"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["id"].as_str().map(str::to_string))
        .collect()
}

/// An agent's error report: the lead looks and acknowledges it (the
/// item's command); a new report needs attention again. Only the lead's
/// kinds can be acknowledged away, and only an id that names an item.
#[test]
fn an_error_report_is_resolved_by_its_command_until_another_comes() {
    let (_tmp, root, _) = project("errors");
    ok(task_new(
        &root,
        &words("--agent bob --instruction x --allow src/**"),
    ));
    let report = "report-error --agent bob --task task_001 --severity error --type build --message";
    ctl_ok(&root, &[words(report), vec!["disk full"]].concat());
    let item = the_item(&root, "error-report");
    // Said once (it read "error error from bob" before issue 40).
    assert_eq!(
        item["summary"],
        "error report from bob on task_001: disk full"
    );
    let id = item["id"].as_str().unwrap().to_string();
    let command = item["command"].as_str().unwrap();
    assert!(
        command.ends_with(&format!("squadctl status --ack {id}")),
        "{command}"
    );
    let acted = follow(&root, command, |step| {
        panic!("no step for a person: {step}")
    });
    assert!(acted.is_empty());
    resolved(&root, "error-report");
    assert_eq!(acknowledged(&root), std::slice::from_ref(&id));
    // Acknowledging it again says so; an unknown or malformed id is refused.
    assert!(ctl_ok(&root, &["status", "--ack", &id]).contains("was acknowledged"));
    let again: serde_json::Value =
        serde_json::from_str(&ctl_ok(&root, &["status", "--ack", &id, "--json"])).unwrap();
    assert_eq!(
        (&again["id"], &again["acknowledged_now"]),
        (&item["id"], &serde_json::json!(false))
    );
    let out = ctl_run(&root, &["status", "--ack", "0123456789abcdef"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = ctl_run(&root, &["status", "--ack", "../../../etc/passwd"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(!root.join(".squad/run/etc").exists());
    // Another report: a new fact, a new item.
    ctl_ok(&root, &[words(report), vec!["out of memory"]].concat());
    let again = the_item(&root, "error-report");
    assert!(
        again["summary"].as_str().unwrap().contains("out of memory"),
        "{again}"
    );
    assert_ne!(again["id"], item["id"]);
    // A kind whose cause must go is not acknowledged away.
    write_policy(&root, "locks:\n  default_ttl: forever\n");
    let policy = the_item(&root, "policy-invalid");
    let out = ctl_run(&root, &["status", "--ack", policy["id"].as_str().unwrap()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("squadctl validate"),
        "{}",
        stderr(&out)
    );
    assert_eq!(items_of(&root, "policy-invalid").len(), 1);
}

/// A blocked task: acknowledged by its command; blocked again (another
/// blocker) it needs attention again.
#[test]
fn a_blocked_task_is_resolved_by_its_command_until_it_blocks_again() {
    let (_tmp, root, _) = project("blocked");
    ok(task_new(
        &root,
        &words("--agent alice --instruction x --allow src/**"),
    ));
    let blocked = |why: &str| {
        ok(run(ctl(&root)
            .args(words(
                "progress --task task_001 --agent alice --status blocked --blocker",
            ))
            .arg(why)))
    };
    blocked("need the schema");
    let item = the_item(&root, "blocked-task");
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        panic!("no step for a person: {step}")
    });
    assert!(acted.is_empty());
    resolved(&root, "blocked-task");
    let text = ctl_ok(&root, &["status"]);
    assert!(text.contains("acknowledged (1):"), "{text}");
    assert!(text.contains("need the schema"), "{text}");
    blocked("need the network");
    let again = the_item(&root, "blocked-task");
    assert!(
        again["summary"]
            .as_str()
            .unwrap()
            .contains("need the network"),
        "{again}"
    );
    // Acknowledged in turn, the first acknowledgement (its fact gone) is
    // forgotten.
    let id = again["id"].as_str().unwrap();
    ctl_ok(&root, &["status", "--ack", id]);
    let kept: Vec<String> = fs::read_dir(root.join(".squad/run/acknowledged"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(kept, [id]);
}

/// Leads acknowledging at once (two terminals, a script) lose none: each
/// acknowledgement is its own file, and one never forgets another's.
#[test]
fn acknowledgements_made_at_once_are_all_kept() {
    let (_tmp, root, _) = project("together");
    for i in 0..8 {
        let task = format!("task_{i}");
        ok(task_new(
            &root,
            &[
                "--id",
                &task,
                "--agent",
                "bob",
                "--instruction",
                "x",
                "--allow",
                "src/**",
            ],
        ));
        ctl_ok(
            &root,
            &words(&format!(
                "report-error --agent bob --task {task} --severity error --type build --message broke"
            )),
        );
    }
    let ids: Vec<String> = items_of(&root, "error-report")
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 8);
    let children: Vec<std::process::Child> = ids
        .iter()
        .map(|id| {
            ctl(&root)
                .args(["status", "--ack", id])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert!(items_of(&root, "error-report").is_empty());
    let mut acked = acknowledged(&root);
    acked.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(acked, want);
}

#[test]
fn an_overdue_task_is_resolved_by_its_command() {
    let (_tmp, root, _) = project("overdue");
    write_policy(&root, NO_NOTICES);
    ok(task_new(
        &root,
        &words("--agent frontend --instruction x --allow src/** --timeout 1s"),
    ));
    ctl_ok(
        &root,
        &words("progress --agent frontend --task task_001 --status in_progress"),
    );
    let item = the_item(&root, "overdue-task");
    follow(&root, item["command"].as_str().unwrap(), |step| {
        panic!("no step for a person: {step}")
    });
    resolved(&root, "overdue-task");
}

/// A run record as squadd writes it, for `task` of `agent`: `fields` (JSON
/// members) over a run that ended at 10:05 without completing.
fn run_record(session: &Path, task: &str, agent: &str, fields: &str) {
    let name = session.file_name().unwrap().to_str().unwrap();
    let dir = session.join("runs").join(task);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("run.json"),
        format!(
            r#"{{"task":"{task}","agent":"{agent}","session":"{name}","attempt":1,"pid":999999,"process_start":1,"started_at":"2024-01-15T10:00:00Z","deadline":"2024-01-15T11:00:00Z","command":["agent"],"exit":{{"at":"2024-01-15T10:05:00Z","code":1}},"completed":false,{fields}}}"#
        ),
    )
    .unwrap();
}

/// A project whose agent `alice` runs a script that completes its task,
/// squadd not dispatching by itself (only the command starts a run), with
/// task_001 of alice.
fn runner_project(slug: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, root, session) = project(slug);
    let agent = root.join("agent.sh");
    fs::write(
        &agent,
        format!(
            "#!/bin/sh\n'{}' progress --status completed --percent 100 -q\n",
            env!("CARGO_BIN_EXE_squadctl")
        ),
    )
    .unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: false\n  agents:\n    alice:\n      command: [\"{}\"]\n      max_retries: 0\n",
            agent.display()
        ),
    );
    ok(task_new(
        &root,
        &words("--agent alice --instruction x --allow src/**"),
    ));
    (tmp, root, session)
}

#[test]
fn a_held_run_is_resolved_by_its_command() {
    let (_tmp, root, session) = runner_project("held");
    run_record(
        &session,
        "task_001",
        "alice",
        r#""state":"stopped","held":true"#,
    );
    let d = Daemon::start(&root);
    let item = the_item(&root, "run-held");
    follow(&root, item["command"].as_str().unwrap(), |step| {
        panic!("no step for a person: {step}")
    });
    resolved(&root, "run-held");
    d.terminate();
}

/// A run that ended without completing, with no retry due and not held
/// (a record of a squadd before held runs).
#[test]
fn a_failed_run_is_resolved_by_its_command() {
    let (_tmp, root, session) = runner_project("failed");
    run_record(
        &session,
        "task_001",
        "alice",
        r#""state":"timed-out","held":false"#,
    );
    let d = Daemon::start(&root);
    let item = the_item(&root, "run-failed");
    follow(&root, item["command"].as_str().unwrap(), |step| {
        panic!("no step for a person: {step}")
    });
    resolved(&root, "run-failed");
    d.terminate();
}

#[test]
fn a_model_warning_is_resolved_by_its_command() {
    let (_tmp, root, session) = project("model");
    ok(task_new(
        &root,
        &words("--agent backend --instruction x --allow src/**"),
    ));
    ctl_ok(
        &root,
        &words("progress --agent backend --task task_001 --status completed"),
    );
    fs::write(
        root.join(".squad/config.json"),
        r#"{"models": {"default": "claude-sonnet-4-5"}}"#,
    )
    .unwrap();
    run_record(
        &session,
        "task_001",
        "backend",
        r#""state":"exited","held":false,"model":"claude-sonnet-4-5","model_warning":"Claude Sonnet 4.5 will be retired on November 30, 2026.""#,
    );
    let item = the_item(&root, "model-warning");
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        assert!(
            step.contains("backend") && step.contains(".squad/config.json"),
            "{step}"
        );
        fs::write(
            root.join(".squad/config.json"),
            r#"{"models": {"default": "claude-sonnet-4-5", "roleOverrides": {"backend": "claude-opus-4-8"}}}"#,
        )
        .unwrap();
    });
    assert_eq!(acted.len(), 1);
    resolved(&root, "model-warning");
}

#[test]
fn a_session_budget_is_resolved_by_its_command() {
    let (_tmp, root, session) = project("budget");
    ok(task_new(
        &root,
        &words("--agent backend --instruction x --allow src/**"),
    ));
    ctl_ok(
        &root,
        &words("progress --agent backend --task task_001 --status completed"),
    );
    run_record(
        &session,
        "task_001",
        "backend",
        r#""state":"exited","held":false,"usage":{"input_tokens":1100,"cached_tokens":0,"output_tokens":100}"#,
    );
    write_policy(&root, "runners:\n  budget:\n    session: {tokens: 1000}\n");
    let item = the_item(&root, "session-budget");
    assert_eq!(item["severity"], "error", "{item}");
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        assert!(step.contains("runners.budget.session"), "{step}");
        write_policy(
            &root,
            "runners:\n  budget:\n    session: {tokens: 100000}\n",
        );
    });
    assert_eq!(acted.len(), 1);
    resolved(&root, "session-budget");
}

/// `.squad/sessions` removed under squadd: `squadctl --root R init`, the
/// item's command, brings it back and squadd resumes.
#[test]
fn a_missing_root_is_resolved_by_its_command() {
    let (_tmp, root, _) = project("gone");
    let d = Daemon::start(&root);
    fs::remove_dir_all(root.join(".squad/sessions")).unwrap();
    let item = the_item(&root, "root-missing");
    assert_eq!(item["severity"], "critical");
    follow(&root, item["command"].as_str().unwrap(), |step| {
        panic!("no step for a person: {step}")
    });
    resolved(&root, "root-missing");
    d.terminate();
}

/// An agent's CLI waits for its person (its hook said so): the item says
/// whom to answer; once answered, the CLI's next hook says it works and
/// the item is gone.
#[test]
fn a_waiting_agent_is_resolved_by_what_its_item_says() {
    let (_tmp, root, session) = project("waits");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let hook = |event: serde_json::Value| {
        let mut c = ctl(&root);
        c.args(["presence", "--format", "claude"])
            .env("SQUAD_AGENT", "backend")
            .env("SQUAD_SESSION", &name);
        let out = run_with_input(&mut c, event.to_string().as_bytes());
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    };
    let cwd = root.display().to_string();
    hook(serde_json::json!({
        "hook_event_name": "PermissionRequest",
        "session_id": "0123abcd",
        "cwd": cwd,
        "tool_name": "Bash",
        "tool_input": {"command": "make"},
    }));
    let item = the_item(&root, "agent-waiting");
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        assert!(step.starts_with("answer backend's claude"), "{step}");
        assert!(step.contains(&cwd), "{step}");
        // Answered: the CLI goes on with the tool and its hook says so.
        hook(serde_json::json!({
            "hook_event_name": "PostToolUse",
            "session_id": "0123abcd",
            "cwd": cwd,
            "tool_name": "Bash",
            "tool_input": {"command": "make"},
        }));
    });
    assert_eq!(acted.len(), 1);
    resolved(&root, "agent-waiting");
}

/// squadd refuses a policy saved invalid (it runs on the previous one):
/// fixed as the item says (the edit undone), squadd says the policy is in
/// force again and the item is gone.
#[test]
fn a_refused_policy_is_resolved_by_its_command() {
    let (_tmp, root, session) = project("refused");
    let in_force = "locks:\n  default_ttl: 10m\n";
    write_policy(&root, in_force);
    let d = Daemon::start(&root);
    write_policy(&root, "locks:\n  default_ttl: forever\n");
    let item = the_item(&root, "policy-refused");
    // Whatever squadd does next (a delivery, its event), the refusal
    // stands until the file loads.
    write_plan(
        &session,
        "task_001",
        "alice",
        "boundaries:\n  allowed: [\"src/**\"]\n",
    );
    wait_event(&root, "a task-ready event", |e| e["kind"] == "task-ready");
    batch_finished(&root);
    let last = &status_of(&root)["daemon"]["last_event"]["kind"];
    assert_ne!(last, "policy-refused", "a later event");
    assert_eq!(items_of(&root, "policy-refused").len(), 1);
    let acted = follow(&root, item["command"].as_str().unwrap(), |step| {
        assert!(step.contains(".squad/policies.yaml"), "{step}");
        // The usual fix: the bad edit undone, the policy in force put
        // back (squadd said nothing of it before: the refusal stood).
        write_policy(&root, in_force);
    });
    assert_eq!(acted.len(), 1);
    resolved(&root, "policy-refused");
    d.terminate();
}
