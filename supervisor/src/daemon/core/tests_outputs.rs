//! Unit tests of squadd's own outputs as the core decides them
//! (`core/outputs.rs`): status writes under their locks, the shared
//! context, the persisted state, retention, lock expiry and the cluster's
//! one-writer gate, each through [`Core::step`] (or the timer it fires),
//! with the effects and their order asserted.

use super::outputs::{
    GC_BUSY_RETRY, LOCKS_BUSY_RETRY, LOCKS_FAILED_RETRY, LockTable, RetentionRun,
    STATUS_LOCK_RETRY, StatusFacts, StatusLock,
};
use super::tests::{SESSION, base, id, now, root, root_with};
use super::tests_mail::{plan, ready};
use super::timer::{self, Timer};

use super::{Core, Effect, Input, Now, Root};
use crate::cluster::leader::News;
use crate::events::EventKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

fn step(r: &mut Root, input: Input<'_>, at: Now) -> Vec<Effect> {
    Core::new(id(0), r).step(input, at)
}

fn facts(lock: StatusLock, vanishing: Option<Duration>, dir_present: bool) -> Vec<StatusFacts> {
    vec![StatusFacts {
        session: SESSION.into(),
        lock,
        vanishing,
        dir_present,
    }]
}

fn status_timer() -> Timer {
    Timer::Status {
        root: id(0),
        session: SESSION.into(),
    }
}

/// The status texts a step writes: (session, file name, text).
fn written(effects: &[Effect]) -> Vec<(String, String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::WriteStatusTexts { texts, .. } => Some(texts),
            _ => None,
        })
        .flatten()
        .map(|t| {
            let name = t.path.file_name().unwrap().to_string_lossy().into_owned();
            (t.session.clone(), name, t.text.clone())
        })
        .collect()
}

#[test]
fn status_writes_are_for_known_sessions_and_take_their_locks_first() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let input = Input::StatusesDue {
        sessions: vec![SESSION.into(), "20240115T110000Z".into()],
    };
    assert_eq!(
        step(&mut r, input, now(0)),
        vec![Effect::LockStatuses {
            root: id(0),
            sessions: vec![SESSION.into()],
        }]
    );
    let none = Input::StatusesDue {
        sessions: vec!["20240115T110000Z".into()],
    };
    assert!(step(&mut r, none, now(0)).is_empty());
}

#[test]
fn a_locked_session_gets_its_status_rendered_and_written_once_in_one_batch() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    for lock in [StatusLock::Held, StatusLock::Unavailable] {
        let input = Input::StatusesLocked {
            sessions: facts(lock, None, true),
        };
        let effects = step(&mut r, input, now(0));
        assert_eq!(effects.len(), 1, "{effects:?}");
        let w = written(&effects);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].0, SESSION);
        assert_eq!(w[0].1, SESSION_STATUS_FILE);
        assert!(w[0].2.contains("tasks_total: 1"), "{}", w[0].2);
    }
    // A session directory that is gone is not recreated by a status file.
    let input = Input::StatusesLocked {
        sessions: facts(StatusLock::Held, None, false),
    };
    assert!(step(&mut r, input, now(0)).is_empty());
}

#[test]
fn a_busy_lock_or_a_vanishing_status_file_holds_the_write_back_on_the_status_timer() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let busy = Input::StatusesLocked {
        sessions: facts(StatusLock::Busy, Some(Duration::from_millis(200)), true),
    };
    assert_eq!(
        step(&mut r, busy, now(0)),
        vec![Effect::SetTimerEarlier {
            timer: status_timer(),
            after: STATUS_LOCK_RETRY,
        }]
    );
    let vanishing = Input::StatusesLocked {
        sessions: facts(StatusLock::Held, Some(Duration::from_millis(200)), true),
    };
    assert_eq!(
        step(&mut r, vanishing, now(0)),
        vec![Effect::SetTimerEarlier {
            timer: status_timer(),
            after: Duration::from_millis(200),
        }]
    );
}

#[test]
fn a_status_written_is_indexed_as_squadds_own_then_reported_and_not_written_again() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let input = Input::StatusesLocked {
        sessions: facts(StatusLock::Held, None, true),
    };
    let (_, _, text) = written(&step(&mut r, input, now(0))).remove(0);
    let path = r.session_dir(SESSION).join(SESSION_STATUS_FILE);
    let done = Input::StatusWritten {
        session: SESSION.into(),
        path: path.clone(),
        bytes: text.as_bytes(),
        error: None,
    };
    let effects = step(&mut r, done, now(0));
    assert_eq!(
        effects.last(),
        Some(&Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(path.clone()),
            kind: EventKind::OutputWritten {
                output: "session-status".into()
            },
        }),
        "{effects:?}"
    );
    let indexed = r.sessions[SESSION]
        .index()
        .files
        .get(SESSION_STATUS_FILE)
        .and_then(|f| f.text.clone());
    assert_eq!(indexed.as_deref(), Some(text.as_str()));
    // The same render again: nothing differs, nothing is written.
    let again = Input::StatusesLocked {
        sessions: facts(StatusLock::Held, None, true),
    };
    assert!(step(&mut r, again, now(0)).is_empty());
}

#[test]
fn a_failed_status_write_is_reported_and_indexes_nothing() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let path = r.session_dir(SESSION).join(SESSION_STATUS_FILE);
    let failed = Input::StatusWritten {
        session: SESSION.into(),
        path: path.clone(),
        bytes: b"status: active\n",
        error: Some("disk full".into()),
    };
    assert_eq!(
        step(&mut r, failed, now(0)),
        vec![Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(path),
            kind: EventKind::OutputFailed {
                output: "session-status".into(),
                error: "disk full".into(),
            },
        }]
    );
    assert!(
        !r.sessions[SESSION]
            .index()
            .files
            .contains_key(SESSION_STATUS_FILE)
    );
}

#[test]
fn the_shared_context_and_the_state_are_written_only_while_the_root_is_there() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let cancel_context = Effect::CancelTimer(Timer::Context(id(0)));
    let cancel_state = Effect::CancelTimer(Timer::SaveState(id(0)));
    for (present, missing) in [(false, false), (true, true)] {
        r.missing = missing;
        let effects = step(
            &mut r,
            Input::ContextDue {
                present,
                now: false,
            },
            now(0),
        );
        assert_eq!(effects, vec![cancel_context.clone()]);
        let effects = step(&mut r, Input::SaveStateDue { present }, now(0));
        assert_eq!(effects, vec![cancel_state.clone()]);
    }
    r.missing = false;
    r.taken_over = Some("42".into());
    assert_eq!(
        step(&mut r, Input::SaveStateDue { present: true }, now(0)),
        vec![cancel_state.clone()]
    );
    r.taken_over = None;
    let effects = step(
        &mut r,
        Input::ContextDue {
            present: true,
            now: true,
        },
        now(0),
    );
    assert_eq!(effects[0], cancel_context);
    match &effects[1..] {
        [
            Effect::WriteContext {
                path,
                fragments,
                now: true,
                ..
            },
        ] => {
            assert_eq!(
                path,
                &PathBuf::from("/p/.claude/context/shared-context.json")
            );
            assert_eq!(fragments.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    let effects = step(&mut r, Input::SaveStateDue { present: true }, now(0));
    assert_eq!(effects[0], cancel_state);
    match &effects[1..] {
        [
            Effect::WriteState {
                path,
                bytes: Ok(bytes),
                ..
            },
        ] => {
            assert_eq!(path, &PathBuf::from("/p/.squad/run/state.json"));
            assert!(String::from_utf8_lossy(bytes).contains("task_starts"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_background_write_is_reported_as_written_or_failed() {
    let mut r = root();
    let path = PathBuf::from("/p/.claude/context/shared-context.json");
    let ok = Input::OutputDone {
        session: None,
        path: path.clone(),
        output: "shared-context",
        error: None,
    };
    assert_eq!(
        step(&mut r, ok, now(0)),
        vec![Effect::Emit {
            root: id(0),
            session: None,
            path: Some(path.clone()),
            kind: EventKind::OutputWritten {
                output: "shared-context".into()
            },
        }]
    );
    let failed = Input::OutputDone {
        session: None,
        path: path.clone(),
        output: "shared-context",
        error: Some("read-only".into()),
    };
    assert!(matches!(
        &step(&mut r, failed, now(0))[..],
        [Effect::Emit { kind: EventKind::OutputFailed { error, .. }, .. }] if error == "read-only"
    ));
}

#[test]
fn retention_runs_on_its_schedule_and_is_scheduled_again_by_what_it_gave() {
    let mut r = root();
    let at = now(0);
    let fired = timer::fire(Timer::Retention(id(0)), Some(&mut r), &BTreeSet::new(), at);
    assert_eq!(fired, vec![Effect::RunRetention(id(0))]);
    // The default schedule: minute 17 of every hour.
    let next = base() + chrono::Duration::minutes(17);
    let event = (
        Some(SESSION.to_string()),
        Some(PathBuf::from("/p/x")),
        EventKind::RetentionFailed { error: "x".into() },
    );
    let effects = step(
        &mut r,
        Input::RetentionRan(RetentionRun::Ran(vec![event])),
        at,
    );
    assert!(matches!(&effects[0], Effect::Emit { session: Some(s), .. } if s == SESSION));
    let timer_at = |at| Effect::SetTimerAt {
        timer: Timer::Retention(id(0)),
        at,
    };
    assert_eq!(effects[1..], [timer_at(next)]);
    assert_eq!(r.next_gc, Some(next));
    // `squadctl gc` holds the lock: again in a minute (sooner than the
    // schedule), or at the schedule when that is sooner.
    let effects = step(&mut r, Input::RetentionRan(RetentionRun::LockBusy), at);
    assert_eq!(effects, vec![timer_at(base() + GC_BUSY_RETRY)]);
    let late = now(16);
    let effects = step(&mut r, Input::RetentionRan(RetentionRun::LockBusy), late);
    assert_eq!(effects, vec![timer_at(next)]);
    let effects = step(
        &mut r,
        Input::RetentionRan(RetentionRun::LockFailed("EACCES".into())),
        at,
    );
    assert!(matches!(
        &effects[0],
        Effect::Emit { kind: EventKind::RetentionFailed { error }, .. }
            if error == "cannot take the gc lock: EACCES"
    ));
    assert_eq!(effects[1..], [timer_at(next)]);
}

#[test]
fn a_follower_skips_retention_and_waits_for_the_next_scheduled_run() {
    let mut r = root();
    r.leads = false;
    // Fired at 10:17: the run of 10:17 is the leader's; the next is 11:17
    // (keeping 10:17 would fire again at once, for ever).
    let at = now(17);
    let fired = timer::fire(Timer::Retention(id(0)), Some(&mut r), &BTreeSet::new(), at);
    let next = base() + chrono::Duration::minutes(77);
    assert_eq!(
        fired,
        vec![Effect::SetTimerAt {
            timer: Timer::Retention(id(0)),
            at: next,
        }]
    );
    assert_eq!(r.next_gc, Some(next));
}

fn lock(path: &str, expires_in_minutes: i64) -> crate::locks::Entry {
    crate::locks::Entry::Held {
        path: PathBuf::from(path),
        record: squad_policies::locks::LockRecord {
            targets: vec!["src/**".into()],
            mode: squad_policies::locks::Mode::Exclusive,
            agent: "bob".into(),
            task_id: "task_1".into(),
            session: SESSION.into(),
            pid: None,
            pid_started_at: None,
            host: String::new(),
            acquired_at: base(),
            expires_at: base() + chrono::Duration::minutes(expires_in_minutes),
        },
    }
}

#[test]
fn the_lock_table_is_read_only_while_the_root_is_there_and_retried_when_busy() {
    let mut r = root();
    assert_eq!(
        step(&mut r, Input::LocksDue { present: true }, now(0)),
        vec![Effect::ReadLocks(id(0))]
    );
    assert!(step(&mut r, Input::LocksDue { present: false }, now(0)).is_empty());
    r.missing = true;
    assert!(step(&mut r, Input::LocksDue { present: true }, now(0)).is_empty());
    let retry = |after| {
        vec![Effect::SetTimer {
            timer: Timer::Locks(id(0)),
            after,
        }]
    };
    let busy = step(&mut r, Input::LocksRead(LockTable::Busy), now(0));
    assert_eq!(busy, retry(LOCKS_BUSY_RETRY));
    let failed = step(&mut r, Input::LocksRead(LockTable::Failed), now(0));
    assert_eq!(failed, retry(LOCKS_FAILED_RETRY));
}

#[test]
fn expired_locks_are_reclaimed_and_the_table_looked_at_when_the_next_expires() {
    let mut r = root();
    let (old, young) = (lock("/p/a.json", 5), lock("/p/b.json", 30));
    let table = LockTable::Read(vec![old.clone(), young.clone()]);
    // At 10:10 the first lock (until 10:05) has expired, the second not.
    let effects = step(&mut r, Input::LocksRead(table), now(10));
    assert_eq!(
        effects,
        vec![Effect::ReclaimLocks {
            root: id(0),
            expired: vec![old],
        }]
    );
    assert_eq!(r.locks.len(), 2);
    let event = (
        SESSION.to_string(),
        PathBuf::from("/p/a.json"),
        EventKind::LockReleased {
            targets: vec!["src/**".into()],
            agent: "bob".into(),
            reason: "expired".into(),
        },
    );
    let effects = step(&mut r, Input::LocksReclaimed(vec![event]), now(10));
    assert!(
        matches!(&effects[0], Effect::Emit { path: Some(p), .. } if p == &PathBuf::from("/p/a.json"))
    );
    assert_eq!(
        effects[1..],
        [Effect::SetTimerAt {
            timer: Timer::Locks(id(0)),
            at: base() + chrono::Duration::minutes(30),
        }]
    );
    assert_eq!(r.locks, vec![young]);
    // Nothing expired, nothing left: no timer.
    let effects = step(
        &mut r,
        Input::LocksRead(LockTable::Read(Vec::new())),
        now(10),
    );
    assert_eq!(effects, vec![Effect::CancelTimer(Timer::Locks(id(0)))]);
}

/// A root of a cluster whose host does not lead yet, with one session
/// whose first task is ready.
fn follower() -> Root {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    r.leads = false;
    r
}

#[test]
fn a_follower_writes_no_status_context_or_notice() {
    let mut r = follower();
    let due = Input::StatusesDue {
        sessions: vec![SESSION.into()],
    };
    assert!(step(&mut r, due, now(0)).is_empty());
    let context = step(
        &mut r,
        Input::ContextDue {
            present: true,
            now: false,
        },
        now(0),
    );
    assert_eq!(context, vec![Effect::CancelTimer(Timer::Context(id(0)))]);
    let facts = vec![(SESSION.to_string(), None, ready("task_1", "bob"))];
    assert!(step(&mut r, Input::FactsTapped(facts), now(0)).is_empty());
    // A session edit's own write is not the gate's: it goes through.
    let edit = Input::StatusesLocked {
        sessions: facts_held(),
    };
    assert_eq!(written(&step(&mut r, edit, now(0))).len(), 1);
}

fn facts_held() -> Vec<StatusFacts> {
    facts(StatusLock::Held, None, true)
}

#[test]
fn an_elected_leader_catches_up_in_order_once() {
    let mut r = follower();
    let input = Input::Leadership {
        epoch: Some(3),
        news: Some(News::Elected { epoch: 3 }),
    };
    let effects = step(&mut r, input, now(0));
    assert_eq!(
        effects,
        vec![
            Effect::Emit {
                root: id(0),
                session: None,
                path: None,
                kind: EventKind::LeaderElected { epoch: 3 },
            },
            Effect::WriteStatuses {
                root: id(0),
                sessions: vec![SESSION.into()],
            },
            Effect::WriteSharedContext(id(0)),
            Effect::Tap {
                root: id(0),
                session: SESSION.into(),
                kind: ready("task_1", "bob"),
            },
            Effect::FlushOutbox,
            Effect::SetTimerEarlier {
                timer: Timer::Runs,
                after: Duration::ZERO,
            },
        ]
    );
    assert!(r.leads);
    // The look before the next batch sees the same lease: nothing more.
    let same = Input::Leadership {
        epoch: Some(3),
        news: None,
    };
    assert!(step(&mut r, same, now(0)).is_empty());
    // Now the outputs are written.
    let due = Input::StatusesDue {
        sessions: vec![SESSION.into()],
    };
    assert_eq!(step(&mut r, due, now(0)).len(), 1);
}

#[test]
fn a_follower_leads_only_from_the_news_of_its_election_so_the_event_comes_first() {
    let mut r = follower();
    // The lease is valid a moment before the news reaches the loop: the
    // look before a batch does not make this host the leader.
    let look = Input::Leadership {
        epoch: Some(15),
        news: None,
    };
    assert!(step(&mut r, look, now(0)).is_empty());
    assert!(!r.leads);
    let due = Input::StatusesDue {
        sessions: vec![SESSION.into()],
    };
    assert!(step(&mut r, due, now(0)).is_empty());
    let elected = Input::Leadership {
        epoch: Some(15),
        news: Some(News::Elected { epoch: 15 }),
    };
    let effects = step(&mut r, elected, now(0));
    assert!(matches!(
        &effects[0],
        Effect::Emit {
            kind: EventKind::LeaderElected { epoch: 15 },
            ..
        }
    ));
    assert!(
        matches!(&effects[1], Effect::WriteStatuses { .. }),
        "{effects:?}"
    );
    // News of an election whose lease already ran out: nothing written.
    let mut r = follower();
    let stale = Input::Leadership {
        epoch: None,
        news: Some(News::Elected { epoch: 16 }),
    };
    assert_eq!(step(&mut r, stale, now(0)).len(), 1);
    assert!(!r.leads);
}

#[test]
fn a_lease_that_ran_out_gates_the_writes_before_the_news_comes() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    r.leads = true;
    // The look before a batch: the lease is no longer valid (a leader
    // frozen past it and woken); no news yet.
    let lapsed = Input::Leadership {
        epoch: None,
        news: None,
    };
    assert!(step(&mut r, lapsed, now(0)).is_empty());
    assert!(!r.leads);
    let due = Input::StatusesDue {
        sessions: vec![SESSION.into()],
    };
    assert!(step(&mut r, due, now(0)).is_empty());
    let lost = Input::Leadership {
        epoch: None,
        news: Some(News::Lost {
            epoch: 3,
            reason: "lease not renewed".into(),
        }),
    };
    assert_eq!(
        step(&mut r, lost, now(0)),
        vec![Effect::Emit {
            root: id(0),
            session: None,
            path: None,
            kind: EventKind::LeaderLost {
                epoch: 3,
                reason: "lease not renewed".into(),
            },
        }]
    );
    // Re-elected after the look saw the lease first: the news still
    // catches up.
    r.leads = true;
    let elected = Input::Leadership {
        epoch: Some(4),
        news: Some(News::Elected { epoch: 4 }),
    };
    let effects = step(&mut r, elected, now(0));
    assert!(
        effects.contains(&Effect::WriteSharedContext(id(0))),
        "{effects:?}"
    );
}
