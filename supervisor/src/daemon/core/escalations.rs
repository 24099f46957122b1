//! Escalation of unread messages: when a message's time to be read passed
//! and it is still in `inbox/<agent>/new/`, squadd says so (an event and the
//! recipient's notify hook), once per message across restarts. Only the due
//! ones are looked at: each session's
//! [`Mailbox`](crate::daemon::routing::Mailbox) keeps the unread ones in a
//! queue per priority, and one timer per session is armed at its head.

use super::RootId;
use super::timer::Timer;
use super::{Effect, Now, Root};
use crate::events::EventKind;
use std::path::Path;

/// The session's escalation timer fired (or a message was queued with a
/// time already past). `unread` is the shell's answer for one inbox entry
/// (`inbox/<agent>/new/<name>`): whether it is still there (one `stat`).
/// Returns, in order: the timer armed at the next escalation (or
/// cancelled), each escalation's event and hook, and one state write for
/// the batch.
pub(crate) fn run(
    root: &mut Root,
    id: RootId,
    session: &str,
    now: Now,
    unread: impl Fn(&Path) -> bool,
) -> Vec<Effect> {
    let timer = Timer::Escalation {
        root: id,
        session: session.to_string(),
    };
    let dir = root.session_dir(session);
    let Some(mail) = root.mail.get_mut(session) else {
        return vec![Effect::CancelTimer(timer)];
    };
    let policy = &root.policy.messages;
    let mut escalated = Vec::new();
    // squadd's notices whose facts still stand, computed once when a
    // notice is due: a moot one (its plan fixed, its task completed) is
    // never escalated (issue 40 item 4).
    let mut live = None;
    for d in mail.take_due_escalations(policy, now.wall) {
        if root
            .state
            .escalated
            .get(session)
            .is_some_and(|e| e.contains(&d.message_id))
        {
            continue;
        }
        let path = crate::inbox::inbox_dir(&dir, &d.to)
            .join("new")
            .join(&*d.name);
        if !unread(&path) {
            mail.seen(policy, &d.to, &d.name, None);
            continue;
        }
        if d.message_id.starts_with("msg_squadd_") {
            let live = live.get_or_insert_with(|| match root.sessions.get(session) {
                Some(core) => super::notices::live_notice_ids(
                    session,
                    core.index(),
                    core.tasks().values(),
                    root.policy.notices.lead.as_deref(),
                ),
                None => Default::default(),
            });
            if super::notices::is_moot(&d.message_id, live) {
                continue;
            }
        }
        record(&mut root.state, session, &d.message_id);
        escalated.push((d, path));
    }
    let mut effects = vec![match mail.next_escalation(policy) {
        Some(at) => Effect::SetTimerAt { timer, at },
        None => Effect::CancelTimer(timer),
    }];
    if escalated.is_empty() {
        return effects;
    }
    for (d, path) in escalated {
        effects.extend(told(id, session, d, path));
    }
    // Once for the batch: a burst escalating together is one write.
    effects.push(Effect::SaveState(id));
    effects
}

/// Records a message as escalated (once per message, across restarts).
fn record(state: &mut crate::state::State, session: &str, message_id: &str) {
    state
        .escalated
        .entry(session.to_string())
        .or_default()
        .insert(message_id.to_string());
}

/// An escalation said: its event and the recipient's notify hook.
fn told(
    id: RootId,
    session: &str,
    d: crate::daemon::routing::DueEscalation,
    path: std::path::PathBuf,
) -> [Effect; 2] {
    [
        Effect::Emit {
            root: id,
            session: Some(session.to_string()),
            path: Some(path.clone()),
            kind: EventKind::MessageEscalated {
                to: d.to.clone(),
                message_id: d.message_id.clone(),
                priority: d.priority.to_string(),
            },
        },
        Effect::Notify {
            root: id,
            session: session.to_string(),
            to: d.to,
            message_id: d.message_id,
            priority: d.priority,
            path,
        },
    ]
}

/// Facts of `session` changed (a batch's tapped events): a notice of
/// squadd's that was moot when its escalation came, still unread and not
/// escalated, whose fact stands again (its task ready again, its file back
/// to the bytes it was told about) is escalated now, as if it had been
/// live then (issue 40 item 4).
pub(crate) fn recheck(root: &mut Root, id: RootId, session: &str, now: Now) -> Vec<Effect> {
    let Some(mail) = root.mail.get(session) else {
        return Vec::new();
    };
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    let escalated = root.state.escalated.get(session);
    let due: Vec<crate::daemon::routing::DueEscalation> = mail
        .unread()
        .filter_map(|(to, name, u)| {
            let message_id = mail.message_id(to, name)?;
            let past = squad_policies::messages::escalation_at(
                &root.policy.messages,
                u.priority,
                u.delivered_at,
            )
            .is_some_and(|at| at <= now.wall);
            (past
                && message_id.starts_with("msg_squadd_")
                && !escalated.is_some_and(|e| e.contains(&message_id)))
            .then(|| crate::daemon::routing::DueEscalation {
                to: to.to_string(),
                name: name.into(),
                message_id,
                priority: u.priority,
            })
        })
        .collect();
    if due.is_empty() {
        return Vec::new();
    }
    let live = super::notices::live_notice_ids(
        session,
        core.index(),
        core.tasks().values(),
        root.policy.notices.lead.as_deref(),
    );
    let dir = root.session_dir(session);
    let mut effects = Vec::new();
    for d in due {
        if super::notices::is_moot(&d.message_id, &live) {
            continue;
        }
        record(&mut root.state, session, &d.message_id);
        let path = crate::inbox::inbox_dir(&dir, &d.to)
            .join("new")
            .join(&*d.name);
        effects.extend(told(id, session, d, path));
    }
    if !effects.is_empty() {
        effects.push(Effect::SaveState(id));
    }
    effects
}

/// The session's escalation timer, set to fire no later than `at` (a
/// message became unread with that escalation time; one already past is
/// run at once instead: see [`super::mail`]).
pub(crate) fn arm(id: RootId, session: &str, at: chrono::DateTime<chrono::Utc>) -> Effect {
    Effect::SetTimerEarlierAt {
        timer: Timer::Escalation {
            root: id,
            session: session.to_string(),
        },
        at,
    }
}
