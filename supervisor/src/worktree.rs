// Over 800 lines: the worktree lifecycle (make, look for overlaps, review,
// merge, hold, drop, sweep) shares load_own and git; the overlap look and the
// review states (issue 44) should move to worktree/overlap.rs and
// worktree/review.rs.
//! Runs in their own git worktrees (`runners.worktree`, docs/worktrees.md):
//! before a run starts, a linked worktree on branch `squad/<task>` made from
//! the main checkout's HEAD; when its task completes, the branch's changes
//! judged by `squadctl check`'s decision and merged into the session's
//! branch, or held with the reason for the lead.
//!
//! What a run's worktree is lives in `<session>/runs/<task>/worktree.json`,
//! beside run.json, written atomically.

use crate::runners::RunRecord;
use serde::{Deserialize, Serialize};
use squad_policies::worktree::{Facts, Outcome, TreeHead, decide, hold_summary, left_its_branch};
use squad_protocol::tree::SQUAD_DIR;
use std::path::{Path, PathBuf};

/// The directory under `.squad/` holding the runs' worktrees
/// (`worktrees/<session>/<task>`).
pub(crate) const WORKTREES_DIR: &str = "worktrees";
/// A run's worktree record, in its run directory.
pub(crate) const RECORD_FILE: &str = "worktree.json";
/// The largest worktree.json read (it sits where agents write).
const MAX_RECORD: u64 = 64 * 1024;

/// Where a run's branch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TreeState {
    /// The run works in it (or has not completed its task).
    Active,
    /// Merged into the session's branch; the worktree is removed.
    Merged,
    /// Not merged: a violation, a conflict, or the main checkout moved to
    /// another branch (`reason`); the worktree and branch are kept.
    Held,
    /// Given up by the lead (`squadctl merge TASK --drop`): not merged,
    /// the branch (and the worktree) kept for reference; the task's
    /// dependents and its session go on without it.
    Dropped,
    /// Its task completed with `runners.merge: review` (docs/review.md):
    /// what the agent left is committed and the branch waits for the
    /// lead's `squadctl review approve|changes|reject`; its dependents
    /// and its session wait.
    Review,
    /// Rejected by the lead in review (`squadctl review reject`): not
    /// merged, the branch and worktree kept for reference, the run
    /// recorded failed; the session goes on without it, as with `--drop`.
    Rejected,
}

/// What became of a completed run's branch, as the shell tells the core
/// (docs/worktrees.md, "Hand-over").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finished {
    /// The run has no worktree of its own waiting (not a worktree run, or
    /// its branch already merged): nothing to hand over.
    NoTree,
    /// Merged into the session's branch.
    Merged,
    /// Held: in a few words (`summary`) and in full (`reason`).
    Held {
        /// A few words, for subjects and lists.
        summary: String,
        /// The whole reason, for the lead's message.
        reason: String,
    },
    /// Given up by the lead: not merged, the branch kept.
    Dropped,
    /// Committed and waiting for the lead's review (docs/review.md): the
    /// files it changes and its lines added and deleted.
    Review(Stat),
    /// Rejected in review: not merged, the branch kept; the lead's
    /// comment.
    Rejected(String),
}

/// What a branch changes from where it forked off the session's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct Stat {
    /// Files changed.
    pub files: usize,
    /// Lines added.
    pub added: u64,
    /// Lines deleted.
    pub deleted: u64,
}

impl std::fmt::Display for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files = if self.files == 1 { "file" } else { "files" };
        write!(
            f,
            "{} {files}, +{} \u{2212}{}",
            self.files, self.added, self.deleted
        )
    }
}

/// A run's worktree (`worktree.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunTree {
    /// The worktree's directory.
    pub path: PathBuf,
    /// The run's branch, `squad/<task>`.
    pub branch: String,
    /// The commit the branch was made from (the main checkout's HEAD at
    /// dispatch): the run's diff is `base..branch`.
    pub base: String,
    /// The session's branch: the main checkout's branch at dispatch, which
    /// the run's branch is merged into.
    pub target: String,
    /// Where the branch stands.
    pub state: TreeState,
    /// Why it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why it is held, in a few words (`held at merge: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The session branch's commit after the merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_as: Option<String>,
}

/// Why a run's worktree could not be made, recorded or merged.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// git could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// git failed: its arguments and what it said (stderr, and a merge's
    /// conflicts from stdout).
    #[error("git {args}: {said}")]
    Git {
        /// The arguments, joined by spaces.
        args: String,
        /// git's complaint.
        said: String,
    },
    /// A file or directory could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The record could not be serialized.
    #[error("{0}")]
    Record(#[from] serde_json::Error),
    /// The root is not a checkout on a branch.
    #[error(
        "runners.worktree is on but the checkout {} is not on a branch (a detached HEAD, or not a git repository): the run's work would have nowhere to be merged",
        root.display()
    )]
    NoBranch {
        /// The project root.
        root: PathBuf,
    },
    /// The branch has no commit.
    #[error("runners.worktree: the branch {target} has no commit to start from ({source})")]
    NoCommit {
        /// The session's branch.
        target: String,
        /// git's answer.
        source: Box<WorktreeError>,
    },
    /// `squad/<task>` is not a branch name.
    #[error("`{0}` is not a valid branch name")]
    BadBranch(String),
    /// The checks of `squadctl check` could not be run on the branch.
    #[error("{0}")]
    Check(String),
    /// The branch is held: the decision's reason, and in a few words.
    #[error("{reason}")]
    Held {
        /// A few words.
        summary: String,
        /// The whole reason.
        reason: String,
    },
}

// The run starter reports failures as `String` (daemon/runs/start.rs).
impl From<WorktreeError> for String {
    fn from(e: WorktreeError) -> Self {
        e.to_string()
    }
}

/// An I/O error on `path`.
fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> WorktreeError + '_ {
    move |source| WorktreeError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// git in `dir`: its trimmed stdout, or an error quoting its stderr.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    git_with(dir, args, &[])
}

/// [`git`] with extra environment (commit identities). squadd runs no
/// code the repository holds (docs/security.md): no hook, no fsmonitor,
/// and the cleared environment runs get (`child_env::git`).
fn git_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<String, WorktreeError> {
    let out = crate::child_env::git()
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(WorktreeError::Spawn)?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let stdout = String::from_utf8_lossy(&out.stdout);
        // A merge names its conflicts on stdout.
        for l in stdout.lines().filter(|l| l.starts_with("CONFLICT")) {
            text.push('\n');
            text.push_str(l);
        }
        return Err(WorktreeError::Git {
            args: args.join(" "),
            said: text,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The run's worktree record, if it has one (for display).
pub(crate) fn load(run_dir: &Path) -> Option<RunTree> {
    let text =
        squad_protocol::fsx::read_regular_to_string(&run_dir.join(RECORD_FILE), MAX_RECORD).ok()?;
    serde_json::from_str(&text).ok()
}

/// The record of the run of `task` in `session`, when it names that run's
/// own worktree and branch: worktree.json sits where agents write, and a
/// forged one must not lead squadd to commit in, merge from or remove
/// anything else.
fn load_own(root: &Path, run_dir: &Path, session: &str, task: &str) -> Option<RunTree> {
    load(run_dir)
        .filter(|t| t.path == tree_path(root, session, task) && t.branch == format!("squad/{task}"))
}

fn save(run_dir: &Path, tree: &RunTree) -> Result<(), WorktreeError> {
    let text = serde_json::to_string_pretty(tree)?;
    let path = run_dir.join(RECORD_FILE);
    crate::safefs::write_atomic(&path, format!("{text}\n").as_bytes()).map_err(write_error(&path))
}

/// The worktree of `task` in `session`: `.squad/worktrees/<session>/<task>`.
pub(crate) fn tree_path(root: &Path, session: &str, task: &str) -> PathBuf {
    root.join(SQUAD_DIR)
        .join(WORKTREES_DIR)
        .join(session)
        .join(task)
}

/// `.squad/worktrees/` of `root`, made if missing; it stays out of the
/// main checkout's `git status` whatever the team's own .gitignore says.
pub(crate) fn ensure_dir(root: &Path) -> Result<PathBuf, WorktreeError> {
    let dir = root.join(SQUAD_DIR).join(WORKTREES_DIR);
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        crate::safefs::write_atomic_under(root, &ignore, b"*\n", 0o644, Some(0o755))
            .map_err(write_error(&ignore))?;
    }
    Ok(dir)
}

/// [`prepare_tree`] with its error as text, for the run starter
/// (daemon/runs/start.rs, being rewritten at the time of writing, takes
/// a `String`; fold this away once it takes [`WorktreeError`]).
pub(crate) fn prepare(
    root: &Path,
    run_dir: &Path,
    session: &str,
    task: &str,
) -> Result<RunTree, String> {
    prepare_tree(root, run_dir, session, task).map_err(String::from)
}

/// Makes (or, for a retry, finds again) the worktree a run of `task`
/// works in, and records it in the run directory. The root must be a git
/// checkout on a branch (the session's branch the work is merged into).
pub(crate) fn prepare_tree(
    root: &Path,
    run_dir: &Path,
    session: &str,
    task: &str,
) -> Result<RunTree, WorktreeError> {
    if let Some(mut tree) = load_own(root, run_dir, session, task)
        && tree.state != TreeState::Merged
        && tree.path.join(".git").is_file()
    {
        // A retry, or a held task started again by hand, continues the work
        // of the run before it.
        tree.state = TreeState::Active;
        tree.reason = None;
        tree.summary = None;
        save(run_dir, &tree)?;
        return Ok(tree);
    }
    let target = git(root, &["symbolic-ref", "--short", "-q", "HEAD"]).map_err(|_| {
        WorktreeError::NoBranch {
            root: root.to_path_buf(),
        }
    })?;
    let base = git(root, &["rev-parse", "--verify", "HEAD^{commit}"]).map_err(|e| {
        WorktreeError::NoCommit {
            target: target.clone(),
            source: Box::new(e),
        }
    })?;
    let branch = format!("squad/{task}");
    git(root, &["check-ref-format", "--branch", &branch])
        .map_err(|_| WorktreeError::BadBranch(branch.clone()))?;
    let path = tree_path(root, session, task);
    ensure_dir(root)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(write_error(parent))?;
    }
    let path_text = path.display().to_string();
    let exists = git(
        root,
        &[
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    let base = if exists {
        // A branch left by an earlier run (held, or its worktree removed):
        // the work on it goes on; the diff is judged from where it forked.
        git(root, &["worktree", "prune"])?;
        git(root, &["worktree", "add", &path_text, &branch])?;
        git(root, &["merge-base", &target, &branch]).unwrap_or(base)
    } else {
        git(root, &["worktree", "add", "-b", &branch, &path_text, &base])?;
        base
    };
    let tree = RunTree {
        path,
        branch,
        base,
        target,
        state: TreeState::Active,
        reason: None,
        summary: None,
        merged_as: None,
    };
    save(run_dir, &tree)?;
    Ok(tree)
}

/// `spec` started in the worktree: its `cwd` taken relative to the worktree
/// instead of the root.
pub(crate) fn spec_in(
    spec: &squad_policies::runners::RunnerSpec,
    tree: &RunTree,
) -> squad_policies::runners::RunnerSpec {
    let mut spec = spec.clone();
    spec.cwd = Some(match &spec.cwd {
        Some(c) if !Path::new(c).is_absolute() => tree.path.join(c).display().to_string(),
        Some(c) => c.clone(),
        None => tree.path.display().to_string(),
    });
    spec
}

/// After a run of a worktree task ended with its task completed (or the
/// lead asked for a held branch to be merged again): commits what the
/// agent left uncommitted, judges `base..branch` as `squadctl check`
/// does, and merges it into the session's branch in the main checkout, or
/// holds it. [`Finished::NoTree`] when the run has no worktree waiting
/// (active or held).
pub(crate) fn finish(
    root: &Path,
    policy: &squad_policies::Policy,
    run_dir: &Path,
    rec: &RunRecord,
) -> Finished {
    let Some(mut tree) = load_own(root, run_dir, &rec.session, &rec.task).filter(|t| {
        matches!(
            t.state,
            TreeState::Active | TreeState::Held | TreeState::Review
        )
    }) else {
        return Finished::NoTree;
    };
    let finished = match merge(root, policy, &tree, rec) {
        Ok(commit) => {
            tree.state = TreeState::Merged;
            tree.merged_as = Some(commit);
            // issue 44: `runners.worktree_cleanup` before it goes.
            crate::runners::setup::clean_up(root, &policy.runners, run_dir, &tree.path, rec);
            tree.reason = None;
            tree.summary = None;
            // Merged: nothing in the worktree is lost by removing it.
            if let Err(e) = git(
                root,
                &[
                    "worktree",
                    "remove",
                    "--force",
                    &tree.path.display().to_string(),
                ],
            )
            .and_then(|_| git(root, &["branch", "-d", &tree.branch]))
            {
                tracing::warn!(error = %e, "cannot remove a merged run's worktree and branch");
            }
            Finished::Merged
        }
        Err(e) => {
            let (summary, reason) = match e {
                WorktreeError::Held { summary, reason } => (summary, reason),
                other => (
                    "git failed".to_string(),
                    format!(
                        "{} of {} is held, not merged into {}: {other}",
                        tree.branch, rec.task, tree.target
                    ),
                ),
            };
            tree.state = TreeState::Held;
            tree.reason = Some(reason.clone());
            tree.summary = Some(summary.clone());
            Finished::Held { summary, reason }
        }
    };
    if let Err(e) = save(run_dir, &tree) {
        tracing::warn!(error = %e, "cannot record a run's worktree");
    }
    finished
}

/// After a run of a worktree task ended with its task completed under
/// `runners.merge: review` (docs/review.md): what the agent left
/// uncommitted is committed on its branch and the branch recorded
/// `review` with what it changes; nothing is merged. Held (as at a merge)
/// when its worktree left the branch or git fails.
pub(crate) fn to_review(root: &Path, run_dir: &Path, rec: &RunRecord) -> Finished {
    let Some(mut tree) = load_own(root, run_dir, &rec.session, &rec.task)
        .filter(|t| matches!(t.state, TreeState::Active | TreeState::Held))
    else {
        return Finished::NoTree;
    };
    let held = |summary: String, reason: String| Finished::Held { summary, reason };
    let finished = match off_its_branch(root, &tree, rec) {
        Some(reason) => held(format!("its worktree's HEAD left {}", tree.branch), reason),
        None => match commit_leftovers(&tree, rec).and_then(|()| stat(root, &tree)) {
            Ok(stat) => Finished::Review(stat),
            Err(e) => held(
                "git failed".to_string(),
                format!(
                    "{} of {} is held, not put up for review: {e}",
                    tree.branch, rec.task
                ),
            ),
        },
    };
    match &finished {
        Finished::Review(stat) => {
            tree.state = TreeState::Review;
            tree.reason = None;
            tree.summary = Some(stat.to_string());
        }
        Finished::Held { summary, reason } => {
            tree.state = TreeState::Held;
            tree.reason = Some(reason.clone());
            tree.summary = Some(summary.clone());
        }
        _ => {}
    }
    if let Err(e) = save(run_dir, &tree) {
        tracing::warn!(error = %e, "cannot record a run's worktree");
    }
    finished
}

/// The lead rejects a branch waiting for review: recorded `rejected`
/// with the comment (not merged; the branch and the worktree stay for
/// reference). `None` when the run has no branch waiting for review.
pub(crate) fn reject_branch(
    run_dir: &Path,
    root: &Path,
    rec: &RunRecord,
    comment: &str,
) -> Option<RunTree> {
    let mut tree = load_own(root, run_dir, &rec.session, &rec.task)
        .filter(|t| t.state == TreeState::Review)?;
    tree.state = TreeState::Rejected;
    let why = if comment.trim().is_empty() {
        String::new()
    } else {
        format!(": {}", comment.trim())
    };
    tree.reason = Some(format!(
        "rejected in review{why}; {} is kept, not merged into {}",
        tree.branch, tree.target
    ));
    tree.summary = None;
    if let Err(e) = save(run_dir, &tree) {
        tracing::warn!(error = %e, "cannot record a run's worktree");
    }
    Some(tree)
}

/// What the agent left uncommitted in its worktree, committed on its
/// branch (part of its work).
fn commit_leftovers(tree: &RunTree, rec: &RunRecord) -> Result<(), WorktreeError> {
    let agent_email = format!("{}@squad.invalid", rec.agent);
    let identity = [
        ("GIT_AUTHOR_NAME", rec.agent.as_str()),
        ("GIT_AUTHOR_EMAIL", agent_email.as_str()),
        ("GIT_COMMITTER_NAME", "squadd"),
        ("GIT_COMMITTER_EMAIL", "squadd@squad.invalid"),
    ];
    let trailers = format!("Squad-Task: {}\nSquad-Agent: {}\n", rec.task, rec.agent);
    git(&tree.path, &["add", "-A"])?;
    if !git(&tree.path, &["status", "--porcelain"])?.is_empty() {
        let message = format!(
            "squad: {} by {} (left uncommitted when the task completed)\n\n{trailers}",
            rec.task, rec.agent
        );
        git_with(
            &tree.path,
            &["commit", "-q", "--no-verify", "-m", &message],
            &identity,
        )?;
    }
    Ok(())
}

/// What the branch changes from its merge base with the session's branch
/// (what a merge would bring in): files, lines added and deleted.
pub(crate) fn stat(root: &Path, tree: &RunTree) -> Result<Stat, WorktreeError> {
    let base = git(root, &["merge-base", &tree.target, &tree.branch])?;
    let out = git(
        root,
        &["diff", "--numstat", "--no-renames", &base, &tree.branch],
    )?;
    let mut stat = Stat::default();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let mut cols = line.split('\t');
        // A binary file says `-`: no lines.
        let n = |c: Option<&str>| c.and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);
        stat.added += n(cols.next());
        stat.deleted += n(cols.next());
        stat.files += 1;
    }
    Ok(stat)
}

/// The lead gives a held branch up: recorded `dropped` (not merged; the
/// branch and the worktree stay for reference). `None` when the run has
/// no held or active worktree.
pub(crate) fn drop_branch(run_dir: &Path, root: &Path, rec: &RunRecord) -> Option<RunTree> {
    let mut tree = load_own(root, run_dir, &rec.session, &rec.task).filter(|t| {
        matches!(
            t.state,
            TreeState::Active | TreeState::Held | TreeState::Review
        )
    })?;
    tree.state = TreeState::Dropped;
    tree.reason = Some(format!(
        "dropped by the lead: {} is kept, not merged into {}",
        tree.branch, tree.target
    ));
    tree.summary = None;
    if let Err(e) = save(run_dir, &tree) {
        tracing::warn!(error = %e, "cannot record a run's worktree");
    }
    Some(tree)
}

/// The hand-over state of the run of `task` recorded in `run_dir` (read
/// at start-up): its worktree's state and the hold's summary, when the
/// record names the run's own worktree.
pub(crate) fn recorded_state(
    root: &Path,
    run_dir: &Path,
    session: &str,
    task: &str,
) -> Option<(TreeState, Option<String>)> {
    own_tree(root, run_dir, session, task).map(|t| (t.state, t.summary))
}

/// The record of the run of `task` in `run_dir`, when it names the run's
/// own worktree and branch (read by commands: squadd records its
/// canonical root, a command may name it otherwise).
pub(crate) fn own_tree(root: &Path, run_dir: &Path, session: &str, task: &str) -> Option<RunTree> {
    let canonical = root.canonicalize().ok();
    load_own(root, run_dir, session, task)
        .or_else(|| load_own(canonical.as_deref()?, run_dir, session, task))
}

/// What a live worktree run's branch changes, as squadd looks before its
/// merge (docs/worktrees.md, "Overlap told before merge").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TreeChanges {
    /// The files changed: committed on the branch since its merge base
    /// with the session's branch, and uncommitted in its worktree.
    pub files: std::collections::BTreeSet<String>,
    /// The session's branch.
    pub target: String,
    /// The files on which merging the branch now would conflict (`git
    /// merge-tree`; empty: it merges cleanly, or git could not tell).
    pub conflicts: Vec<String>,
}

/// The changes of the run of `task` in `session` while its worktree is
/// active (`None`: no worktree of its own, or git failed). Three git calls
/// for this one run, whatever the session's size.
pub(crate) fn changes(
    root: &Path,
    run_dir: &Path,
    session: &str,
    task: &str,
) -> Option<TreeChanges> {
    let tree = load_own(root, run_dir, session, task)
        .or_else(|| load_own(&root.canonicalize().ok()?, run_dir, session, task))
        .filter(|t| t.state == TreeState::Active)?;
    let base = git(root, &["merge-base", &tree.target, &tree.branch]).ok()?;
    let committed = git(
        root,
        &[
            "diff",
            "--name-only",
            "--no-renames",
            "-z",
            &base,
            &tree.branch,
        ],
    )
    .ok()?;
    let mut files: std::collections::BTreeSet<String> = committed
        .split('\0')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    // Uncommitted work (the carried guard file is ignored or skipped).
    // Untrimmed: an entry starts with its two status letters, often a space.
    let status = crate::child_env::git()
        .current_dir(&tree.path)
        .args([
            "status",
            "--porcelain",
            "-z",
            "--no-renames",
            "--untracked-files=all",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let status = String::from_utf8_lossy(&status.stdout);
    files.extend(
        status
            .split('\0')
            .filter_map(|e| e.get(3..))
            .filter(|f| !f.is_empty())
            .map(str::to_string),
    );
    let conflicts = merge_conflicts(root, &tree.target, &tree.branch);
    Some(TreeChanges {
        files,
        target: tree.target,
        conflicts,
    })
}

/// The files on which merging `branch` into `target` would conflict:
/// `git merge-tree --write-tree` (git 2.38 or later) writes the merge's
/// tree into the object store only, touching no checkout; exit 1 means
/// conflicts, named after the tree's id. Any other failure (an older git)
/// says nothing.
fn merge_conflicts(root: &Path, target: &str, branch: &str) -> Vec<String> {
    let out = crate::child_env::git()
        .current_dir(root)
        .args([
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "-z",
            target,
            branch,
        ])
        .output();
    match out {
        Ok(o) if o.status.code() == Some(1) => {
            let text = String::from_utf8_lossy(&o.stdout);
            let mut files: Vec<String> = text
                .split('\0')
                .skip(1)
                .filter(|f| !f.is_empty())
                .map(str::to_string)
                .collect();
            files.sort();
            files.dedup();
            files
        }
        _ => Vec::new(),
    }
}

/// The merge itself: the session branch's new commit, or why it is held.
fn merge(
    root: &Path,
    policy: &squad_policies::Policy,
    tree: &RunTree,
    rec: &RunRecord,
) -> Result<String, WorktreeError> {
    let trailers = format!("Squad-Task: {}\nSquad-Agent: {}\n", rec.task, rec.agent);
    // The worktree must still be on the run's branch: anything committed
    // elsewhere went past the check, and committing leftovers there would
    // put them there too.
    if let Some(reason) = off_its_branch(root, tree, rec) {
        return Err(WorktreeError::Held {
            summary: format!("its worktree's HEAD left {}", tree.branch),
            reason,
        });
    }
    // What the agent left uncommitted is part of its work.
    commit_leftovers(tree, rec)?;
    // What a merge brings in is every commit of the branch not on the
    // session's branch: judged from their merge base, computed now (the
    // recorded base is for people; the agent can rewrite its branch).
    let base = git(root, &["merge-base", &tree.target, &tree.branch])?;
    let findings =
        crate::changes::judge_branch(root, policy, &base, &tree.branch, &rec.task, &rec.agent)
            .map_err(WorktreeError::Check)?;
    let current = git(root, &["symbolic-ref", "--short", "-q", "HEAD"]).ok();
    // Nothing staged in the main checkout, and its branch where its index
    // is: a merge there must leave it in step.
    let in_step = git(root, &["diff", "--cached", "--quiet"]).is_ok();
    let facts = Facts {
        task: &rec.task,
        branch: &tree.branch,
        target: &tree.target,
        current: current.as_deref(),
        findings: &findings,
        in_step,
    };
    if let Outcome::Hold(reason) = decide(&facts) {
        let summary = hold_summary(&facts).unwrap_or_else(|| "held".to_string());
        return Err(WorktreeError::Held { summary, reason });
    }
    let squadd = [
        ("GIT_AUTHOR_NAME", "squadd"),
        ("GIT_AUTHOR_EMAIL", "squadd@squad.invalid"),
        ("GIT_COMMITTER_NAME", "squadd"),
        ("GIT_COMMITTER_EMAIL", "squadd@squad.invalid"),
    ];
    if git(root, &["merge", "--ff-only", "-q", &tree.branch]).is_err() {
        let message = format!(
            "squad: merge {} ({} by {})\n\n{trailers}",
            tree.branch, rec.task, rec.agent
        );
        if let Err(e) = git_with(
            root,
            &[
                "merge",
                "--no-ff",
                "--no-edit",
                "-q",
                "-m",
                &message,
                &tree.branch,
            ],
            &squadd,
        ) {
            // Leave the main checkout as it was.
            let _ = git(root, &["merge", "--abort"]);
            return Err(WorktreeError::Held {
                summary: format!("the merge into {} failed (a conflict?)", tree.target),
                reason: format!(
                    "{} of {} is held, not merged into {}: the merge failed (a conflict, or changes in the main checkout in the way). {e}\nResolve it by hand: `git merge {}` on {}.",
                    tree.branch, rec.task, tree.target, tree.branch, tree.target
                ),
            });
        }
    }
    git(root, &["rev-parse", "HEAD"])
}

/// Why the run's worktree is held when its HEAD no longer names the run's
/// branch (see `squad_policies::worktree::left_its_branch`), with the
/// commits the ref it names holds beyond the run's branch.
fn off_its_branch(root: &Path, tree: &RunTree, rec: &RunRecord) -> Option<String> {
    let head = git(&tree.path, &["symbolic-ref", "-q", "HEAD"]).ok();
    let own = format!("refs/heads/{}", tree.branch);
    if head.as_deref() == Some(own.as_str()) {
        return None;
    }
    let fork = head
        .as_deref()
        .and_then(|h| git(root, &["merge-base", &tree.branch, h]).ok());
    let range = fork.zip(head.as_deref()).map(|(f, h)| {
        let short = h.strip_prefix("refs/heads/").unwrap_or(h);
        format!("{}..{short}", &f[..f.len().min(12)])
    });
    let landed: Vec<String> = range
        .as_deref()
        .and_then(|r| git(root, &["log", "--format=%h %s (%an)", "-n", "11", r]).ok())
        .map(|out| out.lines().map(str::to_string).collect())
        .unwrap_or_default();
    left_its_branch(&TreeHead {
        task: &rec.task,
        branch: &tree.branch,
        head: head.as_deref(),
        landed: &landed,
        range: range.as_deref(),
    })
}

/// Retention of runs' worktrees: the worktrees of every session that is no
/// longer in `sessions/` (archived, deleted, removed by hand) are removed
/// with `git worktree remove`, which refuses one holding uncommitted or
/// untracked work: that one stays (a warning says so) and the next run
/// tries again. Branches stay: a held run's branch is the work a human
/// looks at. Returns the worktrees removed.
pub(crate) fn sweep(root: &Path, session_exists: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let root = crate::root::fs_path(root);
    let dir = root.join(SQUAD_DIR).join(WORKTREES_DIR);
    let mut removed = Vec::new();
    let Ok(sessions) = std::fs::read_dir(&dir) else {
        return removed;
    };
    for session in sessions.flatten() {
        let name = session.file_name().to_string_lossy().into_owned();
        // Only real directories (never through a link), of ended sessions
        // (no session's name starts with a dot: `.doctor/` is the doctor's).
        if !session.file_type().is_ok_and(|t| t.is_dir())
            || name.starts_with('.')
            || session_exists(&name)
        {
            continue;
        }
        for tree in std::fs::read_dir(session.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = tree.path();
            if !tree.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            match git(root, &["worktree", "remove", &path.display().to_string()]) {
                Ok(_) => removed.push(path),
                Err(e) => tracing::warn!(error = %e, "a worktree of an ended session is kept"),
            }
        }
        // Gone only when empty: a kept worktree keeps its session folder.
        let _ = std::fs::remove_dir(session.path());
    }
    removed
}
