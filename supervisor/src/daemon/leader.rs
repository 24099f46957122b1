//! One writer per project (docs/cluster.md, "Leader"): with `cluster:`,
//! squadd writes the supervisor-owned outputs (session-status.md, the
//! shared context, notices) and runs retention only while its host leads
//! the project. The lease lives in the root's cluster task
//! ([`crate::cluster::leader`]); the gate is the core's
//! (`core/outputs.rs`): this file only hands it the lease as it is and the
//! task's news.

use super::EventLoop;
use super::core::{Input, Now, RootId};
use crate::cluster::leader::News;
use chrono::{DateTime, Utc};

impl EventLoop {
    /// The lease of root `i` as it is now: its epoch while it is valid
    /// (`None` also without `cluster:`, which never asks).
    fn lease(&self, i: RootId) -> Option<u64> {
        self.roots
            .shell(i)
            .cluster
            .as_ref()
            .and_then(|c| c.leader_epoch())
    }

    /// The cluster task said this host became or stopped being the leader.
    pub(super) fn leader_news(&mut self, i: RootId, news: News) {
        let epoch = self.lease(i);
        self.fence_outputs(i, epoch);
        let input = Input::Leadership {
            epoch,
            news: Some(news),
        };
        self.step(i, input, Now { wall: Utc::now() });
    }

    /// Before a batch: each cluster root's lease handed to the core (a
    /// lease that ran out unrenewed, a leader frozen and woken, says so
    /// here before anything is written).
    pub(super) fn sync_leadership(&mut self, wall: DateTime<Utc>) {
        for i in self.roots.ids() {
            if self.roots.shell(i).cluster.is_none() {
                continue;
            }
            let epoch = self.lease(i);
            self.fence_outputs(i, epoch);
            self.step(i, Input::Leadership { epoch, news: None }, Now { wall });
        }
    }

    /// The background writer fenced while this host does not lead root
    /// `i`'s project (and opened again when it does): a shared context
    /// write under way is waited for and reported before the core hears of
    /// a loss, so every write of a leader is told before its loss.
    fn fence_outputs(&mut self, i: RootId, epoch: Option<u64>) {
        let leading = self.roots.core(i).leads;
        self.writer.fence_context(i, epoch.is_none());
        if leading && epoch.is_none() {
            self.report_written_behind();
        }
    }
}
