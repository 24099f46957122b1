//! The event log: numbers events, logs them, appends the audited ones to each
//! root's `.squad/audit.jsonl`, keeps the recent ones for `squadctl events`
//! and broadcasts them to followers.

use super::core::RootId;
use crate::audit::AuditLog;
use crate::events::{Event, EventKind};
use chrono::Utc;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use tokio::sync::broadcast;

/// Events kept for `squadctl events` without `--follow`.
const RECENT_EVENTS: usize = 256;

/// The event log of every root.
pub(crate) struct EventLog {
    seq: u64,
    recent: VecDeque<Event>,
    bus: broadcast::Sender<Event>,
    /// Each root's path, its name in events, and its audit log.
    roots: BTreeMap<RootId, (PathBuf, String, AuditLog)>,
    /// Events that may call for a notice, until the batch's end takes them.
    tapped: Vec<super::notices::Tapped>,
    /// The deliveries each root's audit log says, read when first asked
    /// ([`EventLog::said_delivered`]) and kept up to date until forgotten.
    said: BTreeMap<RootId, std::collections::HashSet<crate::audit::SaidDelivery>>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            seq: 0,
            recent: VecDeque::new(),
            bus: broadcast::channel(1024).0,
            roots: BTreeMap::new(),
            tapped: Vec::new(),
            said: BTreeMap::new(),
        }
    }
}

impl EventLog {
    /// Adds root `id`.
    pub(crate) fn add_root(&mut self, id: RootId, root: &Path) {
        self.roots.insert(
            id,
            (
                root.to_path_buf(),
                root.display().to_string(),
                AuditLog::new(root),
            ),
        );
    }

    /// Opens root `i`'s audit log afresh at its next append (its `.squad/`
    /// was deleted and recreated: the old file is gone).
    pub(crate) fn reopen_audit(&mut self, i: RootId) {
        if let Some((root, _, audit)) = self.roots.get_mut(&i) {
            *audit = AuditLog::new(root);
        }
    }

    /// Records one event of root `i`.
    pub(crate) fn emit(
        &mut self,
        i: RootId,
        session: Option<&str>,
        path: Option<&Path>,
        kind: EventKind,
    ) {
        let Some((root, name, audit)) = self.roots.get_mut(&i) else {
            return;
        };
        self.seq += 1;
        if super::core::notices::wanted(&kind) {
            self.tapped.push((
                i,
                session.map(str::to_string),
                path.map(Path::to_path_buf),
                kind.clone(),
            ));
        }
        let event = Event {
            seq: self.seq,
            at: Utc::now(),
            root: name.clone(),
            session: session.map(str::to_string),
            path: path.map(|p| p.strip_prefix(&*root).unwrap_or(p).display().to_string()),
            kind,
        };
        tracing::info!(
            event = event.kind.name(),
            session = event.session.as_deref().unwrap_or(""),
            path = event.path.as_deref().unwrap_or(""),
            detail = %event.kind.detail(),
        );
        if event.kind.audited()
            && let Err(e) = audit.append(&event)
        {
            tracing::warn!(error = %e, "cannot append to audit.jsonl");
        }
        if let (Some(said), Some(s), EventKind::MessageDelivered { to, message_id, .. }) =
            (self.said.get_mut(&i), &event.session, &event.kind)
        {
            said.insert((s.clone(), to.clone(), message_id.clone()));
        }
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(event.clone());
        let _ = self.bus.send(event);
    }

    /// Whether root `i`'s audit log says message `message_id` was delivered
    /// to `to` in `session` (a copy found in its inbox: a squadd killed
    /// between the delivery and its line did not). The log is read once,
    /// until [`EventLog::forget_said`]; one that cannot be read says none.
    pub(crate) fn said_delivered(
        &mut self,
        i: RootId,
        session: &str,
        to: &str,
        message_id: &str,
    ) -> bool {
        let Some((root, _, _)) = self.roots.get(&i) else {
            return true;
        };
        let said = self.said.entry(i).or_insert_with(|| {
            crate::audit::delivered_messages(root).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read audit.jsonl");
                Default::default()
            })
        });
        said.contains(&(session.to_string(), to.to_string(), message_id.to_string()))
    }

    /// Lets go of the deliveries read from the audit logs (the outbox is
    /// flushed: only a restart finds copies again).
    pub(crate) fn forget_said(&mut self) {
        self.said.clear();
    }

    /// Taps a fact that was not an event now (start-up's standing facts).
    pub(crate) fn tap(&mut self, tapped: super::notices::Tapped) {
        self.tapped.push(tapped);
    }

    /// Takes the events tapped since the last call, the first `at_most`
    /// of them (the rest stay for the next call, in order).
    pub(crate) fn take_tapped(&mut self, at_most: usize) -> Vec<super::notices::Tapped> {
        if self.tapped.len() <= at_most {
            return std::mem::take(&mut self.tapped);
        }
        let rest = self.tapped.split_off(at_most);
        std::mem::replace(&mut self.tapped, rest)
    }

    /// Whether events are tapped and not taken yet.
    pub(crate) fn has_tapped(&self) -> bool {
        !self.tapped.is_empty()
    }

    /// The recent events of one root (by its displayed path).
    pub(crate) fn recent_of(&self, root: &str) -> Vec<Event> {
        self.recent
            .iter()
            .filter(|e| e.root == root)
            .cloned()
            .collect()
    }

    /// The latest event of any root.
    pub(crate) fn last(&self) -> Option<&Event> {
        self.recent.back()
    }

    /// A receiver of every new event (of every root: followers filter).
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.bus.subscribe()
    }
}
