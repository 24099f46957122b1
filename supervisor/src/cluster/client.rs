//! squadctl's side: cluster requests through the local squadd's control
//! socket (squadd holds the NATS connection and renews the locks; a
//! squadctl process lives too short to renew anything).

use super::ClusterError;
use crate::control::{Client, ClientError, Method};
use serde_json::Value as Json;
use std::path::Path;
use std::time::Duration;

/// How long squadctl waits for squadd's cluster answer (NATS round trips
/// included).
const TIMEOUT: Duration = Duration::from_secs(15);

/// Asks the local squadd.
pub(crate) fn call(
    root: &Path,
    action: &str,
    targets: &[String],
    agent: &str,
    task: &str,
    session: &str,
) -> Result<Json, ClusterError> {
    let mut client = Client::connect(root, TIMEOUT).map_err(|e| match e {
        ClientError::NotRunning(_) => ClusterError::NoSquadd {
            root: root.to_path_buf(),
        },
        e => ClusterError::Control(e.to_string()),
    })?;
    client
        .call(Method::Cluster {
            action: action.into(),
            targets: targets.to_vec(),
            agent: agent.into(),
            task: task.into(),
            session: session.into(),
        })
        .map_err(|e| ClusterError::Control(e.to_string()))
}

/// The cluster-wide locks other hosts hold, as lock records the guard
/// checks like local ones (exclusive, held until now + the lock TTL at
/// most). Empty without `cluster:`. When the local squadd or NATS cannot
/// answer, the guard goes on with the local table alone (a host without
/// NATS keeps working locally; docs/cluster.md) and says so on stderr.
pub(crate) fn remote_locks(
    root: &Path,
    policy: &squad_policies::Policy,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<squad_policies::locks::LockRecord> {
    let Some(cluster) = &policy.cluster else {
        return Vec::new();
    };
    let listed = call(root, "list", &[], "", "", "");
    let locks = match listed {
        Ok(v) => v["locks"].as_array().cloned().unwrap_or_default(),
        Err(e) => {
            eprintln!(
                "squadctl guard: warning: cluster locks not checked ({}): other hosts' locks are not seen",
                crate::text::escape_lines(&e.to_string())
            );
            return Vec::new();
        }
    };
    let until = chrono::Duration::from_std(cluster.lock_ttl)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(now);
    locks
        .iter()
        // This host's cluster locks are its local records already.
        .filter(|l| l["this_host"].as_bool() == Some(false))
        .filter_map(|l| serde_json::from_value::<super::Holder>(l.clone()).ok())
        .map(|h| squad_policies::locks::LockRecord {
            targets: vec![h.target],
            mode: squad_policies::locks::Mode::Exclusive,
            agent: format!("{} (on host {})", h.agent, h.host),
            task_id: h.task,
            session: h.session,
            pid: None,
            pid_started_at: None,
            host: h.host,
            acquired_at: h.acquired_at,
            expires_at: until,
        })
        .collect()
}

/// Blocking records for `agent`'s own exclusive locks (in `held`, the
/// live local records) whose cluster lock may have lapsed by this host's
/// clock: squadd noted no successful renewal within the lock TTL minus a
/// fifth ([`super::fence::may_have_lapsed`]), because it is stopped, dead
/// or cut off from NATS. The guard then refuses the agent's writes there
/// (docs/cluster.md, "Fencing tokens"). Empty without `cluster:`.
pub(crate) fn lapsed_own_locks(
    root: &Path,
    policy: &squad_policies::Policy,
    agent: &str,
    held: &[squad_policies::locks::LockRecord],
) -> Vec<squad_policies::locks::LockRecord> {
    use squad_policies::locks::{LockRecord, Mode};
    let Some(cluster) = &policy.cluster else {
        return Vec::new();
    };
    let path = root
        .join(squad_protocol::tree::SQUAD_DIR)
        .join(squad_protocol::tree::RUN_DIR)
        .join(super::fence::STAMPS_FILE);
    // Unreadable or missing: no renewal known, every own lock lapsed.
    let stamps: super::fence::Stamps = squad_protocol::fsx::read_regular(&path, 4 << 20)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let now = super::leader::Moment::now().as_millis();
    held.iter()
        .filter(|r| r.agent == agent && r.mode == Mode::Exclusive)
        .flat_map(|r| {
            r.targets
                .iter()
                .filter(|t| super::fence::may_have_lapsed(&stamps, agent, t, now, cluster.lock_ttl))
                .map(move |t| LockRecord {
                    targets: vec![t.clone()],
                    mode: Mode::Exclusive,
                    agent: format!(
                        "nobody for sure ({agent}'s cluster lock may have lapsed: squadd noted no renewal within the lock TTL; `squadctl lock renew` or re-acquire)"
                    ),
                    task_id: r.task_id.clone(),
                    session: r.session.clone(),
                    pid: None,
                    pid_started_at: None,
                    host: r.host.clone(),
                    acquired_at: r.acquired_at,
                    expires_at: r.expires_at,
                })
        })
        .collect()
}

/// The environment variable naming the agent a command runs for.
pub(crate) const AGENT_ENV: &str = "SQUAD_AGENT";

/// Tells the local squadd that the agent of `SQUAD_AGENT` works on this
/// host (docs/cluster.md, "Cross-host delivery"): its messages are then
/// delivered here. Only with `cluster:`; best effort and quick (an agent's
/// command never fails or waits for it: squadd answers from memory and
/// claims the record on its own task).
pub(crate) fn register_presence(root_arg: Option<&Path>) {
    let Ok(agent) = std::env::var(AGENT_ENV) else {
        return;
    };
    if !squad_protocol::ids::IdKind::Agent.matches(&agent) {
        return;
    }
    let Ok(root) = crate::root::resolve(root_arg) else {
        return;
    };
    let clustered = crate::locks::load_policy(&root).is_ok_and(|p| p.cluster.is_some());
    if !clustered {
        return;
    }
    let Ok(mut client) = Client::connect(&root, Duration::from_secs(2)) else {
        return;
    };
    let _ = client.call(Method::Cluster {
        action: "present".into(),
        targets: Vec::new(),
        agent,
        task: String::new(),
        session: String::new(),
    });
}
