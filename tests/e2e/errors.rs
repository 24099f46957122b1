//! Clear errors for a new user: wrong roots, nested projects, squadd down,
//! scripts that need an exit status, hostile names on the terminal.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const S: &str = "20240115T100000Z-errs";

/// These tests read what inboxes hold: squadd's own notices (the tasks are
/// ready) are off here and tested in notices.rs.
fn project() -> tempfile::TempDir {
    quiet_two_agent_project(S).0
}

#[test]
fn an_explicit_root_without_squad_is_an_error_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = tmp.path().join("typo");
    fs::create_dir(&typo).unwrap();
    let commands: &[&[&str]] = &[
        &["inbox", "list", "bob"],
        &["status"],
        &["lock", "list"],
        &["events"],
    ];
    for args in commands {
        for via_env in [false, true] {
            let mut cmd = ctl(tmp.path());
            cmd.args(*args);
            if via_env {
                cmd.env("SQUAD_ROOT", &typo);
            } else {
                cmd.arg("--root").arg(&typo);
            }
            let out = run(&mut cmd);
            assert_eq!(code(&out), 2, "{args:?} (env {via_env}): {}", stdout(&out));
            let err = stderr(&out);
            assert!(
                err.contains(&typo.display().to_string()) && err.contains("squadctl init"),
                "{args:?}: {err}"
            );
        }
    }
}

#[test]
fn init_inside_a_project_says_so_instead_of_nesting() {
    let tmp = project();
    let sub = tmp.path().join("src/deep");
    fs::create_dir_all(&sub).unwrap();
    let out = ctl_run(&sub, &["init"]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    let outer = fs::canonicalize(tmp.path()).unwrap();
    assert!(
        stderr(&out).contains(&outer.display().to_string()) && stderr(&out).contains("--nested"),
        "{}",
        stderr(&out)
    );
    assert!(!sub.join(".squad").exists());
    // Meant: a separate project.
    let out = ctl_run(&sub, &["init", "--nested"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sub.join(".squad/sessions").is_dir());
    // Re-running init in a project is still fine.
    assert_eq!(code(&ctl_run(tmp.path(), &["init"])), 0);
}

#[test]
fn send_with_squadd_down_warns_and_inbox_list_shows_what_waits() {
    let tmp = project();
    let root = tmp.path();
    let out = ctl_run(
        root,
        &words(
            "send --from alice --to bob --priority high --type question --subject schema? --message 'which one?'",
        ),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    assert!(
        stderr(&out).contains("squadd is not running") && stderr(&out).contains("inbox list bob"),
        "{}",
        stderr(&out)
    );
    let out = ctl_run(root, &["inbox", "list", "bob"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("not delivered yet") && text.contains(&id),
        "{text}"
    );
    assert!(text.contains("squadd is not running"), "{text}");
    let out = ctl_run(root, &["inbox", "list", "bob", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["not_delivered"][0]["message_id"], id, "{v}");
    assert_eq!(v["messages"].as_array().unwrap().len(), 0);
    // Alice's list is not bob's.
    let out = ctl_run(root, &["inbox", "list", "alice"]);
    assert!(!stdout(&out).contains(&id));
    // Once squadd delivers it, it is a message, not a waiting one.
    let _d = Daemon::start(root);
    eventually("delivery", || {
        let out = ctl_run(root, &["inbox", "list", "bob", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).ok()?;
        (v["messages"].as_array()?.len() == 1 && v["not_delivered"].as_array()?.is_empty())
            .then_some(())
    });
}

#[test]
fn events_follow_exits_non_zero_when_squadd_stops() {
    let tmp = project();
    let root = tmp.path();
    let d = Daemon::start(root);
    let mut follower = ctl(root)
        .args(["events", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until squadd follows it: an event squadd emits (a new session)
    // reaches its output. Connected is not enough: a request squadd has
    // not read yet is reset, not told that squadd stopped.
    let out = follower.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(out).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = tx.send(line);
        }
        lines.for_each(drop);
    });
    let mut n = 0;
    eventually("the follower follows", || {
        n += 1;
        fs::create_dir(root.join(format!(".squad/sessions/20240115T1000{n:02}Z-f"))).ok()?;
        rx.recv_timeout(Duration::from_millis(200)).ok()
    });
    let (status, _) = d.terminate();
    assert_eq!(status, 0);
    let start = Instant::now();
    while follower.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = follower.kill();
            panic!("events --follow kept running after squadd stopped");
        }
        // Poll interval of a wait with a deadline (20 s above).
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = follower.wait_with_output().unwrap();
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("squadd stopped"), "{}", stderr(&out));
}

#[test]
fn status_check_exits_1_on_problems() {
    let tmp = project();
    let root = tmp.path();
    let out = ctl_run(root, &["status", "--check"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    // Without --check problems are shown, exit 0 as before.
    fs::write(
        root.join(".squad/sessions")
            .join(S)
            .join("role-plan-bob-task_x.md"),
        "meta: [broken\n",
    )
    .unwrap();
    assert_eq!(code(&ctl_run(root, &["status"])), 0);
    let out = ctl_run(root, &["status", "--check"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert_eq!(code(&ctl_run(root, &["status", "--check", "--json"])), 1);
}

#[test]
fn control_characters_in_names_never_reach_the_terminal() {
    let tmp = project();
    let root = tmp.path();
    let evil = "20240116T000000Z-\u{1b}[2J\u{1b}]0;pwned\u{7}\nfake line";
    let dir = root.join(".squad/sessions").join(evil);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("role-plan-bob-task_y.md"), "meta: [broken\n").unwrap();
    let locks = root.join(".squad/sessions").join(S).join("locks");
    fs::create_dir_all(&locks).unwrap();
    fs::write(locks.join("x\u{1b}[31m.json"), "not json").unwrap();
    let commands: &[&[&str]] = &[
        &["status"],
        &["validate"],
        &["lock", "list"],
        &["gc", "--dry-run"],
        &["inbox", "list", "bob"],
    ];
    for args in commands {
        let out = ctl_run(root, args);
        for (name, text) in [("stdout", stdout(&out)), ("stderr", stderr(&out))] {
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}'),
                "{args:?} {name}: {text:?}"
            );
            assert!(!text.contains("\nfake line"), "{args:?} {name}: {text:?}");
        }
    }
    // Not a session name, so not a session (status skips it), but
    // validate names it, escaped.
    let validate = stdout(&ctl_run(root, &["validate"]));
    assert!(validate.contains("\\u{1b}[2J"), "{validate}");
}

#[test]
fn events_help_lists_every_kind() {
    let out = run(squadctl().args(["events", "--help"]));
    let help = stdout(&out);
    for kind in [
        "started",
        "lock-acquired",
        "lock-reclaimed",
        "message-delivered",
        "notify-failed",
        "session-ended",
        "session-archived",
        "retention-failed",
        "policy-reloaded",
        "policy-refused",
    ] {
        assert!(help.contains(kind), "{kind} missing from: {help}");
    }
}

#[test]
fn texts_read_right() {
    let tmp = project();
    let root = tmp.path();
    let s = root.join(".squad/sessions").join(S);
    fs::write(
        s.join("error-alice-20240115T103800Z.md"),
        "error_id: err_20240115T103800Z_ab\nagent: alice\ntask_id: task_alice\nseverity: error\noccurred_at: 2024-01-15T10:38:00Z\nerror:\n  type: BuildBroken\n  message: linker failed\nrequires_intervention: true\nsuggested_agent: bob\n",
    )
    .unwrap();
    let _d = Daemon::start(root);
    let inbox = s.join("inbox/bob/new");
    let text = eventually("the routed report", || {
        let e = fs::read_dir(&inbox).ok()?.next()?.ok()?;
        fs::read_to_string(e.path()).ok()
    });
    assert!(!text.contains("a error error"), "{text}");
    assert!(text.contains("reports an error (severity error)"), "{text}");
    // One session: "1 session", not "1 sessions".
    let events = stdout(&ctl_run(root, &["events"]));
    let started = events.lines().find(|l| l.contains(" started")).unwrap();
    assert!(started.contains("1 session,"), "{started}");
    // A policy error names its field once.
    write_policy(root, "locks:\n  max_ttl: [1]\n");
    let out = ctl_run(root, &["lock", "list"]);
    assert_eq!(
        stderr(&out).matches("locks.max_ttl").count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// Every file of the repository that people read, recursively (sources,
/// manifests, docs), `target/` left out.
fn readable_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "target" || name.starts_with('.') && name != ".ci" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            readable_files(&p, out);
        } else if ["rs", "md", "toml", "yaml", "sh", "service"]
            .iter()
            .any(|x| p.extension().is_some_and(|e| e == *x))
            || name == "run"
        {
            out.push(p);
        }
    }
}

#[test]
fn the_docs_stand_alone_and_say_how_to_install() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    readable_files(&repo, &mut files);
    assert!(files.len() > 20);
    // No reference to a design brief that is not in the repository.
    let brief = ["DESIGN", ".md"].concat();
    for f in &files {
        let text = fs::read_to_string(f).unwrap_or_default();
        assert!(!text.contains(&brief), "{} refers to {brief}", f.display());
    }
    let readme = fs::read_to_string(repo.join("README.md")).unwrap();
    assert!(readme.contains("cargo install --path supervisor"));
    assert!(readme.contains("## What to commit"));
    // `.ci/run` (with the `.ci/test` it runs and the `.ci/tools.sh` that
    // sources) has as many steps as the README says.
    let steps: usize = [".ci/run", ".ci/test", ".ci/tools.sh"]
        .iter()
        .map(|f| {
            let ci = fs::read_to_string(repo.join(f)).unwrap();
            ci.lines().filter(|l| l.starts_with("echo \"== ")).count()
        })
        .sum();
    assert_eq!(steps, 10, "update the README's description of .ci/run");
    assert!(readme.contains("ten steps"));
}
