//! Tests of [`super`].

use super::*;
use chrono::TimeZone;

fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 15, h, m, s).unwrap()
}

fn delivery(priority: Priority, created: DateTime<Utc>) -> Delivery {
    Delivery {
        session: "20240115T100000Z".into(),
        from: "alice".into(),
        to: "bob".into(),
        name: inbox_name(priority, created, "msg_1"),
        priority,
        created,
        since: created,
        message_id: "msg_1".into(),
        body: Body::File(PathBuf::from("/p/m.md")),
    }
}

fn policy() -> MessagePolicy {
    squad_policies::Policy::defaults().messages
}

/// A low-priority message stamped a day ahead was held until a day plus
/// `low_max_wait`: the wait counts from when squadd first saw it.
#[test]
fn a_future_stamp_waits_from_when_squadd_first_saw_it() {
    let p = policy();
    let mut mail = Mailbox::default();
    let seen = t(10, 0, 0);
    let d = delivery(Priority::Low, t(10, 0, 0) + chrono::Duration::days(1));
    let max = chrono::Duration::from_std(p.low_max_wait).unwrap();
    assert_eq!(
        mail.offer(&p, d.clone(), true, seen),
        Offer::Later(seen + max)
    );
    // Offered again later (its file changed, the recipient is still
    // busy): the wait keeps its start.
    assert_eq!(
        mail.offer(&p, d.clone(), true, t(10, 5, 0)),
        Offer::Later(seen + max)
    );
    // Its time came: delivered.
    let waiting = mail
        .waiting
        .remove(&(d.to.clone(), d.name.clone()))
        .unwrap();
    match mail.offer(&p, waiting, true, seen + max) {
        Offer::Now(d) => assert_eq!(d.since, seen),
        other => panic!("{other:?}"),
    }
}

/// Every critical message was `late` (deliver_within 0 s): a delivery
/// within squadd's reaction time is on time.
#[test]
fn a_prompt_critical_delivery_is_on_time_and_a_delayed_one_late() {
    let p = policy();
    let mut mail = Mailbox::default();
    let written = t(10, 0, 0);
    let Offer::Now(d) = mail.offer(
        &p,
        delivery(Priority::Critical, written),
        false,
        t(10, 0, 1),
    ) else {
        panic!("critical is delivered at once");
    };
    assert!(!late(&p, &d, t(10, 0, 1)));
    assert!(late(&p, &d, t(10, 10, 0)), "written ten minutes before");
    // Stamped in the future, delivered at once: on time.
    let mut mail = Mailbox::default();
    let ahead = delivery(Priority::Critical, t(12, 0, 0));
    let Offer::Now(d) = mail.offer(&p, ahead, false, t(10, 0, 0)) else {
        panic!("critical is delivered at once");
    };
    assert!(!late(&p, &d, t(10, 0, 0)));
}

/// One step of an escalation scenario (times in minutes after 10:00;
/// default policy: critical escalates after 2 min, high 10, medium 30,
/// low never).
enum Step {
    /// squadd delivers message `id` to `to`.
    Deliver(&'static str, &'static str, Priority, i64),
    /// The inbox watch saw the entry present in `new/` (mtime).
    Appears(&'static str, &'static str, Priority, i64),
    /// The entry went from `new/` (acknowledged or removed).
    Gone(&'static str, &'static str, Priority),
    /// The next escalation time, if any.
    Next(Option<i64>),
    /// Takes what is due then: these ids, in this order.
    Due(i64, &'static [&'static str]),
    /// The unread count.
    Unread(usize),
}

fn at(min: i64) -> DateTime<Utc> {
    t(10, 0, 0) + chrono::Duration::minutes(min)
}

fn name_of(id: &str, p: Priority) -> String {
    inbox_name(p, t(9, 0, 0), id)
}

fn run(mail: &mut Mailbox, steps: &[Step]) {
    let p = policy();
    for (n, step) in steps.iter().enumerate() {
        match *step {
            Step::Deliver(to, id, priority, min) => {
                let mut d = delivery(priority, t(9, 0, 0));
                d.to = to.into();
                d.name = name_of(id, priority);
                d.message_id = id.into();
                let want = escalation_at(&p, priority, at(min));
                assert_eq!(mail.delivered(&p, &d, at(min)), want, "step {n}");
                assert!(mail.is_delivered(to, &d.name), "step {n}");
            }
            Step::Appears(to, id, priority, min) => {
                mail.seen(&p, to, &name_of(id, priority), Some(at(min)));
            }
            Step::Gone(to, id, priority) => {
                let name = name_of(id, priority);
                assert_eq!(mail.seen(&p, to, &name, None), None, "step {n}");
                assert!(mail.unread_entry(to, &name).is_none(), "step {n}");
                // Still delivered: never delivered again.
                assert!(mail.is_delivered(to, &name), "step {n}");
            }
            Step::Next(want) => {
                assert_eq!(mail.next_escalation(&p), want.map(at), "step {n}")
            }
            Step::Due(min, want) => {
                let due: Vec<String> = mail
                    .take_due_escalations(&p, at(min))
                    .into_iter()
                    .map(|d| d.message_id)
                    .collect();
                assert_eq!(due, want, "step {n}");
            }
            Step::Unread(want) => assert_eq!(mail.unread().count(), want, "step {n}"),
        }
    }
}

#[test]
fn the_escalation_queue_holds_what_is_unread_in_deadline_order() {
    use Priority::*;
    use Step::*;
    let cases: &[(&str, &[Step])] = &[
        (
            "acknowledged before due: never escalates",
            &[
                Deliver("bob", "msg_1", Medium, 0),
                Deliver("bob", "msg_2", Medium, 1),
                Next(Some(30)),
                Gone("bob", "msg_1", Medium),
                // The session's timer may still fire at 30: nothing due.
                Due(30, &[]),
                Next(Some(31)),
                Due(31, &["msg_2"]),
                Next(None),
                // Taken off the queue, still unread (status counts it).
                Unread(1),
            ],
        ),
        (
            "removed from new/ (not moved to cur/): the same",
            &[
                Deliver("carol", "msg_1", High, 0),
                Gone("carol", "msg_1", High),
                Next(None),
                Due(60, &[]),
                Unread(0),
            ],
        ),
        (
            "two priorities: each in its own delay",
            &[
                Deliver("bob", "msg_m", Medium, 0),
                Deliver("bob", "msg_c1", Critical, 5),
                Deliver("carol", "msg_h", High, 6),
                Deliver("bob", "msg_c2", Critical, 7),
                Next(Some(7)),
                Due(6, &[]),
                Due(7, &["msg_c1"]),
                Next(Some(9)),
                Due(20, &["msg_c2", "msg_h"]),
                Next(Some(30)),
                Due(30, &["msg_m"]),
                Next(None),
                Unread(4),
            ],
        ),
        (
            "low never escalates (default policy) and is not queued",
            &[Deliver("bob", "msg_l", Low, 0), Next(None), Unread(1)],
        ),
        (
            "delivered again: the later time counts, once",
            &[
                Deliver("bob", "msg_1", Critical, 0),
                Deliver("bob", "msg_1", Critical, 4),
                Next(Some(6)),
                Due(6, &["msg_1"]),
                Due(60, &[]),
            ],
        ),
        (
            "seen in new/ after its delivery: the delivery time stays",
            &[
                Deliver("bob", "msg_1", Critical, 0),
                Appears("bob", "msg_1", Critical, 1),
                Next(Some(2)),
            ],
        ),
        (
            "moved back from cur/ to new/: unread again, from its mtime",
            &[
                Deliver("bob", "msg_1", Critical, 0),
                Gone("bob", "msg_1", Critical),
                Appears("bob", "msg_1", Critical, 10),
                Next(Some(12)),
                Due(12, &["msg_1"]),
            ],
        ),
    ];
    for (what, steps) in cases {
        eprintln!("case: {what}");
        run(&mut Mailbox::default(), steps);
    }
}

/// After a restart the listing is all squadd knows: unread entries
/// escalate from their mtime, acknowledged ones (in `cur/`) never.
#[test]
fn a_reseeded_mailbox_escalates_what_is_unread() {
    use Priority::*;
    use Step::*;
    let p = policy();
    let mut mail = Mailbox::default();
    let listing = vec![
        ("bob".into(), name_of("msg_1", Medium), true, Some(at(0))),
        ("bob".into(), name_of("msg_2", Medium), false, None),
        (
            "carol".into(),
            name_of("msg_3", Critical),
            true,
            Some(at(1)),
        ),
        // In both (a copy left behind): unread.
        ("carol".into(), name_of("msg_4", High), false, None),
        ("carol".into(), name_of("msg_4", High), true, Some(at(2))),
        // Not an inbox name: ignored.
        ("carol".into(), "notes.txt".into(), true, Some(at(0))),
        // No mtime: delivered, not counted as unread.
        ("bob".into(), name_of("msg_5", Critical), true, None),
    ];
    mail.seed(&p, listing);
    assert!(mail.is_delivered("bob", &name_of("msg_2", Medium)));
    assert!(mail.is_delivered("bob", &name_of("msg_5", Critical)));
    run(
        &mut mail,
        &[
            Unread(3),
            Next(Some(3)),
            Gone("carol", "msg_3", Critical),
            Next(Some(12)),
            Due(12, &["msg_4"]),
            Due(30, &["msg_1"]),
            Next(None),
        ],
    );
}

/// A message id longer than an inbox name keeps is escalated under the
/// id it was delivered with.
#[test]
fn a_long_message_id_is_kept_while_unread() {
    let p = policy();
    let mut mail = Mailbox::default();
    let id = format!("msg_{}", "x".repeat(200));
    let mut d = delivery(Priority::Critical, t(9, 0, 0));
    d.message_id = id.clone();
    d.name = inbox_name(d.priority, d.created, &id);
    assert_ne!(parse_inbox_name(&d.name).map(|(_, i)| i), Some(id.clone()));
    mail.delivered(&p, &d, at(0));
    assert_eq!(mail.message_id("bob", &d.name), Some(id.clone()));
    let due = mail.take_due_escalations(&p, at(2));
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].message_id, id);
}

/// Reply deadlines come out in deadline order, only the due ones, and a
/// file queued twice at the same deadline once.
#[test]
fn reply_deadlines_are_taken_in_order_and_only_when_due() {
    let mut mail = Mailbox::default();
    assert_eq!(mail.next_reply_due(), None);
    mail.reply_due(at(10), "b.md");
    mail.reply_due(at(5), "a.md");
    mail.reply_due(at(10), "b.md");
    mail.reply_due(at(20), "c.md");
    assert_eq!(mail.next_reply_due(), Some(at(5)));
    assert!(mail.take_due_replies(at(4)).is_empty());
    let due = mail.take_due_replies(at(10));
    assert_eq!(due, vec![Box::from("a.md"), Box::from("b.md")]);
    assert_eq!(mail.next_reply_due(), Some(at(20)));
    assert_eq!(mail.take_due_replies(at(30)).len(), 1);
    assert_eq!(mail.next_reply_due(), None);
}
