//! Unit tests of message routing and notices through [`Core::step`]:
//! the outbox, deliveries made critical first, failed deliveries offered
//! again, escalations of delivered mail, standing facts tapped once.

use super::batch;
use super::tests::*;
use super::timer::Timer;
use super::{Core, Effect, Input, Root};
use crate::daemon::routing::{Body, Delivery};
use crate::events::EventKind;
use std::path::PathBuf;

pub(super) fn message(id: &str, priority: &str) -> (String, String) {
    (
        format!("role-comm-alice-to-bob-{id}.md"),
        format!(
            "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:00:00Z\n  priority: {priority}\ntype: notification\nsubject: s\nmessage: m\n"
        ),
    )
}

pub(super) fn applied(file: &str) -> Input<'static> {
    Input::FileApplied {
        session: SESSION.into(),
        file: file.into(),
        own: None,
    }
}

pub(super) fn outboxed(effects: &[Effect]) -> Vec<Delivery> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Outbox { delivery, .. } => Some((**delivery).clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_message_file_goes_to_the_outbox_once_and_its_reply_deadline_is_queued() {
    let (file, text) = question("msg_q", "2024-01-15T10:30:00Z");
    let mut r = root_with(&[(file.clone(), text)]);
    let effects = Core::new(id(0), &mut r).step(applied(&file), now(0));
    let [
        Effect::CancelTimer(Timer::Delivery { to, .. }),
        Effect::Outbox { root, delivery },
        Effect::SetTimerEarlierAt {
            timer: Timer::ReplyDue { .. },
            at,
        },
    ] = effects.as_slice()
    else {
        panic!("cancel, outbox, reply deadline: {effects:?}");
    };
    assert_eq!((to.as_str(), *root), ("bob", id(0)));
    assert_eq!(delivery.message_id, "msg_q");
    assert_eq!(*at, base() + chrono::Duration::minutes(30));
    // Written by the shell, then the same file seen again (a rescan): not
    // delivered twice.
    let d = (**delivery).clone();
    let input = Input::Delivered {
        delivery: &d,
        at: base(),
    };
    let effects = Core::new(id(0), &mut r).step(input, now(0));
    assert!(outboxed(&effects).is_empty(), "{effects:?}");
    let effects = Core::new(id(0), &mut r).step(applied(&file), now(1));
    assert!(outboxed(&effects).is_empty(), "{effects:?}");
}

#[test]
fn squadds_own_notice_is_delivered_from_the_bytes_it_wrote() {
    let (file, text) = message("msg_n", "high");
    let mut r = root_with(&[(file.clone(), text.clone())]);
    let bytes: std::sync::Arc<[u8]> = text.into_bytes().into();
    let input = Input::FileApplied {
        session: SESSION.into(),
        file,
        own: Some(bytes.clone()),
    };
    let effects = Core::new(id(0), &mut r).step(input, now(0));
    let out = outboxed(&effects);
    assert_eq!(out.len(), 1, "{effects:?}");
    assert!(
        matches!(&out[0].body, Body::Text { bytes: b, .. } if *b == bytes),
        "{:?}",
        out[0].body
    );
}

#[test]
fn deliveries_of_a_step_are_made_critical_first() {
    let low = message("msg_low", "low");
    let medium = message("msg_medium", "medium");
    let critical = message("msg_critical", "critical");
    let mut r = root_with(&[low.clone(), medium.clone(), critical.clone()]);
    let mut outbox = Vec::new();
    for file in [&low.0, &medium.0, &critical.0] {
        let effects = Core::new(id(0), &mut r).step(applied(file), now(0));
        outbox.extend(outboxed(&effects).into_iter().map(|d| (id(0), d)));
    }
    batch::outbox_order(&mut outbox);
    let order: Vec<&str> = outbox.iter().map(|(_, d)| d.message_id.as_str()).collect();
    assert_eq!(order.first(), Some(&"msg_critical"), "{order:?}");
    assert!(order.len() >= 2, "{order:?}");
}

/// A root whose session holds one message file, routed at `now(0)`: the
/// delivery it put in the outbox.
pub(super) fn routed((file, text): (String, String)) -> (Root, Delivery) {
    let mut r = root_with(&[(file.clone(), text)]);
    let effects = Core::new(id(0), &mut r).step(applied(&file), now(0));
    let d = outboxed(&effects).pop().unwrap();
    (r, d)
}

#[test]
fn a_delivery_that_failed_for_a_passing_reason_waits_and_is_offered_again() {
    let (mut r, d) = routed(message("msg_m", "high"));
    let timer = Timer::Delivery {
        root: id(0),
        session: SESSION.into(),
        to: "bob".into(),
        name: d.name.clone(),
    };
    let effects = Core::new(id(0), &mut r).step(Input::DeliveryFailed(Box::new(d.clone())), now(0));
    assert_eq!(
        effects,
        vec![Effect::SetTimer {
            timer: timer.clone(),
            after: super::mail::RETRY_DELAY
        }]
    );
    // Its timer fires: into the outbox, then flushed; nothing lost.
    let due = || Input::DeliveryDue {
        session: SESSION.into(),
        to: "bob".into(),
        name: d.name.clone(),
    };
    let effects = Core::new(id(0), &mut r).step(due(), now(1));
    assert_eq!(outboxed(&effects), vec![d.clone()]);
    assert_eq!(effects.last(), Some(&Effect::FlushOutbox));
    // Fired again with nothing waiting: nothing.
    assert!(Core::new(id(0), &mut r).step(due(), now(2)).is_empty());
}

#[test]
fn a_delivered_message_past_its_escalation_time_is_escalated_at_once() {
    let (mut r, d) = routed(message("msg_c", "critical"));
    let input = Input::Delivered {
        delivery: &d,
        at: base(),
    };
    let effects = Core::new(id(0), &mut r).step(input, now(24 * 60));
    assert_eq!(
        effects,
        vec![Effect::RunEscalations {
            root: id(0),
            session: SESSION.into()
        }]
    );
}

pub(super) fn plan(task: u8, agent: &str, requires: &[u8]) -> (String, String) {
    let requires = requires
        .iter()
        .map(|t| format!("task_{t}"))
        .collect::<Vec<_>>()
        .join(", ");
    (
        format!("role-plan-{agent}-task_{task}.md"),
        format!(
            "meta:\n  task_id: task_{task}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ndependencies:\n  requires: [{requires}]\n  blocks: []\ninstruction: x\n"
        ),
    )
}

pub(super) fn ready(task: &str, agent: &str) -> EventKind {
    EventKind::TaskReady {
        task_id: task.into(),
        agent: agent.into(),
    }
}

pub(super) fn notice_files(effects: &[Effect]) -> Vec<(String, PathBuf, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::WriteNotice(n) => Some((n.session.clone(), n.path.clone(), n.text.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_loaded_session_taps_each_standing_fact_once() {
    let mut r = root_with(&[plan(1, "bob", &[]), plan(2, "carol", &[1])]);
    let input = Input::SessionLoaded {
        session: SESSION.into(),
    };
    assert_eq!(
        Core::new(id(0), &mut r).step(input, now(0)),
        vec![Effect::Tap {
            root: id(0),
            session: SESSION.into(),
            kind: ready("task_1", "bob"),
        }]
    );
    let none = Input::SessionLoaded {
        session: "gone".into(),
    };
    assert!(Core::new(id(0), &mut r).step(none, now(0)).is_empty());
}

#[test]
fn a_fact_tapped_twice_is_one_notice_and_a_fact_no_longer_true_none() {
    let mut r = root_with(&[plan(1, "bob", &[]), plan(2, "carol", &[1])]);
    let facts = vec![
        (SESSION.to_string(), None, ready("task_1", "bob")),
        (SESSION.to_string(), None, ready("task_1", "bob")),
        // Not ready (task_1 is not completed): told nothing.
        (SESSION.to_string(), None, ready("task_2", "carol")),
    ];
    let effects = Core::new(id(0), &mut r).step(Input::FactsTapped(facts), now(0));
    let files = notice_files(&effects);
    assert_eq!(files.len(), 1, "{effects:?}");
    assert_eq!(effects.len(), 1, "{effects:?}");
    let (session, path, text) = &files[0];
    assert_eq!(session, SESSION);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("role-comm-squadd-to-bob-msg_squadd_ready_"),
        "{name}"
    );
    assert_eq!(path, &r.session_dir(SESSION).join(&name));
    assert!(text.contains("Task task_1 is ready"), "{text}");
    // Written (the file is the record): the same fact later, after a
    // restart too, is never told again.
    let dir = r.session_dir(SESSION);
    let f = crate::index::index_bytes(
        &dir.join(&name),
        squad_protocol::FileKind::Message,
        text.as_bytes(),
    );
    assert!(f.diagnostics.iter().all(|d| !d.is_error()), "{f:?}");
    r.apply_file(SESSION, &name, Some(f), base());
    let again = vec![(SESSION.to_string(), None, ready("task_1", "bob"))];
    let effects = Core::new(id(0), &mut r).step(Input::FactsTapped(again), now(5));
    assert!(effects.is_empty(), "{effects:?}");
}

/// The shell hands each root its whole batch of tapped events
/// (`Input::NoticesTapped`, issue 22): one notice per file across the
/// batch, an event of no session skipped, in tapped order; with
/// `cluster:` a follower tells nothing.
#[test]
fn a_batch_of_tapped_events_is_one_notice_per_file_in_order_and_only_the_leader_tells() {
    let mut r = root_with(&[plan(1, "bob", &[]), plan(3, "dan", &[])]);
    let s = || Some(SESSION.to_string());
    let events = vec![
        (s(), None, ready("task_3", "dan")),
        // Of no session (a root-level event): concerns no agent.
        (None, None, ready("task_1", "bob")),
        (s(), None, ready("task_1", "bob")),
        // The same fact again later in the batch: the same file, once.
        (s(), None, ready("task_3", "dan")),
        (s(), None, ready("task_1", "bob")),
    ];
    let effects = Core::new(id(0), &mut r).step(Input::NoticesTapped(events.clone()), now(0));
    let names: Vec<String> = notice_files(&effects)
        .iter()
        .map(|(_, p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(effects.len(), 2, "{effects:?}");
    assert!(
        names[0].starts_with("role-comm-squadd-to-dan-")
            && names[1].starts_with("role-comm-squadd-to-bob-"),
        "{names:?}"
    );
    // Only the events of no session: nothing.
    let none = vec![(None, None, ready("task_1", "bob"))];
    assert!(
        Core::new(id(0), &mut r)
            .step(Input::NoticesTapped(none), now(0))
            .is_empty()
    );
    // A follower (cluster:, not the leader) tells nothing.
    r.leads = false;
    assert!(
        Core::new(id(0), &mut r)
            .step(Input::NoticesTapped(events), now(0))
            .is_empty()
    );
}
