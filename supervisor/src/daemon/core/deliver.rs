//! One delivery of the outbox decided, from the shell's facts to what is
//! said of it: whether it is written here at all (its session still there,
//! its recipient on this host, its body readable), what a write that
//! succeeded calls for (recorded as delivered, its inbox watched, a fresh
//! one announced once durable) or failed (retried after a passing failure,
//! reported otherwise), and what is said once its inbox is durable. The
//! shell reads the bodies, writes the inboxes (one group commit per
//! outbox: `daemon/mail.rs`), journals and starts the hooks.

use super::{Effect, Now, Root, RootId, mail};
use crate::cluster::replicate::Owner;
use crate::daemon::routing::{self, Body, Delivery};
use crate::events::EventKind;
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};

/// What the shell reads for a delivery about to be written, asked in the
/// order the decision needs it (nothing is read for a delivery that is not
/// made here).
pub(crate) trait DeliveryFacts {
    /// With `cluster:`, which host delivers to `to` a message replicated
    /// from `source` (`None`: no cluster, every delivery is made here).
    fn owner(&self, session: &str, source: &str, to: &str) -> Option<Owner>;
    /// The bytes of a message file to deliver.
    fn body(&self, path: &Path) -> BodyRead;
}

/// A message file's bytes as the shell read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyRead {
    /// Its bytes.
    Bytes(Vec<u8>),
    /// Not read for the machine's reason (out of descriptors): tried again.
    Transient,
    /// Vanished, or changed into something unreadable: its own event will
    /// bring it back if it returns.
    Gone,
}

/// How writing a delivery into its inbox went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// Written now (durable once its inbox's `new/` is fsynced).
    Fresh,
    /// It was there already (delivered before a restart, say).
    Before,
    /// Failed for a passing reason (out of descriptors): tried again.
    Transient,
    /// Failed (the error).
    Failed(String),
}

/// A fresh delivery to announce once its inbox is durable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Announce {
    /// The root.
    pub root: RootId,
    /// The delivery.
    pub delivery: Box<Delivery>,
    /// The inbox file.
    pub path: PathBuf,
    /// Its inbox's `new/` (fsynced once per batch).
    pub new_dir: PathBuf,
    /// Whether it was made later than its priority allows.
    pub late: bool,
    /// A routed message's source (its path relative to the root).
    pub routed_from: Option<String>,
}

/// A delivery of the outbox, at the flush's moment `at`: what to write, or
/// why not (a session going away is never recreated; a recipient on
/// another host gets it there; a failure of the machine's is tried again).
pub(crate) fn deliver(
    root: &mut Root,
    id: RootId,
    d: Delivery,
    facts: &dyn DeliveryFacts,
) -> Vec<Effect> {
    if !root.sessions.contains_key(&d.session) {
        return Vec::new();
    }
    // Replication (docs/cluster.md, "Cross-host delivery"): a message
    // replicated to every checkout is delivered only on its recipient's
    // host; so is squadd's own notice, which the leader publishes to every
    // checkout.
    let source = match &d.body {
        Body::File(path) | Body::Text { path, .. } => path.file_name(),
        Body::Routed { from_file, .. } => from_file.file_name(),
    };
    if let Some(source) = source {
        let source = source.to_string_lossy();
        match facts.owner(&d.session, &source, &d.to) {
            None | Some(Owner::Here) => {}
            Some(Owner::Elsewhere(_)) => return Vec::new(),
            // The presence table is loading (a restart): asked again
            // shortly, like a delivery that failed for a passing reason.
            Some(Owner::Unknown) => return mail::failed(root, id, d),
        }
    }
    let (bytes, routed_from) = match &d.body {
        // squadd's own notice: delivered from memory, never read back.
        Body::Text { bytes, .. } => (bytes.to_vec(), None),
        Body::File(path) => match facts.body(path) {
            BodyRead::Bytes(b) => (b, None),
            BodyRead::Transient => return mail::failed(root, id, d),
            BodyRead::Gone => return Vec::new(),
        },
        Body::Routed { routed, rel, .. } => match routed.render(rel) {
            Some(text) => (text.into_bytes(), Some(rel.clone())),
            None => return Vec::new(),
        },
    };
    vec![Effect::WriteInbox {
        root: id,
        delivery: Box::new(d),
        bytes,
        routed_from,
    }]
}

/// A delivery's write into its inbox went as `written`; `at`: the flush's
/// moment (lateness and the unread time count from it), `now`: the shell's
/// reading after the write (an escalation already due then runs at once).
/// Written (fresh or not): recorded as delivered, its inbox watched, and a
/// fresh one announced once durable ([`Effect::Announce`], last).
pub(crate) fn written(
    root: &mut Root,
    id: RootId,
    d: Delivery,
    routed_from: Option<String>,
    written: Written,
    at: DateTime<Utc>,
    now: Now,
) -> Vec<Effect> {
    let fresh = match written {
        Written::Fresh => true,
        Written::Before => false,
        // Out of descriptors (EMFILE) and the like pass: tried again, never
        // dropped (and not audited at every retry).
        Written::Transient => return mail::failed(root, id, d),
        Written::Failed(error) => {
            return vec![Effect::Emit {
                root: id,
                session: Some(d.session.clone()),
                path: None,
                kind: EventKind::OutputFailed {
                    output: format!("inbox of {}", d.to),
                    error,
                },
            }];
        }
    };
    let mut effects = mail::delivered(root, id, &d, at, now);
    let new_dir = crate::inbox::inbox_dir(&root.session_dir(&d.session), &d.to).join("new");
    effects.push(Effect::Watch {
        root: id,
        dir: new_dir.clone(),
    });
    if fresh {
        let late = routing::late(&root.policy.messages, &d, at);
        effects.push(Effect::Announce(Box::new(Announce {
            root: id,
            path: new_dir.join(&d.name),
            new_dir,
            delivery: Box::new(d),
            late,
            routed_from,
        })));
    }
    effects
}

/// Deliveries made and never said (a squadd killed between a delivery and
/// its audit line, found by the next one's start): each said now, once, as
/// it was made (its hook was journalled before its write, and is the
/// journal's to run). `found`: (recipient, inbox name, the copy's path).
pub(crate) fn unaudited(
    root: &Root,
    id: RootId,
    session: &str,
    found: Vec<(String, String, PathBuf)>,
) -> Vec<Effect> {
    let mail = root.mail.get(session);
    found
        .into_iter()
        .filter_map(|(to, name, path)| {
            let (priority, from_name) = squad_policies::messages::parse_inbox_name(&name)?;
            let message_id = mail
                .and_then(|m| m.message_id(&to, &name))
                .unwrap_or(from_name);
            Some(Effect::Emit {
                root: id,
                session: Some(session.to_string()),
                path: Some(path),
                kind: EventKind::MessageDelivered {
                    to,
                    message_id,
                    priority: priority.to_string(),
                    late: false,
                    routed_from: None,
                },
            })
        })
        .collect()
}

/// A fresh delivery made durable (`fsync_error`: its inbox's fsync failed:
/// the message is there for readers, but a crash may lose it, which is
/// said first): the delivery's event. The shell starts its hook after.
pub(crate) fn synced(a: Announce, fsync_error: Option<String>) -> Vec<Effect> {
    let Announce {
        root,
        delivery: d,
        path,
        new_dir,
        late,
        routed_from,
    } = a;
    let mut effects = Vec::new();
    if let Some(error) = fsync_error {
        effects.push(Effect::Emit {
            root,
            session: Some(d.session.clone()),
            path: Some(path.clone()),
            kind: EventKind::OutputFailed {
                output: format!("inbox of {}", d.to),
                error: format!("fsync of {}: {error}", new_dir.display()),
            },
        });
    }
    effects.push(Effect::Emit {
        root,
        session: Some(d.session.clone()),
        path: Some(path),
        kind: EventKind::MessageDelivered {
            to: d.to.clone(),
            message_id: d.message_id.clone(),
            priority: d.priority.to_string(),
            late,
            routed_from,
        },
    });
    effects
}
