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
//! - deliveries are made critical first, then by age ([`outbox_order`]);
//! - the whole batch, stage by stage, is [`Batch`]'s: rescans, settled
//!   paths, passed deadlines, [`settle`], the due timers, then the tail
//!   (notices, outbox, runs).

use super::RootId;
use super::timer::Timer;
use super::upkeep::{DueTimers, batch_timers, due_timers};
use super::{Effect, Input, Now};
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

/// One batch as the shell lives it, in the order this type gives: the
/// shell reports what it took in and carries out what each stage returns.
/// A batch spans every root, so this is the door for what no single
/// root's [`Core::step`](super::Core::step) decides:
///
/// 1. [`Batch::new`] with the timers due; the roots it rescans first
///    ([`Batch::rescans`]);
/// 2. the settled paths applied, each session they touched reported
///    ([`Batch::touched`]), the batch's own timers armed
///    ([`Batch::timers`]);
/// 3. the tasks whose deadline passed, as inputs to step
///    ([`Batch::tasks_due`]);
/// 4. the status files and the rest of [`settle`] ([`Batch::settle`]);
/// 5. the due timers, each root's as an [`Input::TimerFired`]
///    ([`Batch::fire`]);
/// 6. the tail: the notices, the outbox, then the runs ([`Batch::tail`]).
#[derive(Debug, Default)]
pub(crate) struct Batch {
    due: DueTimers,
    /// The sessions the batch touched, by root.
    touched: BTreeMap<RootId, BTreeSet<String>>,
    /// Those that saw something other than a removal.
    changed: BTreeSet<(RootId, String)>,
}

/// A due timer, for the shell to hand over ([`Batch::fire`]).
pub(crate) enum Fired<'a> {
    /// A root's timer: step its core with this input.
    Root(RootId, Box<Input<'a>>),
    /// A timer of the daemon's own (the watchdog, the STATUS= line, a
    /// trim, a rewatch, the runs' check): what it calls for.
    Daemon(Vec<Effect>),
}

impl Batch {
    /// A batch with the timers due now (`due`: as the queue gave them,
    /// earliest first).
    pub(crate) fn new(due: Vec<Timer>) -> Batch {
        Batch {
            due: due_timers(due),
            ..Batch::default()
        }
    }

    /// The roots to read again from scratch, before the settled paths.
    pub(crate) fn rescans(&self) -> Vec<RootId> {
        self.due.rescans.clone()
    }

    /// The shell took in a change of `session` (`removal`: only files
    /// removed).
    pub(crate) fn touched(&mut self, root: RootId, session: String, removal: bool) {
        if !removal {
            self.changed.insert((root, session.clone()));
        }
        self.touched.entry(root).or_default().insert(session);
    }

    /// The timers a batch of `paths` settled paths arms
    /// ([`batch_timers`]; `status_listened`: a service manager listens for
    /// STATUS= lines).
    pub(crate) fn timers(&self, paths: usize, status_listened: bool) -> Vec<Effect> {
        batch_timers(paths, self.due.worked, status_listened)
    }

    /// The tasks whose deadline passed, by root: re-derived without a
    /// file change, after the paths and before the batch's writes.
    pub(crate) fn tasks_due(&mut self) -> Vec<(RootId, Input<'static>)> {
        std::mem::take(&mut self.due.tasks)
            .into_iter()
            .map(|(root, session, tasks)| (root, Input::TasksDue { session, tasks }))
            .collect()
    }

    /// What to write once the batch's files are applied ([`settle`];
    /// `known`: whether squadd still has the session).
    pub(crate) fn settle(&self, known: impl Fn(RootId, &str) -> bool) -> Vec<Effect> {
        settle(&self.touched, &self.changed, known)
    }

    /// The due timers, in the order due, after the batch's writes.
    pub(crate) fn fire(&self, now: Now) -> Vec<Fired<'_>> {
        self.due
            .fire
            .iter()
            .map(|timer| match timer.root() {
                Some(root) => Fired::Root(
                    root,
                    Box::new(Input::TimerFired {
                        timer: timer.clone(),
                        changed: &self.changed,
                    }),
                ),
                None => Fired::Daemon(super::timer::fire(
                    timer.clone(),
                    None,
                    &BTreeSet::new(),
                    now,
                )),
            })
            .collect()
    }

    /// The end of every batch, off the status path (the status files of
    /// the batch are written by now): the notices the batch's writes and
    /// timers brought up, every delivery due (agents' messages and notices
    /// alike, critical first), then the agent runs.
    pub(crate) fn tail() -> Vec<Effect> {
        vec![
            Effect::SendNotices,
            Effect::FlushOutbox,
            Effect::SuperviseRuns,
        ]
    }
}
