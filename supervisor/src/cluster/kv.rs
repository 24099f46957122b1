//! The lock bucket on JetStream KV: a key created only if absent
//! (compare-and-set on the subject's last sequence) with a per-message TTL,
//! renewed by compare-and-set on the holder's revision.
//!
//! async-nats has no public "update with TTL", so the puts are published
//! here with the two headers the KV API uses (`Nats-Expected-Last-Subject-
//! Sequence`, `Nats-TTL`): [`put`], shared with the leader lease.

use super::{ClusterError, Holder};
use async_nats::jetstream::{self, context::PublishErrorKind, kv};
use async_nats::{HeaderMap, HeaderValue, header};
use futures_util::StreamExt;
use squad_policies::cluster::ClusterPolicy;
use std::time::Duration;

/// How long one NATS request may take before it counts as failed.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection and the project's lock bucket.
#[derive(Clone)]
pub(crate) struct Locks {
    client: async_nats::Client,
    js: jetstream::Context,
    bucket: String,
    ttl: Duration,
    replicas: usize,
    store: Option<kv::Store>,
}

/// Why a take failed.
#[derive(Debug)]
pub(crate) enum TakeError {
    /// Someone holds it (its holder).
    Held(Holder),
    /// NATS failed.
    Nats(ClusterError),
}

fn expand_home(path: &str) -> std::path::PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest),
        _ => std::path::PathBuf::from(path),
    }
}

/// A NATS client for the project's seeds (credentials, timeouts), named
/// `name` on the server. With `retry` it keeps trying in the background;
/// without, an unreachable cluster is an error now.
pub(crate) async fn connect_client(
    policy: &ClusterPolicy,
    retry: bool,
    name: &str,
) -> Result<async_nats::Client, ClusterError> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(3))
        .request_timeout(Some(REQUEST_TIMEOUT));
    if let Some(creds) = &policy.credentials {
        let path = expand_home(creds);
        options = options
            .credentials_file(&path)
            .await
            .map_err(|e| ClusterError::Credentials {
                path: path.clone(),
                error: e.to_string(),
            })?;
    }
    if retry {
        options = options.retry_on_initial_connect();
    }
    let servers: Vec<async_nats::ServerAddr> = policy
        .nats
        .iter()
        .map(|u| {
            u.parse::<async_nats::ServerAddr>()
                .map_err(|e| ClusterError::Seed {
                    url: u.clone(),
                    error: e.to_string(),
                })
        })
        .collect::<Result<_, _>>()?;
    options
        .connect(servers)
        .await
        .map_err(|e| ClusterError::Unreachable {
            seeds: policy.nats.join(", "),
            error: e.to_string(),
        })
}

impl Locks {
    /// Connects to the seed servers. With `retry` the client keeps trying
    /// in the background (squadd); without, an unreachable cluster is an
    /// error now (squadctl).
    pub(crate) async fn connect(
        policy: &ClusterPolicy,
        retry: bool,
    ) -> Result<Locks, ClusterError> {
        let client = connect_client(policy, retry, "squadd").await?;
        let js = jetstream::new(client.clone());
        Ok(Locks {
            client,
            js,
            bucket: policy.locks_bucket(),
            ttl: policy.lock_ttl,
            replicas: policy.replicas,
            store: None,
        })
    }

    /// Whether the connection is up right now.
    pub(crate) fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// The connection state, for status.
    pub(crate) fn state(&self) -> String {
        format!("{}", self.client.connection_state())
    }

    /// The server the client talks to, when connected.
    pub(crate) fn server(&self) -> Option<String> {
        self.connected().then(|| {
            let info = self.client.server_info();
            format!(
                "{} ({}:{}, nats-server {})",
                info.server_name, info.host, info.port, info.version
            )
        })
    }

    /// The connection (the leader lease shares it).
    pub(crate) fn client(&self) -> async_nats::Client {
        self.client.clone()
    }

    /// The connection's JetStream context (the leader lease shares it).
    pub(crate) fn jetstream(&self) -> jetstream::Context {
        self.js.clone()
    }

    /// The bucket, created when missing (one history entry per key, TTLs
    /// allowed; the delete markers a TTL leaves live one lock TTL).
    async fn store(&mut self) -> Result<kv::Store, ClusterError> {
        if let Some(s) = &self.store {
            return Ok(s.clone());
        }
        let store = bucket(
            &self.js,
            &self.bucket,
            "squad-supervisor cluster-wide locks",
            self.replicas,
            self.ttl,
        )
        .await?;
        self.store = Some(store.clone());
        Ok(store)
    }

    /// Puts `holder` at `key` if its last revision is `expected` (0: no
    /// message at all), with the lock TTL. Returns the new revision, or
    /// `Ok(None)` when the revision was not `expected`.
    async fn put_if(
        &mut self,
        key: &str,
        expected: u64,
        holder: &Holder,
    ) -> Result<Option<u64>, ClusterError> {
        self.store().await?;
        let body = serde_json::to_vec(holder).map_err(|e| ClusterError::Encode(e.to_string()))?;
        publish_cas(&self.js, &self.bucket, key, expected, Some(self.ttl), body).await
    }

    /// The live holder of `key` and its revision, if any.
    pub(crate) async fn holder(
        &mut self,
        key: &str,
    ) -> Result<(Option<(Holder, u64)>, u64), ClusterError> {
        let store = self.store().await?;
        match store
            .entry(key)
            .await
            .map_err(|e| ClusterError::request("get", e))?
        {
            Some(e) if e.operation == kv::Operation::Put => {
                // A value no host of this version wrote (garbage, a forged
                // record) is a lock held by someone unknown: refused and
                // named, never skipped (docs/cluster.md, docs/security.md).
                let holder = read_value(key, &e.value);
                Ok((Some((holder, e.revision)), e.revision))
            }
            Some(e) => Ok((None, e.revision)),
            None => Ok((None, 0)),
        }
    }

    /// Takes `key` for `holder` if nobody holds it (or `holder`'s own host
    /// and agent already do: then it is taken over at its revision).
    pub(crate) async fn take(&mut self, key: &str, holder: &Holder) -> Result<u64, TakeError> {
        // The first put assumes the key never existed; if it did (a released
        // lock's delete marker, or our own holding), look and retry at its
        // revision. Losing every round means the key kept changing.
        let mut expected = 0;
        for _ in 0..3 {
            if let Some(rev) = self
                .put_if(key, expected, holder)
                .await
                .map_err(TakeError::Nats)?
            {
                return Ok(rev);
            }
            let (live, last) = self.holder(key).await.map_err(TakeError::Nats)?;
            match live {
                Some((h, rev)) if h.host == holder.host && h.agent == holder.agent => {
                    expected = rev
                }
                Some((h, _rev)) => return Err(TakeError::Held(h)),
                None => expected = last,
            }
        }
        match self.holder(key).await.map_err(TakeError::Nats)? {
            (Some((h, _)), _) => Err(TakeError::Held(h)),
            _ => Err(TakeError::Nats(ClusterError::Contended)),
        }
    }

    /// Renews `key` held at `revision`: its new revision, or `None` when it
    /// is no longer ours (it expired and someone else took it, or it was
    /// removed).
    pub(crate) async fn renew(
        &mut self,
        key: &str,
        revision: u64,
        holder: &Holder,
    ) -> Result<Option<u64>, ClusterError> {
        self.put_if(key, revision, holder).await
    }

    /// Releases `key` if it is still at `revision`; `false` when it was not.
    pub(crate) async fn release(&mut self, key: &str, revision: u64) -> Result<bool, ClusterError> {
        let store = self.store().await?;
        match store.delete_expect_revision(key, Some(revision)).await {
            Ok(()) => Ok(true),
            Err(e) if e.to_string().contains("wrong last sequence") => Ok(false),
            Err(e) => Err(ClusterError::request("delete", e)),
        }
    }

    /// Every live lock: holder and revision.
    pub(crate) async fn list(&mut self) -> Result<Vec<(Holder, u64)>, ClusterError> {
        self.store().await?;
        let names = keys_of(&self.js, &self.bucket).await?;
        let mut out = Vec::new();
        for k in names {
            if let (Some(h), _) = self.holder(&k).await? {
                out.push(h);
            }
        }
        Ok(out)
    }
}

/// The holder of lock `key` whose value is `value`: the record, or the
/// unknown holder ([`unreadable`]) when it is none. Never "no lock".
pub(crate) fn read_value(key: &str, value: &[u8]) -> Holder {
    serde_json::from_slice(value).unwrap_or_else(|_| unreadable(key))
}

/// The holder standing for a lock value that cannot be read: an unknown
/// host holds the key's target (everything, when the key is not one of
/// ours either).
pub(crate) fn unreadable(key: &str) -> Holder {
    let target = key
        .strip_prefix("t-")
        .filter(|hex| hex.len() % 2 == 0)
        .and_then(|hex| {
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect::<Option<Vec<u8>>>()
        })
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| "**".to_string());
    Holder {
        target,
        host: format!("unknown (unreadable lock value at key {key})"),
        agent: "unknown".to_string(),
        task: String::new(),
        session: String::new(),
        acquired_at: chrono::DateTime::UNIX_EPOCH,
        token: None,
    }
}

/// The keys of KV bucket `bucket` that hold a message, from the stream's
/// subject list (a stream-info request to its leader), not from a
/// consumer: consumer creation timed out for a while after a node died,
/// while every other request was answered.
pub(crate) async fn keys_of(
    js: &jetstream::Context,
    bucket: &str,
) -> Result<Vec<String>, ClusterError> {
    let stream = js
        .get_stream(format!("KV_{bucket}"))
        .await
        .map_err(|e| ClusterError::request("stream info", e))?;
    let prefix = format!("$KV.{bucket}.");
    let mut subjects = stream
        .info_with_subjects(format!("{prefix}>"))
        .await
        .map_err(|e| ClusterError::request("stream info", e))?;
    let mut names = Vec::new();
    while let Some(item) = subjects.next().await {
        let (subject, _) = item.map_err(|e| ClusterError::request("stream info", e))?;
        if let Some(key) = subject.strip_prefix(&prefix) {
            names.push(key.to_string());
        }
    }
    Ok(names)
}

/// A project bucket, created when missing: one history entry per key,
/// per-message TTLs allowed (the delete marker a TTL leaves lives
/// `markers`), file storage, `replicas` replicas.
pub(crate) async fn bucket(
    js: &jetstream::Context,
    name: &str,
    description: &str,
    replicas: usize,
    markers: Duration,
) -> Result<kv::Store, ClusterError> {
    match js.get_key_value(name).await {
        Ok(s) => Ok(s),
        Err(_) => js
            .create_key_value(kv::Config {
                bucket: name.to_string(),
                description: description.into(),
                history: 1,
                num_replicas: replicas,
                storage: jetstream::stream::StorageType::File,
                limit_markers: Some(markers),
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::Bucket {
                what: "bucket",
                name: name.to_string(),
                error: e.to_string(),
            }),
    }
}

/// Puts `body` at `key` of KV bucket `bucket`: with `expected`, only if
/// the key's last revision is that (0: no message at all); with `ttl`, a
/// per-message TTL. Returns the new revision, or `Ok(None)` when the
/// revision was not `expected`.
///
/// async-nats has no public "update with TTL", so the put is published
/// with the two headers the KV API uses. A bucket just created (by us or
/// another host) may have no stream leader yet in a cluster: its publishes
/// get no responder ("no stream found") for a moment; retried briefly,
/// then reported.
pub(crate) async fn put(
    js: &jetstream::Context,
    bucket: &str,
    key: &str,
    expected: Option<u64>,
    ttl: Option<Duration>,
    body: Vec<u8>,
) -> Result<Option<u64>, ClusterError> {
    let mut headers = HeaderMap::new();
    if let Some(expected) = expected {
        headers.insert(
            header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
            HeaderValue::from(expected),
        );
    }
    if let Some(ttl) = ttl {
        headers.insert(header::NATS_MESSAGE_TTL, HeaderValue::from(ttl.as_secs()));
    }
    let subject = format!("$KV.{bucket}.{key}");
    let mut attempts = 0;
    let ack = loop {
        let ack = js
            .publish_with_headers(subject.clone(), headers.clone(), body.clone().into())
            .await
            .map_err(|e| ClusterError::request("publish", e))?
            .await;
        match ack {
            Err(e) if e.kind() == PublishErrorKind::StreamNotFound && attempts < 20 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            ack => break ack,
        }
    };
    match ack {
        Ok(ack) => Ok(Some(ack.sequence)),
        // 10071 carries the actual sequence; servers from 2.11 may answer
        // 10164 (the same refusal without it), which async-nats does not
        // map to a kind.
        Err(e)
            if e.kind() == PublishErrorKind::WrongLastSequence
                || e.to_string().contains("wrong last sequence") =>
        {
            Ok(None)
        }
        Err(e) => Err(ClusterError::request("publish", e)),
    }
}

/// [`put`] only if the key's last revision is `expected`.
pub(crate) async fn publish_cas(
    js: &jetstream::Context,
    bucket: &str,
    key: &str,
    expected: u64,
    ttl: Option<Duration>,
    body: Vec<u8>,
) -> Result<Option<u64>, ClusterError> {
    put(js, bucket, key, Some(expected), ttl, body).await
}

#[cfg(test)]
mod value_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// No value makes a key skipped: whatever its bytes, a key holds a
        /// lock on its own target, by its record's holder or by an unknown
        /// one.
        #[test]
        fn every_value_is_a_lock_on_its_target(
            target in "[ -~\u{e9}\u{4e2d}]{1,40}",
            value in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let key = crate::cluster::key_of(&target);
            let h = read_value(&key, &value);
            if serde_json::from_slice::<Holder>(&value).is_err() {
                prop_assert_eq!(&h.target, &target);
                prop_assert!(h.host.starts_with("unknown"));
            }
        }

        /// A key that is not one of ours locks everything.
        #[test]
        fn a_foreign_key_with_garbage_locks_everything(key in "[a-zA-Z0-9_=.-]{0,30}") {
            prop_assume!(!key.starts_with("t-"));
            prop_assert_eq!(read_value(&key, b"x").target, "**");
        }
    }
}
