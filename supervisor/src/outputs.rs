//! The supervisor's outputs, rendered as pure functions: session-status.md and
//! shared-context.json. Callers write them atomically, and only when the
//! rendered bytes differ from what is on disk.

use crate::derive::SessionView;
use crate::index::SessionIndex;
use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};
use serde_json::{Map, Value as Json, json};
use serde_yaml::{Mapping, Value as Yaml};
use squad_protocol::model::{Priority, SessionState, TaskStatus};
use squad_protocol::payload::{Encoding, extract};

/// The comment heading a session-status.md the supervisor created.
const STATUS_HEADER: &str =
    "# Session Status (maintained by squadd; derived fields are rewritten)\n";

fn key(s: &str) -> Yaml {
    Yaml::String(s.to_string())
}

/// A session id for a session whose status file is missing, from its
/// directory name: `sess_<dir name with _ for ->`.
pub fn session_id_for(dir_name: &str) -> String {
    let cleaned: String = dir_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("sess_{cleaned}")
}

/// The start time encoded in a session directory name, if it has one.
pub fn started_from_name(dir_name: &str) -> Option<DateTime<Utc>> {
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
pub fn render_status(
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
        Some(text) => {
            let payload = extract(text).ok()?;
            let start = (payload.yaml.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
            let end = start + payload.yaml.len();
            let map = match serde_yaml::from_str::<Yaml>(payload.yaml).ok()? {
                Yaml::Mapping(m) => m,
                _ => return None,
            };
            let prefix = match payload.encoding {
                // Comments do not survive a YAML round trip; keep a header.
                Encoding::PlainYaml => STATUS_HEADER.to_string(),
                _ => text[..start].to_string(),
            };
            (map, prefix, text[end..].to_string())
        }
    };
    map.insert(key("status"), key(view.status.as_str()));
    if view.status == SessionState::Completed && !map.contains_key("completed_at") {
        map.insert(key("completed_at"), timestamp(now));
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

/// Renders `.claude/context/shared-context.json` from every session of a
/// project (in the order given, which should be by name).
///
/// `agent_decisions`, `tasks_completed`, `tasks_pending` and `schema_version`
/// are derived; every other top-level key of `existing` is kept in place. An
/// existing file that is not a JSON object is replaced.
pub fn render_shared_context(
    existing: Option<&str>,
    sessions: &[(&SessionIndex, &SessionView)],
) -> String {
    let mut root: Map<String, Json> = existing
        .and_then(|t| serde_json::from_str::<Json>(t).ok())
        .and_then(|v| match v {
            Json::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();

    // agent -> (latest timestamp, decisions in (time, session, file) order)
    let mut decisions: std::collections::BTreeMap<&str, (String, Vec<Json>)> = Default::default();
    let mut completed = Vec::new();
    let mut pending = Vec::new();
    for (session, view) in sessions {
        let mut progress: Vec<_> = session.progress().collect();
        progress.sort_by_key(|p| p.updated_at);
        for p in &progress {
            if p.decisions.is_empty() {
                continue;
            }
            let stamp = p.updated_at.to_rfc3339_opts(SecondsFormat::Secs, true);
            let entry = decisions
                .entry(p.agent.as_str())
                .or_insert_with(|| (stamp.clone(), Vec::new()));
            if stamp > entry.0 {
                entry.0 = stamp.clone();
            }
            entry.1.extend(
                p.decisions
                    .iter()
                    .map(|d| json!({"type": d.kind, "description": d.description, "data": d.data})),
            );
        }
        for t in &view.tasks {
            let report = progress
                .iter()
                .rev()
                .find(|p| p.task_id == t.task_id && p.agent == t.agent);
            if t.state == TaskStatus::Completed {
                let when = report.map(|p| p.completed_at.unwrap_or(p.updated_at));
                completed.push(json!({
                    "agent": t.agent,
                    "task": t.task_id,
                    "timestamp": when.map(|w| w.to_rfc3339_opts(SecondsFormat::Secs, true)),
                    "files_modified": report.map(|p| p.artifacts.clone()).unwrap_or_default(),
                }));
            } else {
                let blocker_reason = if !t.blockers.is_empty() {
                    Json::String(t.blockers.join("; "))
                } else if !t.unmet.is_empty() {
                    Json::String(format!("waiting for {}", t.unmet.join(", ")))
                } else {
                    Json::Null
                };
                pending.push(json!({
                    "task": t.task_id,
                    "assigned_to": t.agent,
                    "priority": shared_priority(t.priority),
                    "dependencies": t.prerequisites,
                    "status": shared_status(t.state),
                    "blocker_reason": blocker_reason,
                }));
            }
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
    root.insert("schema_version".into(), json!("2.0.0"));
    root.insert("agent_decisions".into(), Json::Object(agent_decisions));
    root.insert("tasks_completed".into(), Json::Array(completed));
    root.insert("tasks_pending".into(), Json::Array(pending));
    format!("{:#}\n", Json::Object(root))
}
