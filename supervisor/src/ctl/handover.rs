//! Hand-over on the branch as the command line shows it (docs/worktrees.md,
//! "Hand-over"): a task whose prerequisite's worktree branch is not merged
//! yet waits, whatever the files say (`task show`, `task list`, `status`).

use crate::derive::{SessionView, TaskView};
use crate::index::SessionIndex;
use std::path::Path;

/// The prerequisites of `t` whose work is in a worktree branch not merged
/// yet (docs/worktrees.md, "Hand-over"): `t` waits for their merge even
/// though they are `completed`. Each as "task_a (its merge)" or "task_a
/// (held at merge: …)".
/// [`merge_waits`] of every task that waits for a merge, by task id.
pub(crate) fn merge_map<'a>(
    root: &Path,
    s: &SessionIndex,
    view: &'a SessionView,
) -> std::collections::BTreeMap<&'a str, Vec<String>> {
    view.tasks
        .iter()
        .map(|t| (t.task_id.as_str(), merge_waits(root, s, view, t)))
        .filter(|(_, w)| !w.is_empty())
        .collect()
}

/// A task's state word (`word`, as `task list` says it), `waiting` for a
/// task ready by the files that waits for a prerequisite's merge.
pub(crate) fn word(t: &TaskView, merges: Option<&Vec<String>>, word: &'static str) -> &'static str {
    if t.ready && merges.is_some_and(|m| !m.is_empty()) {
        "waiting"
    } else {
        word
    }
}

pub(crate) fn merge_waits(
    root: &Path,
    s: &SessionIndex,
    view: &SessionView,
    t: &TaskView,
) -> Vec<String> {
    use crate::worktree::TreeState;
    t.prerequisites
        .iter()
        .filter(|p| !t.unmet.contains(p))
        .filter(|p| {
            view.tasks.iter().any(|o| {
                &o.task_id == *p && o.state == squad_protocol::model::TaskStatus::Completed
            })
        })
        .filter_map(|p| {
            let dir = crate::runners::run_dir(&s.dir, p);
            match crate::worktree::recorded_state(root, &dir, &s.name, p)? {
                (TreeState::Active, _) => Some(format!("{p} (its merge)")),
                (TreeState::Held, why) => Some(format!(
                    "{p} (held at merge: {})",
                    why.as_deref().unwrap_or("see `squadctl runs --all`")
                )),
                (TreeState::Review, stat) => Some(format!(
                    "{p} (waits for review: {})",
                    stat.as_deref().unwrap_or("see `squadctl review`")
                )),
                (TreeState::Merged | TreeState::Dropped | TreeState::Rejected, _) => None,
            }
        })
        .collect()
}

/// Worktree mode (docs/worktrees.md, "Hand-over"): a task whose
/// prerequisite's branch is not merged yet (its run completed, or it is
/// held) is not ready, whatever the files say; `needs attention` and `task
/// show` say why.
pub(crate) fn hold_back_ready(
    root: &Path,
    report: &mut crate::status::StatusReport,
    records: &[(std::path::PathBuf, crate::runners::RunRecord)],
    now: chrono::DateTime<chrono::Utc>,
) {
    use crate::worktree::TreeState;
    let mut unmerged: std::collections::BTreeMap<&str, (&Path, Vec<&str>)> = Default::default();
    for (dir, r) in records {
        let run_dir = crate::runners::run_dir(dir, &r.task);
        let waiting = match crate::worktree::recorded_state(root, &run_dir, &r.session, &r.task) {
            Some((TreeState::Held | TreeState::Review, _)) => true,
            Some((TreeState::Active, _)) => r.completed,
            _ => false,
        };
        if waiting {
            let entry = unmerged.entry(&r.session).or_insert((dir, Vec::new()));
            entry.1.push(&r.task);
        }
    }
    for s in report.roots.iter_mut().flat_map(|r| r.sessions.iter_mut()) {
        let Some((dir, tasks)) = unmerged.get(s.name.as_str()) else {
            continue;
        };
        if s.ready.is_empty() {
            continue;
        }
        let Ok(index) = crate::index::scan_session(dir) else {
            continue;
        };
        let view = crate::derive::derive_session(&index, &Default::default(), now);
        s.ready.retain(|t| {
            view.tasks
                .iter()
                .find(|v| &v.task_id == t)
                .is_none_or(|v| !v.prerequisites.iter().any(|p| tasks.contains(&p.as_str())))
        });
    }
}
