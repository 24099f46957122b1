// Over 800 lines: the replication task of one root (its KV watch, the
// publishing of local files, the applying of arrivals, conflicts and
// ownership) is one state machine over one `Task`. The split waiting is
// the arriving side (`arrived`, `write_arrival`, `conflict`, `dropped`)
// into replicate/arrive.rs, beside the publishing one (issue 42).
//! Protocol files replicated between a project's checkouts
//! (docs/cluster.md, "Replication"), and where each message is delivered.
//!
//! One task per root with `cluster:`, beside the lock task, on its own NATS
//! connection. KV bucket `squad-<project>-files`: one key per session file
//! ([`file_key`]), value = a JSON line ([`Meta`]: origin host, session,
//! file, optional epoch) then the file's bytes.
//!
//! - **Out**: squadd's "file applied" path says which file changed
//!   ([`Handle::changed`]); a sweep every few seconds finds what changed
//!   while squadd was down or without an event. A file whose bytes differ
//!   from the version last synced for its key is published by
//!   compare-and-set on the revision last seen for that key.
//! - **In**: a KV watcher from the last revision applied (kept in
//!   `.squad/run/cluster-files.json`, so a restart catches up) writes other
//!   hosts' versions into the checkout atomically; the normal watch path
//!   then validates and applies them. They are never echoed back: the
//!   version written is the one synced, so the file equals it.
//! - **Conflicts**: two hosts writing one file from the same revision: the
//!   first to commit wins; the other's bytes are kept as
//!   `<session>/conflicts/<file>.<host>-r<revision>` (outside the
//!   protocol's read set) and reported (a `replica-conflict` event,
//!   `cluster status`).
//! - **Epochs**: a value may carry an opaque `epoch` (the leader's, for
//!   supervisor-owned outputs); an arrival whose epoch is lower than the
//!   highest seen for its key is dropped (`replica-dropped`).

use super::ClusterError;
use super::accept::{self, NotTheLeaders, Verdict};
use super::kv::{connect_client, publish_cas};
use super::presence::{self, Presence};
use super::session_write;
use super::{host_id, key_of};
use crate::events::EventKind;
use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use squad_policies::cluster::ClusterPolicy;
use squad_protocol::FileKind;
use squad_protocol::fsx::{ReadError, read_regular};
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR, sessions_dir};
use squad_protocol::validate::MAX_FILE_BYTES;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;

/// Where the replication state is kept, under the root.
pub(crate) const STATE_FILE: &str = "cluster-files.json";
/// The folder of a session where losing versions are kept.
pub(crate) const CONFLICTS_DIR: &str = "conflicts";
/// How often dirty files are retried and presence is polled.
const TICK: Duration = Duration::from_millis(500);
/// How often the session directories are swept for changed files.
const SWEEP_EVERY: Duration = Duration::from_secs(3);
/// How often at most the state file is rewritten (fsynced) while arrivals
/// stream in; the tick saves what is left. A kill loses at most this much
/// of it: the versions since are seen again, found equal to the files, and
/// noted again (never applied twice).
const SAVE_EVERY: Duration = Duration::from_millis(250);
/// Conflicts kept for `cluster status`.
const CONFLICTS_SHOWN: usize = 20;

/// The KV key of a session file: `session/file` in hex (see [`key_of`]).
pub(crate) fn file_key(session: &str, file: &str) -> String {
    key_of(&format!("{session}/{file}"))
}

/// Whether a file is a supervisor-owned output (the session status squadd
/// derives, squadd's notices): replicated only when published with the
/// leader's epoch ([`Handle::publish_owned`]), never by the sweep, since
/// every host writes its own.
pub(crate) fn supervisor_owned(file: &str) -> bool {
    FileKind::from_file_name(file) == Some(FileKind::SessionStatus)
        || file.starts_with("role-comm-squadd-")
}

/// The first line of a value: where the version comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Meta {
    /// The host that published it.
    pub origin: String,
    /// The session directory's name.
    pub session: String,
    /// The file's name in it.
    pub file: String,
    /// The publisher's epoch (opaque; supervisor-owned outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

/// A value: `meta` as one JSON line, then the bytes.
pub(crate) fn encode(meta: &Meta, bytes: &[u8]) -> Result<Vec<u8>, ClusterError> {
    let mut out = serde_json::to_vec(meta).map_err(|e| ClusterError::Encode(e.to_string()))?;
    out.push(b'\n');
    out.extend_from_slice(bytes);
    Ok(out)
}

/// Why a value of the files bucket is refused (it may come from any host
/// of the project: never trusted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ValueError {
    /// No header line.
    #[error("no header line")]
    NoHeader,
    /// The header is not the JSON of a [`Meta`].
    #[error("unreadable header: {0}")]
    Header(String),
    /// The session is not named like one.
    #[error("`{0}` is not a session name")]
    NotSession(String),
    /// The file is not named like a protocol file.
    #[error("`{0}` is not a protocol file name")]
    NotProtocolFile(String),
    /// The key is not the one of the session and file named.
    #[error("the key is not the file's")]
    WrongKey,
    /// Larger than a protocol file may be.
    #[error("larger than a protocol file may be")]
    TooLarge,
}

/// A value read back and checked: the names are a session directory and a
/// protocol file of it (never a path elsewhere), the key is theirs.
pub(crate) fn decode(key: &str, value: &[u8]) -> Result<(Meta, Vec<u8>), ValueError> {
    let at = value
        .iter()
        .position(|b| *b == b'\n')
        .ok_or(ValueError::NoHeader)?;
    let meta: Meta =
        serde_json::from_slice(&value[..at]).map_err(|e| ValueError::Header(e.to_string()))?;
    if !squad_protocol::ids::is_session_dir_name(&meta.session) {
        return Err(ValueError::NotSession(meta.session));
    }
    let name_ok = !meta.file.contains('/')
        && !meta.file.contains('\0')
        && !squad_protocol::atomic::is_temp_name(&meta.file)
        && FileKind::from_file_name(&meta.file).is_some();
    if !name_ok {
        return Err(ValueError::NotProtocolFile(meta.file));
    }
    if file_key(&meta.session, &meta.file) != key {
        return Err(ValueError::WrongKey);
    }
    let bytes = value[at + 1..].to_vec();
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ValueError::TooLarge);
    }
    Ok((meta, bytes))
}

/// The version of a key this checkout holds (it equals the file, or the
/// file changed since and is to be published).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Synced {
    /// Session.
    pub session: String,
    /// File.
    pub file: String,
    /// Its revision in the bucket.
    pub revision: u64,
    /// Fingerprint of its bytes ([`crate::index::fingerprint`]).
    pub hash: u64,
    /// The host it came from.
    pub origin: String,
    /// The highest epoch seen for the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

/// The state kept in `.squad/run/cluster-files.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Saved {
    /// The last revision of the bucket applied: a restart watches from the
    /// next one.
    pub last_revision: u64,
    /// Per key, the version synced.
    pub keys: BTreeMap<String, Synced>,
    /// Agents registered on this host (renewed after a restart).
    #[serde(default)]
    pub present_here: BTreeSet<String>,
    /// The presence table last seen (used until NATS answers after a
    /// restart).
    #[serde(default)]
    pub presence: BTreeMap<String, String>,
}

/// What an arriving version means for the file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Already applied (an older or the same revision).
    Stale,
    /// Fenced: its epoch is lower than the highest seen for the key.
    Fenced,
    /// The file already has these bytes: only noted as synced.
    Same,
    /// This host's own earlier version (a restart lost its revision); the
    /// file changed since and will be published over it.
    OwnOlder,
    /// Written into the checkout.
    Write,
    /// The file has a local change not yet published: kept aside, then the
    /// arrival is written (its revision committed first).
    Conflict,
}

/// Decides an arrival at `revision` with `epoch` and bytes `hash`, from
/// `origin` (`own`: this host), given the key's synced version and the
/// file's fingerprint on disk (`None`: no file). `owned`: a
/// supervisor-owned output ([`supervisor_owned`]), which has one writer
/// (the leader, by lease): never a conflict, the arrival replaces the
/// locally derived version.
///
/// Replicas never go back in time: this host's own version is never
/// written over the file (the file is that version or a later local edit
/// of it), whatever the synced state a kill -9 left.
pub(crate) fn arrival(
    synced: Option<&Synced>,
    revision: u64,
    epoch: Option<u64>,
    hash: u64,
    own: bool,
    owned: bool,
    disk: Option<u64>,
) -> Arrival {
    if synced.is_some_and(|s| s.revision >= revision) {
        return Arrival::Stale;
    }
    if let (Some(e), Some(max)) = (epoch, synced.and_then(|s| s.epoch))
        && e < max
    {
        return Arrival::Fenced;
    }
    if disk == Some(hash) {
        return Arrival::Same;
    }
    if own {
        return Arrival::OwnOlder;
    }
    match (disk, synced) {
        (None, _) => Arrival::Write,
        (Some(d), Some(s)) if d == s.hash => Arrival::Write,
        _ if owned => Arrival::Write,
        _ => Arrival::Conflict,
    }
}

/// What a publish refused by compare-and-set means: the key moved on to
/// another version (`theirs_epoch`, from this host when `own`; `same`:
/// with our bytes). `ours_epoch`: the epoch of an owned output being
/// published; `owned`: the file is supervisor-owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Race {
    /// Theirs has our bytes: only noted as synced.
    Same,
    /// Ours is the later version (theirs is this host's own earlier one, or
    /// an owned output of a lower epoch): noted at its revision, ours
    /// published over it.
    PublishOver,
    /// Ours is an owned output of a deposed leader (or an owned output
    /// without an epoch, never ours to publish): dropped, theirs written.
    Deposed,
    /// Another host committed its version first: ours kept aside as a
    /// conflict, theirs written.
    Conflict,
}

/// Decides a refused publish (see [`Race`]). The own-host rule of
/// [`arrival`] holds here too: a kill -9 right after a publish can lose
/// its revision, and the next publish of a newer local edit then meets
/// this host's own older version; that version never wins.
pub(crate) fn race(
    ours_epoch: Option<u64>,
    theirs_epoch: Option<u64>,
    own: bool,
    same: bool,
    owned: bool,
) -> Race {
    if same {
        return Race::Same;
    }
    if let Some(e) = ours_epoch {
        return match refused(e, theirs_epoch, own) {
            Refused::PublishOver => Race::PublishOver,
            Refused::Deposed => Race::Deposed,
        };
    }
    if own {
        return Race::PublishOver;
    }
    if owned {
        return Race::Deposed;
    }
    Race::Conflict
}

/// Where a message to an agent is delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Here.
    Here,
    /// On another host: not here.
    Elsewhere(String),
    /// Not known yet (the presence table is loading): ask again shortly.
    Unknown,
}

/// Where a message to `to` is delivered, seen from `host` (docs/cluster.md,
/// "Who delivers"): on the host `presence` names (the table read from NATS,
/// or the one saved in the state file until it is read); with no record, on
/// the message's `origin` (`None`: written here) — but only once the table
/// was read from NATS since squadd started (`loaded`). Before that a
/// missing record proves nothing (the saved table may predate the agent's
/// registration), so the message waits, however long NATS takes to answer:
/// falling back to the origin after a fixed wait delivered a message on the
/// sender's host as well as on the recipient's. An agent registered here
/// (`present_here`) is delivered here meanwhile: this host keeps working
/// locally without NATS.
pub(crate) fn owner_of(
    host: &str,
    presence: &BTreeMap<String, String>,
    loaded: bool,
    present_here: &BTreeSet<String>,
    origin: Option<&String>,
    to: &str,
) -> Owner {
    if let Some(h) = presence.get(to) {
        return if h == host {
            Owner::Here
        } else {
            Owner::Elsewhere(h.clone())
        };
    }
    if !loaded {
        return if present_here.contains(to) {
            Owner::Here
        } else {
            Owner::Unknown
        };
    }
    match origin {
        Some(h) if h != host => Owner::Elsewhere(h.clone()),
        _ => Owner::Here,
    }
}

/// A conflict, for `cluster status`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Conflict {
    /// Session.
    pub session: String,
    /// The file.
    pub file: String,
    /// Where the losing version is kept, relative to the session.
    pub kept: String,
    /// The host whose version won.
    pub winner: String,
    /// The winning revision.
    pub revision: u64,
}

/// What the task shares with squadd's loop (read synchronously).
#[derive(Debug)]
struct View {
    host: String,
    /// (session, file) → the host its synced version came from.
    origins: BTreeMap<(String, String), String>,
    /// agent → host; from the saved state until NATS answers.
    presence: BTreeMap<String, String>,
    presence_loaded: bool,
    present_here: BTreeSet<String>,
    last_revision: u64,
    published: u64,
    /// Of `published`, the leader's outputs (status, notices).
    published_outputs: u64,
    applied: u64,
    dropped: u64,
    /// Of `dropped`, supervisor outputs refused as not the leader's.
    refused_outputs: u64,
    /// The last of them: file, origin, why.
    last_refused: Option<serde_json::Value>,
    pending: usize,
    conflicts: Vec<Conflict>,
    conflicts_total: u64,
    error: Option<String>,
}

/// An event for squadd's log (`root` names the checkout).
#[derive(Debug)]
pub(crate) struct Report {
    /// The root.
    pub root: PathBuf,
    /// The session.
    pub session: String,
    /// The file concerned.
    pub path: PathBuf,
    /// What happened.
    pub kind: EventKind,
}

enum Work {
    Changed(String, String),
    Owned(String, String, u64),
    Present(String),
    Leader(super::leader::Leadership),
}

/// A supervisor output from another host waiting for the lease to say
/// whether its publisher leads (see [`super::accept`]).
struct Held {
    key: String,
    revision: u64,
    meta: Meta,
    bytes: Vec<u8>,
    since: Instant,
}

/// The most outputs held at once; more are refused (a flood of forged
/// epochs must not grow the process).
const MAX_HELD: usize = 64;

/// The last revision of the files bucket this checkout applied, shared
/// with the lease task, whose heartbeat carries it (replication lag).
pub(crate) type Applied = Arc<AtomicU64>;

/// A host's replication lag in revisions: the files bucket's last
/// revision minus the last one the host applied (its heartbeat says);
/// unknown when either is.
pub(crate) fn lag(bucket_last: Option<u64>, applied: Option<u64>) -> Option<u64> {
    Some(bucket_last?.saturating_sub(applied?))
}

/// Where squadd hands the replication task its work.
pub(crate) struct Handle {
    tx: mpsc::UnboundedSender<Work>,
    view: Arc<Mutex<View>>,
    applied: Applied,
}

fn lock(view: &Mutex<View>) -> MutexGuard<'_, View> {
    // A panic while holding it cannot leave the view half-updated in a way
    // that matters (counters, maps): go on with it.
    view.lock().unwrap_or_else(|p| p.into_inner())
}

impl Handle {
    /// A protocol file of `session` changed on disk (squadd applied it).
    pub(crate) fn changed(&self, session: &str, file: &str) {
        if !supervisor_owned(file) {
            let _ = self
                .tx
                .send(Work::Changed(session.to_string(), file.to_string()));
        }
    }

    /// Publishes a supervisor-owned output with the leader's `epoch`
    /// (leader election supplies it; receivers drop lower epochs).
    pub(crate) fn publish_owned(&self, session: &str, file: &str, epoch: u64) {
        let _ = self
            .tx
            .send(Work::Owned(session.to_string(), file.to_string(), epoch));
    }

    /// The lease as this host reads it: arriving supervisor outputs are
    /// taken only from its holder with its epoch ([`super::accept`]);
    /// until it is given, they are held.
    pub(crate) fn follow_leader(&self, leadership: super::leader::Leadership) {
        let _ = self.tx.send(Work::Leader(leadership));
    }

    /// The supervisor outputs refused as not the leader's: how many, and
    /// the last one ("FILE from ORIGIN: WHY"), for `health`.
    pub(crate) fn refused(&self) -> (u64, Option<String>) {
        let v = lock(&self.view);
        let last = v.last_refused.as_ref().map(|l| {
            format!(
                "{} from {}: {}",
                l["file"].as_str().unwrap_or_default(),
                l["origin"].as_str().unwrap_or_default(),
                l["reason"].as_str().unwrap_or_default()
            )
        });
        (v.refused_outputs, last)
    }

    /// The revision applied, shared (see [`Applied`]).
    pub(crate) fn applied(&self) -> Applied {
        self.applied.clone()
    }

    /// `agent` works on this host (its `squadctl` call said so).
    pub(crate) fn present(&self, agent: &str) {
        let known = {
            let v = lock(&self.view);
            v.present_here.contains(agent) && v.presence.get(agent) == Some(&v.host)
        };
        if !known {
            let _ = self.tx.send(Work::Present(agent.to_string()));
        }
    }

    /// Where a message of `session` (from file `file`) to `to` is delivered
    /// (see [`owner_of`]).
    pub(crate) fn owner(&self, session: &str, file: &str, to: &str) -> Owner {
        let v = lock(&self.view);
        owner_of(
            &v.host,
            &v.presence,
            v.presence_loaded,
            &v.present_here,
            v.origins.get(&(session.to_string(), file.to_string())),
            to,
        )
    }

    /// The replication and presence section of `cluster status`.
    pub(crate) fn status(&self) -> serde_json::Value {
        let v = lock(&self.view);
        serde_json::json!({
            "last_revision": v.last_revision,
            "published": v.published,
            "published_outputs": v.published_outputs,
            "applied": v.applied,
            "dropped": v.dropped,
            "refused_outputs": v.refused_outputs,
            "last_refused": v.last_refused,
            "pending": v.pending,
            "conflicts_total": v.conflicts_total,
            "conflicts": v.conflicts,
            "error": v.error,
            "agents": v.presence,
            "agents_loaded": v.presence_loaded,
            "present_here": v.present_here,
        })
    }
}

/// What to do with an owned output (`ours`, the epoch it was written
/// with) whose compare-and-set was refused because the key moved on to a
/// version of epoch `theirs` from another host or this one (`own`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Ours outranks it (a higher epoch, or this host's own earlier version
    /// of the same epoch): published over it at its revision.
    PublishOver,
    /// A leader of a higher or equal epoch wrote it: ours is a deposed
    /// leader's late write, dropped; theirs is written here.
    Deposed,
}

/// Decides a refused publish of an owned output (see [`Refused`]).
pub(crate) fn refused(ours: u64, theirs: Option<u64>, own: bool) -> Refused {
    match theirs {
        None => Refused::PublishOver,
        Some(t) if ours > t || (ours == t && own) => Refused::PublishOver,
        Some(_) => Refused::Deposed,
    }
}

struct Task {
    root: PathBuf,
    host: String,
    policy: ClusterPolicy,
    bucket: String,
    js: Option<jetstream::Context>,
    client: Option<async_nats::Client>,
    store: Option<kv::Store>,
    watch: Option<kv::Watch>,
    saved: Saved,
    save_due: bool,
    last_save: Instant,
    /// Files to publish (a NATS failure leaves them here, retried).
    dirty: BTreeSet<(String, String)>,
    /// Owned outputs to publish, with their epoch.
    owned: BTreeMap<(String, String), u64>,
    /// Each swept file's (modified, length) when last looked at.
    seen: BTreeMap<PathBuf, (SystemTime, u64)>,
    last_sweep: Option<Instant>,
    presence: Presence,
    /// Agents this host renews, with the revision it holds (0: unknown).
    here: BTreeMap<String, u64>,
    last_renew: Option<Instant>,
    view: Arc<Mutex<View>>,
    applied: Applied,
    reports: mpsc::UnboundedSender<Report>,
    /// The lease, once squadd's cluster task gave it.
    leader: Option<super::leader::Leadership>,
    /// Supervisor outputs waiting for the lease to decide them.
    held: Vec<Held>,
    /// How long an output is held before it is refused.
    hold_for: Duration,
}

/// Starts the replication task of `root` (inside squadd's runtime).
/// `reports` takes the events it has for squadd's log.
pub(crate) fn start(
    root: &Path,
    policy: ClusterPolicy,
    reports: mpsc::UnboundedSender<Report>,
) -> Handle {
    let host = host_id(root);
    let saved = load(root);
    let policy_lease_ttl = policy.lease_ttl;
    let view = Arc::new(Mutex::new(View {
        host: host.clone(),
        origins: saved
            .keys
            .values()
            .map(|s| ((s.session.clone(), s.file.clone()), s.origin.clone()))
            .collect(),
        presence: saved.presence.clone(),
        presence_loaded: false,
        present_here: saved.present_here.clone(),
        last_revision: saved.last_revision,
        published: 0,
        published_outputs: 0,
        applied: 0,
        dropped: 0,
        refused_outputs: 0,
        last_refused: None,
        pending: 0,
        conflicts: Vec::new(),
        conflicts_total: 0,
        error: None,
    }));
    let (tx, rx) = mpsc::unbounded_channel();
    let applied: Applied = Arc::new(AtomicU64::new(saved.last_revision));
    let presence = Presence::new(
        format!("squad-{}-agents", policy.project),
        presence::ttl(policy.lock_ttl),
        policy.replicas,
    );
    let task = Task {
        root: root.to_path_buf(),
        host,
        bucket: policy.files_bucket(),
        policy,
        js: None,
        client: None,
        store: None,
        watch: None,
        here: saved.present_here.iter().map(|a| (a.clone(), 0)).collect(),
        saved,
        save_due: false,
        last_save: Instant::now(),
        dirty: BTreeSet::new(),
        owned: BTreeMap::new(),
        seen: BTreeMap::new(),
        last_sweep: None,
        presence,
        last_renew: None,
        view: view.clone(),
        applied: applied.clone(),
        reports,
        leader: None,
        held: Vec::new(),
        hold_for: (2 * policy_lease_ttl).max(Duration::from_secs(5)),
    };
    tokio::spawn(task.run(rx));
    Handle { tx, view, applied }
}

fn state_path(root: &Path) -> PathBuf {
    root.join(SQUAD_DIR).join(RUN_DIR).join(STATE_FILE)
}

/// The saved state; empty when missing or unreadable (everything is then
/// compared afresh: identical files are noted as synced, different ones
/// kept as conflicts; nothing is lost).
fn load(root: &Path) -> Saved {
    let path = state_path(root);
    match read_regular(&path, 64 * MAX_FILE_BYTES) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "cluster: replication state unreadable; starting afresh");
            Saved::default()
        }),
        Err(_) => Saved::default(),
    }
}

/// The next entry of the watcher, or never when there is none.
pub(super) async fn next_entry(
    watch: &mut Option<kv::Watch>,
) -> Option<Result<kv::Entry, kv::WatcherError>> {
    match watch {
        Some(w) => w.next().await,
        None => std::future::pending().await,
    }
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Work>) {
        match connect_client(&self.policy, true, "squadd-replication").await {
            Ok(c) => {
                self.js = Some(jetstream::new(c.clone()));
                self.client = Some(c);
            }
            Err(e) => {
                tracing::error!(error = %e, "cluster: replication cannot connect");
                lock(&self.view).error = Some(e.to_string());
                return;
            }
        }
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                work = rx.recv() => match work {
                    Some(w) => {
                        self.take(w);
                        while let Ok(w) = rx.try_recv() {
                            self.take(w);
                        }
                        self.flush().await;
                    }
                    None => return,
                },
                entry = next_entry(&mut self.watch) => match entry {
                    Some(Ok(e)) => self.arrived(e),
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "cluster: replication watcher failed; watching again");
                        self.watch = None;
                    }
                    None => self.watch = None,
                },
                _ = tick.tick() => self.upkeep().await,
            }
            if self.save_due && self.last_save.elapsed() >= SAVE_EVERY {
                self.save();
            }
            lock(&self.view).pending = self.dirty.len() + self.owned.len();
        }
    }

    fn take(&mut self, w: Work) {
        match w {
            Work::Changed(s, f) => {
                self.dirty.insert((s, f));
            }
            Work::Owned(s, f, epoch) => {
                self.owned.insert((s, f), epoch);
            }
            Work::Leader(l) => self.leader = Some(l),
            Work::Present(agent) => {
                self.here.entry(agent.clone()).or_insert(0);
                self.saved.present_here.insert(agent.clone());
                lock(&self.view).present_here.insert(agent);
                self.save_due = true;
                // Claimed at once, not at the next renewal.
                self.last_renew = None;
            }
        }
    }

    fn connected(&self) -> bool {
        self.client
            .as_ref()
            .is_some_and(|c| c.connection_state() == async_nats::connection::State::Connected)
    }

    /// Every tick: the bucket and its watcher, the sweep, dirty files,
    /// presence.
    async fn upkeep(&mut self) {
        if self.save_due {
            self.save();
        }
        if !self.connected() {
            lock(&self.view).error = Some("not connected to NATS".into());
            return;
        }
        if let Err(e) = self.ensure_watch().await {
            lock(&self.view).error = Some(e.to_string());
            // The agents bucket is another stream: its table is read even
            // while the files' watcher cannot be made (consumer creation
            // times out for a while after a NATS node dies), so messages
            // held by rule 3 are not held for that too.
            self.presence_upkeep().await;
            return;
        }
        self.decide_held();
        let sweep = self.last_sweep.is_none_or(|t| t.elapsed() >= SWEEP_EVERY);
        if sweep {
            self.last_sweep = Some(Instant::now());
            self.sweep();
        }
        self.flush().await;
        self.presence_upkeep().await;
    }

    async fn ensure_watch(&mut self) -> Result<(), ClusterError> {
        let Some(js) = self.js.clone() else {
            return Err(ClusterError::NoConnection);
        };
        if self.store.is_none() {
            let store = match js.get_key_value(&self.bucket).await {
                Ok(s) => s,
                Err(_) => js
                    .create_key_value(kv::Config {
                        bucket: self.bucket.clone(),
                        description: "squad-supervisor: replicated protocol files".into(),
                        history: 1,
                        max_value_size: i32::try_from(MAX_FILE_BYTES + 4096).unwrap_or(i32::MAX),
                        num_replicas: self.policy.replicas,
                        storage: jetstream::stream::StorageType::File,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| ClusterError::Bucket {
                        what: "files bucket",
                        name: self.bucket.clone(),
                        error: e.to_string(),
                    })?,
            };
            self.store = Some(store);
        }
        if self.watch.is_none()
            && let Some(store) = &self.store
        {
            let from = self.saved.last_revision + 1;
            let w = store
                .watch_all_from_revision(from)
                .await
                .map_err(|e| ClusterError::Watch {
                    bucket: self.bucket.clone(),
                    error: e.to_string(),
                })?;
            self.watch = Some(w);
            lock(&self.view).error = None;
        }
        Ok(())
    }

    /// Marks the protocol files changed since last looked at (not the
    /// supervisor-owned ones).
    fn sweep(&mut self) {
        let Ok(dirs) = squad_protocol::tree::session_dirs(&self.root) else {
            return;
        };
        for dir in dirs {
            let Some(session) = dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !squad_protocol::ids::is_session_dir_name(session) {
                continue;
            }
            let Ok(files) = squad_protocol::tree::session_files(&dir) else {
                continue;
            };
            for (path, _) in files {
                let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if supervisor_owned(file) || squad_protocol::atomic::is_temp_name(file) {
                    continue;
                }
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                let stamp = (
                    meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                    meta.len(),
                );
                if self.seen.get(&path) != Some(&stamp) {
                    self.seen.insert(path.clone(), stamp);
                    self.dirty.insert((session.to_string(), file.to_string()));
                }
            }
        }
    }

    /// Publishes the dirty files; those NATS failed stay dirty.
    async fn flush(&mut self) {
        if !self.connected() || self.store.is_none() {
            return;
        }
        let owned = std::mem::take(&mut self.owned);
        for ((s, f), epoch) in owned {
            if let Err(e) = self.publish_now(&s, &f, Some(epoch)).await {
                tracing::warn!(error = %e, session = %s, file = %f, "cluster: publish failed; retrying");
                self.owned.insert((s, f), epoch);
            }
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut failed = None;
        for (s, f) in dirty {
            if failed.is_some() {
                self.dirty.insert((s, f));
                continue;
            }
            if let Err(e) = self.publish_now(&s, &f, None).await {
                tracing::warn!(error = %e, session = %s, file = %f, "cluster: publish failed; retrying");
                self.dirty.insert((s, f));
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            lock(&self.view).error = Some(e.to_string());
        }
    }

    /// [`Self::publish`], and once more at once when it found a version
    /// ours is to be published over (this host's own earlier one, a lower
    /// epoch's): no tick's wait, no error shown for it.
    async fn publish_now(
        &mut self,
        session: &str,
        file: &str,
        epoch: Option<u64>,
    ) -> Result<(), ClusterError> {
        match self.publish(session, file, epoch).await {
            Err(ClusterError::PublishOver { .. }) => self.publish(session, file, epoch).await,
            done => done,
        }
    }

    fn file_path(&self, session: &str, file: &str) -> PathBuf {
        sessions_dir(&self.root).join(session).join(file)
    }

    /// The file's bytes; `Ok(None)` when it is gone (a removal is not
    /// replicated).
    fn read(&self, session: &str, file: &str) -> Result<Option<Vec<u8>>, ClusterError> {
        match read_regular(&self.file_path(session, file), MAX_FILE_BYTES) {
            Ok(b) => Ok(Some(b)),
            Err(ReadError::NotFound) => Ok(None),
            Err(e) => Err(ClusterError::Local(e.to_string())),
        }
    }

    /// Publishes `session/file` if its bytes differ from the version synced
    /// (or an owned output with its epoch), by compare-and-set on the
    /// revision synced. Refused because another host committed first: its
    /// version wins, ours is kept aside ([`Self::conflict`]).
    async fn publish(
        &mut self,
        session: &str,
        file: &str,
        epoch: Option<u64>,
    ) -> Result<(), ClusterError> {
        if epoch.is_none() && supervisor_owned(file) {
            // Only the leader publishes these, with its epoch.
            return Ok(());
        }
        let bytes = match self.read(session, file) {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, session, file, "cluster: not published (unreadable)");
                return Ok(());
            }
        };
        let hash = crate::index::fingerprint(&bytes);
        let key = file_key(session, file);
        let synced = self.saved.keys.get(&key).cloned();
        if let Some(s) = &synced {
            // A file already synced with these bytes is not published again
            // (an owned output only when no lower epoch stamped it); an
            // owned output of an epoch lower than one seen for the key is a
            // deposed leader's: never published.
            let stale = match (epoch, s.epoch) {
                (None, _) => s.hash == hash,
                (Some(e), seen) => {
                    if seen.is_some_and(|x| x > e) {
                        tracing::info!(
                            session,
                            file,
                            epoch = e,
                            "cluster: a supervisor output of a lower epoch than seen; not published"
                        );
                        return Ok(());
                    }
                    s.hash == hash && seen == Some(e)
                }
            };
            if stale {
                return Ok(());
            }
        }
        let meta = Meta {
            origin: self.host.clone(),
            session: session.to_string(),
            file: file.to_string(),
            epoch,
        };
        let value = encode(&meta, &bytes)?;
        let Some(js) = self.js.clone() else {
            return Err(ClusterError::NoConnection);
        };
        let expected = synced.as_ref().map_or(0, |s| s.revision);
        match publish_cas(&js, &self.bucket, &key, expected, None, value).await? {
            Some(revision) => {
                self.note_synced(&key, &meta, revision, hash);
                let mut v = lock(&self.view);
                v.published += 1;
                v.published_outputs += u64::from(epoch.is_some());
                Ok(())
            }
            None => self.lost_race(&key, &meta, bytes, hash).await,
        }
    }

    /// A publish refused: the key moved on. The latest version is fetched;
    /// equal bytes are simply synced, different ones win over ours.
    async fn lost_race(
        &mut self,
        key: &str,
        ours: &Meta,
        bytes: Vec<u8>,
        hash: u64,
    ) -> Result<(), ClusterError> {
        let Some(store) = self.store.clone() else {
            return Err(ClusterError::NoFilesBucket);
        };
        let latest = store
            .entry(key)
            .await
            .map_err(|e| ClusterError::request("get", e))?;
        let Some(entry) = latest.filter(|e| e.operation == kv::Operation::Put) else {
            // Deleted or purged by hand: published again over it next time.
            if let Some(s) = self.saved.keys.get_mut(key) {
                s.revision = 0;
            }
            return Err(ClusterError::KeyRemoved);
        };
        let (meta, theirs) =
            decode(key, &entry.value).map_err(|e| ClusterError::Local(e.to_string()))?;
        let their_hash = crate::index::fingerprint(&theirs);
        // A supervisor output no lease stands for (a forged `2^63`, another
        // host's claim to this epoch) never deposes the leader: reported,
        // and published over.
        if their_hash != hash
            && ours.epoch.is_some()
            && meta.origin != self.host
            && let Verdict::Refuse(why) = self.verdict(&meta)
        {
            self.refuse(&meta, &why);
            // Its revision noted, never its epoch (it fences nothing).
            let unranked = Meta {
                epoch: None,
                ..meta.clone()
            };
            self.note_synced(key, &unranked, entry.revision, their_hash);
            return Err(ClusterError::PublishOver {
                file: ours.file.clone(),
            });
        }
        let own = meta.origin == self.host;
        match race(
            ours.epoch,
            meta.epoch,
            own,
            their_hash == hash,
            supervisor_owned(&ours.file),
        ) {
            Race::Same => {
                self.note_synced(key, &meta, entry.revision, hash);
                Ok(())
            }
            Race::PublishOver => {
                // Noted at its revision; ours (the file) is published over
                // it at once ([`Self::publish_now`]) or at the next try.
                self.note_synced(key, &meta, entry.revision, their_hash);
                Err(ClusterError::PublishOver {
                    file: ours.file.clone(),
                })
            }
            Race::Deposed => {
                let reason = match ours.epoch {
                    Some(e) => format!(
                        "this host's version (epoch {e}) lost to {}'s (epoch {}): not published",
                        meta.origin,
                        meta.epoch.unwrap_or(0)
                    ),
                    None => format!(
                        "a supervisor output has one writer: {}'s version kept",
                        meta.origin
                    ),
                };
                self.dropped(ours, reason);
                self.write_arrival(&meta, &theirs, entry.revision);
                Ok(())
            }
            Race::Conflict => {
                self.conflict(ours, &bytes, &meta, &theirs, entry.revision);
                Ok(())
            }
        }
    }

    /// Our version of `ours.file` lost to `winner` at `revision`: ours is
    /// kept in the session's conflicts folder, theirs written, the conflict
    /// reported.
    fn conflict(&mut self, ours: &Meta, bytes: &[u8], winner: &Meta, theirs: &[u8], revision: u64) {
        let kept = format!(
            "{CONFLICTS_DIR}/{}.{}-r{revision}",
            ours.file,
            safe_host(&ours.origin)
        );
        let dir = sessions_dir(&self.root).join(&ours.session);
        if let Err(e) = session_write::write(&self.root, &ours.session, &kept, bytes, 0o644) {
            // Not overwritten then: the local version stays in place and
            // the winner is not written (nothing lost); tried again later.
            tracing::error!(error = %e, "cluster: cannot keep a losing version; the file is left as it is");
            self.dirty.insert((ours.session.clone(), ours.file.clone()));
            return;
        }
        self.write_arrival(winner, theirs, revision);
        let c = Conflict {
            session: ours.session.clone(),
            file: ours.file.clone(),
            kept: kept.clone(),
            winner: winner.origin.clone(),
            revision,
        };
        tracing::warn!(session = %c.session, file = %c.file, kept = %c.kept, winner = %c.winner, "cluster: concurrent write; the other host's version won, ours kept");
        let _ = self.reports.send(Report {
            root: self.root.clone(),
            session: c.session.clone(),
            path: dir.join(&c.file),
            kind: EventKind::ReplicaConflict {
                file: c.file.clone(),
                kept: c.kept.clone(),
                winner: c.winner.clone(),
                revision,
            },
        });
        let mut v = lock(&self.view);
        v.conflicts_total += 1;
        v.conflicts.push(c);
        if v.conflicts.len() > CONFLICTS_SHOWN {
            v.conflicts.remove(0);
        }
    }

    /// Counts and reports a version fenced by epoch (`replica-dropped`,
    /// for squadd's log).
    fn dropped(&self, meta: &Meta, reason: String) {
        lock(&self.view).dropped += 1;
        let _ = self.reports.send(Report {
            root: self.root.clone(),
            session: meta.session.clone(),
            path: self.file_path(&meta.session, &meta.file),
            kind: EventKind::ReplicaDropped {
                file: meta.file.clone(),
                origin: meta.origin.clone(),
                reason,
            },
        });
    }

    /// Writes an arrived version into the checkout and notes it synced.
    fn write_arrival(&mut self, meta: &Meta, bytes: &[u8], revision: u64) {
        let path = self.file_path(&meta.session, &meta.file);
        match session_write::write(&self.root, &meta.session, &meta.file, bytes, 0o666) {
            Ok(()) => {
                let hash = crate::index::fingerprint(bytes);
                self.note_synced(&file_key(&meta.session, &meta.file), meta, revision, hash);
                if let Ok(m) = std::fs::symlink_metadata(&path) {
                    let stamp = (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len());
                    self.seen.insert(path, stamp);
                }
                lock(&self.view).applied += 1;
            }
            Err(e) => {
                // Left unsynced: the watcher brings it again after a restart;
                // meanwhile the local file stays as it was.
                tracing::error!(path = %path.display(), error = %e, "cluster: cannot write an arrived version");
            }
        }
    }

    fn note_synced(&mut self, key: &str, meta: &Meta, revision: u64, hash: u64) {
        let epoch = match (self.saved.keys.get(key).and_then(|s| s.epoch), meta.epoch) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.saved.keys.insert(
            key.to_string(),
            Synced {
                session: meta.session.clone(),
                file: meta.file.clone(),
                revision,
                hash,
                origin: meta.origin.clone(),
                epoch,
            },
        );
        lock(&self.view).origins.insert(
            (meta.session.clone(), meta.file.clone()),
            meta.origin.clone(),
        );
        self.save_due = true;
    }

    /// One entry from the watcher.
    fn arrived(&mut self, entry: kv::Entry) {
        self.saved.last_revision = self.saved.last_revision.max(entry.revision);
        lock(&self.view).last_revision = self.saved.last_revision;
        self.applied
            .store(self.saved.last_revision, Ordering::Relaxed);
        self.save_due = true;
        if entry.operation != kv::Operation::Put {
            return;
        }
        let (meta, bytes) = match decode(&entry.key, &entry.value) {
            Ok(x) => x,
            Err(reason) => {
                tracing::warn!(key = %entry.key, %reason, "cluster: an arrival dropped");
                lock(&self.view).dropped += 1;
                return;
            }
        };
        if self.removed_here(&meta) {
            return;
        }
        // A supervisor output is the leader's alone: checked against the
        // lease, not against what it says of itself.
        if supervisor_owned(&meta.file) && meta.origin != self.host {
            match self.verdict(&meta) {
                Verdict::Take => {}
                Verdict::Hold => {
                    self.hold(entry.key, entry.revision, meta, bytes);
                    return;
                }
                Verdict::Refuse(why) => {
                    self.refuse(&meta, &why);
                    return;
                }
            }
        }
        self.apply(entry.key, entry.revision, meta, bytes);
    }

    /// The verdict on a supervisor output by the lease as read now.
    fn verdict(&self, meta: &Meta) -> Verdict {
        let seen = self.leader.as_ref().and_then(|l| l.seen());
        let leading = self.leader.as_ref().and_then(|l| l.epoch());
        accept::owned_output(
            &meta.origin,
            meta.epoch,
            seen.as_ref().map(|(h, e)| (h.as_str(), *e)),
            leading,
        )
    }

    /// Holds a supervisor output the lease cannot decide yet.
    fn hold(&mut self, key: String, revision: u64, meta: Meta, bytes: Vec<u8>) {
        if self.held.len() >= MAX_HELD {
            let why = NotTheLeaders::Unconfirmed {
                origin: meta.origin.clone(),
                given: meta.epoch.unwrap_or(0),
            };
            self.refuse(&meta, &why);
            return;
        }
        self.held.push(Held {
            key,
            revision,
            meta,
            bytes,
            since: Instant::now(),
        });
    }

    /// Decides the held outputs again: taken once the lease names their
    /// publisher, refused when it never does in time.
    fn decide_held(&mut self) {
        for h in std::mem::take(&mut self.held) {
            match self.verdict(&h.meta) {
                Verdict::Take => self.apply(h.key, h.revision, h.meta, h.bytes),
                Verdict::Hold if h.since.elapsed() < self.hold_for => self.held.push(h),
                Verdict::Hold => {
                    let why = NotTheLeaders::Unconfirmed {
                        origin: h.meta.origin.clone(),
                        given: h.meta.epoch.unwrap_or(0),
                    };
                    self.refuse(&h.meta, &why);
                }
                Verdict::Refuse(why) => self.refuse(&h.meta, &why),
            }
        }
    }

    /// Reports a supervisor output refused as not the leader's: squadd's
    /// log (`replica-dropped`) and `cluster status` (`refused_outputs`,
    /// `last_refused`).
    fn refuse(&self, meta: &Meta, why: &NotTheLeaders) {
        tracing::warn!(session = %meta.session, file = %meta.file, origin = %meta.origin, reason = %why, "cluster: a supervisor output refused (not the leader's)");
        {
            let mut v = lock(&self.view);
            v.refused_outputs += 1;
            v.last_refused = Some(serde_json::json!({
                "session": meta.session,
                "file": meta.file,
                "origin": meta.origin,
                "epoch": meta.epoch,
                "reason": why.to_string(),
            }));
        }
        self.dropped(meta, format!("not the leader's: {why}"));
    }

    /// Whether the arrival's session was removed here (archived, or by
    /// the leader's retention): a late version never brings it back
    /// (docs/cluster.md, "Retention across hosts").
    fn removed_here(&self, meta: &Meta) -> bool {
        let removed = session_write::session_dir_of(&self.root, &meta.session)
            == session_write::SessionDir::Removed;
        if removed {
            tracing::info!(session = %meta.session, file = %meta.file, "cluster: arrival for a session removed here (archived, or by the leader's retention); not applied");
        }
        removed
    }

    /// Applies an arrival that may be applied (see [`arrival`]).
    fn apply(&mut self, key: String, revision: u64, meta: Meta, bytes: Vec<u8>) {
        // Again here: a held output is applied later, and the session may
        // have been removed since it was held.
        if self.removed_here(&meta) {
            return;
        }
        let hash = crate::index::fingerprint(&bytes);
        let disk = match self.read(&meta.session, &meta.file) {
            Ok(d) => d,
            Err(e) => {
                // Unreadable here (a FIFO, no permission): never written
                // over blindly; the version stays in the bucket.
                tracing::warn!(error = %e, file = %meta.file, "cluster: arrival not applied (the local file is unreadable)");
                return;
            }
        };
        let disk_hash = disk.as_deref().map(crate::index::fingerprint);
        let synced = self.saved.keys.get(&key);
        match arrival(
            synced,
            revision,
            meta.epoch,
            hash,
            meta.origin == self.host,
            supervisor_owned(&meta.file),
            disk_hash,
        ) {
            Arrival::Stale => {}
            Arrival::Fenced => {
                let reason = format!(
                    "epoch {} is lower than {} already seen",
                    meta.epoch.unwrap_or(0),
                    synced.and_then(|s| s.epoch).unwrap_or(0)
                );
                self.dropped(&meta, reason);
            }
            Arrival::Same => self.note_synced(&key, &meta, revision, hash),
            Arrival::OwnOlder => {
                self.note_synced(&key, &meta, revision, hash);
                // The later local version is published over it; a
                // supervisor output only by the leader, with its epoch.
                if !supervisor_owned(&meta.file) {
                    self.dirty.insert((meta.session.clone(), meta.file.clone()));
                } else if let Some(e) = self.leader.as_ref().and_then(|l| l.epoch()) {
                    self.owned
                        .insert((meta.session.clone(), meta.file.clone()), e);
                }
            }
            Arrival::Write => self.write_arrival(&meta, &bytes, revision),
            Arrival::Conflict => {
                let ours = Meta {
                    origin: self.host.clone(),
                    session: meta.session.clone(),
                    file: meta.file.clone(),
                    epoch: None,
                };
                let local = disk.unwrap_or_default();
                self.conflict(&ours, &local, &meta, &bytes, revision);
            }
        }
    }

    fn save(&mut self) {
        self.save_due = false;
        self.last_save = Instant::now();
        let path = state_path(&self.root);
        let bytes = match serde_json::to_vec(&self.saved) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cluster: cannot encode the replication state");
                return;
            }
        };
        if let Err(e) = crate::safefs::write_atomic_under(&self.root, &path, &bytes, 0o600, None) {
            tracing::warn!(path = %path.display(), error = %e, "cluster: cannot save the replication state");
        }
    }

    /// Claims and renews the agents registered here (a quarter of the
    /// record's TTL apart, at once for a new one) and reads the table.
    async fn presence_upkeep(&mut self) {
        let Some(js) = self.js.clone() else { return };
        let every = presence::ttl(self.policy.lock_ttl) / 4;
        if self.last_renew.is_none_or(|t| t.elapsed() >= every) {
            self.last_renew = Some(Instant::now());
            let agents: Vec<(String, u64)> =
                self.here.iter().map(|(a, r)| (a.clone(), *r)).collect();
            for (agent, rev) in agents {
                let fresh = lock(&self.view).presence.get(&agent) != Some(&self.host);
                let result = if fresh && rev == 0 {
                    self.presence.claim(&js, &agent, &self.host).await.map(Some)
                } else {
                    self.presence.renew(&js, &agent, &self.host, rev).await
                };
                match result {
                    Ok(Some(r)) => {
                        self.here.insert(agent.clone(), r);
                        lock(&self.view).presence.insert(agent, self.host.clone());
                    }
                    Ok(None) => {
                        tracing::info!(agent = %agent, "cluster: agent claimed by another host");
                        self.here.remove(&agent);
                        self.saved.present_here.remove(&agent);
                        lock(&self.view).present_here.remove(&agent);
                        self.save_due = true;
                    }
                    Err(e) => {
                        tracing::warn!(agent = %agent, error = %e, "cluster: presence renewal failed; retrying");
                        // Renewed again at the next tick.
                        self.last_renew = None;
                    }
                }
            }
        }
        match self.presence.table(&js).await {
            Ok(table) => {
                let mut v = lock(&self.view);
                if v.presence != table || !v.presence_loaded {
                    v.presence = table.clone();
                    v.presence_loaded = true;
                    drop(v);
                    self.saved.presence = table;
                    // Saved at once, not at the next tick: `cluster status`
                    // shows the view, and a kill -9 right after must not
                    // restart from an older table (rare: the table changes
                    // when agents come, go or move).
                    self.save();
                }
            }
            Err(e) => tracing::debug!(error = %e, "cluster: presence table not read"),
        }
    }
}

/// A host id as part of a file name: `[A-Za-z0-9._-]`, others `_`.
fn safe_host(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reported duplicate (issue 30's kill test on a loaded machine):
    /// squadd on the sender's host A restarts, its saved table lacks
    /// agent-1 (registered on B), and NATS has not answered yet. However
    /// long that lasts, A must not deliver the messages it wrote; the old
    /// rule fell back to the origin (A) after 10 s.
    #[test]
    fn an_unknown_agent_waits_until_the_table_is_read_however_long() {
        let saved = BTreeMap::new();
        let none = BTreeSet::new();
        let a = "host-a".to_string();
        assert_eq!(
            owner_of("host-a", &saved, false, &none, Some(&a), "agent-1"),
            Owner::Unknown
        );
        assert_eq!(
            owner_of("host-a", &saved, false, &none, None, "agent-1"),
            Owner::Unknown
        );
        // Once read, the table decides; with no record the origin does.
        let read: BTreeMap<String, String> = [("agent-1".into(), "host-b".into())].into();
        assert_eq!(
            owner_of("host-a", &read, true, &none, None, "agent-1"),
            Owner::Elsewhere("host-b".into())
        );
        assert_eq!(
            owner_of("host-a", &BTreeMap::new(), true, &none, None, "agent-1"),
            Owner::Here
        );
        let b = "host-b".to_string();
        assert_eq!(
            owner_of("host-a", &BTreeMap::new(), true, &none, Some(&b), "agent-1"),
            Owner::Elsewhere("host-b".into())
        );
    }

    /// Without NATS this host keeps working locally: its own agents, and
    /// those the saved table places, are decided at once.
    #[test]
    fn before_the_table_is_read_the_saved_one_and_own_agents_decide() {
        let saved: BTreeMap<String, String> = [
            ("agent-1".into(), "host-b".into()),
            ("agent-2".into(), "host-a".into()),
        ]
        .into();
        let here: BTreeSet<String> = ["agent-3".to_string()].into();
        assert_eq!(
            owner_of("host-a", &saved, false, &here, None, "agent-1"),
            Owner::Elsewhere("host-b".into())
        );
        assert_eq!(
            owner_of("host-a", &saved, false, &here, None, "agent-2"),
            Owner::Here
        );
        assert_eq!(
            owner_of("host-a", &saved, false, &here, None, "agent-3"),
            Owner::Here
        );
    }

    fn synced(revision: u64, hash: u64, epoch: Option<u64>) -> Synced {
        Synced {
            session: "20240115T100000Z".into(),
            file: "role-plan-a-task_1.md".into(),
            revision,
            hash,
            origin: "h".into(),
            epoch,
        }
    }

    #[test]
    fn an_arrival_is_written_only_over_the_synced_version() {
        let s = synced(3, 10, None);
        assert_eq!(
            arrival(Some(&s), 3, None, 11, false, false, Some(10)),
            Arrival::Stale
        );
        assert_eq!(
            arrival(Some(&s), 4, None, 11, false, false, Some(10)),
            Arrival::Write
        );
        assert_eq!(
            arrival(Some(&s), 4, None, 11, false, false, None),
            Arrival::Write
        );
        assert_eq!(
            arrival(None, 4, None, 11, false, false, None),
            Arrival::Write
        );
        assert_eq!(
            arrival(Some(&s), 4, None, 11, false, false, Some(11)),
            Arrival::Same
        );
        // A local change not yet published: kept aside.
        assert_eq!(
            arrival(Some(&s), 4, None, 11, false, false, Some(12)),
            Arrival::Conflict
        );
        assert_eq!(
            arrival(None, 4, None, 11, false, false, Some(12)),
            Arrival::Conflict
        );
        // Our own version whose revision a restart lost: not written back.
        assert_eq!(
            arrival(Some(&s), 4, None, 11, true, false, Some(12)),
            Arrival::OwnOlder
        );
    }

    /// Issue 46: a refused publish that meets this host's own older
    /// version (its revision lost to a kill -9) publishes over it; only
    /// another host's commit is a conflict.
    #[test]
    fn a_refused_publish_never_loses_to_this_hosts_own_older_version() {
        assert_eq!(race(None, None, true, false, false), Race::PublishOver);
        assert_eq!(race(None, None, false, false, false), Race::Conflict);
        assert_eq!(race(None, None, true, true, false), Race::Same);
        assert_eq!(race(None, None, false, true, false), Race::Same);
        // Owned outputs: by epoch, never a conflict.
        assert_eq!(
            race(Some(5), Some(4), false, false, true),
            Race::PublishOver
        );
        assert_eq!(race(Some(4), Some(5), false, false, true), Race::Deposed);
        assert_eq!(race(Some(5), Some(5), true, false, true), Race::PublishOver);
        assert_eq!(race(None, Some(5), false, false, true), Race::Deposed);
    }

    /// A supervisor-owned output has one writer: an arrival over a locally
    /// derived version replaces it, never a conflict; this host's own is
    /// never written back.
    #[test]
    fn a_supervisor_output_is_never_a_conflict() {
        let s = synced(3, 10, Some(7));
        assert_eq!(
            arrival(Some(&s), 4, Some(7), 11, false, true, Some(12)),
            Arrival::Write
        );
        assert_eq!(
            arrival(None, 4, Some(7), 11, false, true, Some(12)),
            Arrival::Write
        );
        assert_eq!(
            arrival(Some(&s), 4, Some(7), 11, true, true, Some(12)),
            Arrival::OwnOlder
        );
        assert_eq!(
            arrival(Some(&s), 4, Some(6), 11, false, true, Some(12)),
            Arrival::Fenced
        );
    }

    #[test]
    fn a_lower_epoch_is_fenced() {
        let s = synced(3, 10, Some(7));
        assert_eq!(
            arrival(Some(&s), 4, Some(6), 11, false, false, Some(10)),
            Arrival::Fenced
        );
        assert_eq!(
            arrival(Some(&s), 4, Some(7), 11, false, false, Some(10)),
            Arrival::Write
        );
        assert_eq!(
            arrival(Some(&s), 4, Some(8), 11, false, false, Some(10)),
            Arrival::Write
        );
        assert_eq!(
            arrival(Some(&s), 4, None, 11, false, false, Some(10)),
            Arrival::Write
        );
    }

    #[test]
    fn a_refused_owned_output_is_published_over_a_lower_epoch_only() {
        assert_eq!(refused(5, Some(4), false), Refused::PublishOver);
        assert_eq!(refused(5, None, false), Refused::PublishOver);
        // Our own earlier version whose revision was not recorded.
        assert_eq!(refused(5, Some(5), true), Refused::PublishOver);
        // A deposed leader's late write meets the new leader's.
        assert_eq!(refused(4, Some(5), false), Refused::Deposed);
        assert_eq!(refused(4, Some(5), true), Refused::Deposed);
        assert_eq!(refused(5, Some(5), false), Refused::Deposed);
    }

    #[test]
    fn the_lag_is_the_revisions_a_host_has_not_applied() {
        assert_eq!(lag(Some(42), Some(42)), Some(0));
        assert_eq!(lag(Some(42), Some(30)), Some(12));
        // A heartbeat read before the bucket's state: never negative.
        assert_eq!(lag(Some(30), Some(42)), Some(0));
        // A host that says nothing (an older squadd), or no bucket yet.
        assert_eq!(lag(Some(42), None), None);
        assert_eq!(lag(None, Some(3)), None);
    }

    #[test]
    fn values_round_trip_and_foreign_names_are_refused() {
        let meta = Meta {
            origin: "h:/x".into(),
            session: "20240115T100000Z-s".into(),
            file: "role-plan-a-task_1.md".into(),
            epoch: Some(2),
        };
        let key = file_key(&meta.session, &meta.file);
        let v = encode(&meta, b"---\nx\n").unwrap();
        assert_eq!(
            decode(&key, &v).unwrap(),
            (meta.clone(), b"---\nx\n".to_vec())
        );
        assert_eq!(decode("t-00", &v).unwrap_err(), ValueError::WrongKey);
        for (session, file) in [
            ("../../etc", "role-plan-a-task_1.md"),
            ("20240115T100000Z", "../role-plan-a.md"),
            ("20240115T100000Z", "notes.txt"),
            ("20240115T100000Z", ".role-plan-a-t.md.tmp.1.2"),
        ] {
            let m = Meta {
                session: session.into(),
                file: file.into(),
                ..meta.clone()
            };
            let v = encode(&m, b"x").unwrap();
            assert!(
                decode(&file_key(session, file), &v).is_err(),
                "{session} {file}"
            );
        }
        assert!(decode(&key, b"no header").is_err());
    }

    #[test]
    fn supervisor_outputs_are_not_swept() {
        assert!(supervisor_owned("session-status.md"));
        assert!(supervisor_owned("role-comm-squadd-to-a-msg_1.md"));
        assert!(!supervisor_owned("role-comm-a-to-b-msg_1.md"));
        assert!(!supervisor_owned("role-plan-a-task_1.md"));
        assert_eq!(safe_host("build-3:/srv/x"), "build-3__srv_x");
    }
}
