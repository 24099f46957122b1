//! Fencing tokens of cluster locks (docs/cluster.md, "Fencing tokens").
//!
//! A cluster lock's token is the revision of its key when the holding
//! began ([`super::Holder::token_at`]): JetStream revisions only grow, so
//! a later holding of any key has a larger token, and renewals keep it.
//! An agent gets it from `lock acquire`; whoever accepts its writes can
//! ask `squadctl lock verify PATH --token T` whether it is still the
//! current holding's. These are the pure decisions; squadd reads the key.

use super::Holder;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where squadd notes, per cluster lock it holds, when its last
/// successful renewal (or the acquisition) was sent, under `.squad/run/`.
pub(crate) const STAMPS_FILE: &str = "cluster-locks.json";

/// The renewal stamps of this checkout's cluster locks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamps {
    /// One per lock held.
    pub locks: Vec<Stamp>,
}

/// When a cluster lock's last successful renewal was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    /// The holder.
    pub agent: String,
    /// The target.
    pub target: String,
    /// Milliseconds since boot (`CLOCK_BOOTTIME`) when it was sent.
    pub sent_boot_ms: u64,
}

/// How long a renewal sent at some moment keeps the lock the holder's by
/// the holder's own clock: the TTL minus a fifth (at least 200 ms), the
/// leader lease's margin. The server counts the TTL from when it stored
/// the renewal, later, so the holder stops before the lock can pass.
pub(crate) fn held_for(ttl: Duration) -> Duration {
    ttl.saturating_sub((ttl / 5).max(Duration::from_millis(200)))
}

/// Whether `agent`'s lock on `target` may have lapsed at `now_ms` (boot
/// clock) by the stamps: no stamp (squadd never noted a renewal) counts
/// as lapsed.
pub(crate) fn may_have_lapsed(
    stamps: &Stamps,
    agent: &str,
    target: &str,
    now_ms: u64,
    ttl: Duration,
) -> bool {
    let held = u64::try_from(held_for(ttl).as_millis()).unwrap_or(u64::MAX);
    stamps
        .locks
        .iter()
        .find(|s| s.agent == agent && s.target == target)
        .is_none_or(|s| now_ms >= s.sent_boot_ms.saturating_add(held))
}

/// What a key's current value says of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The live holding has this token.
    Current(Box<Holder>),
    /// Another holding is live (its holder, its token).
    Superseded(Box<Holder>, u64),
    /// Nobody holds the key now (released, or lapsed at its TTL).
    Free,
}

/// Decides `token` against the key's live holder and the revision of its
/// value (`None`: no live value).
pub(crate) fn verify(token: u64, live: Option<(&Holder, u64)>) -> Verdict {
    match live {
        Some((h, rev)) if h.token_at(rev) == token => Verdict::Current(Box::new(h.clone())),
        Some((h, rev)) => Verdict::Superseded(Box::new(h.clone()), h.token_at(rev)),
        None => Verdict::Free,
    }
}

/// Whether `agent` on `host` still holds the key, by its live value: its
/// token when it does, else what happened (the lock lapsed: nobody holds
/// it, or another host or agent took it).
pub(crate) fn still_held(
    host: &str,
    agent: &str,
    live: Option<(&Holder, u64)>,
) -> Result<u64, Verdict> {
    match live {
        Some((h, rev)) if h.host == host && h.agent == agent => Ok(h.token_at(rev)),
        Some((h, rev)) => Err(Verdict::Superseded(Box::new(h.clone()), h.token_at(rev))),
        None => Err(Verdict::Free),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(host: &str, agent: &str, token: Option<u64>) -> Holder {
        Holder {
            target: "shared/x.rs".into(),
            host: host.into(),
            agent: agent.into(),
            task: "task_0".into(),
            session: "20240115T100000Z-s".into(),
            acquired_at: chrono::DateTime::UNIX_EPOCH,
            token,
        }
    }

    #[test]
    fn a_token_is_current_through_renewals_and_stale_once_another_holds() {
        let first = holder("a", "agent-0", None);
        // The first value: its token is its own revision.
        assert!(matches!(verify(7, Some((&first, 7))), Verdict::Current(_)));
        // Renewed twice: the revision moved on, the token did not.
        let renewed = holder("a", "agent-0", Some(7));
        assert!(matches!(
            verify(7, Some((&renewed, 9))),
            Verdict::Current(_)
        ));
        // Lapsed, then taken on host b at revision 12.
        let other = holder("b", "agent-1", None);
        assert_eq!(
            verify(7, Some((&other, 12))),
            Verdict::Superseded(Box::new(other.clone()), 12)
        );
        assert_eq!(verify(7, None), Verdict::Free);
        // A token from the future is no holding's either.
        assert!(matches!(
            verify(13, Some((&renewed, 9))),
            Verdict::Superseded(_, 7)
        ));
    }

    #[test]
    fn by_its_own_clock_the_holder_stops_a_fifth_before_the_ttl() {
        let ttl = Duration::from_secs(5);
        assert_eq!(held_for(ttl), Duration::from_secs(4));
        assert_eq!(
            held_for(Duration::from_millis(500)),
            Duration::from_millis(300)
        );
        let stamps = Stamps {
            locks: vec![Stamp {
                agent: "agent-0".into(),
                target: "shared/x.rs".into(),
                sent_boot_ms: 10_000,
            }],
        };
        assert!(!may_have_lapsed(
            &stamps,
            "agent-0",
            "shared/x.rs",
            13_999,
            ttl
        ));
        assert!(may_have_lapsed(
            &stamps,
            "agent-0",
            "shared/x.rs",
            14_000,
            ttl
        ));
        // No stamp: never renewed as far as anyone knows.
        assert!(may_have_lapsed(
            &stamps,
            "agent-0",
            "shared/y.rs",
            10_001,
            ttl
        ));
        assert!(may_have_lapsed(
            &stamps,
            "agent-1",
            "shared/x.rs",
            10_001,
            ttl
        ));
    }

    #[test]
    fn a_lapsed_lock_is_not_held_by_its_former_holder() {
        let mine = holder("a", "agent-0", Some(7));
        assert_eq!(still_held("a", "agent-0", Some((&mine, 9))), Ok(7));
        let theirs = holder("b", "agent-1", None);
        assert_eq!(
            still_held("a", "agent-0", Some((&theirs, 12))),
            Err(Verdict::Superseded(Box::new(theirs.clone()), 12))
        );
        // Same agent name on another host: not this holding.
        let elsewhere = holder("b", "agent-0", None);
        assert!(still_held("a", "agent-0", Some((&elsewhere, 12))).is_err());
        assert_eq!(still_held("a", "agent-0", None), Err(Verdict::Free));
    }
}
