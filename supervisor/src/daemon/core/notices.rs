//! The decisions of squadd's notices to agents (docs/notices.md): which
//! standing facts a session has, and which notice files a tapped fact calls
//! for that do not exist yet (a task no longer ready is not announced; a
//! fact already told, before a restart too, is never told again: the file
//! is the record). The shell writes the files as one group commit and
//! routes them from the bytes it wrote (`daemon/notices.rs`).

use super::{Effect, Now, Root, RootId};
use crate::events::EventKind;
use chrono::{DateTime, SecondsFormat, Utc};
use squad_policies::notices::{Fact, SENDER, notices, writer_of};
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, TaskStatus,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub(crate) use crate::notice_ids::{is_moot, live_notice_ids, notice_id};

/// One notice file to write (new: the file is the record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NoticeFile {
    /// The root.
    pub root: RootId,
    /// Session directory name.
    pub session: String,
    /// The file's name.
    pub file: String,
    /// The file.
    pub path: std::path::PathBuf,
    /// Its text.
    pub text: String,
}

/// The most diagnostics an invalid-file notice lists.
const MAX_LISTED: usize = 20;

/// A session was loaded at start-up: every standing fact of it (ready,
/// overdue and violating tasks) is tapped, in task order. Invalid files
/// are tapped by their own `file-invalid` events.
pub(crate) fn standing_facts(root: &Root, id: RootId, session: &str) -> Vec<Effect> {
    standing_facts_but(root, id, session, &[])
}

/// [`standing_facts`] but the overdue facts of `told`: the load reported
/// them as `task-overdue` events, which are tapped already (at start-up
/// a tap each rather than two: issue 23 item 2).
pub(crate) fn standing_facts_but(
    root: &Root,
    id: RootId,
    session: &str,
    told: &[EventKind],
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    let mut effects = Vec::new();
    let mut tap = |kind| {
        effects.push(Effect::Tap {
            root: id,
            session: session.to_string(),
            kind,
        })
    };
    for t in core.tasks().values() {
        if t.ready {
            tap(EventKind::TaskReady {
                task_id: t.task_id.clone(),
                agent: t.agent.clone(),
            });
        }
        let reported = |k: &EventKind| matches!(k, EventKind::TaskOverdue { task_id, .. } if *task_id == t.task_id);
        if t.overdue && !told.iter().any(reported) {
            tap(EventKind::TaskOverdue {
                task_id: t.task_id.clone(),
                agent: t.agent.clone(),
            });
        }
        if t.violation {
            tap(EventKind::DependencyViolation {
                task_id: t.task_id.clone(),
                unmet: t.unmet.clone(),
            });
        }
    }
    effects
}

/// The most tapped facts one batch turns into notices: a start-up with
/// thousands of standing facts writes them a batch per wake-up, after
/// READY, never holding up readiness, the control socket or a file change
/// for longer than one batch.
pub(crate) const NOTICE_BATCH: usize = 256;

/// The most tapped facts turned into notices before READY (the first
/// batch, smaller than [`NOTICE_BATCH`]): what readiness may cost in
/// notices, however many a start-up owes.
pub(crate) const STARTUP_NOTICES: usize = 32;

/// A tapped event as the event log took it: (session if any, the file it
/// is about, the event).
pub(crate) type TappedEvent = (Option<String>, Option<PathBuf>, EventKind);

/// The events of one batch tapped in this root, in order
/// ([`super::Input::NoticesTapped`]): with `cluster:` only the leader
/// tells; an event of no session concerns no agent; the rest as
/// [`tapped`] (one notice per file across the whole batch).
pub(crate) fn batch_tapped(
    root: &mut Root,
    id: RootId,
    events: Vec<TappedEvent>,
    now: Now,
) -> Vec<Effect> {
    if !root.leads {
        return Vec::new();
    }
    let facts: Vec<super::input::TappedFact> = events
        .into_iter()
        .filter_map(|(session, path, kind)| Some((session?, path, kind)))
        .collect();
    // A moot notice whose fact stands again escalates now (the sessions
    // whose facts changed in the batch).
    let sessions: BTreeSet<String> = facts.iter().map(|(s, _, _)| s.clone()).collect();
    let mut effects = tapped(root, id, facts, now);
    for s in &sessions {
        effects.extend(super::escalations::recheck(root, id, s, now));
    }
    effects
}

/// Facts (each of a session) as tapped events.
#[cfg(test)]
pub(crate) fn some(facts: Vec<super::input::TappedFact>) -> Vec<TappedEvent> {
    facts.into_iter().map(|(s, p, k)| (Some(s), p, k)).collect()
}

/// Facts tapped in this root (session, path, event), in order: one
/// [`Effect::WriteNotice`] per notice file they call for, the same file
/// once however often its fact was tapped.
pub(crate) fn tapped(
    root: &Root,
    id: RootId,
    facts: Vec<super::input::TappedFact>,
    now: Now,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut seen = BTreeSet::new();
    for (session, path, kind) in facts {
        for (file, text) in notice_files(root, &session, path.as_deref(), &kind, now.wall) {
            let path = root.session_dir(&session).join(&file);
            if seen.insert(path.clone()) {
                effects.push(Effect::WriteNotice(NoticeFile {
                    root: id,
                    session: session.clone(),
                    file,
                    path,
                    text,
                }));
            }
        }
    }
    effects
}

/// The notice files (name, text) an event calls for that do not exist yet.
fn notice_files(
    r: &Root,
    name: &str,
    path: Option<&Path>,
    kind: &EventKind,
    wall: DateTime<Utc>,
) -> Vec<(String, String)> {
    let Some(core) = r.sessions.get(name) else {
        return Vec::new();
    };
    // An ended session concerns nobody any more.
    if core.ended().is_some() {
        return Vec::new();
    }
    let task = |id: &str| core.tasks().get(id);
    let (fact, subject, body, task_id, file_rel) = match kind {
        EventKind::TaskReady { task_id, .. } => {
            let Some(t) = task(task_id).filter(|t| t.ready) else {
                return Vec::new();
            };
            (
                Fact::TaskReady {
                    task: &t.task_id,
                    agent: &t.agent,
                },
                format!("Task {} is ready", t.task_id),
                format!(
                    "Every prerequisite of {task} is completed{}: you can start it.\n\n\
                     See it with `squadctl task show {task}` (or `squadctl next`), then report \
                     `squadctl progress --task {task} --status in_progress`.\n",
                    if t.prerequisites.is_empty() {
                        " (it has none)".to_string()
                    } else {
                        format!(" ({})", t.prerequisites.join(", "))
                    },
                    task = t.task_id,
                ),
                Some(t.task_id.clone()),
                None,
            )
        }
        EventKind::TaskOverdue { task_id, .. } => {
            let Some(t) = task(task_id).filter(|t| t.overdue) else {
                return Vec::new();
            };
            let at = |d: Option<DateTime<Utc>>| {
                d.map(|d| d.to_rfc3339_opts(SecondsFormat::Secs, true))
                    .unwrap_or_else(|| "?".into())
            };
            (
                Fact::TaskOverdue {
                    task: &t.task_id,
                    agent: &t.agent,
                },
                format!("Task {} is overdue", t.task_id),
                format!(
                    "{task} (assigned to {agent}) passed its timeout: started {started}, due {due}.\n\n\
                     Report where it stands (`squadctl progress --task {task} --percent N --action …`), \
                     or a blocker (`--status blocked --blocker TEXT --needs AGENT`).\n",
                    task = t.task_id,
                    agent = t.agent,
                    started = at(t.started_at.map(|s| s.with_timezone(&Utc))),
                    due = at(t.due_at),
                ),
                Some(t.task_id.clone()),
                None,
            )
        }
        EventKind::DependencyViolation { task_id, .. } => {
            let Some(t) = task(task_id).filter(|t| t.violation) else {
                return Vec::new();
            };
            let state = match t.state {
                TaskStatus::Completed => "completed",
                _ => "in progress",
            };
            (
                Fact::DependencyViolation {
                    task: &t.task_id,
                    agent: &t.agent,
                    unmet: &t.unmet,
                },
                format!("Dependency violation: {}", t.task_id),
                format!(
                    "{task} is {state} but its prerequisites are not completed: {unmet}.\n\n\
                     Wait until they are (`squadctl next --wait 10m` returns when a task of \
                     yours is ready), and set {task} back to pending meanwhile \
                     (`squadctl progress --task {task} --status pending`).\n",
                    task = t.task_id,
                    unmet = t.unmet.join(", "),
                ),
                Some(t.task_id.clone()),
                None,
            )
        }
        EventKind::FileInvalid { .. } => {
            let Some(file) = path.and_then(Path::file_name).and_then(|f| f.to_str()) else {
                return Vec::new();
            };
            let Some(f) = core.index().files.get(file) else {
                return Vec::new();
            };
            let Some(agent) = writer_of(file) else {
                return Vec::new();
            };
            let errors: Vec<&squad_protocol::Diagnostic> =
                f.diagnostics.iter().filter(|d| d.is_error()).collect();
            if errors.is_empty() {
                return Vec::new();
            }
            let path = f.path_in(&core.index().dir);
            let rel = path
                .strip_prefix(&r.root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let mut body = format!(
                "squadd cannot use {rel}: {} error(s). Until it is fixed, it counts for nothing.\n\n",
                errors.len()
            );
            for d in errors.iter().take(MAX_LISTED) {
                let at = d
                    .location
                    .map(|l| format!("{}:{}: ", l.line, l.column))
                    .unwrap_or_default();
                body.push_str(&format!("- {at}{}: {}\n", d.rule, d.message));
                if !d.hint.is_empty() {
                    body.push_str(&format!("  fix: {}\n", d.hint));
                }
            }
            if errors.len() > MAX_LISTED {
                body.push_str(&format!("- … and {} more\n", errors.len() - MAX_LISTED));
            }
            body.push_str(&format!(
                "\nCheck it with `squadctl validate {rel}`; the squadctl writers \
                 (`task new`, `progress`, `report-error`, `send`) never write an invalid file.\n"
            ));
            (
                Fact::FileInvalid {
                    file,
                    agent,
                    fingerprint: f.fingerprint,
                },
                format!("Invalid file: {file}"),
                body,
                None,
                Some(rel),
            )
        }
        EventKind::MessageRefused { .. } => match refused_notice(core, &r.root, kind) {
            Some(n) => n,
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let created = wall.fixed_offset();
    notices(&r.policy.notices, &fact)
        .into_iter()
        .filter_map(|n| {
            let doc = Document::Message(Message {
                meta: MessageMeta {
                    message_id: notice_id(name, &n),
                    from_agent: SENDER.into(),
                    to_agent: n.to.clone(),
                    created_at: created,
                    priority: n.priority,
                },
                kind: MessageType::Notification,
                subject: subject.clone(),
                message: body.clone(),
                context: Some(MessageContext {
                    task_id: task_id.clone(),
                    component: None,
                    file: file_rel.clone(),
                }),
                response_needed: None,
                response_by: None,
                in_reply_to: None,
            });
            let file = doc.file_name();
            // Already told: the file is the record.
            if core.index().files.contains_key(&file) {
                return None;
            }
            let text = doc.to_file_text().ok()?;
            Some((file, text))
        })
        .collect()
}

/// What a notice says: its fact, subject, body, task and file.
type NoticeParts<'a> = (Fact<'a>, String, String, Option<String>, Option<String>);

/// The notice telling the sender of
/// `file` that it was not delivered because `kept_by` keeps its message id;
/// `None` when the clash is gone by now.
fn refused_notice<'a>(
    core: &'a crate::daemon::session::SessionCore,
    root: &Path,
    kind: &'a EventKind,
) -> Option<NoticeParts<'a>> {
    let EventKind::MessageRefused {
        message_id,
        to,
        file,
        kept_by,
        ..
    } = kind
    else {
        return None;
    };
    // Still a clash: both files there, with the same id.
    if !core
        .others_with_message_id(file)
        .contains(&kept_by.as_str())
    {
        return None;
    }
    let f = core.index().files.get(file.as_str())?;
    let agent = writer_of(file)?;
    let path = f.path_in(&core.index().dir);
    let rel = path
        .strip_prefix(root)
        .unwrap_or(&path)
        .display()
        .to_string();
    Some((
        // A refused message is a file squadd cannot use: the same fact
        // (and policy switch) as an invalid one.
        Fact::FileInvalid {
            file,
            agent,
            fingerprint: f.fingerprint,
        },
        format!("Message not delivered: {file}"),
        format!(
            "squadd did not deliver {rel} to {to}: its message id `{message_id}` is \
             already used by {kept_by} in this session (duplicate-message-id), and \
             {to} would take it for that message.\n\n\
             Send it again under its own id (`squadctl send` picks a new one), and \
             remove {file}.\n"
        ),
        None,
        Some(rel),
    ))
}

/// Whether an event may call for a notice (the event log taps these).
pub(crate) fn wanted(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::TaskReady { .. }
            | EventKind::TaskOverdue { .. }
            | EventKind::DependencyViolation { .. }
            | EventKind::FileInvalid { .. }
            | EventKind::MessageRefused { .. }
    )
}

/// A notice file could not be written (`error`): said (`output-failed`);
/// the fact is looked at again at the next start-up, and its file, the
/// record, does not exist.
pub(crate) fn write_failed(id: RootId, file: super::files::FileRef, error: String) -> Vec<Effect> {
    vec![Effect::Emit {
        root: id,
        session: Some(file.session),
        path: Some(file.path),
        kind: EventKind::OutputFailed {
            output: "notice".into(),
            error,
        },
    }]
}
