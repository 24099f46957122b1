//! Git worktrees on one machine (issue 30 part 1, docs/worktrees.md): a
//! command run inside a linked worktree acts on the team's squad root in the
//! main checkout, and says so.

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SESSION: &str = "20240115T100000Z-trees";

/// A git repository holding a squad project with two agents (`agent-0`,
/// `agent-1`, tasks `task_<i>` allowed `shared/**` and `own-<i>/**`), its
/// `.squad/` committed (as teams do with their team files, so a worktree
/// carries a stale copy of it), and a linked worktree on branch `feature` at
/// `worktree` (relative to the temporary directory; may lie inside `main`).
/// Returns (tempdir, main checkout, worktree).
pub(crate) fn repo_with_worktree(worktree: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let main = tmp.path().join("main");
    let s = main.join(".squad/sessions").join(SESSION);
    std::fs::create_dir_all(&s).unwrap();
    std::fs::create_dir_all(main.join(".squad/run")).unwrap();
    for i in 0..2 {
        write_plan(
            &s,
            &format!("task_{i}"),
            &format!("agent-{i}"),
            &format!("boundaries:\n  allowed:\n    - shared/**\n    - own-{i}/**\n"),
        );
    }
    write(&main, "shared/file.txt", "x\n");
    git_ok(&main, &["init", "-q", "-b", "main"]);
    git_ok(&main, &["add", "-A"]);
    git_ok(&main, &["commit", "-q", "-m", "team"]);
    let wt = tmp.path().join(worktree);
    git_ok(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            wt.to_str().unwrap(),
        ],
    );
    (tmp, main, wt)
}

/// Whether git is here; without it (never in CI) the test skips, loudly.
pub(crate) fn git_or_skip() -> bool {
    if has_git() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI must have git");
    crate::support::skip("git is not installed");
    false
}

fn lock_cmd(dir: &Path, i: usize, path: &str) -> std::process::Output {
    run(ctl(dir).args([
        "lock",
        "acquire",
        path,
        "--agent",
        &format!("agent-{i}"),
        "--task",
        &format!("task_{i}"),
    ]))
}

#[test]
fn a_lock_taken_in_the_main_checkout_is_seen_and_contended_in_a_worktree() {
    if !git_or_skip() {
        return;
    }
    let (_tmp, main, wt) = repo_with_worktree("wt");
    let out = lock_cmd(&main, 0, "shared/file.txt");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("team root"),
        "no note in the main checkout: {}",
        stderr(&out)
    );

    // From a subdirectory of the worktree: the same table, so agent-1 loses.
    std::fs::create_dir_all(wt.join("shared")).unwrap();
    let out = lock_cmd(&wt.join("shared"), 1, "shared/**");
    assert_eq!(code(&out), 1, "contended: {}{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("by agent-0 (task task_0)"), "{err}");
    let main_real = main.canonicalize().unwrap();
    assert!(
        err.contains(&format!("using the team root {}", main_real.display())),
        "says which root: {err}"
    );

    // `lock list` in the worktree lists the main checkout's lock.
    let out = run(ctl(&wt).args(["lock", "list", "--json"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("shared/file.txt"), "{}", stdout(&out));
    // Nothing was written into the worktree's own copy of `.squad/`.
    assert!(!wt.join(".squad/locks").exists());

    // A lock taken in the worktree holds in the main checkout.
    let out = lock_cmd(&wt, 1, "shared/other.txt");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = lock_cmd(&main, 0, "shared/**");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("by agent-1 (task task_1)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn status_in_a_worktree_shows_the_teams_sessions_and_root() {
    if !git_or_skip() {
        return;
    }
    let (_tmp, main, wt) = repo_with_worktree("wt");
    // A session only the main checkout has (not committed).
    let live = new_session(&main, "live");
    let live = live.file_name().unwrap().to_string_lossy().into_owned();
    let out = run(ctl(&wt).args(["status", "--json"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let root = &v["roots"][0];
    let main_real = main.canonicalize().unwrap();
    assert_eq!(root["root"], json!(main_real.display().to_string()), "{v}");
    let text = v.to_string();
    assert!(text.contains(&live), "{text}");
    assert!(
        stderr(&out).contains("using the team root"),
        "{}",
        stderr(&out)
    );
    // Text status names the root in its header.
    let out = run(ctl(&wt).arg("status"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("root: {}", main_real.display())),
        "{}",
        stdout(&out)
    );
    // --root naming the worktree resolves the same way.
    let out = run(ctl_root(&wt).args(["status", "--json"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains(&live));
}

#[test]
fn squadd_started_in_a_worktree_serves_the_team_root_and_the_main_checkout_sees_it() {
    if !git_or_skip() {
        return;
    }
    let (_tmp, main, wt) = repo_with_worktree("wt");
    let d = crate::daemon::Daemon::start(&wt);
    // squadctl in the main checkout finds that squadd on the team's socket.
    let v = status_json(&main);
    assert_eq!(v["daemon"]["state"], "running", "{v}");
    let main_real = main.canonicalize().unwrap();
    assert_eq!(
        v["roots"][0]["root"],
        json!(main_real.display().to_string()),
        "{v}"
    );
    assert!(main.join(".squad/run/squadd.sock").exists());
    assert!(
        !wt.join(".squad/run").exists(),
        "nothing in the worktree's copy"
    );
    d.terminate();
}

#[test]
fn check_in_a_worktree_judges_the_worktrees_commits_and_index_by_the_teams_plans() {
    if !git_or_skip() {
        return;
    }
    let (_tmp, main, wt) = repo_with_worktree("wt");
    // A commit of task_1 outside its boundaries, on the worktree's branch.
    write(&wt, "own-0/x.rs", "x\n");
    git_ok(&wt, &["add", "-A"]);
    git_ok(&wt, &["commit", "-q", "-m", "x\n\nSquad-Task: task_1"]);
    let out = run(ctl(&wt).args(["check", "--base", "main"]));
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("own-0/x.rs"), "{}", stdout(&out));
    // The same from the main checkout, naming the worktree's branch.
    let out = run(ctl(&main).args(["check", "--base", "main", "--head", "feature"]));
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    // Staged in the worktree (a pre-commit hook there, SQUAD_ROOT naming
    // the main checkout as runners set it): the worktree's index.
    write(&wt, "own-0/y.rs", "y\n");
    git_ok(&wt, &["add", "own-0/y.rs"]);
    let out = run(ctl(&wt)
        .env("SQUAD_ROOT", &main)
        .args(["check", "--staged", "--task", "task_1"]));
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("own-0/y.rs"), "{}", stdout(&out));
}

/// The guard's answer to a Claude Code Write of `path` from `cwd`, as agent
/// `agent-1` on `task_1`: `None` to allow, else the reason.
fn guard_write(cwd: &Path, path: &str, env_root: Option<&Path>) -> Option<String> {
    let input = json!({"session_id": "s", "transcript_path": "/t.jsonl", "cwd": cwd.display().to_string(),
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": cwd.join(path).display().to_string(), "content": "x"}, "tool_use_id": "toolu_1"});
    let mut cmd = ctl(cwd);
    cmd.arg("guard")
        .env("SQUAD_AGENT", "agent-1")
        .env("SQUAD_TASK", "task_1");
    if let Some(r) = env_root {
        cmd.env("SQUAD_ROOT", r);
    }
    let out = run_with_input(&mut cmd, input.to_string().as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    if text.trim().is_empty() {
        return None;
    }
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
    Some(v["hookSpecificOutput"]["permissionDecisionReason"].to_string())
}

#[test]
fn the_guard_in_a_worktree_judges_its_tree_by_the_teams_plans_and_locks() {
    if !git_or_skip() {
        return;
    }
    // The worktree lies inside the main checkout: its paths are judged
    // relative to the worktree (`own-1/x`), not to the main checkout
    // (`trees/wt/own-1/x`, which no boundary allows).
    let (_tmp, main, wt) = repo_with_worktree("main/trees/wt");
    for env_root in [None, Some(main.as_path())] {
        assert_eq!(
            guard_write(&wt, "own-1/x.rs", env_root),
            None,
            "{env_root:?}"
        );
        let denied = guard_write(&wt, "own-0/x.rs", env_root);
        assert!(
            denied.is_some(),
            "outside task_1's boundaries: {env_root:?}"
        );
    }
    // A lock taken in the main checkout binds the agent in its worktree.
    let out = lock_cmd(&main, 0, "shared/file.txt");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let denied = guard_write(&wt, "shared/file.txt", None).expect("locked by agent-0");
    assert!(denied.contains("agent-0"), "{denied}");
}

// ---------------------------------------------------------------------------
// `runners.worktree: true`: each run in its own worktree, merged or held.
// ---------------------------------------------------------------------------

/// The fake agent of a worktree run: records where it works, writes
/// `src/<task>.txt` (inside its boundaries), with `$MODE=outside` also
/// `secret.txt` (outside them), with `$MODE=conflict` also
/// `src/shared.txt` (its task id: two runs conflict), with `$MODE=hook`
/// plants every git hook squadd's commands could run into the shared
/// repository (each appends its name and `$SQUAD_TEST_SECRET` to
/// `hooks.log` beside the trace); task_2 with `$MODE=trailer` commits
/// `wide/x.txt` claiming task_9 by trailer, with `symlink` commits links
/// out of the project and into `wide/` under `src/`, with `head` points
/// its worktree's HEAD at `main` and commits there; with `$MODE=forge` commits that and rewrites
/// the base in its worktree.json to hide it, after waiting for `$GATE` when set; task_1 commits its work itself, the others
/// leave it for squadd to commit; then it reports completed.
pub(crate) const TREE_AGENT: &str = r#"#!/bin/sh
echo "$SQUAD_TASK $(pwd)" >> "$TRACE"
if [ -n "$GATE" ]; then while [ ! -e "$GATE" ]; do sleep 0.05; done; fi
mkdir -p src && echo "work of $SQUAD_TASK" > "src/$SQUAD_TASK.txt" || exit 3
if [ "$MODE" = outside ]; then echo "not mine" > secret.txt; fi
if [ "$MODE" = conflict ]; then echo "$SQUAD_TASK" > src/shared.txt; fi
if [ "$SQUAD_TASK" = task_2 ]; then
  commit() { git add -A && git -c user.name=a -c user.email=a@example.com commit -q -m "$1" || exit 9; }
  case "$MODE" in
    trailer)
      mkdir -p wide && echo "not mine" > wide/x.txt
      commit "$(printf 'wide work\n\nSquad-Task: task_9\nSquad-Agent: charlie')"
      mkdir -p wider && echo "not mine" > wider/y.txt
      commit "$(printf 'wider work\n\nSquad-Task: task_9')" ;;
    symlink)
      ln -s /etc src/out && ln -s ../wide src/area && ln -s "$(git rev-parse --show-toplevel)/wide/z" src/abs
      commit "links" ;;
    head)
      echo sneaky > secret.txt
      git symbolic-ref HEAD refs/heads/main && commit "straight onto main" ;;
  esac
fi
if [ "$MODE" = hook ]; then
  hooks="$(git rev-parse --git-common-dir)/hooks"
  for h in pre-commit post-commit pre-merge-commit post-merge post-checkout post-rewrite reference-transaction; do
    printf '#!/bin/sh\necho "%s secret=[$SQUAD_TEST_SECRET]" >> "%s"\n' "$h" "$(dirname "$TRACE")/hooks.log" > "$hooks/$h" && chmod +x "$hooks/$h" || exit 8
  done
fi
if [ "$MODE" = forge ]; then
  echo "not mine" > secret.txt
  git add -A && git -c user.name=a -c user.email=a@example.com commit -q -m "mine, honest" || exit 6
  head=$(git rev-parse HEAD)
  rec="$(dirname "$SQUAD_PROMPT_FILE")/worktree.json"
  sed "s/\"base\": \"[0-9a-f]*\"/\"base\": \"$head\"/" "$rec" > "$rec.new" && mv "$rec.new" "$rec" || exit 7
fi
if [ "$SQUAD_TASK" = task_1 ]; then
  git add -A && git -c user.name=a -c user.email=a@example.com commit -q -m "task_1 work" || exit 4
fi
"$SQUADCTL" progress --status completed --percent 100 -q || exit 5
"#;

pub(crate) struct TreeProject {
    pub _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub session: PathBuf,
    pub trace: PathBuf,
}

/// A git repository with a squad project whose runner (every agent) is
/// [`TREE_AGENT`] in worktree mode; `.squad/` and the test's files are
/// ignored by git, so the main checkout is clean.
pub(crate) fn tree_project(mode: &str, gate: bool) -> TreeProject {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let session = init_session(&root, "trees");
    let agent = root.join("agent.sh");
    std::fs::write(&agent, TREE_AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let trace = root.join("trace.log");
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  worktree: true\n  agents:\n    \"*\":\n      command: [\"{}\"]\n      max_retries: 0\n      env:\n        TRACE: \"{}\"\n        SQUADCTL: \"{}\"\n        MODE: \"{mode}\"\n        GATE: \"{}\"\n",
            agent.display(),
            trace.display(),
            env!("CARGO_BIN_EXE_squadctl"),
            if gate {
                root.join("go").display().to_string()
            } else {
                String::new()
            }
        ),
    );
    std::fs::write(
        root.join(".gitignore"),
        "/.squad/\n/.claude/\n/agent.sh\n/trace.log\n/go\n/hooks.log\n/bin/\n/git.log\n",
    )
    .unwrap();
    write(&root, "README.md", "project\n");
    git_ok(&root, &["init", "-q", "-b", "main"]);
    git_ok(&root, &["add", "-A"]);
    git_ok(&root, &["commit", "-q", "-m", "start"]);
    TreeProject {
        _tmp: tmp,
        root,
        session,
        trace,
    }
}

pub(crate) fn tree_task(root: &Path, id: &str, agent: &str) {
    let instruction = format!("do {id}");
    ok(task_new(
        root,
        &[
            "--id",
            id,
            "--agent",
            agent,
            "--instruction",
            &instruction,
            "--allow",
            "src/**",
        ],
    ));
}

/// `squadctl runs --all --json`'s entry for `task` once its merge state is
/// no longer active.
pub(crate) fn settled_run(root: &Path, task: &str) -> Value {
    crate::daemon::eventually(&format!("{task}'s branch is merged or held"), || {
        let out = run(ctl(root).args(["runs", "--all", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v.as_array()?
            .iter()
            .find(|r| {
                r["task"] == task && r["merge"]["state"] != "active" && r["merge"].is_object()
            })
            .cloned()
    })
}

#[test]
fn two_runs_in_their_own_worktrees_complete_and_merge() {
    if !git_or_skip() {
        return;
    }
    let p = tree_project("", true);
    let base = git_ok(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    let _d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_1", "alpha");
    tree_task(&p.root, "task_2", "bravo");
    // Both run at once, from the same base: the second merge is a merge
    // commit, not a fast-forward.
    crate::daemon::eventually("both runs started", || {
        let t = std::fs::read_to_string(&p.trace).unwrap_or_default();
        (t.lines().count() == 2).then_some(())
    });
    std::fs::write(p.root.join("go"), "").unwrap();
    let one = settled_run(&p.root, "task_1");
    let two = settled_run(&p.root, "task_2");
    for (r, task) in [(&one, "task_1"), (&two, "task_2")] {
        assert_eq!(r["merge"]["state"], "merged", "{r:#}");
        assert_eq!(r["branch"], format!("squad/{task}"), "{r:#}");
        assert_eq!(r["merge"]["base"], base, "{r:#}");
        assert_eq!(r["merge"]["into"], "main", "{r:#}");
        let tree = r["worktree"].as_str().unwrap();
        // Each ran in its own worktree, which is gone once merged.
        let trace = std::fs::read_to_string(&p.trace).unwrap();
        assert!(trace.contains(&format!("{task} {tree}")), "{trace}\n{r:#}");
        assert!(!Path::new(tree).exists(), "{tree} removed after the merge");
        // The main checkout's branch and working tree hold the work.
        assert_eq!(
            git_ok(&p.root, &["show", &format!("main:src/{task}.txt")]),
            format!("work of {task}\n")
        );
        assert!(p.root.join(format!("src/{task}.txt")).is_file());
    }
    // squadd's commits carry the Squad-Task trailer.
    let log = git_ok(&p.root, &["log", "--format=%B", "main"]);
    assert!(log.contains("Squad-Task: task_2"), "{log}");
    let merges = git_ok(&p.root, &["rev-list", "--merges", "--count", "main"]);
    assert_eq!(
        merges.trim(),
        "1",
        "one merge commit, one fast-forward: {log}"
    );
    let status = git_ok(&p.root, &["status", "--porcelain"]);
    assert!(
        status.trim().is_empty(),
        "the main checkout is clean: {status}"
    );
    // `runs` names each run's worktree and branch.
    let text = ctl_ok(&p.root, &["runs", "--all"]);
    assert!(
        text.contains("branch squad/task_1 (merged into main)"),
        "{text}"
    );
}

#[test]
fn of_two_runs_that_changed_one_file_the_second_is_held_as_a_conflict() {
    if !git_or_skip() {
        return;
    }
    let p = tree_project("conflict", true);
    let _d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_1", "alpha");
    tree_task(&p.root, "task_2", "bravo");
    crate::daemon::eventually("both runs started", || {
        let t = std::fs::read_to_string(&p.trace).unwrap_or_default();
        (t.lines().count() == 2).then_some(())
    });
    std::fs::write(p.root.join("go"), "").unwrap();
    let runs = [
        settled_run(&p.root, "task_1"),
        settled_run(&p.root, "task_2"),
    ];
    let merged: Vec<&Value> = runs
        .iter()
        .filter(|r| r["merge"]["state"] == "merged")
        .collect();
    let held: Vec<&Value> = runs
        .iter()
        .filter(|r| r["merge"]["state"] == "held")
        .collect();
    assert_eq!((merged.len(), held.len()), (1, 1), "{runs:#?}");
    let reason = held[0]["merge"]["reason"].as_str().unwrap();
    assert!(reason.contains("CONFLICT"), "{reason}");
    // The main checkout holds the merged run's version, with no conflict
    // left behind (the merge was aborted).
    let winner = merged[0]["task"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/shared.txt")).unwrap(),
        format!("{winner}\n")
    );
    let status = git_ok(&p.root, &["status", "--porcelain"]);
    assert!(status.trim().is_empty(), "{status}");
    assert!(!p.root.join(".git/MERGE_HEAD").exists());
}

#[test]
fn a_worktree_run_that_wrote_outside_its_boundaries_is_held_not_merged() {
    held_for_writing_outside("outside");
}

#[test]
fn a_worktree_run_that_forged_its_recorded_base_is_still_held() {
    held_for_writing_outside("forge");
}

/// A run in `mode` (see [`TREE_AGENT`]) writes `secret.txt`, outside its
/// boundaries: its branch is held, not merged, and the lead is told.
fn held_for_writing_outside(mode: &str) {
    if !git_or_skip() {
        return;
    }
    let p = tree_project(mode, false);
    let base = git_ok(&p.root, &["rev-parse", "HEAD"]).trim().to_string();
    let d = crate::daemon::Daemon::start(&p.root);
    tree_task(&p.root, "task_2", "bravo");
    let r = settled_run(&p.root, "task_2");
    assert_eq!(r["merge"]["state"], "held", "{r:#}");
    let reason = r["merge"]["reason"].as_str().unwrap();
    assert!(reason.contains("secret.txt"), "{reason}");
    // Not merged: the session's branch is where it was; the branch and its
    // worktree are kept for a human to look at.
    assert_eq!(git_ok(&p.root, &["rev-parse", "main"]).trim(), base);
    assert!(!p.root.join("secret.txt").exists());
    assert!(
        Path::new(r["worktree"].as_str().unwrap())
            .join("secret.txt")
            .is_file()
    );
    git_ok(&p.root, &["rev-parse", "--verify", "squad/task_2"]);
    // The lead is told why.
    let told = crate::daemon::eventually("the lead is told", || {
        walk(&p.session).into_iter().find(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("squadd-to-lead"))
                && std::fs::read_to_string(f)
                    .is_ok_and(|t| t.contains("held, not merged") && t.contains("secret.txt"))
        })
    });
    assert!(
        std::fs::read_to_string(&told)
            .unwrap()
            .contains("to_agent: lead"),
        "{}",
        told.display()
    );
    d.terminate();

    // Retention: once the session is archived, its held worktree goes,
    // though not while it holds work nobody committed; the branch stays.
    let tree = PathBuf::from(r["worktree"].as_str().unwrap());
    std::fs::write(tree.join("scratch.txt"), "uncommitted\n").unwrap();
    let policy = std::fs::read_to_string(p.root.join(".squad/policies.yaml")).unwrap();
    write_policy(
        &p.root,
        format!("{policy}retention:\n  archive_completed_after: 0s\n"),
    );
    ok(run(ctl(&p.root).arg("gc")));
    assert!(!p.session.exists(), "the session is archived");
    assert!(
        tree.join("scratch.txt").is_file(),
        "uncommitted work is kept"
    );
    std::fs::remove_file(tree.join("scratch.txt")).unwrap();
    ok(run(ctl(&p.root).arg("gc")));
    assert!(!tree.exists(), "the ended session's worktree is removed");
    git_ok(&p.root, &["rev-parse", "--verify", "squad/task_2"]);
}

/// Every file under `dir`.
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
