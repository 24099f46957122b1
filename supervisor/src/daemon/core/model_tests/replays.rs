//! The model test's regression replays: each operation sequence a random
//! run (or a soak, `MODEL_CASES=n`) once failed on, replayed through the
//! adapter and checked against the oracle after every step.

use super::*;

/// A message of `priority` with id `id` into session `session` of root
/// `root`, asking no reply and answering none.
fn message(root: usize, session: usize, id: u8, priority: usize) -> Op {
    Op::Message {
        root,
        session,
        id,
        priority,
        reply_to: None,
        respond_in: None,
    }
}

/// Another file reusing message id `id` there (see [`Op::Clash`]).
fn clash(root: usize, session: usize, id: u8, priority: usize) -> Op {
    Op::Clash {
        root,
        session,
        id,
        priority,
    }
}

/// Runs `ops` through the adapter, checking the core against the oracle
/// after each.
pub(super) fn replay(ops: Vec<Op>) {
    let mut w = World::new();
    w.check();
    for op in ops {
        w.apply(op);
        w.check();
    }
}

/// Found by the model test: a policy that escalates sooner left the
/// escalation timer where the old policy had put it (a medium message
/// escalated 25 minutes late), and a priority that did not escalate
/// before was never queued. `Input::PolicyRead` of a new policy re-queues and re-arms.
#[test]
fn a_policy_change_moves_the_escalation_timer() {
    replay(vec![
        Op::Plan {
            root: 0,
            session: 0,
            agent: 0,
            task: 0,
            requires: vec![],
            timeout: None,
        },
        message(0, 0, 1, 3),
        Op::Policy { root: 0, n: 1 },
        Op::Advance(6),
        Op::Advance(10),
        Op::Policy { root: 0, n: 0 },
        Op::Advance(30),
    ]);
}

/// Found by the model test: a question answered before its deadline,
/// whose reply was then withdrawn, was never reported overdue (a restart
/// would report it). The file read checks it (`core/files.rs`).
#[test]
fn a_reply_withdrawn_after_the_deadline_makes_the_question_overdue() {
    replay(vec![
        Op::Message {
            root: 1,
            session: 0,
            id: 1,
            priority: 0,
            reply_to: None,
            respond_in: Some(1),
        },
        Op::Message {
            root: 1,
            session: 0,
            id: 0,
            priority: 0,
            reply_to: Some(1),
            respond_in: None,
        },
        Op::Advance(1),
        message(1, 0, 0, 0),
    ]);
}

/// Found by the model test (CI, 3ee6794): a pool made smaller while two
/// runs ran held more runs than its new size; that is the rule (a smaller
/// pool stops no run), the oracle's check was wrong. What must hold: no
/// run starts until the pool has room again.
#[test]
fn a_pool_made_smaller_stops_no_run_and_starts_none_until_it_has_room() {
    replay(vec![
        Op::Config { root: 0, max: 2 },
        Op::Start {
            root: 0,
            session: 0,
            agent: 2,
            task: 0,
            timeout: 1,
        },
        Op::Start {
            root: 0,
            session: 0,
            agent: 0,
            task: 1,
            timeout: 1,
        },
        Op::Config { root: 0, max: 1 },
        Op::Start {
            root: 0,
            session: 1,
            agent: 1,
            task: 2,
            timeout: 1,
        },
    ]);
}

/// A run stopped at its time limit is retried after the backoff, and
/// held once its retries are used up, the lead told each time; a run that
/// ignores SIGTERM is killed a grace later. Checked against the oracle
/// after every step, and the records at the end.
#[test]
fn runs_are_dispatched_stopped_at_their_limit_retried_then_held() {
    let mut w = World::new();
    let ops = vec![
        Op::Config { root: 0, max: 2 },
        // task_2 (alice, 5 minutes): obeys SIGTERM; task_1 (bob): ignores it.
        Op::Plan {
            root: 0,
            session: 0,
            agent: 0,
            task: 2,
            requires: vec![],
            timeout: Some(5),
        },
        Op::Plan {
            root: 0,
            session: 0,
            agent: 1,
            task: 1,
            requires: vec![],
            timeout: Some(5),
        },
        Op::Advance(6),
        Op::Advance(1),
        Op::Advance(1),
        Op::Exit {
            root: 0,
            session: 0,
            task: 2,
            ok: false,
        },
        // The second retry comes two minutes later.
        Op::Advance(1),
        Op::Advance(1),
        Op::Exit {
            root: 0,
            session: 0,
            task: 2,
            ok: false,
        },
    ];
    for op in ops {
        w.apply(op);
        w.check();
    }
    let records = &w.snaps[0].records;
    let rec = |t: &str| &records[&(SESSIONS[0].to_string(), t.to_string())];
    let (two, one) = (rec("task_2"), rec("task_1"));
    assert_eq!((two.attempt, two.held), (3, true), "{two:?}");
    assert_eq!(two.state, crate::runners::RunState::Exited);
    assert_eq!(one.attempt, 2, "{one:?}");
    let killed = w
        .procs
        .values()
        .filter(|p| p.ended.is_some_and(|e| e.signal == Some(9)));
    assert_eq!(killed.count(), 1, "the stubborn run killed after the grace");
    let told = w.snaps[0].files[SESSIONS[0]]
        .keys()
        .filter(|n| n.starts_with("role-comm-squadd-to-lead-"))
        .count();
    assert_eq!(told, 4, "the lead told of each run that failed");
}

/// Found by the model test: a run stopped by hand (`squadctl stop`) whose
/// process ignored SIGTERM was still stopping when squadd restarted; the
/// new squadd took its record for an ended run, so the process ran on
/// unsupervised (never SIGKILLed) and its task started a second run beside
/// it ("started in a full pool"). Now it is re-adopted as stopping and
/// killed a grace later.
#[test]
fn a_run_still_stopping_when_squadd_restarts_is_readopted_and_killed_after_the_grace() {
    replay(vec![
        Op::Start {
            root: 1,
            session: 0,
            agent: 0,
            task: 3,
            timeout: 1,
        },
        Op::Stop {
            root: 1,
            session: None,
            task: 3,
        },
        Op::Restart {
            root: 1,
            kill: false,
        },
        Op::Advance(1),
        Op::Advance(1),
    ]);
}

/// Found by the model test: a message refused for reusing an id stayed
/// undelivered for ever once the file that kept the id went bad (garbage
/// here; removed or rewritten likewise), while a restart delivered it. The
/// file keeping the id now is routed when the old keeper loses it
/// (`core/files.rs`, `apply`).
#[test]
fn a_message_refused_for_a_reused_id_is_delivered_once_the_keeper_loses_the_id() {
    replay(vec![
        message(1, 1, 0, 0),
        clash(1, 1, 0, 0),
        Op::Garbage {
            root: 1,
            session: 1,
            n: 283500337866430632,
        },
    ]);
}

/// Found by the model test: a message delivered before another file
/// reused its id (that file, first by name, refused) was rewritten under a
/// new priority; the refused file then kept the id by the rule (as a
/// restart found), but the running squadd never routed it again.
#[test]
fn a_delivered_keeper_rewritten_lets_the_refused_file_keep_the_id() {
    replay(vec![
        message(0, 0, 5, 0),
        clash(0, 0, 5, 0),
        message(0, 0, 5, 1),
    ]);
}

/// Found by the model test in CI (the oracle was wrong): a message file
/// invalid for another reason (its reply is due before it was sent) still
/// keeps its id, first by name, as the `duplicate-message-id` finding says:
/// the valid file reusing it is refused, not delivered.
#[test]
fn a_critical_message_due_at_once_and_a_clash_on_its_id() {
    replay(vec![
        Op::Message {
            root: 1,
            session: 1,
            id: 6,
            priority: 0,
            reply_to: None,
            respond_in: Some(0),
        },
        clash(1, 1, 6, 0),
    ]);
}

/// Found by a soak of the model test: a task in progress whose plan named
/// one unmet prerequisite, then another, was reported violating twice (the
/// event fired on every different list of unmet prerequisites), while the
/// persisted record, and so a restarted squadd, kept the first: reported
/// once ever per task now, like an overdue task.
#[test]
fn a_violation_is_reported_once_though_its_unmet_prerequisites_change() {
    replay(vec![
        Op::Progress {
            root: 1,
            session: 0,
            agent: 2,
            task: 2,
            status: 1,
            minute: 0,
        },
        Op::Plan {
            root: 1,
            session: 0,
            agent: 2,
            task: 2,
            requires: vec![0],
            timeout: None,
        },
        Op::Plan {
            root: 1,
            session: 0,
            agent: 2,
            task: 2,
            requires: vec![1],
            timeout: None,
        },
    ]);
}

/// Found by a soak of the model test: a message waiting for its busy
/// recipient, then another file reusing its id whose name sorts first (so
/// it keeps the id): the waiting one was delivered later anyway. The file
/// that kept the id is routed again when another takes it over, and a
/// refused file's waiting deliveries are withdrawn.
#[test]
fn a_waiting_message_whose_id_a_file_sorting_first_reuses() {
    replay(vec![
        Op::Start {
            root: 0,
            session: 0,
            agent: 1,
            task: 0,
            timeout: 1,
        },
        message(0, 0, 5, 3),
        clash(0, 0, 5, 0),
    ]);
}

/// Found by a soak (the oracle's, not the core's): a rename is a removal
/// batch, then the same bytes under another name. Here the plan of task_3
/// without a timeout is renamed over the one with a 1-minute timeout, past
/// its deadline: between the two batches the timed plan is task_3's only
/// one, overdue, and the core reports it; the oracle, which kept facts only
/// at the end of an operation, never saw it overdue.
#[test]
fn a_task_overdue_only_between_the_two_batches_of_a_rename() {
    replay(vec![
        Op::Plan {
            root: 1,
            session: 1,
            agent: 0,
            task: 3,
            requires: vec![],
            timeout: None,
        },
        Op::Progress {
            root: 1,
            session: 1,
            agent: 0,
            task: 0,
            status: 0,
            minute: 0,
        },
        Op::Start {
            root: 1,
            session: 1,
            agent: 2,
            task: 3,
            timeout: 1,
        },
        Op::Progress {
            root: 1,
            session: 1,
            agent: 0,
            task: 1,
            status: 0,
            minute: 0,
        },
        Op::Advance(1),
        Op::Rename {
            root: 1,
            session: 1,
            n: 8685052675687440252,
            agent: 2,
        },
    ]);
}
