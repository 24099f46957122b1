//! `cluster:` of the policy: the NATS JetStream cluster that joins a
//! project's checkouts (docs/cluster.md). Absent: the project is one
//! checkout, and nothing here is used.

use crate::duration::parse_duration;
use crate::policy::PolicyError;
use serde::Deserialize;
use std::time::Duration;

/// The effective `cluster:` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPolicy {
    /// Seed server URLs (`nats://host:port`, `tls://host:port`).
    pub nats: Vec<String>,
    /// Names the project's buckets (`squad-<project>-locks`).
    pub project: String,
    /// A NATS credentials file (`~/` expanded by the caller), if any.
    pub credentials: Option<String>,
    /// A cluster lock's time to live on the server: how long after its
    /// holder's squadd last renewed it the lock passes to another host.
    pub lock_ttl: Duration,
    /// Replicas of the project's buckets (1 on a single server, 3 in a
    /// three-node cluster).
    pub replicas: usize,
    /// The leader's lease (docs/cluster.md, "Leader"): how long after the
    /// leader's squadd last renewed it another host may take over.
    pub lease_ttl: Duration,
}

impl ClusterPolicy {
    /// The KV bucket of the project's cluster-wide locks.
    pub fn locks_bucket(&self) -> String {
        format!("squad-{}-locks", self.project)
    }

    /// The KV bucket of the project's leader lease and host heartbeats.
    pub fn leader_bucket(&self) -> String {
        format!("squad-{}-leader", self.project)
    }

    /// The KV bucket of the project's replicated protocol files.
    pub fn files_bucket(&self) -> String {
        format!("squad-{}-files", self.project)
    }
}

/// `cluster:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    nats: Vec<String>,
    project: String,
    #[serde(default)]
    credentials: Option<String>,
    #[serde(default)]
    lock_ttl: Option<String>,
    #[serde(default)]
    replicas: Option<usize>,
    #[serde(default)]
    lease_ttl: Option<String>,
}

/// The longest `cluster.lock_ttl` accepted: a dead host's locks must not
/// block the others for long.
pub const MAX_LOCK_TTL: Duration = Duration::from_secs(3600);

fn err(field: &str, message: impl Into<String>) -> PolicyError {
    PolicyError {
        field: format!("cluster.{field}"),
        message: message.into(),
    }
}

/// Checks a `nats://` or `tls://` URL with a host and a port.
fn check_url(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("nats://")
        .or_else(|| url.strip_prefix("tls://"))
        .ok_or_else(|| format!("`{url}` is not a NATS URL; write e.g. `nats://10.0.0.5:4222`"))?;
    // Credentials in the URL would end up in status output and logs.
    if rest.contains('@') {
        return Err(format!(
            "`{url}` carries credentials; put them in `cluster.credentials` (a .creds file) instead"
        ));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("`{url}` has no port; write e.g. `nats://{rest}:4222`"))?;
    if host.is_empty() || host.contains('/') {
        return Err(format!(
            "`{url}` has no host; write e.g. `nats://10.0.0.5:4222`"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err(format!("`{url}`: `{port}` is not a port (1-65535)")),
    }
}

/// Validates `cluster:`.
pub fn cluster_policy(raw: RawCluster) -> Result<ClusterPolicy, PolicyError> {
    if raw.nats.is_empty() {
        return Err(err(
            "nats",
            "no seed server; list at least one, e.g. [\"nats://10.0.0.5:4222\"]",
        ));
    }
    for (i, url) in raw.nats.iter().enumerate() {
        check_url(url).map_err(|m| err(&format!("nats[{i}]"), m))?;
    }
    let project_ok = !raw.project.is_empty()
        && raw.project.len() <= 64
        && raw
            .project
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !project_ok {
        return Err(err(
            "project",
            format!(
                "`{}` must be 1-64 letters, digits, `-` or `_` (it names NATS buckets)",
                raw.project
            ),
        ));
    }
    if raw
        .credentials
        .as_deref()
        .is_some_and(|c| c.trim().is_empty())
    {
        return Err(err(
            "credentials",
            "empty path; remove the key or name a .creds file",
        ));
    }
    let lock_ttl = ttl(raw.lock_ttl.as_deref(), "lock_ttl", Duration::from_secs(15))?;
    let lease_ttl = ttl(
        raw.lease_ttl.as_deref(),
        "lease_ttl",
        Duration::from_secs(10),
    )?;
    let replicas = raw.replicas.unwrap_or(3);
    if !(1..=5).contains(&replicas) {
        return Err(err("replicas", format!("{replicas}: must be 1 to 5")));
    }
    Ok(ClusterPolicy {
        nats: raw.nats,
        project: raw.project,
        credentials: raw.credentials,
        lock_ttl,
        replicas,
        lease_ttl,
    })
}

/// A TTL key: whole seconds (the server counts message TTLs in seconds),
/// from 1s to [`MAX_LOCK_TTL`].
fn ttl(text: Option<&str>, field: &str, default: Duration) -> Result<Duration, PolicyError> {
    let t = match text {
        None => default,
        Some(t) => parse_duration(t).map_err(|m| err(field, m))?,
    };
    if t < Duration::from_secs(1) || t > MAX_LOCK_TTL || t.subsec_nanos() != 0 {
        return Err(err(
            field,
            format!(
                "must be whole seconds, from 1s to 1h (e.g. `{}s`)",
                default.as_secs()
            ),
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use crate::Policy;
    use std::time::Duration;

    fn parse(text: &str) -> Result<Policy, crate::policy::PolicyError> {
        Policy::parse(Some(text))
    }

    #[test]
    fn absent_means_no_cluster() {
        assert_eq!(parse("locks:\n  default_ttl: 5m\n").unwrap().cluster, None);
    }

    #[test]
    fn a_full_section_parses_with_defaults() {
        let p = parse("cluster:\n  nats: [\"nats://10.0.0.5:4222\", \"tls://n2.example:4222\"]\n  project: web-shop\n  credentials: ~/.config/squad/nats.creds\n")
            .unwrap()
            .cluster
            .unwrap();
        assert_eq!(p.nats.len(), 2);
        assert_eq!(p.locks_bucket(), "squad-web-shop-locks");
        assert_eq!(p.lock_ttl, Duration::from_secs(15));
        assert_eq!(p.replicas, 3);
        assert_eq!(p.leader_bucket(), "squad-web-shop-leader");
        assert_eq!(p.lease_ttl, Duration::from_secs(10));
        assert_eq!(p.credentials.as_deref(), Some("~/.config/squad/nats.creds"));
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            ("  nats: []\n  project: p\n", "cluster.nats", "seed"),
            (
                "  nats: [\"http://x:1\"]\n  project: p\n",
                "cluster.nats[0]",
                "NATS URL",
            ),
            (
                "  nats: [\"nats://x\"]\n  project: p\n",
                "cluster.nats[0]",
                "no port",
            ),
            (
                "  nats: [\"nats://u:pw@x:4222\"]\n  project: p\n",
                "cluster.nats[0]",
                "credentials",
            ),
            (
                "  nats: [\"nats://x:0\"]\n  project: p\n",
                "cluster.nats[0]",
                "port",
            ),
            (
                "  nats: [\"nats://x:1\"]\n  project: \"a b\"\n",
                "cluster.project",
                "letters",
            ),
            (
                "  nats: [\"nats://x:1\"]\n  project: p\n  lock_ttl: 500ms\n",
                "cluster.lock_ttl",
                "whole seconds",
            ),
            (
                "  nats: [\"nats://x:1\"]\n  project: p\n  lock_ttl: 2h\n",
                "cluster.lock_ttl",
                "1h",
            ),
            (
                "  nats: [\"nats://x:1\"]\n  project: p\n  lease_ttl: 0s\n",
                "cluster.lease_ttl",
                "whole seconds",
            ),
            (
                "  nats: [\"nats://x:1\"]\n  project: p\n  replicas: 7\n",
                "cluster.replicas",
                "1 to 5",
            ),
            (
                "  nats: [\"nats://x:1\"]\n  project: p\n  credentials: \" \"\n",
                "cluster.credentials",
                "empty",
            ),
        ];
        for (body, field, words) in cases {
            let e = parse(&format!("cluster:\n{body}")).unwrap_err();
            assert_eq!(e.field, field, "{body}: {e}");
            assert!(e.message.contains(words), "{body}: {e}");
        }
        let e = parse("cluster:\n  nats: [\"nats://x:1\"]\n").unwrap_err();
        assert!(e.message.contains("project"), "{e}");
        let e =
            parse("cluster:\n  nats: [\"nats://x:1\"]\n  project: p\n  leader: x\n").unwrap_err();
        assert!(e.message.contains("leader"), "{e}");
    }
}
