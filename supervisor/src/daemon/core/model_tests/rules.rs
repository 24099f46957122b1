//! The oracle's own mail rules, written again from the text
//! (docs/daemon.md, "Messages"; docs/protocol.md, "Message"), sharing no
//! code with the routing the core uses (`daemon/routing.rs`,
//! `squad_policies::messages`): who a file's deliveries go to and under
//! which inbox name, when an unread message escalates, when a question is
//! overdue. Small on purpose: a rule here that differs from the core's is
//! a finding of the model test, whichever is wrong.

use super::*;
use crate::index::IndexedFile;
use squad_protocol::model::{ErrorSeverity, Priority};

/// A priority's place in the inbox order: critical first.
fn rank(p: Priority) -> usize {
    match p {
        Priority::Critical => 0,
        Priority::High => 1,
        Priority::Medium => 2,
        Priority::Low => 3,
    }
}

/// "The inbox name `<rank>-<priority>-<created>-<message_id>.md`" (the
/// model's times are within the years 0000-9999 and its ids short, so the
/// clamping and shortening never apply).
pub(super) fn inbox_name(priority: Priority, created: DateTime<Utc>, id: &str) -> String {
    format!(
        "{}-{priority}-{}-{id}.md",
        rank(priority),
        created.format("%Y%m%dT%H%M%S%.3fZ")
    )
}

/// An inbox name read back: its priority and message id.
pub(super) fn read_inbox_name(name: &str) -> Option<(Priority, String)> {
    let mut parts = name.strip_suffix(".md")?.splitn(4, '-');
    let (_, priority, _, id) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let priority = match priority {
        "critical" => Priority::Critical,
        "high" => Priority::High,
        "medium" => Priority::Medium,
        "low" => Priority::Low,
        _ => return None,
    };
    Some((priority, id.to_string()))
}

/// The id squadd gives a message it writes for a report: its own (the
/// protocol names none), a hash of what identifies the report, so that
/// delivery stays idempotent across restarts.
fn routed_id(key: &str) -> String {
    format!(
        "msg_route_{:016x}",
        crate::index::fingerprint(key.as_bytes())
    )
}

/// What one file of `session` asks to deliver, as (recipient, inbox name):
/// "every valid message file … into `<session>/inbox/<to>/`"; "an error
/// report with `requires_intervention: true` is delivered to
/// `suggested_agent` (severity critical → critical, error → high, warning
/// → medium)"; "a progress update blocker with `requires_agent` is
/// delivered to that agent (high)".
pub(super) fn deliveries(session: &str, file: &str, f: &IndexedFile) -> Vec<(String, String)> {
    use squad_protocol::tree::{SESSIONS_DIR, SQUAD_DIR};
    let rel = format!("{SQUAD_DIR}/{SESSIONS_DIR}/{session}/{file}");
    let utc = |t: &squad_protocol::model::Timestamp| t.with_timezone(&Utc);
    match &f.entry {
        Entry::Message(m) => vec![(
            m.to_agent.clone(),
            inbox_name(m.priority, utc(&m.created_at), &m.message_id),
        )],
        Entry::Error(e) if e.requires_intervention => {
            let Some(to) = &e.suggested_agent else {
                return Vec::new();
            };
            let priority = match e.severity {
                ErrorSeverity::Critical => Priority::Critical,
                ErrorSeverity::Error => Priority::High,
                ErrorSeverity::Warning => Priority::Medium,
            };
            let id = routed_id(&format!("{session}|{}|{to}", e.error_id));
            vec![(to.clone(), inbox_name(priority, utc(&e.occurred_at), &id))]
        }
        Entry::Progress(p) => p
            .blockers
            .iter()
            .enumerate()
            .filter_map(|(n, b)| {
                let to = b.requires_agent.as_ref()?;
                let id = routed_id(&format!("{session}|{rel}|{n}|{}|{to}", b.description));
                let since = b.since.as_ref().unwrap_or(&p.updated_at);
                Some((to.clone(), inbox_name(Priority::High, utc(since), &id)))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// "An unacknowledged message is re-notified and an escalation recorded,
/// once": when it is still unread `escalate_after` (by priority; none for
/// low by default) after it landed in `new/`.
pub(super) fn escalation_due(
    policy: &squad_policies::Policy,
    name: &str,
    unread_since: DateTime<Utc>,
) -> Option<(String, DateTime<Utc>)> {
    let (priority, id) = read_inbox_name(name)?;
    let after = policy.messages.escalate_after[rank(priority)]?;
    Some((id, unread_since + after_of(after)))
}

/// "A message with `response_needed: true` and no reply (a message with
/// `in_reply_to` its id) by `response_by`": the moment it is overdue.
pub(super) fn reply_due(m: &crate::index::MessageInfo) -> Option<DateTime<Utc>> {
    if !m.response_needed {
        return None;
    }
    m.response_by.as_ref().map(|t| t.with_timezone(&Utc))
}
