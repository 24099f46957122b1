//! The guided first hour (issue 28 item 4): `init` writes a commented
//! default policy, `init --example` lays out a runnable example that squadd
//! drives to completion, `team new` makes a team that exports and imports.

use crate::daemon::{Daemon, counters, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;

fn tmp_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    (tmp, root)
}

/// The one session of a project.
fn only_session(root: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = fs::read_dir(root.join(".squad/sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

#[test]
fn init_example_is_driven_to_completion_by_squadd_and_its_fake_agent() {
    let (_tmp, root) = tmp_root();
    let out = ok(ctl_run(&root, &["init", "--example"]));
    assert!(out.contains("example/agent.sh"), "{out}");
    assert!(
        out.contains("squadctl top"),
        "the next steps name the console: {out}"
    );
    let session = only_session(&root);
    assert!(session.to_string_lossy().ends_with("-example"));
    // Valid as laid out: three tasks, the first ready, the policy loads.
    let v = ok(ctl_run(&root, &["validate"]));
    assert!(v.contains("0 errors"), "{v}");
    let tasks = ok(ctl_run(&root, &["task", "list", "--json"]));
    for t in ["task_001", "task_002", "task_003"] {
        assert!(tasks.contains(t), "{tasks}");
    }
    // Boundaries on every task, and each waits for the one before.
    let plan = fs::read_to_string(session.join("role-plan-bob-task_002.md")).unwrap();
    assert!(plan.contains("example/out/task_002.txt"), "{plan}");
    assert!(plan.contains("task_001"), "{plan}");
    let daemon = Daemon::start_with_env(&root, &[("SQUAD_EXAMPLE_PACE", "0.1")]);
    let (done, total, status) = eventually("the example session completes", || {
        counters(&session).filter(|(_, _, s)| s == "completed")
    });
    assert_eq!((done, total, status.as_str()), (3, 3, "completed"));
    // Each task ran in order, wrote its file inside its boundaries, and
    // the run exited cleanly.
    for t in ["task_001", "task_002", "task_003"] {
        let f = root.join("example/out").join(format!("{t}.txt"));
        assert!(f.is_file(), "{} missing", f.display());
        // squadd's SQUAD_EXAMPLE_PACE reached the fake agent (the example's
        // policy passes it: `runners.pass_env`); it ran at the default 4 s
        // a step before, and the test took 24 s of its 30.
        let text = fs::read_to_string(&f).unwrap();
        assert!(text.contains("(pace 0.1s)"), "{text}");
        // The task completes just before its process exits.
        let run = eventually("the run exits", || {
            let v: serde_json::Value = serde_json::from_str(
                &fs::read_to_string(session.join("runs").join(t).join("run.json")).ok()?,
            )
            .ok()?;
            (v["state"] != "running").then_some(v)
        });
        assert_eq!(run["state"], "exited", "{run}");
        assert_eq!(run["exit"]["code"], 0, "{run}");
    }
    let check = ctl_run(&root, &["status", "--check"]);
    assert_eq!(
        code(&check),
        0,
        "nothing needs the lead: {}",
        stdout(&check)
    );
    daemon.terminate();
}

#[test]
fn init_example_refuses_a_project_with_sessions_or_an_edited_policy_and_writes_nothing() {
    let (_tmp, root) = tmp_root();
    ok(ctl_run(&root, &["init"]));
    write(
        &root,
        ".squad/policies.yaml",
        "locks:\n  default_ttl: 30m\n",
    );
    let before = snapshot(&root);
    let out = ctl_run(&root, &["init", "--example"]);
    assert_eq!(code(&out), 1, "refused: problems found, not a usage error");
    assert!(stderr(&out).contains("was edited"), "{}", stderr(&out));
    assert_eq!(snapshot(&root), before, "nothing was written");

    let (_tmp2, root2) = tmp_root();
    ok(ctl_run(&root2, &["init"]));
    new_session(&root2, "mine");
    let before = snapshot(&root2);
    let out = ctl_run(&root2, &["init", "--example"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("has sessions already"),
        "{}",
        stderr(&out)
    );
    assert_eq!(snapshot(&root2), before, "nothing was written");
}

#[test]
fn init_writes_a_commented_default_policy_listing_every_field_and_keeps_an_edited_one() {
    let (_tmp, root) = tmp_root();
    let out = ok(ctl_run(&root, &["init"]));
    assert!(out.contains("policies.yaml"), "{out}");
    let text = fs::read_to_string(root.join(".squad/policies.yaml")).unwrap();
    // Every section and leaf of the shipped default is there, commented out.
    for key in [
        "#boundaries:",
        "#  forbidden:",
        "#locks:",
        "#  default_ttl: 15m",
        "#retention:",
        "#  schedule:",
        "#messages:",
        "#  escalate_after:",
        "#runners:",
        "#  dispatch: false",
        "#  log_max_size: 1MiB",
        "#notices:",
        "#hooks:",
        "#skills:",
        "#memory:",
        "#check:",
    ] {
        assert!(text.contains(key), "{key} missing:\n{text}");
    }
    let v = ok(ctl_run(&root, &["validate"]));
    assert!(v.contains("0 errors, 0 warnings"), "{v}");
    let s = ok(ctl_run(&root, &["status", "--check"]));
    assert!(!s.contains("policy"), "a valid policy is not an item: {s}");
    // Uncommenting a setting makes it live: a bad value is then refused.
    let edited = text
        .replace("#locks:\n", "locks:\n")
        .replace("#  default_ttl: 15m", "  default_ttl: soon");
    assert_ne!(edited, text);
    fs::write(root.join(".squad/policies.yaml"), &edited).unwrap();
    let bad = ctl_run(&root, &["validate"]);
    assert_eq!(code(&bad), 1, "{}", stdout(&bad));
    assert!(stdout(&bad).contains("default_ttl"), "{}", stdout(&bad));
    // init again keeps the edited file.
    ok(ctl_run(&root, &["init"]));
    assert_eq!(
        fs::read_to_string(root.join(".squad/policies.yaml")).unwrap(),
        edited
    );
}

#[test]
fn team_new_makes_a_valid_team_that_exports_and_imports_round_trip() {
    let (_tmp, root) = tmp_root();
    ok(ctl_run(&root, &["init"]));
    // A fresh project has no team: export fails (the issue's complaint).
    assert_ne!(code(&ctl_run(&root, &["export"])), 0);
    let out = ok(ctl_run(
        &root,
        &[
            "team",
            "new",
            "--member",
            "alice=Backend Dev",
            "--member",
            "bob=Tester",
            "--owner",
            "Ann",
            "--stack",
            "Rust",
        ],
    ));
    assert!(out.contains("team.md"), "{out}");
    let v = ok(ctl_run(&root, &["team", "validate"]));
    assert!(v.contains("0 errors, 0 warnings"), "{v}");
    let show: serde_json::Value =
        serde_json::from_str(&ok(ctl_run(&root, &["team", "show", "--json"]))).unwrap();
    assert_eq!(show["members"].as_array().unwrap().len(), 2, "{show}");
    assert_eq!(show["has_project_context"], true);
    let casting: Vec<&str> = show["casting"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    assert_eq!(casting, ["history", "policy", "registry"]);
    // A second `team new` overwrites nothing.
    let before = snapshot(&root.join(".squad"));
    let again = ctl_run(&root, &["team", "new"]);
    assert_eq!(code(&again), 1, "{}", stderr(&again));
    assert!(
        stderr(&again).contains("exist already"),
        "{}",
        stderr(&again)
    );
    assert_eq!(snapshot(&root.join(".squad")), before);

    ok(ctl_run(&root, &["export"]));
    let bundle = root.join("squad-export.json");
    assert!(bundle.is_file());
    let (_tmp2, other) = tmp_root();
    ok(ctl_run(&other, &["init"]));
    ok(ctl_run(&other, &["import", bundle.to_str().unwrap()]));
    let v = ok(ctl_run(&other, &["team", "validate"]));
    assert!(v.contains("0 errors"), "{v}");
    let show2: serde_json::Value =
        serde_json::from_str(&ok(ctl_run(&other, &["team", "show", "--json"]))).unwrap();
    let names = |s: &serde_json::Value| -> Vec<(String, String)> {
        s["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["role"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(names(&show), names(&show2));
    for a in ["alice", "bob"] {
        assert_eq!(
            fs::read_to_string(root.join(".squad/agents").join(a).join("charter.md")).unwrap(),
            fs::read_to_string(other.join(".squad/agents").join(a).join("charter.md")).unwrap()
        );
    }
    // The imported project's own policy came back with it.
    assert!(other.join(".squad/policies.yaml").is_file());
}

#[test]
fn team_new_refuses_bad_members_and_writes_nothing() {
    let (_tmp, root) = tmp_root();
    ok(ctl_run(&root, &["init"]));
    let before = snapshot(&root);
    for bad in [
        vec!["--member", "Alice=Dev"],
        vec!["--member", "alice"],
        vec!["--member", "alice=a|b"],
        vec!["--member", "alice=Dev", "--member", "alice=Ops"],
    ] {
        let mut args = vec!["team", "new"];
        args.extend(bad.iter().copied());
        let out = ctl_run(&root, &args);
        assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("--member"), "{}", stderr(&out));
    }
    assert_eq!(snapshot(&root), before);
}

/// The commands of README.md's first Quick start block, as typed.
fn readme_quick_start() -> Vec<String> {
    let readme =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let section = readme
        .split("\n## Quick start\n")
        .nth(1)
        .expect("README has a Quick start");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a shell block");
    block.lines().map(str::to_string).collect()
}

/// Issue 40 item 2: the Quick start typed as README writes it, in an
/// interactive shell in tmux (squadd started with `&`, then `squadctl
/// top` in the same terminal): top's screen holds top's lines only, none
/// of squadd's log, while the example runs to completion; squadd's log is
/// in `.squad/run/squadd.log`; `kill %1` stops it.
#[test]
fn the_readme_quick_start_shows_a_clean_top_while_squadd_runs_in_the_background() {
    use crate::attention::{Tmux, have_tmux};
    if !have_tmux() {
        return;
    }
    let (_tmp, base) = tmp_root();
    let commands = readme_quick_start();
    assert!(
        commands.iter().any(|c| c.starts_with("squadd --root . &"))
            && commands.iter().any(|c| c.starts_with("squadctl top")),
        "{commands:?}"
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_squadd")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tmux = Tmux {
        socket: base.join("tmux.sock"),
    };
    // A shell with job control, as a person's terminal; the fake agent's
    // pace is squadd's environment, not a change to the commands.
    let shell = format!(
        "env -i HOME={home} PATH={path} TERM=xterm NO_COLOR=1 SQUAD_EXAMPLE_PACE=0.2 bash --norc --noprofile -i",
        home = base.display()
    );
    let out = run(tmux.cmd().current_dir(&base).args([
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "100",
        "-y",
        "40",
        &shell,
    ]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let type_line = |line: &str| {
        run(tmux.cmd().args(["send-keys", "-t", "top", "-l", line]));
        run(tmux.cmd().args(["send-keys", "-t", "top", "Enter"]));
    };
    let root = base.join("demo");
    for c in commands
        .iter()
        .take_while(|c| !c.starts_with("squadctl top"))
    {
        type_line(c);
        if c.starts_with("squadctl init") {
            eventually("init wrote the example", || {
                root.join("example/agent.sh").is_file().then_some(())
            });
        }
    }
    eventually("squadd answers", || {
        root.join(".squad/run/squadd.sock").exists().then_some(())
    });
    type_line(
        commands
            .iter()
            .find(|c| c.starts_with("squadctl top"))
            .unwrap(),
    );
    // The session completes on top's screen, and every line of it is top's.
    let screen = tmux.wait_for(&["squadd running (pid", "3/3 session completed"]);
    for line in screen.lines() {
        for foreign in [" INFO ", " WARN ", "squad_supervisor", "squadd:", "$ "] {
            assert!(
                !line.contains(foreign),
                "a foreign line on top's screen ({foreign:?}): {line}\n{screen}"
            );
        }
    }
    assert!(screen.starts_with("squadd running (pid"), "{screen}");
    let log = fs::read_to_string(root.join(".squad/run/squadd.log")).unwrap();
    assert!(log.contains("INFO"), "squadd logged to its file: {log}");
    // q quits top; the README's last line stops squadd.
    run(tmux.cmd().args(["send-keys", "-t", "top", "q"]));
    eventually("top quits: the shell's screen is back", || {
        (!tmux.screen().contains("NEEDS YOU")).then_some(())
    });
    for c in commands
        .iter()
        .skip_while(|c| !c.starts_with("squadctl top"))
        .skip(1)
    {
        type_line(c);
    }
    eventually("squadd stops and removes its socket", || {
        (!root.join(".squad/run/squadd.sock").exists()).then_some(())
    });
}

/// Issue 40 item 2: squadd's warnings reach the lead wherever its log
/// goes: the status answer carries the last ones (`top` shows them in a
/// pane of their own).
#[test]
fn squadds_last_warnings_come_with_its_status() {
    let (_tmp, root) = tmp_root();
    ok(ctl_run(&root, &["init"]));
    write(&root, ".squad/config.json", "{\"version\": \"one\"}\n");
    let daemon = Daemon::start(&root);
    let v: serde_json::Value =
        serde_json::from_str(&ok(ctl_run(&root, &["status", "--json"]))).unwrap();
    let warnings = v["daemon"]["warnings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        warnings.iter().any(|w| w["level"] == "WARN"
            && w["text"]
                .as_str()
                .is_some_and(|t| t.contains("config.json invalid"))),
        "{v:#}"
    );
    daemon.terminate();
}
