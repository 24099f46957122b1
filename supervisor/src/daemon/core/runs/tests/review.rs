//! The review gate's transitions (issue 44 item 3, docs/review.md): with
//! `runners.merge: review` a completed worktree run's branch waits for
//! the lead (running -> review), then approve (-> merging -> merged),
//! changes (-> a new run: working -> review again) or reject (-> the run
//! rejected, the session goes on); `merge: auto` is unchanged.

use super::*;
use crate::worktree::{Finished, Stat};

const ROOT_REVIEW: &str = "  worktree: true\n  merge: review\n";

/// A root whose session plans `task_1` (alpha) and `task_2` (bravo)
/// requiring it; `runners` as given.
fn review_root(runners: &str) -> Root {
    let mut r = root_with(0, runners);
    let text = "meta:\n  task_id: task_2\n  agent: bravo\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ndependencies:\n  requires: [task_1]\n  blocks: []\ninstruction: y\n";
    apply(&mut r, "role-plan-bravo-task_2.md", text);
    r
}

fn apply(r: &mut Root, name: &str, text: &str) {
    let dir = r.session_dir(SESSION);
    let kind = squad_protocol::FileKind::from_file_name(name).unwrap();
    let f = crate::index::index_bytes(&dir.join(name), kind, text.as_bytes());
    r.apply_file(SESSION, name, Some(f), t(0).wall).unwrap();
}

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

fn ask(r: &mut Root, action: &str, text: Option<&str>, at: Now) -> Vec<Effect> {
    let asked = super::super::Asked {
        action: action.into(),
        session: None,
        task: Some("task_1".into()),
        text: text.map(str::to_string),
    };
    step(r, Input::RunsAsked(asked), at)
}

fn refusal(effects: &[Effect]) -> String {
    match effects {
        [Effect::RunReply { reply: Err(e), .. }] => e.to_string(),
        other => panic!("not refused: {other:?}"),
    }
}

fn review_events(effects: &[Effect]) -> Vec<(String, String)> {
    pick(effects, |e| match e {
        Effect::Emit {
            kind: EventKind::Review { action, detail, .. },
            ..
        } => Some((action.clone(), detail.clone())),
        _ => None,
    })
}

const STAT: Stat = Stat {
    files: 2,
    added: 10,
    deleted: 3,
};

/// task_1 runs, completes and its run ends: the shell is asked to put
/// its branch up for review (`review: true`); its outcome comes back.
fn to_review(r: &mut Root) -> Vec<Effect> {
    dispatch_and_start(r, 42, t(0));
    completed(r);
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(r, Ended::default(), &facts, t(2));
    assert!(
        ended.iter().any(|e| matches!(
            e,
            Effect::FinishWorktree {
                review: true,
                by_hand: false,
                ..
            }
        )),
        "{ended:?}"
    );
    finished(r, Finished::Review(STAT), false, t(3))
}

#[test]
fn a_completed_run_waits_for_review_and_its_dependent_and_session_wait_too() {
    let mut r = review_root(ROOT_REVIEW);
    let waiting = to_review(&mut r);
    assert_eq!(
        review_events(&waiting),
        vec![("waiting".to_string(), "2 files, +10 \u{2212}3".to_string())]
    );
    let subjects = pick(&waiting, |e| match e {
        Effect::TellLead { subject, .. } => Some(subject.clone()),
        _ => None,
    });
    assert_eq!(
        subjects,
        vec!["review waiting: task_1 (2 files, +10 \u{2212}3)"]
    );
    let text = &told_lead(&waiting)[0];
    for command in [
        "review show task_1",
        "review approve task_1",
        "review changes task_1",
        "review reject task_1",
    ] {
        assert!(text.contains(command), "{text}");
    }
    // No merge is said; the dependent waits; `run` says why.
    assert!(
        !events(&waiting)
            .iter()
            .any(|e| matches!(e, EventKind::WorktreeMerge { .. }))
    );
    assert!(dispatched(&mut r, t(4)).is_empty());
    let asked = super::super::Asked {
        action: "run".into(),
        session: None,
        task: Some("task_2".into()),
        text: None,
    };
    let e = refusal(&step(&mut r, Input::RunsAsked(asked), t(4)));
    assert!(
        e.contains("task_1 (the lead's review of its branch (2 files"),
        "{e}"
    );
    // `merge` is for held branches, not for one waiting for review.
    assert!(refusal(&ask(&mut r, "merge", None, t(4))).contains("no branch held"));
}

#[test]
fn approve_merges_it_judged_again_and_then_the_dependent_runs() {
    let mut r = review_root(ROOT_REVIEW);
    to_review(&mut r);
    let approved = ask(&mut r, "approve", None, t(5));
    assert_eq!(
        review_events(&approved),
        vec![("approved".to_string(), String::new())]
    );
    assert!(
        approved.iter().any(|e| matches!(
            e,
            Effect::FinishWorktree {
                by_hand: true,
                review: false,
                ..
            }
        )),
        "{approved:?}"
    );
    // A second approval while the merge is under way is refused.
    assert!(refusal(&ask(&mut r, "approve", None, t(5))).contains("no branch waiting for review"));
    let merged = finished(&mut r, Finished::Merged, true, t(6));
    assert!(
        merged
            .iter()
            .any(|e| matches!(e, Effect::RunReply { reply: Ok(_), .. }))
    );
    assert_eq!(dispatched(&mut r, t(7)), vec!["task_2".to_string()]);
}

#[test]
fn changes_tell_the_agent_and_start_a_new_run_with_the_comment_then_it_waits_again() {
    let mut r = review_root(ROOT_REVIEW);
    to_review(&mut r);
    assert!(refusal(&ask(&mut r, "changes", Some("  "), t(5))).contains("-m TEXT"));
    let sent = ask(
        &mut r,
        "changes",
        Some("add a test for the empty list"),
        t(5),
    );
    assert_eq!(
        review_events(&sent),
        vec![(
            "changes".to_string(),
            "add a test for the empty list".to_string()
        )]
    );
    // The comment in alpha's inbox: a message file written to alpha.
    let to_alpha = pick(&sent, |e| match e {
        Effect::WriteLeadMessage { text, .. } if text.contains("to_agent: alpha") => {
            Some(text.clone())
        }
        _ => None,
    });
    assert_eq!(to_alpha.len(), 1, "{sent:?}");
    assert!(
        to_alpha[0].contains("add a test for the empty list"),
        "{}",
        to_alpha[0]
    );
    // A new run of the same task, in a worktree, the comment for its prompt.
    let specs = spawns(&sent);
    assert_eq!(specs.len(), 1, "{sent:?}");
    assert_eq!(specs[0].candidate.task, "task_1");
    assert!(specs[0].worktree && specs[0].by_hand);
    assert_eq!(
        specs[0].review.as_deref(),
        Some("add a test for the empty list")
    );
    assert_eq!(
        specs[0].candidate.attempts, 1,
        "counts on from the first run"
    );
    // Working again: a second request is refused, the dependent waits.
    assert!(refusal(&ask(&mut r, "changes", Some("more"), t(5))).contains("no branch waiting"));
    assert!(dispatched(&mut r, t(6)).is_empty());
    // The new run starts, completes and ends: up for review again.
    let rec = started_record(&specs[0], 43, t(6));
    step(
        &mut r,
        Input::RunSpawned {
            spec: Box::new(specs[0].clone()),
            rec: Box::new(rec),
            dir: run_dir(),
        },
        t(6),
    );
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(&mut r, Ended::default(), &facts, t(7));
    assert!(
        ended
            .iter()
            .any(|e| matches!(e, Effect::FinishWorktree { review: true, .. }))
    );
    let again = finished(&mut r, Finished::Review(STAT), false, t(8));
    assert_eq!(review_events(&again)[0].0, "waiting");
    assert!(dispatched(&mut r, t(8)).is_empty());
}

#[test]
fn reject_records_the_run_rejected_and_the_session_goes_on_without_it() {
    let mut r = review_root(ROOT_REVIEW);
    to_review(&mut r);
    let asked = ask(&mut r, "reject", Some("wrong approach"), t(5));
    assert!(
        asked.iter().any(|e| matches!(
            e,
            Effect::DropWorktree { rejected: Some(c), .. } if c == "wrong approach"
        )),
        "{asked:?}"
    );
    let rejected = finished(
        &mut r,
        Finished::Rejected("wrong approach".into()),
        true,
        t(6),
    );
    assert_eq!(
        review_events(&rejected),
        vec![("rejected".to_string(), "wrong approach".to_string())]
    );
    let recs = records(&rejected);
    assert_eq!(recs.len(), 1, "{rejected:?}");
    assert_eq!(recs[0].state, RunState::Rejected);
    assert!(!recs[0].completed && !recs[0].held);
    // Rejected is settled, as a drop: the dependent runs, not task_1.
    assert_eq!(dispatched(&mut r, t(7)), vec!["task_2".to_string()]);
}

#[test]
fn a_plan_asks_for_review_and_merge_auto_is_unchanged() {
    // merge: auto (the default): the run's end merges at once.
    let mut r = review_root("  worktree: true\n");
    dispatch_and_start(&mut r, 42, t(0));
    completed(&mut r);
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(&mut r, Ended::default(), &facts, t(2));
    assert!(
        ended
            .iter()
            .any(|e| matches!(e, Effect::FinishWorktree { review: false, .. }))
    );
    // The same, with the plan's `meta.merge: review`: up for review.
    let mut r = review_root("  worktree: true\n");
    let plan = "meta:\n  task_id: task_1\n  agent: alpha\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n  merge: review\ninstruction: x\n";
    apply(&mut r, "role-plan-alpha-task_1.md", plan);
    dispatch_and_start(&mut r, 42, t(0));
    completed(&mut r);
    let ended = end(&mut r, Ended::default(), &facts, t(2));
    assert!(
        ended
            .iter()
            .any(|e| matches!(e, Effect::FinishWorktree { review: true, .. }))
    );
}
