//! Unit tests of a delivery's way through the core ([`Core::step`]): a
//! reused message id refused or left alone (`Input::Route`), one delivery
//! of the outbox written here or not (`Input::Deliver`), what its write
//! calls for (`Input::InboxWritten`) and what is said once its inbox is
//! durable (`Input::DeliverySynced`), each with the order of its effects.

use super::deliver::{Announce, BodyRead, DeliveryFacts, Written};
use super::mail::RETRY_DELAY;
use super::tests::*;
use super::tests_mail::{applied, message, outboxed, routed};
use super::timer::Timer;
use super::{Core, Effect, Input, Root};
use crate::cluster::replicate::Owner;
use crate::daemon::routing::{Body, Delivery};
use crate::events::EventKind;
use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// Two questions of one session with the same id `msg_x` (`a…` sorts
/// first, so it keeps the id unless `b…` was delivered already), each
/// asking for a reply by 10:30.
fn clashing() -> (Root, String, String) {
    let text = |to: &str| {
        format!(
            "meta:\n  message_id: msg_x\n  from_agent: alice\n  to_agent: {to}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ntype: question\nsubject: q\nmessage: q?\nresponse_needed: true\nresponse_by: 2024-01-15T10:30:00Z\n"
        )
    };
    let a = "role-comm-alice-to-bob-msg_x.md".to_string();
    let b = "role-comm-alice-to-carol-msg_x.md".to_string();
    let r = root_with(&[(a.clone(), text("bob")), (b.clone(), text("carol"))]);
    (r, a, b)
}

fn route<'a>(file: &str, copy_holds: &'a dyn Fn(&Path, &str, u64) -> bool) -> Input<'a> {
    Input::Route {
        session: SESSION.into(),
        file: file.into(),
        own: None,
        copy_holds,
    }
}

fn refused(effects: &[Effect]) -> Vec<(String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit {
                kind: EventKind::MessageRefused { file, kept_by, .. },
                ..
            } => Some((file.clone(), kept_by.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_reused_message_id_is_refused_visibly_and_the_first_by_name_keeps_it() {
    let (mut r, a, b) = clashing();
    let asked = RefCell::new(0);
    let never = |_: &Path, _: &str, _: u64| {
        *asked.borrow_mut() += 1;
        false
    };
    let effects = Core::new(id(0), &mut r).step(route(&b, &never), now(0));
    assert_eq!(refused(&effects), vec![(b.clone(), a.clone())]);
    assert!(outboxed(&effects).is_empty(), "{effects:?}");
    let [Effect::Emit { session, path, .. }] = effects.as_slice() else {
        panic!("only the refusal: {effects:?}");
    };
    assert_eq!(session.as_deref(), Some(SESSION));
    assert!(path.as_ref().is_some_and(|p| p.ends_with(&b)), "{path:?}");
    // The one that keeps it is routed.
    let effects = Core::new(id(0), &mut r).step(route(&a, &never), now(0));
    assert!(refused(&effects).is_empty(), "{effects:?}");
    assert_eq!(outboxed(&effects).len(), 1, "{effects:?}");
    // Nothing was delivered yet, so no inbox copy had to be read.
    assert_eq!(*asked.borrow(), 0);
}

#[test]
fn a_message_delivered_before_its_id_clashed_keeps_it_as_its_inbox_copy_says() {
    let (mut r, a, b) = clashing();
    // `b` alone was delivered (as before a restart, when `a` did not exist).
    let d = {
        let never = |_: &Path, _: &str, _: u64| false;
        let effects = Core::new(id(0), &mut r).step(route(&b, &never), now(0));
        assert!(outboxed(&effects).is_empty(), "{effects:?}");
        let file = r.sessions[SESSION].index().files.get(&b).unwrap().clone();
        crate::daemon::routing::file_deliveries(&r.root, SESSION, &r.session_dir(SESSION), &file)
            .pop()
            .unwrap()
    };
    let input = Input::Delivered {
        delivery: &d,
        at: base(),
    };
    Core::new(id(0), &mut r).step(input, now(0));
    let fingerprint = r.sessions[SESSION]
        .index()
        .files
        .get(&b)
        .unwrap()
        .fingerprint;
    let inbox = crate::inbox::inbox_dir(&r.session_dir(SESSION), "carol");
    let holds = |dir: &Path, name: &str, f: u64| dir == inbox && name == d.name && f == fingerprint;
    // Its copy holds its bytes: `b` keeps the id, `a` is refused, and `b`
    // routed again (a restart) is left alone, neither refused nor sent.
    let effects = Core::new(id(0), &mut r).step(route(&a, &holds), now(1));
    assert_eq!(refused(&effects), vec![(a.clone(), b.clone())]);
    assert!(outboxed(&effects).is_empty(), "{effects:?}");
    // (Not even its reply deadline queued again.)
    let effects = Core::new(id(0), &mut r).step(route(&b, &holds), now(1));
    assert!(effects.is_empty(), "{effects:?}");
    // A copy holding other bytes is not `b`'s delivery: the first by name
    // keeps the id.
    let other = |_: &Path, _: &str, _: u64| false;
    let effects = Core::new(id(0), &mut r).step(route(&a, &other), now(1));
    assert!(refused(&effects).is_empty(), "{effects:?}");
    assert_eq!(outboxed(&effects).len(), 1, "{effects:?}");
}

/// The shell's answers, scripted; counts the bodies read.
struct Facts {
    owner: Option<Owner>,
    body: BodyRead,
    read: RefCell<Vec<PathBuf>>,
}

impl Facts {
    fn new(owner: Option<Owner>, body: BodyRead) -> Facts {
        Facts {
            owner,
            body,
            read: RefCell::new(Vec::new()),
        }
    }
}

impl DeliveryFacts for Facts {
    fn owner(&self, _: &str, _: &str, _: &str) -> Option<Owner> {
        self.owner.clone()
    }
    fn body(&self, path: &Path) -> BodyRead {
        self.read.borrow_mut().push(path.to_path_buf());
        self.body.clone()
    }
}

fn deliver(r: &mut Root, d: &Delivery, facts: &Facts) -> Vec<Effect> {
    let input = Input::Deliver {
        delivery: Box::new(d.clone()),
        facts,
    };
    Core::new(id(0), r).step(input, now(0))
}

fn retry(d: &Delivery) -> Vec<Effect> {
    vec![Effect::SetTimer {
        timer: Timer::Delivery {
            root: id(0),
            session: SESSION.into(),
            to: d.to.clone(),
            name: d.name.clone(),
        },
        after: RETRY_DELAY,
    }]
}

#[test]
fn a_delivery_of_the_outbox_is_written_only_here_only_from_a_body_read_and_retried_on_a_passing_failure()
 {
    let (mut r, d) = routed(message("msg_m", "high"));
    assert!(matches!(d.body, Body::File(_)), "{:?}", d.body);
    // Read and written.
    let facts = Facts::new(None, BodyRead::Bytes(b"the bytes".to_vec()));
    let effects = deliver(&mut r, &d, &facts);
    assert_eq!(
        effects,
        vec![Effect::WriteInbox {
            root: id(0),
            delivery: Box::new(d.clone()),
            bytes: b"the bytes".to_vec(),
            routed_from: None,
        }]
    );
    // The recipient's host delivers it (a cluster): nothing here, nothing
    // read.
    let facts = Facts::new(Some(Owner::Elsewhere("h2".into())), BodyRead::Gone);
    assert!(deliver(&mut r, &d, &facts).is_empty());
    assert!(facts.read.borrow().is_empty());
    // Not known yet, or a body not read for the machine's reason: waits,
    // offered again after the retry delay.
    let facts = Facts::new(Some(Owner::Unknown), BodyRead::Gone);
    assert_eq!(deliver(&mut r, &d, &facts), retry(&d));
    assert!(facts.read.borrow().is_empty());
    let facts = Facts::new(Some(Owner::Here), BodyRead::Transient);
    assert_eq!(deliver(&mut r, &d, &facts), retry(&d));
    // Gone meanwhile: its own event brings it back.
    let facts = Facts::new(None, BodyRead::Gone);
    assert!(deliver(&mut r, &d, &facts).is_empty());
    // squadd's own notice goes from memory: no body read.
    let mut own = d.clone();
    own.body = Body::Text {
        path: PathBuf::from("/x"),
        bytes: b"own".to_vec().into(),
    };
    let facts = Facts::new(None, BodyRead::Gone);
    let effects = deliver(&mut r, &own, &facts);
    assert!(
        matches!(effects.as_slice(), [Effect::WriteInbox { bytes, .. }] if bytes == b"own"),
        "{effects:?}"
    );
    assert!(facts.read.borrow().is_empty());
    // A session going away is never recreated: nothing is asked or written.
    r.remove_session(SESSION);
    let facts = Facts::new(Some(Owner::Unknown), BodyRead::Transient);
    assert!(deliver(&mut r, &d, &facts).is_empty());
    assert!(facts.read.borrow().is_empty());
}

fn written(r: &mut Root, d: &Delivery, how: Written, minutes: i64) -> Vec<Effect> {
    let input = Input::InboxWritten {
        delivery: Box::new(d.clone()),
        routed_from: None,
        written: how,
        at: base(),
    };
    Core::new(id(0), r).step(input, now(minutes))
}

#[test]
fn a_fresh_write_is_recorded_watched_then_announced_last_and_one_there_before_is_not_announced() {
    let (mut r, d) = routed(message("msg_m", "high"));
    let new_dir = crate::inbox::inbox_dir(&r.session_dir(SESSION), "bob").join("new");
    let effects = written(&mut r, &d, Written::Fresh, 0);
    let watch = Effect::Watch {
        root: id(0),
        dir: new_dir.clone(),
    };
    let at_watch = effects.iter().position(|e| *e == watch);
    let Some(Effect::Announce(a)) = effects.last() else {
        panic!("announced last: {effects:?}");
    };
    assert_eq!(at_watch, Some(effects.len() - 2), "{effects:?}");
    assert_eq!(
        **a,
        Announce {
            root: id(0),
            delivery: Box::new(d.clone()),
            path: new_dir.join(&d.name),
            new_dir: new_dir.clone(),
            late: false,
            routed_from: None,
        }
    );
    // Recorded as delivered: its file routed again (a rescan) is not sent
    // twice.
    let (file, _) = message("msg_m", "high");
    let effects = Core::new(id(0), &mut r).step(applied(&file), now(1));
    assert!(outboxed(&effects).is_empty(), "{effects:?}");
    // There already (delivered before a restart): recorded and watched,
    // never announced again (its hook ran then).
    let (mut r, d) = routed(message("msg_m", "high"));
    let effects = written(&mut r, &d, Written::Before, 0);
    assert_eq!(effects.last(), Some(&watch), "{effects:?}");
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::Announce(_))),
        "{effects:?}"
    );
}

#[test]
fn a_write_failed_for_a_passing_reason_is_retried_and_one_failed_otherwise_is_reported() {
    let (mut r, d) = routed(message("msg_m", "high"));
    assert_eq!(written(&mut r, &d, Written::Transient, 0), retry(&d));
    let effects = written(&mut r, &d, Written::Failed("EACCES".into()), 0);
    assert_eq!(
        effects,
        vec![Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: None,
            kind: EventKind::OutputFailed {
                output: "inbox of bob".into(),
                error: "EACCES".into(),
            },
        }]
    );
    // Not recorded as delivered: offered again, it goes to the outbox.
    let effects = Core::new(id(0), &mut r).step(
        Input::DeliveryDue {
            session: SESSION.into(),
            to: d.to.clone(),
            name: d.name.clone(),
        },
        now(1),
    );
    assert_eq!(outboxed(&effects), vec![d.clone()]);
}

#[test]
fn a_durable_delivery_is_announced_after_its_inbox_fsync_failure_is_said() {
    let (mut r, d) = routed(message("msg_m", "critical"));
    // Made an hour after it was written: late for a critical message.
    let input = Input::InboxWritten {
        delivery: Box::new(d.clone()),
        routed_from: None,
        written: Written::Fresh,
        at: base() + chrono::Duration::hours(1),
    };
    let effects = Core::new(id(0), &mut r).step(input, now(60));
    let Some(Effect::Announce(a)) = effects.last().cloned() else {
        panic!("announced: {effects:?}");
    };
    assert!(a.late, "{a:?}");
    let delivered = |late| Effect::Emit {
        root: id(0),
        session: Some(SESSION.into()),
        path: Some(a.path.clone()),
        kind: EventKind::MessageDelivered {
            to: "bob".into(),
            message_id: "msg_m".into(),
            priority: "critical".into(),
            late,
            routed_from: None,
        },
    };
    let synced = |fsync_error: Option<&str>| Input::DeliverySynced {
        announce: a.clone(),
        fsync_error: fsync_error.map(str::to_string),
    };
    let effects = Core::new(id(0), &mut r).step(synced(None), now(60));
    assert_eq!(effects, vec![delivered(true)]);
    let effects = Core::new(id(0), &mut r).step(synced(Some("EIO")), now(60));
    let [
        Effect::Emit {
            kind: EventKind::OutputFailed { error, .. },
            ..
        },
        said,
    ] = effects.as_slice()
    else {
        panic!("the fsync failure, then the delivery: {effects:?}");
    };
    assert!(error.contains("EIO") && error.contains("fsync"), "{error}");
    assert_eq!(*said, delivered(true));
}

#[test]
fn deliveries_a_killed_squadd_never_audited_are_said_once_as_they_were_made() {
    // Issue 41.7: the shell finds them by their marks and leaves out those
    // the audit log says; each one found is said, no hook, nothing written.
    let (mut r, d) = routed(message("msg_m", "high"));
    let path = crate::inbox::inbox_dir(&r.session_dir(SESSION), "bob")
        .join("cur")
        .join(&d.name);
    let input = Input::DeliveriesUnaudited {
        session: SESSION.into(),
        found: vec![
            ("bob".into(), d.name.clone(), path.clone()),
            ("bob".into(), "not-an-inbox-name.md".into(), path.clone()),
        ],
    };
    let effects = Core::new(id(0), &mut r).step(input, now(0));
    assert_eq!(
        effects,
        vec![Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(path),
            kind: EventKind::MessageDelivered {
                to: "bob".into(),
                message_id: "msg_m".into(),
                priority: "high".into(),
                late: false,
                routed_from: None,
            },
        }]
    );
}
