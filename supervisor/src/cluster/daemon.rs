//! squadd's side of the cluster: one task per root with a `cluster:`
//! policy. It owns the NATS connection and the locks this checkout holds,
//! answers the control socket's `cluster` requests, and renews every held
//! lock at a third of its TTL while the agent's local lock record is live
//! (a released, expired or reclaimed local record releases the cluster
//! lock too). A squadd that dies stops renewing: its locks pass to another
//! host when their TTL runs out on the server, never before.

use super::ClusterError;
use super::kv::{Locks, TakeError};
use super::leader::{Leadership, Lease, News};
use super::{Holder, host_id, key_of};
use crate::control::Response;
use chrono::Utc;
use serde_json::json;
use squad_policies::cluster::ClusterPolicy;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// A `cluster` request from the control socket.
#[derive(Debug)]
pub(crate) struct Ask {
    /// `acquire`, `release`, `list` or `status`.
    pub action: String,
    /// Targets (`acquire`, `release`).
    pub targets: Vec<String>,
    /// The agent (`acquire`, `release`).
    pub agent: String,
    /// The task (`acquire`).
    pub task: String,
    /// The session (`acquire`).
    pub session: String,
}

/// Where the root's cluster task takes requests.
pub(crate) struct Handle {
    tx: mpsc::Sender<(Ask, oneshot::Sender<Response>)>,
    leadership: Leadership,
    edits: super::edits::Edits,
}

impl Handle {
    /// The epoch this host leads the project with, while its lease is
    /// valid; `None` on a follower (docs/cluster.md, "Leader"). squadd
    /// writes the supervisor-owned outputs only while this is `Some`.
    pub(crate) fn leader_epoch(&self) -> Option<u64> {
        self.leadership.epoch()
    }

    /// This host's leadership, shared (the removal task reads it:
    /// [`super::retire`]).
    pub(crate) fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// Forwards a session edit to the leader (this host does not lead):
    /// the receiver gets the answer for squadctl (docs/cluster.md,
    /// "Session edits on a follower").
    pub(crate) fn forward_edit(
        &self,
        session: &str,
        edit: &squad_policies::session_edit::SessionEdit,
    ) -> oneshot::Receiver<Response> {
        self.edits.forward(session, edit)
    }

    /// Hands a request to the task; the receiver gets the answer.
    pub(crate) fn ask(&self, ask: Ask) -> oneshot::Receiver<Response> {
        let (tx, rx) = oneshot::channel();
        if let Err(
            mpsc::error::TrySendError::Full((_, tx)) | mpsc::error::TrySendError::Closed((_, tx)),
        ) = self.tx.try_send((ask, tx))
        {
            let _ = tx.send(Response::error(
                "squadd's cluster task is busy or gone; try again",
            ));
        }
        rx
    }
}

/// A lock this checkout holds.
struct Held {
    holder: Holder,
    revision: u64,
    /// When its last successful renewal (or its acquisition) was sent;
    /// `None` for a lock adopted and not renewed yet.
    sent: Option<super::leader::Moment>,
}

struct Task {
    root: PathBuf,
    host: String,
    policy: ClusterPolicy,
    locks: Option<Locks>,
    /// Why the connection could not be made, when it could not.
    connect_error: Option<ClusterError>,
    held: BTreeMap<String, Held>,
    /// Whether the locks an earlier squadd of this checkout held were
    /// looked for (once, at the first renewal with NATS up).
    adopted: bool,
    /// This host's leadership (the lease task changes it).
    leadership: Leadership,
    /// Handed to the lease task once connected.
    news: Option<Box<dyn Fn(News) + Send + Sync>>,
    applied: Option<super::replicate::Applied>,
    /// Session edits forwarded to the leader, answered while leading.
    edits: super::edits::Edits,
}

/// Starts the cluster task of `root` (inside squadd's runtime); `news` hears
/// when this host becomes or stops being the leader; `applied` is the
/// replication task's revision applied, which the heartbeat carries;
/// session edits this host answers as the leader enter squadd's loop
/// through `to_loop`.
pub(crate) fn start(
    root: &Path,
    policy: ClusterPolicy,
    news: Box<dyn Fn(News) + Send + Sync>,
    applied: Option<super::replicate::Applied>,
    to_loop: super::edits::ToLoop,
) -> Handle {
    let (tx, rx) = mpsc::channel(256);
    let leadership = Leadership::default();
    let edits = super::edits::Edits::new(policy.clone(), host_id(root), to_loop);
    let news = edits.hear(news);
    let task = Task {
        root: root.to_path_buf(),
        host: host_id(root),
        policy,
        locks: None,
        connect_error: None,
        held: BTreeMap::new(),
        adopted: false,
        leadership: leadership.clone(),
        news: Some(news),
        applied,
        edits: edits.clone(),
    };
    tokio::spawn(task.run(rx));
    Handle {
        tx,
        leadership,
        edits,
    }
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<(Ask, oneshot::Sender<Response>)>) {
        match Locks::connect(&self.policy, true).await {
            Ok(l) => {
                // The lease on its own task: a slow lock request never
                // delays a renewal (and a late renewal only ends the
                // leadership early, never late).
                if let Some(news) = self.news.take() {
                    let lease = Lease::new(
                        l.jetstream(),
                        l.client(),
                        self.policy.clone(),
                        self.host.clone(),
                        self.leadership.clone(),
                        news,
                        self.applied.take(),
                    );
                    tokio::spawn(lease.run());
                }
                self.edits.connected(l.client(), self.leadership.clone());
                self.locks = Some(l);
            }
            Err(e) => {
                tracing::error!(error = %e, "cluster: cannot connect");
                self.connect_error = Some(e);
            }
        }
        // A third of the TTL: two renewals may fail (a slow server, a
        // reconnect) before the lock lapses.
        let every = (self.policy.lock_ttl / 3).max(Duration::from_millis(300));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                ask = rx.recv() => match ask {
                    Some((ask, reply)) => {
                        let r = self.answer(ask).await;
                        let _ = reply.send(r);
                    }
                    None => return,
                },
                _ = tick.tick() => self.renew_all().await,
            }
        }
    }

    fn ready(&mut self) -> Result<&mut Locks, ClusterError> {
        match &self.locks {
            Some(l) if !l.connected() => {
                return Err(ClusterError::Disconnected {
                    state: l.state(),
                    seeds: self.policy.nats.join(", "),
                });
            }
            Some(_) => {}
            None => {
                return Err(self
                    .connect_error
                    .clone()
                    .unwrap_or(ClusterError::NoConnection));
            }
        }
        self.locks.as_mut().ok_or(ClusterError::NoConnection)
    }

    async fn answer(&mut self, ask: Ask) -> Response {
        match ask.action.as_str() {
            "acquire" => self.acquire(ask).await,
            "release" => self.release(ask).await,
            "list" => match self.list().await {
                Ok(v) => Response::ok(json!({"locks": v})),
                Err(e) => Response::error(e.to_string()),
            },
            "status" => Response::ok(self.status().await),
            "holders" => self.holders(ask).await,
            other => Response::error(format!(
                "unknown cluster action `{other}` (acquire, release, list, status, holders)"
            )),
        }
    }

    async fn acquire(&mut self, ask: Ask) -> Response {
        let host = self.host.clone();
        let locks = match self.ready() {
            Ok(l) => l,
            Err(e) => return Response::error(e.to_string()),
        };
        let mut taken: Vec<(String, Held)> = Vec::new();
        let mut outcome = None;
        for target in &ask.targets {
            let holder = Holder {
                target: target.clone(),
                host: host.clone(),
                agent: ask.agent.clone(),
                task: ask.task.clone(),
                session: ask.session.clone(),
                acquired_at: Utc::now(),
                token: None,
            };
            let key = key_of(target);
            let sent = super::leader::Moment::now();
            match locks.take(&key, &holder).await {
                Ok(revision) => {
                    // The holding's fencing token, carried by its renewals.
                    let holder = Holder {
                        token: Some(revision),
                        ..holder
                    };
                    taken.push((
                        key,
                        Held {
                            holder,
                            revision,
                            sent: Some(sent),
                        },
                    ));
                }
                Err(TakeError::Held(h)) => {
                    outcome = Some(Response::ok(json!({"taken": false, "holder": h})));
                    break;
                }
                Err(TakeError::Nats(e)) => {
                    outcome = Some(Response::error(e.to_string()));
                    break;
                }
            }
        }
        match outcome {
            // All or none: give back what this request took.
            Some(r) => {
                for (key, held) in taken {
                    if let Err(e) = locks.release(&key, held.revision).await {
                        tracing::warn!(error = %e, key, "cluster: could not give back a lock (it lapses at its TTL)");
                    }
                }
                r
            }
            None => {
                let revisions: Vec<u64> = taken.iter().map(|(_, h)| h.revision).collect();
                self.held.extend(taken);
                self.save_stamps();
                // The revisions the holdings began at are their fencing
                // tokens (docs/cluster.md, "Fencing tokens").
                Response::ok(
                    json!({"taken": true, "host": host, "revisions": revisions, "tokens": revisions}),
                )
            }
        }
    }

    /// The live holder of each target's key, read from the bucket (not
    /// from this host's memory: a lock lapsed while squadd was stopped is
    /// seen lapsed at once), with its fencing token.
    async fn holders(&mut self, ask: Ask) -> Response {
        let here = self.host.clone();
        let locks = match self.ready() {
            Ok(l) => l,
            Err(e) => return Response::error(e.to_string()),
        };
        let mut out = Vec::new();
        for target in &ask.targets {
            match locks.holder(&key_of(target)).await {
                Ok((live, _)) => out.push(match live {
                    Some((h, rev)) => json!({
                        "target": target,
                        "held": true,
                        "this_host": h.host == here,
                        "token": h.token_at(rev),
                        "revision": rev,
                        "holder": h,
                    }),
                    None => json!({"target": target, "held": false}),
                }),
                Err(e) => return Response::error(e.to_string()),
            }
        }
        Response::ok(json!({"host": here, "holders": out}))
    }

    async fn release(&mut self, ask: Ask) -> Response {
        let host = self.host.clone();
        let locks = match &mut self.locks {
            Some(l) => l,
            None => return Response::error("no NATS connection"),
        };
        let mut released = Vec::new();
        for target in &ask.targets {
            let key = key_of(target);
            let revision = match self.held.get(&key) {
                Some(h) if h.holder.agent == ask.agent => Some(h.revision),
                Some(_) => None,
                // Taken by an earlier squadd of this checkout (restarted).
                None => match locks.holder(&key).await {
                    Ok((Some((h, rev)), _)) if h.host == host && h.agent == ask.agent => Some(rev),
                    Ok(_) => None,
                    Err(e) => return Response::error(e.to_string()),
                },
            };
            let Some(revision) = revision else { continue };
            match locks.release(&key, revision).await {
                Ok(_) => {
                    self.held.remove(&key);
                    released.push(target.clone());
                }
                Err(e) => return Response::error(e.to_string()),
            }
        }
        Response::ok(json!({"released": released}))
    }

    async fn list(&mut self) -> Result<Vec<serde_json::Value>, ClusterError> {
        let here = self.host.clone();
        let locks = self.ready()?;
        Ok(locks
            .list()
            .await?
            .into_iter()
            .map(|(h, rev)| {
                let mut v = json!(h);
                v["revision"] = json!(rev);
                v["this_host"] = json!(h.host == here);
                v
            })
            .collect())
    }

    async fn status(&mut self) -> serde_json::Value {
        let (state, server) = match &self.locks {
            Some(l) => (l.state(), l.server()),
            None => ("not started".into(), None),
        };
        let listed = self.list().await;
        let mut hosts: Vec<String> = vec![self.host.clone()];
        if let Ok(locks) = &listed {
            for l in locks {
                if let Some(h) = l["host"].as_str()
                    && !hosts.iter().any(|x| x == h)
                {
                    hosts.push(h.to_string());
                }
            }
        }
        let (beats, lease, hosts_error) = match &self.locks {
            Some(l) if l.connected() => {
                match super::leader::survey(&l.jetstream(), &self.policy).await {
                    Ok((b, lease)) => (b, lease, None),
                    Err(e) => (Vec::new(), None, Some(e.to_string())),
                }
            }
            _ => (Vec::new(), None, Some("not connected to NATS".to_string())),
        };
        // The files bucket's last revision, read after the heartbeats: a
        // host's lag is never understated by a bucket read before its beat.
        let files_revision = match &self.locks {
            Some(l) if l.connected() => l
                .jetstream()
                .get_stream(format!("KV_{}", self.policy.files_bucket()))
                .await
                .ok()
                .map(|s| s.cached_info().state.last_sequence),
            _ => None,
        };
        for b in &beats {
            if !hosts.contains(&b.host) {
                hosts.push(b.host.clone());
            }
        }
        let leading = self.leadership.epoch();
        // The bucket's word when it answered, else what this host last saw.
        let (leader_host, epoch) = match (lease, self.leadership.seen()) {
            (Some((h, e)), _) | (None, Some((h, e))) => (Some(h), Some(e)),
            (None, None) => (None, None),
        };
        let now = Utc::now();
        let host_rows: Vec<serde_json::Value> = beats
            .iter()
            .map(|b| {
                json!({
                    "host": b.host,
                    "this_host": b.host == self.host,
                    "last_seen": b.at,
                    "seen_secs_ago": (now - b.at).num_milliseconds().max(0) as f64 / 1000.0,
                    "leader": leader_host.as_deref() == Some(b.host.as_str()),
                    "server": b.server,
                    // Revisions of the files bucket it had not applied when
                    // it beat (`seen_secs_ago`); null when unknown.
                    "applied_revision": b.applied_revision,
                    "replication_lag": super::replicate::lag(files_revision, b.applied_revision),
                })
            })
            .collect();
        json!({
            "enabled": true,
            "leader": {
                "host": leader_host,
                "epoch": epoch,
                "this_host": leading.is_some(),
                "lease_ttl_secs": self.policy.lease_ttl.as_secs(),
            },
            "hosts": host_rows,
            "hosts_error": hosts_error,
            "files_revision": files_revision,
            "host": self.host,
            "project": self.policy.project,
            "seeds": self.policy.nats,
            "connection": {
                "state": state,
                "server": server,
                "error": self.connect_error.as_ref().map(ToString::to_string),
            },
            "lock_ttl_secs": self.policy.lock_ttl.as_secs(),
            "bucket": self.policy.locks_bucket(),
            "held_here": self.held.len(),
            "hosts_seen": hosts,
            "locks": listed.as_ref().ok(),
            "locks_error": listed.as_ref().err().map(ToString::to_string),
        })
    }

    /// Renews the locks whose local record is live; releases the others.
    async fn renew_all(&mut self) {
        if !self.adopted {
            self.adopt().await;
        }
        if self.held.is_empty() {
            return;
        }
        let live = local_live(&self.root);
        let Some(locks) = &mut self.locks else { return };
        if !locks.connected() {
            return;
        }
        let mut gone = Vec::new();
        for (key, held) in &mut self.held {
            let still = live.as_ref().is_none_or(|live| {
                live.iter().any(|(agent, target)| {
                    *agent == held.holder.agent && *target == held.holder.target
                })
            });
            if !still {
                if let Err(e) = locks.release(key, held.revision).await {
                    tracing::warn!(error = %e, key, "cluster: release failed (the lock lapses at its TTL)");
                }
                gone.push(key.clone());
                continue;
            }
            let sent = super::leader::Moment::now();
            match locks.renew(key, held.revision, &held.holder).await {
                Ok(Some(rev)) => {
                    held.revision = rev;
                    held.sent = Some(sent);
                }
                Ok(None) => {
                    tracing::error!(key, target = %held.holder.target, "cluster: lock lost (it lapsed before renewal)");
                    gone.push(key.clone());
                }
                Err(e) => tracing::warn!(error = %e, key, "cluster: renewal failed; retrying"),
            }
        }
        for k in gone {
            self.held.remove(&k);
        }
        self.save_stamps();
    }

    /// Notes when each held lock's last successful renewal was sent
    /// (`.squad/run/cluster-locks.json`): the guard refuses the holder's
    /// writes once that is longer ago than the lock can be trusted, also
    /// when this squadd is stopped or dead (docs/cluster.md, "Fencing
    /// tokens").
    fn save_stamps(&self) {
        let stamps = super::fence::Stamps {
            locks: self
                .held
                .values()
                .filter_map(|h| {
                    Some(super::fence::Stamp {
                        agent: h.holder.agent.clone(),
                        target: h.holder.target.clone(),
                        sent_boot_ms: h.sent?.as_millis(),
                    })
                })
                .collect(),
        };
        let path = self
            .root
            .join(squad_protocol::tree::SQUAD_DIR)
            .join(squad_protocol::tree::RUN_DIR)
            .join(super::fence::STAMPS_FILE);
        let written = serde_json::to_vec(&stamps)
            .map_err(std::io::Error::other)
            .and_then(|b| crate::safefs::write_atomic_under(&self.root, &path, &b, 0o644, None));
        if let Err(e) = written {
            tracing::warn!(error = %e, "cluster: cannot note the locks' renewals; the guard refuses their holders' writes");
        }
    }
}

impl Task {
    /// Takes over the cluster locks an earlier squadd of this checkout held
    /// (a restart, a crash) whose local records are still live, so they are
    /// renewed instead of lapsing under their agents.
    async fn adopt(&mut self) {
        let here = self.host.clone();
        let Some(locks) = &mut self.locks else { return };
        if !locks.connected() {
            return;
        }
        let Ok(listed) = locks.list().await else {
            return;
        };
        self.adopted = true;
        let live = local_live(&self.root).unwrap_or_default();
        for (holder, revision) in listed {
            let ours = holder.host == here
                && live
                    .iter()
                    .any(|(a, t)| *a == holder.agent && *t == holder.target);
            if ours {
                tracing::info!(target = %holder.target, agent = %holder.agent, "cluster: adopted a lock this checkout held");
                let holder = Holder {
                    token: Some(holder.token_at(revision)),
                    ..holder
                };
                self.held.entry(key_of(&holder.target)).or_insert(Held {
                    holder,
                    revision,
                    sent: None,
                });
            }
        }
    }
}

/// The (agent, target) pairs of this checkout's live local lock records;
/// `None` when the table cannot be read (then nothing is released).
fn local_live(root: &Path) -> Option<Vec<(String, String)>> {
    let policy = crate::locks::load_policy(root).ok()?;
    let entries = crate::locks::load(root, policy.lock_default_ttl).ok()?;
    let now = Utc::now();
    let host = crate::locks::host_name();
    let stale = crate::locks::stale_entries(&entries, now, &host);
    Some(
        entries
            .iter()
            .filter(|e| !stale.iter().any(|(s, _)| s.path() == e.path()))
            .filter_map(|e| match e {
                crate::locks::Entry::Held { record, .. } => Some(
                    record
                        .targets
                        .iter()
                        .map(|t| (record.agent.clone(), t.clone()))
                        .collect::<Vec<_>>(),
                ),
                crate::locks::Entry::Corrupt { .. } => None,
            })
            .flatten()
            .collect(),
    )
}
