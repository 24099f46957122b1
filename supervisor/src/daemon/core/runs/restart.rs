//! After a restart: the run records read, each re-adopted, lost or
//! dispatched again, and each worktree run's branch as recorded (a
//! completed run never merged is merged then: docs/worktrees.md).

use super::{
    FoundRun, RunFacts, completed, contain, decide, emit, handover, record, started, tell_lead,
    untrusted,
};
use crate::daemon::core::timer::Timer;
use crate::daemon::core::{Effect, Now, Root, RootId};
use crate::events::EventKind;
use crate::runners::{RunRecord, RunState, Signal};
use std::path::Path;
use std::time::Duration;

/// After a restart, the records of the root's runs: those recorded as
/// running are re-adopted when their process is alive (same pid, same
/// start time, its environment naming the run), re-dispatched when no
/// process was ever started, else reported lost and held for a human.
/// Nothing is started twice.
pub(crate) fn found(
    root: &mut Root,
    id: RootId,
    records: Vec<FoundRun>,
    facts: &dyn RunFacts,
    now: Now,
) -> Vec<Effect> {
    let mut out = Vec::new();
    for FoundRun {
        session_dir,
        mut rec,
        found,
        alive,
    } in records
    {
        let key = (rec.session.clone(), rec.task.clone());
        let dir = crate::runners::run_dir(&session_dir, &rec.task);
        if let Some((state, summary)) = facts.tree_state(&session_dir, &rec) {
            let done = rec.completed && rec.state != RunState::Running;
            let h = handover::Handover::from_record(state, summary, done);
            if h == handover::Handover::Merging {
                // Completed, never merged (squadd stopped in between).
                out.push(Effect::FinishWorktree {
                    root: id,
                    dir: dir.clone(),
                    rec: Box::new(rec.clone()),
                    by_hand: false,
                    review: super::review::wanted(root, &key, &rec.agent),
                });
            }
            root.runs.trees.insert(key.clone(), h);
        }
        // A run stopped by hand and not ended yet is still in progress:
        // its process is looked for like a running one's (the model test
        // found it otherwise left unsupervised, its task started again).
        let stopping = rec.state == RunState::Stopped && rec.exit.is_none();
        if rec.state != RunState::Running && !stopping {
            root.runs.past.insert(key, rec);
            continue;
        }
        if rec.pid == 0
            && let Some((pid, start)) = found
        {
            // Spawned, but squadd was killed before its pid was recorded.
            rec.pid = pid;
            rec.process_start = start;
            out.push(record(&dir, &rec));
        }
        let found = if alive {
            decide::Found::Alive
        } else if rec.pid == 0 {
            decide::Found::NeverStarted
        } else {
            decide::Found::Gone
        };
        let done = !alive && completed(root, facts, &session_dir, &rec);
        match decide::restarted(rec, found, done, now.wall) {
            decide::Restart::Adopt(rec) => {
                out.push(emit(
                    id,
                    &rec.session,
                    &dir,
                    EventKind::RunAdopted {
                        task_id: rec.task.clone(),
                        agent: rec.agent.clone(),
                        pid: rec.pid,
                    },
                ));
                out.push(Effect::AdoptRun {
                    root: id,
                    rec: Box::new(rec.clone()),
                    dir: dir.clone(),
                    log_max: root.policy.runners.log_max_bytes,
                });
                let base = rec.usage.clone();
                started(&mut root.runs, rec, dir, session_dir);
                if let Some(live) = root.runs.live.get_mut(&key) {
                    live.usage_base = base;
                }
                // SIGTERM went before the restart, at a time not recorded:
                // the grace before SIGKILL counts from the adoption.
                if stopping && let Some(live) = root.runs.live.get_mut(&key) {
                    live.watch.term_at = Some(now.wall);
                }
            }
            decide::Restart::Lost {
                rec,
                tell_lead: text,
            } => {
                // Its leader is gone: what it left behind ends now, found
                // by its environment only (run.json is writable by agents:
                // its pid must not aim squadd at a group).
                out.push(contain(id, &key, &untrusted(&rec), Signal::Kill, false));
                out.push(record(&dir, &rec));
                out.push(lost_event(id, &dir, &rec, rec.pid));
                if let Some(text) = text {
                    out.push(tell_lead(id, &rec, text, None));
                }
                root.runs.past.insert(key, rec);
            }
            decide::Restart::Redispatch(rec) => {
                out.push(contain(id, &key, &untrusted(&rec), Signal::Kill, false));
                out.push(record(&dir, &rec));
                out.push(lost_event(id, &dir, &rec, 0));
                root.runs.past.insert(key, rec);
            }
        }
    }
    out.push(Effect::SetTimer {
        timer: Timer::Runs,
        after: Duration::ZERO,
    });
    out
}

fn lost_event(id: RootId, dir: &Path, rec: &RunRecord, pid: u32) -> Effect {
    emit(
        id,
        &rec.session,
        dir,
        EventKind::RunLost {
            task_id: rec.task.clone(),
            agent: rec.agent.clone(),
            pid,
        },
    )
}
