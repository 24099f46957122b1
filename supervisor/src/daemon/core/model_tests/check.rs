//! The comparison after every step: the core against the oracle.

use super::oracle::*;
use super::world::World;
use super::*;

impl World {
    /// The oracle's persisted facts as of the end of a batch, every root:
    /// a fact that held when the core had taken a batch in is the core's
    /// to keep, though no comparison sees that moment. Found by a soak: a
    /// rename (a removal batch, then the same bytes under another name)
    /// left a task with a 1-minute timeout as its only plan in between,
    /// overdue and reported, and overdue neither before nor after
    /// (`a_task_overdue_only_between_the_two_batches_of_a_rename`).
    pub(super) fn keep_facts_of_batch(&mut self) {
        for r in 0..ROOTS {
            let indexes = self.snaps[r].indexes();
            keep_facts(&mut self.snaps[r], &indexes, self.now);
        }
    }

    /// After a step: every root's core equals a from-scratch derivation
    /// of its snapshot, and the armed timers are the ones the snapshot
    /// calls for.
    pub(super) fn check(&mut self) {
        self.checks += 1;
        // What was written is what was announced, one event per fresh
        // inbox entry, in the order written.
        assert_eq!(
            self.delivered_events, self.written_entries,
            "message-delivered events against the inbox entries written"
        );
        for r in 0..ROOTS {
            let indexes = self.snaps[r].indexes();
            keep_facts(&mut self.snaps[r], &indexes, self.now);
            let want = Known::from_indexes(&self.snaps[r], &indexes, self.now);
            let got = Known::of(&mut self.cores[r]);
            assert_eq!(got.state, want.state, "root {r}: persisted facts");
            for (name, w) in &want.sessions {
                let g = &got.sessions[name];
                assert_eq!(g.files, w.files, "root {r} {name}: files");
                assert_eq!(g.diagnostics, w.diagnostics, "root {r} {name}: diagnostics");
                assert_eq!(g.view, w.view, "root {r} {name}: view");
                assert_eq!(g.inbox, w.inbox, "root {r} {name}: mailbox");
                assert_eq!(g.replies, w.replies, "root {r} {name}: replies");
                assert_eq!(g.pending, w.pending, "root {r} {name}: pending deliveries");
                // Every inbox entry is a delivery the oracle's rule asked
                // for (now or before): none to a sender, another session's
                // recipient or under another name.
                let expected = self.snaps[r].expected.get(name);
                for slot in w.inbox.keys() {
                    assert!(
                        expected.is_some_and(|e| e.contains(slot)),
                        "root {r} {name}: inbox entry {slot:?} no file asked for"
                    );
                }
            }
            assert_eq!(got.sessions.len(), want.sessions.len());
            self.check_timers(r, &want, &indexes);
            self.check_runs(r, &want);
            self.check_statuses(r, &want);
            if self.checks.is_multiple_of(2) {
                self.check_context(r, &want, &indexes);
            }
        }
    }

    /// The shared context's parts as a write would take them (brought up
    /// to date for the sessions changed since the last write only) equal
    /// each session's part rendered from scratch.
    fn check_context(&mut self, r: usize, want: &Known, indexes: &BTreeMap<String, SessionIndex>) {
        let got = self.cores[r].context_fragments();
        let names: Vec<&String> = got.keys().collect();
        let expected: Vec<&String> = want.sessions.keys().collect();
        assert_eq!(names, expected, "root {r}: sessions in the shared context");
        for (name, w) in &want.sessions {
            let scratch = crate::outputs::context_fragment(&indexes[name], &w.view);
            assert!(
                *got[name].1 == scratch,
                "root {r} {name}: shared context part"
            );
        }
    }

    pub(super) fn check_timers(
        &self,
        r: usize,
        want: &Known,
        indexes: &BTreeMap<String, SessionIndex>,
    ) {
        let rid = id(r);
        let snap = &self.snaps[r];
        for (name, w) in &want.sessions {
            // Task deadlines: exactly the tasks still to finish in time.
            let expected: BTreeMap<String, DateTime<Utc>> = w
                .view
                .tasks
                .iter()
                .filter(|t| t.state != TaskStatus::Completed && !t.overdue)
                .filter_map(|t| Some((t.task_id.clone(), t.due_at?)))
                .collect();
            let armed: BTreeMap<String, DateTime<Utc>> = self
                .timers
                .iter()
                .filter_map(|(t, at)| match t {
                    Timer::TaskDue {
                        root,
                        session,
                        task,
                    } if *root == rid && session == name => Some((task.clone(), *at)),
                    _ => None,
                })
                .collect();
            assert_eq!(armed, expected, "root {r} {name}: task deadline timers");
            // Each pending delivery has its timer.
            for (to, n) in &w.pending {
                let t = Timer::Delivery {
                    root: rid,
                    session: name.clone(),
                    to: to.clone(),
                    name: n.clone(),
                };
                assert!(
                    self.timers.contains_key(&t),
                    "root {r} {name}: no timer for pending {to}/{n}"
                );
            }
            // The escalation timer fires no later than the next unread
            // message not yet escalated is due.
            let escalated = want.state.escalated.get(name);
            // A moot notice of squadd's is never escalated: no timer for it.
            let live = crate::daemon::core::notices::live_notice_ids(
                name,
                &indexes[name],
                &w.view.tasks,
                snap.policy.notices.lead.as_deref(),
            );
            let next = w
                .inbox
                .iter()
                .filter_map(|((_, n), at)| {
                    let (mid, due) = rules::escalation_due(&snap.policy, n, (*at)?)?;
                    (!escalated.is_some_and(|e| e.contains(&mid))
                        && !crate::daemon::core::notices::is_moot(&mid, &live))
                    .then_some(due)
                })
                .min();
            if let Some(next) = next {
                let t = Timer::Escalation {
                    root: rid,
                    session: name.clone(),
                };
                let armed = self.timers.get(&t);
                assert!(
                    armed.is_some_and(|a| *a <= next),
                    "root {r} {name}: escalation due {next} but timer {armed:?}"
                );
            }
            // The reply timer likewise, for questions still to answer.
            let index = &indexes[name];
            let reported = want.state.replies_overdue.get(name);
            let next = kept_messages(&snap.copies, name, index)
                .into_iter()
                .filter(|m| !w.replies.contains_key(&m.message_id))
                .filter(|m| !reported.is_some_and(|s| s.contains(&m.message_id)))
                .filter_map(rules::reply_due)
                .min();
            if let Some(next) = next {
                let t = Timer::ReplyDue {
                    root: rid,
                    session: name.clone(),
                };
                let armed = self.timers.get(&t);
                assert!(
                    armed.is_some_and(|a| *a <= next),
                    "root {r} {name}: reply due {next} but timer {armed:?}"
                );
            }
        }
    }
}
