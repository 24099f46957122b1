//! The small things a new lead trips over on the first day (issue 40 item
//! 6), each as it was reported.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;

fn tmp_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    (tmp, root)
}

/// `task show` keeps a met prerequisite as `task_001 (completed)`; once
/// the only session completed, `task list` and `task show` still show its
/// tasks (saying the session ended) instead of failing.
#[test]
fn met_prerequisites_stay_listed_and_a_completed_sessions_tasks_are_still_shown() {
    let (_tmp, root) = tmp_root();
    let session = init_session(&root, "done");
    ok(task_new(
        &root,
        &words("--agent ada --instruction x --allow a/**"),
    ));
    ok(task_new(
        &root,
        &words("--agent bob --instruction y --requires task_001"),
    ));
    let show = ctl_ok(&root, &["task", "show", "task_002"]);
    assert!(show.contains("  requires: task_001 (ready)\n"), "{show}");
    ctl_ok(
        &root,
        &words("progress --agent ada --task task_001 --status completed"),
    );
    let show = ctl_ok(&root, &["task", "show", "task_002"]);
    assert!(
        show.contains("  requires: task_001 (completed)\n"),
        "{show}"
    );
    let name = session.file_name().unwrap().to_str().unwrap().to_string();
    ctl_ok(&root, &["session", "complete", &name]);
    let list = ctl_run(&root, &["task", "list"]);
    assert_eq!(code(&list), 0, "{}", stderr(&list));
    assert!(stdout(&list).contains("task_001"), "{}", stdout(&list));
    assert!(
        stderr(&list).contains(&format!(
            "no active session; the tasks of session {name} (completed)"
        )),
        "{}",
        stderr(&list)
    );
    let show = ctl_run(&root, &["task", "show", "task_002"]);
    assert_eq!(code(&show), 0, "{}", stderr(&show));
    assert!(stdout(&show).contains("requires: task_001 (completed)"));
}

/// `reply` answers and marks the question read.
#[test]
fn reply_marks_the_question_read() {
    let (_tmp, root) = tmp_root();
    init_session(&root, "ask");
    write_policy(&root, NO_NOTICES);
    ok(task_new(&root, &words("--agent frontend --instruction x")));
    let _d = Daemon::start(&root);
    let id = ctl_ok(
        &root,
        &words("send --from lead --to frontend --type question --subject api? --message flat?"),
    )
    .trim()
    .to_string();
    let unread = |root: &std::path::Path| -> Option<bool> {
        let v: serde_json::Value =
            serde_json::from_str(&ctl_ok(root, &["inbox", "list", "frontend", "--json"])).ok()?;
        v["messages"]
            .as_array()?
            .iter()
            .find(|m| m["message_id"] == id.as_str())
            .and_then(|m| m["unread"].as_bool())
    };
    eventually("the question delivered", || unread(&root).filter(|u| *u));
    ctl_ok(
        &root,
        &["reply", &id, "--from", "frontend", "--message", "flat"],
    );
    assert_eq!(unread(&root), Some(false), "answered is read");
}

/// `-v` names the root even when it is the current directory; `session
/// list` columns line up whatever the slug's length.
#[test]
fn verbose_names_the_root_and_session_list_columns_line_up() {
    let (_tmp, root) = tmp_root();
    init_session(&root, "a");
    new_session(&root, "a-much-longer-slug-than-thirty-two-columns");
    let out = ctl_run(&root, &["-v", "session", "list"]);
    assert!(
        stderr(&out).contains(&format!("squadctl: project root {}\n", root.display())),
        "{}",
        stderr(&out)
    );
    let text = stdout(&out);
    let starts: Vec<Option<usize>> = text.lines().map(|l| l.find("active")).collect();
    assert_eq!(starts.len(), 2, "{text}");
    assert!(starts[0].is_some() && starts[0] == starts[1], "{text}");
    let tasks: Vec<Option<usize>> = text.lines().map(|l| l.find(" tasks")).collect();
    assert_eq!(tasks[0], tasks[1], "{text}");
}

/// `init` lists the files squad-supervisor generates outside `.squad/`
/// (the shared context, the team export) in the project's `.gitignore`,
/// keeping the user's lines and never twice: `git add -A` leaves them out.
#[test]
fn init_ignores_the_generated_files_and_git_add_all_leaves_them_out() {
    if !has_git() {
        skip("git is not installed");
        return;
    }
    let (_tmp, root) = tmp_root();
    git_ok(&root, &["init", "-q"]);
    fs::write(root.join(".gitignore"), "target/").unwrap();
    ctl_ok(&root, &["init"]);
    ctl_ok(&root, &["init"]);
    let ignore = fs::read_to_string(root.join(".gitignore")).unwrap();
    assert!(ignore.starts_with("target/\n"), "{ignore}");
    assert_eq!(
        ignore
            .matches("/.claude/context/shared-context.json")
            .count(),
        1,
        "{ignore}"
    );
    write(&root, ".claude/context/shared-context.json", "{}");
    write(&root, "squad-export.json", "{}");
    write(&root, "squad-export-20261129T120000Z.squad", "{}");
    write(&root, "src/main.rs", "fn main() {}");
    git_ok(&root, &["add", "-A"]);
    let staged = git_ok(&root, &["diff", "--cached", "--name-only"]);
    assert!(staged.contains("src/main.rs"), "{staged}");
    for generated in ["shared-context.json", "squad-export"] {
        assert!(!staged.contains(generated), "{generated} staged:\n{staged}");
    }
}

/// `guard install` and `hooks install` write a bare `squadctl` by
/// default: when this shell's PATH has none, they say the hooks would
/// fail to start it and how to fix it (and say nothing when it is there).
#[test]
fn installing_hooks_warns_when_squadctl_is_not_on_the_path() {
    let (_tmp, root) = tmp_root();
    ctl_ok(&root, &["init"]);
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_squadctl"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    let install = |path: &str, args: &[&str]| run(ctl(&root).env("PATH", path).args(args));
    // The guard's hooks name this squadctl by its absolute path (issue
    // 39): no PATH to warn about, whatever the installing shell's.
    let out = install("/usr/bin:/bin", &["guard", "install", "--claude"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("PATH"), "{}", stderr(&out));
    let settings = std::fs::read_to_string(root.join(".claude/settings.json")).unwrap();
    assert!(
        settings.contains(&format!("{} guard", env!("CARGO_BIN_EXE_squadctl"))),
        "{settings}"
    );
    // A --program that names no executable is warned about, still installed.
    let out = install(
        &format!("{bin}:/usr/bin:/bin"),
        &[
            "guard",
            "install",
            "--claude",
            "--program",
            "/nonexistent/squadctl",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "the hooks run `/nonexistent/squadctl`, which is not an executable file here"
        ) && stderr(&out).contains(&format!("--program {}", env!("CARGO_BIN_EXE_squadctl"))),
        "{}",
        stderr(&out)
    );
    if has_git() {
        git_ok(&root, &["init", "-q"]);
        let out = install("/usr/bin:/bin", &["hooks", "install"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            stderr(&out)
                .contains("the git hooks run `squadctl`, which is not on this shell's PATH"),
            "{}",
            stderr(&out)
        );
    }
}

/// One path style: `session new` and `status` print paths relative to the
/// project root whether the root was given absolute or found from the
/// current directory and whether squadd or the files answered; with
/// `--absolute`, absolute.
#[test]
fn paths_are_relative_to_the_root_with_or_without_squadd_and_absolute_on_request() {
    let (_tmp, root) = tmp_root();
    ctl_ok(&root, &["init"]);
    let by_root = ok(run(ctl_root(&root).args(["session", "new", "--slug", "a"])));
    assert!(by_root.starts_with(".squad/sessions/"), "{by_root}");
    let abs = ok(run(ctl_root(&root).args([
        "--absolute",
        "session",
        "new",
        "--slug",
        "b",
    ])));
    assert!(
        abs.starts_with(&format!("{}/.squad/sessions/", root.display())),
        "{abs}"
    );
    let session = root.join(by_root.trim());
    write_plan(&session, "task_001", "frontend", "boundries: {}\n");
    let invalid = |v: &serde_json::Value| -> Vec<String> {
        v["roots"][0]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["problems"].as_array().unwrap().iter())
            .map(|p| p["path"].as_str().unwrap().to_string())
            .collect()
    };
    let status = |c: &mut std::process::Command| -> serde_json::Value {
        serde_json::from_str(&stdout(&run(c.args(["status", "--json"])))).unwrap()
    };
    let down = status(&mut ctl_root(&root));
    let want = format!("{}/role-plan-frontend-task_001.md", by_root.trim());
    assert_eq!(invalid(&down), std::slice::from_ref(&want), "{down:#}");
    assert_eq!(down["roots"][0]["root"], root.display().to_string());
    let d = Daemon::start(&root);
    let up = status(&mut ctl(&root));
    assert_eq!(up["daemon"]["state"], "running");
    assert_eq!(invalid(&up), std::slice::from_ref(&want), "{up:#}");
    let absolute = status(ctl(&root).arg("--absolute"));
    assert_eq!(
        invalid(&absolute),
        [format!("{}/{want}", root.display())],
        "{absolute:#}"
    );
    d.terminate();
}

/// `mcp install` into a project file (which others check out) says that
/// its entry names this machine's squadctl by absolute path and how each
/// checkout gets its own; `--user` keeps it out of the repository and
/// says nothing.
#[test]
fn mcp_install_into_the_project_says_its_entry_names_this_machines_squadctl() {
    let (_tmp, root) = tmp_root();
    let home = root.join("home");
    fs::create_dir_all(&home).unwrap();
    ctl_ok(&root, &["init"]);
    let install = |args: &[&str]| {
        ok(run(ctl(&root)
            .env("HOME", &home)
            .args(["mcp", "install", "--claude"])
            .args(args)))
    };
    let said = install(&[]);
    assert!(
        said.contains(&format!(
            "note: the project's entry runs {} (this machine's squadctl",
            env!("CARGO_BIN_EXE_squadctl")
        )) && said.contains("--user"),
        "{said}"
    );
    let said = install(&["--user"]);
    assert!(!said.contains("note:"), "{said}");
}
