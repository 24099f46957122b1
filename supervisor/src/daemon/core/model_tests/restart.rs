//! squadd restarted in the model: the core of a root dropped after a clean
//! stop and rebuilt the way the shell starts a root (`open_root`,
//! `initial_scan`, `adopt_runs` in `daemon/mod.rs`, `scan.rs`,
//! `processes.rs`): state.json read back as last written, the policy and
//! config.json read, every session scanned, then the run records read,
//! each with what is seen of its process (alive: re-adopted; gone: lost).

use super::world::{Facts, World};
use super::*;
use crate::daemon::core::runs::FoundRun;

impl World {
    /// squadd stops (SIGTERM; with `kill`, kill -9) and starts again on
    /// root `r`. Its run processes live on (each in its own process
    /// group); its timers and everything it held in memory go.
    pub(super) fn restart(&mut self, r: usize, kill: bool) {
        let rid = id(r);
        if kill {
            // What the write-behind still held is lost: the persisted facts
            // are state.json's, and what the files say again at start
            // (the oracle adds those after the step, `keep_facts`).
            self.snaps[r].state = read_state(self.snaps[r].state_file.as_deref());
            // A report state.json does not hold may come again, once.
            let kept = self.snaps[r].state.clone();
            self.reported
                .retain(|(root, session, fact)| *root != rid || fact.kept(&kept, session));
        } else if self.timers.contains_key(&Timer::SaveState(rid)) {
            // The stop: what the write-behind still holds is saved
            // (`daemon/mod.rs`, after the loop).
            self.step(rid, Input::SaveStateDue { present: true });
        }
        self.timers.retain(|t, _| t.root() != Some(rid));
        // A process that ended after the last look was never seen ended:
        // the new squadd finds its record `running` and the process gone.
        for p in self.procs.values_mut().filter(|p| p.root == rid) {
            let running = self.snaps[r]
                .records
                .get(&p.run)
                .is_some_and(super::by_hand::in_progress);
            if running && p.ended.is_some() {
                p.gone_unseen = true;
            }
        }
        // The start: `open_root` (state.json as last written, read as
        // `State::load` reads it; the policy; config.json).
        let snap = &self.snaps[r];
        let state = read_state(snap.state_file.as_deref());
        let mut core = Root::new(root_dir(r), state, snap.policy.clone(), self.now);
        core.runs.config = snap.config.clone();
        self.cores[r] = core;
        // `initial_scan`: every session read, a baseline.
        let sessions: Vec<String> = self.snaps[r].files.keys().cloned().collect();
        let mut files = 0;
        for s in &sessions {
            let index = Box::new(self.scan(r, s));
            files += index.files.len();
            let why = crate::daemon::core::scan::Scanned::StartUp;
            self.step(rid, Input::SessionScanned { index, why });
        }
        let input = Input::StartScanned {
            files,
            complete: true,
        };
        self.step(rid, input);
        // `adopt_runs`: each record with what is seen of its process.
        let records = self.snaps[r]
            .records
            .values()
            .map(|rec| {
                let alive = super::by_hand::in_progress(rec)
                    && self
                        .procs
                        .get(&rec.pid)
                        .is_some_and(|p| p.root == rid && p.ended.is_none());
                FoundRun {
                    session_dir: self.cores[r].session_dir(&rec.session),
                    rec: rec.clone(),
                    found: None,
                    alive,
                }
            })
            .collect();
        let now = self.wall();
        let facts = Facts(&self.snaps[r]);
        let effects = Core::new(rid, &mut self.cores[r]).step(
            Input::RunsFound {
                records,
                facts: &facts,
            },
            now,
        );
        self.perform(effects);
    }
}

/// state.json as `State::load` reads it: missing or unreadable, empty.
fn read_state(bytes: Option<&[u8]>) -> State {
    bytes
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default()
}

/// A fact squadd reports once ever (its record persisted in state.json):
/// an overdue task, a prerequisite violation, an escalation, an overdue
/// reply.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Reported {
    Overdue(String),
    Violation(String),
    Escalated(String),
    ReplyOverdue(String),
}

impl Reported {
    /// The fact an event reports, if it is one of those.
    pub(super) fn of(kind: &EventKind) -> Option<Reported> {
        Some(match kind {
            EventKind::TaskOverdue { task_id, .. } => Reported::Overdue(task_id.clone()),
            EventKind::DependencyViolation { task_id, .. } => Reported::Violation(task_id.clone()),
            EventKind::MessageEscalated { message_id, .. } => {
                Reported::Escalated(message_id.clone())
            }
            EventKind::ResponseOverdue { message_id, .. } => {
                Reported::ReplyOverdue(message_id.clone())
            }
            _ => return None,
        })
    }

    /// Whether the persisted state `s` records it for `session`.
    fn kept(&self, s: &State, session: &str) -> bool {
        match self {
            Reported::Overdue(t) => s
                .overdue_reported
                .get(session)
                .is_some_and(|v| v.contains(t)),
            Reported::Violation(t) => s.violations.get(session).is_some_and(|v| v.contains_key(t)),
            Reported::Escalated(m) => s.escalated.get(session).is_some_and(|v| v.contains(m)),
            Reported::ReplyOverdue(m) => s
                .replies_overdue
                .get(session)
                .is_some_and(|v| v.contains(m)),
        }
    }
}

impl World {
    /// An event told: a fact reported once ever is reported once, across
    /// clean restarts too (after kill -9, once more at most if state.json
    /// had not recorded it yet).
    pub(super) fn note_report(&mut self, root: RootId, session: &str, kind: &EventKind) {
        let Some(fact) = Reported::of(kind) else {
            return;
        };
        let key = (root, session.to_string(), fact);
        assert!(self.reported.insert(key.clone()), "{key:?} reported twice");
    }
}
