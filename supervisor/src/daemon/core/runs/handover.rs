//! Hand-over on the branch (docs/worktrees.md, "Hand-over"): in worktree
//! mode a task's work reaches its dependents and its session through the
//! session's branch, not through its agent's `completed`. Decided here:
//! where each worktree run's branch stands ([`Handover`]), which tasks
//! wait for a prerequisite's merge ([`waiting_for`]), when a session that
//! ended may be wrapped up ([`settled`]), and what the lead is told when a
//! branch is held. The shell merges, holds or drops (`worktree.rs`) and
//! says what became of the branch ([`finished`]).

use super::{RunKey, tell_lead_about};
use crate::daemon::core::timer::Timer;
use crate::daemon::core::{Effect, Now, Root, RootId};
use crate::events::EventKind;
use crate::worktree::{Finished, TreeState};
use std::time::Duration;

/// Where a worktree run's branch stands on its way to the session's branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Handover {
    /// The run works on it (or ended without completing its task).
    Working,
    /// The task completed: its merge is being carried out.
    Merging,
    /// On the session's branch: its dependents may start.
    Merged,
    /// Held at merge (a few words why): its dependents wait, its session
    /// does not complete until the lead merges or drops it.
    Held(String),
    /// Given up by the lead: the session goes on without it.
    Dropped,
    /// Committed, waiting for the lead's review (docs/review.md; what it
    /// changes, "2 files, +10 −3"): its dependents wait, its session does
    /// not complete until the lead approves (merged), asks for changes (a
    /// new run: working) or rejects it.
    Review(String),
    /// Rejected in review: the run failed, the branch kept; the session
    /// goes on without it (as [`Handover::Dropped`]).
    Rejected,
}

impl Handover {
    /// Whether the branch is done with: merged or deliberately dropped.
    pub(crate) fn settled(&self) -> bool {
        matches!(
            self,
            Handover::Merged | Handover::Dropped | Handover::Rejected
        )
    }

    /// What a task waiting for this branch waits for, in a few words.
    pub(crate) fn says(&self) -> String {
        match self {
            Handover::Working => "its run to complete and merge".into(),
            Handover::Merging => "its merge".into(),
            Handover::Held(why) => format!("its branch, held at merge: {why}"),
            Handover::Review(stat) => format!("the lead's review of its branch ({stat})"),
            Handover::Merged | Handover::Dropped | Handover::Rejected => String::new(),
        }
    }

    /// The hand-over a recorded worktree state stands for (start-up).
    pub(crate) fn from_record(state: TreeState, summary: Option<String>, completed: bool) -> Self {
        match state {
            TreeState::Merged => Handover::Merged,
            TreeState::Dropped => Handover::Dropped,
            TreeState::Held => Handover::Held(summary.unwrap_or_else(|| "held".into())),
            TreeState::Review => Handover::Review(summary.unwrap_or_default()),
            TreeState::Rejected => Handover::Rejected,
            // Completed but not merged: squadd stopped between the exit and
            // the merge; the merge is carried out again (`runs::found`).
            TreeState::Active if completed => Handover::Merging,
            TreeState::Active => Handover::Working,
        }
    }
}

/// The prerequisites of `task` in `session` whose work is in a worktree
/// not merged (nor dropped) yet, with where each stands. A prerequisite
/// without a worktree run (completed by hand, or runs not in worktree
/// mode) hands over by its `completed` alone.
pub(crate) fn waiting_for<'a>(
    root: &'a Root,
    session: &str,
    task: &str,
) -> Vec<(&'a str, &'a Handover)> {
    let Some(t) = root.sessions.get(session).and_then(|s| s.tasks().get(task)) else {
        return Vec::new();
    };
    t.prerequisites
        .iter()
        .filter_map(|p| {
            let (key, h) = root
                .runs
                .trees
                .get_key_value(&(session.to_string(), p.clone()))?;
            (!h.settled()).then_some((key.1.as_str(), h))
        })
        .collect()
}

/// [`waiting_for`] in words: "task_a (its branch, held at merge: …)".
pub(crate) fn waiting_words(waits: &[(&str, &Handover)]) -> String {
    waits
        .iter()
        .map(|(t, h)| format!("{t} ({})", h.says()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether every run of `session` has ended and every branch of it is
/// merged or dropped: only then is a session that ended wrapped up
/// (`session-ended` said, its locks released, its summary written).
pub(crate) fn settled(root: &Root, session: &str) -> bool {
    let live = root.runs.live.keys().any(|(s, _)| s == session);
    let open = root
        .runs
        .trees
        .iter()
        .any(|((s, _), h)| s == session && !h.settled());
    !live && !open
}

/// A session ended (`status`): whether its wrap-up waits for its runs and
/// branches (then remembered, and made due by [`wrapups_due`]). Only a
/// completed session waits: a failed one is wrapped up at once.
pub(crate) fn defer_wrap_up(root: &mut Root, session: &str, status: &str) -> bool {
    if status != "completed" || settled(root, session) {
        root.runs.ending.remove(session);
        return false;
    }
    root.runs
        .ending
        .insert(session.to_string(), status.to_string());
    true
}

/// The wrap-ups put off by [`defer_wrap_up`] whose sessions are settled
/// now (and still ended): due.
pub(crate) fn wrapups_due(root: &mut Root, id: RootId) -> Vec<Effect> {
    let ready: Vec<String> = root
        .runs
        .ending
        .keys()
        .filter(|s| settled(root, s))
        .cloned()
        .collect();
    let mut out = Vec::new();
    for session in ready {
        let Some(status) = root.runs.ending.remove(&session) else {
            continue;
        };
        // A session no longer ended (a task reopened) or gone is not
        // wrapped up: it ends again later, or never.
        if root
            .sessions
            .get(&session)
            .is_some_and(|c| c.ended().is_some())
        {
            out.push(Effect::WrapUp {
                root: id,
                session,
                status,
            });
        }
    }
    out
}

/// The shell carried out a branch's merge, hold or drop: recorded; a held
/// branch is said to the lead by what happened; dependents a merge (or a
/// drop) frees are dispatched at once, and a session it settles wrapped up.
pub(crate) fn finished(
    root: &mut Root,
    id: RootId,
    run: &RunKey,
    outcome: Finished,
    by_hand: bool,
) -> Vec<Effect> {
    let mut out = Vec::new();
    let state = match &outcome {
        Finished::NoTree => None,
        Finished::Merged => Some(Handover::Merged),
        Finished::Dropped => Some(Handover::Dropped),
        Finished::Held { summary, .. } => Some(Handover::Held(summary.clone())),
        Finished::Review(stat) => Some(Handover::Review(stat.to_string())),
        Finished::Rejected(_) => Some(Handover::Rejected),
    };
    let merged = state == Some(Handover::Merged);
    match state {
        Some(h) => {
            root.runs.trees.insert(run.clone(), h);
        }
        None => {
            root.runs.trees.remove(run);
        }
    }
    // Overlaps (core/runs/overlap.rs): a branch merged or dropped shares
    // nothing any more; a merge moves the session's branch, so the other
    // unmerged runs are looked at again for conflicts with it.
    if matches!(
        outcome,
        Finished::Merged | Finished::Dropped | Finished::Rejected(_) | Finished::NoTree
    ) {
        out.extend(super::overlap::settled(root, id, run));
    }
    if merged {
        out.extend(super::overlap::after_merge(root, id, &run.0));
    }
    let said = match &outcome {
        Finished::NoTree | Finished::Review(_) | Finished::Rejected(_) => None,
        Finished::Merged => Some(("merged", String::new())),
        Finished::Dropped => Some(("dropped", String::new())),
        Finished::Held { summary, .. } => Some(("held", summary.clone())),
    };
    // The review gate's outcomes (docs/review.md): said as `review`.
    match &outcome {
        Finished::Review(stat) => out.extend(super::review::waiting(root, id, run, *stat)),
        Finished::Rejected(comment) => out.extend(super::review::rejected(root, id, run, comment)),
        _ => {}
    }
    if let Some((state, detail)) = said {
        let dir = crate::runners::run_dir(&root.session_dir(&run.0), &run.1);
        out.push(Effect::Emit {
            root: id,
            session: Some(run.0.clone()),
            path: Some(dir),
            kind: EventKind::WorktreeMerge {
                task_id: run.1.clone(),
                state: state.to_string(),
                detail,
            },
        });
    }
    if let Finished::Held { summary, reason } = &outcome {
        let (session, task) = run;
        let text = format!(
            "{reason}\n\nUntil it is merged or dropped, the tasks that require {task} wait and session {session} does not complete. Merge it again once fixed (judged again): `squadctl merge {task} --session {session}`; give it up (the branch is kept): `squadctl merge {task} --session {session} --drop`."
        );
        out.push(tell_lead_about(
            id,
            session,
            task,
            format!("held at merge: {summary}"),
            text,
        ));
    }
    if by_hand {
        out.push(Effect::RunReply {
            root: id,
            reply: Ok((run.0.clone(), 0)),
        });
    }
    out.push(Effect::SetTimer {
        timer: Timer::Runs,
        after: Duration::ZERO,
    });
    out.extend(wrapups_due(root, id));
    out
}

/// The one branch of `task` (in `session`, or in the one session where
/// one is) whose hand-over state passes `state`, with its run's record:
/// `Err(None)` when there is none, `Err(Some(Ambiguous))` when several
/// sessions have one. Shared by `squadctl merge` and `squadctl review`.
pub(super) fn waiting(
    root: &Root,
    session: Option<&str>,
    task: &str,
    state: impl Fn(&Handover) -> bool,
) -> Result<(RunKey, crate::runners::RunRecord), Option<super::RunError>> {
    let found: Vec<&RunKey> = root
        .runs
        .trees
        .iter()
        .filter(|((s, t), h)| t == task && session.is_none_or(|n| n == s) && state(h))
        .map(|(k, _)| k)
        .collect();
    match found.as_slice() {
        [one] => root
            .runs
            .past
            .get(*one)
            .map(|rec| ((*one).clone(), rec.clone()))
            .ok_or(None),
        [] => Err(None),
        _ => Err(Some(super::RunError::Ambiguous {
            task: task.to_string(),
            sessions: found
                .iter()
                .map(|k| k.0.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })),
    }
}

/// `squadctl merge TASK [--drop]`: a held branch merged again (judged
/// again at merge time) or dropped; refused for a task whose branch is not
/// held (nor merging).
pub(crate) fn by_hand(
    root: &mut Root,
    id: RootId,
    session: Option<&str>,
    task: &str,
    drop: bool,
    _now: Now,
) -> Vec<Effect> {
    let refused = |e: super::RunError| {
        vec![Effect::RunReply {
            root: id,
            reply: Err(e),
        }]
    };
    let (key, rec) = match waiting(root, session, task, |h| matches!(h, Handover::Held(_))) {
        Ok(found) => found,
        Err(None) => return refused(super::RunError::NotHeld(task.to_string())),
        Err(Some(e)) => return refused(e),
    };
    let dir = crate::runners::run_dir(&root.session_dir(&key.0), &key.1);
    root.runs.trees.insert(key, Handover::Merging);
    let rec = Box::new(rec);
    vec![if drop {
        Effect::DropWorktree {
            root: id,
            dir,
            rec,
            rejected: None,
        }
    } else {
        Effect::FinishWorktree {
            root: id,
            dir,
            rec,
            by_hand: true,
            review: false,
        }
    }]
}
