//! The status report: what `squadctl status` shows, built the same way from
//! the daemon's live index or, with the daemon down, from the files.

use crate::derive::{SessionView, derive_session};
use crate::events::Event;
use crate::index::{SessionIndex, scan_root};
use crate::state::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use squad_protocol::model::{Phase, SessionState};
use squad_protocol::{Diagnostic, Severity};
use std::fmt::Write as _;
use std::path::Path;

/// One validation problem, as shown in status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Problem {
    /// File (or session directory).
    pub path: String,
    /// 1-based line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// `error` or `warning`.
    pub severity: String,
    /// Rule id.
    pub rule: String,
    /// What is wrong.
    pub message: String,
}

impl From<&Diagnostic> for Problem {
    fn from(d: &Diagnostic) -> Problem {
        Problem {
            path: d.path.display().to_string(),
            line: d.location.map(|l| l.line),
            column: d.location.map(|l| l.column),
            severity: d.severity.to_string(),
            rule: d.rule.id().to_string(),
            message: d.message.clone(),
        }
    }
}

/// One session in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SessionReport {
    /// Directory name.
    pub name: String,
    /// From session-status.md.
    pub session_id: Option<String>,
    /// Derived status.
    pub status: SessionState,
    /// As written.
    pub phase: Option<Phase>,
    /// Completed tasks.
    pub tasks_completed: u64,
    /// All tasks.
    pub tasks_total: u64,
    /// Agents with a task in progress.
    pub agents_active: Vec<String>,
    /// Tasks ready to start.
    pub ready: Vec<String>,
    /// Tasks past their deadline.
    pub overdue: Vec<String>,
    /// Tasks running ahead of their prerequisites.
    pub violations: Vec<String>,
    /// Validation errors.
    pub errors: usize,
    /// Validation warnings.
    pub warnings: usize,
    /// Every validation problem.
    pub problems: Vec<Problem>,
    /// Locks held in the session.
    #[serde(default)]
    pub locks: Vec<LockView>,
    /// Messages delivered and not yet acknowledged, by priority.
    #[serde(default)]
    pub unread: std::collections::BTreeMap<String, usize>,
    /// Age of the oldest unacknowledged message, in seconds.
    #[serde(default)]
    pub oldest_unread_secs: Option<u64>,
    /// Escalated messages still unacknowledged (a notice of squadd's whose
    /// fact is gone is not one: it is moot).
    #[serde(default)]
    pub escalations: Vec<String>,
    /// The recipient of each of `escalations`, by message id: the inbox
    /// it waits in (what `inbox ack AGENT ID` takes).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub escalated_to: std::collections::BTreeMap<String, String>,
    /// Agents who were sent messages but have no task in the session.
    #[serde(default)]
    pub recipients_without_task: Vec<String>,
    /// Tasks whose latest progress update says `blocked`.
    #[serde(default)]
    pub blocked: Vec<BlockedTask>,
    /// Error reports whose task is not completed (or that name no task).
    #[serde(default)]
    pub error_reports: Vec<ErrorReportView>,
}

/// A blocked task, as shown in status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BlockedTask {
    /// Task id.
    pub task_id: String,
    /// Assignee.
    pub agent: String,
    /// Blocker descriptions from the latest progress update.
    pub blockers: Vec<String>,
}

/// An error report, as shown in status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ErrorReportView {
    /// Error id.
    pub error_id: String,
    /// Reporter.
    pub agent: String,
    /// The task that failed.
    pub task_id: Option<String>,
    /// `critical`, `error` or `warning`.
    pub severity: String,
    /// `error.message`.
    pub message: String,
}

/// Agents who were sent messages but have no task in the session.
pub(crate) fn recipients_without_task(session: &SessionIndex) -> Vec<String> {
    use crate::index::Entry;
    let assignees: std::collections::BTreeSet<&str> =
        session.plans().map(|p| p.agent.as_str()).collect();
    let mut recipients: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for f in session.files.values() {
        if let Entry::Message(m) = &f.entry
            && !assignees.contains(m.to_agent.as_str())
        {
            recipients.insert(m.to_agent.clone());
        }
    }
    recipients.into_iter().collect()
}

/// Fills in a session report's message figures from its inboxes.
pub(crate) fn add_messages(
    report: &mut SessionReport,
    session: &SessionIndex,
    escalated: Option<&std::collections::BTreeSet<String>>,
    moot: impl Fn(&str) -> bool,
    now: DateTime<Utc>,
) {
    report.recipients_without_task = recipients_without_task(session);
    for (agent, item) in crate::inbox::unread(&session.dir) {
        *report.unread.entry(item.priority.to_string()).or_insert(0) += 1;
        if let Some(at) = item.delivered_at {
            let age = (now - DateTime::<Utc>::from(at)).num_seconds().max(0) as u64;
            report.oldest_unread_secs = Some(report.oldest_unread_secs.map_or(age, |o| o.max(age)));
        }
        if escalated.is_some_and(|e| e.contains(&item.message_id)) && !moot(&item.message_id) {
            report
                .escalated_to
                .insert(item.message_id.clone(), agent.clone());
            report.escalations.push(item.message_id);
        }
    }
}

/// One lock record, as shown in status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LockView {
    /// Targets.
    pub targets: Vec<String>,
    /// `exclusive`, `shared`, or `unreadable`.
    pub mode: String,
    /// Holder.
    pub agent: String,
    /// The holder's task.
    pub task_id: String,
    /// Until when it is held.
    pub until: DateTime<Utc>,
}

impl From<&crate::locks::Entry> for LockView {
    fn from(e: &crate::locks::Entry) -> LockView {
        match e {
            crate::locks::Entry::Held { record, .. } => LockView {
                targets: record.targets.clone(),
                mode: record.mode.to_string(),
                agent: record.agent.clone(),
                task_id: record.task_id.clone(),
                until: record.expires_at,
            },
            crate::locks::Entry::Corrupt {
                path, held_until, ..
            } => LockView {
                targets: vec![path.display().to_string()],
                mode: "unreadable".into(),
                agent: String::new(),
                task_id: String::new(),
                until: *held_until,
            },
        }
    }
}

/// The locks of one session among all lock records.
pub(crate) fn session_locks(entries: &[crate::locks::Entry], session: &str) -> Vec<LockView> {
    entries
        .iter()
        .filter(|e| match e {
            crate::locks::Entry::Held { record, .. } => record.session == session,
            crate::locks::Entry::Corrupt { session: s, .. } => s == session,
        })
        .map(LockView::from)
        .collect()
}

/// Builds the report of one session.
pub(crate) fn session_report(
    session: &SessionIndex,
    view: &SessionView,
    locks: Vec<LockView>,
) -> SessionReport {
    let problems: Vec<Problem> = session.diagnostics().map(Problem::from).collect();
    let errors = session
        .diagnostics()
        .filter(|d| d.severity == Severity::Error)
        .count();
    SessionReport {
        name: view.name.clone(),
        session_id: view.session_id.clone(),
        status: view.status,
        phase: view.phase,
        tasks_completed: view.tasks_completed,
        tasks_total: view.tasks_total,
        agents_active: view.agents_active.clone(),
        ready: view.ready().map(|t| t.task_id.clone()).collect(),
        overdue: view.overdue().map(|t| t.task_id.clone()).collect(),
        violations: view
            .tasks
            .iter()
            .filter(|t| t.violation)
            .map(|t| t.task_id.clone())
            .collect(),
        errors,
        warnings: problems.len() - errors,
        problems,
        locks,
        unread: Default::default(),
        oldest_unread_secs: None,
        escalations: Vec::new(),
        escalated_to: Default::default(),
        recipients_without_task: Vec::new(),
        blocked: view
            .tasks
            .iter()
            .filter(|t| t.state == squad_protocol::model::TaskStatus::Blocked)
            .map(|t| BlockedTask {
                task_id: t.task_id.clone(),
                agent: t.agent.clone(),
                blockers: t.blockers.clone(),
            })
            .collect(),
        error_reports: error_reports(session, view),
    }
}

/// The error reports of a session that still stand: a report about a task
/// completed since is settled.
fn error_reports(session: &SessionIndex, view: &SessionView) -> Vec<ErrorReportView> {
    use crate::index::Entry;
    let completed = |task: &str| {
        view.tasks
            .iter()
            .any(|t| t.task_id == task && t.state == squad_protocol::model::TaskStatus::Completed)
    };
    let mut out: Vec<ErrorReportView> = session
        .files
        .values()
        .filter_map(|f| match &f.entry {
            Entry::Error(e) if !e.task_id.as_deref().is_some_and(completed) => {
                Some(ErrorReportView {
                    error_id: e.error_id.clone(),
                    agent: e.agent.clone(),
                    task_id: e.task_id.clone(),
                    severity: e.severity.to_string(),
                    message: e.error_message.clone(),
                })
            }
            _ => None,
        })
        .collect();
    out.sort_by(|a, b| a.error_id.cmp(&b.error_id));
    out
}

/// One project root in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RootReport {
    /// The root.
    pub root: String,
    /// Whether the root (or its `.squad/sessions`) is missing.
    pub missing: bool,
    /// While missing: where its `.squad/` went (a directory of the root,
    /// `.squad-archive-<timestamp>` after `squad import --force`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
    /// Why squadd refused the policy file and runs on the previous policy
    /// (or the defaults), while it does (`null` with the daemon down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_refused: Option<String>,
    /// When the retention job runs next (by the policy's schedule).
    #[serde(default)]
    pub next_retention_run: Option<DateTime<Utc>>,
    /// Its sessions, by name.
    pub sessions: Vec<SessionReport>,
    /// Its skills (docs/skills.md).
    #[serde(default)]
    pub skills: crate::skills::SkillsHealth,
    /// Its team directory (docs/team.md).
    #[serde(default)]
    pub team: crate::team::TeamHealth,
    /// Its notify commands: queued, running, failed (from squadd; `null`
    /// when the daemon is down).
    #[serde(default)]
    pub hooks: Option<HooksReport>,
}

/// One warning or error squadd logged (its last few come with the status
/// answer: `daemon/logging.rs` keeps them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LogLine {
    /// When.
    pub at: DateTime<Utc>,
    /// `WARN` or `ERROR`.
    pub level: String,
    /// The message and its fields (`key=value`).
    pub text: String,
}

/// The daemon, as seen by `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub(crate) enum DaemonReport {
    /// Running and answering.
    Running {
        /// Process id.
        pid: u32,
        /// Seconds since start.
        uptime_secs: u64,
        /// squadd version.
        version: String,
        /// Roots it watches.
        roots: Vec<String>,
        /// The latest event.
        last_event: Option<Box<Event>>,
        /// Why squadd polls for changes instead of being told of them
        /// (no inotify instance could be had), when it does.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        polling: Option<String>,
        /// squadd's last warnings and errors, oldest first (its log may be
        /// a file: `squadctl top` shows them).
        #[serde(default)]
        warnings: Vec<LogLine>,
    },
    /// Not reachable; the report was read from the files.
    Down {
        /// Why the daemon could not be asked.
        reason: String,
    },
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StatusReport {
    /// Daemon state.
    pub daemon: DaemonReport,
    /// Roots.
    pub roots: Vec<RootReport>,
}

/// Builds a root's report straight from the files (the daemon is down).
pub(crate) fn report_from_files(
    root: &Path,
    session_filter: Option<&str>,
    threads: usize,
    now: DateTime<Utc>,
) -> std::io::Result<RootReport> {
    let sessions = scan_root(root, threads)?;
    let state = State::load(root);
    let ttl = crate::locks::load_policy(root)
        .map(|p| p.lock_default_ttl)
        .unwrap_or(std::time::Duration::from_secs(900));
    let locks = crate::locks::load(root, ttl).unwrap_or_default();
    let lead = crate::locks::load_policy(root)
        .ok()
        .and_then(|p| p.notices.lead);
    let empty = Default::default();
    let reports = sessions
        .values()
        .filter(|s| session_filter.is_none_or(|f| f == s.name))
        .map(|s| {
            let starts = state.task_starts.get(&s.name).unwrap_or(&empty);
            let derived = derive_session(s, starts, now);
            let mut report = session_report(s, &derived, session_locks(&locks, &s.name));
            let live = std::cell::OnceCell::new();
            let moot = |id: &str| {
                let live = live.get_or_init(|| {
                    crate::notice_ids::live_notice_ids(&s.name, s, &derived.tasks, lead.as_deref())
                });
                crate::notice_ids::is_moot(id, live)
            };
            add_messages(&mut report, s, state.escalated.get(&s.name), moot, now);
            report
        })
        .collect();
    let next_retention_run = crate::locks::load_policy(root)
        .ok()
        .and_then(|p| p.retention.schedule().ok())
        .and_then(|s| s.after(&now).next());
    Ok(RootReport {
        root: root.display().to_string(),
        missing: false,
        moved_to: None,
        policy_refused: None,
        next_retention_run,
        sessions: reports,
        skills: crate::skills::health(root),
        team: crate::team::health(root),
        hooks: None,
    })
}

fn duration(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 86400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d{}h", s / 86400, (s % 86400) / 3600),
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

/// Renders the report for people.
pub(crate) fn render_human(report: &StatusReport, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    match &report.daemon {
        DaemonReport::Running {
            pid,
            uptime_secs,
            version,
            roots,
            last_event,
            polling,
            ..
        } => {
            let _ = writeln!(
                out,
                "daemon: running (pid {pid}, up {}, squadd {version}), watching {} root{}",
                duration(*uptime_secs),
                roots.len(),
                if roots.len() == 1 { "" } else { "s" }
            );
            if let Some(e) = last_event {
                let age = (now - e.at).num_seconds().max(0) as u64;
                let _ = writeln!(out, "  last event {} ago: {}", duration(age), e.human());
            }
            if let Some(why) = polling {
                let _ = writeln!(out, "  POLLING for changes: {why}");
            }
        }
        DaemonReport::Down { reason } => {
            let _ = writeln!(out, "daemon: down ({reason}); read from the files");
        }
    }
    for root in &report.roots {
        let _ = writeln!(
            out,
            "root: {}{}",
            root.root,
            match (&root.missing, &root.moved_to) {
                (false, _) => String::new(),
                (true, None) => " (MISSING)".into(),
                (true, Some(to)) => format!(" (MISSING: its .squad/ was moved to {to}/)"),
            }
        );
        if let Some(next) = root.next_retention_run {
            let _ = writeln!(
                out,
                "  next retention run: {}",
                next.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        let sk = &root.skills;
        if sk.loaded + sk.errors + sk.warnings > 0 {
            let _ = writeln!(
                out,
                "  skills: {} loaded, {} skipped, {}{}",
                sk.loaded,
                sk.errors,
                crate::text::count(sk.warnings, "warning", "warnings"),
                if sk.shadowed > 0 {
                    format!(", {} shadowed", sk.shadowed)
                } else {
                    String::new()
                }
            );
            for p in &sk.problems {
                let _ = writeln!(out, "    {p}");
            }
        }
        let team = &root.team;
        if team.present {
            let _ = writeln!(
                out,
                "  team: {} members, {}, {}",
                team.members,
                crate::text::count(team.errors, "error", "errors"),
                crate::text::count(team.warnings, "warning", "warnings")
            );
            for p in &team.problems {
                let _ = writeln!(out, "    {p}");
            }
        }
        if let Some(h) = &root.hooks
            && (h.configured || h.queued + h.running > 0 || h.succeeded + h.failed > 0)
        {
            let _ = writeln!(
                out,
                "  hooks: {} queued{}, {} running, {} failed in the last hour ({} since start{})",
                h.queued,
                h.oldest_queued_secs
                    .map_or_else(String::new, |s| format!(" (oldest {})", duration(s))),
                h.running,
                h.failed_last_hour,
                h.failed,
                if h.consecutive_failures > 0 {
                    format!(", {} in a row", h.consecutive_failures)
                } else {
                    String::new()
                }
            );
        }
        if root.sessions.is_empty() {
            let _ = writeln!(out, "  no sessions");
        }
        for s in &root.sessions {
            let _ = writeln!(
                out,
                "  {}  {}  phase {}  tasks {}/{}  active: {}",
                s.name,
                s.status,
                s.phase.map_or_else(|| "-".to_string(), |p| p.to_string()),
                s.tasks_completed,
                s.tasks_total,
                list(&s.agents_active),
            );
            let _ = writeln!(
                out,
                "    ready: {}  overdue: {}  violations: {}",
                list(&s.ready),
                list(&s.overdue),
                list(&s.violations)
            );
            if !s.unread.is_empty() {
                let counts: Vec<String> = ["critical", "high", "medium", "low"]
                    .iter()
                    .filter_map(|p| s.unread.get(*p).map(|n| format!("{n} {p}")))
                    .collect();
                let _ = writeln!(
                    out,
                    "    unread messages: {}; oldest {}",
                    counts.join(", "),
                    s.oldest_unread_secs.map_or_else(|| "-".into(), duration)
                );
            }
            if !s.escalations.is_empty() {
                let _ = writeln!(out, "    escalations: {}", s.escalations.join(", "));
            }
            if !s.recipients_without_task.is_empty() {
                let _ = writeln!(
                    out,
                    "    messages to agents without a task here: {}",
                    s.recipients_without_task.join(", ")
                );
            }
            for l in &s.locks {
                let _ = writeln!(
                    out,
                    "    lock: {} ({}) {} {} until {}",
                    l.targets.join(", "),
                    l.mode,
                    l.agent,
                    l.task_id,
                    l.until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                );
            }
            if !s.problems.is_empty() {
                let _ = writeln!(
                    out,
                    "    problems: {} error{}, {} warning{}",
                    s.errors,
                    if s.errors == 1 { "" } else { "s" },
                    s.warnings,
                    if s.warnings == 1 { "" } else { "s" }
                );
                for p in s.problems.iter().take(10) {
                    let at = match (p.line, p.column) {
                        (Some(l), Some(c)) => format!("{}:{l}:{c}", p.path),
                        _ => p.path.clone(),
                    };
                    let _ = writeln!(out, "      {at}: {}[{}]: {}", p.severity, p.rule, p.message);
                }
                if s.problems.len() > 10 {
                    let _ = writeln!(
                        out,
                        "      … {} more (squadctl validate shows all)",
                        s.problems.len() - 10
                    );
                }
            }
        }
    }
    out
}

/// How a project's notify commands stand, as `status --json` (per root) and
/// `health` report them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HooksReport {
    /// Whether the policy names any notify command.
    pub configured: bool,
    /// Commands waiting for a free place (`hooks.max_concurrent`).
    pub queued: usize,
    /// Commands running now.
    pub running: usize,
    /// At most this many run at once (the policy's `hooks.max_concurrent`).
    pub max_concurrent: usize,
    /// How long the oldest queued command has waited, in seconds.
    pub oldest_queued_secs: Option<u64>,
    /// Commands that succeeded since squadd started.
    pub succeeded: u64,
    /// Commands that failed (after their retries) since squadd started.
    pub failed: u64,
    /// Of those, the ones that failed in the last hour.
    pub failed_last_hour: u64,
    /// Commands that failed one after the other, most recent last (0 once
    /// one succeeds).
    pub consecutive_failures: u64,
    /// Why the latest failure failed.
    pub last_error: Option<String>,
}
