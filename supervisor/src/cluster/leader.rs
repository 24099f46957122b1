//! One writer per project (docs/cluster.md, "Leader"): a lease in the KV
//! bucket `squad-<project>-leader`, one key ([`LEASE_KEY`]) with a per-key
//! TTL of `cluster.lease_ttl`, created only if absent and renewed by
//! compare-and-set on the revision its holder holds. The revision at
//! election is the leader's **epoch**: a stream sequence, so every later
//! election has a higher one.
//!
//! Fencing: this squadd counts itself leader only until `lease_ttl` minus a
//! margin after it *sent* its last successful renewal (the server counts
//! the TTL from when it stored the message, later), so its lease always
//! ends here before it can end on the server and another host can take it.
//! A renewal refused by revision deposes it at once. [`Leadership::epoch`]
//! is the gate squadd asks before writing a supervisor-owned output; every
//! such write published to other hosts carries that epoch, so receivers can
//! drop a deposed leader's late writes.
//!
//! The same bucket holds each host's heartbeat (`host-<hex of the host
//! id>`, a TTL of three leases), from which `cluster status` lists the
//! hosts.

use super::ClusterError;
use super::kv;
use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use squad_policies::cluster::ClusterPolicy;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The files bucket revision this checkout applied, shared with the
/// replication task, whose type it is (`replicate::Applied`); spelled out
/// here because the replication task depends on this module.
type Applied = Arc<std::sync::atomic::AtomicU64>;

/// The lease's key in the leader bucket.
pub(crate) const LEASE_KEY: &str = "leader";

/// The value of the lease key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LeaseRecord {
    /// The leading host.
    pub host: String,
    /// Its epoch; 0 in the election's own message (whose revision is it).
    pub epoch: u64,
    /// When it was elected.
    pub since: DateTime<Utc>,
}

/// A host's heartbeat (key `host-<hex>` of the leader bucket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Heartbeat {
    /// The host id.
    pub host: String,
    /// When it was written.
    pub at: DateTime<Utc>,
    /// The epoch this host leads with, if it leads.
    pub leading: Option<u64>,
    /// The NATS server it talks to.
    pub server: Option<String>,
    /// The last revision of the files bucket it applied, when it beat
    /// (replication lag; absent from an older squadd's heartbeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<u64>,
}

/// What the lease task tells squadd's loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum News {
    /// This host became the leader with this epoch: write what followers
    /// left unwritten.
    Elected {
        /// The epoch.
        epoch: u64,
    },
    /// This host is no longer the leader.
    Lost {
        /// The epoch it led with.
        epoch: u64,
        /// Why (deposed, lease not renewed in time).
        reason: String,
    },
}

/// A moment on the clock the lease is measured with: time since boot,
/// *including* time the machine was suspended (`CLOCK_BOOTTIME`). A
/// monotonic clock that stops while the machine sleeps (`Instant`,
/// `CLOCK_MONOTONIC`) would let a leader that wakes from a suspend longer
/// than its lease believe it still leads while the servers, which kept
/// time, have let another host take over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Moment(Duration);

impl Moment {
    /// Milliseconds since boot (what `.squad/run/cluster-locks.json`
    /// keeps: squadctl on the same machine compares it with its own).
    pub(crate) fn as_millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }

    /// Now.
    pub(crate) fn now() -> Moment {
        // SAFETY: clock_gettime writes one timespec into the struct we own.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) } != 0 {
            // Never on Linux. Should it fail, "the end of time": no lease
            // counts (now < until never holds), so nothing is written.
            return Moment(Duration::MAX);
        }
        Moment(Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_nsec).unwrap_or(0),
        ))
    }
}

impl std::ops::Add<Duration> for Moment {
    type Output = Moment;
    fn add(self, d: Duration) -> Moment {
        Moment(self.0.saturating_add(d))
    }
}

#[derive(Debug, Default)]
struct State {
    /// The epoch this host leads with, and until when (monotonic).
    leading: Option<(u64, Moment)>,
    /// The leader last seen in the bucket: host and epoch.
    seen: Option<(String, u64)>,
}

/// This host's leadership, shared by the lease task (which changes it) and
/// squadd's loop (which asks it before each supervisor-owned write).
#[derive(Debug, Clone, Default)]
pub(crate) struct Leadership(Arc<Mutex<State>>);

impl Leadership {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding it leaves plain data: still usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The epoch this host leads with, while its lease is valid here;
    /// `None` when it is not the leader (or its lease ran out unrenewed).
    pub(crate) fn epoch(&self) -> Option<u64> {
        self.epoch_at(Moment::now())
    }

    fn epoch_at(&self, now: Moment) -> Option<u64> {
        match self.state().leading {
            Some((epoch, until)) if now < until => Some(epoch),
            _ => None,
        }
    }

    /// The leader as last seen: host and epoch (this host's own while it
    /// leads).
    pub(crate) fn seen(&self) -> Option<(String, u64)> {
        self.state().seen.clone()
    }

    fn lead(&self, host: &str, epoch: u64, until: Moment) {
        let mut s = self.state();
        s.leading = Some((epoch, until));
        s.seen = Some((host.to_string(), epoch));
    }

    fn follow(&self, seen: Option<(String, u64)>) {
        let mut s = self.state();
        s.leading = None;
        s.seen = seen;
    }
}

/// How long a lease taken or renewed at `sent` counts here: `ttl` minus a
/// fifth (at least 200 ms), the margin for a write squadd began just before
/// the end to finish.
fn valid_for(ttl: Duration) -> Duration {
    ttl.saturating_sub((ttl / 5).max(Duration::from_millis(200)))
}

/// The heartbeat key of a host.
pub(crate) fn heartbeat_key(host: &str) -> String {
    format!("host-{}", super::key_of(host).trim_start_matches("t-"))
}

/// The epoch a lease record stands for at `revision`.
fn epoch_of(record: &LeaseRecord, revision: u64) -> u64 {
    if record.epoch == 0 {
        revision
    } else {
        record.epoch
    }
}

/// The lease task of one root: campaigns, renews, heartbeats.
pub(crate) struct Lease {
    js: jetstream::Context,
    client: async_nats::Client,
    policy: ClusterPolicy,
    host: String,
    leadership: Leadership,
    news: Box<dyn Fn(News) + Send + Sync>,
    /// The replication task's revision applied, for the heartbeat.
    applied: Option<Applied>,
    /// The lease this host holds: its revision, its epoch, since when.
    held: Option<(u64, u64, DateTime<Utc>)>,
    store: Option<async_nats::jetstream::kv::Store>,
}

impl Lease {
    /// A lease task on an existing connection.
    pub(crate) fn new(
        js: jetstream::Context,
        client: async_nats::Client,
        policy: ClusterPolicy,
        host: String,
        leadership: Leadership,
        news: Box<dyn Fn(News) + Send + Sync>,
        applied: Option<Applied>,
    ) -> Lease {
        Lease {
            js,
            client,
            policy,
            host,
            leadership,
            news,
            applied,
            held: None,
            store: None,
        }
    }

    /// Runs until squadd stops: a turn at once, then every third of the
    /// lease (two renewals may fail before the lease ends here).
    pub(crate) async fn run(mut self) {
        let every = (self.policy.lease_ttl / 3).max(Duration::from_millis(300));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.turn().await;
        }
    }

    /// One turn: notice a lease that ran out here, then renew or campaign,
    /// then beat.
    async fn turn(&mut self) {
        if let Some((_, epoch, _)) = self.held
            && self.leadership.epoch().is_none()
        {
            self.lose(
                epoch,
                "the lease was not renewed in time (NATS unreachable or slow)".into(),
            );
        }
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return;
        }
        let store = match self.store().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: leader bucket unavailable");
                return;
            }
        };
        match self.held {
            Some((revision, epoch, since)) => self.renew(revision, epoch, since).await,
            None => self.campaign(&store).await,
        }
        self.beat().await;
    }

    async fn store(&mut self) -> Result<async_nats::jetstream::kv::Store, ClusterError> {
        if let Some(s) = &self.store {
            return Ok(s.clone());
        }
        let s = kv::bucket(
            &self.js,
            &self.policy.leader_bucket(),
            "squad-supervisor leader lease and host heartbeats",
            self.policy.replicas,
            self.policy.lease_ttl,
        )
        .await?;
        self.store = Some(s.clone());
        Ok(s)
    }

    async fn put(
        &self,
        expected: Option<u64>,
        ttl: Duration,
        key: &str,
        body: Vec<u8>,
    ) -> Result<Option<u64>, ClusterError> {
        kv::put(
            &self.js,
            &self.policy.leader_bucket(),
            key,
            expected,
            Some(ttl),
            body,
        )
        .await
    }

    fn lose(&mut self, epoch: u64, reason: String) {
        self.held = None;
        self.leadership.follow(None);
        tracing::warn!(epoch, %reason, "cluster: no longer the leader");
        (self.news)(News::Lost { epoch, reason });
    }

    /// Puts the lease for this host at `expected` with `epoch` (0: an
    /// election): the new revision (`None`: refused by revision) and when
    /// the put was sent.
    async fn put_lease(
        &self,
        expected: u64,
        epoch: u64,
        since: DateTime<Utc>,
    ) -> (Result<Option<u64>, ClusterError>, Moment) {
        let record = LeaseRecord {
            host: self.host.clone(),
            epoch,
            since,
        };
        let sent = Moment::now();
        let put = match serde_json::to_vec(&record) {
            Ok(body) => {
                self.put(Some(expected), self.policy.lease_ttl, LEASE_KEY, body)
                    .await
            }
            Err(e) => Err(ClusterError::Encode(e.to_string())),
        };
        (put, sent)
    }

    async fn renew(&mut self, revision: u64, epoch: u64, since: DateTime<Utc>) {
        let ttl = self.policy.lease_ttl;
        match self.put_lease(revision, epoch, since).await {
            (Ok(Some(rev)), sent) => {
                // Counted from when the renewal was sent: the server's TTL
                // starts later.
                self.held = Some((rev, epoch, since));
                if self.leadership.epoch().is_some() {
                    self.leadership
                        .lead(&self.host, epoch, sent + valid_for(ttl));
                } else {
                    // Ran out here while the renewal was on its way: the
                    // writes stopped; a new election gives a new epoch.
                    self.lose(epoch, "the lease ran out here during its renewal".into());
                }
            }
            (Ok(None), _) => self.lose(
                epoch,
                "deposed: the lease's revision moved (another host took it after it lapsed)".into(),
            ),
            (Err(e), _) => tracing::warn!(error = %e, "cluster: lease renewal failed; retrying"),
        }
    }

    async fn campaign(&mut self, store: &async_nats::jetstream::kv::Store) {
        let expected = match store.entry(LEASE_KEY).await {
            Ok(Some(e)) if e.operation == async_nats::jetstream::kv::Operation::Put => {
                match serde_json::from_slice::<LeaseRecord>(&e.value) {
                    // Our own lease from before a restart of this squadd
                    // (the pid lock makes it dead): taken over at its
                    // revision, with a new epoch.
                    Ok(r) if r.host == self.host => e.revision,
                    Ok(r) => {
                        let epoch = epoch_of(&r, e.revision);
                        self.leadership.follow(Some((r.host, epoch)));
                        return;
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "cluster: unreadable lease record; waiting for it to lapse");
                        self.leadership.follow(None);
                        return;
                    }
                }
            }
            // Released or lapsed: its delete marker's revision.
            Ok(Some(e)) => e.revision,
            Ok(None) => 0,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: cannot read the lease");
                return;
            }
        };
        let since = Utc::now();
        let ttl = self.policy.lease_ttl;
        match self.put_lease(expected, 0, since).await {
            (Ok(Some(epoch)), sent) => {
                self.held = Some((epoch, epoch, since));
                self.leadership
                    .lead(&self.host, epoch, sent + valid_for(ttl));
                tracing::info!(epoch, "cluster: elected leader");
                (self.news)(News::Elected { epoch });
            }
            // Another host was quicker: seen at the next turn.
            (Ok(None), _) => {}
            (Err(e), _) => tracing::warn!(error = %e, "cluster: campaign failed; retrying"),
        }
    }

    /// This host's heartbeat, living three leases.
    async fn beat(&self) {
        let info = self.client.server_info();
        let beat = Heartbeat {
            host: self.host.clone(),
            at: Utc::now(),
            leading: self.leadership.epoch(),
            server: Some(format!(
                "{} ({}:{})",
                info.server_name, info.host, info.port
            )),
            applied_revision: self
                .applied
                .as_ref()
                .map(|a| a.load(std::sync::atomic::Ordering::Relaxed)),
        };
        let Ok(body) = serde_json::to_vec(&beat) else {
            return;
        };
        let key = heartbeat_key(&self.host);
        if let Err(e) = self.put(None, self.policy.lease_ttl * 3, &key, body).await {
            tracing::debug!(error = %e, "cluster: heartbeat failed");
        }
    }
}

/// The hosts whose heartbeat is live, and the lease as the bucket has it
/// (host, epoch), read from the leader bucket.
pub(crate) async fn survey(
    js: &jetstream::Context,
    policy: &ClusterPolicy,
) -> Result<(Vec<Heartbeat>, Option<(String, u64)>), ClusterError> {
    let bucket = policy.leader_bucket();
    let store = js
        .get_key_value(&bucket)
        .await
        .map_err(|e| ClusterError::NoLeaderBucket {
            bucket: bucket.clone(),
            error: e.to_string(),
        })?;
    let mut hosts = Vec::new();
    let mut lease = None;
    for key in kv::keys_of(js, &bucket).await? {
        let Ok(Some(e)) = store.entry(&key).await else {
            continue;
        };
        if e.operation != async_nats::jetstream::kv::Operation::Put {
            continue;
        }
        if key == LEASE_KEY {
            if let Ok(r) = serde_json::from_slice::<LeaseRecord>(&e.value) {
                let epoch = epoch_of(&r, e.revision);
                lease = Some((r.host, epoch));
            }
        } else if let Ok(h) = serde_json::from_slice::<Heartbeat>(&e.value) {
            hosts.push(h);
        }
    }
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    Ok((hosts, lease))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_counts_here_for_less_than_its_ttl() {
        assert_eq!(valid_for(Duration::from_secs(10)), Duration::from_secs(8));
        assert_eq!(
            valid_for(Duration::from_secs(1)),
            Duration::from_millis(800)
        );
        assert!(valid_for(Duration::from_millis(100)).is_zero());
    }

    #[test]
    fn leadership_ends_at_its_deadline_and_when_deposed() {
        let l = Leadership::default();
        assert_eq!(l.epoch(), None);
        let now = Moment::now();
        l.lead("a", 7, now + Duration::from_secs(5));
        assert_eq!(l.epoch_at(now), Some(7));
        assert_eq!(l.epoch_at(now + Duration::from_secs(5)), None);
        assert_eq!(l.seen(), Some(("a".into(), 7)));
        l.follow(Some(("b".into(), 9)));
        assert_eq!(l.epoch_at(now), None);
        assert_eq!(l.seen(), Some(("b".into(), 9)));
    }

    #[test]
    fn an_election_record_stands_for_its_revision() {
        let r = LeaseRecord {
            host: "a".into(),
            epoch: 0,
            since: Utc::now(),
        };
        assert_eq!(epoch_of(&r, 12), 12);
        assert_eq!(epoch_of(&LeaseRecord { epoch: 12, ..r }, 40), 12);
        assert_ne!(heartbeat_key("a:/x"), heartbeat_key("a:/y"));
        assert!(heartbeat_key("a:/x").starts_with("host-"));
    }

    #[test]
    fn an_older_heartbeat_without_the_revision_applied_still_reads() {
        let old = r#"{"host":"a","at":"2026-01-01T00:00:00Z","leading":null,"server":null}"#;
        let h: Heartbeat = serde_json::from_str(old).unwrap();
        assert_eq!(h.applied_revision, None);
    }
}
