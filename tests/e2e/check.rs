//! `squadctl check` on real temporary git repositories.

use crate::support::*;
use std::fs;
use std::path::Path;

fn commit(root: &Path, message: &str) {
    git_ok(root, &["add", "-A"]);
    git_ok(root, &["commit", "-q", "--allow-empty", "-m", message]);
}

const S: &str = ".squad/sessions/20240115T100000Z-user-search";

/// The seed project in a git repository; returns the base commit's checkout.
fn repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture("seed"), tmp.path());
    git_ok(tmp.path(), &["init", "-q", "-b", "main"]);
    commit(tmp.path(), "base");
    tmp
}

fn check(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = run(ctl(root).args(["check", "--color", "never"]).args(args));
    (code(&out), stdout(&out), stderr(&out))
}

#[test]
fn clean_changes_pass() {
    let tmp = repo();
    let root = tmp.path();
    write(root, "backend/src/routes/users.ts", "export {}\n");
    commit(root, "Add users route\n\nSquad-Task: task_001");
    // Attributed through artifacts_created (the seed's progress update lists it).
    write(root, "docs/requirements/user-search.md", "# Requirements\n");
    commit(root, "requirements");
    let (code, out, err) = check(root, &["--base", "main~2"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "0 errors, 0 warnings in 2 files (1 session)\n");
}

#[test]
fn violations_renames_deletions_and_every_format() {
    let tmp = repo();
    let root = tmp.path();
    write(root, "frontend/src/components/UserSearch.tsx", "x\n");
    write(root, "backend/old.ts", "x\n");
    commit(root, "setup\n\nSquad-Task: task_010");
    git_ok(root, &["tag", "base"]);
    // A rename out of the task's boundaries, a deletion, a forbidden path,
    // another agent's progress update, the supervisor's status file.
    git_ok(root, &["mv", "backend/old.ts", "frontend/moved.ts"]);
    write(root, ".env", "SECRET=1\n");
    fs::remove_file(root.join("frontend/src/components/UserSearch.tsx")).unwrap();
    write(
        root,
        &format!("{S}/role-comm-product-manager-task_000.md"),
        &fs::read_to_string(root.join(S).join("role-comm-product-manager-task_000.md"))
            .unwrap()
            .replace("lines: 40", "lines: 41"),
    );
    commit(root, "mixed\n\nSquad-Task: task_001");
    write(
        root,
        &format!("{S}/session-status.md"),
        "session_id: sess_x\nstarted_at: 2024-01-15T10:00:00Z\nstatus: completed\n",
    );
    write(root, "notes.txt", "unclaimed\n");
    commit(root, "no trailer");

    let (code, out, _) = check(root, &["--base", "base"]);
    assert_eq!(code, 1, "{out}");
    let expect = [
        "frontend/moved.ts: error[boundary-violation]: `frontend/moved.ts` changed by backend-system-architect for task_001",
        "backend/old.ts: error[boundary-violation]",
        "frontend/src/components/UserSearch.tsx: error[boundary-violation]",
        ".env: error[boundary-violation]: `.env` changed by backend-system-architect (task_001)",
        &format!(
            "{S}/role-comm-product-manager-task_000.md: error[ownership-violation]: `{S}/role-comm-product-manager-task_000.md` belongs to product-manager but was changed by backend-system-architect (task_001)"
        ),
        &format!("{S}/session-status.md: warning[unattributed-change]"),
        "notes.txt: warning[unattributed-change]",
    ];
    for e in expect {
        assert!(out.contains(e), "missing `{e}` in\n{out}");
    }
    // The edited session-status.md is also validated (it lost fields? no:
    // it is valid), and the whole tree is.
    assert!(
        out.ends_with("5 errors, 2 warnings in 7 files (1 session)\n"),
        "{out}"
    );

    let (_, json, _) = check(root, &["--base", "base", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["errors"], 5);
    let (_, github, _) = check(root, &["--base", "base", "--format", "github"]);
    assert!(
        github.contains("::error file=.env,title=boundary-violation::"),
        "{github}"
    );
    let (_, sarif, _) = check(root, &["--base", "base", "--format", "sarif"]);
    let v: serde_json::Value = serde_json::from_str(&sarif).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let rules: Vec<&str> = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"boundary-violation") && rules.contains(&"ownership-violation"));
    let help = v["runs"][0]["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "boundary-violation")
        .unwrap()["helpUri"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(help.ends_with("docs/ci.md#boundary-violation"), "{help}");

    // Stricter policy: unattributed changes fail.
    write(
        root,
        ".squad/policies.yaml",
        "check:\n  unattributed: error\n",
    );
    let (code, out, _) = check(root, &["--base", "base"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("notes.txt: error[unattributed-change]"),
        "{out}"
    );
}

#[test]
fn unknown_trailer_tasks_and_invalid_protocol_files_fail() {
    let tmp = repo();
    let root = tmp.path();
    write(root, "backend/src/x.ts", "x\n");
    write(root, &format!("{S}/role-plan-x-task_9.md"), "meta: [\n");
    commit(root, "typo\n\nSquad-Task: task_0001");
    let (code, out, _) = check(root, &["--base", "main~1"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("error[unknown-trailer-task]: `Squad-Task: task_0001`"),
        "{out}"
    );
    assert!(
        out.contains("role-plan-x-task_9.md:1:7: error[yaml-syntax]")
            || out.contains("error[yaml-syntax]"),
        "{out}"
    );
}

#[test]
fn changed_list_mode() {
    let tmp = repo();
    let root = tmp.path();
    fs::write(
        root.join("changed.txt"),
        "backend/src/routes/users.ts\nfrontend/x.ts\n",
    )
    .unwrap();
    let (code, out, _) = check(root, &["--changed", "changed.txt", "--task", "task_001"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("frontend/x.ts: error[boundary-violation]"),
        "{out}"
    );
    assert!(!out.contains("users.ts"), "{out}");
    let (code, _, err) = check(root, &["--changed", "changed.txt"]);
    assert_eq!(code, 2, "--task is required: {err}");
}

#[test]
fn a_checkout_without_squad_says_so_plainly() {
    let tmp = tempfile::tempdir().unwrap();
    git_ok(tmp.path(), &["init", "-q"]);
    commit(tmp.path(), "empty");
    let (code, _, err) = check(tmp.path(), &["--base", "HEAD"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("has no .squad/") && err.contains("docs/ci.md"),
        "{err}"
    );
}

#[test]
fn a_symlink_out_of_the_project_is_a_violation() {
    let tmp = repo();
    let root = tmp.path();
    fs::create_dir_all(root.join("backend/src")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("backend/src/passwd")).unwrap();
    commit(root, "link\n\nSquad-Task: task_001");
    let (code, out, _) = check(root, &["--base", "main~1"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("resolves through a symlink to /etc/passwd"),
        "{out}"
    );
}
