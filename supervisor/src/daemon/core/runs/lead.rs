//! Word to the lead about a run (a run that failed, a worktree held) or
//! an agent waiting for its person (`core/waiting.rs`), decided here: whether anyone is told (the policy's `runners.lead`), and
//! the message file squadd writes into the session for the normal routing
//! to deliver. The shell reads the run.log tail asked for, writes the file
//! and supplies the uniqueness of the message id.

use super::super::{Effect, Now, Root, RootId};
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, Priority,
};

/// What a message to the lead is about.
pub(crate) struct About {
    /// The task, if any (the message's `context.task_id`).
    pub task: Option<String>,
    /// The message's subject.
    pub subject: String,
}

/// A message to the lead is due (`text`: with the run.log tail already
/// appended; `salt`: distinct for each message of this squadd, with its
/// process, so two messages of one millisecond get distinct ids). Nothing
/// when the policy names no lead.
pub(crate) fn due(
    root: &Root,
    id: RootId,
    session: &str,
    about: About,
    text: &str,
    salt: u32,
    now: Now,
) -> Vec<Effect> {
    let Some(lead) = root.policy.runners.lead.clone() else {
        return Vec::new();
    };
    message(root, id, session, &lead, about, text, salt, now)
}

/// A message from squadd to `to` in `session` (high priority), written for
/// the normal routing to deliver: to the lead ([`due`]) or to a run's
/// agent (the lead's review comment, `core/runs/review.rs`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn message(
    root: &Root,
    id: RootId,
    session: &str,
    to: &str,
    about: About,
    text: &str,
    salt: u32,
    now: Now,
) -> Vec<Effect> {
    let message_id = format!(
        "msg_{}_run{:08x}",
        now.wall.format("%Y%m%dT%H%M%S%3fZ"),
        salt
    );
    let doc = Document::Message(Message {
        meta: MessageMeta {
            message_id,
            from_agent: "squadd".into(),
            to_agent: to.to_string(),
            created_at: now.wall.fixed_offset(),
            priority: Priority::High,
        },
        kind: MessageType::Notification,
        subject: about.subject,
        message: text.to_string(),
        context: about.task.map(|task| MessageContext {
            task_id: Some(task),
            ..MessageContext::default()
        }),
        response_needed: None,
        response_by: None,
        in_reply_to: None,
    });
    let path = root.session_dir(session).join(doc.file_name());
    match doc.to_file_text() {
        Ok(text) => vec![Effect::WriteLeadMessage {
            root: id,
            path,
            text,
        }],
        // A message squadd built that does not render: said, not written.
        Err(e) => vec![Effect::Emit {
            root: id,
            session: Some(session.to_string()),
            path: Some(path),
            kind: crate::events::EventKind::OutputFailed {
                output: format!("message to {to}"),
                error: e.to_string(),
            },
        }],
    }
}
