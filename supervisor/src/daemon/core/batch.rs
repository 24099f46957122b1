//! The order in which a batch's outputs are carried out. A batch is what
//! squadd took in at one wake-up (settled paths, passed task deadlines,
//! rescans); once its files are applied, [`settle`] says what to write and
//! in which order. The order is this module's contract, asserted by its
//! tests:
//!
//! - the status files first, squadd's notices and every delivery last
//!   (issue 23): a change's session-status.md never waits on the notices
//!   it implies. The notices of the batch are written as one group commit
//!   (one fsync per directory) and delivered with the batch's other
//!   deliveries, in one outbox flush (one fsync per inbox);
//! - a session that only lost files gets neither a status write nor a
//!   delivery: its status waits [`REMOVAL_DELAY`] (each removal restarts
//!   the wait), since writing into a directory `rm -rf` is emptying would
//!   make the removal fail;
//! - deliveries are made critical first, then by age ([`outbox_order`]).

use super::Effect;
use super::RootId;
use super::timer::Timer;
use crate::daemon::routing::Delivery;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long the shared context may lag a burst of changes. It spans every
/// session of a root, so it is rendered once per burst rather than once per
/// file (the status file of the session, the latency-critical output, is
/// never delayed).
pub(crate) const CONTEXT_DELAY: Duration = Duration::from_millis(20);

/// How long a session's status file waits after files were only removed
/// from it (each removal restarts the wait). Writing into a directory that
/// `rm -rf` is emptying would make the removal fail (ENOTEMPTY); a session
/// that is being deleted is gone by then. A slower removal (a loaded
/// machine) is still safe: a status file that was removed is not recreated
/// after removals alone, only at the session's next other change.
pub(crate) const REMOVAL_DELAY: Duration = Duration::from_millis(100);

/// What a batch writes, in order, once its files are applied. `touched`:
/// the sessions the batch touched, by root; `changed`: those that saw
/// something other than a removal; `known`: whether squadd still has the
/// session (one removed in the batch is skipped).
pub(crate) fn settle(
    touched: &BTreeMap<RootId, BTreeSet<String>>,
    changed: &BTreeSet<(RootId, String)>,
    known: impl Fn(RootId, &str) -> bool,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for (&root, names) in touched {
        let mut derived = Vec::new();
        for name in names.iter().filter(|n| known(root, n)) {
            let timer = Timer::Status {
                root,
                session: name.clone(),
            };
            if changed.contains(&(root, name.clone())) {
                effects.push(Effect::CancelTimer(timer));
                derived.push(name.clone());
            } else {
                effects.push(Effect::SetTimer {
                    timer,
                    after: REMOVAL_DELAY,
                });
            }
        }
        if !derived.is_empty() {
            effects.push(Effect::WriteStatuses {
                root,
                sessions: derived.clone(),
            });
        }
        // Sessions only losing files get no deliveries either: recreating
        // an inbox in a session being deleted would make `rm -rf` fail.
        for session in derived {
            effects.push(Effect::RecheckWaiting { root, session });
        }
        if !names.is_empty() {
            effects.push(Effect::SetTimerEarlier {
                timer: Timer::Context(root),
                after: CONTEXT_DELAY,
            });
        }
    }
    // Off the status path: the notices, then every delivery of the batch
    // (agents' messages and notices alike, critical first).
    effects.push(Effect::SendNotices);
    effects.push(Effect::FlushOutbox);
    effects
}

/// Puts the deliveries due now in the order they are made: critical first,
/// then by age, then by name.
pub(crate) fn outbox_order(outbox: &mut [(RootId, Delivery)]) {
    outbox.sort_by(|(_, a), (_, b)| {
        (a.priority, a.created, &a.name).cmp(&(b.priority, b.created, &b.name))
    });
}
