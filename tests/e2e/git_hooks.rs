//! `squadctl hooks install` beside a team's own git hooks that dispatch on
//! their name (issue 39 item 7): detected and chained, never renamed.

use crate::support::*;
use crate::worktree::git_or_skip;
use std::path::Path;

/// A home-made dispatcher: runs `<its name>.d/*`, so it works only under
/// its own name.
const DISPATCHER: &str = "#!/bin/sh\nname=$(basename \"$0\")\nfor h in \"$(dirname \"$0\")/$name.d\"/*; do\n  [ -x \"$h\" ] || continue\n  \"$h\" \"$@\" || exit $?\ndone\n";

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A team keeps its hooks in a tracked `.githooks` (core.hooksPath) with a
/// `basename "$0"` dispatcher for pre-commit and post-commit. `hooks
/// install` renames nothing (the tree stays clean), and at the next commit
/// the team's pre-commit and post-commit run as before, and ours too;
/// `hooks uninstall` gives core.hooksPath back. Before issue 39 install
/// renamed `.githooks/pre-commit` to `pre-commit.pre-squad` (a change to
/// the team's tracked files) and the dispatcher, now looking for
/// `pre-commit.pre-squad.d`, ran none of the team's hooks.
#[test]
fn a_tracked_dispatcher_hook_is_chained_and_never_renamed() {
    if !git_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    ctl_ok(&root, &["init"]);
    git_ok(&root, &["init", "-q", "-b", "main"]);
    let log = tmp.path().join("ran.log");
    for hook in ["pre-commit", "post-commit"] {
        executable(&root.join(".githooks").join(hook), DISPATCHER);
        executable(
            &root.join(format!(".githooks/{hook}.d/10-team")),
            &format!("#!/bin/sh\necho team-{hook} >> '{}'\n", log.display()),
        );
    }
    git_ok(&root, &["config", "core.hooksPath", ".githooks"]);
    git_ok(&root, &["add", "-A"]);
    git_ok(&root, &["commit", "-q", "-m", "team hooks"]);
    std::fs::remove_file(&log).unwrap();
    // Our hooks' squadctl, logging that it ran.
    let program = tmp.path().join("squadctl-logged");
    executable(
        &program,
        &format!(
            "#!/bin/sh\necho squad-$1 >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            env!("CARGO_BIN_EXE_squadctl")
        ),
    );
    let before = std::fs::read(root.join(".githooks/pre-commit")).unwrap();

    let out = run(ctl(&root).args(["hooks", "install", "--program", program.to_str().unwrap()]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("not moved"), "{}", stdout(&out));
    let status = git_ok(&root, &["status", "--porcelain"]);
    assert_eq!(status, "", "install changed the team's tracked files");
    assert_eq!(
        std::fs::read(root.join(".githooks/pre-commit")).unwrap(),
        before
    );
    assert!(!root.join(".githooks/pre-commit.pre-squad").exists());

    write(&root, "src/a.rs", "x\n");
    git_ok(&root, &["add", "src/a.rs"]);
    git_ok(&root, &["commit", "-q", "-m", "work"]);
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    for line in ["team-pre-commit", "squad-check", "team-post-commit"] {
        assert!(ran.lines().any(|l| l == line), "{line} did not run: {ran}");
    }
    // The team's hook runs first.
    let first = ran.lines().position(|l| l == "team-pre-commit");
    let ours = ran.lines().position(|l| l == "squad-check");
    assert!(first < ours, "{ran}");
    // Again: still chained, still nothing renamed.
    let out = run(ctl(&root).args(["hooks", "install", "--program", program.to_str().unwrap()]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(git_ok(&root, &["status", "--porcelain"]), "");

    let out = run(ctl(&root).args(["hooks", "uninstall"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        git_ok(&root, &["config", "core.hooksPath"]).trim(),
        ".githooks"
    );
    std::fs::remove_file(&log).unwrap();
    write(&root, "src/b.rs", "x\n");
    git_ok(&root, &["add", "src/b.rs"]);
    git_ok(&root, &["commit", "-q", "-m", "more"]);
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(ran.contains("team-pre-commit"), "{ran}");
    assert!(!ran.contains("squad-"), "{ran}");
}
