//! Why a request to the cluster failed (NATS, its KV buckets, the local
//! squadd that holds the connection): the text is what `squadctl`,
//! `status`, events and the logs show.

use std::path::PathBuf;

/// A cluster request that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ClusterError {
    /// `cluster.credentials` could not be read.
    #[error("cluster.credentials {}: {error}", path.display())]
    Credentials {
        /// The credentials file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// A seed of `cluster.nats` is not a server address.
    #[error("cluster.nats `{url}`: {error}")]
    Seed {
        /// The seed as written.
        url: String,
        /// Why.
        error: String,
    },
    /// No seed could be reached.
    #[error("cannot reach NATS at {seeds}: {error}")]
    Unreachable {
        /// The seeds, comma-separated.
        seeds: String,
        /// Why.
        error: String,
    },
    /// The connection dropped: no new cluster lock until it is back.
    #[error(
        "not connected to NATS ({state}; seeds {seeds}): this host takes no new cluster locks until it reconnects"
    )]
    Disconnected {
        /// The connection's state.
        state: String,
        /// The seeds, comma-separated.
        seeds: String,
    },
    /// There is no connection (yet).
    #[error("no NATS connection")]
    NoConnection,
    /// A NATS request failed; `op` names it (get, put, publish, delete,
    /// stream info).
    #[error("NATS {op}: {error}")]
    Request {
        /// The request.
        op: &'static str,
        /// Why.
        error: String,
    },
    /// A bucket could not be created.
    #[error("cannot create the {what} {name}: {error}")]
    Bucket {
        /// Which bucket ("bucket", "agents bucket", "files bucket").
        what: &'static str,
        /// Its name.
        name: String,
        /// Why.
        error: String,
    },
    /// The leader bucket does not exist yet.
    #[error("NATS: no leader bucket {bucket} yet ({error})")]
    NoLeaderBucket {
        /// Its name.
        bucket: String,
        /// Why.
        error: String,
    },
    /// The files bucket could not be watched.
    #[error("cannot watch {bucket}: {error}")]
    Watch {
        /// Its name.
        bucket: String,
        /// Why.
        error: String,
    },
    /// A lock key changed at every try.
    #[error("the lock key kept changing; try again")]
    Contended,
    /// A record could not be encoded as JSON.
    #[error("{0}")]
    Encode(String),
    /// A replicated file could not be read or written locally.
    #[error("{0}")]
    Local(String),
    /// The files bucket's key was removed while publishing.
    #[error("the key was removed; publishing again")]
    KeyRemoved,
    /// No files bucket yet.
    #[error("no files bucket")]
    NoFilesBucket,
    /// A leader's output lost a race to a lower epoch's version: published
    /// over it at the next try.
    #[error("{file} moved on to a lower epoch's version; publishing over it")]
    PublishOver {
        /// The file.
        file: String,
    },
    /// The local squadd, which holds the NATS connection, is not running.
    #[error(
        "squadd is not running for {}: cluster locks are taken and renewed by the local squadd; start it (`squadd --root {}`)",
        root.display(),
        root.display()
    )]
    NoSquadd {
        /// The project root.
        root: PathBuf,
    },
    /// The local squadd's control socket failed or refused.
    #[error("{0}")]
    Control(String),
}

impl ClusterError {
    /// A failed NATS request `op`.
    pub(crate) fn request(op: &'static str, error: impl std::fmt::Display) -> ClusterError {
        ClusterError::Request {
            op,
            error: error.to_string(),
        }
    }
}

/// As its text: the JSON answers (`squadctl cluster status --json`, the
/// control socket) carry the message, as they always did.
impl serde::Serialize for ClusterError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::ClusterError;

    /// The texts are the ones the `String` errors had (squadctl, status
    /// and the e2e tests read them), and the JSON carries the same text.
    #[test]
    fn the_texts_are_the_messages_users_saw() {
        let cases = [
            (
                ClusterError::Disconnected {
                    state: "disconnected".into(),
                    seeds: "nats://127.0.0.1:4222".into(),
                },
                "not connected to NATS (disconnected; seeds nats://127.0.0.1:4222): this host takes no new cluster locks until it reconnects",
            ),
            (ClusterError::NoConnection, "no NATS connection"),
            (
                ClusterError::request("get", "timed out"),
                "NATS get: timed out",
            ),
            (
                ClusterError::Bucket {
                    what: "agents bucket",
                    name: "squad-p-agents".into(),
                    error: "no".into(),
                },
                "cannot create the agents bucket squad-p-agents: no",
            ),
            (
                ClusterError::NoSquadd { root: "/p".into() },
                "squadd is not running for /p: cluster locks are taken and renewed by the local squadd; start it (`squadd --root /p`)",
            ),
            (
                ClusterError::Contended,
                "the lock key kept changing; try again",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            assert_eq!(
                serde_json::json!({ "e": e }),
                serde_json::json!({ "e": text })
            );
        }
    }
}
