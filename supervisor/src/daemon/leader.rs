//! One writer per project (docs/cluster.md, "Leader"): with `cluster:`,
//! squadd writes the supervisor-owned outputs (session-status.md, the
//! shared context, notices) and runs retention only while its host leads
//! the project. The lease lives in the root's cluster task
//! ([`crate::cluster::leader`]); this is the gate the writes ask and what
//! squadd does when the leadership changes.

use super::Supervisor;
use super::core::RootId;
use crate::cluster::leader::News;
use crate::events::EventKind;
use chrono::Utc;

impl Supervisor {
    /// Whether squadd may write root `i`'s supervisor-owned outputs now:
    /// always without `cluster:`; with it, only while this host's lease is
    /// valid (a follower, or a leader whose lease ran out unrenewed, does
    /// not write).
    pub(super) fn leads(&self, i: RootId) -> bool {
        self.roots
            .shell(i)
            .cluster
            .as_ref()
            .is_none_or(|c| c.leader_epoch().is_some())
    }

    /// This host became or stopped being the leader. Elected: the outputs
    /// a follower left unwritten are written now (every session's status,
    /// the shared context, the notices of every standing fact: a notice
    /// already written is never written twice, its id is the fact's hash).
    pub(super) fn leader_news(&mut self, i: RootId, news: News) {
        match news {
            News::Elected { epoch } => {
                self.log
                    .emit(i, None, None, EventKind::LeaderElected { epoch });
                if !self.leads(i) {
                    return;
                }
                let names: Vec<String> = self.roots.core(i).sessions.keys().cloned().collect();
                let wall = Utc::now();
                self.write_statuses(i, &names, wall);
                self.write_shared_context(i, false);
                for name in &names {
                    let input = super::core::Input::SessionLoaded {
                        session: name.clone(),
                    };
                    self.step(i, input, super::core::Now { wall });
                }
                self.flush_outbox(wall);
                // Runs of agents without a `host:` start here now.
                self.timers
                    .set_earlier(super::timers::Timer::Runs, std::time::Instant::now());
            }
            News::Lost { epoch, reason } => {
                self.log
                    .emit(i, None, None, EventKind::LeaderLost { epoch, reason });
            }
        }
    }
}
