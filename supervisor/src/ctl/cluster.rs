//! `squadctl cluster`: the cluster as this checkout's squadd sees it
//! (docs/cluster.md).

use crate::exit;
use serde_json::{Value, json};
use std::path::Path;

/// The cluster (docs/cluster.md): a project's checkouts joined through NATS
/// JetStream, turned on by `cluster:` in .squad/policies.yaml.
#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// This host's id, the NATS connection, the leader, the hosts seen
    /// (each with its replication lag: the revisions of the files bucket it
    /// had not applied when it last beat) and every cluster-wide lock, as
    /// the local squadd sees them (it holds the connection). Exit 0 connected, 1 enabled but not connected (or squadd
    /// down), 2 usage or I/O failure. Without `cluster:` it says so (exit 0).
    Status {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a cluster command.
pub(crate) fn run(root_arg: Option<&Path>, cmd: ClusterCommand) -> u8 {
    let (root, policy) = match super::root_and_policy(root_arg) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let ClusterCommand::Status { json } = cmd;
    let Some(cluster) = &policy.cluster else {
        let v = json!({"enabled": false});
        return if json {
            super::print(&format!("{v:#}\n"))
        } else {
            super::print(
                "cluster: off (no `cluster:` section in .squad/policies.yaml; docs/cluster.md)\n",
            )
        };
    };
    let report = crate::cluster::client::call(&root, "status", &[], "", "", "");
    let (v, code) = match report {
        Ok(mut v) => {
            // The replication task's section (docs/cluster.md,
            // "Replication"): its own answer, from squadd's memory.
            if let Ok(r) = crate::cluster::client::call(&root, "replication", &[], "", "", "") {
                v["replication"] = r;
            }
            let up = v["connection"]["state"].as_str() == Some("connected");
            (v, if up { exit::OK } else { exit::PROBLEMS })
        }
        Err(e) => (
            json!({
                "enabled": true,
                "host": crate::cluster::host_id(&root),
                "project": cluster.project,
                "seeds": cluster.nats,
                "connection": {"state": "unknown", "error": e},
            }),
            exit::PROBLEMS,
        ),
    };
    let printed = if json {
        super::print(&format!("{v:#}\n"))
    } else {
        super::print_human(&human(&v))
    };
    if printed != exit::OK { printed } else { code }
}

fn human(v: &Value) -> String {
    // Targets, agents, sessions and hosts come from the shared bucket,
    // which any host of the project can write: escaped.
    let s = |x: &Value| crate::text::escape(x.as_str().unwrap_or("?")).into_owned();
    let mut out = format!(
        "cluster: project {}  host {}\nNATS: {}{}  (seeds {})\n",
        s(&v["project"]),
        s(&v["host"]),
        s(&v["connection"]["state"]),
        v["connection"]["server"]
            .as_str()
            .map(|x| format!(" to {}", crate::text::escape(x)))
            .unwrap_or_default(),
        v["seeds"]
            .as_array()
            .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
    );
    if let Some(e) = v["connection"]["error"].as_str() {
        out.push_str(&format!("error: {}\n", crate::text::escape_lines(e)));
    }
    out.push_str(&leader_line(v));
    match v["hosts"].as_array() {
        Some(rows) if !rows.is_empty() => {
            out.push_str(&format!("hosts: {}\n", rows.len()));
            for h in rows {
                out.push_str(&format!(
                    "  {}{}{}  seen {:.1}s ago  via {}  replication lag: {}\n",
                    s(&h["host"]),
                    if h["this_host"] == true {
                        " (this host)"
                    } else {
                        ""
                    },
                    if h["leader"] == true { " [leader]" } else { "" },
                    h["seen_secs_ago"].as_f64().unwrap_or(0.0),
                    s(&h["server"]),
                    lag_text(h, &v["files_revision"]),
                ));
            }
        }
        _ => {
            if let Some(e) = v["hosts_error"].as_str() {
                out.push_str(&format!(
                    "hosts: unknown ({})\n",
                    crate::text::escape_lines(e)
                ));
            }
            if let Some(hosts) = v["hosts_seen"].as_array() {
                out.push_str(&format!(
                    "hosts seen: {}\n",
                    hosts.iter().map(s).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
    match v["locks"].as_array() {
        Some(locks) if locks.is_empty() => out.push_str("cluster locks: none\n"),
        Some(locks) => {
            out.push_str(&format!("cluster locks: {}\n", locks.len()));
            for l in locks {
                out.push_str(&format!(
                    "  {}  {} ({})  session {}  host {}\n",
                    s(&l["target"]),
                    s(&l["agent"]),
                    s(&l["task"]),
                    s(&l["session"]),
                    s(&l["host"])
                ));
            }
        }
        None => {
            if let Some(e) = v["locks_error"].as_str() {
                out.push_str(&format!(
                    "cluster locks: unknown ({})\n",
                    crate::text::escape_lines(e)
                ));
            }
        }
    }
    replication_human(&v["replication"], &mut out);
    out
}

/// A host's replication lag as `cluster status` prints it: the revisions of
/// the files bucket it had not applied when it last beat.
fn lag_text(h: &Value, files_revision: &Value) -> String {
    match (
        h["replication_lag"].as_u64(),
        h["applied_revision"].as_u64(),
    ) {
        (Some(l), Some(a)) => format!(
            "{} (applied {a} of {})",
            crate::text::count(l as usize, "revision", "revisions"),
            files_revision.as_u64().unwrap_or(a)
        ),
        (None, Some(a)) => format!("unknown (applied {a}; the files bucket not read)"),
        _ => "unknown (its heartbeat carries no revision applied)".into(),
    }
}

/// The largest replication lag of the live hosts (revisions), when every
/// host's is known.
fn max_lag(v: &Value) -> Option<u64> {
    let rows = v["hosts"].as_array()?;
    rows.iter()
        .map(|h| h["replication_lag"].as_u64())
        .try_fold(0, |m, l| Some(m.max(l?)))
}

/// `; replication lag: max N revision(s)` for the status and health lines.
fn max_lag_text(v: &Value) -> String {
    match max_lag(v) {
        Some(l) => format!(
            "; replication lag: max {}",
            crate::text::count(l as usize, "revision", "revisions")
        ),
        None => "; replication lag: unknown".into(),
    }
}

/// The replication and presence lines of `cluster status`.
fn replication_human(r: &Value, out: &mut String) {
    if r.is_null() {
        return;
    }
    let s = |x: &Value| crate::text::escape(x.as_str().unwrap_or("?")).into_owned();
    let n = |x: &Value| x.as_u64().unwrap_or(0);
    out.push_str(&format!(
        "replication: revision {}  published {}  applied {}  pending {}  dropped {}  conflicts {}\n",
        n(&r["last_revision"]),
        n(&r["published"]),
        n(&r["applied"]),
        n(&r["pending"]),
        n(&r["dropped"]),
        n(&r["conflicts_total"]),
    ));
    if let Some(e) = r["error"].as_str() {
        out.push_str(&format!(
            "replication error: {}\n",
            crate::text::escape_lines(e)
        ));
    }
    for c in r["conflicts"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  conflict  {}/{}  {}'s version won (revision {}); ours kept as {}\n",
            s(&c["session"]),
            s(&c["file"]),
            s(&c["winner"]),
            n(&c["revision"]),
            s(&c["kept"]),
        ));
    }
    if let Some(agents) = r["agents"].as_object() {
        let list: Vec<String> = agents
            .iter()
            .map(|(a, h)| format!("{} on {}", crate::text::escape(a), s(h)))
            .collect();
        out.push_str(&format!(
            "agents: {}\n",
            if list.is_empty() {
                "none registered".to_string()
            } else {
                list.join(", ")
            }
        ));
    }
}

/// `leader: <host> (epoch N)[, this host]` from a status report.
fn leader_line(v: &Value) -> String {
    let l = &v["leader"];
    match (l["host"].as_str(), l["epoch"].as_u64()) {
        (Some(h), Some(e)) => format!(
            "leader: {} (epoch {e}){}\n",
            crate::text::escape(h),
            if l["this_host"] == true {
                ", this host"
            } else {
                ""
            }
        ),
        _ => "leader: none known (no lease held, or NATS unreachable)\n".into(),
    }
}

/// The `cluster` section of `squadctl status` (human): the connection and
/// the leader, as the local squadd sees them; `None` without `cluster:`.
pub(crate) fn status_section(root: &Path) -> Option<(String, Value)> {
    crate::locks::load_policy(root).ok()?.cluster?;
    Some(
        match crate::cluster::client::call(root, "status", &[], "", "", "") {
            Ok(v) => {
                let text = format!(
                    "cluster: NATS {}; {}; {} host(s) live{}\n",
                    v["connection"]["state"].as_str().unwrap_or("unknown"),
                    leader_line(&v).trim_end(),
                    v["hosts"].as_array().map_or(0, Vec::len),
                    max_lag_text(&v)
                );
                let lags: serde_json::Map<String, Value> = v["hosts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|h| {
                        Some((
                            h["host"].as_str()?.to_string(),
                            h["replication_lag"].clone(),
                        ))
                    })
                    .collect();
                let j = json!({
                    "connection": v["connection"]["state"],
                    "leader": v["leader"],
                    "hosts": v["hosts"].as_array().map(|h| h.iter().map(|x| x["host"].clone()).collect::<Vec<_>>()),
                    "replication_lag": lags,
                });
                (text, j)
            }
            Err(e) => (
                format!(
                    "cluster: unknown ({})\n",
                    crate::text::escape_lines(&e.to_string())
                ),
                json!({"error": e}),
            ),
        },
    )
}

/// The `cluster` line of `squadctl health`, when the project has
/// `cluster:`: ok while squadd is connected to NATS, critical otherwise
/// (no new cluster locks are taken then).
pub(crate) fn health_check(root: &Path) -> Option<crate::daemon::health::Check> {
    use crate::daemon::health::{Check, Verdict};
    crate::locks::load_policy(root).ok()?.cluster?;
    let (value, verdict) = match crate::cluster::client::call(root, "status", &[], "", "", "") {
        Ok(v) if v["connection"]["state"] == "connected" => (
            format!(
                "connected to {}; {} cluster lock(s), {} held here; {}{}",
                v["connection"]["server"].as_str().unwrap_or("?"),
                v["locks"].as_array().map_or(0, Vec::len),
                v["held_here"].as_u64().unwrap_or(0),
                leader_line(&v).trim_end(),
                max_lag_text(&v)
            ),
            Verdict::Ok,
        ),
        Ok(v) => (
            format!(
                "NATS {}{}",
                v["connection"]["state"].as_str().unwrap_or("unknown"),
                v["connection"]["error"]
                    .as_str()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
            Verdict::Critical,
        ),
        Err(e) => (e.to_string(), Verdict::Critical),
    };
    Some(Check {
        name: "cluster".into(),
        value,
        verdict,
        note: "critical when squadd is not connected to NATS: no new cluster locks; `squadctl cluster status`".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_lag_is_known_only_when_every_hosts_is() {
        let v = json!({"files_revision": 9, "hosts": [
            {"host": "a", "replication_lag": 0, "applied_revision": 9},
            {"host": "b", "replication_lag": 3, "applied_revision": 6},
        ]});
        assert_eq!(max_lag(&v), Some(3));
        assert_eq!(max_lag_text(&v), "; replication lag: max 3 revisions");
        assert_eq!(
            lag_text(&v["hosts"][1], &v["files_revision"]),
            "3 revisions (applied 6 of 9)"
        );
        let old = json!({"hosts": [{"host": "a", "replication_lag": null}]});
        assert_eq!(max_lag(&old), None);
        assert!(lag_text(&old["hosts"][0], &Value::Null).starts_with("unknown"));
    }
}
