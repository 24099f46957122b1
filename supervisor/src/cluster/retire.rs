//! Retention across hosts (docs/cluster.md, "Retention across hosts").
//!
//! Only the leader runs retention. Each session it archives or deletes is
//! published as a **removal record** in the KV bucket
//! `squad-<project>-retired` (key: the session's name in hex, value: a
//! [`Record`] with the leader's epoch), and the session's keys in the files
//! bucket are purged, so that no late version brings it back. Every other
//! host applies the record by the same code retention uses
//! ([`crate::retention::execute`]): the session moves into
//! `.squad/archives/` or is deleted there too, its locks released, the
//! events `session-archived` / `session-deleted` carrying `by` (the
//! leader's host).
//!
//! **Fencing.** On its election a leader writes the marker key
//! `epoch-<n>` before any record of its own. Receivers read the bucket in
//! its order (revision): a record whose epoch is lower than a marker (or a
//! record) before it is a deposed leader's late removal, dropped by every
//! host alike (`replica-dropped`). The markers are never overwritten (one
//! key per epoch), so a host catching up from the start sees the same
//! order and decides the same.

use super::ClusterError;
use super::kv::connect_client;
use super::leader::Leadership;
use super::replicate::{Report, next_entry};
use super::session_write::note_retired;
use super::{host_id, key_of};
use crate::events::EventKind;
use async_nats::jetstream::{self, kv};
use chrono::{DateTime, NaiveDateTime, Utc};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use squad_policies::cluster::ClusterPolicy;
use squad_policies::retention::{Place, Verb};
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::tree::{ARCHIVES_DIR, SQUAD_DIR, sessions_dir};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often markers, pending records and retries are looked at.
const TICK: Duration = Duration::from_millis(500);
/// Prefix of the epoch markers' keys.
const MARKER: &str = "epoch-";

/// What the leader did to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Removal {
    /// Moved into `.squad/archives/`.
    Archived,
    /// Deleted (from `sessions/` or `archives/`).
    Deleted,
}

/// A removal record: the value of a session's key in the retired bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The session directory's name.
    pub session: String,
    /// Archived or deleted.
    pub action: Removal,
    /// The leader's epoch when its retention removed it.
    pub epoch: u64,
    /// The leader's host id.
    pub leader: String,
    /// When the leader removed it.
    pub at: DateTime<Utc>,
    /// The retention rule that decided (as the leader's event says).
    pub rule: String,
    /// The session's age under it, in seconds.
    pub age_secs: u64,
    /// Where the age counts from.
    pub since_source: String,
}

/// What this checkout has of a session a record names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Local {
    /// `.squad/sessions/<name>` is there.
    pub in_sessions: bool,
    /// `.squad/archives/<name>` is there.
    pub in_archives: bool,
    /// When the local session began: its status's `started_at`, else the
    /// time its name carries.
    pub started: Option<DateTime<Utc>>,
}

/// What to do with an arrived record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Carry out `verb` on the session where it is (`place`).
    Apply(Verb, Place),
    /// Nothing left to do here (this host's own retention did it, or it is
    /// done already).
    Nothing,
    /// A deposed leader's late removal: its epoch is lower than one seen
    /// before it in the bucket.
    Fenced,
    /// The session here began after the removal: a session re-created
    /// under the same name, not the one removed.
    Recreated,
}

/// Carries out one removal on this checkout (`verb` where the session is,
/// `place`): the events it caused, or why it must be tried again later.
/// squadd's (`daemon/upkeep.rs`), handed in at [`start`] so that this
/// module does not reach into retention's execution.
pub(crate) type CarryOut = fn(&Path, &Record, Verb, Place) -> Result<Vec<Report>, String>;

/// Decides an arrived record, given the highest epoch seen before it in
/// the bucket's order (`fence`), whether this host published it (`own`)
/// and what this checkout has of the session.
pub(crate) fn decide(record: &Record, fence: u64, own: bool, local: &Local) -> Decision {
    if record.epoch < fence {
        return Decision::Fenced;
    }
    if own {
        return Decision::Nothing;
    }
    let target = match record.action {
        Removal::Archived if local.in_sessions => (Verb::Archive, Place::Sessions),
        Removal::Deleted if local.in_sessions => (Verb::Delete, Place::Sessions),
        Removal::Deleted if local.in_archives => (Verb::Delete, Place::Archives),
        _ => return Decision::Nothing,
    };
    if local.started.is_some_and(|s| s > record.at) {
        return Decision::Recreated;
    }
    Decision::Apply(target.0, target.1)
}

/// The records a leader's retention run gives: one per session archived
/// or deleted (not the remnants of interrupted deletions).
pub(crate) fn records_of(
    caused: &[(Option<String>, Option<PathBuf>, EventKind)],
    epoch: u64,
    leader: &str,
    at: DateTime<Utc>,
) -> Vec<Record> {
    caused
        .iter()
        .filter_map(|(session, _, kind)| {
            let session = session.as_ref()?;
            if !squad_protocol::ids::is_session_dir_name(session) {
                return None;
            }
            let (action, rule, age_secs, since_source) = match kind {
                EventKind::SessionArchived {
                    rule,
                    age_secs,
                    since_source,
                    ..
                } => (Removal::Archived, rule, age_secs, since_source),
                EventKind::SessionDeleted {
                    rule,
                    age_secs,
                    since_source,
                    ..
                } => (Removal::Deleted, rule, age_secs, since_source),
                _ => return None,
            };
            Some(Record {
                session: session.clone(),
                action,
                epoch,
                leader: leader.to_string(),
                at,
                rule: rule.clone(),
                age_secs: *age_secs,
                since_source: since_source.clone(),
            })
        })
        .collect()
}

/// Where squadd hands the task a leader's removals.
pub(crate) struct Handle {
    tx: mpsc::UnboundedSender<Record>,
    host: String,
}

impl Handle {
    /// A retention run finished on this host while it led with `epoch`,
    /// causing these events (session, path, kind): its removals are
    /// published to the other hosts.
    pub(crate) fn retention_ran(
        &self,
        caused: &[(Option<String>, Option<PathBuf>, EventKind)],
        epoch: u64,
    ) {
        for r in records_of(caused, epoch, &self.host, Utc::now()) {
            let _ = self.tx.send(r);
        }
    }
}

struct Task {
    root: PathBuf,
    host: String,
    policy: ClusterPolicy,
    js: Option<jetstream::Context>,
    client: Option<async_nats::Client>,
    store: Option<kv::Store>,
    watch: Option<kv::Watch>,
    leadership: Leadership,
    /// The epoch whose marker this host wrote.
    marked: Option<u64>,
    /// The highest epoch seen so far in the bucket's order.
    fence: u64,
    /// The last revision handled (a new watcher starts after it).
    last_revision: u64,
    /// Records to publish (a NATS failure leaves them here).
    out: Vec<Record>,
    /// Records to apply again (the gc lock was busy).
    retry: Vec<Record>,
    reports: mpsc::UnboundedSender<Report>,
    carry_out: CarryOut,
}

/// Starts the removal task of `root` (inside squadd's runtime): it
/// publishes the removals of this host's retention while it leads
/// (`leadership`) and applies the other hosts'. `reports` takes the events
/// for squadd's log.
pub(crate) fn start(
    root: &Path,
    policy: ClusterPolicy,
    leadership: Leadership,
    reports: mpsc::UnboundedSender<Report>,
    carry_out: CarryOut,
) -> Handle {
    let host = host_id(root);
    let (tx, rx) = mpsc::unbounded_channel();
    let task = Task {
        root: root.to_path_buf(),
        host: host.clone(),
        policy,
        js: None,
        client: None,
        store: None,
        watch: None,
        leadership,
        marked: None,
        fence: 0,
        last_revision: 0,
        out: Vec::new(),
        retry: Vec::new(),
        reports,
        carry_out,
    };
    tokio::spawn(task.run(rx));
    Handle { tx, host }
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Record>) {
        match connect_client(&self.policy, true, "squadd-retire").await {
            Ok(c) => {
                self.js = Some(jetstream::new(c.clone()));
                self.client = Some(c);
            }
            Err(e) => {
                tracing::error!(error = %e, "cluster: the removal task cannot connect");
                return;
            }
        }
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                rec = rx.recv() => match rec {
                    Some(r) => {
                        self.out.push(r);
                        while let Ok(r) = rx.try_recv() {
                            self.out.push(r);
                        }
                        self.flush().await;
                    }
                    None => return,
                },
                entry = next_entry(&mut self.watch) => match entry {
                    Some(Ok(e)) => self.arrived(e).await,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "cluster: removal watcher failed; watching again");
                        self.watch = None;
                    }
                    None => self.watch = None,
                },
                _ = tick.tick() => self.upkeep().await,
            }
        }
    }

    fn connected(&self) -> bool {
        self.client
            .as_ref()
            .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected)
    }

    async fn upkeep(&mut self) {
        if !self.connected() {
            return;
        }
        if let Err(e) = self.ensure_watch().await {
            tracing::warn!(error = %e, "cluster: removal bucket not ready");
            return;
        }
        // The marker first, at once on election: a deposed leader's
        // removal landing after it is refused by every host.
        if let Some(epoch) = self.leadership.epoch()
            && let Err(e) = self.mark(epoch).await
        {
            tracing::warn!(error = %e, epoch, "cluster: epoch marker not written; retrying");
        }
        self.flush().await;
        for r in std::mem::take(&mut self.retry) {
            self.apply(r, false).await;
        }
    }

    async fn ensure_watch(&mut self) -> Result<(), ClusterError> {
        let Some(js) = self.js.clone() else {
            return Err(ClusterError::NoConnection);
        };
        let bucket = format!("squad-{}-retired", self.policy.project);
        if self.store.is_none() {
            let store = match js.get_key_value(&bucket).await {
                Ok(s) => s,
                Err(_) => js
                    .create_key_value(kv::Config {
                        bucket: bucket.clone(),
                        description: "squad-supervisor: sessions removed by the leader's retention"
                            .into(),
                        history: 1,
                        max_value_size: 64 * 1024,
                        num_replicas: self.policy.replicas,
                        storage: jetstream::stream::StorageType::File,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| ClusterError::Bucket {
                        what: "removal bucket",
                        name: bucket.clone(),
                        error: e.to_string(),
                    })?,
            };
            self.store = Some(store);
        }
        if self.watch.is_none()
            && let Some(store) = &self.store
        {
            let w = store
                .watch_all_from_revision(self.last_revision + 1)
                .await
                .map_err(|e| ClusterError::Watch {
                    bucket,
                    error: e.to_string(),
                })?;
            self.watch = Some(w);
        }
        Ok(())
    }

    /// Writes this leader's epoch marker once.
    async fn mark(&mut self, epoch: u64) -> Result<(), ClusterError> {
        if self.marked.is_some_and(|m| m >= epoch) {
            return Ok(());
        }
        let Some(store) = &self.store else {
            return Err(ClusterError::NoConnection);
        };
        let body = serde_json::json!({"epoch": epoch, "leader": self.host, "at": Utc::now()});
        match store
            .create(
                format!("{MARKER}{epoch}"),
                body.to_string().into_bytes().into(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {}
            Err(e) => return Err(ClusterError::request("create", e)),
        }
        self.marked = Some(epoch);
        Ok(())
    }

    /// Publishes the pending records (marker first), then purges each
    /// session's keys in the files bucket; what NATS failed stays pending.
    async fn flush(&mut self) {
        if self.out.is_empty() || !self.connected() || self.store.is_none() {
            return;
        }
        for r in std::mem::take(&mut self.out) {
            if let Err(e) = self.publish(&r).await {
                tracing::warn!(error = %e, session = %r.session, "cluster: removal not published; retrying");
                self.out.push(r);
            }
        }
    }

    async fn publish(&mut self, r: &Record) -> Result<(), ClusterError> {
        self.mark(r.epoch).await?;
        let (Some(store), Some(js)) = (self.store.clone(), self.js.clone()) else {
            return Err(ClusterError::NoConnection);
        };
        let body = serde_json::to_vec(r).map_err(|e| ClusterError::Encode(e.to_string()))?;
        store
            .put(key_of(&r.session), body.into())
            .await
            .map_err(|e| ClusterError::request("put", e))?;
        note_retired(&self.root, &r.session);
        tracing::info!(session = %r.session, action = ?r.action, epoch = r.epoch, "cluster: removal published");
        // The session's files: purged, so a host catching up later finds
        // no version to write back.
        let files = js
            .get_key_value(self.policy.files_bucket())
            .await
            .map_err(|e| ClusterError::request("files bucket", e))?;
        let prefix = key_of(&format!("{}/", r.session));
        let mut keys = files
            .keys()
            .await
            .map_err(|e| ClusterError::request("keys", e))?;
        let mut doomed = Vec::new();
        while let Some(k) = keys.next().await {
            match k {
                Ok(k) if k.starts_with(&prefix) => doomed.push(k),
                Ok(_) => {}
                Err(e) => return Err(ClusterError::request("keys", e)),
            }
        }
        for k in doomed {
            files
                .purge(&k)
                .await
                .map_err(|e| ClusterError::request("purge", e))?;
        }
        Ok(())
    }

    /// One entry of the removal bucket, in its order.
    async fn arrived(&mut self, entry: kv::Entry) {
        self.last_revision = self.last_revision.max(entry.revision);
        if entry.operation != kv::Operation::Put {
            return;
        }
        if let Some(n) = entry.key.strip_prefix(MARKER) {
            if let Ok(epoch) = n.parse::<u64>() {
                self.fence = self.fence.max(epoch);
            }
            return;
        }
        let record: Record = match serde_json::from_slice(&entry.value) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(key = %entry.key, error = %e, "cluster: a removal record dropped (unreadable)");
                return;
            }
        };
        // Never trusted: the name is a session directory's and the key
        // is its own.
        if !squad_protocol::ids::is_session_dir_name(&record.session)
            || key_of(&record.session) != entry.key
        {
            tracing::warn!(key = %entry.key, "cluster: a removal record dropped (not a session's key)");
            return;
        }
        self.apply(record, true).await;
    }

    /// Decides and carries out a record (`first`: not a retry).
    async fn apply(&mut self, record: Record, first: bool) {
        let local = local_facts(&self.root, &record.session);
        let own = record.leader == self.host;
        let decision = if first {
            decide(&record, self.fence, own, &local)
        } else {
            // A retry was decided already; only the place may have changed.
            decide(&record, 0, own, &local)
        };
        if first && decision != Decision::Fenced {
            self.fence = self.fence.max(record.epoch);
        }
        match decision {
            Decision::Fenced => {
                let reason = format!(
                    "a removal by epoch {} after epoch {}: a deposed leader's late write; not applied",
                    record.epoch, self.fence
                );
                tracing::warn!(session = %record.session, %reason, "cluster: removal dropped");
                let _ = self.reports.send(Report {
                    root: self.root.clone(),
                    session: record.session.clone(),
                    path: sessions_dir(&self.root).join(&record.session),
                    kind: EventKind::ReplicaDropped {
                        file: format!("removal of {}", record.session),
                        origin: record.leader.clone(),
                        reason,
                    },
                });
            }
            Decision::Recreated => {
                tracing::info!(session = %record.session, "cluster: removal not applied: the session here began after it");
            }
            Decision::Nothing => note_retired(&self.root, &record.session),
            Decision::Apply(verb, place) => {
                note_retired(&self.root, &record.session);
                let root = self.root.clone();
                let r = record.clone();
                let carry_out = self.carry_out;
                let done = tokio::task::spawn_blocking(move || carry_out(&root, &r, verb, place))
                    .await
                    .unwrap_or_else(|e| Err(format!("the removal task failed: {e}")));
                match done {
                    Ok(reports) => {
                        for rep in reports {
                            let _ = self.reports.send(rep);
                        }
                    }
                    Err(e) => {
                        tracing::info!(session = %record.session, error = %e, "cluster: removal retried later");
                        self.retry.push(record);
                    }
                }
            }
        }
    }
}

/// What this checkout has of `session` (no link followed: a link is
/// refused by retention's own checks when acting).
fn local_facts(root: &Path, session: &str) -> Local {
    let live = sessions_dir(root).join(session);
    let archived = root.join(SQUAD_DIR).join(ARCHIVES_DIR).join(session);
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let in_sessions = is_dir(&live);
    let in_archives = is_dir(&archived);
    let dir = if in_sessions { &live } else { &archived };
    Local {
        in_sessions,
        in_archives,
        started: started_at(&dir.join(SESSION_STATUS_FILE)).or_else(|| name_time(session)),
    }
}

/// The `started_at` of a session-status.md, when it reads.
fn started_at(path: &Path) -> Option<DateTime<Utc>> {
    let bytes =
        squad_protocol::fsx::read_regular(path, squad_protocol::validate::MAX_FILE_BYTES).ok()?;
    match crate::index::index_bytes(path, squad_protocol::FileKind::SessionStatus, &bytes).entry {
        crate::index::Entry::Status(s) => Some(s.started_at.with_timezone(&Utc)),
        _ => None,
    }
}

/// The time a session directory's name carries (`20240115T100000Z-…`).
fn name_time(session: &str) -> Option<DateTime<Utc>> {
    let stamp = session.get(..16)?;
    NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ")
        .ok()
        .map(|t| t.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(action: Removal, epoch: u64) -> Record {
        Record {
            session: "20240115T100000Z-old".into(),
            action,
            epoch,
            leader: "leader:/srv/x".into(),
            at: "2024-03-01T00:00:00Z".parse().unwrap(),
            rule: "retention.archive_completed_after".into(),
            age_secs: 9,
            since_source: "completed_at".into(),
        }
    }

    fn here(in_sessions: bool, in_archives: bool) -> Local {
        Local {
            in_sessions,
            in_archives,
            started: Some("2024-01-15T10:00:00Z".parse().unwrap()),
        }
    }

    #[test]
    fn a_leaders_removal_is_applied_where_the_session_is() {
        let archived = record(Removal::Archived, 7);
        assert_eq!(
            decide(&archived, 7, false, &here(true, false)),
            Decision::Apply(Verb::Archive, Place::Sessions)
        );
        // Archived here already, or gone: nothing to do.
        assert_eq!(
            decide(&archived, 7, false, &here(false, true)),
            Decision::Nothing
        );
        assert_eq!(
            decide(&archived, 0, false, &here(false, false)),
            Decision::Nothing
        );
        let deleted = record(Removal::Deleted, 8);
        assert_eq!(
            decide(&deleted, 7, false, &here(true, false)),
            Decision::Apply(Verb::Delete, Place::Sessions)
        );
        assert_eq!(
            decide(&deleted, 7, false, &here(false, true)),
            Decision::Apply(Verb::Delete, Place::Archives)
        );
        // The leader's own host: its retention did it.
        assert_eq!(
            decide(&deleted, 7, true, &here(true, false)),
            Decision::Nothing
        );
    }

    #[test]
    fn a_deposed_leaders_late_removal_is_fenced() {
        // Epoch 8's marker came before this epoch-7 record.
        assert_eq!(
            decide(&record(Removal::Archived, 7), 8, false, &here(true, false)),
            Decision::Fenced
        );
        assert_eq!(
            decide(&record(Removal::Deleted, 7), 8, true, &here(false, true)),
            Decision::Fenced
        );
    }

    #[test]
    fn a_session_recreated_after_its_removal_is_left_alone() {
        let later = Local {
            started: Some("2024-04-01T00:00:00Z".parse().unwrap()),
            ..here(true, false)
        };
        assert_eq!(
            decide(&record(Removal::Archived, 7), 7, false, &later),
            Decision::Recreated
        );
        // Unknown start (no status, no readable name): the removal holds.
        let unknown = Local {
            started: None,
            ..here(true, false)
        };
        assert_eq!(
            decide(&record(Removal::Archived, 7), 7, false, &unknown),
            Decision::Apply(Verb::Archive, Place::Sessions)
        );
        assert_eq!(
            name_time("20240115T100000Z-old"),
            Some("2024-01-15T10:00:00Z".parse().unwrap())
        );
        assert_eq!(name_time("junk"), None);
    }

    #[test]
    fn a_retention_run_gives_one_record_per_session_removed() {
        let ev = |archived: bool| {
            if archived {
                EventKind::SessionArchived {
                    rule: "retention.archive_completed_after".into(),
                    age_secs: 5,
                    since_source: "completed_at".into(),
                    by: None,
                }
            } else {
                EventKind::SessionDeleted {
                    rule: "retention.delete_archived_after".into(),
                    age_secs: 6,
                    since_source: "archived_at".into(),
                    by: None,
                }
            }
        };
        let run = vec![
            (Some("20240115T100000Z-a".into()), None, ev(true)),
            (Some("20240115T100000Z-b".into()), None, ev(false)),
            // An interrupted deletion's remnant, a failure: not removals.
            (
                Some(".deleting-20240115T100000Z-c-9".into()),
                None,
                ev(false),
            ),
            (
                Some("20240115T100000Z-d".into()),
                None,
                EventKind::RetentionFailed { error: "x".into() },
            ),
        ];
        let at = Utc::now();
        let got = records_of(&run, 4, "h", at);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].action, Removal::Archived);
        assert_eq!(got[1].action, Removal::Deleted);
        assert_eq!((got[1].epoch, got[1].leader.as_str()), (4, "h"));
        assert!(records_of(&[], 4, "h", at).is_empty());
        let v = serde_json::to_value(&got[0]).unwrap();
        assert_eq!(v["action"], "archived");
    }
}
