//! Message routing decisions: which messages, routed error reports and
//! blockers are due for delivery, which delivered messages are due for
//! escalation and which replies are overdue. Decisions come from
//! `squad_policies::messages`; the wiring makes the deliveries.

use crate::index::{Entry, fingerprint};
use chrono::{DateTime, Utc};
use squad_policies::messages::{
    MessagePolicy, deliver_at, escalation_at, inbox_name, is_late, parse_inbox_name,
    response_overdue, routed_priority, wait_since,
};
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, Priority, Timestamp,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// A delivered message not acknowledged yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Unread {
    /// Priority (from the inbox name).
    pub priority: Priority,
    /// Message id (from the inbox name).
    pub message_id: String,
    /// When it was delivered.
    pub delivered_at: DateTime<Utc>,
}

/// What squadd knows of a session's inboxes and replies, kept up to date by
/// its own deliveries and the inbox watches (sans I/O). Seeded once at
/// start-up by listing the inboxes; after that no delivery check lists or
/// stats anything.
#[derive(Debug, Clone, Default)]
pub struct Mailbox {
    /// Slots present in `new/` or `cur/`.
    pub delivered: BTreeSet<Slot>,
    /// Slots in `new/`.
    pub unread: BTreeMap<Slot, Unread>,
    /// Deliveries waiting for their time (low priority, recipient busy).
    pub waiting: BTreeMap<Slot, Delivery>,
    /// Replies seen, by the id of the message they answer.
    pub replies: BTreeMap<String, usize>,
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
    /// Seeds from an inbox listing: (recipient, name, unread, mtime).
    pub fn seed(&mut self, entries: Vec<(String, String, bool, Option<DateTime<Utc>>)>) {
        for (to, name, unread, at) in entries {
            let Some((priority, message_id)) = parse_inbox_name(&name) else {
                continue;
            };
            let slot = (to, name);
            self.delivered.insert(slot.clone());
            if unread && let Some(delivered_at) = at {
                self.unread.insert(
                    slot,
                    Unread {
                        priority,
                        message_id,
                        delivered_at,
                    },
                );
            }
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
        let slot = (d.to.clone(), d.name.clone());
        if self.delivered.contains(&slot) {
            return Offer::Done;
        }
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

    /// Records a delivery; returns when to check it for escalation.
    pub fn delivered(
        &mut self,
        policy: &MessagePolicy,
        d: &Delivery,
        at: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let slot = (d.to.clone(), d.name.clone());
        self.waiting.remove(&slot);
        self.delivered.insert(slot.clone());
        self.unread.insert(
            slot,
            Unread {
                priority: d.priority,
                message_id: d.message_id.clone(),
                delivered_at: at,
            },
        );
        escalation_at(policy, d.priority, at)
    }

    /// The inbox file was seen present (`Some(mtime)`) or gone from `new/`.
    pub fn seen(&mut self, slot: Slot, present: Option<DateTime<Utc>>) {
        match present {
            Some(at) => {
                self.delivered.insert(slot.clone());
                if !self.unread.contains_key(&slot)
                    && let Some((priority, message_id)) = parse_inbox_name(&slot.1)
                {
                    self.unread.insert(
                        slot,
                        Unread {
                            priority,
                            message_id,
                            delivered_at: at,
                        },
                    );
                }
            }
            None => {
                self.unread.remove(&slot);
            }
        }
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
}
