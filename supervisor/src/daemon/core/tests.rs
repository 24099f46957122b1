//! Unit tests of the core: the order of the effects a batch and a timer
//! return, and the decisions that need no file system. Everything runs in
//! memory, at a `Now` the test picks.

use super::RootId;
use super::batch::{self, CONTEXT_DELAY, REMOVAL_DELAY};
use super::tests_mail::{applied, plan};
use super::timer::Timer;
use super::timer::{self, ROOT_CHECK_MAX};
use super::{Core, Effect, Input, Now, Root, escalations, replies};
use crate::daemon::routing::{Body, Delivery};
use crate::daemon::session::SessionCore;
use crate::events::EventKind;
use chrono::{DateTime, TimeZone, Utc};
use squad_protocol::model::Priority;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

pub(super) const SESSION: &str = "20240115T100000Z";

pub(super) fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap()
}

pub(super) fn now(minutes: i64) -> Now {
    Now {
        wall: base() + chrono::Duration::minutes(minutes),
    }
}

pub(super) fn id(n: u32) -> RootId {
    RootId::nth(n)
}

pub(super) fn root() -> Root {
    Root::new(
        PathBuf::from("/p"),
        crate::state::State::default(),
        squad_policies::Policy::defaults(),
        base(),
    )
}

/// A root whose one session holds `files` (name, text).
pub(super) fn root_with(files: &[(String, String)]) -> Root {
    let mut r = root();
    let dir = r.session_dir(SESSION);
    let mut core = SessionCore::new(dir.clone());
    for (name, text) in files {
        let kind = squad_protocol::FileKind::from_file_name(name).unwrap();
        let f = crate::index::index_bytes(&dir.join(name), kind, text.as_bytes());
        core.apply(name, Some(f), base());
    }
    r.insert_session(SESSION, core);
    r
}

pub(super) fn question(id: &str, by: &str) -> (String, String) {
    (
        format!("role-comm-alice-to-bob-{id}.md"),
        format!(
            "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: question\nsubject: q\nmessage: q?\nresponse_needed: true\nresponse_by: {by}\n"
        ),
    )
}

pub(super) fn touched(sessions: &[(u32, &str)]) -> BTreeMap<RootId, BTreeSet<String>> {
    let mut t: BTreeMap<RootId, BTreeSet<String>> = BTreeMap::new();
    for (r, s) in sessions {
        t.entry(id(*r)).or_default().insert(s.to_string());
    }
    t
}

pub(super) fn position(effects: &[Effect], want: impl Fn(&Effect) -> bool) -> Option<usize> {
    effects.iter().position(want)
}

pub(super) fn writes(effects: &[Effect]) -> Vec<(RootId, Vec<String>)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::WriteStatuses { root, sessions } => Some((*root, sessions.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_status_write_never_waits_on_a_notice() {
    let t = touched(&[(0, "a"), (1, "b")]);
    let changed = BTreeSet::from([(id(0), "a".to_string()), (id(1), "b".to_string())]);
    let effects = batch::settle(&t, &changed, |_, _| true);
    let notices = position(&effects, |e| *e == Effect::SendNotices).unwrap();
    let flush = position(&effects, |e| *e == Effect::FlushOutbox).unwrap();
    let last_write = effects
        .iter()
        .rposition(|e| matches!(e, Effect::WriteStatuses { .. }))
        .unwrap();
    assert!(
        last_write < notices && notices < flush,
        "status writes up to {last_write}, notices at {notices}, deliveries at {flush}: {effects:?}"
    );
    // Before the last status write: only timers and the status writes
    // themselves (nothing written, delivered or told ahead of them).
    for e in &effects[..last_write] {
        assert!(
            matches!(
                e,
                Effect::WriteStatuses { .. }
                    | Effect::RecheckWaiting { .. }
                    | Effect::CancelTimer(_)
                    | Effect::SetTimer { .. }
                    | Effect::SetTimerEarlier { .. }
            ),
            "{e:?} before a status write: {effects:?}"
        );
    }
    // One notice step and one outbox flush per batch, however many roots.
    assert_eq!(
        effects
            .iter()
            .filter(|e| **e == Effect::SendNotices)
            .count(),
        1
    );
    assert_eq!(
        effects
            .iter()
            .filter(|e| **e == Effect::FlushOutbox)
            .count(),
        1
    );
    assert_eq!(
        writes(&effects),
        vec![
            (id(0), vec!["a".to_string()]),
            (id(1), vec!["b".to_string()])
        ]
    );
}

#[test]
fn a_removal_only_batch_writes_nothing_and_holds_the_status_back() {
    let t = touched(&[(0, "a")]);
    let effects = batch::settle(&t, &BTreeSet::new(), |_, _| true);
    assert!(writes(&effects).is_empty(), "{effects:?}");
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::RecheckWaiting { .. })),
        "no delivery into a session being deleted: {effects:?}"
    );
    assert!(effects.contains(&Effect::SetTimer {
        timer: Timer::Status {
            root: id(0),
            session: "a".into()
        },
        after: REMOVAL_DELAY,
    }));
}

#[test]
fn removals_are_deferred_beside_a_change_in_the_same_batch() {
    let t = touched(&[(0, "changed"), (0, "emptied")]);
    let changed = BTreeSet::from([(id(0), "changed".to_string())]);
    let effects = batch::settle(&t, &changed, |_, _| true);
    assert_eq!(writes(&effects), vec![(id(0), vec!["changed".to_string()])]);
    let held = Timer::Status {
        root: id(0),
        session: "emptied".into(),
    };
    assert!(effects.contains(&Effect::SetTimer {
        timer: held,
        after: REMOVAL_DELAY
    }));
    // The change's earlier hold, if any, is dropped before it is written.
    let cancel = position(&effects, |e| {
        *e == Effect::CancelTimer(Timer::Status {
            root: id(0),
            session: "changed".into(),
        })
    })
    .unwrap();
    let write = position(&effects, |e| matches!(e, Effect::WriteStatuses { .. })).unwrap();
    assert!(cancel < write);
    // Waiting deliveries and the shared context follow the status writes;
    // the deliveries are made last.
    let recheck = position(&effects, |e| matches!(e, Effect::RecheckWaiting { .. })).unwrap();
    let flush = position(&effects, |e| *e == Effect::FlushOutbox).unwrap();
    let context = position(&effects, |e| {
        *e == Effect::SetTimerEarlier {
            timer: Timer::Context(id(0)),
            after: CONTEXT_DELAY,
        }
    })
    .unwrap();
    assert!(
        write < recheck && recheck < context && context < flush,
        "{effects:?}"
    );
}

#[test]
fn a_session_gone_in_the_batch_gets_nothing() {
    let t = touched(&[(0, "gone")]);
    let changed = BTreeSet::from([(id(0), "gone".to_string())]);
    let effects = batch::settle(&t, &changed, |_, _| false);
    assert!(writes(&effects).is_empty());
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::SetTimer { .. } | Effect::RecheckWaiting { .. }))
    );
}

pub(super) fn delivery(name: &str, priority: Priority, minute: i64) -> (RootId, Delivery) {
    let created = base() + chrono::Duration::minutes(minute);
    (
        id(0),
        Delivery {
            session: SESSION.into(),
            from: "alice".into(),
            to: "bob".into(),
            name: name.into(),
            priority,
            created,
            since: created,
            message_id: name.into(),
            body: Body::File(PathBuf::from(name)),
        },
    )
}

#[test]
fn critical_deliveries_go_first_then_by_age() {
    let mut outbox = vec![
        delivery("old-low", Priority::Low, 0),
        delivery("new-normal", Priority::Medium, 5),
        delivery("new-critical", Priority::Critical, 9),
        delivery("old-normal", Priority::Medium, 1),
    ];
    batch::outbox_order(&mut outbox);
    let names: Vec<&str> = outbox.iter().map(|(_, d)| d.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["new-critical", "old-normal", "new-normal", "old-low"]
    );
}

#[test]
fn a_held_status_is_written_only_if_no_change_did_it_and_only_if_the_file_exists() {
    let status = Timer::Status {
        root: id(0),
        session: SESSION.into(),
    };
    // The same batch changed the session: its write is done already.
    let changed = BTreeSet::from([(id(0), SESSION.to_string())]);
    let mut r = root_with(&[]);
    assert!(timer::fire(status.clone(), Some(&mut r), &changed, now(0)).is_empty());
    // No status file indexed: never recreated, only deliveries rechecked.
    let effects = timer::fire(status.clone(), Some(&mut r), &BTreeSet::new(), now(0));
    assert_eq!(
        effects,
        vec![
            Effect::CancelTimer(status.clone()),
            Effect::RecheckWaitingIfPresent {
                root: id(0),
                session: SESSION.into()
            }
        ]
    );
    let mut r = root_with(&[("session-status.md".into(), "# status\n".into())]);
    let effects = timer::fire(status.clone(), Some(&mut r), &BTreeSet::new(), now(0));
    assert_eq!(writes(&effects), vec![(id(0), vec![SESSION.to_string()])]);
}

#[test]
fn a_missing_root_is_looked_for_less_and_less_often() {
    let mut r = root();
    r.missing = true;
    r.check_after = Duration::from_millis(500);
    let mut waits = Vec::new();
    for _ in 0..8 {
        for e in timer::root_check(&mut r, id(0), false) {
            if let Effect::SetTimer { after, .. } = e {
                waits.push(after);
            }
        }
    }
    assert_eq!(waits[0], Duration::from_secs(1));
    assert!(waits.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*waits.last().unwrap(), ROOT_CHECK_MAX);
    // Back: rescanned at once.
    assert_eq!(
        timer::root_check(&mut r, id(0), true),
        vec![Effect::SetTimer {
            timer: Timer::Rescan(id(0)),
            after: Duration::ZERO
        }]
    );
    // Taken over: left alone.
    r.taken_over = Some("42".into());
    assert!(timer::root_check(&mut r, id(0), true).is_empty());
}

/// The message ids of the events `pick` recognises, in order.
pub(super) fn emitted(
    effects: &[Effect],
    pick: impl Fn(&EventKind) -> Option<&String>,
) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { kind, .. } => pick(kind).cloned(),
            _ => None,
        })
        .collect()
}

fn overdue_reports(effects: &[Effect]) -> Vec<String> {
    emitted(effects, |k| match k {
        EventKind::ResponseOverdue { message_id, .. } => Some(message_id),
        _ => None,
    })
}

#[test]
fn a_reply_deadline_is_queued_then_reported_once_when_it_passes() {
    let (file, text) = question("msg_q", "2024-01-15T10:30:00Z");
    let mut r = root_with(&[(file.clone(), text)]);
    // Ahead: one wall-clock timer for the session, nothing reported.
    let effects = replies::asked(&mut r, id(0), SESSION, &file, now(0));
    let timer = Timer::ReplyDue {
        root: id(0),
        session: SESSION.into(),
    };
    assert_eq!(
        effects,
        vec![Effect::SetTimerEarlierAt {
            timer: timer.clone(),
            at: base() + chrono::Duration::minutes(30)
        }]
    );
    // Fired early (a clock step): nothing due yet, armed again.
    let effects = timer::fire(timer.clone(), Some(&mut r), &BTreeSet::new(), now(10));
    assert!(overdue_reports(&effects).is_empty());
    // Passed: reported once, saved; the queue is empty so the timer goes.
    let effects = timer::fire(timer.clone(), Some(&mut r), &BTreeSet::new(), now(31));
    assert_eq!(overdue_reports(&effects), vec!["msg_q".to_string()]);
    assert!(effects.contains(&Effect::SaveState(id(0))));
    assert!(effects.contains(&Effect::CancelTimer(timer.clone())));
    // The file seen again (a rescan): already reported, never twice.
    assert!(replies::asked(&mut r, id(0), SESSION, &file, now(40)).is_empty());
    assert!(overdue_reports(&replies::check(&mut r, id(0), SESSION, &file, now(41))).is_empty());
}

#[test]
fn a_reply_deadline_already_past_is_reported_at_once_unless_answered() {
    let (q, qt) = question("msg_q", "2024-01-15T10:05:00Z");
    let (open, ot) = question("msg_open", "2024-01-15T10:05:00Z");
    let answer = (
        "role-comm-bob-to-alice-msg_a.md".to_string(),
        "meta:\n  message_id: msg_a\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:01:00Z\n  priority: medium\ntype: answer\nsubject: a\nmessage: a\nin_reply_to: msg_q\n".to_string(),
    );
    let mut r = root_with(&[(q.clone(), qt), (open.clone(), ot), answer]);
    r.mail
        .entry(SESSION.into())
        .or_default()
        .note_reply(Some("msg_q"), true);
    assert!(overdue_reports(&replies::asked(&mut r, id(0), SESSION, &q, now(10))).is_empty());
    assert_eq!(
        overdue_reports(&replies::asked(&mut r, id(0), SESSION, &open, now(10))),
        vec!["msg_open".to_string()]
    );
}

fn escalations_of(effects: &[Effect]) -> Vec<String> {
    emitted(effects, |k| match k {
        EventKind::MessageEscalated { message_id, .. } => Some(message_id),
        _ => None,
    })
}

/// A root whose session has one unread critical message for bob, delivered
/// at `base()`; returns its inbox path.
fn unread_critical(r: &mut Root) -> PathBuf {
    let name = squad_policies::messages::inbox_name(Priority::Critical, base(), "msg_c");
    let policy = r.policy.messages.clone();
    r.mail
        .entry(SESSION.into())
        .or_default()
        .seen(&policy, "bob", &name, Some(base()));
    r.session_dir(SESSION).join("inbox/bob/new").join(name)
}

#[test]
fn an_unread_message_is_escalated_once_with_its_hook_then_the_state_saved() {
    let mut r = root_with(&[]);
    let path = unread_critical(&mut r);
    let later = now(24 * 60);
    let effects = escalations::run(&mut r, id(0), SESSION, later, |p| p == path);
    assert_eq!(escalations_of(&effects), vec!["msg_c".to_string()]);
    let emit = position(&effects, |e| matches!(e, Effect::Emit { .. })).unwrap();
    let hook = position(&effects, |e| matches!(e, Effect::Notify { .. })).unwrap();
    assert!(emit < hook, "the event, then the hook: {effects:?}");
    assert_eq!(effects.last(), Some(&Effect::SaveState(id(0))));
    // Seen again (a rescan or restart seeds a fresh mailbox): never a
    // second time.
    r.mail.remove(SESSION);
    unread_critical(&mut r);
    let again = escalations::run(&mut r, id(0), SESSION, now(2 * 24 * 60), |_| true);
    assert!(escalations_of(&again).is_empty(), "{again:?}");
    assert!(!again.contains(&Effect::SaveState(id(0))));
}

#[test]
fn a_message_read_meanwhile_is_not_escalated() {
    let mut r = root_with(&[]);
    unread_critical(&mut r);
    let effects = escalations::run(&mut r, id(0), SESSION, now(24 * 60), |_| false);
    assert!(escalations_of(&effects).is_empty());
    assert_eq!(
        effects,
        vec![Effect::CancelTimer(Timer::Escalation {
            root: id(0),
            session: SESSION.into()
        })]
    );
}

#[test]
fn an_escalation_ahead_arms_the_timer_and_one_past_runs_now() {
    let mut r = root_with(&[]);
    let path = unread_critical(&mut r);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let timer = Timer::Escalation {
        root: id(0),
        session: SESSION.into(),
    };
    // Read, then unread again a minute later (squadctl moved it back):
    // its escalation is ahead, so only the session's timer is armed.
    let entry = |present| Input::InboxEntry {
        session: SESSION.into(),
        agent: "bob".into(),
        file: name.clone(),
        present,
    };
    assert!(
        Core::new(id(0), &mut r)
            .step(entry(None), now(0))
            .is_empty()
    );
    let effects = Core::new(id(0), &mut r).step(entry(Some(base())), now(1));
    let [Effect::SetTimerEarlierAt { timer: t, at }] = effects.as_slice() else {
        panic!("one timer armed: {effects:?}");
    };
    assert_eq!(*t, timer);
    assert!(*at > now(1).wall, "{effects:?}");
    // Its time already past: run at once (the shell answers "unread?").
    Core::new(id(0), &mut r).step(entry(None), now(2));
    let late = now(24 * 60);
    let effects = Core::new(id(0), &mut r).step(entry(Some(base())), late);
    assert_eq!(
        effects,
        vec![Effect::RunEscalations {
            root: id(0),
            session: SESSION.into()
        }]
    );
    let unread = |p: &std::path::Path| p == path;
    let due = || Input::EscalationsDue {
        session: SESSION.into(),
        unread: &unread,
    };
    let effects = Core::new(id(0), &mut r).step(due(), late);
    assert_eq!(escalations_of(&effects), vec!["msg_c".to_string()]);
    // Escalation once: its timer firing again says nothing more.
    Core::new(id(0), &mut r).step(entry(None), late);
    Core::new(id(0), &mut r).step(entry(Some(base())), late);
    let again = Core::new(id(0), &mut r).step(due(), now(2 * 24 * 60));
    assert!(escalations_of(&again).is_empty(), "{again:?}");
}

/// A message file from alice to bob at `priority` (no reply asked).
#[test]
fn a_session_edit_is_written_only_when_it_changes_the_file_then_waiting_mail_goes() {
    use super::edits;
    use squad_policies::session_edit::SessionEdit;
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let fail = SessionEdit::Fail {
        reason: "out of budget".into(),
    };
    // No status file yet: the edit applies to the one squadd would write,
    // and is written.
    let e = edits::decide(&r, SESSION, &fail, now(0)).unwrap();
    assert!(e.write);
    assert_eq!(
        e.path,
        r.session_dir(SESSION)
            .join(squad_protocol::kind::SESSION_STATUS_FILE)
    );
    assert!(e.text.contains("out of budget"), "{}", e.text);
    // Written and indexed: the same edit again changes nothing.
    let f = crate::index::index_bytes(
        &e.path,
        squad_protocol::FileKind::SessionStatus,
        e.text.as_bytes(),
    );
    r.apply_file(
        SESSION,
        squad_protocol::kind::SESSION_STATUS_FILE,
        Some(f),
        base(),
    );
    let again = edits::decide(&r, SESSION, &fail, now(0)).unwrap();
    assert!(!again.write, "{}", again.text);
    assert_eq!(again.text, e.text);
    // Completing a failed session is refused, not forced.
    let complete = SessionEdit::Complete { force: false };
    assert!(matches!(
        edits::decide(&r, SESSION, &complete, now(2)),
        Err(crate::session_edit::EditError::Refused(_))
    ));
    assert!(matches!(
        edits::decide(&r, "gone", &complete, now(2)),
        Err(crate::session_edit::EditError::Failed(_))
    ));
    // Once written: waiting deliveries offered again and made, then the
    // shared context.
    let input = Input::SessionEdited {
        session: SESSION.into(),
    };
    assert_eq!(
        Core::new(id(0), &mut r).step(input, now(2)),
        vec![
            Effect::RecheckWaiting {
                root: id(0),
                session: SESSION.into()
            },
            Effect::FlushOutbox,
            Effect::SetTimerEarlier {
                timer: Timer::Context(id(0)),
                after: CONTEXT_DELAY
            },
        ]
    );
}

#[test]
fn watches_restored_are_said_then_the_root_rescanned() {
    let mut r = root();
    let effects = Core::new(id(1), &mut r).step(Input::WatchesRestored { dirs: 3 }, now(0));
    assert_eq!(
        effects,
        vec![
            Effect::Emit {
                root: id(1),
                session: None,
                path: None,
                kind: EventKind::WatchRestored { dirs: 3 },
            },
            Effect::SetTimer {
                timer: Timer::Rescan(id(1)),
                after: Duration::ZERO,
            },
        ]
    );
}

#[test]
fn a_root_taken_over_forgets_its_sessions_and_is_looked_at_no_more() {
    let (file, text) = question("msg_q", "2024-01-15T10:30:00Z");
    let mut r = root_with(&[(file.clone(), text)]);
    Core::new(id(0), &mut r).step(applied(&file), now(0));
    assert!(r.mail.contains_key(SESSION));
    let input = Input::TakenOver { pid: "4242".into() };
    let effects = Core::new(id(0), &mut r).step(input, now(1));
    assert_eq!(
        effects,
        vec![Effect::Emit {
            root: id(0),
            session: None,
            path: None,
            kind: EventKind::RootTakenOver { pid: "4242".into() },
        }]
    );
    assert_eq!(r.taken_over.as_deref(), Some("4242"));
    assert!(r.sessions.is_empty() && r.mail.is_empty(), "nothing kept");
    // Its root check finds it present: nothing (not ours any more).
    assert!(timer::root_check(&mut r, id(0), true).is_empty());
}

/// The shared context's parts are brought up to date for the sessions
/// loaded, changed or removed since the last write only, and then equal
/// each session's part rendered from scratch; a session gone takes its part
/// with it.
#[test]
fn the_shared_contexts_parts_follow_the_sessions_loaded_changed_and_removed() {
    let mut r = root();
    let index = |r: &Root, name: &str, files: &[(String, String)]| {
        let dir = r.session_dir(name);
        let mut index = crate::index::SessionIndex::new(dir.clone());
        for (file, text) in files {
            let kind = squad_protocol::FileKind::from_file_name(file).unwrap();
            index.insert(
                file.clone(),
                crate::index::index_bytes(&dir.join(file), kind, text.as_bytes()),
            );
        }
        index
    };
    let scratch = |r: &Root, name: &str| {
        let core = &r.sessions[name];
        crate::outputs::context_fragment(core.index(), &core.view())
    };
    for name in ["s1", "s2", "s3"] {
        let i = index(&r, name, &[plan(1, "bob", &[])]);
        r.load_session(i, base(), false);
    }
    let parts = r.context_fragments();
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["s1", "s2", "s3"]);
    for name in ["s1", "s2", "s3"] {
        assert!(*parts[name].1 == scratch(&r, name), "{name}");
    }
    drop(parts);
    // s2's task completed, s3 gone: only they are looked at.
    let file = "role-comm-bob-task_1.md";
    let done = "meta:\n  task_id: task_1\n  agent: bob\n  updated_at: 2024-01-15T10:05:00Z\nstatus: completed\n";
    let dir = r.session_dir("s2");
    let kind = squad_protocol::FileKind::from_file_name(file).unwrap();
    let indexed = crate::index::index_bytes(&dir.join(file), kind, done.as_bytes());
    r.apply_file("s2", file, Some(indexed), base());
    r.remove_session("s3");
    // Gone with its session, not at the next write (a host that does not
    // lead writes none).
    assert!(!r.fragments.contains_key("s3"));
    let before = scratch(&r, "s1");
    let parts = r.context_fragments();
    assert_eq!(parts.keys().collect::<Vec<_>>(), ["s1", "s2"]);
    assert!(*parts["s2"].1 == scratch(&r, "s2"));
    assert!(*parts["s1"].1 == before);
    assert!(
        *parts["s2"].1 != *parts["s1"].1,
        "s2's task shows as completed"
    );
    // A message changes no task: while the background writer holds the
    // parts (`parts`), s1's is left as is, not copied from under it.
    let (file, text) = question("msg_1", "2024-01-15T11:00:00Z");
    let dir = r.session_dir("s1");
    let kind = squad_protocol::FileKind::from_file_name(&file).unwrap();
    let indexed = crate::index::index_bytes(&dir.join(&file), kind, text.as_bytes());
    r.apply_file("s1", &file, Some(indexed), base());
    let again = r.context_fragments();
    assert!(std::sync::Arc::ptr_eq(&again["s1"].1, &parts["s1"].1));
}
