//! The supervisor's outputs, rendered as pure functions: session-status.md and
//! shared-context.json. Callers write them atomically, and only when the
//! rendered bytes differ from what is on disk.

use crate::derive::SessionView;
use crate::index::{Progress, SessionIndex};
use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde_json::{Map, Value as Json, json};
use serde_yaml::{Mapping, Value as Yaml};
use squad_protocol::model::{Priority, SessionState, TaskStatus};
use squad_protocol::payload::{Encoding, extract};

/// The shared context file, relative to the project root: written by
/// squadd (daemon/core/outputs.rs) and replicated by the cluster
/// (cluster/context.rs).
pub(crate) const SHARED_CONTEXT: &str = ".claude/context/shared-context.json";

/// The largest shared context squadd reads back (it spans every task of
/// the root: 2.2 MB with 5,000 tasks, so a protocol file's 1 MB limit
/// would lose the top-level keys another tool added to a large one), and
/// the largest the cluster replicates (docs/cluster.md).
pub(crate) const MAX_CONTEXT_BYTES: u64 = 64 * 1024 * 1024;

/// The comment heading a session-status.md the supervisor created.
const STATUS_HEADER: &str =
    "# Session Status (maintained by squadd; derived fields are rewritten)\n";

fn key(s: &str) -> Yaml {
    Yaml::String(s.to_string())
}

/// A session id for a session whose status file is missing, from its
/// directory name: `sess_<dir name with _ for ->`.
pub(crate) fn session_id_for(dir_name: &str) -> String {
    let cleaned: String = dir_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("sess_{cleaned}")
}

/// The start time encoded in a session directory name, if it has one.
pub(crate) fn started_from_name(dir_name: &str) -> Option<DateTime<Utc>> {
    let stamp = dir_name.get(..16)?;
    NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ")
        .ok()
        .map(|t| t.and_utc())
}

fn timestamp(t: DateTime<Utc>) -> Yaml {
    Yaml::String(t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// Renders session-status.md for a session.
///
/// `existing` is the file's current text (None when missing). Derived fields
/// (`status`, `agents_active`, `tasks_total`, `tasks_completed`, and
/// `completed_at` when the session completes) are set; every other field,
/// the encoding and any markdown around the YAML are kept as found. Returns
/// `None` when the existing file cannot be safely rewritten (its YAML is not
/// a mapping): the supervisor never destroys what it cannot read.
pub(crate) fn render_status(
    existing: Option<&str>,
    view: &SessionView,
    now: DateTime<Utc>,
) -> Option<String> {
    let (mut map, prefix, suffix) = match existing {
        None => {
            let mut m = Mapping::new();
            m.insert(key("session_id"), key(&session_id_for(&view.name)));
            m.insert(
                key("started_at"),
                timestamp(started_from_name(&view.name).unwrap_or(now)),
            );
            (m, STATUS_HEADER.to_string(), String::new())
        }
        Some(text) => split_status(text)?,
    };
    map.insert(key("status"), key(view.status.as_str()));
    if view.status == SessionState::Completed && !map.contains_key("completed_at") {
        map.insert(key("completed_at"), timestamp(now));
    }
    if view.status == SessionState::Failed && !map.contains_key("failed_at") {
        map.insert(key("failed_at"), timestamp(now));
    }
    map.insert(
        key("agents_active"),
        Yaml::Sequence(view.agents_active.iter().map(|a| key(a)).collect()),
    );
    map.insert(key("tasks_total"), Yaml::Number(view.tasks_total.into()));
    map.insert(
        key("tasks_completed"),
        Yaml::Number(view.tasks_completed.into()),
    );
    let body = serde_yaml::to_string(&Yaml::Mapping(map)).ok()?;
    Some(format!("{prefix}{body}{suffix}"))
}

/// Sets top-level fields of a status file's YAML, keeping its encoding,
/// other fields and surrounding markdown; `None` when the YAML is not a
/// mapping (then the file is left alone).
pub(crate) fn set_status_fields(text: &str, fields: &[(&str, String)]) -> Option<String> {
    let (mut map, prefix, suffix) = split_status(text)?;
    for (k, v) in fields {
        map.insert(key(k), Yaml::String(v.clone()));
    }
    let body = serde_yaml::to_string(&Yaml::Mapping(map)).ok()?;
    Some(format!("{prefix}{body}{suffix}"))
}

/// Sets one field of a status file's YAML below a top-level mapping (e.g.
/// `validation_gates.design`), creating the mapping when absent; keeps the
/// rest as [`set_status_fields`] does. `None` when the YAML, or the value at
/// `parent`, is not a mapping.
pub(crate) fn set_status_nested(
    text: &str,
    parent: &str,
    field: &str,
    value: &str,
) -> Option<String> {
    let (mut map, prefix, suffix) = split_status(text)?;
    let inner = map
        .entry(key(parent))
        .or_insert_with(|| Yaml::Mapping(Mapping::new()));
    match inner {
        Yaml::Mapping(m) => {
            m.insert(key(field), Yaml::String(value.to_string()));
        }
        Yaml::Null => {
            let mut m = Mapping::new();
            m.insert(key(field), Yaml::String(value.to_string()));
            *inner = Yaml::Mapping(m);
        }
        _ => return None,
    }
    let body = serde_yaml::to_string(&Yaml::Mapping(map)).ok()?;
    Some(format!("{prefix}{body}{suffix}"))
}

/// A status file's YAML mapping, and the text before and after it (plain
/// YAML gets the supervisor's header back, since comments do not survive a
/// YAML round trip). `None` when the YAML is not a mapping.
fn split_status(text: &str) -> Option<(Mapping, String, String)> {
    let payload = extract(text).ok()?;
    let start = (payload.yaml.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let end = start + payload.yaml.len();
    let map = match squad_protocol::depth::from_str::<Yaml>(payload.yaml).ok()? {
        Yaml::Mapping(m) => m,
        _ => return None,
    };
    let prefix = match payload.encoding {
        Encoding::PlainYaml => STATUS_HEADER.to_string(),
        _ => text[..start].to_string(),
    };
    Some((map, prefix, text[end..].to_string()))
}

/// Renders summary.md for a session that ended. `recorded`: the tasks that
/// violated their dependencies during the session (with the prerequisites
/// unmet then), counted even when they no longer do.
pub(crate) fn render_summary(
    session: &SessionIndex,
    view: &SessionView,
    escalations: &[String],
    recorded: &std::collections::BTreeMap<String, Vec<String>>,
    now: DateTime<Utc>,
) -> String {
    use crate::index::Entry;
    use std::fmt::Write as _;
    let stamp = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut out = format!("# Session summary: {}\n\n", view.name);
    let status_info = session.status();
    let _ = writeln!(
        out,
        "- session id: {}\n- status: **{}**{}\n- phase: {}\n- started: {}\n- summary written: {}\n",
        view.session_id.as_deref().unwrap_or("-"),
        view.status,
        status_info
            .and_then(|s| s.failed_at.or(s.completed_at))
            .map(|t| format!(" at {}", stamp(t.with_timezone(&Utc))))
            .unwrap_or_default(),
        view.phase
            .map_or_else(|| "-".to_string(), |p| p.to_string()),
        status_info.map_or_else(
            || "-".to_string(),
            |s| stamp(s.started_at.with_timezone(&Utc))
        ),
        stamp(now),
    );
    let _ = writeln!(
        out,
        "## Tasks\n\n| Task | Agent | Status | Duration | Artifacts |\n|---|---|---|---|---|"
    );
    for t in &view.tasks {
        let report = session
            .progress()
            .filter(|p| p.task_id == t.task_id && p.agent == t.agent)
            .max_by_key(|p| p.updated_at);
        let finished = report
            .filter(|p| p.status == squad_protocol::model::TaskStatus::Completed)
            .map(|p| p.completed_at.unwrap_or(p.updated_at));
        let duration = match (t.started_at, finished) {
            (Some(a), Some(b)) => {
                squad_policies::duration::format_duration((b - a).to_std().unwrap_or_default())
            }
            _ => "-".into(),
        };
        let artifacts = report
            .map(|p| {
                p.artifacts
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {duration} | {artifacts} |",
            t.task_id, t.agent, t.state
        );
    }
    let mut by_priority = std::collections::BTreeMap::new();
    let mut by_severity = std::collections::BTreeMap::new();
    let (mut messages, mut errors) = (0, 0);
    for f in session.files.values() {
        match &f.entry {
            Entry::Message(m) => {
                messages += 1;
                *by_priority.entry(m.priority).or_insert(0) += 1;
            }
            Entry::Error(e) => {
                errors += 1;
                *by_severity.entry(e.severity).or_insert(0) += 1;
            }
            _ => {}
        }
    }
    let _ = writeln!(out, "\n## Messages\n\n| Priority | Messages |\n|---|---|");
    for p in Priority::ALL {
        let _ = writeln!(
            out,
            "| {p} | {} |",
            by_priority.get(p).copied().unwrap_or(0)
        );
    }
    if escalations.is_empty() {
        let _ = writeln!(out, "\nEscalations: none.");
    } else {
        let _ = writeln!(
            out,
            "\nEscalations ({}): {}",
            escalations.len(),
            escalations.join(", ")
        );
    }
    let _ = writeln!(out, "\n## Errors\n\n| Severity | Reports |\n|---|---|");
    for s in squad_protocol::model::ErrorSeverity::ALL {
        let _ = writeln!(
            out,
            "| {s} | {} |",
            by_severity.get(s).copied().unwrap_or(0)
        );
    }
    let problems: Vec<_> = session.diagnostics().collect();
    // Every violation seen during the session (a task that started early
    // no longer violates once its prerequisites complete), and any still
    // standing.
    let mut violations: std::collections::BTreeMap<&str, &[String]> = recorded
        .iter()
        .map(|(t, unmet)| (t.as_str(), unmet.as_slice()))
        .collect();
    for t in view.tasks.iter().filter(|t| t.violation) {
        violations
            .entry(t.task_id.as_str())
            .or_insert(t.unmet.as_slice());
    }
    let _ = writeln!(out, "\n## Problems\n");
    if problems.is_empty() && violations.is_empty() {
        let _ = writeln!(out, "None.");
    }
    for (t, unmet) in &violations {
        let before = if unmet.is_empty() {
            "its prerequisites".to_string()
        } else {
            unmet
                .iter()
                .map(|u| format!("`{u}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "- dependency violation: `{t}` ran before {before} completed"
        );
    }
    for d in &problems {
        let _ = writeln!(
            out,
            "- `{}`: {}[{}]: {}",
            d.position(),
            d.severity,
            d.rule,
            d.message
        );
    }
    let _ = writeln!(
        out,
        "\n## Totals\n\n- tasks: {} ({} completed)\n- messages: {messages}\n- error reports: {errors}\n- validation problems: {}\n- dependency violations: {}",
        view.tasks_total,
        view.tasks_completed,
        problems.len(),
        violations.len()
    );
    out
}

/// The SharedContext 2.0.0 priority: low|medium|high (critical is written as high).
fn shared_priority(p: Priority) -> &'static str {
    match p {
        Priority::Critical | Priority::High => "high",
        Priority::Medium => "medium",
        Priority::Low => "low",
    }
}

/// The SharedContext 2.0.0 status: pending|blocked|in_progress|complete.
fn shared_status(s: TaskStatus) -> &'static str {
    match s {
        TaskStatus::Pending => "pending",
        TaskStatus::Blocked => "blocked",
        TaskStatus::InProgress => "in_progress",
        TaskStatus::Completed => "complete",
    }
}

/// One session's part of the shared context, kept by the daemon and brought
/// up to date task by task as the session changes: the file is assembled
/// from these parts without re-serializing what did not change.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ContextFragment {
    /// Per progress update with decisions, in time order: (agent, stamp,
    /// decisions).
    decisions: Vec<(String, String, Vec<Json>)>,
    /// Per task, sorted by task id: whether it is completed, and its entry
    /// pretty-printed. A vector sized to fit, not a `BTreeMap` (a node has
    /// room for eleven entries, a session has a few tasks), and the texts
    /// without the spare capacity pretty-printing leaves (about a quarter):
    /// 1,000 sessions of 5 tasks held 1.9 MB in them (issue 23 item 2).
    entries: Vec<(Box<str>, bool, Box<str>)>,
}

/// A task's `tasks_completed` or `tasks_pending` entry, given its
/// assignee's latest progress update (`report`). A task is (session, id): a
/// later session may reuse an id, so each entry names its session (the
/// directory name; an extension of SharedContext 2.0.0, whose readers
/// ignore unknown keys).
fn context_entry(
    session: &str,
    t: &crate::derive::TaskView,
    report: Option<&crate::index::Progress>,
) -> (Box<str>, bool, Box<str>) {
    let (done, text) = context_entry_text(session, t, report);
    (t.task_id.as_str().into(), done, text.into_boxed_str())
}

fn context_entry_text(
    session: &str,
    t: &crate::derive::TaskView,
    report: Option<&crate::index::Progress>,
) -> (bool, String) {
    let pretty = |v: Json| serde_json::to_string_pretty(&v).unwrap_or_default();
    if t.state == TaskStatus::Completed {
        let when = report.map(|p| p.completed_at.unwrap_or(p.updated_at));
        return (
            true,
            pretty(json!({
                "agent": t.agent,
                "task": t.task_id,
                "session": session,
                "timestamp": when.map(|w| w.to_rfc3339_opts(SecondsFormat::Secs, true)),
                "files_modified": report.map(|p| p.artifacts.clone()).unwrap_or_default(),
            })),
        );
    }
    let blocker_reason = if !t.blockers.is_empty() {
        Json::String(t.blockers.join("; "))
    } else if !t.unmet.is_empty() {
        Json::String(format!("waiting for {}", t.unmet.join(", ")))
    } else {
        Json::Null
    };
    (
        false,
        pretty(json!({
            "task": t.task_id,
            "session": session,
            "assigned_to": t.agent,
            "priority": shared_priority(t.priority),
            "dependencies": t.prerequisites,
            "status": shared_status(t.state),
            "blocker_reason": blocker_reason,
        })),
    )
}

impl ContextFragment {
    /// Brings the part of session `session` up to date: its `decisions`
    /// (every progress update with decisions, in time order; `None` when
    /// they did not change), and the entries of the `changed` tasks (every
    /// task when `None`), each with its assignee's latest `report`.
    pub(crate) fn update<'a>(
        &mut self,
        session: &str,
        decisions: Option<impl Iterator<Item = &'a Progress>>,
        report: impl Fn(&str, &str) -> Option<&'a Progress>,
        tasks: impl Fn(&str) -> Option<&'a crate::derive::TaskView>,
        all: impl Iterator<Item = &'a crate::derive::TaskView>,
        changed: Option<&std::collections::BTreeSet<String>>,
    ) {
        if let Some(decisions) = decisions {
            self.decisions = decisions
                .map(|p| {
                    (
                        p.agent.clone(),
                        p.updated_at.to_rfc3339_opts(SecondsFormat::Secs, true),
                        p.decisions
                            .iter()
                            .map(|d| json!({"type": d.kind, "description": d.description, "data": d.data}))
                            .collect(),
                    )
                })
                .collect();
        }
        let entry =
            |t: &crate::derive::TaskView| context_entry(session, t, report(&t.task_id, &t.agent));
        match changed {
            None => {
                self.entries = all.map(entry).collect();
                self.entries.sort_by(|a, b| a.0.cmp(&b.0));
                self.entries.dedup_by(|a, b| a.0 == b.0);
                self.entries.shrink_to_fit();
            }
            Some(changed) => {
                for id in changed {
                    let at = self.entries.binary_search_by(|e| (*e.0).cmp(id.as_str()));
                    match (tasks(id), at) {
                        (Some(t), Ok(at)) => self.entries[at] = entry(t),
                        (Some(t), Err(at)) => {
                            // One more slot, not a doubling.
                            self.entries.reserve_exact(1);
                            self.entries.insert(at, entry(t));
                        }
                        (None, Ok(at)) => {
                            self.entries.remove(at);
                        }
                        (None, Err(_)) => {}
                    }
                }
            }
        }
    }
}

/// Renders one session's part of the shared context from scratch, from
/// every file of the session (the daemon updates parts in place from its
/// indexes, `SessionCore::refresh_context`; tests compare with this).
#[cfg(test)]
pub(crate) fn context_fragment(session: &SessionIndex, view: &SessionView) -> ContextFragment {
    let mut in_time_order: Vec<&Progress> = session.progress().collect();
    in_time_order.sort_by_key(|p| p.updated_at);
    // The assignee's latest, the first by file name of equally recent ones.
    let report = |task: &str, agent: &str| {
        session
            .progress()
            .filter(|p| p.task_id == task && p.agent == agent)
            .fold(None, |best: Option<&Progress>, p| match best {
                Some(b) if p.updated_at <= b.updated_at => Some(b),
                _ => Some(p),
            })
    };
    let mut out = ContextFragment::default();
    out.update(
        &session.name,
        Some(
            in_time_order
                .into_iter()
                .filter(|p| !p.decisions.is_empty()),
        ),
        report,
        |id| view.tasks.iter().find(|t| t.task_id == id),
        view.tasks.iter(),
        None,
    );
    out
}

/// Appends a pretty-printed array at the top level of the file from its
/// entries' own pretty text (each nested one level deeper). The entries
/// are serde_json's pretty output: lines end in `\n` alone, none at the end.
fn push_top_level_array<'a>(out: &mut String, entries: impl Iterator<Item = &'a str>) {
    let mut empty = true;
    for e in entries {
        out.push_str(if empty { "[\n" } else { ",\n" });
        empty = false;
        for (n, line) in e.split('\n').enumerate() {
            if n > 0 {
                out.push('\n');
            }
            out.push_str("    ");
            out.push_str(line);
        }
    }
    out.push_str(if empty { "[]" } else { "\n  ]" });
}

/// The top-level object of an existing shared-context file (empty when it
/// is missing or not a JSON object: then it is replaced).
pub(crate) fn existing_context(existing: Option<&str>) -> Map<String, Json> {
    existing
        .and_then(|t| serde_json::from_str::<Json>(t).ok())
        .and_then(|v| match v {
            Json::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default()
}

/// Assembles `.claude/context/shared-context.json` from the sessions' parts
/// (in session order) over the existing file's top-level object.
///
/// `agent_decisions`, `tasks_completed`, `tasks_pending` and `schema_version`
/// are derived; every other top-level key of `existing` is kept in place.
/// Also returns the object as assembled (with the task arrays as markers),
/// which stands for the file's object as long as the file is unchanged.
pub(crate) fn assemble_context(
    mut root: Map<String, Json>,
    fragments: &[&ContextFragment],
) -> (String, Map<String, Json>) {
    // agent -> (latest timestamp, decisions in (time, session, file) order)
    let mut decisions: std::collections::BTreeMap<&str, (String, Vec<Json>)> = Default::default();
    for f in fragments {
        for (agent, stamp, list) in &f.decisions {
            let entry = decisions
                .entry(agent.as_str())
                .or_insert_with(|| (stamp.clone(), Vec::new()));
            if *stamp > entry.0 {
                entry.0 = stamp.clone();
            }
            entry.1.extend(list.iter().cloned());
        }
    }
    let agent_decisions: Map<String, Json> = decisions
        .into_iter()
        .map(|(agent, (stamp, list))| {
            (
                agent.to_string(),
                json!({"timestamp": stamp, "decisions": list}),
            )
        })
        .collect();
    // The task arrays are spliced in as text: markers that no JSON value
    // of another key can contain (a NUL is escaped inside strings).
    const COMPLETED: &str = "\u{0}squad-tasks-completed\u{0}";
    const PENDING: &str = "\u{0}squad-tasks-pending\u{0}";
    root.insert("schema_version".into(), json!("2.0.0"));
    root.insert("agent_decisions".into(), Json::Object(agent_decisions));
    root.insert("tasks_completed".into(), json!(COMPLETED));
    root.insert("tasks_pending".into(), json!(PENDING));
    let head = format!("{:#}\n", Json::Object(root.clone()));
    // One buffer for the whole file, its size guessed from the entries (a
    // line's indent is under a quarter of it): the text is megabytes, and
    // building it in pieces and splicing them in cost three copies of it
    // and a fresh allocation each, most of the background writer's time.
    let entries: usize = fragments
        .iter()
        .flat_map(|f| f.entries.iter())
        .map(|(_, _, t)| t.len() + 2)
        .sum();
    let mut text = String::with_capacity(head.len() + entries + entries / 4 + 16);
    let marker = |m: &str| serde_json::to_string(m).unwrap_or_default();
    let mut spliced = [(marker(COMPLETED), true), (marker(PENDING), false)].map(|(m, done)| {
        let at = head.find(&m);
        (m, done, at)
    });
    spliced.sort_by_key(|(_, _, at)| *at);
    let mut from = 0;
    for (m, done, at) in spliced {
        let Some(at) = at else { continue };
        text.push_str(&head[from..at]);
        push_top_level_array(
            &mut text,
            fragments.iter().flat_map(|f| {
                f.entries
                    .iter()
                    .filter(move |(_, d, _)| *d == done)
                    .map(|(_, _, t)| &**t)
            }),
        );
        from = at + m.len();
    }
    text.push_str(&head[from..]);
    (text, root)
}

/// [`assemble_context`] over the text of the existing file.
#[cfg(test)]
pub(crate) fn assemble_shared_context(
    existing: Option<&str>,
    fragments: &[&ContextFragment],
) -> String {
    assemble_context(existing_context(existing), fragments).0
}

/// Renders `.claude/context/shared-context.json` from every session of a
/// project (in the order given, which should be by name); see
/// [`assemble_shared_context`]. For tests: the daemon assembles its
/// fragments as they change.
#[cfg(test)]
pub(crate) fn render_shared_context(
    existing: Option<&str>,
    sessions: &[(&SessionIndex, &SessionView)],
) -> String {
    let fragments: Vec<ContextFragment> = sessions
        .iter()
        .map(|(s, v)| context_fragment(s, v))
        .collect();
    let refs: Vec<&ContextFragment> = fragments.iter().collect();
    assemble_shared_context(existing, &refs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::{TaskStarts, derive_session};
    use crate::index::index_bytes;
    use chrono::TimeZone;
    use squad_protocol::FileKind;
    use std::path::PathBuf;

    fn session(files: &[(&str, &str)]) -> SessionIndex {
        let dir = PathBuf::from("/p/.squad/sessions/20240115T100000Z-x");
        let mut s = SessionIndex::new(dir.clone());
        for (name, text) in files {
            let kind = FileKind::from_file_name(name).unwrap();
            s.insert(
                (*name).to_string(),
                index_bytes(&dir.join(name), kind, text.as_bytes()),
            );
        }
        s
    }

    const PLAN: &str = "meta:\n  task_id: task_1\n  agent: a\n  created_at: 2024-01-15T10:00:00Z\n  priority: critical\ninstruction: x\n";
    const DONE: &str = "meta:\n  task_id: task_1\n  agent: a\n  updated_at: 2024-01-15T10:05:00Z\nstatus: completed\nartifacts_created:\n  - path: src/a.rs\n";

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 15, 11, 0, 0).unwrap()
    }

    #[test]
    fn a_missing_status_file_is_created_from_the_directory_name() {
        let s = session(&[("role-plan-a-task_1.md", PLAN)]);
        let v = derive_session(&s, &TaskStarts::new(), now());
        let text = render_status(None, &v, now()).unwrap();
        let y: Yaml = serde_yaml::from_str(&text).unwrap();
        assert_eq!(y["session_id"], "sess_20240115T100000Z_x");
        assert_eq!(y["started_at"], "2024-01-15T10:00:00Z");
        assert_eq!(y["status"], "active");
        assert_eq!(y["tasks_total"], 1);
        // What we render validates.
        let r = squad_protocol::check_text(
            std::path::Path::new("session-status.md"),
            FileKind::SessionStatus,
            &text,
        );
        assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    }

    #[test]
    fn rewriting_preserves_other_fields_encoding_and_markdown() {
        let existing = "---\nsession_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\nphase: design\ncustom: kept\nvalidation_gates:\n  design: passed\ntasks_total: 9\n---\n\n# Notes\nhuman text\n";
        let s = session(&[
            ("role-plan-a-task_1.md", PLAN),
            ("role-comm-a-task_1.md", DONE),
        ]);
        let v = derive_session(&s, &TaskStarts::new(), now());
        let text = render_status(Some(existing), &v, now()).unwrap();
        assert!(text.starts_with("---\nsession_id: sess_1\n"), "{text}");
        assert!(text.ends_with("---\n\n# Notes\nhuman text\n"), "{text}");
        let payload = extract(&text).unwrap();
        let y: Yaml = serde_yaml::from_str(payload.yaml).unwrap();
        assert_eq!(y["custom"], "kept");
        assert_eq!(y["phase"], "design");
        assert_eq!(y["validation_gates"]["design"], "passed");
        assert_eq!(y["tasks_total"], 1);
        assert_eq!(y["status"], "completed");
        assert_eq!(y["completed_at"], "2024-01-15T11:00:00Z");
        // Rendering again changes nothing (no rewrite loops).
        let again = render_status(Some(&text), &v, now() + chrono::Duration::hours(1)).unwrap();
        assert_eq!(again, text);
    }

    #[test]
    fn unreadable_status_files_are_left_alone() {
        let v = derive_session(&session(&[]), &TaskStarts::new(), now());
        assert_eq!(render_status(Some("status: [broken"), &v, now()), None);
        assert_eq!(render_status(Some("- a list\n"), &v, now()), None);
    }

    #[test]
    fn shared_context_shape_and_preserved_keys() {
        let s = session(&[
            ("role-plan-a-task_1.md", PLAN),
            (
                "role-plan-b-task_2.md",
                &PLAN
                    .replace("task_1", "task_2")
                    .replace("agent: a", "agent: b")
                    .replace("critical", "low"),
            ),
            ("role-comm-a-task_1.md", DONE),
        ]);
        let v = derive_session(&s, &TaskStarts::new(), now());
        let existing =
            r#"{"custom": {"x": 1}, "schema_version": "1.0.0", "tasks_pending": "junk"}"#;
        let text = render_shared_context(Some(existing), &[(&s, &v)]);
        let j: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(j["custom"]["x"], 1);
        assert_eq!(j["schema_version"], "2.0.0");
        assert_eq!(j["tasks_completed"][0]["files_modified"][0], "src/a.rs");
        assert_eq!(j["tasks_completed"][0]["timestamp"], "2024-01-15T10:05:00Z");
        assert_eq!(j["tasks_pending"][0]["task"], "task_2");
        assert_eq!(j["tasks_pending"][0]["priority"], "low");
        assert_eq!(j["tasks_pending"][0]["status"], "pending");
        // Key order: existing keys keep their place.
        let keys: Vec<&String> = j.as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "custom");
        // Garbage is replaced, not merged.
        let j: Json =
            serde_json::from_str(&render_shared_context(Some("[1,2"), &[(&s, &v)])).unwrap();
        assert_eq!(j["tasks_pending"].as_array().unwrap().len(), 1);
        // The spliced text is exactly serde_json's pretty form.
        let again: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(format!("{again:#}\n"), text);
        // Critical is written as high; in_progress and blocked map through.
        assert_eq!(shared_priority(Priority::Critical), "high");
        assert_eq!(shared_status(TaskStatus::Completed), "complete");
    }

    /// The file is assembled in one buffer from the entries' texts: byte
    /// for byte serde_json's pretty form of the whole, with both arrays
    /// empty, one empty, or several entries from several sessions, and a
    /// foreign key sorting between the two arrays.
    #[test]
    fn the_assembled_shared_context_is_serde_jsons_pretty_form() {
        let plan = |id: &str| PLAN.replace("task_1", id);
        let done = |id: &str| DONE.replace("task_1", id);
        let empty = session(&[]);
        let pending = session(&[
            ("role-plan-a-task_1.md", &plan("task_1")),
            ("role-plan-a-task_2.md", &plan("task_2")),
        ]);
        let mixed = session(&[
            ("role-plan-a-task_1.md", &plan("task_1")),
            ("role-plan-a-task_2.md", &plan("task_2")),
            ("role-plan-a-task_3.md", &plan("task_3")),
            ("role-comm-a-task_1.md", &done("task_1")),
            ("role-comm-a-task_3.md", &done("task_3")),
        ]);
        let views: Vec<_> = [&empty, &pending, &mixed]
            .iter()
            .map(|s| derive_session(s, &TaskStarts::new(), now()))
            .collect();
        let cases: [&[(&SessionIndex, &SessionView)]; 4] = [
            &[(&empty, &views[0])],
            &[(&pending, &views[1])],
            &[(&mixed, &views[2]), (&pending, &views[1])],
            &[(&empty, &views[0]), (&mixed, &views[2])],
        ];
        for (n, sessions) in cases.iter().enumerate() {
            for existing in [None, Some(r#"{"tasks_nothing": [1, {"a": "b"}], "z": 2}"#)] {
                let text = render_shared_context(existing, sessions);
                let j: Json = serde_json::from_str(&text).unwrap();
                assert_eq!(format!("{j:#}\n"), text, "case {n}, {existing:?}");
            }
        }
    }
}
