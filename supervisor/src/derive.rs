//! Derivation: what the index means, as pure functions of (index, facts, now).
//!
//! Task states, readiness, dependency violations, timeouts and session
//! counters (docs/daemon.md, "What it does with a file"). No I/O: the daemon and `squadctl status`
//! (daemon down) call the same functions and get the same answers.

use crate::events::EventKind;
use crate::index::{Plan, Progress, SessionIndex};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use squad_protocol::model::{Phase, Priority, SessionState, TaskStatus, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// When each task was first seen `in_progress`, by task id. Persisted by the
/// daemon so a restart computes the same deadlines.
pub(crate) type TaskStarts = BTreeMap<String, Timestamp>;

/// One task, derived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskView {
    /// Task id.
    pub task_id: String,
    /// Assignee.
    pub agent: String,
    /// Priority.
    pub priority: Priority,
    /// State from the assignee's latest progress update (`pending` without one).
    pub state: TaskStatus,
    /// Tasks that must complete first (its `requires` plus tasks whose
    /// `blocks` name it).
    pub prerequisites: Vec<String>,
    /// Prerequisites not completed yet (or without a plan).
    pub unmet: Vec<String>,
    /// Pending with every prerequisite completed.
    pub ready: bool,
    /// Started or finished while prerequisites are unmet.
    pub violation: bool,
    /// First seen `in_progress`.
    pub started_at: Option<Timestamp>,
    /// `started_at + meta.timeout`.
    pub due_at: Option<DateTime<Utc>>,
    /// Past `due_at` and not completed.
    pub overdue: bool,
    /// Blocker descriptions from the latest progress update.
    pub blockers: Vec<String>,
}

/// One session, derived.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionView {
    /// Directory name.
    pub name: String,
    /// From session-status.md, when valid.
    pub session_id: Option<String>,
    /// Derived status (see [`derive_status`]).
    pub status: SessionState,
    /// As written in session-status.md.
    pub phase: Option<Phase>,
    /// Number of valid task assignments.
    pub tasks_total: u64,
    /// Number of those completed.
    pub tasks_completed: u64,
    /// Agents with a task in progress, sorted.
    pub agents_active: Vec<String>,
    /// Every task, by id.
    pub tasks: Vec<TaskView>,
}

impl SessionView {
    /// Tasks that are overdue.
    pub(crate) fn overdue(&self) -> impl Iterator<Item = &TaskView> {
        self.tasks.iter().filter(|t| t.overdue)
    }

    /// Tasks that are ready to start.
    pub(crate) fn ready(&self) -> impl Iterator<Item = &TaskView> {
        self.tasks.iter().filter(|t| t.ready)
    }

    /// The earliest future deadline (the daemon's core arms its timers
    /// itself; kept for the tests of the view).
    #[cfg(test)]
    pub(crate) fn next_deadline(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.tasks
            .iter()
            .filter(|t| t.state != TaskStatus::Completed && !t.overdue)
            .filter_map(|t| t.due_at)
            .filter(|d| *d > now)
            .min()
    }
}

/// The session status: `failed` only when set explicitly; `completed` when
/// recorded as completed (with `completed_at`) or when every task is
/// completed; otherwise `active`.
pub(crate) fn derive_status(
    written: Option<SessionState>,
    completed_recorded: bool,
    tasks_total: u64,
    tasks_completed: u64,
) -> SessionState {
    match written {
        Some(SessionState::Failed) => SessionState::Failed,
        Some(SessionState::Completed) if completed_recorded => SessionState::Completed,
        _ if tasks_total > 0 && tasks_completed == tasks_total => SessionState::Completed,
        _ => SessionState::Active,
    }
}

/// Derives one task from its plan, the assignee's latest progress update,
/// its prerequisites (and those not completed) and its recorded start: the
/// one place task state, readiness, violations and the deadline
/// (`meta.timeout` seconds from the first `in_progress` report) are
/// computed, for the daemon's incremental core and a from-scratch
/// [`derive_session`] alike.
pub(crate) fn task_view(
    plan: &Plan,
    report: Option<&Progress>,
    prerequisites: Vec<String>,
    unmet: Vec<String>,
    recorded_start: Option<Timestamp>,
    now: DateTime<Utc>,
) -> TaskView {
    let state = report.map_or(TaskStatus::Pending, |p| p.status);
    let started_at = recorded_start.or_else(|| {
        report
            .filter(|p| p.status == TaskStatus::InProgress)
            .map(|p| p.updated_at)
    });
    let due_at = match (started_at, plan.timeout) {
        (Some(start), Some(secs)) => i64::try_from(secs)
            .ok()
            .and_then(Duration::try_seconds)
            .and_then(|d| start.with_timezone(&Utc).checked_add_signed(d)),
        _ => None,
    };
    TaskView {
        task_id: plan.task_id.clone(),
        agent: plan.agent.clone(),
        priority: plan.priority,
        state,
        ready: state == TaskStatus::Pending && unmet.is_empty(),
        violation: matches!(state, TaskStatus::InProgress | TaskStatus::Completed)
            && !unmet.is_empty(),
        prerequisites,
        unmet,
        started_at,
        due_at,
        overdue: state != TaskStatus::Completed && due_at.is_some_and(|d| d <= now),
        blockers: report
            .map(|p| p.blockers.iter().map(|b| b.description.clone()).collect())
            .unwrap_or_default(),
    }
}

/// The events a task's change from `prev` (None: not known before) to `t`
/// announces: newly ready, newly completed. A dependency violation is not
/// a change between views but a fact reported once ever per task (its
/// record persisted: `SessionCore::violations`), like an overdue task.
pub(crate) fn task_events(prev: Option<&TaskView>, t: &TaskView) -> Vec<EventKind> {
    let was = |f: fn(&TaskView) -> bool| prev.is_some_and(f);
    let mut out = Vec::new();
    if t.ready && !was(|p| p.ready) {
        out.push(EventKind::TaskReady {
            task_id: t.task_id.clone(),
            agent: t.agent.clone(),
        });
    }
    if t.state == TaskStatus::Completed && !was(|p| p.state == TaskStatus::Completed) {
        out.push(EventKind::TaskCompleted {
            task_id: t.task_id.clone(),
            agent: t.agent.clone(),
        });
    }
    out
}

/// Derives a session's tasks and counters.
pub(crate) fn derive_session(
    session: &SessionIndex,
    starts: &TaskStarts,
    now: DateTime<Utc>,
) -> SessionView {
    let mut plans: BTreeMap<&str, &Plan> = BTreeMap::new();
    for plan in session.plans() {
        // Duplicates are a validation error; the first by file name counts.
        plans.entry(plan.task_id.as_str()).or_insert(plan);
    }
    // The progress update that counts for a plan is the assignee's own.
    let mut reports: BTreeMap<(&str, &str), &Progress> = BTreeMap::new();
    for p in session.progress() {
        let slot = reports
            .entry((p.task_id.as_str(), p.agent.as_str()))
            .or_insert(p);
        if p.updated_at > slot.updated_at {
            *slot = p;
        }
    }
    let states: BTreeMap<&str, (TaskStatus, Option<&Progress>)> = plans
        .values()
        .map(|plan| {
            let p = reports
                .get(&(plan.task_id.as_str(), plan.agent.as_str()))
                .copied();
            (
                plan.task_id.as_str(),
                (p.map_or(TaskStatus::Pending, |p| p.status), p),
            )
        })
        .collect();
    let mut prerequisites: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for plan in plans.values() {
        let entry = prerequisites.entry(plan.task_id.as_str()).or_default();
        entry.extend(plan.requires.iter().map(String::as_str));
        for blocked in &plan.blocks {
            prerequisites
                .entry(blocked.as_str())
                .or_default()
                .insert(plan.task_id.as_str());
        }
    }

    let mut tasks = Vec::new();
    for plan in plans.values() {
        let (_, p) = states[plan.task_id.as_str()];
        let prereqs: Vec<String> = prerequisites
            .get(plan.task_id.as_str())
            .into_iter()
            .flatten()
            .filter(|t| **t != plan.task_id)
            .map(|t| (*t).to_string())
            .collect();
        let unmet: Vec<String> = prereqs
            .iter()
            .filter(|t| {
                states
                    .get(t.as_str())
                    .is_none_or(|(s, _)| *s != TaskStatus::Completed)
            })
            .cloned()
            .collect();
        tasks.push(task_view(
            plan,
            p,
            prereqs,
            unmet,
            starts.get(&plan.task_id).copied(),
            now,
        ));
    }

    let tasks_total = tasks.len() as u64;
    let tasks_completed = tasks
        .iter()
        .filter(|t| t.state == TaskStatus::Completed)
        .count() as u64;
    let agents_active: BTreeSet<&str> = tasks
        .iter()
        .filter(|t| t.state == TaskStatus::InProgress)
        .map(|t| t.agent.as_str())
        .collect();
    let status_file = session.status();
    SessionView {
        name: session.name.clone(),
        session_id: status_file.map(|s| s.session_id.clone()),
        status: derive_status(
            status_file.map(|s| s.status),
            status_file.is_some_and(|s| s.completed_at.is_some()),
            tasks_total,
            tasks_completed,
        ),
        phase: status_file.and_then(|s| s.phase),
        tasks_total,
        tasks_completed,
        agents_active: agents_active.into_iter().map(str::to_string).collect(),
        tasks,
    }
}

/// Tasks now `in_progress` that have no recorded start: the daemon records
/// them (at the progress update's `updated_at`). From scratch: the
/// effective plan is the first by file name (as in [`derive_session`]);
/// of several in-progress reports by its agent, the last by file name
/// comes last (extending a map with the result keeps it). The model tests
/// compute task starts with it, apart from the session core's own
/// bookkeeping.
#[cfg(test)]
pub(crate) fn new_starts(session: &SessionIndex, starts: &TaskStarts) -> Vec<(String, Timestamp)> {
    let mut plans: BTreeMap<&str, &Plan> = BTreeMap::new();
    for p in session.plans() {
        plans.entry(p.task_id.as_str()).or_insert(p);
    }
    session
        .progress()
        .filter(|p| p.status == TaskStatus::InProgress && !starts.contains_key(&p.task_id))
        .filter(|p| {
            plans
                .get(p.task_id.as_str())
                .is_some_and(|plan| plan.agent == p.agent)
        })
        .map(|p| (p.task_id.clone(), p.updated_at))
        .collect()
}

/// What changed from `before` (None: not known before) to `after`.
///
/// Overdue tasks are not a change between views but a fact to report once
/// ever; see [`newly_overdue`].
pub(crate) fn changes(before: Option<&SessionView>, after: &SessionView) -> Vec<EventKind> {
    let old: BTreeMap<&str, &TaskView> = before
        .map(|b| b.tasks.iter().map(|t| (t.task_id.as_str(), t)).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for t in &after.tasks {
        out.extend(task_events(old.get(t.task_id.as_str()).copied(), t));
    }
    if before.is_none_or(|b| b.status != after.status) {
        out.push(EventKind::SessionStatusChanged {
            status: after.status,
        });
    }
    out
}

/// Overdue tasks not reported yet (`reported` persists across restarts, so a
/// task that went overdue while the daemon was down is reported at start, and
/// a restart never reports one twice). The daemon's core decides this
/// itself; kept as an independent statement of the rule for tests.
#[cfg(test)]
pub(crate) fn newly_overdue<'a>(
    view: &'a SessionView,
    reported: &BTreeSet<String>,
) -> impl Iterator<Item = &'a TaskView> {
    view.overdue().filter(|t| !reported.contains(&t.task_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::index_bytes;
    use chrono::TimeZone;
    use squad_protocol::FileKind;
    use std::path::PathBuf;

    fn plan(
        task: &str,
        agent: &str,
        requires: &[&str],
        blocks: &[&str],
        timeout: Option<u64>,
    ) -> String {
        let list = |items: &[&str]| format!("[{}]", items.join(", "));
        let timeout = timeout
            .map(|t| format!("  timeout: {t}\n"))
            .unwrap_or_default();
        format!(
            "meta:\n  task_id: {task}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n{timeout}dependencies:\n  requires: {}\n  blocks: {}\ninstruction: x\n",
            list(requires),
            list(blocks)
        )
    }

    fn progress(task: &str, agent: &str, status: &str, at: &str) -> String {
        format!(
            "meta:\n  task_id: {task}\n  agent: {agent}\n  updated_at: {at}\nstatus: {status}\n"
        )
    }

    fn session(files: &[(&str, String)]) -> SessionIndex {
        let dir = PathBuf::from("/p/.squad/sessions/20240115T100000Z");
        let mut s = SessionIndex::new(dir.clone());
        for (name, text) in files {
            let kind = FileKind::from_file_name(name).unwrap();
            let f = index_bytes(&dir.join(name), kind, text.as_bytes());
            assert!(f.diagnostics.is_empty(), "{name}: {:?}", f.diagnostics);
            s.insert((*name).to_string(), f);
        }
        s
    }

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 15, h, m, s).unwrap()
    }

    fn task<'a>(v: &'a SessionView, id: &str) -> &'a TaskView {
        v.tasks.iter().find(|t| t.task_id == id).unwrap()
    }

    #[test]
    fn status_table() {
        use SessionState::*;
        let cases = [
            (Some(Failed), false, 3, 3, Failed),
            (Some(Completed), true, 3, 1, Completed),
            (Some(Completed), false, 3, 1, Active),
            (Some(Active), false, 3, 3, Completed),
            (None, false, 0, 0, Active),
            (Some(Active), false, 2, 1, Active),
        ];
        for (written, recorded, total, done, want) in cases {
            assert_eq!(
                derive_status(written, recorded, total, done),
                want,
                "{written:?} {recorded} {total}/{done}"
            );
        }
    }

    #[test]
    fn readiness_counts_requires_and_blocks_from_either_side() {
        let s = session(&[
            (
                "role-plan-a-task_1.md",
                plan("task_1", "a", &[], &["task_3"], None),
            ),
            (
                "role-plan-b-task_2.md",
                plan("task_2", "b", &["task_1"], &[], None),
            ),
            ("role-plan-c-task_3.md", plan("task_3", "c", &[], &[], None)),
            (
                "role-comm-a-task_1.md",
                progress("task_1", "a", "completed", "2024-01-15T10:05:00Z"),
            ),
        ]);
        let v = derive_session(&s, &TaskStarts::new(), at(11, 0, 0));
        assert_eq!(task(&v, "task_1").state, TaskStatus::Completed);
        // task_3 is blocked by task_1 (declared on task_1's side only).
        assert_eq!(task(&v, "task_3").prerequisites, ["task_1"]);
        assert!(task(&v, "task_2").ready && task(&v, "task_3").ready);
        assert_eq!((v.tasks_completed, v.tasks_total), (1, 3));
        assert_eq!(v.status, SessionState::Active);
    }

    #[test]
    fn progress_from_another_agent_does_not_count() {
        let s = session(&[
            ("role-plan-a-task_1.md", plan("task_1", "a", &[], &[], None)),
            (
                "role-comm-b-task_1.md",
                progress("task_1", "b", "completed", "2024-01-15T10:05:00Z"),
            ),
        ]);
        let v = derive_session(&s, &TaskStarts::new(), at(11, 0, 0));
        assert_eq!(task(&v, "task_1").state, TaskStatus::Pending);
    }

    #[test]
    fn started_before_prerequisites_is_a_violation() {
        let s = session(&[
            ("role-plan-a-task_1.md", plan("task_1", "a", &[], &[], None)),
            (
                "role-plan-b-task_2.md",
                plan("task_2", "b", &["task_1"], &[], None),
            ),
            (
                "role-comm-b-task_2.md",
                progress("task_2", "b", "in_progress", "2024-01-15T10:05:00Z"),
            ),
        ]);
        let v = derive_session(&s, &TaskStarts::new(), at(11, 0, 0));
        let t = task(&v, "task_2");
        assert!(t.violation && !t.ready);
        assert_eq!(t.unmet, ["task_1"]);
        assert_eq!(v.agents_active, ["b"]);
    }

    #[test]
    fn timeouts_run_from_the_first_in_progress_report() {
        let s = session(&[
            (
                "role-plan-a-task_1.md",
                plan("task_1", "a", &[], &[], Some(300)),
            ),
            (
                "role-comm-a-task_1.md",
                progress("task_1", "a", "in_progress", "2024-01-15T10:30:00Z"),
            ),
        ]);
        // No recorded start: the current report's time.
        let v = derive_session(&s, &TaskStarts::new(), at(10, 34, 59));
        assert_eq!(task(&v, "task_1").due_at, Some(at(10, 35, 0)));
        assert!(!task(&v, "task_1").overdue);
        assert_eq!(v.next_deadline(at(10, 34, 59)), Some(at(10, 35, 0)));
        let v = derive_session(&s, &TaskStarts::new(), at(10, 35, 0));
        assert!(task(&v, "task_1").overdue);
        assert_eq!(newly_overdue(&v, &BTreeSet::new()).count(), 1);
        assert_eq!(
            newly_overdue(&v, &BTreeSet::from(["task_1".to_string()])).count(),
            0
        );
        // A recorded earlier start wins over a later report.
        let starts = TaskStarts::from([("task_1".to_string(), at(10, 0, 0).fixed_offset())]);
        let v = derive_session(&s, &starts, at(10, 20, 0));
        assert!(task(&v, "task_1").overdue);
        assert!(new_starts(&s, &starts).is_empty());
        assert_eq!(new_starts(&s, &TaskStarts::new()).len(), 1);
    }

    #[test]
    fn changes_report_transitions_only() {
        let before = session(&[
            ("role-plan-a-task_1.md", plan("task_1", "a", &[], &[], None)),
            (
                "role-plan-b-task_2.md",
                plan("task_2", "b", &["task_1"], &[], None),
            ),
        ]);
        let after = session(&[
            ("role-plan-a-task_1.md", plan("task_1", "a", &[], &[], None)),
            (
                "role-plan-b-task_2.md",
                plan("task_2", "b", &["task_1"], &[], None),
            ),
            (
                "role-comm-a-task_1.md",
                progress("task_1", "a", "completed", "2024-01-15T10:05:00Z"),
            ),
        ]);
        let now = at(11, 0, 0);
        let v0 = derive_session(&before, &TaskStarts::new(), now);
        let v1 = derive_session(&after, &TaskStarts::new(), now);
        let c = changes(Some(&v0), &v1);
        assert_eq!(
            c,
            [
                EventKind::TaskCompleted {
                    task_id: "task_1".into(),
                    agent: "a".into()
                },
                EventKind::TaskReady {
                    task_id: "task_2".into(),
                    agent: "b".into()
                },
            ]
        );
        assert!(changes(Some(&v1), &v1).is_empty());
    }
}
