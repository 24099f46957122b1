//! squadctl's side: cluster requests through the local squadd's control
//! socket (squadd holds the NATS connection and renews the locks; a
//! squadctl process lives too short to renew anything).

use crate::control::{Client, ClientError, Method};
use serde_json::Value as Json;
use std::path::Path;
use std::time::Duration;

/// How long squadctl waits for squadd's cluster answer (NATS round trips
/// included).
const TIMEOUT: Duration = Duration::from_secs(15);

/// Asks the local squadd.
pub fn call(
    root: &Path,
    action: &str,
    targets: &[String],
    agent: &str,
    task: &str,
    session: &str,
) -> Result<Json, String> {
    let mut client = Client::connect(root, TIMEOUT).map_err(|e| match e {
        ClientError::NotRunning(_) => format!(
            "squadd is not running for {}: cluster locks are taken and renewed by the local squadd; start it (`squadd --root {}`)",
            root.display(),
            root.display()
        ),
        e => e.to_string(),
    })?;
    client
        .call(Method::Cluster {
            action: action.into(),
            targets: targets.to_vec(),
            agent: agent.into(),
            task: task.into(),
            session: session.into(),
        })
        .map_err(|e| e.to_string())
}
