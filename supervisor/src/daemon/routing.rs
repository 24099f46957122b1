//! Message routing decisions: which messages, routed error reports and
//! blockers are due for delivery, which delivered messages are due for
//! escalation and which replies are overdue. Decisions come from
//! `squad_policies::messages`; the wiring makes the deliveries.

use crate::index::{Entry, fingerprint};
use chrono::{DateTime, Utc};
use squad_policies::messages::{
    MessagePolicy, deliver_at, escalation_at, inbox_name, is_late, parse_inbox_name, rank,
    response_overdue, routed_priority, wait_since,
};
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, Priority, Timestamp,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What a delivery carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// An agent's message file, delivered as written.
    File(PathBuf),
    /// A message squadd generates from a report, rendered when delivered.
    Routed {
        /// The message.
        routed: Routed,
        /// The report it comes from.
        from_file: PathBuf,
        /// That report, relative to the root.
        rel: String,
    },
}

/// One delivery to make.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Session directory name.
    pub session: String,
    /// Sender.
    pub from: String,
    /// Recipient.
    pub to: String,
    /// Inbox file name.
    pub name: String,
    /// Priority.
    pub priority: Priority,
    /// When the message was written (as stamped: it names the inbox file).
    pub created: DateTime<Utc>,
    /// When its wait began: `created`, or when squadd first saw it if that
    /// is earlier (set by [`Mailbox::offer`]). Waits and lateness count
    /// from here.
    pub since: DateTime<Utc>,
    /// Message id.
    pub message_id: String,
    /// What to deliver.
    pub body: Body,
}

fn utc(t: Timestamp) -> DateTime<Utc> {
    t.with_timezone(&Utc)
}

fn routed_id(parts: &str) -> String {
    format!("msg_route_{:016x}", fingerprint(parts.as_bytes()))
}

/// A message squadd writes on an agent's behalf, from a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    id: String,
    to: String,
    priority: Priority,
    created: Timestamp,
    subject: String,
    body: String,
    task: Option<String>,
}

impl Routed {
    /// The message text (rendered only when delivered).
    pub fn render(&self, rel: &str) -> Option<String> {
        Document::Message(Message {
            meta: MessageMeta {
                message_id: self.id.clone(),
                from_agent: "squadd".into(),
                to_agent: self.to.clone(),
                created_at: self.created,
                priority: self.priority,
            },
            kind: MessageType::Request,
            subject: self.subject.clone(),
            message: self.body.clone(),
            context: Some(MessageContext {
                task_id: self.task.clone(),
                component: None,
                file: Some(rel.into()),
            }),
            response_needed: None,
            response_by: None,
            in_reply_to: None,
        })
        .to_file_text()
        .ok()
    }

    /// The delivery of this routed message (its id is derived from `key`,
    /// stable across restarts, so delivery stays idempotent).
    fn delivery(mut self, session: &str, key: &str, rel: &str, from_file: &Path) -> Delivery {
        self.id = routed_id(key);
        Delivery {
            session: session.to_string(),
            from: "squadd".into(),
            name: inbox_name(self.priority, utc(self.created), &self.id),
            to: self.to.clone(),
            priority: self.priority,
            created: utc(self.created),
            since: utc(self.created),
            message_id: self.id.clone(),
            body: Body::Routed {
                routed: self,
                from_file: from_file.to_path_buf(),
                rel: rel.to_string(),
            },
        }
    }
}

/// The deliveries one file asks for (delivered or not).
pub fn file_deliveries(
    root: &Path,
    name: &str,
    dir: &Path,
    f: &crate::index::IndexedFile,
) -> Vec<Delivery> {
    let mut out = Vec::new();
    let path = f.path_in(dir);
    let rel = path
        .strip_prefix(root)
        .unwrap_or(&path)
        .display()
        .to_string();
    match &f.entry {
        Entry::Message(m) => out.push(Delivery {
            session: name.to_string(),
            from: m.from_agent.clone(),
            to: m.to_agent.clone(),
            name: inbox_name(m.priority, utc(m.created_at), &m.message_id),
            priority: m.priority,
            created: utc(m.created_at),
            since: utc(m.created_at),
            message_id: m.message_id.clone(),
            body: Body::File(path.clone()),
        }),
        Entry::Error(e) if e.requires_intervention => {
            if let Some(to) = &e.suggested_agent {
                let routed = Routed {
                    id: String::new(),
                    to: to.clone(),
                    priority: routed_priority(e.severity),
                    created: e.occurred_at,
                    subject: format!("Intervention requested: {}", e.error_type),
                    body: format!(
                        "{} reports an error (severity {}){}:\n\n{}\n\nSource: {rel}\n",
                        e.agent,
                        e.severity,
                        e.task_id
                            .as_ref()
                            .map(|t| format!(" in {t}"))
                            .unwrap_or_default(),
                        e.error_message
                    ),
                    task: e.task_id.clone(),
                };
                let key = format!("{name}|{}|{}", e.error_id, to);
                out.push(routed.delivery(name, &key, &rel, &path));
            }
        }
        Entry::Progress(p) => {
            for (n, b) in p.blockers.iter().enumerate() {
                let Some(to) = &b.requires_agent else {
                    continue;
                };
                let routed = Routed {
                    id: String::new(),
                    to: to.clone(),
                    priority: Priority::High,
                    created: b.since.unwrap_or(p.updated_at),
                    subject: format!("Blocked: {} needs {to}", p.task_id),
                    body: format!(
                        "{} is blocked on {}:\n\n{}\n\nSource: {rel}\n",
                        p.agent, p.task_id, b.description
                    ),
                    task: Some(p.task_id.clone()),
                };
                let key = format!("{name}|{rel}|{n}|{}|{to}", b.description);
                out.push(routed.delivery(name, &key, &rel, &path));
            }
        }
        _ => {}
    }
    out
}

/// Every delivery the files of a session ask for (delivered or not).
pub fn session_deliveries(
    root: &Path,
    name: &str,
    session: &crate::index::SessionIndex,
) -> Vec<Delivery> {
    session
        .files
        .values()
        .flat_map(|f| file_deliveries(root, name, &session.dir, f))
        .collect()
}

/// An inbox entry: (recipient, inbox file name).
pub type Slot = (String, String);

/// A delivered message not acknowledged yet. Its message id is the one its
/// inbox name spells (see [`Mailbox::message_id`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unread {
    /// Priority (from the inbox name).
    pub priority: Priority,
    /// When it was delivered.
    pub delivered_at: DateTime<Utc>,
}

/// An unread message whose escalation time came (see
/// [`Mailbox::take_due_escalations`]).
#[derive(Debug, Clone, PartialEq)]
pub struct DueEscalation {
    /// Recipient.
    pub to: String,
    /// Inbox file name.
    pub name: Rc<str>,
    /// Message id.
    pub message_id: String,
    /// Priority.
    pub priority: Priority,
}

/// The priorities in [`rank`](squad_policies::messages::rank) order.
const PRIORITIES: [Priority; 4] = [
    Priority::Critical,
    Priority::High,
    Priority::Medium,
    Priority::Low,
];

/// One recipient's inbox as squadd knows it.
///
/// What a delivered message costs is kept small, because a burst of
/// deliveries stays held for the life of the session: one shared name, one
/// map entry (`Some` while unread), and while unread and due to escalate
/// one entry in its priority's escalation queue.
#[derive(Debug, Clone, Default)]
struct Inbox {
    /// Every name present in `new/` or `cur/`: `Some` while in `new/`.
    names: BTreeMap<Rc<str>, Option<Unread>>,
    /// Unread messages waiting to escalate, per priority, by delivery time:
    /// the escalation delay is one per priority, so this is deadline order.
    escalations: [BTreeSet<(DateTime<Utc>, Rc<str>)>; 4],
    /// Message ids an inbox name does not spell whole (longer than
    /// `INBOX_ID_MAX`): rare, so kept aside rather than in every entry.
    long_ids: BTreeMap<Rc<str>, String>,
}

impl Inbox {
    /// The shared name of an entry, allocated once.
    fn name(&self, name: &str) -> Rc<str> {
        self.names
            .get_key_value(name)
            .map_or_else(|| Rc::from(name), |(k, _)| k.clone())
    }

    /// Marks a name unread (`replace`: even if it already is, with this
    /// delivery time); queues its escalation if the policy escalates its
    /// priority, and returns when.
    fn set_unread(
        &mut self,
        policy: &MessagePolicy,
        name: Rc<str>,
        u: Unread,
        replace: bool,
    ) -> Option<DateTime<Utc>> {
        if let Some(Some(old)) = self.names.get(&name).copied() {
            if !replace {
                return None;
            }
            self.escalations[rank(old.priority)].remove(&(old.delivered_at, name.clone()));
        }
        self.names.insert(name.clone(), Some(u));
        let at = escalation_at(policy, u.priority, u.delivered_at)?;
        self.escalations[rank(u.priority)].insert((u.delivered_at, name));
        Some(at)
    }

    /// Marks a name read (gone from `new/`): it no longer escalates.
    fn set_read(&mut self, name: &str) {
        if let Some((key, slot)) = self.names.get_key_value(name)
            && let Some(u) = *slot
        {
            let key = key.clone();
            self.escalations[rank(u.priority)].remove(&(u.delivered_at, key.clone()));
            self.long_ids.remove(name);
            self.names.insert(key, None);
        }
    }

    fn message_id(&self, name: &str) -> Option<String> {
        match self.long_ids.get(name) {
            Some(id) => Some(id.clone()),
            None => parse_inbox_name(name).map(|(_, id)| id),
        }
    }
}

/// What squadd knows of a session's inboxes and replies, kept up to date by
/// its own deliveries and the inbox watches (sans I/O). Seeded once at
/// start-up by listing the inboxes; after that no delivery check lists or
/// stats anything.
///
/// It also holds the session's escalation queue: the daemon keeps one
/// timer per session, armed at [`Mailbox::next_escalation`], rather than
/// one per unread message.
#[derive(Debug, Clone, Default)]
pub struct Mailbox {
    /// By recipient.
    inboxes: BTreeMap<String, Inbox>,
    /// Deliveries waiting for their time (low priority, recipient busy).
    pub waiting: BTreeMap<Slot, Delivery>,
    /// Replies seen, by the id of the message they answer.
    pub replies: BTreeMap<String, usize>,
    /// Messages that asked for a reply, by `response_by`: (deadline, file).
    /// A file whose deadline changed may be here twice; the check reads
    /// the file's current content.
    replies_due: BTreeSet<(DateTime<Utc>, Box<str>)>,
}

/// Where a delivery stands.
#[derive(Debug, PartialEq)]
pub enum Offer {
    /// Deliver it now.
    Now(Box<Delivery>),
    /// It waits until then (a timer is due).
    Later(DateTime<Utc>),
    /// Already delivered.
    Done,
}

impl Mailbox {
    fn inbox(&mut self, to: &str) -> &mut Inbox {
        self.inboxes.entry(to.to_string()).or_default()
    }

    /// Seeds from an inbox listing: (recipient, name, unread, mtime).
    /// Unread messages are queued for escalation (their mtime is when they
    /// were delivered); see [`Mailbox::next_escalation`].
    pub fn seed(
        &mut self,
        policy: &MessagePolicy,
        entries: Vec<(String, String, bool, Option<DateTime<Utc>>)>,
    ) {
        for (to, name, unread, at) in entries {
            let Some((priority, _)) = parse_inbox_name(&name) else {
                continue;
            };
            let inbox = self.inbox(&to);
            let name = inbox.name(&name);
            match at.filter(|_| unread) {
                Some(delivered_at) => {
                    let u = Unread {
                        priority,
                        delivered_at,
                    };
                    inbox.set_unread(policy, name, u, false);
                }
                None => {
                    inbox.names.entry(name).or_insert(None);
                }
            }
        }
    }

    /// Whether a message is in the recipient's `new/` or `cur/`.
    pub fn is_delivered(&self, to: &str, name: &str) -> bool {
        self.inboxes
            .get(to)
            .is_some_and(|i| i.names.contains_key(name))
    }

    /// A message's state if it is unread.
    pub fn unread_entry(&self, to: &str, name: &str) -> Option<Unread> {
        self.inboxes.get(to)?.names.get(name).copied().flatten()
    }

    /// Every unread message: (recipient, inbox name, state).
    pub fn unread(&self) -> impl Iterator<Item = (&str, &str, Unread)> {
        self.inboxes.iter().flat_map(|(to, inbox)| {
            inbox
                .names
                .iter()
                .filter_map(move |(name, u)| u.map(|u| (to.as_str(), &**name, u)))
        })
    }

    /// The message id of an inbox entry: the one it was delivered with, or
    /// the one its name spells.
    pub fn message_id(&self, to: &str, name: &str) -> Option<String> {
        match self.inboxes.get(to) {
            Some(inbox) => inbox.message_id(name),
            None => parse_inbox_name(name).map(|(_, id)| id),
        }
    }

    /// Offers a delivery: now, later, or never again. A delivery offered
    /// again keeps the start of its wait (see [`Delivery::since`]).
    pub fn offer(
        &mut self,
        policy: &MessagePolicy,
        mut d: Delivery,
        busy: bool,
        wall: DateTime<Utc>,
    ) -> Offer {
        if self.is_delivered(&d.to, &d.name) {
            return Offer::Done;
        }
        let slot = (d.to.clone(), d.name.clone());
        let seen = self.waiting.get(&slot).map_or(wall, |w| w.since);
        d.since = wait_since(d.since, seen.min(wall));
        let due = deliver_at(policy, d.priority, d.since, busy, wall);
        if due <= wall {
            self.waiting.remove(&slot);
            Offer::Now(Box::new(d))
        } else {
            self.waiting.insert(slot, d);
            Offer::Later(due)
        }
    }

    /// Records a delivery (unread from `at`); returns when it escalates, if
    /// its priority does.
    pub fn delivered(
        &mut self,
        policy: &MessagePolicy,
        d: &Delivery,
        at: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        if !self.waiting.is_empty() {
            self.waiting.remove(&(d.to.clone(), d.name.clone()));
        }
        let inbox = self.inbox(&d.to);
        let name = inbox.name(&d.name);
        if parse_inbox_name(&name).is_none_or(|(_, id)| id != d.message_id) {
            inbox.long_ids.insert(name.clone(), d.message_id.clone());
        }
        let u = Unread {
            priority: d.priority,
            delivered_at: at,
        };
        inbox.set_unread(policy, name, u, true)
    }

    /// The inbox file was seen present in `new/` (`Some(mtime)`) or gone
    /// from it. Returns when it escalates if it just became unread (and its
    /// priority escalates); one gone no longer escalates.
    pub fn seen(
        &mut self,
        policy: &MessagePolicy,
        to: &str,
        name: &str,
        present: Option<DateTime<Utc>>,
    ) -> Option<DateTime<Utc>> {
        match present {
            Some(at) => {
                let inbox = self.inbox(to);
                let name = inbox.name(name);
                match parse_inbox_name(&name) {
                    Some((priority, _)) => {
                        let u = Unread {
                            priority,
                            delivered_at: at,
                        };
                        inbox.set_unread(policy, name, u, false)
                    }
                    None => {
                        inbox.names.entry(name).or_insert(None);
                        None
                    }
                }
            }
            None => {
                if let Some(inbox) = self.inboxes.get_mut(to) {
                    inbox.set_read(name);
                }
                None
            }
        }
    }

    /// When the next unread message escalates (the head of each
    /// recipient's per-priority queues: a handful of entries, whatever the
    /// number of messages).
    pub fn next_escalation(&self, policy: &MessagePolicy) -> Option<DateTime<Utc>> {
        self.inboxes
            .values()
            .flat_map(|inbox| {
                inbox
                    .escalations
                    .iter()
                    .zip(PRIORITIES)
                    .filter_map(|(q, p)| escalation_at(policy, p, q.first()?.0))
            })
            .min()
    }

    /// Takes every unread message whose escalation time is at or before
    /// `now` off the escalation queue (it stays unread), earliest first per
    /// queue.
    pub fn take_due_escalations(
        &mut self,
        policy: &MessagePolicy,
        now: DateTime<Utc>,
    ) -> Vec<DueEscalation> {
        let mut out = Vec::new();
        for (to, inbox) in &mut self.inboxes {
            for (r, priority) in PRIORITIES.into_iter().enumerate() {
                while let Some((at, _)) = inbox.escalations[r].first() {
                    if escalation_at(policy, priority, *at).is_none_or(|due| due > now) {
                        break;
                    }
                    let Some((_, name)) = inbox.escalations[r].pop_first() else {
                        break;
                    };
                    let Some(message_id) = inbox.message_id(&name) else {
                        continue;
                    };
                    out.push(DueEscalation {
                        to: to.clone(),
                        name,
                        message_id,
                        priority,
                    });
                }
            }
        }
        out
    }

    /// Queues the reply check of message file `file` at `by`.
    pub fn reply_due(&mut self, by: DateTime<Utc>, file: &str) {
        self.replies_due.insert((by, file.into()));
    }

    /// The next reply deadline.
    pub fn next_reply_due(&self) -> Option<DateTime<Utc>> {
        self.replies_due.first().map(|(by, _)| *by)
    }

    /// Takes the message files whose reply deadline is at or before `now`,
    /// earliest first.
    pub fn take_due_replies(&mut self, now: DateTime<Utc>) -> Vec<Box<str>> {
        let mut out = Vec::new();
        while self.replies_due.first().is_some_and(|(by, _)| *by <= now) {
            if let Some((_, file)) = self.replies_due.pop_first() {
                out.push(file);
            }
        }
        out
    }

    /// Notes a message file coming or going (replies answer by id).
    pub fn note_reply(&mut self, in_reply_to: Option<&str>, added: bool) {
        let Some(id) = in_reply_to else { return };
        if added {
            *self.replies.entry(id.to_string()).or_insert(0) += 1;
        } else if let Some(n) = self.replies.get_mut(id) {
            *n -= 1;
            if *n == 0 {
                self.replies.remove(id);
            }
        }
    }

    /// Whether a message got a reply.
    pub fn replied(&self, message_id: &str) -> bool {
        self.replies.contains_key(message_id)
    }
}

/// Whether a delivery made at `wall` is late (its deadline counted from
/// when its wait began, with squadd's reaction time as tolerance).
pub fn late(policy: &MessagePolicy, d: &Delivery, wall: DateTime<Utc>) -> bool {
    is_late(policy, d.priority, d.since, wall)
}

/// When a message's reply becomes overdue, if it needs one.
pub fn reply_due(m: &crate::index::MessageInfo) -> Option<DateTime<Utc>> {
    m.response_by.map(utc).filter(|_| m.response_needed)
}

/// Whether a reply is overdue at `wall`.
pub fn reply_overdue(m: &crate::index::MessageInfo, replied: bool, wall: DateTime<Utc>) -> bool {
    response_overdue(m.response_needed, reply_due(m), replied, wall)
}

#[cfg(test)]
mod tests {
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
}
