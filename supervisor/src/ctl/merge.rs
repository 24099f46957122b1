//! `squadctl merge TASK [--drop]`: a worktree run's branch held at merge is
//! merged again (judged again at merge time) or given up, the branch kept
//! (docs/worktrees.md, "Hand-over"). The lead's command; squadd does the
//! work (`core/runs/handover.rs`).

use crate::control::{Client, ClientError, Method};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Merge a branch held at merge again (judged again), or `--drop` it.
///
/// A worktree run's branch held at merge (docs/worktrees.md) is merged
/// into the session's branch once fixed, judged again as at the run's end
/// (merged, or held again with the new reason); with `--drop` it is given
/// up: not merged, the branch kept for reference, and the tasks that
/// require it and the session go on without it. The lead's command
/// (squadd must be running).
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Task id.
    pub task: String,
    /// The session, when several hold a branch of the task.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Give the branch up instead of merging it.
    #[arg(long)]
    pub drop: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Runs `squadctl merge`.
pub(crate) fn merge(root_arg: Option<&Path>, args: MergeArgs) -> u8 {
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    if let Some(why) = super::write::lead_refusal(
        &root,
        "merging or dropping a held branch is the lead's to decide",
        "merge or drop it",
    ) {
        return super::fail(why);
    }
    match ask(&root, &args) {
        Ok(v) if args.json => super::print(&format!("{v:#}\n")),
        Ok(v) => {
            let state = v["state"].as_str().unwrap_or("-");
            let mut text = format!("{} {state}", args.task);
            if let Some(reason) = v["reason"].as_str().filter(|_| state == "held") {
                text.push_str(&format!(": {}", crate::text::escape(reason)));
            }
            super::print(&format!("{text}\n"))
        }
        Err(e) => super::fail(format!("cannot merge {}: {e}", args.task)),
    }
}

/// Why squadd could not be asked.
#[derive(Debug, thiserror::Error)]
enum MergeError {
    /// No squadd runs for the project.
    #[error(
        "squadd is not running for this project: branches are merged by squadd (start it with `squadd --root …`)"
    )]
    NotRunning,
    /// squadd refused, or the call failed.
    #[error("{0}")]
    Call(ClientError),
}

/// Asks squadd, then reads what became of the branch.
fn ask(root: &Path, args: &MergeArgs) -> Result<Value, MergeError> {
    let action = if args.drop { "drop" } else { "merge" };
    let asked =
        ask_runs(root, action, args.session.clone(), &args.task, None).map_err(|e| match e {
            ClientError::NotRunning(_) => MergeError::NotRunning,
            e => MergeError::Call(e),
        })?;
    Ok(asked.json(&args.task))
}

/// What squadd answered to a `runs` action on a branch, and the branch's
/// worktree record as squadd left it (written before it answers).
pub(crate) struct Asked {
    /// squadd's answer.
    pub answer: Value,
    /// The session the branch is in.
    pub session: String,
    /// The run's worktree record, when it can be read.
    pub tree: Option<crate::worktree::RunTree>,
}

impl Asked {
    /// The branch's fields for `--json`: session, task, state, branch,
    /// reason, merged_as.
    pub(crate) fn json(&self, task: &str) -> Value {
        let tree = self.tree.as_ref();
        json!({
            "session": self.session,
            "task": task,
            "state": tree.map(|t| t.state),
            "branch": tree.map(|t| t.branch.clone()),
            "reason": tree.and_then(|t| t.reason.clone()),
            "merged_as": tree.and_then(|t| t.merged_as.clone()),
        })
    }
}

/// Asks squadd's `runs` method for `action` on `task`'s branch (the one
/// path of `squadctl merge`, `squadctl review` and `squadctl web`), then
/// reads the branch's worktree record.
pub(crate) fn ask_runs(
    root: &Path,
    action: &str,
    session: Option<String>,
    task: &str,
    text: Option<String>,
) -> Result<Asked, ClientError> {
    let method = Method::Runs {
        action: action.to_string(),
        session,
        task: Some(task.to_string()),
        text,
    };
    let answer = Client::connect(root, Duration::from_secs(60)).and_then(|mut c| c.call(method))?;
    let session = answer["session"].as_str().unwrap_or_default().to_string();
    let dir = crate::runners::run_dir(
        &root
            .join(squad_protocol::tree::SQUAD_DIR)
            .join(squad_protocol::tree::SESSIONS_DIR)
            .join(&session),
        task,
    );
    let tree = crate::worktree::load(&dir);
    Ok(Asked {
        answer,
        session,
        tree,
    })
}
