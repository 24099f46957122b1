//! Reply deadlines (`response_by`): which message is overdue, reported once
//! per message across restarts. Only the due ones are looked at: each
//! session's [`Mailbox`](crate::daemon::routing::Mailbox) keeps them in a
//! queue, and one timer per session is armed at its head.

use super::RootId;
use super::timer::Timer;
use super::{Effect, Now, Root};
use crate::daemon::routing;
use crate::events::EventKind;
use crate::index::Entry;

/// A message file was routed: its reply deadline, if it has one not yet
/// reported, is queued (or checked now, when it already passed: a backlog is
/// not left until READY).
pub(crate) fn asked(
    root: &mut Root,
    id: RootId,
    session: &str,
    file: &str,
    now: Now,
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    if core.reuses_message_id(file) {
        return Vec::new();
    }
    let Some((message_id, by)) = core.index().files.get(file).and_then(|f| match &f.entry {
        Entry::Message(m) => routing::reply_due(m).map(|by| (m.message_id.clone(), by)),
        _ => None,
    }) else {
        return Vec::new();
    };
    let reported = root
        .state
        .replies_overdue
        .get(session)
        .is_some_and(|s| s.contains(&message_id));
    if reported {
        Vec::new()
    } else if by <= now.wall {
        check(root, id, session, file, now)
    } else {
        root.mail
            .entry(session.to_string())
            .or_default()
            .reply_due(by, file);
        vec![Effect::SetTimerEarlierAt {
            timer: Timer::ReplyDue {
                root: id,
                session: session.to_string(),
            },
            at: by,
        }]
    }
}

/// The session's reply timer fired: the messages whose deadline passed are
/// checked, and the timer is armed at the next deadline.
pub(crate) fn due(root: &mut Root, id: RootId, session: &str, now: Now) -> Vec<Effect> {
    let timer = Timer::ReplyDue {
        root: id,
        session: session.to_string(),
    };
    let Some(mail) = root.mail.get_mut(session) else {
        return vec![Effect::CancelTimer(timer)];
    };
    let files = mail.take_due_replies(now.wall);
    let mut effects = vec![match mail.next_reply_due() {
        Some(at) => Effect::SetTimerAt { timer, at },
        None => Effect::CancelTimer(timer),
    }];
    for file in files {
        effects.extend(check(root, id, session, &file, now));
    }
    effects
}

/// A reply to `message_id` was withdrawn: if no other reply remains and
/// the question's deadline already passed (its queue entry was taken while
/// it was answered), it is checked now; a deadline still ahead is in the
/// queue and checked when it comes.
pub(crate) fn withdrawn(
    root: &mut Root,
    id: RootId,
    session: &str,
    message_id: &str,
    now: Now,
) -> Vec<Effect> {
    if root
        .mail
        .get(session)
        .is_some_and(|mb| mb.replied(message_id))
    {
        return Vec::new();
    }
    let Some(file) = root
        .sessions
        .get(session)
        .and_then(|c| c.message_file(message_id))
        .map(str::to_string)
    else {
        return Vec::new();
    };
    check(root, id, session, &file, now)
}

/// A message's reply deadline passed: reported once when no reply came.
/// `file` is the message file (its current content decides: a deadline
/// moved later or a reply that came is no longer overdue).
pub(crate) fn check(
    root: &mut Root,
    id: RootId,
    session: &str,
    file: &str,
    now: Now,
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    // A reused message id is reported (duplicate-message-id), not followed
    // up: the first file with the id stands for it.
    if core.reuses_message_id(file) {
        return Vec::new();
    }
    let Some(m) = core.index().files.get(file).and_then(|f| match &f.entry {
        Entry::Message(m) => Some(m),
        _ => None,
    }) else {
        return Vec::new();
    };
    let replied = root
        .mail
        .get(session)
        .is_some_and(|mb| mb.replied(&m.message_id));
    if !routing::reply_overdue(m, replied, now.wall) {
        return Vec::new();
    }
    let (from, to, message_id) = (
        m.from_agent.clone(),
        m.to_agent.clone(),
        m.message_id.clone(),
    );
    if !root
        .state
        .replies_overdue
        .entry(session.to_string())
        .or_default()
        .insert(message_id.clone())
    {
        return Vec::new();
    }
    vec![
        Effect::Emit {
            root: id,
            session: Some(session.to_string()),
            path: None,
            kind: EventKind::ResponseOverdue {
                from,
                to,
                message_id,
            },
        },
        Effect::SaveState(id),
    ]
}
