//! The incremental session core: one session's files, secondary indexes and
//! derived tasks, updated by [`SessionCore::apply`] in work proportional to
//! the change. Sans I/O: no files, no clock, no tokio; what a change causes
//! comes back as an [`Outcome`] for the wiring to carry out.
//!
//! It gives the same answers as a from-scratch [`derive_session`] of the same
//! files (a property test checks this after every step of random changes):
//!
//! - plans by task (the first by file name counts), progress files by
//!   (task, agent) (the latest `updated_at` counts), prerequisite edges from
//!   `requires` and `blocks` with their reverse (dependents);
//! - a changed file re-derives only the tasks it names and their direct
//!   dependents (readiness depends only on direct prerequisites);
//! - counters (tasks completed, agents active) move by the delta;
//! - session rules run again only when identity facts change (a file added or
//!   removed, or its task id, agent or dependencies), never for a status or
//!   percentage change; a plan or status file change runs the graph rules
//!   over plans and status files only, and the per-file rules of the files
//!   naming the tasks whose plans changed; any other change runs only the
//!   changed file's own rules (and the message-id rule for its ids). No
//!   change walks the session's messages (squadd's notices among them).

use crate::derive::{SessionView, TaskStarts, TaskView, derive_status, task_events, task_view};
use crate::events::EventKind;
use crate::index::{Entry, IndexedFile, Plan, Progress, SessionIndex};
use chrono::{DateTime, Utc};
use squad_protocol::FileKind;
use squad_protocol::model::{SessionState, TaskStatus};
use squad_protocol::session::{
    SessionFinding, SessionMember, check_session, duplicate_message_ids, member_finding,
};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[cfg(test)]
mod counting;
mod indexes;
mod rules;
mod small;

pub(crate) use small::SortedMap;
use small::{Names, SortedVec};

/// What a file change did to the file itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileOutcome {
    /// Nothing changed (same bytes: a repeated event, or our own write).
    Unchanged,
    /// The file was removed.
    Removed,
    /// The file was added or changed; its event.
    Changed(EventKind),
}

/// What a change caused.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Outcome {
    /// What happened to the file (for file changes).
    pub file: Option<FileOutcome>,
    /// Derived changes, in task order (a session status change last).
    pub events: Vec<EventKind>,
    /// Tasks newly overdue (reported once ever).
    pub overdue: Vec<EventKind>,
    /// The session ended (`completed` or `failed`) with this change.
    pub ended: Option<SessionState>,
    /// The persisted state (task starts, overdue reports) changed.
    pub state_changed: bool,
    /// Task deadline timers to set (`Some`) or cancel (`None`).
    pub timers: Vec<(String, Option<DateTime<Utc>>)>,
    /// Whether the session rules ran again.
    pub rules_rerun: bool,
}

/// `(error count, first error)` when a file has errors.
pub(crate) fn invalid_summary(f: &IndexedFile) -> Option<(usize, String)> {
    let errors: Vec<_> = f
        .diagnostics
        .iter()
        .filter(|d| d.severity == squad_protocol::Severity::Error)
        .collect();
    let first = errors.first()?;
    let at = first
        .location
        .map(|l| format!("{}:{} ", l.line, l.column))
        .unwrap_or_default();
    Some((
        errors.len(),
        format!("{at}{}: {}", first.rule, first.message),
    ))
}

/// The message id a message file carries (what the duplicate rule keys on).
fn message_id(f: &IndexedFile) -> Option<String> {
    (f.kind == FileKind::Message)
        .then(|| f.message_id().map(str::to_string))
        .flatten()
}

/// The key of a message id in [`SessionCore`]'s id index.
fn id_key(id: &str) -> u64 {
    crate::index::fingerprint(id.as_bytes())
}

/// Whether the graph rules read the file (plans and status files).
fn is_structural(f: &IndexedFile) -> bool {
    matches!(f.kind, FileKind::TaskAssignment | FileKind::SessionStatus)
}

/// `(task id, file)` of a file the session rules key on a task: a plan (any,
/// valid or not) or another file naming a task; not a status file.
fn rule_key<'a>(f: &'a IndexedFile, file: &'a str) -> Option<(&'a str, &'a str)> {
    if f.kind == FileKind::SessionStatus {
        return None;
    }
    Some((f.task_id()?, file))
}

/// A `(task, name)` pair as the sorted vectors keep it.
type Pair = (Box<str>, Box<str>);

/// Compares a kept pair with a borrowed one (the probe of a lookup).
fn cmp_pair(kept: &Pair, probe: (&str, &str)) -> std::cmp::Ordering {
    (&*kept.0, &*kept.1).cmp(&probe)
}

fn next_identity() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A counted multimap: `a -> b -> how many sources say so`.
type Edges = BTreeMap<String, BTreeMap<String, usize>>;

fn add_edge(edges: &mut Edges, a: &str, b: &str) {
    *edges
        .entry(a.to_string())
        .or_default()
        .entry(b.to_string())
        .or_insert(0) += 1;
}

fn remove_edge(edges: &mut Edges, a: &str, b: &str) {
    if let Some(m) = edges.get_mut(a) {
        if let Some(n) = m.get_mut(b) {
            *n -= 1;
            if *n == 0 {
                m.remove(b);
            }
        }
        if m.is_empty() {
            edges.remove(a);
        }
    }
}

/// One session, kept derived.
#[derive(Debug, Clone)]
pub(crate) struct SessionCore {
    index: SessionIndex,
    /// task -> valid plan files (the first by name is the task's plan).
    plan_files: SortedMap<Box<str>, Names>,
    /// (task, agent) -> valid progress files.
    report_files: SortedMap<Pair, Names>,
    /// task -> its prerequisites (from effective plans; counted).
    prereqs: Edges,
    /// task -> tasks that have it as a prerequisite (counted).
    dependents: Edges,
    /// task -> the (task, prerequisite) edges its effective plan contributes.
    contributed: BTreeMap<String, Vec<(String, String)>>,
    tasks: SortedMap<Box<str>, TaskView>,
    completed: u64,
    active: SortedMap<Box<str>, usize>,
    status: SessionState,
    /// Session-rule diagnostics that depend only on plans and status files
    /// (duplicates, unknown dependencies, contradictions, cycles).
    graph_diags: Vec<squad_protocol::Diagnostic>,
    /// `duplicate-message-id` findings, recomputed when a message's
    /// identity changes (the only files that can change them).
    message_diags: BTreeMap<String, Vec<squad_protocol::Diagnostic>>,
    /// (hash of the message id, message file) for every message file: a
    /// message change rechecks its own ids only (the rule over every
    /// message made a burst of N messages cost N² work). One set of pairs
    /// rather than a set per id: nearly every id has one file, and a set
    /// each cost 280 bytes. The id's hash, not the id: the file's facts
    /// hold the id already (the files of one hash are filtered by their
    /// id, so a collision costs a comparison, never a false finding).
    message_ids: BTreeSet<(u64, String)>,
    /// Session-rule diagnostics of each other file (unknown task, agent
    /// mismatch): recomputed for that file alone when it changes, and for
    /// the files naming a task when that task's plans change.
    member_diags: BTreeMap<String, Vec<squad_protocol::Diagnostic>>,
    /// (task id, plan file) for every plan file, valid or not, that names a
    /// task: the first by name is the plan the session rules count.
    rule_plans: SortedVec<Pair>,
    /// (task id, file) for every other file naming a task (progress,
    /// messages, squadd's notices, error reports): the files whose
    /// per-file rules a change of that task's plans can affect, so a new
    /// plan rechecks those alone rather than every file of the session.
    task_members: BTreeSet<(String, String)>,
    /// The plan and status files by name: what the graph rules read, kept
    /// apart so they never walk the session's messages.
    structural: SortedVec<Box<str>>,
    /// How many times the per-file session rules ran (a file each): what a
    /// test reads to check that a change's work follows the change.
    member_checks: u64,
    /// How many times a task was derived: with `member_checks`, the work a
    /// change did (a test checks it follows the change, not the session).
    derivations: std::cell::Cell<u64>,
    /// Unique to this core (a session loaded again gets a new one): what
    /// was rendered from it incrementally belongs to it.
    identity: u64,
    /// Tasks re-derived since the shared context last took them.
    dirty: BTreeSet<String>,
    /// Progress updates with decisions, by (updated_at, file): the shared
    /// context's decisions in time order, and whether they changed since
    /// it last took them (`indexes.rs`).
    decision_files: SortedVec<(squad_protocol::model::Timestamp, Box<str>)>,
    decisions_changed: bool,
    /// When each task was first seen in progress (persisted: see
    /// [`Self::task_starts`]). Sorted vectors, not the state's `BTreeMap`
    /// and `BTreeSet` of `String`s: a node has room for eleven entries, a
    /// session has a few tasks (issue 23 item 2).
    starts: SortedMap<Box<str>, squad_protocol::model::Timestamp>,
    /// Overdue tasks already reported (persisted: see
    /// [`Self::reported_overdue`]).
    overdue_reported: SortedVec<Box<str>>,
    /// Tasks that ever violated their dependencies, with the prerequisites
    /// unmet when first seen (persisted: the summary counts what happened
    /// during the session, not only what still holds at its end).
    pub violations: BTreeMap<String, Vec<String>>,
}

impl SessionCore {
    /// An empty session in `dir`.
    pub(crate) fn new(dir: PathBuf) -> SessionCore {
        SessionCore {
            index: SessionIndex::new(dir),
            plan_files: SortedMap::default(),
            report_files: SortedMap::default(),
            prereqs: Edges::new(),
            dependents: Edges::new(),
            contributed: BTreeMap::new(),
            graph_diags: Vec::new(),
            message_diags: BTreeMap::new(),
            message_ids: BTreeSet::new(),
            member_diags: BTreeMap::new(),
            rule_plans: SortedVec::default(),
            task_members: BTreeSet::new(),
            structural: SortedVec::default(),
            member_checks: 0,
            derivations: std::cell::Cell::new(0),
            identity: next_identity(),
            dirty: BTreeSet::new(),
            decision_files: SortedVec::default(),
            decisions_changed: false,
            tasks: SortedMap::default(),
            completed: 0,
            active: SortedMap::default(),
            status: SessionState::Active,
            starts: SortedMap::default(),
            overdue_reported: SortedVec::default(),
            violations: BTreeMap::new(),
        }
        .checked()
    }

    /// When each task was first seen in progress, as the state saves it.
    pub(crate) fn task_starts(&self) -> TaskStarts {
        self.starts
            .iter()
            .map(|(task, at)| (task.to_string(), *at))
            .collect()
    }

    /// When `task` was first seen in progress.
    pub(crate) fn start_of(&self, task: &str) -> Option<squad_protocol::model::Timestamp> {
        self.starts.get(task).copied()
    }

    /// The overdue tasks already reported, as the state saves them.
    pub(crate) fn reported_overdue(&self) -> BTreeSet<String> {
        self.overdue_reported
            .iter()
            .map(|t| t.to_string())
            .collect()
    }

    /// Whether `task` was reported overdue.
    #[cfg(test)]
    pub(crate) fn was_reported_overdue(&self, task: &str) -> bool {
        self.overdue_reported.find_by(|t| (**t).cmp(task)).is_ok()
    }

    fn checked(mut self) -> Self {
        self.recheck_all();
        self
    }

    /// Builds the core of a scanned session in one pass (start-up, rescan,
    /// a session that appeared): the baseline, so no task events; overdue
    /// tasks not reported before are.
    pub(crate) fn load(
        index: SessionIndex,
        starts: TaskStarts,
        overdue_reported: BTreeSet<String>,
        now: DateTime<Utc>,
    ) -> (SessionCore, Outcome) {
        let mut core = SessionCore::new(index.dir.clone());
        core.starts = starts
            .into_iter()
            .map(|(task, at)| (task.into_boxed_str(), at))
            .collect();
        core.overdue_reported = overdue_reported
            .into_iter()
            .map(String::into_boxed_str)
            .collect();
        for (name, file) in index.files.iter() {
            core.index_in(name, file);
        }
        core.index.files = index.files;
        core.recheck_all();
        let mut out = Outcome::default();
        let planned: Vec<String> = core.plan_files.keys().map(|t| t.to_string()).collect();
        let mut ignored = BTreeSet::new();
        for t in &planned {
            core.refresh_edges(t, &mut ignored);
            out.state_changed |= core.record_start(t);
        }
        for t in &planned {
            core.recompute(t, now, &mut out, false);
        }
        core.status = core.derived_status();
        out.ended = core.ended();
        (core, out)
    }

    /// Tasks derived so far (the work counter a test reads).
    #[cfg(test)]
    pub(crate) fn derivations(&self) -> u64 {
        self.derivations.get()
    }

    /// Files whose per-file session rules ran so far (the work counter a
    /// test reads).
    #[cfg(test)]
    pub(crate) fn member_checks(&self) -> u64 {
        self.member_checks
    }

    /// This core's identity (see the field).
    pub(crate) fn identity(&self) -> u64 {
        self.identity
    }

    /// The session's index (files, diagnostics).
    pub(crate) fn index(&self) -> &SessionIndex {
        &self.index
    }

    /// Whether message file `file` reuses a message id an earlier file (by
    /// name) of the session carries: the `duplicate-message-id` finding,
    /// and such a message is reported, not delivered (docs/daemon.md).
    pub(crate) fn reuses_message_id(&self, file: &str) -> bool {
        self.message_id_kept_by(file).is_some()
    }

    /// The file that keeps the message id message file `file` reuses (the
    /// first by name carrying it), or `None` when `file` keeps its id.
    pub(crate) fn message_id_kept_by(&self, file: &str) -> Option<&str> {
        let id = self
            .index
            .file(file)
            .filter(|f| f.kind == FileKind::Message)?
            .message_id()?;
        self.files_with_id(id)
            .next()
            .map(|(first, _)| first)
            .filter(|first| *first != file)
    }

    /// The message id message file `file` keeps (it carries it, first by
    /// name), if any.
    pub(crate) fn kept_message_id(&self, file: &str) -> Option<String> {
        let id = self
            .index
            .file(file)
            .filter(|f| f.kind == FileKind::Message)?
            .message_id()?;
        (self.message_file(id) == Some(file)).then(|| id.to_string())
    }

    /// The message file that keeps message id `id` (the first by name
    /// carrying it).
    pub(crate) fn message_file<'a>(&'a self, id: &'a str) -> Option<&'a str> {
        self.files_with_id(id).next().map(|(name, _)| name)
    }

    /// The other message files carrying the message id message file
    /// `file` carries, by name.
    pub(crate) fn others_with_message_id(&self, file: &str) -> Vec<&str> {
        let Some(id) = self
            .index
            .file(file)
            .filter(|f| f.kind == FileKind::Message)
            .and_then(|f| f.message_id())
        else {
            return Vec::new();
        };
        self.files_with_id(id)
            .map(|(name, _)| name)
            .filter(|name| *name != file)
            .collect()
    }

    /// The message files carrying message id `id`, by name.
    fn files_with_id<'a>(
        &'a self,
        id: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a IndexedFile)> + 'a {
        let key = id_key(id);
        self.message_ids
            .range((key, String::new())..)
            .take_while(move |(k, _)| *k == key)
            .filter_map(|(_, name)| Some((name.as_str(), self.index.file(name)?)))
            .filter(move |(_, f)| f.message_id() == Some(id))
    }

    /// The derived view (every task): for reports and rendering.
    pub(crate) fn view(&self) -> SessionView {
        SessionView {
            tasks: self.tasks.values().cloned().collect(),
            ..self.head()
        }
    }

    /// The view without its task list: what `session-status.md` needs.
    pub(crate) fn head(&self) -> SessionView {
        let status_file = self.index.status();
        SessionView {
            name: self.index.name.clone(),
            session_id: status_file.map(|s| s.session_id.clone()),
            status: self.status,
            phase: status_file.and_then(|s| s.phase),
            tasks_total: self.tasks.len() as u64,
            tasks_completed: self.completed,
            agents_active: self.active.keys().map(|a| a.to_string()).collect(),
            tasks: Vec::new(),
        }
    }

    /// Derived tasks, by id.
    pub(crate) fn tasks(&self) -> &SortedMap<Box<str>, TaskView> {
        &self.tasks
    }

    /// Whether the agent has a task in progress.
    pub(crate) fn is_busy(&self, agent: &str) -> bool {
        self.active.contains_key(agent)
    }

    /// The session status, when it has ended.
    pub(crate) fn ended(&self) -> Option<SessionState> {
        matches!(self.status, SessionState::Completed | SessionState::Failed).then_some(self.status)
    }

    /// Applies a file's new contents (`None`: it is gone) and re-derives
    /// what it touches.
    pub(crate) fn apply(
        &mut self,
        file: &str,
        new: Option<IndexedFile>,
        now: DateTime<Utc>,
    ) -> Outcome {
        let mut out = Outcome::default();
        let old = self.index.file(file);
        let outcome = match (&new, old) {
            (None, None) => return out,
            (None, Some(_)) => FileOutcome::Removed,
            (Some(n), Some(o)) if o.fingerprint == n.fingerprint && n.fingerprint != 0 => {
                out.file = Some(FileOutcome::Unchanged);
                return out;
            }
            (Some(n), o) => {
                let was_invalid = o.is_some_and(|o| invalid_summary(o).is_some());
                FileOutcome::Changed(match invalid_summary(n) {
                    Some((errors, first)) => EventKind::FileInvalid { errors, first },
                    None if was_invalid => EventKind::FileFixed,
                    None => EventKind::FileValidated {
                        warnings: n.diagnostics.len(),
                    },
                })
            }
        };
        out.file = Some(outcome);
        // Identity facts decide whether the session rules run again, and
        // plans and status files whether they run for the whole session.
        let identity_changed = match (old, &new) {
            (Some(o), Some(n)) => !o.same_identity(n),
            _ => true,
        };
        let old_message_id = old.and_then(message_id);
        let old_plan_task = old
            .filter(|o| o.kind == FileKind::TaskAssignment)
            .and_then(|o| o.task_id().map(str::to_string));
        let whole = old.is_some_and(is_structural) || new.as_ref().is_some_and(is_structural);
        // Tasks whose derivation may change.
        let mut touched: BTreeSet<String> = BTreeSet::new();
        if let Some(o) = self.index.files.remove(file) {
            self.touch(&o, &mut touched);
            self.index_out(file, &o);
        }
        if let Some(n) = new {
            self.index_in(file, &n);
            self.touch(&n, &mut touched);
            self.index.insert(file.to_string(), n);
        }
        // Prerequisite edges of the touched tasks' effective plans.
        for t in touched.clone() {
            self.refresh_edges(&t, &mut touched);
        }
        let mut affected = touched.clone();
        for t in &touched {
            if let Some(d) = self.dependents.get(t) {
                affected.extend(d.keys().cloned());
            }
        }
        for t in &touched {
            out.state_changed |= self.record_start(t);
        }
        for t in &affected {
            self.recompute(t, now, &mut out, true);
        }
        // A task's context entry also shows its report's artifacts.
        self.dirty.extend(affected);
        self.finish(&mut out);
        if identity_changed {
            let new_message_id = self.index.file(file).and_then(message_id);
            if old_message_id != new_message_id {
                let ids = old_message_id.into_iter().chain(new_message_id);
                self.recheck_message_ids(ids.collect());
            }
            if whole {
                // Plans and status files: the graph rules over them, and
                // the per-file rules of the files naming the tasks whose
                // plans changed (nothing else reads plans or status files).
                self.recheck_graph();
                let planned = |f: Option<&IndexedFile>| {
                    f.filter(|f| f.kind == FileKind::TaskAssignment)
                        .and_then(|f| f.task_id().map(str::to_string))
                };
                let tasks: BTreeSet<String> = old_plan_task
                    .into_iter()
                    .chain(planned(self.index.file(file)))
                    .collect();
                for t in &tasks {
                    self.recheck_task_members(t);
                }
            }
            self.recheck_member(file);
            self.assemble_diagnostics();
            out.rules_rerun = true;
        } else if let Some(f) = self.index.file(file) {
            // Same facts, other text: findings on this file are placed again
            // in its new text (positions follow the fingerprint).
            let path = f.path_in(&self.index.dir);
            let id = message_id(f);
            if self.graph_diags.iter().any(|d| d.path == path) {
                self.recheck_graph();
                self.assemble_diagnostics();
            } else if self.member_diags.contains_key(file) {
                self.recheck_member(file);
                self.assemble_diagnostics();
            }
            if let Some(id) = id.filter(|id| self.message_diags.contains_key(id)) {
                self.recheck_message_ids(vec![id]);
            }
        }
        out
    }

    /// Re-derives tasks whose deadline passed.
    pub(crate) fn tick(&mut self, tasks: &[String], now: DateTime<Utc>) -> Outcome {
        let mut out = Outcome::default();
        for t in tasks {
            self.recompute(t, now, &mut out, true);
        }
        self.dirty.extend(tasks.iter().cloned());
        self.finish(&mut out);
        out
    }

    fn finish(&mut self, out: &mut Outcome) {
        let status = self.derived_status();
        if status != self.status {
            self.status = status;
            out.events.push(EventKind::SessionStatusChanged { status });
            out.ended = self.ended();
        }
    }

    fn derived_status(&self) -> SessionState {
        let status_file = self.index.status();
        derive_status(
            status_file.map(|s| s.status),
            status_file.is_some_and(|s| s.completed_at.is_some()),
            self.tasks.len() as u64,
            self.completed,
        )
    }

    /// Records the first `in_progress` time of a task; whether it was new.
    fn record_start(&mut self, task: &str) -> bool {
        if self.starts.contains_key(task) {
            return false;
        }
        let Some(agent) = self.plan(task).map(|p| p.agent.clone()) else {
            return false;
        };
        let Some(files) = self
            .report_files
            .get_by(|k| cmp_pair(k, (task, agent.as_str())))
        else {
            return false;
        };
        // As a scan would: the last in-progress update by file name.
        let at = files
            .iter()
            .filter_map(|n| match self.index.file(n).map(|f| &f.entry) {
                Some(Entry::Progress(p)) if p.status == TaskStatus::InProgress => {
                    Some(p.updated_at)
                }
                _ => None,
            })
            .next_back();
        match at {
            Some(at) => {
                self.starts.insert(task.into(), at);
                true
            }
            None => false,
        }
    }

    /// Derives one task from the indexes (pure).
    fn derive_task(&self, task: &str, now: DateTime<Utc>) -> Option<TaskView> {
        self.derivations.set(self.derivations.get() + 1);
        let plan = self.plan(task)?;
        let report = self.report(task, &plan.agent);
        let prerequisites: Vec<String> = self
            .prereqs
            .get(task)
            .into_iter()
            .flat_map(|m| m.keys())
            .filter(|t| t.as_str() != task)
            .cloned()
            .collect();
        let unmet: Vec<String> = prerequisites
            .iter()
            .filter(|t| self.state_of(t) != Some(TaskStatus::Completed))
            .cloned()
            .collect();
        Some(task_view(
            plan,
            report,
            prerequisites,
            unmet,
            self.start_of(task),
            now,
        ))
    }

    /// Re-derives one task, moves the counters by the delta and notes what
    /// changed (task events only when `announce`).
    fn recompute(&mut self, task: &str, now: DateTime<Utc>, out: &mut Outcome, announce: bool) {
        let new = self.derive_task(task, now);
        let old = match &new {
            Some(n) => self.tasks.insert(task.into(), n.clone()),
            None => self.tasks.remove(task),
        };
        if old == new {
            return;
        }
        if let Some(o) = &old {
            self.count(o, false);
        }
        if let Some(n) = &new {
            self.count(n, true);
        }
        let timer = new
            .as_ref()
            .filter(|n| n.state != TaskStatus::Completed && !n.overdue)
            .and_then(|n| n.due_at);
        let had_timer = old
            .as_ref()
            .filter(|o| o.state != TaskStatus::Completed && !o.overdue)
            .and_then(|o| o.due_at);
        if timer != had_timer {
            out.timers.push((task.to_string(), timer));
        }
        let Some(t) = new else {
            return;
        };
        // Reported once ever per task: the prerequisites unmet when first
        // seen are the record (a plan naming others later is no new fact).
        let newly_violating = t.violation && !self.violations.contains_key(&t.task_id);
        if newly_violating {
            self.violations.insert(t.task_id.clone(), t.unmet.clone());
            out.state_changed = true;
        }
        if t.overdue && self.overdue_reported.insert(t.task_id.as_str().into()) {
            out.state_changed = true;
            out.overdue.push(EventKind::TaskOverdue {
                task_id: t.task_id.clone(),
                agent: t.agent.clone(),
            });
        }
        if announce {
            out.events.extend(task_events(old.as_ref(), &t));
            if newly_violating {
                out.events.push(EventKind::DependencyViolation {
                    task_id: t.task_id.clone(),
                    unmet: t.unmet.clone(),
                });
            }
        }
    }

    fn count(&mut self, t: &TaskView, add: bool) {
        if t.state == TaskStatus::Completed {
            if add {
                self.completed += 1;
            } else {
                self.completed -= 1;
            }
        }
        if t.state == TaskStatus::InProgress {
            if add {
                *self.active.entry_or_default(t.agent.as_str(), |a| a.into()) += 1;
            } else if let Some(n) = self.active.get_mut(t.agent.as_str()) {
                *n -= 1;
                if *n == 0 {
                    self.active.remove(t.agent.as_str());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_memory;
