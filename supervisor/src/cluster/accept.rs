//! Which replicated supervisor outputs a host takes (docs/cluster.md,
//! "Leader's outputs"): only the elected leader's, checked against the
//! lease this host last read, never against what the value says of itself.
//!
//! A supervisor output (`session-status.md`, squadd's notices) names the
//! host that published it and the epoch it was published with. Any NATS
//! client with the project's credentials can write the files bucket, so
//! the value is a claim: it is taken only when it names the lease's
//! holder and the lease's epoch (the revision of the election). An epoch
//! above the lease's is no leader's yet (held until the lease says so,
//! then refused), one over [`MAX_EPOCH`] is nobody's ever, one below it a
//! former leader's (its successor writes the outputs again).

/// The largest epoch any output may carry: epochs are revisions of the
/// leader bucket (a stream sequence), which no project reaches; a value
/// above it (e.g. `2^63`) is forged and would fence every real leader's
/// outputs for good.
pub(crate) const MAX_EPOCH: u64 = 1 << 53;

/// Why a supervisor output from another host is not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotTheLeaders {
    /// No epoch at all: no leader publishes without one.
    #[error("a supervisor output without the leader's epoch")]
    NoEpoch,
    /// Beyond any revision the leader bucket can reach.
    #[error("epoch {0} is beyond any lease (at most {MAX_EPOCH})")]
    OutOfBounds(u64),
    /// Another host than the lease's holder.
    #[error("published by {origin}, but the leader is {leader} (epoch {epoch})")]
    NotLeader {
        origin: String,
        leader: String,
        epoch: u64,
    },
    /// The leader's host, but not the lease's epoch.
    #[error("epoch {given} is not the lease's ({lease}): {}", if .given > .lease { "no election gave it" } else { "a former leadership's" })]
    WrongEpoch { given: u64, lease: u64 },
    /// Not decided in time: the lease never came to agree.
    #[error("no lease named {origin} with epoch {given} in time")]
    Unconfirmed { origin: String, given: u64 },
}

/// What to do with a supervisor output arriving from another host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The lease's holder with the lease's epoch: taken.
    Take,
    /// Not decidable yet: no lease read here, or one older than the value
    /// (this host has not seen the election that made its epoch). Held and
    /// decided again as the lease is read.
    Hold,
    /// Refused: reported, never written.
    Refuse(NotTheLeaders),
}

/// Decides a supervisor output published by `origin` with `epoch`, given
/// the lease as last read here (`leader`: holder and epoch; `None` when
/// not read yet) and the epoch this host leads with while its own lease is
/// valid (`leading`): then no other election can exist, so an epoch above
/// it is forged, not merely unseen.
pub(crate) fn owned_output(
    origin: &str,
    epoch: Option<u64>,
    leader: Option<(&str, u64)>,
    leading: Option<u64>,
) -> Verdict {
    let Some(given) = epoch else {
        return Verdict::Refuse(NotTheLeaders::NoEpoch);
    };
    if given > MAX_EPOCH {
        return Verdict::Refuse(NotTheLeaders::OutOfBounds(given));
    }
    if let Some(ours) = leading
        && given > ours
    {
        return Verdict::Refuse(NotTheLeaders::WrongEpoch { given, lease: ours });
    }
    let Some((holder, lease)) = leader else {
        return Verdict::Hold;
    };
    if given > lease {
        // An election this host has not read yet, or a forgery: the lease
        // decides which once it moves (or the hold runs out).
        return Verdict::Hold;
    }
    if origin != holder {
        return Verdict::Refuse(NotTheLeaders::NotLeader {
            origin: origin.to_string(),
            leader: holder.to_string(),
            epoch: lease,
        });
    }
    if given != lease {
        return Verdict::Refuse(NotTheLeaders::WrongEpoch { given, lease });
    }
    Verdict::Take
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lease_holder_with_the_lease_epoch_is_taken() {
        let lease = Some(("a", 7));
        assert_eq!(owned_output("a", Some(7), lease, None), Verdict::Take);
        assert!(matches!(
            owned_output("b", Some(7), lease, None),
            Verdict::Refuse(NotTheLeaders::NotLeader { .. })
        ));
        assert!(matches!(
            owned_output("a", Some(6), lease, None),
            Verdict::Refuse(NotTheLeaders::WrongEpoch { given: 6, lease: 7 })
        ));
        assert_eq!(owned_output("b", Some(8), lease, None), Verdict::Hold);
        // This host leads with 7 on a valid lease: 8 is nobody's.
        assert!(matches!(
            owned_output("b", Some(8), Some(("me", 7)), Some(7)),
            Verdict::Refuse(NotTheLeaders::WrongEpoch { given: 8, lease: 7 })
        ));
        assert_eq!(owned_output("a", Some(7), None, None), Verdict::Hold);
        assert_eq!(
            owned_output("a", None, lease, None),
            Verdict::Refuse(NotTheLeaders::NoEpoch)
        );
        assert_eq!(
            owned_output("a", Some(1 << 63), Some(("a", 1 << 63)), None),
            Verdict::Refuse(NotTheLeaders::OutOfBounds(1 << 63))
        );
    }
}

#[cfg(test)]
mod acceptance_tests {
    use super::*;
    use crate::cluster::replicate::{Meta, decode, encode, file_key};
    use proptest::prelude::*;

    fn epoch() -> impl Strategy<Value = Option<u64>> {
        prop_oneof![
            Just(None),
            (0u64..20).prop_map(Some),
            any::<u64>().prop_map(Some),
            Just(Some(u64::MAX)),
            Just(Some(1 << 63)),
        ]
    }

    proptest! {
        /// No replicated value makes a host take a supervisor output from
        /// anyone but the lease's holder with the lease's epoch, whatever
        /// the value claims (origin, epoch) and whatever the lease.
        #[test]
        fn only_the_lease_holder_is_ever_taken(
            origin in "[abc]",
            given in epoch(),
            holder in "[abc]",
            lease in prop_oneof![(0u64..20), any::<u64>()],
            known in any::<bool>(),
            leading in proptest::option::of(0u64..20),
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let meta = Meta {
                origin: origin.clone(),
                session: "20240115T100000Z-s".into(),
                file: "session-status.md".into(),
                epoch: given,
            };
            let key = file_key(&meta.session, &meta.file);
            let value = encode(&meta, &body).unwrap();
            let (read, _) = decode(&key, &value).unwrap();
            let leader = known.then_some((holder.as_str(), lease));
            let v = owned_output(&read.origin, read.epoch, leader, leading);
            // While this host leads, no epoch above its own is anybody's.
            if let (Some(ours), Some(g)) = (leading, given)
                && g > ours
            {
                prop_assert!(v != Verdict::Take && v != Verdict::Hold);
            }
            if v == Verdict::Take {
                prop_assert!(known);
                prop_assert_eq!(&origin, &holder);
                prop_assert_eq!(given, Some(lease));
                prop_assert!(lease <= MAX_EPOCH);
            }
        }

        /// Garbage in the files bucket is never a leader's output.
        #[test]
        fn garbage_is_never_taken(value in proptest::collection::vec(any::<u8>(), 0..200)) {
            let key = file_key("20240115T100000Z-s", "session-status.md");
            if let Ok((meta, _)) = decode(&key, &value) {
                let v = owned_output(&meta.origin, meta.epoch, Some(("a", 7)), None);
                prop_assert!(v != Verdict::Take || (meta.origin == "a" && meta.epoch == Some(7)));
            }
        }
    }
}
