//! Which host each agent works on (docs/cluster.md, "Cross-host
//! delivery"): KV bucket `squad-<project>-agents`, key = the agent
//! ([`super::key_of`]), value = the host whose squadd renews it. An agent's
//! `squadctl` call with `SQUAD_AGENT` set registers it with the local
//! squadd; squadd claims the key (a plain put: the agent's latest call is
//! where it is) and renews it by compare-and-set on the revision it holds.
//! A renewal that finds another revision means another host claimed the
//! agent: this host lets it go. The bucket's `max_age` is the record's TTL:
//! a dead host's agents lapse.

use super::ClusterError;
use super::key_of;
use super::kv::{keys_of, publish_cas};
use async_nats::jetstream::{self, kv};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The value of an agent's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The agent.
    pub agent: String,
    /// The host whose squadd renews it.
    pub host: String,
    /// When this host claimed or last renewed it.
    pub at: DateTime<Utc>,
}

/// How long a presence record lives without renewal: four lock TTLs, at
/// least a minute. Presence is no safety property (a late lapse only delays
/// a message until its host returns), so it may outlive a NATS leader
/// election and a squadd restart comfortably.
pub(crate) fn ttl(lock_ttl: Duration) -> Duration {
    (lock_ttl * 4).max(Duration::from_secs(60))
}

/// The agents bucket of one project.
pub(crate) struct Presence {
    bucket: String,
    ttl: Duration,
    replicas: usize,
    store: Option<kv::Store>,
}

impl Presence {
    /// The bucket `bucket` with records living `ttl`.
    pub(crate) fn new(bucket: String, ttl: Duration, replicas: usize) -> Presence {
        Presence {
            bucket,
            ttl,
            replicas,
            store: None,
        }
    }

    async fn store(&mut self, js: &jetstream::Context) -> Result<kv::Store, ClusterError> {
        if let Some(s) = &self.store {
            return Ok(s.clone());
        }
        let store = match js.get_key_value(&self.bucket).await {
            Ok(s) => s,
            Err(_) => js
                .create_key_value(kv::Config {
                    bucket: self.bucket.clone(),
                    description: "squad-supervisor: the host of each agent".into(),
                    history: 1,
                    max_age: self.ttl,
                    num_replicas: self.replicas,
                    storage: jetstream::stream::StorageType::File,
                    ..Default::default()
                })
                .await
                .map_err(|e| ClusterError::Bucket {
                    what: "agents bucket",
                    name: self.bucket.clone(),
                    error: e.to_string(),
                })?,
        };
        self.store = Some(store.clone());
        Ok(store)
    }

    /// Claims `agent` for `host` whatever held it; its new revision.
    pub(crate) async fn claim(
        &mut self,
        js: &jetstream::Context,
        agent: &str,
        host: &str,
    ) -> Result<u64, ClusterError> {
        let store = self.store(js).await?;
        let body = record(agent, host)?;
        store
            .put(key_of(agent), body.into())
            .await
            .map_err(|e| ClusterError::request("put", e))
    }

    /// Renews `agent` held at `revision` (0: unknown, after a restart: the
    /// record is looked at and renewed if it names `host`). `Ok(None)`:
    /// another host holds it now (or it lapsed): let go.
    pub(crate) async fn renew(
        &mut self,
        js: &jetstream::Context,
        agent: &str,
        host: &str,
        revision: u64,
    ) -> Result<Option<u64>, ClusterError> {
        let store = self.store(js).await?;
        let key = key_of(agent);
        let mut revision = revision;
        if revision == 0 {
            match store.entry(&key).await {
                Ok(Some(e)) if e.operation == kv::Operation::Put => {
                    match serde_json::from_slice::<Record>(&e.value) {
                        Ok(r) if r.host == host => revision = e.revision,
                        _ => return Ok(None),
                    }
                }
                // Lapsed while this host was away: claimed again, since its
                // squadd still had it registered.
                Ok(_) => return self.claim(js, agent, host).await.map(Some),
                Err(e) => return Err(ClusterError::request("get", e)),
            }
        }
        publish_cas(js, &self.bucket, &key, revision, None, record(agent, host)?).await
    }

    /// Every live record: agent → host.
    pub(crate) async fn table(
        &mut self,
        js: &jetstream::Context,
    ) -> Result<BTreeMap<String, String>, ClusterError> {
        let store = self.store(js).await?;
        let mut out = BTreeMap::new();
        for key in keys_of(js, &self.bucket).await? {
            match store.entry(&key).await {
                Ok(Some(e)) if e.operation == kv::Operation::Put => {
                    // A record any host of the project could have written:
                    // one that does not parse, or whose key is not its
                    // agent's, is ignored.
                    if let Ok(r) = serde_json::from_slice::<Record>(&e.value)
                        && key_of(&r.agent) == key
                    {
                        out.insert(r.agent, r.host);
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(ClusterError::request("get", e)),
            }
        }
        Ok(out)
    }
}

fn record(agent: &str, host: &str) -> Result<Vec<u8>, ClusterError> {
    serde_json::to_vec(&Record {
        agent: agent.to_string(),
        host: host.to_string(),
        at: Utc::now(),
    })
    .map_err(|e| ClusterError::Encode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_outlives_a_lock_ttl_and_a_minute() {
        assert_eq!(ttl(Duration::from_secs(15)), Duration::from_secs(60));
        assert_eq!(ttl(Duration::from_secs(30)), Duration::from_secs(120));
    }
}
