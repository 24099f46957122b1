//! Unit tests of the decisions issue 22's last review found still in the
//! shell (`core/upkeep.rs`): the status re-reads under their locks, the
//! decisions inbox's merge and retry, the memory upkeep after retention,
//! what is owed at shutdown and the order of a batch's due timers; and the
//! policy's reload (`core/outputs.rs`). Each through [`Core::step`] (or
//! the timer it fires), with the effects and their order asserted.

use super::batch::{Batch, Fired, REMOVAL_DELAY};
use super::outputs::{RetentionRun, StatusLock};
use super::tests::{id, now, root};
use super::timer::{self, Timer};
use super::upkeep::{
    DueTimers, LockTaken, MEMORY_LOCK_RETRY, MemoryMerge, STATUS_LINE_DELAY, TRIM_AFTER_PATHS,
    batch_timers, due_timers,
};
use super::{Core, Effect, Input, Now, Root};
use crate::events::EventKind;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

fn step(r: &mut Root, input: Input<'_>, at: Now) -> Vec<Effect> {
    Core::new(id(0), r).step(input, at)
}

fn taken(session: &str, lock: StatusLock, callers: bool) -> LockTaken {
    LockTaken {
        session: session.into(),
        lock,
        callers,
    }
}

/// Regression (issue 22): `writes.rs` decided itself to re-read a status
/// file only when the lock was not busy.
#[test]
fn status_files_are_reread_under_the_locks_squadd_took_then_all_looked_at() {
    let mut r = root();
    let input = Input::StatusLocksTaken {
        sessions: vec![
            taken("a", StatusLock::Held, false),
            taken("b", StatusLock::Busy, false),
            taken("c", StatusLock::Held, true),
            taken("d", StatusLock::Unavailable, false),
        ],
    };
    let reread = |s: &str| Effect::RereadStatus {
        root: id(0),
        session: s.into(),
    };
    assert_eq!(
        step(&mut r, input, now(0)),
        vec![
            // Not `b`: a busy lock protects no read; not `c`: the edit
            // holding it read the file itself.
            reread("a"),
            reread("d"),
            Effect::LookAtStatuses {
                root: id(0),
                sessions: vec![
                    ("a".into(), StatusLock::Held),
                    ("b".into(), StatusLock::Busy),
                    ("c".into(), StatusLock::Held),
                    ("d".into(), StatusLock::Unavailable),
                ],
            },
        ]
    );
}

/// Regression (issue 22): `upkeep.rs` checked the policy and `shell.rs`
/// armed the retry timer.
#[test]
fn the_inbox_is_merged_only_while_the_policy_merges_and_retried_while_its_lock_is_busy() {
    let mut r = root();
    let fire =
        |r: &mut Root| timer::fire(Timer::MemoryInbox(id(0)), Some(r), &BTreeSet::new(), now(0));
    // Armed while the policy merged; the policy changed since.
    r.policy.memory.merge = false;
    assert!(fire(&mut r).is_empty());
    r.policy.memory.merge = true;
    assert_eq!(fire(&mut r), vec![Effect::MergeMemoryInbox(id(0))]);

    let busy = Input::MemoryInboxMerged(MemoryMerge::LockBusy);
    assert_eq!(
        step(&mut r, busy, now(0)),
        vec![Effect::SetTimer {
            timer: Timer::MemoryInbox(id(0)),
            after: MEMORY_LOCK_RETRY,
        }]
    );
    let done = Input::MemoryInboxMerged(MemoryMerge::Done);
    assert!(step(&mut r, done, now(0)).is_empty());
}

/// Regression (issue 22): `upkeep.rs` decided after each retention run
/// whether to merge and archive team memory.
#[test]
fn team_memory_upkeep_follows_a_retention_run_that_ran_with_the_parts_the_policy_enables() {
    let mut r = root();
    let caused = || {
        RetentionRun::Ran(vec![(
            None,
            None,
            EventKind::RetentionFailed { error: "x".into() },
        )])
    };
    let upkeep = |effects: &[Effect]| {
        effects
            .iter()
            .filter(|e| matches!(e, Effect::MemoryUpkeep { .. }))
            .count()
    };
    // Off by default: nothing.
    let effects = step(&mut r, Input::RetentionRan(caused()), now(0));
    assert_eq!(upkeep(&effects), 0, "{effects:?}");

    r.policy.memory.merge = true;
    let effects = step(&mut r, Input::RetentionRan(caused()), now(0));
    let [
        Effect::Emit { .. },
        Effect::MemoryUpkeep { root, memory },
        Effect::SetTimerAt { .. } | Effect::CancelTimer(_),
    ] = &effects[..]
    else {
        panic!("events, then the upkeep, then the schedule: {effects:?}");
    };
    assert_eq!((*root, *memory), (id(0), r.policy.memory));

    r.policy.memory.merge = false;
    r.policy.memory.archive = Some(squad_policies::memory::ArchiveRule {
        older_than: Duration::from_secs(86_400),
        max_size: None,
    });
    let effects = step(&mut r, Input::RetentionRan(caused()), now(0));
    assert_eq!(upkeep(&effects), 1, "archive alone: {effects:?}");

    // The gc lock was not taken: nothing of retention ran, nor the upkeep.
    let effects = step(&mut r, Input::RetentionRan(RetentionRun::LockBusy), now(0));
    assert_eq!(upkeep(&effects), 0, "{effects:?}");
}

/// Regression (issue 22): `mod.rs` wrote at shutdown only what its timers
/// had pending, deciding itself.
#[test]
fn at_shutdown_the_armed_writes_are_made_context_first_then_the_stop_said_and_our_socket_removed() {
    let mut r = root();
    let shutdown = |armed: Vec<Timer>, socket_ours| Input::Shutdown {
        reason: "SIGTERM".into(),
        armed,
        socket_ours,
    };
    let stopping = Effect::Emit {
        root: id(0),
        session: None,
        path: None,
        kind: EventKind::Stopping {
            reason: "SIGTERM".into(),
        },
    };
    let armed = vec![
        Timer::SaveState(id(0)),
        Timer::Locks(id(0)),
        Timer::Context(id(0)),
    ];
    assert_eq!(
        step(&mut r, shutdown(armed, true), now(0)),
        vec![
            Effect::WriteSharedContextNow(id(0)),
            Effect::SaveState(id(0)),
            stopping.clone(),
            Effect::RemoveSocket(id(0)),
        ]
    );
    // Nothing pending, the socket another squadd's (it took the root
    // over): only the stop is said. Another root's timers are not ours.
    let others = vec![Timer::Context(id(1)), Timer::SaveState(id(1))];
    assert_eq!(
        step(&mut r, shutdown(others, false), now(0)),
        vec![stopping]
    );
}

/// Regression (issue 22): `mod.rs::flush` ordered the due timers itself.
#[test]
fn due_timers_are_taken_rescans_first_then_tasks_by_session_then_all_fired_in_due_order() {
    let task = |session: &str, task: &str| Timer::TaskDue {
        root: id(0),
        session: session.into(),
        task: task.into(),
    };
    let due = vec![
        task("b", "t1"),
        Timer::Context(id(0)),
        Timer::Rescan(id(1)),
        task("a", "t2"),
        task("b", "t3"),
        Timer::Rescan(id(0)),
    ];
    let order = due_timers(due.clone());
    assert_eq!(
        order,
        DueTimers {
            rescans: vec![id(1), id(0)],
            tasks: vec![
                (id(0), "a".into(), vec!["t2".into()]),
                (id(0), "b".into(), vec!["t1".into(), "t3".into()]),
            ],
            fire: due,
            worked: true,
        }
    );
    // Upkeep of squadd itself is no work a STATUS= line counts.
    let idle = due_timers(vec![
        Timer::StatusLine,
        Timer::Watchdog,
        Timer::Trim,
        Timer::Runs,
    ]);
    assert!(!idle.worked && idle.rescans.is_empty() && idle.tasks.is_empty());
    assert_eq!(idle.fire.len(), 4);
}

/// Issue 42 item 2: a batch's stages and their order are `Batch`'s (the
/// shell's `flush` only carries them out): rescans, passed deadlines as
/// inputs, the settled writes, each due timer (a root's as an input
/// through `Core::step`, the daemon's own as its effects), then the tail.
#[test]
fn a_batch_gives_its_stages_in_order_and_ends_with_notices_outbox_runs() {
    let task = Timer::TaskDue {
        root: id(0),
        session: "a".into(),
        task: "t".into(),
    };
    let mut b = Batch::new(vec![
        Timer::Watchdog,
        task,
        Timer::Rescan(id(1)),
        Timer::Context(id(0)),
    ]);
    assert_eq!(b.rescans(), vec![id(1)]);
    let tasks = b.tasks_due();
    assert!(matches!(
        &tasks[..],
        [(r, Input::TasksDue { session, tasks })]
            if *r == id(0) && session == "a" && *tasks == vec!["t".to_string()]
    ));
    assert!(b.tasks_due().is_empty(), "taken once");
    // "a" only lost files (its status waits), "b" changed.
    b.touched(id(0), "a".into(), true);
    b.touched(id(0), "b".into(), false);
    let settled = b.settle(|_, _| true);
    assert!(settled.contains(&Effect::WriteStatuses {
        root: id(0),
        sessions: vec!["b".into()],
    }));
    assert!(settled.contains(&Effect::SetTimer {
        timer: Timer::Status {
            root: id(0),
            session: "a".into(),
        },
        after: REMOVAL_DELAY,
    }));
    let fired = b.fire(now(0));
    assert_eq!(fired.len(), 4, "every due timer, in the order due");
    assert!(matches!(&fired[0], Fired::Daemon(e) if *e == vec![Effect::Watchdog]));
    assert!(matches!(
        &fired[3],
        Fired::Root(r, input)
            if *r == id(0) && matches!(&**input, Input::TimerFired { timer, changed }
                if *timer == Timer::Context(id(0))
                    && changed.contains(&(id(0), "b".to_string()))
                    && !changed.contains(&(id(0), "a".to_string())))
    ));
    assert_eq!(
        Batch::tail(),
        vec![
            Effect::SendNotices,
            Effect::FlushOutbox,
            Effect::SuperviseRuns
        ]
    );
}

#[test]
fn a_burst_arms_the_trim_and_work_the_status_line_only_when_a_manager_listens() {
    let trim = Effect::SetTimer {
        timer: Timer::Trim,
        after: super::scan::TRIM_DELAY,
    };
    let line = Effect::SetTimerEarlier {
        timer: Timer::StatusLine,
        after: STATUS_LINE_DELAY,
    };
    assert!(batch_timers(0, false, true).is_empty());
    assert!(batch_timers(TRIM_AFTER_PATHS - 1, true, false).is_empty());
    assert_eq!(batch_timers(1, false, true), vec![line.clone()]);
    assert_eq!(batch_timers(0, true, true), vec![line.clone()]);
    assert_eq!(
        batch_timers(TRIM_AFTER_PATHS, false, false),
        vec![trim.clone()]
    );
    assert_eq!(batch_timers(TRIM_AFTER_PATHS, true, true), vec![trim, line]);
}

/// Regression (issue 22): the policy's reload was decided in the shell
/// (`upkeep::reload_policy`, with the clock read there).
#[test]
fn a_policy_read_again_changes_nothing_replaces_or_is_refused_in_that_order() {
    let mut r = root();
    let same = Box::new(r.policy.clone());
    assert!(step(&mut r, Input::PolicyRead(Ok(same)), now(0)).is_empty());

    let mut other = r.policy.clone();
    other.messages.low_max_wait = Duration::from_secs(7);
    let effects = step(
        &mut r,
        Input::PolicyRead(Ok(Box::new(other.clone()))),
        now(1),
    );
    assert_eq!(r.policy, other, "replaced");
    let [
        Effect::Emit {
            kind: EventKind::PolicyReloaded,
            path: Some(path),
            ..
        },
        Effect::SetTimerAt {
            timer: Timer::Retention(_),
            at,
        },
        rest @ ..,
    ] = &effects[..]
    else {
        panic!("said, then retention rescheduled: {effects:?}");
    };
    assert!(path.ends_with(".squad/policies.yaml"));
    assert_eq!(Some(*at), r.next_gc, "scheduled from the step's now");
    assert_eq!(
        rest.last(),
        Some(&Effect::FlushOutbox),
        "the mail area follows"
    );

    let refused = crate::locks::PolicyLoadError::Invalid {
        path: PathBuf::from(".squad/policies.yaml"),
        source: squad_policies::policy::PolicyError {
            field: "messages.low_max_wait".into(),
            message: "not a duration".into(),
        },
    };
    let effects = step(&mut r, Input::PolicyRead(Err(refused)), now(2));
    assert_eq!(r.policy, other, "the previous policy stays in force");
    assert!(
        matches!(
            &effects[..],
            [
                Effect::Emit {
                    kind: EventKind::PolicyRefused { .. },
                    ..
                },
                Effect::SetTimerAt { .. },
            ]
        ),
        "{effects:?}"
    );
}

/// Issue 40 item 4: the policy in force put back after a refusal (the
/// bad edit undone) is said to be in force again, so the refusal stops
/// needing attention; read once more, it changes nothing.
#[test]
fn the_policy_in_force_put_back_after_a_refusal_is_said_reloaded() {
    let mut r = root();
    let refused = || crate::locks::PolicyLoadError::Invalid {
        path: PathBuf::from(".squad/policies.yaml"),
        source: squad_policies::policy::PolicyError {
            field: "locks.default_ttl".into(),
            message: "not a duration".into(),
        },
    };
    step(&mut r, Input::PolicyRead(Err(refused())), now(0));
    let kept = r.policy.clone();
    let same = || Box::new(kept.clone());
    let effects = step(&mut r, Input::PolicyRead(Ok(same())), now(1));
    assert!(
        matches!(
            &effects[..],
            [
                Effect::Emit {
                    kind: EventKind::PolicyReloaded,
                    ..
                },
                ..
            ]
        ),
        "{effects:?}"
    );
    assert!(step(&mut r, Input::PolicyRead(Ok(same())), now(2)).is_empty());
}

/// Regression (issue 22): `mod.rs::open_root` decided what a refused
/// policy means (the defaults, said, retention held) and armed the timers.
#[test]
fn a_root_opened_runs_on_its_policy_or_on_the_defaults_with_retention_held_when_refused() {
    let mut r = root();
    let mut valid = squad_policies::Policy::defaults();
    valid.messages.low_max_wait = Duration::from_secs(7);
    let effects = step(
        &mut r,
        Input::RootOpened(Ok(Box::new(valid.clone()))),
        now(0),
    );
    assert_eq!(r.policy, valid);
    assert!(r.leads, "no `cluster:`: this host writes");
    let next = super::next_run(&valid, now(0).wall);
    assert!(next.is_some() && r.next_gc == next);
    assert_eq!(
        effects,
        vec![
            Effect::SetTimerAt {
                timer: Timer::Retention(id(0)),
                at: next.unwrap(),
            },
            Effect::SetTimer {
                timer: Timer::Locks(id(0)),
                after: Duration::ZERO,
            },
        ]
    );

    // With `cluster:`, nothing is written before the lease is this host's.
    let mut clustered = valid.clone();
    clustered.cluster = Some(squad_policies::cluster::ClusterPolicy {
        nats: vec!["nats://127.0.0.1:4222".into()],
        project: "p".into(),
        credentials: None,
        lock_ttl: Duration::from_secs(30),
        replicas: 1,
        lease_ttl: Duration::from_secs(10),
    });
    let mut c = root();
    step(&mut c, Input::RootOpened(Ok(Box::new(clustered))), now(0));
    assert!(!c.leads, "a cluster member leads only once elected");

    let mut r = root();
    r.policy = valid;
    let refused = crate::locks::PolicyLoadError::Invalid {
        path: PathBuf::from(".squad/policies.yaml"),
        source: squad_policies::policy::PolicyError {
            field: "messages.low_max_wait".into(),
            message: "not a duration".into(),
        },
    };
    let effects = step(&mut r, Input::RootOpened(Err(refused)), now(0));
    assert_eq!(r.policy, squad_policies::Policy::defaults());
    assert_eq!(r.next_gc, None, "retention held");
    let [
        Effect::Emit {
            kind: EventKind::PolicyRefused { error },
            path: Some(path),
            ..
        },
        Effect::SetTimer {
            timer: Timer::Locks(_),
            ..
        },
    ] = &effects[..]
    else {
        panic!("said, no retention timer, the locks looked at: {effects:?}");
    };
    assert!(path.ends_with(".squad/policies.yaml"));
    assert!(
        error.contains("messages.low_max_wait") && error.contains("retention held"),
        "{error}"
    );
}

/// Regression (issue 22): `mod.rs`'s event loop decided which hook
/// outcomes are said.
#[test]
fn a_notify_command_that_failed_is_said_and_one_that_ran_is_not() {
    let mut r = root();
    let done = |error: Option<&str>| Input::HookDone {
        session: "s".into(),
        to: "bob".into(),
        message_id: "m1".into(),
        error: error.map(str::to_string),
    };
    assert!(step(&mut r, done(None), now(0)).is_empty());
    assert_eq!(
        step(&mut r, done(Some("exit 1")), now(0)),
        vec![Effect::Emit {
            root: id(0),
            session: Some("s".into()),
            path: None,
            kind: EventKind::NotifyFailed {
                to: "bob".into(),
                message_id: "m1".into(),
                error: "exit 1".into(),
            },
        }]
    );
}
