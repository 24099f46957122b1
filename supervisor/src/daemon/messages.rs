//! Message routing in the daemon: delivery into inboxes by priority,
//! routed reports, escalation of unacknowledged messages, overdue replies and
//! notification hooks. Decisions come from `squad_policies::messages`.

use super::Supervisor;
use crate::events::EventKind;
use crate::inbox;
use crate::index::{Entry, fingerprint};
use chrono::{DateTime, Utc};
use squad_policies::messages::{
    NotifyCommand, deadline, deliver_at, escalation_at, inbox_name, response_overdue,
    routed_priority,
};
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, Priority, Timestamp,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What a delivery carries.
enum Body {
    /// An agent's message file, delivered as written.
    File(PathBuf),
    /// A message squadd generated from a report.
    Routed { text: String, from_file: PathBuf },
}

/// One delivery to make.
struct Delivery {
    session: String,
    from: String,
    to: String,
    name: String,
    priority: Priority,
    created: DateTime<Utc>,
    message_id: String,
    body: Body,
}

/// The outcome of a notify command, reported back to the supervisor task.
pub struct HookOutcome {
    /// Root index.
    pub root: usize,
    /// Session directory name.
    pub session: String,
    /// Recipient.
    pub to: String,
    /// Message id.
    pub message_id: String,
    /// Why it failed after all retries, if it did.
    pub error: Option<String>,
}

fn utc(t: Timestamp) -> DateTime<Utc> {
    t.with_timezone(&Utc)
}

fn routed_id(parts: &str) -> String {
    format!("msg_route_{:016x}", fingerprint(parts.as_bytes()))
}

/// A message squadd writes on an agent's behalf, from a report.
struct Routed {
    to: String,
    priority: Priority,
    created: Timestamp,
    subject: String,
    body: String,
    task: Option<String>,
}

impl Routed {
    /// The delivery of this routed message, identified by `key` (stable
    /// across restarts, so delivery stays idempotent), linking back to the
    /// report at `from_file` (`rel` relative to the root).
    fn delivery(self, session: &str, key: &str, rel: &str, from_file: &Path) -> Option<Delivery> {
        let id = routed_id(key);
        let text = Document::Message(Message {
            meta: MessageMeta {
                message_id: id.clone(),
                from_agent: "squadd".into(),
                to_agent: self.to.clone(),
                created_at: self.created,
                priority: self.priority,
            },
            kind: MessageType::Request,
            subject: self.subject,
            message: self.body,
            context: Some(MessageContext {
                task_id: self.task,
                component: None,
                file: Some(rel.into()),
            }),
            response_needed: None,
            response_by: None,
            in_reply_to: None,
        })
        .to_file_text()
        .ok()?;
        Some(Delivery {
            session: session.to_string(),
            from: "squadd".into(),
            name: inbox_name(self.priority, utc(self.created), &id),
            to: self.to,
            priority: self.priority,
            created: utc(self.created),
            message_id: id,
            body: Body::Routed {
                text,
                from_file: from_file.to_path_buf(),
            },
        })
    }
}

impl Supervisor {
    /// Everything the named sessions (all when `None`) still have to deliver
    /// at `wall`, plus the earliest deferred delivery.
    fn pending_deliveries(
        &self,
        i: usize,
        only: Option<&BTreeSet<String>>,
        wall: DateTime<Utc>,
    ) -> (Vec<Delivery>, Option<DateTime<Utc>>) {
        let r = &self.roots[i];
        let policy = &r.policy.messages;
        let mut ready = Vec::new();
        let mut next: Option<DateTime<Utc>> = None;
        for (name, session) in &r.sessions {
            if only.is_some_and(|o| !o.contains(name)) {
                continue;
            }
            let dir = r.sessions_dir.join(name);
            let busy: BTreeSet<&str> = r
                .views
                .get(name)
                .map(|v| v.agents_active.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let mut consider = |d: Delivery, ready: &mut Vec<Delivery>| {
                if inbox::delivered(&dir, &d.to, &d.name) {
                    return;
                }
                let due = deliver_at(
                    policy,
                    d.priority,
                    d.created,
                    busy.contains(d.to.as_str()),
                    wall,
                );
                if due <= wall {
                    ready.push(d);
                } else {
                    next = Some(next.map_or(due, |n| n.min(due)));
                }
            };
            for f in session.files.values() {
                let rel = f
                    .path
                    .strip_prefix(&r.root)
                    .unwrap_or(&f.path)
                    .display()
                    .to_string();
                match &f.entry {
                    Entry::Message(m) => consider(
                        Delivery {
                            session: name.clone(),
                            from: m.from_agent.clone(),
                            to: m.to_agent.clone(),
                            name: inbox_name(m.priority, utc(m.created_at), &m.message_id),
                            priority: m.priority,
                            created: utc(m.created_at),
                            message_id: m.message_id.clone(),
                            body: Body::File(f.path.clone()),
                        },
                        &mut ready,
                    ),
                    Entry::Error(e) if e.requires_intervention => {
                        let Some(to) = &e.suggested_agent else {
                            continue;
                        };
                        let routed = Routed {
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
                        if let Some(d) = routed.delivery(name, &key, &rel, &f.path) {
                            consider(d, &mut ready);
                        }
                    }
                    Entry::Progress(p) => {
                        for (n, b) in p.blockers.iter().enumerate() {
                            let Some(to) = &b.requires_agent else {
                                continue;
                            };
                            let routed = Routed {
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
                            if let Some(d) = routed.delivery(name, &key, &rel, &f.path) {
                                consider(d, &mut ready);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        // A backlog drains critical first, then by age.
        ready.sort_by(|a, b| {
            (a.priority, a.created, &a.name).cmp(&(b.priority, b.created, &b.name))
        });
        (ready, next)
    }

    /// Delivers what is due in the named sessions (all when `None`).
    pub(super) fn deliver_messages(
        &mut self,
        i: usize,
        only: Option<&BTreeSet<String>>,
        wall: DateTime<Utc>,
    ) {
        let (ready, next) = self.pending_deliveries(i, only, wall);
        if only.is_none() || next.is_some() {
            self.roots[i].deliveries_due =
                next.map(|at| Instant::now() + (at - wall).to_std().unwrap_or(Duration::ZERO));
        }
        let mut delivered_any = false;
        for d in ready {
            let dir = self.roots[i].sessions_dir.join(&d.session);
            let (bytes, routed_from) = match &d.body {
                Body::File(path) => match squad_protocol::validate::read_limited(path) {
                    Ok(b) => (b, None),
                    // Vanished or changed into something unreadable: its own
                    // event will bring it back if it returns.
                    Err(_) => continue,
                },
                Body::Routed { text, from_file } => (
                    text.clone().into_bytes(),
                    Some(
                        from_file
                            .strip_prefix(&self.roots[i].root)
                            .unwrap_or(from_file)
                            .display()
                            .to_string(),
                    ),
                ),
            };
            match inbox::deliver(&dir, &d.to, &d.name, &bytes) {
                Ok(true) => {
                    delivered_any = true;
                    let late = deadline(&self.roots[i].policy.messages, d.priority, d.created)
                        .is_some_and(|by| wall > by);
                    let path = inbox::inbox_dir(&dir, &d.to).join("new").join(&d.name);
                    self.emit(
                        i,
                        Some(&d.session),
                        Some(&path),
                        EventKind::MessageDelivered {
                            to: d.to.clone(),
                            message_id: d.message_id.clone(),
                            priority: d.priority.to_string(),
                            late,
                            routed_from,
                        },
                    );
                    self.notify(
                        i,
                        &d.session,
                        &d.from,
                        &d.to,
                        &d.message_id,
                        d.priority,
                        &path,
                    );
                }
                Ok(false) => {}
                Err(e) => self.emit(
                    i,
                    Some(&d.session),
                    None,
                    EventKind::OutputFailed {
                        output: format!("inbox of {}", d.to),
                        error: e.to_string(),
                    },
                ),
            }
        }
        if delivered_any {
            let soon = Instant::now();
            self.roots[i].inbox_due = Some(self.roots[i].inbox_due.map_or(soon, |d| d.min(soon)));
        }
    }

    /// Escalates unacknowledged messages and reports overdue replies;
    /// schedules the next check.
    pub(super) fn check_inboxes(
        &mut self,
        i: usize,
        only: Option<&BTreeSet<String>>,
        wall: DateTime<Utc>,
    ) {
        let mut escalate = Vec::new();
        let mut overdue = Vec::new();
        let mut next: Option<DateTime<Utc>> = None;
        {
            let r = &self.roots[i];
            let policy = &r.policy.messages;
            for (name, session) in &r.sessions {
                if only.is_some_and(|o| !o.contains(name)) {
                    continue;
                }
                let dir = r.sessions_dir.join(name);
                let escalated = r.state.escalated.get(name);
                let reported = r.state.replies_overdue.get(name);
                let replies: BTreeSet<&str> = session
                    .files
                    .values()
                    .filter_map(|f| match &f.entry {
                        Entry::Message(m) => m.in_reply_to.as_deref(),
                        _ => None,
                    })
                    .collect();
                let mut recipients: BTreeSet<&str> = BTreeSet::new();
                for f in session.files.values() {
                    if let Entry::Message(m) = &f.entry {
                        recipients.insert(m.to_agent.as_str());
                        let by = m.response_by.map(utc);
                        let replied = replies.contains(m.message_id.as_str());
                        if response_overdue(m.response_needed, by, replied, wall) {
                            if !reported.is_some_and(|s| s.contains(&m.message_id)) {
                                overdue.push((
                                    name.clone(),
                                    m.from_agent.clone(),
                                    m.to_agent.clone(),
                                    m.message_id.clone(),
                                ));
                            }
                        } else if let Some(by) = by.filter(|_| m.response_needed && !replied) {
                            next = Some(next.map_or(by, |n| n.min(by)));
                        }
                    }
                }
                // Inboxes exist for recipients of messages and of routed reports.
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
                        escalate.push((name.clone(), agent.clone(), item));
                    } else {
                        next = Some(next.map_or(at, |n| n.min(at)));
                    }
                }
            }
        }
        let changed = !escalate.is_empty() || !overdue.is_empty();
        for (session, agent, item) in escalate {
            self.roots[i]
                .state
                .escalated
                .entry(session.clone())
                .or_default()
                .insert(item.message_id.clone());
            self.emit(
                i,
                Some(&session),
                Some(&item.path),
                EventKind::MessageEscalated {
                    to: agent.clone(),
                    message_id: item.message_id.clone(),
                    priority: item.priority.to_string(),
                },
            );
            self.notify(
                i,
                &session,
                "squadd",
                &agent,
                &item.message_id,
                item.priority,
                &item.path,
            );
        }
        for (session, from, to, message_id) in overdue {
            self.roots[i]
                .state
                .replies_overdue
                .entry(session.clone())
                .or_default()
                .insert(message_id.clone());
            self.emit(
                i,
                Some(&session),
                None,
                EventKind::ResponseOverdue {
                    from,
                    to,
                    message_id,
                },
            );
        }
        if changed {
            self.save_state(i);
        }
        let next = next.map(|at| Instant::now() + (at - wall).to_std().unwrap_or(Duration::ZERO));
        // A partial check can only bring the next check forward; the full
        // check at that moment recomputes it for every session.
        self.roots[i].inbox_due = match (only, self.roots[i].inbox_due, next) {
            (None, _, n) => n,
            (Some(_), Some(a), Some(b)) => Some(a.min(b)),
            (Some(_), a, b) => a.or(b),
        };
    }

    /// Runs the recipient's notify command (policy only: never a command an
    /// agent wrote), on its own task so a slow or failing hook never delays
    /// anything else.
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &self,
        i: usize,
        session: &str,
        from: &str,
        to: &str,
        message_id: &str,
        priority: Priority,
        path: &Path,
    ) {
        let notify = &self.roots[i].policy.messages.notify;
        let Some(cmd) = notify.get(to).or_else(|| notify.get("*")).cloned() else {
            return;
        };
        let env = vec![
            ("SQUAD_MESSAGE_PATH", path.display().to_string()),
            ("SQUAD_PRIORITY", priority.to_string()),
            ("SQUAD_FROM", from.to_string()),
            ("SQUAD_TO", to.to_string()),
            ("SQUAD_SESSION", session.to_string()),
        ];
        let outcome = HookOutcome {
            root: i,
            session: session.to_string(),
            to: to.to_string(),
            message_id: message_id.to_string(),
            error: None,
        };
        let tx = self.hooks.clone();
        let path = path.display().to_string();
        tokio::spawn(async move {
            let error = run_hook(&cmd, &path, &env).await.err();
            let _ = tx.send(HookOutcome { error, ..outcome });
        });
    }
}

/// Runs a notify command with its timeout and retries (1 s, 2 s, 4 s… apart).
async fn run_hook(cmd: &NotifyCommand, path: &str, env: &[(&str, String)]) -> Result<(), String> {
    let argv: Vec<String> = cmd
        .command
        .iter()
        .map(|a| a.replace("{path}", path))
        .collect();
    let mut last = String::new();
    for attempt in 0..=cmd.retries {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1).min(6))).await;
        }
        let mut child = match tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                last = format!("cannot run {}: {e}", argv[0]);
                continue;
            }
        };
        match tokio::time::timeout(cmd.timeout, child.wait()).await {
            Ok(Ok(s)) if s.success() => return Ok(()),
            Ok(Ok(s)) => last = format!("{} exited with {s}", argv[0]),
            Ok(Err(e)) => last = format!("{}: {e}", argv[0]),
            Err(_) => {
                let _ = child.kill().await;
                last = format!("{} timed out after {:?}", argv[0], cmd.timeout);
            }
        }
    }
    Err(format!("{last} (after {} attempt(s))", cmd.retries + 1))
}

/// A channel for hook outcomes.
pub fn hook_channel() -> (
    mpsc::UnboundedSender<HookOutcome>,
    mpsc::UnboundedReceiver<HookOutcome>,
) {
    mpsc::unbounded_channel()
}
