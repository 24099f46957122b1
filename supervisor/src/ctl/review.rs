//! `squadctl review`: the lead's review gate (docs/review.md). With
//! `runners.merge: review` a completed worktree run's branch waits in the
//! `review` state; this lists what waits, shows a branch's diff with each
//! file's verdict (`squadctl check`'s decision, `changes::judge_branch`),
//! and approves (merged, judged again), sends back (`changes`: a new run
//! in the same worktree with the comment) or rejects it. The actions are
//! the lead's; squadd carries them out over the control socket (`runs`
//! method, actions `approve`, `changes`, `reject`; `core/runs/review.rs`).

use crate::control::ClientError;
use crate::worktree::{RunTree, TreeState};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;

const EXAMPLES: &str = "Examples:
  squadctl review                                  # what waits for your review
  squadctl review --json                           # the same, as JSON (docs/review.md)
  squadctl review show task_api                    # its diff, each file's verdict
  squadctl review approve task_api                 # merge it (judged again)
  squadctl review changes task_api -m \"add tests\"  # send it back: a new run, same branch
  squadctl review reject task_api -m \"wrong approach\"  # the task fails, the branch is kept";

/// Review what agents did before it is merged (docs/review.md).
///
/// With `runners.merge: review` (or a plan's `meta.merge: review`) a
/// worktree run whose task completed does not merge: what its agent left
/// is committed on its branch `squad/<task>`, which waits for the lead.
/// Without a subcommand, lists what waits: task, agent, files changed,
/// lines added and deleted, the boundary and lock verdicts, and for how
/// long. The actions are the lead's (an agent, SQUAD_AGENT set to a
/// non-lead, is refused) and need squadd running.
#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
pub struct ReviewArgs {
    #[command(subcommand)]
    pub command: Option<ReviewCommand>,
    /// Only this session's branches.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output (an array; docs/review.md).
    #[arg(long)]
    pub json: bool,
}

/// What to do with a branch waiting for review.
#[derive(Debug, clap::Subcommand)]
pub enum ReviewCommand {
    /// A waiting branch's diff from where it forked, each file with its
    /// verdict (what `squadctl check` decides for it).
    #[command(after_help = EXAMPLES)]
    Show(ShowArgs),
    /// Merge the branch into the session's branch: judged again at merge
    /// time (merged, or held with the reason, as at any merge).
    #[command(after_help = EXAMPLES)]
    Approve(ActArgs),
    /// Send the branch back: the comment goes to the agent's inbox, and a
    /// new run of the task starts in the same worktree and branch (its
    /// earlier commits in place) with the comment in its prompt.
    #[command(after_help = EXAMPLES)]
    Changes(ChangesArgs),
    /// Reject the branch: the task's run is recorded failed (`rejected`),
    /// nothing is merged, the branch and worktree are kept for reference;
    /// the tasks that require it and the session go on without it.
    #[command(after_help = EXAMPLES)]
    Reject(RejectArgs),
}

/// `review show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Task id.
    pub task: String,
    /// The session, when several have a branch of the task.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `review approve`.
#[derive(Debug, clap::Args)]
pub struct ActArgs {
    /// Task id.
    pub task: String,
    /// The session, when several have a branch of the task waiting.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `review changes`.
#[derive(Debug, clap::Args)]
pub struct ChangesArgs {
    /// Task id.
    pub task: String,
    /// What to change (sent to the agent, and in its next run's prompt).
    #[arg(short = 'm', long = "message", value_name = "TEXT", required = true)]
    pub message: String,
    /// The session, when several have a branch of the task waiting.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// `review reject`.
#[derive(Debug, clap::Args)]
pub struct RejectArgs {
    /// Task id.
    pub task: String,
    /// Why (recorded in the branch's record and the `review` event).
    #[arg(short = 'm', long = "message", value_name = "TEXT")]
    pub message: Option<String>,
    /// The session, when several have a branch of the task waiting.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `squadctl review`.
pub(crate) fn run(root_arg: Option<&Path>, args: ReviewArgs) -> u8 {
    let (root, policy) = match super::root_and_policy(root_arg) {
        Ok(r) => r,
        Err(code) => return code,
    };
    match args.command {
        None => list(&root, &policy, args.session.as_deref(), args.json),
        Some(ReviewCommand::Show(a)) => show(&root, &policy, &a),
        Some(ReviewCommand::Approve(a)) => act(&root, "approve", &a.task, a.session, None, a.json),
        Some(ReviewCommand::Changes(a)) => act(
            &root,
            "changes",
            &a.task,
            a.session,
            Some(a.message),
            a.json,
        ),
        Some(ReviewCommand::Reject(a)) => {
            act(&root, "reject", &a.task, a.session, a.message, a.json)
        }
    }
}

/// A branch waiting for review, as `review --json` lists it.
#[derive(Debug, Serialize)]
struct Waiting {
    session: String,
    task: String,
    agent: String,
    branch: String,
    /// The session's branch it would be merged into.
    target: String,
    files: usize,
    added: u64,
    deleted: u64,
    /// `ok`, or how many findings of the boundary rules.
    boundary: String,
    /// `ok`, or how many findings of the ownership (lock) rules.
    locks: String,
    /// Every finding of `check`'s decision: path, rule, message.
    findings: Vec<Finding>,
    /// When its run ended (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting_since: Option<String>,
    /// Seconds since.
    #[serde(skip_serializing_if = "Option::is_none")]
    age_secs: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
struct Finding {
    path: String,
    rule: String,
    message: String,
}

/// One branch's record and run, found in the files.
struct Found {
    rec: crate::runners::RunRecord,
    tree: RunTree,
}

/// The worktree runs of `root` (of `session`) whose branch is in `state`.
fn found(root: &Path, session: Option<&str>, states: &[TreeState]) -> Vec<Found> {
    crate::runners::all_records(root)
        .into_iter()
        .filter(|(_, r)| session.is_none_or(|s| s == r.session))
        .filter_map(|(session_dir, rec)| {
            let dir = crate::runners::run_dir(&session_dir, &rec.task);
            let tree = crate::worktree::own_tree(root, &dir, &rec.session, &rec.task)?;
            states.contains(&tree.state).then_some(Found { rec, tree })
        })
        .collect()
}

/// Why a branch could not be judged.
#[derive(Debug, thiserror::Error)]
enum JudgeError {
    /// git failed (the merge base).
    #[error("{0}")]
    Git(#[from] crate::worktree::WorktreeError),
    /// `check`'s decision could not be made.
    #[error("{0}")]
    Check(String),
}

/// `check`'s findings on a branch, judged as its merge would be.
fn findings(
    root: &Path,
    policy: &squad_policies::Policy,
    f: &Found,
) -> Result<Vec<Finding>, JudgeError> {
    let base = crate::worktree::git(root, &["merge-base", &f.tree.target, &f.tree.branch])?;
    let found = crate::changes::judge_branch(
        root,
        policy,
        &base,
        &f.tree.branch,
        &f.rec.task,
        &f.rec.agent,
    )
    .map_err(JudgeError::Check)?;
    Ok(found
        .into_iter()
        .map(|d| Finding {
            path: d.path.display().to_string(),
            rule: d.rule.id().to_string(),
            message: d.message,
        })
        .collect())
}

/// "ok", or "N findings" of the rules named.
fn verdict(findings: &[Finding], rules: &[&str]) -> String {
    match findings
        .iter()
        .filter(|f| rules.contains(&f.rule.as_str()))
        .count()
    {
        0 => "ok".into(),
        1 => "1 finding".into(),
        n => format!("{n} findings"),
    }
}

const BOUNDARY_RULES: &[&str] = &["boundary-violation", "unattributed-change"];
const LOCK_RULES: &[&str] = &["ownership-violation"];

fn waiting(root: &Path, policy: &squad_policies::Policy, f: &Found) -> Waiting {
    let stat = crate::worktree::stat(root, &f.tree).unwrap_or_default();
    let findings = findings(root, policy, f).unwrap_or_else(|e| {
        vec![Finding {
            path: f.tree.branch.clone(),
            rule: "check-failed".into(),
            message: e.to_string(),
        }]
    });
    let since = f.rec.exit.as_ref().map(|e| e.at);
    Waiting {
        session: f.rec.session.clone(),
        task: f.rec.task.clone(),
        agent: f.rec.agent.clone(),
        branch: f.tree.branch.clone(),
        target: f.tree.target.clone(),
        files: stat.files,
        added: stat.added,
        deleted: stat.deleted,
        boundary: verdict(&findings, BOUNDARY_RULES),
        locks: verdict(&findings, LOCK_RULES),
        findings,
        waiting_since: since.map(|t| t.to_rfc3339()),
        age_secs: since.map(|t| (chrono::Utc::now() - t).num_seconds().max(0)),
    }
}

fn list(root: &Path, policy: &squad_policies::Policy, session: Option<&str>, json: bool) -> u8 {
    let items: Vec<Waiting> = found(root, session, &[TreeState::Review])
        .iter()
        .map(|f| waiting(root, policy, f))
        .collect();
    if json {
        return match serde_json::to_string_pretty(&items) {
            Ok(t) => super::print(&format!("{t}\n")),
            Err(e) => super::fail(e),
        };
    }
    if items.is_empty() {
        return super::print_human("nothing waits for review\n");
    }
    let mut out = String::from("TASK  AGENT  FILES  LINES  BOUNDARY  LOCKS  WAITING  SESSION\n");
    for w in &items {
        let age = w
            .age_secs
            .map(crate::text::human_age)
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{}  {}  {}  +{} \u{2212}{}  {}  {}  {}  {}\n",
            w.task, w.agent, w.files, w.added, w.deleted, w.boundary, w.locks, age, w.session
        ));
    }
    out.push_str("\nsquadctl review show TASK; then approve, changes -m TEXT, or reject\n");
    super::print_human(&out)
}

fn show(root: &Path, policy: &squad_policies::Policy, args: &ShowArgs) -> u8 {
    let all = found(
        root,
        args.session.as_deref(),
        &[
            TreeState::Review,
            TreeState::Held,
            TreeState::Active,
            TreeState::Rejected,
            TreeState::Dropped,
        ],
    );
    let mine: Vec<&Found> = all.iter().filter(|f| f.rec.task == args.task).collect();
    let f = match mine.as_slice() {
        [one] => *one,
        [] => {
            return super::fail(format!(
                "`{}` has no unmerged worktree branch (`squadctl review` lists those waiting)",
                args.task
            ));
        }
        _ => {
            return super::fail(format!(
                "`{}` has branches in several sessions; pass --session",
                args.task
            ));
        }
    };
    let w = waiting(root, policy, f);
    let base = crate::worktree::git(root, &["merge-base", &f.tree.target, &f.tree.branch]);
    let diff = base
        .and_then(|b| {
            crate::worktree::git(
                root,
                &["diff", "--no-color", "--no-renames", &b, &f.tree.branch],
            )
        })
        .map_err(|e| e.to_string());
    let files = base_files(root, f);
    let verdicts: Vec<Value> = files
        .iter()
        .map(|(path, status)| {
            let mine: Vec<&Finding> = w.findings.iter().filter(|x| &x.path == path).collect();
            json!({
                "path": path,
                "status": status,
                "verdict": if mine.is_empty() { "ok" } else { "refused" },
                "findings": mine.iter().map(|x| json!({"rule": x.rule, "message": x.message})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let diff = match diff {
        Ok(d) => d,
        Err(e) => return super::fail(format!("cannot show the diff of {}: {e}", f.tree.branch)),
    };
    if args.json {
        let v = json!({
            "session": w.session,
            "task": w.task,
            "agent": w.agent,
            "branch": w.branch,
            "target": w.target,
            "state": f.tree.state,
            "files": verdicts,
            "added": w.added,
            "deleted": w.deleted,
            "boundary": w.boundary,
            "locks": w.locks,
            "findings": w.findings,
            "diff": diff,
        });
        return super::print(&format!("{v:#}\n"));
    }
    let state = serde_json::to_value(f.tree.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut out = format!(
        "{} by {} on {} ({state}), into {}: {} files, +{} \u{2212}{}; boundary {}, locks {}\n\n",
        w.task, w.agent, w.branch, w.target, w.files, w.added, w.deleted, w.boundary, w.locks
    );
    for v in &verdicts {
        out.push_str(&format!(
            "{} {}  {}\n",
            v["status"].as_str().unwrap_or("?"),
            v["path"].as_str().unwrap_or_default(),
            v["verdict"].as_str().unwrap_or_default()
        ));
        for x in v["findings"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "    {}: {}\n",
                x["rule"].as_str().unwrap_or_default(),
                x["message"].as_str().unwrap_or_default()
            ));
        }
    }
    // Findings about no file of the diff (a plan edited, a trailer).
    for x in w
        .findings
        .iter()
        .filter(|x| !files.iter().any(|(p, _)| p == &x.path))
    {
        out.push_str(&format!("{}: {}: {}\n", x.path, x.rule, x.message));
    }
    out.push('\n');
    out.push_str(&diff);
    out.push('\n');
    super::print_human(&out)
}

/// The files the branch changes from its merge base: (path, status letter).
fn base_files(root: &Path, f: &Found) -> Vec<(String, String)> {
    crate::worktree::git(root, &["merge-base", &f.tree.target, &f.tree.branch])
        .and_then(|b| {
            crate::worktree::git(
                root,
                &["diff", "--name-status", "--no-renames", &b, &f.tree.branch],
            )
        })
        .map(|out| {
            out.lines()
                .filter_map(|l| {
                    let (status, path) = l.split_once('\t')?;
                    Some((path.to_string(), status.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Why a review action was not carried out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ActError {
    /// The caller is an agent, not a lead (`SQUAD_AGENT`): refused here,
    /// squadd never asked.
    #[error("{0}")]
    NotLead(String),
    /// No squadd runs for the project.
    #[error(
        "squadd is not running for this project: reviews are carried out by squadd (start it with `squadd --root …`)"
    )]
    NotRunning,
    /// squadd refused, or the call failed.
    #[error("{0}")]
    Call(ClientError),
}

/// What a review action did, as squadd left it: the `--json` answer and
/// the sentence saying it.
pub(crate) struct Acted {
    /// The `--json` object (session, task, action, state, branch, …).
    pub json: Value,
    /// One line for a person.
    pub text: String,
}

/// `approve`, `changes` or `reject` of `task`: the lead's, asked of squadd
/// (the one path for `squadctl review` and `squadctl web`).
pub(crate) fn act_on(
    root: &Path,
    action: &str,
    task: &str,
    session: Option<String>,
    text: Option<String>,
) -> Result<Acted, ActError> {
    if let Some(why) = super::write::lead_refusal(
        root,
        "approving, sending back or rejecting an agent's work is the lead's to decide",
        "review it",
    ) {
        return Err(ActError::NotLead(why));
    }
    let asked = super::merge::ask_runs(root, action, session, task, text).map_err(|e| match e {
        ClientError::NotRunning(_) => ActError::NotRunning,
        e => ActError::Call(e),
    })?;
    let answer = &asked.answer;
    let state = asked.tree.as_ref().map(|t| t.state);
    let mut v = asked.json(task);
    v["action"] = json!(action);
    v["pid"] = json!(answer.get("pid").filter(|_| action == "changes"));
    let text = match (action, state) {
        ("approve", Some(TreeState::Merged)) => format!("{task} merged\n"),
        ("approve", Some(TreeState::Held)) => format!(
            "{task} held at merge: {}\n",
            v["reason"].as_str().unwrap_or_default()
        ),
        ("reject", _) => format!(
            "{task} rejected: its run is recorded failed; {} is kept, not merged\n",
            v["branch"].as_str().unwrap_or("its branch")
        ),
        ("changes", _) => format!(
            "{task} sent back: the comment is in the agent's inbox, and a new run started on {} (pid {})\n",
            v["branch"].as_str().unwrap_or("its branch"),
            answer["pid"]
        ),
        (_, s) => format!("{task} {}\n", serde_json::to_value(s).unwrap_or_default()),
    };
    Ok(Acted { json: v, text })
}

/// `squadctl review approve|changes|reject`.
fn act(
    root: &Path,
    action: &str,
    task: &str,
    session: Option<String>,
    text: Option<String>,
    json: bool,
) -> u8 {
    match act_on(root, action, task, session, text) {
        Ok(a) if json => super::print(&format!("{:#}\n", a.json)),
        Ok(a) => super::print_human(&a.text),
        Err(e @ ActError::NotLead(_)) => super::fail(e),
        Err(e) => super::fail(format!("cannot {action} {task}: {e}")),
    }
}
