//! Message routing decisions: which messages, routed error reports and
//! blockers are due for delivery, which delivered messages are due for
//! escalation and which replies are overdue. Decisions come from
//! `squad_policies::messages`; the wiring makes the deliveries.

use super::core::Root;
use crate::inbox;
use crate::index::{Entry, fingerprint};
use chrono::{DateTime, Utc};
use squad_policies::messages::{
    deliver_at, escalation_at, inbox_name, response_overdue, routed_priority,
};
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, Priority, Timestamp,
};
use std::collections::BTreeSet;
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
    /// When the message was written.
    pub created: DateTime<Utc>,
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
            message_id: self.id.clone(),
            body: Body::Routed {
                routed: self,
                from_file: from_file.to_path_buf(),
                rel: rel.to_string(),
            },
        }
    }
}

/// Every delivery the files of a session ask for (delivered or not).
pub fn session_deliveries(
    root: &Path,
    name: &str,
    session: &crate::index::SessionIndex,
) -> Vec<Delivery> {
    let mut out = Vec::new();
    for f in session.files.values() {
        let rel = f
            .path
            .strip_prefix(root)
            .unwrap_or(&f.path)
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
                message_id: m.message_id.clone(),
                body: Body::File(f.path.clone()),
            }),
            Entry::Error(e) if e.requires_intervention => {
                let Some(to) = &e.suggested_agent else {
                    continue;
                };
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
                out.push(routed.delivery(name, &key, &rel, &f.path));
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
                    out.push(routed.delivery(name, &key, &rel, &f.path));
                }
            }
            _ => {}
        }
    }
    out
}

/// Everything the named sessions (all when `None`) still have to deliver
/// at `wall`, critical first, plus the earliest deferred delivery.
pub fn pending_deliveries(
    r: &Root,
    only: Option<&BTreeSet<String>>,
    wall: DateTime<Utc>,
) -> (Vec<Delivery>, Option<DateTime<Utc>>) {
    let policy = &r.policy.messages;
    let mut ready = Vec::new();
    let mut next: Option<DateTime<Utc>> = None;
    for (name, session) in &r.sessions {
        if only.is_some_and(|o| !o.contains(name)) {
            continue;
        }
        let dir = r.session_dir(name);
        for d in session_deliveries(&r.root, name, session.index()) {
            if inbox::delivered(&dir, &d.to, &d.name) {
                continue;
            }
            let due = deliver_at(policy, d.priority, d.created, session.is_busy(&d.to), wall);
            if due <= wall {
                ready.push(d);
            } else {
                next = Some(next.map_or(due, |n| n.min(due)));
            }
        }
    }
    // A backlog drains critical first, then by age.
    ready.sort_by(|a, b| (a.priority, a.created, &a.name).cmp(&(b.priority, b.created, &b.name)));
    (ready, next)
}

/// What an inbox check found.
#[derive(Debug, Default)]
pub struct InboxCheck {
    /// Unacknowledged messages past their escalation time: (session, agent, item).
    pub escalate: Vec<(String, String, inbox::Item)>,
    /// Replies overdue: (session, from, to, message id).
    pub overdue: Vec<(String, String, String, String)>,
    /// The next escalation or reply deadline.
    pub next: Option<DateTime<Utc>>,
}

/// Finds escalations and overdue replies in the named sessions (all when
/// `None`).
pub fn check_inboxes(r: &Root, only: Option<&BTreeSet<String>>, wall: DateTime<Utc>) -> InboxCheck {
    let policy = &r.policy.messages;
    let mut out = InboxCheck::default();
    let next = |at: DateTime<Utc>, out: &mut InboxCheck| {
        out.next = Some(out.next.map_or(at, |n| n.min(at)));
    };
    for (name, session) in &r.sessions {
        if only.is_some_and(|o| !o.contains(name)) {
            continue;
        }
        let dir = r.session_dir(name);
        let escalated = r.state.escalated.get(name);
        let reported = r.state.replies_overdue.get(name);
        let replies: BTreeSet<&str> = session
            .index()
            .files
            .values()
            .filter_map(|f| match &f.entry {
                Entry::Message(m) => m.in_reply_to.as_deref(),
                _ => None,
            })
            .collect();
        for f in session.index().files.values() {
            if let Entry::Message(m) = &f.entry {
                let by = m.response_by.map(utc);
                let replied = replies.contains(m.message_id.as_str());
                if response_overdue(m.response_needed, by, replied, wall) {
                    if !reported.is_some_and(|s| s.contains(&m.message_id)) {
                        out.overdue.push((
                            name.clone(),
                            m.from_agent.clone(),
                            m.to_agent.clone(),
                            m.message_id.clone(),
                        ));
                    }
                } else if let Some(by) = by.filter(|_| m.response_needed && !replied) {
                    next(by, &mut out);
                }
            }
        }
        for (agent, item) in inbox::unread(&dir) {
            let Some(delivered) = item.delivered_at.map(DateTime::<Utc>::from) else {
                continue;
            };
            let Some(at) = escalation_at(policy, item.priority, delivered) else {
                continue;
            };
            if escalated.is_some_and(|s| s.contains(&item.message_id)) {
                continue;
            }
            if at <= wall {
                out.escalate.push((name.clone(), agent.clone(), item));
            } else {
                next(at, &mut out);
            }
        }
    }
    out
}
