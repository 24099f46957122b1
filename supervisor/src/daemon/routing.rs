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
pub(crate) enum Body {
    /// An agent's message file, delivered as written.
    File(PathBuf),
    /// A message file squadd itself just wrote (a notice), delivered from
    /// the bytes it wrote: never read back.
    Text {
        /// The message file.
        path: PathBuf,
        /// Its bytes.
        bytes: std::sync::Arc<[u8]>,
    },
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
pub(crate) struct Delivery {
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
pub(crate) struct Routed {
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
    pub(crate) fn render(&self, rel: &str) -> Option<String> {
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
pub(crate) fn file_deliveries(
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

#[cfg(test)]
/// Every delivery the files of a session ask for (delivered or not).
pub(crate) fn session_deliveries(
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
pub(crate) type Slot = (String, String);

/// A delivered message not acknowledged yet. Its message id is the one its
/// inbox name spells (see [`Mailbox::message_id`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Unread {
    /// Priority (from the inbox name).
    pub priority: Priority,
    /// When it was delivered.
    pub delivered_at: DateTime<Utc>,
}

/// An unread message whose escalation time came (see
/// [`Mailbox::take_due_escalations`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DueEscalation {
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
pub(crate) struct Mailbox {
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
pub(crate) enum Offer {
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
    pub(crate) fn seed(
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
    pub(crate) fn is_delivered(&self, to: &str, name: &str) -> bool {
        self.inboxes
            .get(to)
            .is_some_and(|i| i.names.contains_key(name))
    }

    #[cfg(test)]
    /// A message's state if it is unread.
    pub(crate) fn unread_entry(&self, to: &str, name: &str) -> Option<Unread> {
        self.inboxes.get(to)?.names.get(name).copied().flatten()
    }

    /// Every unread message: (recipient, inbox name, state).
    pub(crate) fn unread(&self) -> impl Iterator<Item = (&str, &str, Unread)> {
        self.inboxes.iter().flat_map(|(to, inbox)| {
            inbox
                .names
                .iter()
                .filter_map(move |(name, u)| u.map(|u| (to.as_str(), &**name, u)))
        })
    }

    /// The message id of an inbox entry: the one it was delivered with, or
    /// the one its name spells.
    pub(crate) fn message_id(&self, to: &str, name: &str) -> Option<String> {
        match self.inboxes.get(to) {
            Some(inbox) => inbox.message_id(name),
            None => parse_inbox_name(name).map(|(_, id)| id),
        }
    }

    /// Offers a delivery: now, later, or never again. A delivery offered
    /// again keeps the start of its wait (see [`Delivery::since`]).
    pub(crate) fn offer(
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
    pub(crate) fn delivered(
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
    pub(crate) fn seen(
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
    pub(crate) fn next_escalation(&self, policy: &MessagePolicy) -> Option<DateTime<Utc>> {
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
    pub(crate) fn take_due_escalations(
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

    /// Queues every unread message for escalation again by `policy` (the
    /// policy changed): the queues were built with the old delays. Those
    /// already escalated come back into the queue and are skipped when
    /// taken (the escalated set is kept across restarts too).
    pub(crate) fn requeue_escalations(&mut self, policy: &MessagePolicy) {
        for inbox in self.inboxes.values_mut() {
            inbox.escalations = Default::default();
            let unread: Vec<(Rc<str>, Unread)> = inbox
                .names
                .iter()
                .filter_map(|(n, u)| Some((n.clone(), (*u)?)))
                .collect();
            for (name, u) in unread {
                if escalation_at(policy, u.priority, u.delivered_at).is_some() {
                    inbox.escalations[rank(u.priority)].insert((u.delivered_at, name));
                }
            }
        }
    }

    /// Queues the reply check of message file `file` at `by`.
    pub(crate) fn reply_due(&mut self, by: DateTime<Utc>, file: &str) {
        self.replies_due.insert((by, file.into()));
    }

    /// The next reply deadline.
    pub(crate) fn next_reply_due(&self) -> Option<DateTime<Utc>> {
        self.replies_due.first().map(|(by, _)| *by)
    }

    /// Takes the message files whose reply deadline is at or before `now`,
    /// earliest first.
    pub(crate) fn take_due_replies(&mut self, now: DateTime<Utc>) -> Vec<Box<str>> {
        let mut out = Vec::new();
        while self.replies_due.first().is_some_and(|(by, _)| *by <= now) {
            if let Some((_, file)) = self.replies_due.pop_first() {
                out.push(file);
            }
        }
        out
    }

    /// Notes a message file coming or going (replies answer by id).
    pub(crate) fn note_reply(&mut self, in_reply_to: Option<&str>, added: bool) {
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
    pub(crate) fn replied(&self, message_id: &str) -> bool {
        self.replies.contains_key(message_id)
    }
}

/// Whether a delivery made at `wall` is late (its deadline counted from
/// when its wait began, with squadd's reaction time as tolerance).
pub(crate) fn late(policy: &MessagePolicy, d: &Delivery, wall: DateTime<Utc>) -> bool {
    is_late(policy, d.priority, d.since, wall)
}

/// When a message's reply becomes overdue, if it needs one.
pub(crate) fn reply_due(m: &crate::index::MessageInfo) -> Option<DateTime<Utc>> {
    m.response_by.map(utc).filter(|_| m.response_needed)
}

/// Whether a reply is overdue at `wall`.
pub(crate) fn reply_overdue(
    m: &crate::index::MessageInfo,
    replied: bool,
    wall: DateTime<Utc>,
) -> bool {
    response_overdue(m.response_needed, reply_due(m), replied, wall)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
impl Mailbox {
    /// Every inbox entry known, with its unread state (`Some(delivered
    /// at)` while unread): what the root-level model test compares with
    /// an inbox listing.
    pub(crate) fn entries(&self) -> BTreeMap<(String, String), Option<DateTime<Utc>>> {
        self.inboxes
            .iter()
            .flat_map(|(to, inbox)| {
                inbox
                    .names
                    .iter()
                    .map(move |(n, u)| ((to.clone(), n.to_string()), u.map(|u| u.delivered_at)))
            })
            .collect()
    }
}
