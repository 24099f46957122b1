//! Every supervised root in one place, named by a [`RootId`]: what squadd
//! knows and decides of a root (its core, [`Root`]: sessions, mailboxes,
//! persisted state, policy, lock records, skills and team as read, whether
//! it is present) beside what squadd holds open for it (its [`Shell`]: the
//! pid lock, the control socket, the runs' child processes).
//!
//! A root is never addressed by a position in parallel lists: each part of
//! a root lives in its one slot, reached through its id.

use super::core::Root;
use super::pidfile::PidLock;
use super::server::Bound;

pub(crate) use super::core::RootId;

/// What squadd holds open for one root: effects live here, decisions in
/// the [`Root`] core.
pub(crate) struct Shell {
    /// The root's pid lock (`None` once another squadd took the root over).
    pub pid_lock: Option<PidLock>,
    /// The control socket, once bound.
    pub socket: Option<Bound>,
    /// The agent runs' processes (the core holds their records).
    pub procs: Box<dyn crate::runners::Processes + Send>,
    /// The answer to the `squadctl run|stop` being carried out.
    pub run_reply: Option<RunAnswer>,
    /// The cluster task (docs/cluster.md), when the policy has `cluster:`.
    pub cluster: Option<crate::cluster::daemon::Handle>,
    /// The replication task (docs/cluster.md, "Replication"), with
    /// `cluster:`.
    pub replica: Option<crate::cluster::replicate::Handle>,
    /// The removal task (docs/cluster.md, "Retention across hosts"), with
    /// `cluster:`.
    pub retire: Option<crate::cluster::retire::Handle>,
    /// The shared context's replication (docs/cluster.md, "Replication of
    /// the shared context"), with `cluster:`.
    pub context: Option<crate::cluster::context::Handle>,
    /// Each SKILL.md's last check, so a skill edit re-reads that skill only.
    pub skills: crate::skills::SkillCache,
}

/// The core's answer to a `runs` request of the control socket.
pub(crate) enum RunAnswer {
    /// `run|stop`: (session, pid) or why not ([`super::core::Effect::RunReply`]).
    Reply(Result<(String, u32), super::core::runs::RunError>),
    /// `list`: the live runs ([`super::core::Effect::RunsListed`]).
    Listed(Vec<super::core::runs::RunView>),
}

impl Default for Shell {
    fn default() -> Self {
        Shell {
            pid_lock: None,
            socket: None,
            procs: Box::new(crate::runners::OsProcesses::default()),
            run_reply: None,
            cluster: None,
            replica: None,
            retire: None,
            context: None,
            skills: Default::default(),
        }
    }
}

impl Shell {
    /// The leader's outputs call site (docs/cluster.md, "Leader"): a
    /// supervisor-owned output of `session` (session-status.md, a notice)
    /// was just written here; with `cluster:` and while this host leads, it
    /// is published to the other checkouts with the epoch it was written
    /// under. Nothing on a follower or without `cluster:`.
    pub(crate) fn publish_owned(&self, session: &str, file: &str) {
        if let (Some(c), Some(r)) = (&self.cluster, &self.replica)
            && let Some(epoch) = c.leader_epoch()
        {
            r.publish_owned(session, file, epoch);
        }
    }

    /// The leader's retention call site (docs/cluster.md, "Retention
    /// across hosts"): the sessions a retention run removed here are
    /// published to the other checkouts with this host's epoch. Nothing on
    /// a follower or without `cluster:`.
    pub(crate) fn publish_retired(&self, run: &super::core::outputs::RetentionRun) {
        if let (Some(c), Some(r)) = (&self.cluster, &self.retire)
            && let Some(epoch) = c.leader_epoch()
            && let super::core::outputs::RetentionRun::Ran(caused) = run
        {
            r.retention_ran(caused, epoch);
        }
    }

    /// The leader's shared context was just written here: with `cluster:`
    /// and while this host leads, it is put into the project's context
    /// store with the epoch it was written under (docs/cluster.md).
    /// Nothing on a follower or without `cluster:`.
    pub(crate) fn publish_context(&self) {
        if let (Some(c), Some(x)) = (&self.cluster, &self.context)
            && let Some(epoch) = c.leader_epoch()
        {
            x.publish(epoch);
        }
    }
}

/// One root: its core and its shell.
pub(crate) struct Slot {
    /// What squadd knows and decides of the root.
    pub core: Root,
    /// What squadd holds open for it.
    pub shell: Shell,
}

/// Every supervised root.
#[derive(Default)]
pub(crate) struct Roots {
    slots: Vec<Slot>,
}

impl Roots {
    /// Adds a root; returns its id.
    pub(crate) fn add(&mut self, core: Root, shell: Shell) -> RootId {
        let id = RootId(u32::try_from(self.slots.len()).unwrap_or(u32::MAX));
        self.slots.push(Slot { core, shell });
        id
    }

    /// How many roots there are.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The ids of every root, in the order they were added. The iterator
    /// does not borrow the roots, so each may be changed in the loop.
    pub(crate) fn ids(&self) -> impl Iterator<Item = RootId> + use<> {
        (0..u32::try_from(self.slots.len()).unwrap_or(u32::MAX)).map(RootId)
    }

    /// The slot of `id`. Ids come only from [`Roots::add`], and roots are
    /// never removed: an unknown id is a bug in squadd, not in its input.
    fn slot(&self, id: RootId) -> &Slot {
        &self.slots[id.0 as usize]
    }

    fn slot_mut(&mut self, id: RootId) -> &mut Slot {
        &mut self.slots[id.0 as usize]
    }

    /// A root's core.
    pub(crate) fn core(&self, id: RootId) -> &Root {
        &self.slot(id).core
    }

    /// A root's core, to change.
    pub(crate) fn core_mut(&mut self, id: RootId) -> &mut Root {
        &mut self.slot_mut(id).core
    }

    /// A root's shell.
    pub(crate) fn shell(&self, id: RootId) -> &Shell {
        &self.slot(id).shell
    }

    /// A root's shell, to change.
    pub(crate) fn shell_mut(&mut self, id: RootId) -> &mut Shell {
        &mut self.slot_mut(id).shell
    }

    /// A root's core and shell, both to change.
    pub(crate) fn both_mut(&mut self, id: RootId) -> (&mut Root, &mut Shell) {
        let slot = self.slot_mut(id);
        (&mut slot.core, &mut slot.shell)
    }

    /// Every root's core with its id.
    pub(crate) fn cores(&self) -> impl Iterator<Item = (RootId, &Root)> {
        self.ids().zip(self.slots.iter().map(|s| &s.core))
    }

    /// The innermost root containing `path`: a root may lie inside another
    /// (`--root /p --root /p/sub`), and the inner one's files are its own.
    pub(crate) fn of(&self, path: &std::path::Path) -> Option<RootId> {
        self.cores()
            .filter(|(_, r)| path.starts_with(&r.root))
            .max_by_key(|(_, r)| r.root.components().count())
            .map(|(id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(path: &str) -> Root {
        Root::new(
            path.into(),
            crate::state::State::default(),
            squad_policies::Policy::defaults(),
            chrono::DateTime::UNIX_EPOCH,
        )
    }

    #[test]
    fn a_path_belongs_to_the_innermost_root() {
        let mut roots = Roots::default();
        let outer = roots.add(root("/p"), Shell::default());
        let inner = roots.add(root("/p/sub"), Shell::default());
        assert_ne!(outer, inner);
        assert_eq!(roots.of("/p/sub/x".as_ref()), Some(inner));
        assert_eq!(roots.of("/p/x".as_ref()), Some(outer));
        assert_eq!(roots.of("/q".as_ref()), None);
        assert_eq!(roots.ids().collect::<Vec<_>>(), vec![outer, inner]);
    }
}
