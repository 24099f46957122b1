//! The core: what squadd knows of each root and the decisions made from
//! it, free of I/O. No file, socket, process or clock is touched in this
//! folder: time enters as a [`Now`] the shell read, and what is to be done
//! leaves as [`Effect`]s the shell carries out, in the order returned.
//!
//! - this file: the root core, [`Root`]: every session of one root (each an
//!   incremental [`SessionCore`]), the persisted state and the policy;
//! - [`effect`]: [`Now`] and the [`Effect`]s;
//! - [`batch`]: a batch's stages in order ([`batch::Batch`], the door for
//!   what spans roots): the status files, the due timers, then notices,
//!   deliveries and runs;
//! - [`timer`]: what each timer does when it fires;
//! - [`escalations`]: unread messages whose time came (once each);
//! - [`replies`]: reply deadlines (which message is overdue, once);
//! - [`files`]: a file as read, gone or unreadable, and what its change
//!   calls for;
//! - [`scan`]: sessions scanned, listed, appeared or gone; inboxes listed;
//! - [`input`]: the single entry point, [`Core::step`], taking an [`Input`];
//! - [`mail`]: message delivery (offers, waiting, retries, unread; a
//!   reused message id refused);
//! - [`deliver`]: one delivery of the outbox (written here or not, what its
//!   write calls for, what is said once durable);
//! - [`edits`]: session edits (the text after an edit, what follows it);
//! - [`paths`]: a changed path (what it is, what it calls for), the
//!   watcher's failures;
//! - [`presence`]: watches failed or restored, a root taken over;
//! - [`notices`]: squadd's notices (standing facts, the files a fact calls
//!   for);
//! - [`runs`]: agent runs (time limits, exits, retries, re-adoption,
//!   dispatch) as inputs and effects;
//! - [`outputs`]: squadd's own outputs (status files under their locks,
//!   the shared context, the persisted state, retention, lock expiry) and
//!   the cluster's one-writer gate;
//! - [`wrapup`]: the wrap-up of a session that ended (its locks, its
//!   summary);
//! - [`upkeep`]: status re-reads under their locks, the memory merge and
//!   upkeep, what is owed at shutdown, the order of a batch's due timers.

pub(crate) mod batch;
pub(crate) mod deliver;
pub(crate) mod edits;
pub(crate) mod effect;
pub(crate) mod escalations;
pub(crate) mod files;
pub(crate) mod input;
pub(crate) mod mail;
pub(crate) mod notices;
pub(crate) mod outputs;
pub(crate) mod paths;
pub(crate) mod presence;
pub(crate) mod replies;
pub(crate) mod runs;
pub(crate) mod scan;
pub(crate) mod timer;
pub(crate) mod upkeep;
pub(crate) mod waiting;
pub(crate) mod wrapup;

pub(crate) use effect::{Effect, Now};
pub(crate) use input::{Core, Input};

use super::session::{Outcome, SessionCore};
use crate::derive::changes;
use crate::index::{IndexedFile, SessionIndex};
use crate::state::State;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

pub(crate) use super::session::invalid_summary;

/// Names one supervised root for the daemon's life (roots are added at
/// start-up and never removed: a root that goes away stays known, missing
/// or taken over).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct RootId(pub(super) u32);

impl RootId {
    #[cfg(test)]
    /// The id of the `n`th root added (tests and fixtures).
    pub(crate) fn nth(n: u32) -> RootId {
        RootId(n)
    }
}

impl std::fmt::Display for RootId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "root#{}", self.0)
    }
}

/// Whether a file was indexed as unreadable (a read error, not its content).
pub(crate) fn is_unreadable(f: &crate::index::IndexedFile) -> bool {
    f.fingerprint == 0
        && f.diagnostics
            .first()
            .is_some_and(|d| d.rule == squad_protocol::Rule::Unreadable)
}

/// Every session's part of the shared context by session name, with the
/// identity of the session core it was rendered from; shared with the
/// background writer, which assembles the file from it.
pub(crate) type ContextParts = Arc<BTreeMap<String, (u64, Arc<crate::outputs::ContextFragment>)>>;

/// One supervised root.
pub(crate) struct Root {
    /// The root directory (canonical).
    pub root: PathBuf,
    /// `<root>/.squad/sessions`.
    pub sessions_dir: PathBuf,
    /// Sessions by directory name. Boxed: a core is ~600 B inline and a
    /// map node has room for eleven whatever it holds (issue 23 item 2).
    pub sessions: BTreeMap<String, Box<SessionCore>>,
    /// Each session's part of the shared context, with the identity of the
    /// session core it was rendered from (shared with the background writer
    /// that assembles the file: see `daemon/context.rs`).
    pub fragments: ContextParts,
    /// Sessions loaded or changed since their parts were last brought up
    /// to date ([`Root::context_fragments`]); never one that is gone.
    context_stale: BTreeSet<String>,
    /// What squadd knows of each session's inboxes.
    pub mail: BTreeMap<String, super::routing::Mailbox>,
    /// What squadd remembers across restarts (task starts and overdue
    /// reports are kept by each session and copied in when saved).
    pub state: State,
    /// Whether `.squad/sessions` is missing.
    pub missing: bool,
    /// While missing: where `.squad/` went, when the shell found it (a
    /// directory of the root: another tool's import moved it).
    pub moved_to: Option<String>,
    /// While missing: the wait before the next look for it.
    pub check_after: std::time::Duration,
    /// Another squadd took this root over (its pid): `.squad/` was
    /// recreated and that squadd holds the new pid lock.
    pub taken_over: Option<String>,
    /// The policy in force.
    pub policy: squad_policies::Policy,
    /// Why the policy file was refused when last read (`None`: it was
    /// not): the policy in force is the previous one (or the defaults), a
    /// read of that same policy is news (the file was put back: squadd
    /// says it is in force again), and `status` reports it meanwhile.
    pub policy_refused: Option<String>,
    /// Lock records as last read.
    pub locks: Vec<crate::locks::Entry>,
    /// The next scheduled retention run.
    pub next_gc: Option<DateTime<Utc>>,
    /// The root's skills, as `status` reports them.
    pub skills: crate::skills::SkillsHealth,
    /// The root's team directory, as `status` reports it (docs/team.md).
    pub team: crate::team::TeamHealth,
    /// The agent runs: config.json in force, live runs, past records.
    pub runs: runs::Runs,
    /// The agents' waits: the last said for each agent with a presence
    /// record (once per wait), and those held back by the limit of one
    /// message per agent a minute (`waiting.rs`).
    pub waiting: waiting::Waits,
    /// Whether squadd may write the root's supervisor-owned outputs:
    /// always without `cluster:`; with it, while this host's lease is
    /// valid ([`outputs::leadership`]).
    pub leads: bool,
}

/// The next run of a retention schedule after `now`.
pub(crate) fn next_run(
    policy: &squad_policies::Policy,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    policy.retention.schedule().ok()?.after(&now).next()
}

impl Root {
    /// A root with no sessions yet (`now`: when retention is next due is
    /// counted from it).
    pub(crate) fn new(
        root: PathBuf,
        state: State,
        policy: squad_policies::Policy,
        now: DateTime<Utc>,
    ) -> Root {
        let next_gc = next_run(&policy, now);
        let mut state = state;
        let told = std::mem::take(&mut state.waits_told);
        Root {
            sessions_dir: root
                .join(squad_protocol::tree::SQUAD_DIR)
                .join(squad_protocol::tree::SESSIONS_DIR),
            root,
            sessions: BTreeMap::new(),
            mail: BTreeMap::new(),
            fragments: ContextParts::default(),
            context_stale: BTreeSet::new(),
            state,
            missing: false,
            moved_to: None,
            check_after: std::time::Duration::ZERO,
            taken_over: None,
            policy,
            policy_refused: None,
            locks: Vec::new(),
            next_gc,
            skills: Default::default(),
            team: Default::default(),
            runs: runs::Runs::default(),
            waiting: waiting::Waits::from_told(told),
            leads: true,
        }
    }

    /// The session's directory.
    pub(crate) fn session_dir(&self, name: &str) -> PathBuf {
        self.sessions_dir.join(name)
    }

    /// Loads a scanned session (replacing what was known of it). With
    /// `announce`, the returned outcome carries the changes from what was
    /// known before (nothing known: every ready task, the status); without,
    /// the load is a baseline (start-up).
    pub(crate) fn load_session(
        &mut self,
        index: SessionIndex,
        now: DateTime<Utc>,
        announce: bool,
    ) -> Outcome {
        let name = index.name.clone();
        // The persisted facts move into the core that holds them: from the
        // core this one replaces (the newest), else taken out of the state
        // loaded at start-up. Never a copy: the state keeps no part of a
        // loaded session ([`Root::state_to_save`] gathers them), which held
        // every task's start and overdue report twice (issue 23 item 2).
        let old = self.sessions.remove(&name);
        let before = old.as_deref().map(SessionCore::view);
        let (starts, reported, seen) = match old {
            Some(old) => (old.task_starts(), old.reported_overdue(), old.violations),
            None => (
                self.state.task_starts.remove(&name).unwrap_or_default(),
                self.state
                    .overdue_reported
                    .remove(&name)
                    .unwrap_or_default(),
                self.state.violations.remove(&name).unwrap_or_default(),
            ),
        };
        let (mut core, mut out) = SessionCore::load(index, starts, reported, now);
        // Violations are reported once ever: only those never recorded.
        let fresh: Vec<crate::events::EventKind> = if announce {
            core.violations
                .iter()
                .filter(|(task, _)| !seen.contains_key(*task))
                .map(
                    |(task, unmet)| crate::events::EventKind::DependencyViolation {
                        task_id: task.clone(),
                        unmet: unmet.clone(),
                    },
                )
                .collect()
        } else {
            Vec::new()
        };
        // What was recorded first stays (the prerequisites unmet then).
        core.violations.extend(seen);
        if announce {
            out.events = changes(before.as_ref(), &core.view());
            out.events.extend(fresh);
            out.ended = out
                .events
                .iter()
                .any(|e| matches!(e, crate::events::EventKind::SessionStatusChanged { .. }))
                .then(|| core.ended())
                .flatten();
        }
        self.context_stale.insert(name.clone());
        self.sessions.insert(name, Box::new(core));
        out
    }

    /// Puts a session core built by hand in (tests), with the bookkeeping
    /// [`Root::load_session`] keeps.
    #[cfg(test)]
    pub(crate) fn insert_session(&mut self, name: &str, core: SessionCore) {
        self.context_stale.insert(name.to_string());
        self.sessions.insert(name.to_string(), Box::new(core));
    }

    /// Applies a file's new contents (`None`: it is gone).
    pub(crate) fn apply_file(
        &mut self,
        name: &str,
        file: &str,
        loaded: Option<IndexedFile>,
        now: DateTime<Utc>,
    ) -> Option<Outcome> {
        let outcome = self.sessions.get_mut(name)?.apply(file, loaded, now);
        self.context_stale.insert(name.to_string());
        Some(outcome)
    }

    /// Re-derives tasks of a session whose deadline passed.
    pub(crate) fn tick(
        &mut self,
        name: &str,
        tasks: &[String],
        now: DateTime<Utc>,
    ) -> Option<Outcome> {
        let outcome = self.sessions.get_mut(name)?.tick(tasks, now);
        self.context_stale.insert(name.to_string());
        Some(outcome)
    }

    /// The invalid files of a session, for `file-invalid` events: (path,
    /// errors, first error, whether it was unreadable).
    pub(crate) fn invalid_files(&self, name: &str) -> Vec<(PathBuf, usize, String, bool)> {
        self.sessions
            .get(name)
            .map(|s| {
                let index = s.index();
                index
                    .files
                    .values()
                    .filter_map(|f| {
                        invalid_summary(f)
                            .map(|(n, first)| (f.path_in(&index.dir), n, first, is_unreadable(f)))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forgets a session that vanished (deleted, archived or moved away),
    /// with everything remembered of it: memory and `state.json` stay
    /// bounded by the sessions that exist. A session moved back is a new
    /// one (timeouts count from its current progress updates).
    pub(crate) fn remove_session(&mut self, name: &str) {
        self.mail.remove(name);
        // Its part goes now, not at the next context write: a host that
        // does not lead writes none, and the part holds every task's entry.
        // (Copied first only while the background writer holds the map.)
        if self.fragments.contains_key(name) {
            Arc::make_mut(&mut self.fragments).remove(name);
        }
        self.context_stale.remove(name);
        self.sessions.remove(name);
        self.state.forget(name);
    }

    /// Drops the persisted state of sessions that no longer exist (deleted
    /// or archived while squadd was down). Only after a scan that succeeded.
    pub(crate) fn prune_state(&mut self) {
        let sessions = &self.sessions;
        self.state.retain(|name| sessions.contains_key(name));
    }

    /// The persisted state: what the state holds of sessions not loaded,
    /// and each loaded session's part from its core (built for the save,
    /// never kept: see [`Root::load_session`]).
    pub(crate) fn state_to_save(&self) -> State {
        let mut state = self.state.clone();
        state.waits_told = self.waiting.told.clone();
        for (name, core) in &self.sessions {
            let starts = core.task_starts();
            if !starts.is_empty() {
                state.task_starts.insert(name.clone(), starts);
            }
            let reported = core.reported_overdue();
            if !reported.is_empty() {
                state.overdue_reported.insert(name.clone(), reported);
            }
            if !core.violations.is_empty() {
                state
                    .violations
                    .insert(name.clone(), core.violations.clone());
            }
        }
        state
    }

    /// The shared context's parts, brought up to date only for the tasks
    /// re-derived since the last time (a session loaded anew is rendered
    /// whole), of the sessions loaded, changed or removed since: the work
    /// follows the change, not the number of sessions (1,000 unchanged
    /// sessions looked at once per write took ~14 % of the daemon task's
    /// time under a stream of progress updates, docs/performance.md
    /// "Growth: the shared context off the path"). The parts the
    /// background writer still holds are copied before they change.
    pub(crate) fn context_fragments(&mut self) -> ContextParts {
        let names = std::mem::take(&mut self.context_stale);
        if !names.is_empty() {
            self.refresh_fragments(names);
        }
        // Sessions are loaded and removed by this type's methods alone,
        // which keep the parts' bookkeeping.
        debug_assert_eq!(self.fragments.len(), self.sessions.len());
        Arc::clone(&self.fragments)
    }

    /// Brings the parts of sessions `names` up to date (a part whose
    /// session is gone is dropped).
    fn refresh_fragments(&mut self, names: BTreeSet<String>) {
        let fragments = Arc::make_mut(&mut self.fragments);
        for name in names {
            let Some(core) = self.sessions.get_mut(&name) else {
                fragments.remove(&name);
                continue;
            };
            let id = core.identity();
            let entry = fragments.entry(name).or_default();
            let whole = entry.0 != id;
            if whole || core.context_changed() {
                entry.0 = id;
                core.refresh_context(Arc::make_mut(&mut entry.1), whole);
            }
        }
    }

    /// The escalated messages of a session.
    pub(crate) fn escalations(&self, name: &str) -> Vec<String> {
        self.state
            .escalated
            .get(name)
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_deliver;
#[cfg(test)]
mod tests_files;
#[cfg(test)]
mod tests_mail;
#[cfg(test)]
mod tests_outputs;
#[cfg(test)]
mod tests_paths;
#[cfg(test)]
mod tests_scan;
#[cfg(test)]
mod tests_upkeep;
#[cfg(test)]
mod tests_wrapup;
