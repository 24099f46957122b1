//! The review gate (docs/review.md): with `runners.merge: review` (or a
//! plan's `meta.merge: review`) a completed worktree run's branch is
//! committed and waits ([`Handover::Review`]) instead of merging; the
//! lead approves it (merged, judged again), asks for changes (a new run
//! of the task in the same worktree and branch, the comment in its prompt
//! and in the agent's inbox) or rejects it (the run failed, the branch
//! kept). Decided here; the shell commits, merges and records
//! (`worktree.rs`), and the control socket's `runs` method asks
//! (`approve`, `changes`, `reject`).

use super::handover::Handover;
use super::{RunError, RunKey, emit, record, start_run, tell_lead_about};
use crate::daemon::core::{Effect, Now, Root, RootId};
use crate::events::EventKind;
use crate::runners::RunState;
use crate::worktree::Stat;
use squad_policies::runners::{Candidate, Merge};

/// Whether the completed run `run` of `agent` waits for review instead of
/// merging: its plan's `meta.merge: review`, its runner's `merge:`, or
/// `runners.merge`.
pub(crate) fn wanted(root: &Root, run: &RunKey, agent: &str) -> bool {
    let plan_asks = root
        .sessions
        .get(&run.0)
        .and_then(|s| s.index().full_plan(&run.1))
        .is_some_and(|p| p.meta.merge.as_deref() == Some("review"));
    root.policy.runners.merge_for(agent, plan_asks) == Merge::Review
}

/// The `review` event of `run`: `action` (waiting, approved, changes,
/// rejected) and a detail (what it changes, the lead's comment).
fn said(root: &Root, id: RootId, run: &RunKey, action: &str, detail: String) -> Effect {
    let dir = crate::runners::run_dir(&root.session_dir(&run.0), &run.1);
    emit(
        id,
        &run.0,
        &dir,
        EventKind::Review {
            task_id: run.1.clone(),
            action: action.to_string(),
            detail,
        },
    )
}

/// The branch of `run` waits for review (the shell committed it): said,
/// and the lead told with the commands that settle it.
pub(crate) fn waiting(root: &Root, id: RootId, run: &RunKey, stat: Stat) -> Vec<Effect> {
    let (session, task) = run;
    let text = format!(
        "The run of {task} completed; its branch squad/{task} ({stat}) waits for your review before it is merged. Until then the tasks that require {task} wait and session {session} does not complete.\n\nLook: `squadctl review show {task} --session {session}`\nMerge it (judged again): `squadctl review approve {task} --session {session}`\nSend it back to the agent: `squadctl review changes {task} --session {session} -m \"what to change\"`\nReject it (the task fails, the branch is kept): `squadctl review reject {task} --session {session} -m \"why\"`"
    );
    vec![
        said(root, id, run, "waiting", stat.to_string()),
        tell_lead_about(
            id,
            session,
            task,
            format!("review waiting: {task} ({stat})"),
            text,
        ),
    ]
}

/// The lead rejected the branch of `run` (the shell recorded it): the
/// run's record says `rejected` (failed; nothing starts it again by
/// itself, and there is nothing left for a human to do).
pub(crate) fn rejected(root: &mut Root, id: RootId, run: &RunKey, comment: &str) -> Vec<Effect> {
    let mut out = Vec::new();
    let dir = crate::runners::run_dir(&root.session_dir(&run.0), &run.1);
    if let Some(rec) = root.runs.past.get_mut(run) {
        rec.state = RunState::Rejected;
        rec.completed = false;
        rec.held = false;
        rec.retry_at = None;
        out.push(record(&dir, rec));
    }
    out.push(said(root, id, run, "rejected", comment.trim().to_string()));
    out
}

/// `squadctl review approve|changes|reject TASK`: the branch of `task`
/// waiting for review (in `session`, or the one session where one
/// waits), or why not.
pub(crate) fn asked(
    root: &mut Root,
    id: RootId,
    action: &str,
    session: Option<&str>,
    task: &str,
    text: Option<String>,
    now: Now,
) -> Vec<Effect> {
    let refused = |e: RunError| {
        vec![Effect::RunReply {
            root: id,
            reply: Err(e),
        }]
    };
    let (key, rec) =
        match super::handover::waiting(root, session, task, |h| matches!(h, Handover::Review(_))) {
            Ok(found) => found,
            Err(None) => return refused(RunError::NotInReview(task.to_string())),
            Err(Some(e)) => return refused(e),
        };
    let comment = text.unwrap_or_default().trim().to_string();
    if action == "changes" && comment.is_empty() {
        return refused(RunError::NoComment);
    }
    let dir = crate::runners::run_dir(&root.session_dir(&key.0), &key.1);
    let rec = Box::new(rec);
    match action {
        "approve" => {
            root.runs.trees.insert(key.clone(), Handover::Merging);
            vec![
                said(root, id, &key, "approved", comment),
                Effect::FinishWorktree {
                    root: id,
                    dir,
                    rec,
                    by_hand: true,
                    review: false,
                },
            ]
        }
        "reject" => {
            root.runs.trees.insert(key, Handover::Merging);
            vec![Effect::DropWorktree {
                root: id,
                dir,
                rec,
                rejected: Some(comment),
            }]
        }
        _ => {
            let mut out = vec![said(root, id, &key, "changes", comment.clone())];
            out.extend(tell_agent(
                root,
                id,
                &key,
                &rec.agent,
                rec.attempt,
                &comment,
                now,
            ));
            out.extend(changes_run(root, id, &key, &comment, now));
            out
        }
    }
}

/// The lead's comment in the agent's inbox: a message from squadd to the
/// run's agent, about the task.
fn tell_agent(
    root: &Root,
    id: RootId,
    run: &RunKey,
    agent: &str,
    attempt: u32,
    comment: &str,
    now: Now,
) -> Vec<Effect> {
    let (session, task) = run;
    let text = format!(
        "The lead reviewed your work on {task} (branch squad/{task}) and asks for changes:\n\n{comment}\n\nsquadd starts a new run of {task} in the same worktree and branch, your earlier commits in place; report `completed` again when done."
    );
    // Distinct for each request (its task, run and comment), so two
    // requests in one millisecond get distinct message ids.
    let key = format!("{session}|{task}|{attempt}|{comment}");
    let salt = (crate::index::fingerprint(key.as_bytes()) & 0xffff_ffff) as u32;
    let about = super::lead::About {
        task: Some(task.clone()),
        subject: format!("changes asked in review of {task}"),
    };
    super::lead::message(root, id, session, agent, about, &text, salt, now)
}

/// The single place where `review changes` starts the task's next run:
/// same worktree and branch (`prepare_tree` finds them again), the
/// lead's comment in its prompt (`RunSpec::review`), resuming the agent
/// CLI's own conversation where the run recorded it (`RunSpec::resume`:
/// Claude Code `--resume`, Codex `exec resume`; docs/runners.md).
fn changes_run(root: &mut Root, id: RootId, run: &RunKey, comment: &str, now: Now) -> Vec<Effect> {
    let (session, task) = run;
    let Some(t) = root
        .sessions
        .get(session)
        .and_then(|s| s.tasks().get(task.as_str()))
        .cloned()
    else {
        return vec![Effect::RunReply {
            root: id,
            reply: Err(RunError::NotPlanned(task.clone())),
        }];
    };
    let past = root.runs.past.get(run);
    let resume = past.and_then(|p| p.conversation.clone());
    let c = Candidate {
        session: session.clone(),
        task: task.clone(),
        agent: t.agent.clone(),
        priority: t.priority,
        attempts: past.map_or(0, |p| p.attempt),
        retry_at: None,
        held: false,
    };
    // Working from now: a second `changes` is refused, and the
    // dependents and the session go on waiting.
    root.runs.trees.insert(run.clone(), Handover::Working);
    let mut out = start_run(root, id, c, true, now);
    for e in &mut out {
        if let Effect::SpawnRun { spec, .. } = e {
            spec.review = Some(comment.to_string());
            spec.resume = resume.clone();
        }
    }
    out
}
