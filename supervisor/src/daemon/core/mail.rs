//! Message delivery decisions: what a file asks to deliver and when (now,
//! into the outbox; later, a timer; never twice), deliveries waiting on a
//! busy recipient, a passing failure retried, and the escalation queue fed
//! by deliveries and acknowledgements. The shell writes the inboxes
//! (critical first: [`super::batch::outbox_order`]) and reports back.

use super::timer::Timer;
use super::{Effect, Now, Root, RootId, escalations};
use crate::daemon::routing::{self, Delivery, Offer};
use crate::events::EventKind;
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a delivery that failed for a passing reason (out of file
/// descriptors) waits before it is offered again.
pub(crate) const RETRY_DELAY: Duration = Duration::from_millis(250);

/// What one file of a session asks to deliver, offered. `own`: the file's
/// bytes as squadd wrote them (a notice), delivered from memory.
pub(crate) fn route(
    root: &mut Root,
    id: RootId,
    session: &str,
    file: &str,
    own: Option<Arc<[u8]>>,
    now: Now,
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    let Some(f) = core.index().files.get(file) else {
        return Vec::new();
    };
    // A reused message id is reported (duplicate-message-id), not
    // delivered: the recipient would take it for the first one.
    if core.reuses_message_id(file) {
        return Vec::new();
    }
    let deliveries = routing::file_deliveries(&root.root, session, &core.index().dir, f);
    let mut effects = Vec::new();
    for mut d in deliveries {
        if let (Some(bytes), routing::Body::File(path)) = (&own, &d.body) {
            d.body = routing::Body::Text {
                path: path.clone(),
                bytes: Arc::clone(bytes),
            };
        }
        effects.extend(offer(root, id, d, now));
    }
    effects
}

/// The shell's answer for one inbox copy: whether `<inbox>/new/<name>` or
/// `<inbox>/cur/<name>` holds the bytes whose fingerprint is given (a
/// delivered message is its file's bytes). Asked only when ids clash.
pub(crate) type CopyHolds<'a> = &'a dyn Fn(&Path, &str, u64) -> bool;

/// A file about to be routed, its message id checked first
/// ([`clash`]): a reused id is refused visibly (an event, which taps a
/// notice to its sender) or, delivered before the clash arose, left alone;
/// otherwise it is routed as [`super::Input::FileApplied`].
pub(crate) fn route_checked(
    root: &mut Root,
    id: RootId,
    session: &str,
    file: &str,
    copy_holds: CopyHolds<'_>,
) -> Result<(), Vec<Effect>> {
    match clash(root, session, file, copy_holds) {
        Clash::None => Ok(()),
        Clash::DeliveredBefore => Err(Vec::new()),
        Clash::Refused(path, kind) => {
            let mut effects = vec![Effect::Emit {
                root: id,
                session: Some(session.to_string()),
                path: Some(path.clone()),
                kind,
            }];
            effects.extend(withdraw_waiting(root, id, session, &path));
            Err(effects)
        }
    }
}

/// A file refused for a reused id: what it had waiting (a recipient busy,
/// a low priority's wait) is withdrawn and its timers cancelled, so it is
/// never delivered later. A delivery of another file in the same slot
/// stays.
fn withdraw_waiting(root: &mut Root, id: RootId, session: &str, path: &Path) -> Vec<Effect> {
    let Some(mail) = root.mail.get_mut(session) else {
        return Vec::new();
    };
    let of_file = |d: &Delivery| match &d.body {
        routing::Body::File(p) | routing::Body::Text { path: p, .. } => p == path,
        routing::Body::Routed { .. } => false,
    };
    let slots: Vec<_> = mail
        .waiting
        .iter()
        .filter(|(_, d)| of_file(d))
        .map(|(slot, _)| slot.clone())
        .collect();
    slots
        .into_iter()
        .filter_map(|slot| mail.waiting.remove(&slot))
        .map(|d| Effect::CancelTimer(delivery_timer(id, &d)))
        .collect()
}

/// What a reused message id means for a file about to be routed.
#[derive(Debug)]
enum Clash {
    /// No clash (or this file keeps the id): route it.
    None,
    /// Delivered before the clash arose, and its id is reused: nothing more.
    DeliveredBefore,
    /// Refused: the event to emit (its file's path, the event).
    Refused(PathBuf, EventKind),
}

/// Whether `file` reuses a message id: a reused id is reported
/// (duplicate-message-id), not delivered, since the recipient would take it
/// for the first one (docs/daemon.md, Messages). The first by name keeps
/// the id, unless another file with it was delivered already (a later file
/// whose name sorts first): that one keeps it. The inbox copies are asked
/// about only when ids clash.
fn clash(root: &Root, session: &str, file: &str, copy_holds: CopyHolds<'_>) -> Clash {
    let Some(core) = root.sessions.get(session) else {
        return Clash::None;
    };
    let Some(f) = core.index().files.get(file) else {
        return Clash::None;
    };
    let others = core.others_with_message_id(file);
    if others.is_empty() {
        return Clash::None;
    }
    let mail = root.mail.get(session);
    let dir = &core.index().dir;
    // Whether `of`'s message sits in its recipient's inbox. Two files with
    // the same id may share an inbox name: the copy's content says whose
    // it is.
    let delivered = |of: &str| {
        core.index().files.get(of).is_some_and(|o| {
            routing::file_deliveries(&root.root, session, dir, o)
                .iter()
                .any(|d| {
                    mail.is_some_and(|m| m.is_delivered(&d.to, &d.name))
                        && copy_holds(&crate::inbox::inbox_dir(dir, &d.to), &d.name, o.fingerprint)
                })
        })
    };
    // A file delivered before the clash arose is not refused (a restart
    // routes every file again).
    if delivered(file) {
        return if core.reuses_message_id(file) {
            Clash::DeliveredBefore
        } else {
            Clash::None
        };
    }
    let kept_by = core
        .message_id_kept_by(file)
        .or_else(|| others.iter().copied().find(|o| delivered(o)));
    let Some(kept_by) = kept_by else {
        return Clash::None;
    };
    let crate::index::Entry::Message(m) = &f.entry else {
        return Clash::DeliveredBefore;
    };
    Clash::Refused(
        f.path_in(dir),
        EventKind::MessageRefused {
            message_id: m.message_id.clone(),
            from: m.from_agent.clone(),
            to: m.to_agent.clone(),
            file: file.to_string(),
            kept_by: kept_by.to_string(),
        },
    )
}

/// Offers one delivery: into the outbox now (its deferral timer
/// cancelled), a timer for later, or nothing (already delivered).
pub(crate) fn offer(root: &mut Root, id: RootId, d: Delivery, now: Now) -> Vec<Effect> {
    let busy = root
        .sessions
        .get(&d.session)
        .is_some_and(|s| s.is_busy(&d.to));
    let timer = delivery_timer(id, &d);
    let mail = root.mail.entry(d.session.clone()).or_default();
    match mail.offer(&root.policy.messages, d, busy, now.wall) {
        Offer::Now(d) => vec![
            Effect::CancelTimer(timer),
            Effect::Outbox {
                root: id,
                delivery: d,
            },
        ],
        Offer::Later(at) => vec![Effect::SetTimerAt { timer, at }],
        Offer::Done => Vec::new(),
    }
}

/// Offers a session's waiting deliveries again; only the few that wait are
/// looked at.
pub(crate) fn recheck_waiting(root: &mut Root, id: RootId, session: &str, now: Now) -> Vec<Effect> {
    let waiting: Vec<Delivery> = root
        .mail
        .get(session)
        .map(|m| m.waiting.values().cloned().collect())
        .unwrap_or_default();
    let mut effects = Vec::new();
    for d in waiting {
        effects.extend(offer(root, id, d, now));
    }
    effects
}

/// A deferred delivery's timer fired: offered again and, if it was still
/// waiting, the outbox flushed.
pub(crate) fn delivery_due(
    root: &mut Root,
    id: RootId,
    session: &str,
    to: String,
    name: String,
    now: Now,
) -> Vec<Effect> {
    let waiting = root
        .mail
        .get_mut(session)
        .and_then(|m| m.waiting.remove(&(to, name)));
    let Some(d) = waiting else {
        return Vec::new();
    };
    let mut effects = offer(root, id, d, now);
    effects.push(Effect::FlushOutbox);
    effects
}

/// A delivery was written into its inbox at `at`: it is unread from now
/// on, and its escalation is queued (a time already past at `now` is
/// escalated at once).
pub(crate) fn delivered(
    root: &mut Root,
    id: RootId,
    d: &Delivery,
    at: DateTime<Utc>,
    now: Now,
) -> Vec<Effect> {
    let policy = &root.policy.messages;
    let mail = root.mail.entry(d.session.clone()).or_default();
    match mail.delivered(policy, d, at) {
        Some(at) => escalation_queued(id, &d.session, at, now),
        None => Vec::new(),
    }
}

/// A delivery failed for a passing reason: it waits, offered again after
/// [`RETRY_DELAY`].
pub(crate) fn failed(root: &mut Root, id: RootId, d: Delivery) -> Vec<Effect> {
    let timer = delivery_timer(id, &d);
    root.mail
        .entry(d.session.clone())
        .or_default()
        .waiting
        .insert((d.to.clone(), d.name.clone()), d);
    vec![Effect::SetTimer {
        timer,
        after: RETRY_DELAY,
    }]
}

/// An entry of an unread inbox appeared or went: the unread counters and
/// the escalation queue follow (one gone from `new/` leaves the queue; the
/// session's timer, if armed for it, finds nothing due and re-arms).
pub(crate) fn inbox_entry(
    root: &mut Root,
    id: RootId,
    session: &str,
    agent: &str,
    file: &str,
    present: Option<DateTime<Utc>>,
    now: Now,
) -> Vec<Effect> {
    let Some(mail) = root.mail.get_mut(session) else {
        return Vec::new();
    };
    match mail.seen(&root.policy.messages, agent, file, present) {
        Some(at) => escalation_queued(id, session, at, now),
        None => Vec::new(),
    }
}

/// A message became unread with an escalation time `at`: the session's
/// escalation timer fires no later than that; a time already past is
/// escalated now (a backlog is not left until READY). The shell answers
/// "still unread?" when it carries out [`Effect::RunEscalations`].
fn escalation_queued(id: RootId, session: &str, at: DateTime<Utc>, now: Now) -> Vec<Effect> {
    if at <= now.wall {
        return vec![Effect::RunEscalations {
            root: id,
            session: session.to_string(),
        }];
    }
    vec![escalations::arm(id, session, at)]
}

/// The policy in force was replaced: each session's unread messages are
/// queued for escalation by the new delays (a priority that did not
/// escalate may now, one that did may no longer) and its escalation timer
/// armed at the new head, not left where the old policy put it; waiting
/// deliveries are offered again under the new waits, and made.
pub(crate) fn policy_changed(root: &mut Root, id: RootId, now: Now) -> Vec<Effect> {
    let mut effects = Vec::new();
    let sessions: Vec<String> = root.mail.keys().cloned().collect();
    for session in sessions {
        let policy = &root.policy.messages;
        let Some(mail) = root.mail.get_mut(&session) else {
            continue;
        };
        mail.requeue_escalations(policy);
        let timer = Timer::Escalation {
            root: id,
            session: session.clone(),
        };
        effects.push(match mail.next_escalation(policy) {
            // One already past runs at once (as a delivery's would).
            Some(at) if at <= now.wall => Effect::RunEscalations {
                root: id,
                session: session.clone(),
            },
            Some(at) => Effect::SetTimerAt { timer, at },
            None => Effect::CancelTimer(timer),
        });
        effects.extend(recheck_waiting(root, id, &session, now));
    }
    effects.push(Effect::FlushOutbox);
    effects
}

fn delivery_timer(id: RootId, d: &Delivery) -> Timer {
    Timer::Delivery {
        root: id,
        session: d.session.clone(),
        to: d.to.clone(),
        name: d.name.clone(),
    }
}
