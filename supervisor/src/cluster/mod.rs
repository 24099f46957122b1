//! The cluster (docs/cluster.md): a project's checkouts, each with its own
//! squadd, joined through a NATS JetStream cluster: the foundation,
//! cluster-wide locks, replication of protocol files and cross-host message
//! delivery, and the leader lease ([`leader`]: one writer of the
//! supervisor-owned outputs per project).
//!
//! squadd holds the NATS connection ([`daemon`]): it takes, renews and
//! releases the project's cluster locks for the agents of its checkout.
//! squadctl reaches it through the control socket ([`client`]). A second
//! task per root ([`replicate`], [`presence`]) replicates the protocol
//! files and knows which host each agent works on. A third ([`retire`])
//! carries the leader's retention to every checkout.
//! A follower's session edit is applied by the leader ([`edits`]).

pub(crate) mod accept;
pub(crate) mod client;
pub(crate) mod context;
pub(crate) mod daemon;
pub(crate) mod edits;
pub(crate) mod error;
pub(crate) mod fence;
pub(crate) mod kv;
pub(crate) mod leader;
pub(crate) mod presence;
#[cfg(test)]
mod replica_model;
pub(crate) mod replicate;
pub(crate) mod retire;
pub(crate) mod session_write;

pub(crate) use error::ClusterError;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The environment variable that overrides the host id.
pub(crate) const HOST_ENV: &str = "SQUAD_HOST";

/// This checkout's host id: `SQUAD_HOST` when set, else the hostname and
/// the checkout's path (two checkouts on one machine are two hosts).
pub(crate) fn host_id(root: &Path) -> String {
    match std::env::var(HOST_ENV) {
        Ok(h) if !h.trim().is_empty() => h.trim().to_string(),
        _ => format!("{}:{}", crate::locks::host_name(), root.display()),
    }
}

/// Who holds a cluster lock: the value of its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Holder {
    /// The locked target, as `squadctl lock` normalized it.
    pub target: String,
    /// The host whose squadd holds and renews it.
    pub host: String,
    /// The agent it was taken for.
    pub agent: String,
    /// The agent's task.
    pub task: String,
    /// The agent's session.
    pub session: String,
    /// When it was taken.
    pub acquired_at: DateTime<Utc>,
    /// The fencing token: the key's revision when this holding began.
    /// Absent in the holding's first value (its token is that value's own
    /// revision, known only once written); every renewal carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
}

impl Holder {
    /// The fencing token of this holding, read at `revision` (see
    /// [`Holder::token`]): it grows with every new holding of any key,
    /// and stays the same through renewals.
    pub(crate) fn token_at(&self, revision: u64) -> u64 {
        self.token.unwrap_or(revision)
    }
}

/// The KV key of a target: its bytes in hex. KV keys allow only
/// `[-/_=.a-zA-Z0-9]` and no leading or trailing dot; any path fits this way
/// and two targets never share a key.
pub(crate) fn key_of(target: &str) -> String {
    let mut key = String::with_capacity(2 + target.len() * 2);
    key.push_str("t-");
    for b in target.bytes() {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_valid_and_distinct() {
        let a = key_of("src/a b.rs");
        let b = key_of("src/a_b.rs");
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
        assert_eq!(key_of(""), "t-");
    }
}
