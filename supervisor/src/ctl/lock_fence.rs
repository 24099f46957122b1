//! Fencing tokens at the agent's side (docs/cluster.md, "Fencing tokens"):
//! `squadctl lock verify PATH --token T`, and the check that makes a
//! `lock renew` of a cluster lock that lapsed fail instead of saying
//! "renewed".

use crate::cluster::Holder;
use crate::cluster::fence::{self, Verdict};
use crate::exit;
use serde_json::json;
use std::path::Path;

/// Arguments of `lock verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The locked target, as it was locked.
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// The fencing token `lock acquire` printed for it.
    #[arg(long, value_name = "T")]
    pub token: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Why a token or a holding cannot be checked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FenceError {
    /// squadd (or NATS behind it) did not answer.
    #[error(transparent)]
    Cluster(#[from] crate::cluster::ClusterError),
    /// squadd answered something else than the holders asked for.
    #[error("squadd's answer is unreadable: {0}")]
    Answer(String),
}

/// A target's live holder and the revision of its value, if any.
type Live = Option<(Holder, u64)>;

/// The live holder of each target's cluster key, as the local squadd reads
/// it from the bucket, and squadd's host id.
fn holders(root: &Path, targets: &[String]) -> Result<(String, Vec<Live>), FenceError> {
    let answer = crate::cluster::client::call(root, "holders", targets, "", "", "")?;
    let rows = answer["holders"].as_array().cloned().unwrap_or_default();
    if rows.len() != targets.len() {
        return Err(FenceError::Answer("it names other targets".into()));
    }
    let host = answer["host"].as_str().unwrap_or_default().to_string();
    let live = rows
        .iter()
        .map(|r| {
            if r["held"].as_bool() != Some(true) {
                return Ok(None);
            }
            let holder: Holder = serde_json::from_value(r["holder"].clone())
                .map_err(|e| FenceError::Answer(e.to_string()))?;
            let revision = r["revision"].as_u64().unwrap_or(0);
            Ok(Some((holder, revision)))
        })
        .collect::<Result<Vec<Live>, FenceError>>()?;
    Ok((host, live))
}

/// Who holds a lock now, in a person's words.
fn named(h: &Holder, token: u64) -> String {
    format!(
        "{} (task {}) on host {}, token {token}",
        h.agent, h.task, h.host
    )
}

/// `squadctl lock verify TARGET --token T`: exit 0 when `T` is the current
/// holding's token, 1 when it is stale, 2 when it cannot be known.
pub(crate) fn verify(root: &Path, policy: &squad_policies::Policy, args: VerifyArgs) -> u8 {
    if policy.cluster.is_none() {
        return super::fail(
            "fencing tokens are cluster locks' (the policy has no `cluster:` section)",
        );
    }
    let target = match squad_policies::locks::parse_target(&args.target) {
        Ok(t) => t,
        Err(e) => return super::fail(format!("`{}`: {e}", args.target)),
    };
    let live = match holders(root, std::slice::from_ref(&target)) {
        Ok((_, mut v)) => v.pop().flatten(),
        Err(e) => return super::fail(format!("cannot verify the token: {e}")),
    };
    let verdict = fence::verify(args.token, live.as_ref().map(|(h, r)| (h, *r)));
    let (current, text, holder, token) = match &verdict {
        Verdict::Current(h) => (
            true,
            format!(
                "current: token {} holds {target} ({})\n",
                args.token,
                named(h, args.token)
            ),
            Some(h),
            Some(args.token),
        ),
        Verdict::Superseded(h, t) => (
            false,
            format!(
                "stale: token {} no longer holds {target}; held by {}\n",
                args.token,
                named(h, *t)
            ),
            Some(h),
            Some(*t),
        ),
        Verdict::Free => (
            false,
            format!(
                "stale: token {} no longer holds {target}; nobody holds it now\n",
                args.token
            ),
            None,
            None,
        ),
    };
    if args.json {
        super::print(&format!(
            "{:#}\n",
            json!({
                "target": target,
                "token": args.token,
                "current": current,
                "holder": holder,
                "current_token": token,
            })
        ));
    } else {
        super::print_human(&text);
    }
    if current { exit::OK } else { exit::PROBLEMS }
}

/// Why renewing `agent`'s cluster locks on `targets` must fail: `Ok(None)`
/// when this host's squadd still holds each for the agent (read from the
/// bucket), `Ok(Some(why))` naming what happened to the first one that
/// lapsed, `Err` when it cannot be known (squadd or NATS do not answer).
pub(crate) fn lapsed(
    root: &Path,
    agent: &str,
    targets: &[String],
) -> Result<Option<String>, FenceError> {
    if targets.is_empty() {
        return Ok(None);
    }
    let (host, live) = holders(root, targets)?;
    for (target, live) in targets.iter().zip(live) {
        match fence::still_held(&host, agent, live.as_ref().map(|(h, r)| (h, *r))) {
            Ok(_) => {}
            Err(Verdict::Superseded(h, t)) => {
                return Ok(Some(format!(
                    "the cluster lock on {target} lapsed and is now held by {}: re-acquire it",
                    named(&h, t)
                )));
            }
            Err(_) => {
                return Ok(Some(format!(
                    "the cluster lock on {target} lapsed (its TTL ran out without renewal): re-acquire it"
                )));
            }
        }
    }
    Ok(None)
}
