//! The leader's shared context replicated to every checkout
//! (docs/cluster.md, "Replication of the shared context").
//!
//! `.claude/context/shared-context.json` spans every session of a root: it
//! is not a session file, and it outgrows a KV value (the server's
//! `max_payload`, 1 MB by default; 2.2 MB at 1,000 sessions). It goes
//! through a JetStream object store per project instead
//! (`squad-<project>-context`, one object, chunked by the client), with the
//! leader's epoch and host in the object's metadata.
//!
//! - **Out**: where the leader's write of the file completes, squadd hands
//!   the epoch it leads with to this task ([`Handle::publish`]); the task
//!   reads the file and puts it, unless the store already holds these bytes
//!   or an epoch higher than this one was seen (a deposed leader's late
//!   write is never put).
//! - **In**: a watcher over the store (from the latest version: a squadd
//!   starting on a follower catches up) fetches each version of another
//!   host whose epoch is at least the highest seen and writes it atomically
//!   into the checkout; a lower epoch is dropped (`replica-dropped`).
//!   Followers never write their own context (squadd's core gates it), so
//!   nothing written on arrival is published again.

use super::kv::connect_client;
use super::replicate::Report;
use super::{ClusterError, host_id};
use crate::events::EventKind;
use crate::outputs::MAX_CONTEXT_BYTES;
use async_nats::jetstream::{self, object_store};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use squad_policies::cluster::ClusterPolicy;
use squad_protocol::fsx::{ReadError, read_regular};
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

/// The object's name in the store.
pub(crate) const OBJECT: &str = "shared-context.json";
/// Where the highest epoch seen is kept, under `.squad/run/`.
const STATE_FILE: &str = "cluster-context.json";
/// How often a failed put or fetch is tried again and the store looked at.
const TICK: Duration = Duration::from_millis(500);
/// How long a fetch of one version may take before it is tried again
/// (a put purges the previous version's chunks: a fetch racing it stalls).
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fetch may go without a byte before it is given up and tried
/// again from the store's latest version: a fetch racing the put that
/// purged its chunks gets nothing more, and waiting out
/// [`FETCH_TIMEOUT`] held the newer version back for a minute.
const STALL_TIMEOUT: Duration = Duration::from_secs(3);
/// Metadata keys of the object.
const META_EPOCH: &str = "epoch";
const META_ORIGIN: &str = "origin";

/// The object store of a project's shared context.
pub(crate) fn bucket(policy: &ClusterPolicy) -> String {
    format!("squad-{}-context", policy.project)
}

/// What a version seen in the store means here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// This host's own put: nothing to write.
    Own,
    /// No epoch: not a leader's; dropped.
    NoEpoch,
    /// Its epoch is lower than one already seen: a deposed leader's late
    /// write; dropped.
    Fenced,
    /// Fetched and written into the checkout (when its bytes differ).
    Take,
}

/// Decides a version from another host (`own`: this one) with `epoch`,
/// given the highest epoch seen here.
pub(crate) fn arrival(own: bool, epoch: Option<u64>, highest: Option<u64>) -> Arrival {
    if own {
        return Arrival::Own;
    }
    match (epoch, highest) {
        (None, _) => Arrival::NoEpoch,
        (Some(e), Some(h)) if e < h => Arrival::Fenced,
        _ => Arrival::Take,
    }
}

/// Whether this host may put its context with `epoch`, given the highest
/// epoch seen: never under a higher one (it was deposed).
pub(crate) fn may_publish(epoch: u64, highest: Option<u64>) -> bool {
    highest.is_none_or(|h| epoch >= h)
}

/// Whether a version fenced here (a lower epoch than seen) is to be put
/// over with this host's: when this host made the put of the highest epoch
/// seen (`mine`), the store's latest version is now a deposed leader's,
/// and a follower starting afresh would take it.
pub(crate) fn put_over(mine: Option<u64>, highest: Option<u64>) -> bool {
    mine.is_some() && mine == highest
}

/// Where squadd hands the task the leader's writes.
pub(crate) struct Handle {
    tx: mpsc::UnboundedSender<u64>,
}

impl Handle {
    /// The leader's shared context was written here under `epoch`: put it
    /// into the store (if its bytes are not there yet).
    pub(crate) fn publish(&self, epoch: u64) {
        let _ = self.tx.send(epoch);
    }
}

/// What is kept in `.squad/run/cluster-context.json`, so that a restarted
/// squadd still drops a lower epoch and does not fetch again what it has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Saved {
    /// The highest epoch seen (put or taken).
    highest_epoch: Option<u64>,
    /// The store's version (its nuid) last taken or put here.
    nuid: Option<String>,
    /// The fingerprint of that version's bytes.
    hash: Option<u64>,
}

struct Task {
    root: PathBuf,
    path: PathBuf,
    host: String,
    policy: ClusterPolicy,
    bucket: String,
    client: Option<async_nats::Client>,
    js: Option<jetstream::Context>,
    store: Option<object_store::ObjectStore>,
    watch: Option<object_store::Watch>,
    saved: Saved,
    /// The epoch of a put to make (a NATS failure leaves it here).
    due: Option<u64>,
    /// A fetch that failed, tried again at the next tick.
    fetch_again: bool,
    /// The epoch of this squadd's last put.
    mine: Option<u64>,
    reports: mpsc::UnboundedSender<Report>,
}

/// Starts the shared context's task of `root` (inside squadd's runtime);
/// `reports` takes its events for squadd's log.
pub(crate) fn start(
    root: &Path,
    policy: ClusterPolicy,
    reports: mpsc::UnboundedSender<Report>,
) -> Handle {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = Task {
        root: root.to_path_buf(),
        path: root.join(crate::outputs::SHARED_CONTEXT),
        host: host_id(root),
        bucket: bucket(&policy),
        policy,
        client: None,
        js: None,
        store: None,
        watch: None,
        saved: load(root),
        due: None,
        fetch_again: false,
        mine: None,
        reports,
    };
    tokio::spawn(task.run(rx));
    Handle { tx }
}

fn state_path(root: &Path) -> PathBuf {
    root.join(SQUAD_DIR).join(RUN_DIR).join(STATE_FILE)
}

/// The saved state; empty when missing or unreadable (the latest version
/// is then fetched and compared with the file: nothing is lost).
fn load(root: &Path) -> Saved {
    read_regular(&state_path(root), 64 * 1024)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The next version the watcher brings, or never without one.
async fn next_info(
    watch: &mut Option<object_store::Watch>,
) -> Option<Result<object_store::ObjectInfo, object_store::WatcherError>> {
    match watch {
        Some(w) => w.next().await,
        None => std::future::pending().await,
    }
}

/// Whether `bytes` are a shared context: a JSON object (a value from the
/// store may come from any host of the project: never written unchecked).
fn is_context(bytes: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<serde_json::Value>(bytes),
        Ok(serde_json::Value::Object(_))
    )
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<u64>) {
        match connect_client(&self.policy, true, "squadd-context").await {
            Ok(c) => {
                self.js = Some(jetstream::new(c.clone()));
                self.client = Some(c);
            }
            Err(e) => {
                tracing::error!(error = %e, "cluster: shared context replication cannot connect");
                return;
            }
        }
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                epoch = rx.recv() => match epoch {
                    Some(e) => {
                        self.want(e);
                        while let Ok(e) = rx.try_recv() {
                            self.want(e);
                        }
                        self.flush().await;
                    }
                    None => return,
                },
                info = next_info(&mut self.watch) => match info {
                    Some(Ok(info)) => self.arrived(info).await,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "cluster: shared context watcher failed; watching again");
                        self.watch = None;
                    }
                    None => self.watch = None,
                },
                _ = tick.tick() => self.upkeep().await,
            }
        }
    }

    fn want(&mut self, epoch: u64) {
        self.due = Some(self.due.map_or(epoch, |d| d.max(epoch)));
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
            tracing::warn!(error = %e, "cluster: shared context store not ready");
            return;
        }
        if self.fetch_again
            && let Some(store) = self.store.clone()
        {
            match store.info(OBJECT).await {
                Ok(info) => {
                    self.fetch_again = false;
                    self.arrived(info).await;
                }
                Err(e) => tracing::debug!(error = %e, "cluster: shared context not read"),
            }
        }
        self.flush().await;
    }

    async fn ensure_watch(&mut self) -> Result<(), ClusterError> {
        let Some(js) = self.js.clone() else {
            return Err(ClusterError::NoConnection);
        };
        if self.store.is_none() {
            let store = match js.get_object_store(&self.bucket).await {
                Ok(s) => s,
                Err(_) => js
                    .create_object_store(object_store::Config {
                        bucket: self.bucket.clone(),
                        description: Some("squad-supervisor: the leader's shared context".into()),
                        max_bytes: -1,
                        num_replicas: self.policy.replicas,
                        storage: jetstream::stream::StorageType::File,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| ClusterError::Bucket {
                        what: "context store",
                        name: self.bucket.clone(),
                        error: e.to_string(),
                    })?,
            };
            self.store = Some(store);
        }
        if self.watch.is_none()
            && let Some(store) = &self.store
        {
            // From the latest version: a squadd starting on a follower
            // catches up with the leader's context at once.
            let w = store
                .watch_with_history()
                .await
                .map_err(|e| ClusterError::Watch {
                    bucket: self.bucket.clone(),
                    error: e.to_string(),
                })?;
            self.watch = Some(w);
        }
        Ok(())
    }

    /// Puts the context written here under the epoch due, unless the store
    /// holds these bytes already or a higher epoch was seen.
    async fn flush(&mut self) {
        let Some(epoch) = self.due else { return };
        if !self.connected() || self.store.is_none() {
            return;
        }
        if !may_publish(epoch, self.saved.highest_epoch) {
            self.due = None;
            let reason = format!(
                "this host's context (epoch {epoch}) is older than epoch {} already seen: not published",
                self.saved.highest_epoch.unwrap_or(0)
            );
            self.dropped(&self.host.clone(), reason);
            return;
        }
        let bytes = match read_regular(&self.path, MAX_CONTEXT_BYTES) {
            Ok(b) => b,
            Err(ReadError::NotFound) => {
                self.due = None;
                return;
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cluster: shared context not published (unreadable)");
                self.due = None;
                return;
            }
        };
        let hash = crate::index::fingerprint(&bytes);
        if self.saved.hash == Some(hash) {
            // The store's version (put or taken here) has these bytes.
            self.due = None;
            return;
        }
        let Some(store) = self.store.clone() else {
            return;
        };
        let meta = object_store::ObjectMetadata {
            name: OBJECT.into(),
            description: Some("the leader's .claude/context/shared-context.json".into()),
            metadata: HashMap::from([
                (META_EPOCH.to_string(), epoch.to_string()),
                (META_ORIGIN.to_string(), self.host.clone()),
            ]),
            ..Default::default()
        };
        let started = Instant::now();
        match store.put(meta, &mut bytes.as_slice()).await {
            Ok(info) => {
                tracing::info!(
                    bytes = bytes.len(),
                    epoch,
                    ms = started.elapsed().as_millis() as u64,
                    "cluster: shared context published"
                );
                self.due = None;
                self.mine = Some(epoch);
                self.note(Some(info.nuid), hash, epoch);
            }
            Err(e) => {
                // Kept due: tried again at the next tick.
                tracing::warn!(error = %e, "cluster: shared context put failed; retrying");
            }
        }
    }

    /// Records the store's version as this checkout's, and saves.
    fn note(&mut self, nuid: Option<String>, hash: u64, epoch: u64) {
        let before = self.saved.clone();
        self.saved.nuid = nuid;
        self.saved.hash = Some(hash);
        self.saved.highest_epoch = Some(self.saved.highest_epoch.map_or(epoch, |h| h.max(epoch)));
        if self.saved != before {
            self.save();
        }
    }

    fn save(&self) {
        let path = state_path(&self.root);
        let Ok(bytes) = serde_json::to_vec(&self.saved) else {
            return;
        };
        if let Err(e) = crate::safefs::write_atomic_under(&self.root, &path, &bytes, 0o600, None) {
            tracing::warn!(path = %path.display(), error = %e, "cluster: cannot save the shared context state");
        }
    }

    /// A `replica-dropped` event for the context.
    fn dropped(&self, origin: &str, reason: String) {
        tracing::info!(origin, %reason, "cluster: shared context dropped");
        let _ = self.reports.send(Report {
            root: self.root.clone(),
            session: String::new(),
            path: self.path.clone(),
            kind: EventKind::ReplicaDropped {
                file: crate::outputs::SHARED_CONTEXT.into(),
                origin: origin.to_string(),
                reason,
            },
        });
    }

    /// A version of the store not taken: dropped (`replica-dropped`); when
    /// this squadd put the version of the highest epoch seen, the store no
    /// longer holds it and it is put again ([`put_over`]).
    fn refuse(&mut self, info: &object_store::ObjectInfo, origin: &str, reason: String) {
        self.dropped(origin, reason);
        if put_over(self.mine, self.saved.highest_epoch) {
            self.saved.nuid = Some(info.nuid.clone());
            self.saved.hash = None;
            self.want(self.mine.unwrap_or(0));
        }
    }

    /// A version seen in the store.
    async fn arrived(&mut self, info: object_store::ObjectInfo) {
        if info.name != OBJECT || info.deleted || self.saved.nuid.as_deref() == Some(&info.nuid) {
            return;
        }
        let origin = info.metadata.get(META_ORIGIN).cloned().unwrap_or_default();
        let epoch = info
            .metadata
            .get(META_EPOCH)
            .and_then(|e| e.parse::<u64>().ok());
        match arrival(origin == self.host, epoch, self.saved.highest_epoch) {
            Arrival::Own => {}
            Arrival::NoEpoch => {
                self.refuse(&info, &origin, "no leader's epoch: not written".into());
            }
            Arrival::Fenced => {
                let reason = format!(
                    "epoch {} is lower than {} already seen",
                    epoch.unwrap_or(0),
                    self.saved.highest_epoch.unwrap_or(0)
                );
                self.refuse(&info, &origin, reason);
            }
            Arrival::Take => {
                let epoch = epoch.unwrap_or(0);
                if info.size as u64 > MAX_CONTEXT_BYTES {
                    let reason = format!(
                        "{} bytes, more than the {MAX_CONTEXT_BYTES} a shared context may have",
                        info.size
                    );
                    self.refuse(&info, &origin, reason);
                    return;
                }
                let Some(store) = self.store.clone() else {
                    self.fetch_again = true;
                    return;
                };
                match fetch(store, &info).await {
                    Ok(bytes) if is_context(&bytes) => self.take(&info, &bytes, epoch),
                    Ok(_) => self.refuse(&info, &origin, "not a JSON object".into()),
                    Err(e) => {
                        tracing::warn!(error = %e, "cluster: shared context not fetched; retrying");
                        self.fetch_again = true;
                    }
                }
            }
        }
    }
}

/// The bytes of the version `info` names, read from `store`; an error when
/// the store moved on meanwhile (the newer version's own entry comes). A
/// free function: the task, holding its watcher, is not `Sync`.
async fn fetch(
    store: object_store::ObjectStore,
    info: &object_store::ObjectInfo,
) -> Result<Vec<u8>, ClusterError> {
    let read = async {
        let object = store
            .get(OBJECT)
            .await
            .map_err(|e| ClusterError::request("get", e))?;
        if object.info.nuid != info.nuid {
            return Err(ClusterError::Local("a newer version came meanwhile".into()));
        }
        read_unstalled(object, info.size, STALL_TIMEOUT).await
    };
    tokio::time::timeout(FETCH_TIMEOUT, read)
        .await
        .map_err(|_| ClusterError::request("get", "timed out"))?
}

/// Reads `object` to its end (at most one byte over [`MAX_CONTEXT_BYTES`],
/// so an oversized one is seen as such), giving up when no byte comes for
/// `stall`.
async fn read_unstalled(
    object: impl tokio::io::AsyncRead + Unpin,
    size: usize,
    stall: Duration,
) -> Result<Vec<u8>, ClusterError> {
    let limit = MAX_CONTEXT_BYTES + 1;
    let mut object = object.take(limit);
    let mut bytes = Vec::with_capacity(size.min(usize::try_from(limit).unwrap_or(usize::MAX)));
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::time::timeout(stall, object.read(&mut chunk))
            .await
            .map_err(|_| {
                ClusterError::request(
                    "get",
                    format!(
                        "no data for {} s after {} bytes (the version was replaced meanwhile?)",
                        stall.as_secs_f64(),
                        bytes.len()
                    ),
                )
            })?
            .map_err(|e| ClusterError::request("get", e))?;
        if n == 0 {
            return Ok(bytes);
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

impl Task {
    /// Writes a fetched version into the checkout (when it differs from the
    /// file) and notes it.
    fn take(&mut self, info: &object_store::ObjectInfo, bytes: &[u8], epoch: u64) {
        let on_disk = read_regular(&self.path, MAX_CONTEXT_BYTES).ok();
        if on_disk.as_deref() != Some(bytes) {
            // Never through a link, directories made as the leader makes
            // them (`.claude/context/` may not exist on a fresh clone).
            if let Err(e) =
                crate::safefs::write_atomic_under(&self.root, &self.path, bytes, 0o666, Some(0o777))
            {
                tracing::error!(path = %self.path.display(), error = %e, "cluster: cannot write the shared context; fetched again later");
                self.fetch_again = true;
                return;
            }
            tracing::info!(
                bytes = bytes.len(),
                epoch,
                "cluster: shared context written from the leader"
            );
        }
        self.note(
            Some(info.nuid.clone()),
            crate::index::fingerprint(bytes),
            epoch,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (CI, 2026-11-26): a follower fetching a version whose
    /// chunks a newer put purged waited out the whole fetch timeout (a
    /// minute) with nothing coming; a read that stalls is given up.
    #[test]
    fn a_fetch_that_stops_receiving_is_given_up_and_a_whole_one_is_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut writer, reader) = tokio::io::duplex(1024);
            tokio::io::AsyncWriteExt::write_all(&mut writer, b"{\"half")
                .await
                .unwrap();
            // The writer stays open and silent: chunks that never come.
            let got = read_unstalled(reader, 10, Duration::from_millis(50)).await;
            let err = got.unwrap_err().to_string();
            assert!(err.contains("no data for"), "{err}");
            assert!(err.contains("after 6 bytes"), "{err}");
            drop(writer);
            let (mut writer, reader) = tokio::io::duplex(1024);
            tokio::io::AsyncWriteExt::write_all(&mut writer, b"{}")
                .await
                .unwrap();
            drop(writer);
            let got = read_unstalled(reader, 2, Duration::from_millis(50)).await;
            assert_eq!(got.unwrap(), b"{}");
        });
    }

    #[test]
    fn a_version_is_taken_at_an_epoch_at_least_the_highest_seen() {
        // Nothing seen yet: any leader's version.
        assert_eq!(arrival(false, Some(3), None), Arrival::Take);
        assert_eq!(arrival(false, Some(7), Some(7)), Arrival::Take);
        assert_eq!(arrival(false, Some(8), Some(7)), Arrival::Take);
        // A deposed leader's late write.
        assert_eq!(arrival(false, Some(6), Some(7)), Arrival::Fenced);
        // No epoch: nobody's output.
        assert_eq!(arrival(false, None, Some(7)), Arrival::NoEpoch);
        assert_eq!(arrival(false, None, None), Arrival::NoEpoch);
        // This host's own put is never written back.
        assert_eq!(arrival(true, Some(9), Some(7)), Arrival::Own);
    }

    #[test]
    fn a_deposed_leader_publishes_nothing() {
        assert!(may_publish(5, None));
        assert!(may_publish(5, Some(5)));
        assert!(may_publish(6, Some(5)));
        assert!(!may_publish(4, Some(5)));
        // The leader of the highest epoch puts its own back over a late
        // lower one; any other host leaves it.
        assert!(put_over(Some(5), Some(5)));
        assert!(!put_over(Some(4), Some(5)));
        assert!(!put_over(None, Some(5)));
    }

    #[test]
    fn only_a_json_object_is_a_context() {
        assert!(is_context(b"{\"schema_version\": \"2.0.0\"}\n"));
        assert!(!is_context(b"[1, 2]"));
        assert!(!is_context(b"{\"a\": "));
        assert!(!is_context(b""));
    }
}
