//! Hand-over on the branch (issue 44 item 1): in worktree mode a task's
//! dependents start, and its session ends, when its branch is merged, not
//! when its agent says `completed`; a held branch keeps them waiting and
//! the lead is told what happened; a dropped one lets them go on.

use super::*;
use crate::worktree::{Finished, TreeState};

/// A root in worktree mode whose session plans `task_1` (alpha) and, when
/// `dependent`, `task_2` (bravo) requiring it.
fn tree_root(dependent: bool) -> Root {
    let mut r = root_with(0, "  worktree: true\n");
    if dependent {
        let text = "meta:\n  task_id: task_2\n  agent: bravo\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ndependencies:\n  requires: [task_1]\n  blocks: []\ninstruction: y\n";
        apply(&mut r, "role-plan-bravo-task_2.md", text);
    }
    r
}

fn apply(r: &mut Root, name: &str, text: &str) {
    let dir = r.session_dir(SESSION);
    let kind = squad_protocol::FileKind::from_file_name(name).unwrap();
    let f = crate::index::index_bytes(&dir.join(name), kind, text.as_bytes());
    r.apply_file(SESSION, name, Some(f), t(0).wall).unwrap();
}

/// alpha reports task_1 completed (the index sees it at once).
fn completed(r: &mut Root) {
    let text = "meta:\n  task_id: task_1\n  agent: alpha\n  updated_at: 2024-01-15T10:00:05Z\nstatus: completed\n";
    apply(r, "role-comm-alpha-task_1.md", text);
}

fn dispatched(r: &mut Root, at: Now) -> Vec<String> {
    spawns(&step(r, Input::DispatchDue { cluster: None }, at))
        .into_iter()
        .map(|s| s.candidate.task)
        .collect()
}

fn finished(r: &mut Root, outcome: Finished, by_hand: bool, at: Now) -> Vec<Effect> {
    let input = Input::WorktreeFinished {
        run: key(),
        outcome,
        by_hand,
    };
    step(r, input, at)
}

fn held(summary: &str) -> Finished {
    Finished::Held {
        summary: summary.into(),
        reason: format!("squad/task_1 of task_1 is held, not merged: {summary}"),
    }
}

fn subjects(effects: &[Effect]) -> Vec<String> {
    pick(effects, |e| match e {
        Effect::TellLead { subject, .. } => Some(subject.clone()),
        _ => None,
    })
}

fn wrap_ups(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|e| matches!(e, Effect::WrapUp { .. }))
        .count()
}

fn wrap_up_due(r: &mut Root, at: Now) -> Vec<Effect> {
    let input = Input::WrapUpDue {
        session: SESSION.into(),
        status: "completed".into(),
        why: crate::daemon::core::wrapup::WrapUpWhy::Ended,
    };
    step(r, input, at)
}

#[test]
fn a_dependent_starts_when_its_prerequisite_is_merged_not_when_it_says_completed() {
    let mut r = tree_root(true);
    let spec = dispatch_and_start(&mut r, 42, t(0));
    assert!(spec.worktree);
    completed(&mut r);
    // Completed while its run still works: task_2 is ready by the files,
    // yet not started (the branch is not on the session's branch).
    assert!(dispatched(&mut r, t(1)).is_empty());
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(&mut r, Ended::default(), &facts, t(2));
    assert!(
        ended
            .iter()
            .any(|e| matches!(e, Effect::FinishWorktree { by_hand: false, .. }))
    );
    // The run is gone and the merge is under way: still waiting.
    assert!(dispatched(&mut r, t(2)).is_empty());
    let merged = finished(&mut r, Finished::Merged, false, t(3));
    assert!(merged.contains(&Effect::SetTimer {
        timer: Timer::Runs,
        after: Duration::ZERO,
    }));
    assert!(events(&merged).contains(&EventKind::WorktreeMerge {
        task_id: "task_1".into(),
        state: "merged".into(),
        detail: String::new(),
    }));
    assert!(told_lead(&merged).is_empty(), "{merged:?}");
    assert_eq!(dispatched(&mut r, t(3)), vec!["task_2".to_string()]);
}

#[test]
fn a_held_branch_keeps_its_dependents_waiting_until_the_lead_drops_it() {
    let mut r = tree_root(true);
    dispatch_and_start(&mut r, 42, t(0));
    completed(&mut r);
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    end(&mut r, Ended::default(), &facts, t(2));
    let told = finished(
        &mut r,
        held("1 file outside the task's boundaries"),
        false,
        t(3),
    );
    // The lead is told what happened, not that a run failed.
    assert_eq!(
        subjects(&told),
        vec!["held at merge: 1 file outside the task's boundaries".to_string()]
    );
    let text = &told_lead(&told)[0];
    assert!(text.contains("squadctl merge task_1"), "{text}");
    assert!(dispatched(&mut r, t(4)).is_empty());
    // `squadctl run task_2` is refused, saying why.
    let asked = super::super::Asked {
        action: "run".into(),
        session: None,
        task: Some("task_2".into()),
        text: None,
    };
    let refused = step(&mut r, Input::RunsAsked(asked), t(4));
    let [Effect::RunReply { reply: Err(e), .. }] = refused.as_slice() else {
        panic!("{refused:?}");
    };
    assert!(e.to_string().contains("held at merge"), "{e}");
    // The lead drops it: the branch is given up and task_2 goes on.
    let asked = super::super::Asked {
        action: "drop".into(),
        session: None,
        task: Some("task_1".into()),
        text: None,
    };
    let drop = step(&mut r, Input::RunsAsked(asked), t(5));
    assert!(
        matches!(drop.as_slice(), [Effect::DropWorktree { .. }]),
        "{drop:?}"
    );
    let dropped = finished(&mut r, Finished::Dropped, true, t(5));
    assert!(
        dropped
            .iter()
            .any(|e| matches!(e, Effect::RunReply { reply: Ok(_), .. }))
    );
    assert_eq!(dispatched(&mut r, t(6)), vec!["task_2".to_string()]);
}

#[test]
fn merge_by_hand_is_refused_for_a_branch_that_is_not_held() {
    let mut r = tree_root(false);
    for action in ["merge", "drop"] {
        let asked = super::super::Asked {
            action: action.into(),
            session: None,
            task: Some("task_1".into()),
            text: None,
        };
        let refused = step(&mut r, Input::RunsAsked(asked), t(1));
        let [Effect::RunReply { reply: Err(e), .. }] = refused.as_slice() else {
            panic!("{refused:?}");
        };
        assert!(e.to_string().contains("no branch held"), "{e}");
    }
}

#[test]
fn a_session_ends_only_after_its_last_run_ended_and_its_branch_merged() {
    let mut r = tree_root(false);
    dispatch_and_start(&mut r, 42, t(0));
    completed(&mut r);
    // Every task completed: the wrap-up (and `session-ended`) waits.
    assert!(wrap_up_due(&mut r, t(1)).is_empty());
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(&mut r, Ended::default(), &facts, t(2));
    assert_eq!(wrap_ups(&ended), 0, "the merge is not done: {ended:?}");
    // Held: still no end.
    let told = finished(&mut r, held("the merge into main failed"), false, t(3));
    assert_eq!(wrap_ups(&told), 0, "{told:?}");
    // Merged again by the lead (judged again): the session ends now.
    let asked = super::super::Asked {
        action: "merge".into(),
        session: Some(SESSION.into()),
        task: Some("task_1".into()),
        text: None,
    };
    let again = step(&mut r, Input::RunsAsked(asked), t(4));
    assert!(
        matches!(
            again.as_slice(),
            [Effect::FinishWorktree { by_hand: true, .. }]
        ),
        "{again:?}"
    );
    let merged = finished(&mut r, Finished::Merged, true, t(5));
    assert_eq!(wrap_ups(&merged), 1, "{merged:?}");
    // Said once.
    assert_eq!(
        wrap_ups(&finished(&mut r, Finished::Merged, false, t(6))),
        0
    );
}

#[test]
fn a_session_without_worktrees_ends_when_its_last_run_ended() {
    let mut r = root(0);
    dispatch_and_start(&mut r, 42, t(0));
    completed(&mut r);
    assert!(wrap_up_due(&mut r, t(1)).is_empty(), "its run is live");
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(&mut r, Ended::default(), &facts, t(2));
    assert_eq!(wrap_ups(&ended), 1, "{ended:?}");
    // The shell finds no worktree: nothing changes, nothing is said.
    let none = finished(&mut r, Finished::NoTree, false, t(3));
    assert!(events(&none).is_empty() && told_lead(&none).is_empty());
}

/// Facts of a restart: the run's worktree recorded `active`.
struct Restarted(Facts);

impl RunFacts for Restarted {
    fn completed_in_file(&self, d: &Path, r: &RunRecord) -> bool {
        self.0.completed_in_file(d, r)
    }
    fn last_write(&self, d: &Path, a: &str) -> Option<DateTime<Utc>> {
        self.0.last_write(d, a)
    }
    fn tree_state(&self, _: &Path, _: &RunRecord) -> Option<(TreeState, Option<String>)> {
        Some((TreeState::Active, None))
    }
}

#[test]
fn a_completed_run_never_merged_before_a_restart_is_merged_then_and_its_dependents_wait() {
    let mut r = tree_root(true);
    completed(&mut r);
    let spec = RunSpec {
        candidate: squad_policies::runners::Candidate {
            session: SESSION.into(),
            task: "task_1".into(),
            agent: "alpha".into(),
            priority: squad_protocol::model::Priority::High,
            attempts: 0,
            retry_at: None,
            held: false,
        },
        session_dir: r.session_dir(SESSION),
        plan: r.sessions[SESSION].index().full_plan("task_1").unwrap(),
        runner: r.policy.runners.runner_for("alpha").cloned().unwrap(),
        worktree: true,
        model: None,
        mcp: Vec::new(),
        default_timeout: Duration::from_secs(60),
        by_hand: false,
        setup: Vec::new(),
        setup_timeout: Duration::from_secs(600),
        review: None,
        resume: None,
    };
    let mut rec = started_record(&spec, 42, t(0));
    rec.state = RunState::Exited;
    rec.completed = true;
    let facts = Restarted(Facts::default());
    let session_dir = r.session_dir(SESSION);
    let found = step(
        &mut r,
        Input::RunsFound {
            records: vec![FoundRun {
                session_dir,
                rec,
                found: None,
                alive: false,
            }],
            facts: &facts,
        },
        t(5),
    );
    assert!(
        found
            .iter()
            .any(|e| matches!(e, Effect::FinishWorktree { .. })),
        "{found:?}"
    );
    assert!(dispatched(&mut r, t(5)).is_empty());
    finished(&mut r, Finished::Merged, false, t(6));
    assert_eq!(dispatched(&mut r, t(6)), vec!["task_2".to_string()]);
}
