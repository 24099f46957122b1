//! CI's `check` on the links an agent can commit (issue 39 item 7): hard
//! links, which git commits as copies, and absolute symlinks out of the
//! project or into another agent's area (docs/ci.md, rule 7).

use crate::support::*;
use crate::worktree::{git_or_skip, repo_with_worktree};

/// `check --base main --head feature`'s exit code and output, run in `dir`.
fn check_in(dir: &std::path::Path) -> (i32, String) {
    let out = run(ctl(dir).args(["check", "--base", "main", "--head", "feature"]));
    (code(&out), format!("{}{}", stdout(&out), stderr(&out)))
}

/// An agent (agent-1, `own-1/**`) hard-links another agent's file (own-0,
/// not yet committed) and a file outside the project into its own area and
/// commits them: git records two plain files, so only the checkout can
/// show the links, and `check` run there flags each. Before issue 39 the
/// check passed (exit 0).
#[test]
fn check_flags_a_committed_file_the_checkout_holds_as_a_hard_link() {
    if !git_or_skip() {
        return;
    }
    let (tmp, _main, wt) = repo_with_worktree("wt");
    write(&wt, "own-0/x.rs", "agent-0's work\n");
    std::fs::create_dir_all(wt.join("own-1")).unwrap();
    std::fs::hard_link(wt.join("own-0/x.rs"), wt.join("own-1/x.rs")).unwrap();
    let outside = tmp.path().join("outside.txt");
    std::fs::write(&outside, "not the project's\n").unwrap();
    std::fs::hard_link(&outside, wt.join("own-1/out.txt")).unwrap();
    write(&wt, "own-1/plain.rs", "mine\n");
    git_ok(&wt, &["add", "own-1"]);
    git_ok(&wt, &["commit", "-q", "-m", "links\n\nSquad-Task: task_1"]);
    // git shows a plain file.
    let listed = git_ok(&wt, &["ls-tree", "-r", "feature", "own-1"]);
    assert!(listed.lines().all(|l| l.starts_with("100644 ")), "{listed}");

    let (code, text) = check_in(&wt);
    assert_eq!(code, 1, "{text}");
    for path in ["own-1/x.rs", "own-1/out.txt"] {
        assert!(
            text.lines()
                .any(|l| l.contains(path) && l.contains("hard link") && l.contains("2 names")),
            "{path}: {text}"
        );
    }
    assert!(
        !text.lines().any(|l| l.contains("own-1/plain.rs")),
        "{text}"
    );
    // Made a copy, it passes.
    for f in ["own-1/x.rs", "own-1/out.txt"] {
        let bytes = std::fs::read(wt.join(f)).unwrap();
        std::fs::remove_file(wt.join(f)).unwrap();
        std::fs::write(wt.join(f), bytes).unwrap();
    }
    let (code, text) = check_in(&wt);
    assert!(!text.contains("hard link"), "{text}");
    assert_eq!(code, 0, "{text}");
}

/// Absolute symlinks committed inside the agent's own area: one to `/etc`,
/// one to another agent's area by the main checkout's absolute path, one
/// by the worktree's own: each is a violation, judged from the checkout
/// that holds them and from the main checkout that does not.
#[test]
fn check_flags_committed_absolute_links_out_and_into_another_area() {
    if !git_or_skip() {
        return;
    }
    let (_tmp, main, wt) = repo_with_worktree("wt");
    std::fs::create_dir_all(wt.join("own-1")).unwrap();
    std::fs::create_dir_all(wt.join("own-0")).unwrap();
    std::fs::create_dir_all(main.join("own-0")).unwrap();
    let main_area = main.canonicalize().unwrap().join("own-0");
    let wt_area = wt.canonicalize().unwrap().join("own-0");
    std::os::unix::fs::symlink("/etc", wt.join("own-1/link")).unwrap();
    std::os::unix::fs::symlink(&main_area, wt.join("own-1/area")).unwrap();
    std::os::unix::fs::symlink(&wt_area, wt.join("own-1/here")).unwrap();
    git_ok(&wt, &["add", "own-1"]);
    git_ok(&wt, &["commit", "-q", "-m", "links\n\nSquad-Task: task_1"]);
    for dir in [&wt, &main] {
        let (code, text) = check_in(dir);
        assert_eq!(code, 1, "from {}: {text}", dir.display());
        for (link, to) in [
            ("own-1/link", "/etc"),
            ("own-1/area", "own-0"),
            ("own-1/here", "own-0"),
        ] {
            assert!(
                text.lines().any(|l| l.contains(link)
                    && l.contains(to)
                    && l.contains("boundary-violation")),
                "from {}: {link} -> {to}: {text}",
                dir.display()
            );
        }
    }
}
