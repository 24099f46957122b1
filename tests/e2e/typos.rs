//! Typos caught at the door (issue 40 item 3): a message to an agent the
//! project does not know, a misspelled field of a task assignment, a
//! misspelled key of the policy or of config.json are refused or reported
//! as errors naming what was meant, never passed in silence.

use crate::support::*;
use std::fs;

/// A project with a session in which frontend has a task, and a team
/// whose roster has Dana.
fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "typos");
    write_plan(&session, "task_001", "frontend", "");
    ok(ctl_run(
        &root,
        &["team", "new", "--member", "dana=Designer"],
    ));
    (tmp, root)
}

fn send(root: &std::path::Path, to: &str, extra: &[&str]) -> std::process::Output {
    run(ctl(root)
        .args([
            "send", "--from", "frontend", "--to", to, "--type", "question",
        ])
        .args(["--subject", "s", "--message", "m"])
        .args(extra))
}

#[test]
fn a_message_to_an_agent_nobody_knows_is_refused_naming_the_one_meant() {
    let (_tmp, root) = project();
    let before = snapshot(&root);
    let out = send(&root, "fronted", &[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("did you mean `frontend`?"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("--new-agent"), "{}", stderr(&out));
    assert_eq!(snapshot(&root), before, "nothing was written");
    // Far from every known name: the known ones are listed.
    let out = send(&root, "zeta", &[]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("known: dana, frontend, lead"),
        "{}",
        stderr(&out)
    );
    // Known: a task's assignee, a team member, the lead.
    for to in ["frontend", "dana", "lead"] {
        ok(send(&root, to, &[]));
    }
    // A new agent on purpose.
    ok(send(&root, "zeta", &["--new-agent"]));
    // Once zeta wrote a message, zeta is known.
    ok(run(ctl(&root)
        .args([
            "send",
            "--from",
            "zeta",
            "--to",
            "frontend",
            "--type",
            "notification",
        ])
        .args(["--subject", "hi", "--message", "m"])));
    ok(run(ctl(&root)
        .args([
            "send",
            "--from",
            "frontend",
            "--to",
            "zeta",
            "--type",
            "notification",
        ])
        .args(["--subject", "hi", "--message", "m"])));
}

#[test]
fn a_misspelled_task_field_is_an_error_and_the_task_is_never_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "typos");
    write_plan(
        &session,
        "task_001",
        "frontend",
        "boundries:\n  allowed: [\"src/**\"]\n",
    );
    let out = ctl_run(&root, &["validate"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains(
            "error[misspelled-field]: `boundries` is not a protocol field; did you mean `boundaries`?"
        ),
        "{}",
        stdout(&out)
    );
    let check = ctl_run(&root, &["status", "--check"]);
    assert_eq!(code(&check), 1, "{}", stdout(&check));
    // The task is no task: never ready, nothing for its agent.
    let next = ctl_run(&root, &["next", "--agent", "frontend"]);
    assert_eq!(code(&next), 1, "{}", stdout(&next));
    assert!(!ctl_ok(&root, &["task", "list", "--json"]).contains("task_001"));
    // Far from every field: still the forward-compatible warning.
    write_plan(&session, "task_001", "frontend", "estimate: 3d\n");
    let out = ctl_run(&root, &["validate"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("warning[unknown-field]"));
}

#[test]
fn misspelled_policy_and_config_keys_name_the_key_meant() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    ok(ctl_run(&root, &["init"]));
    write_policy(&root, "notices:\n  task_redy: false\n");
    let out = ctl_run(&root, &["validate"]);
    assert_eq!(code(&out), 1);
    assert!(
        stdout(&out).contains("did you mean `task_ready`?"),
        "{}",
        stdout(&out)
    );
    write_policy(&root, "");
    write(&root, ".squad/config.json", "{\"sesions\": {}}\n");
    let out = ctl_run(&root, &["config", "validate"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("error[config-misspelled-key]: `sesions` is not a key squad-supervisor reads; did you mean `sessions`?"),
        "{}",
        stdout(&out)
    );
}
