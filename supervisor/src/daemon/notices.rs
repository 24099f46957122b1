//! squadd tells agents what concerns them: a task became ready, went
//! overdue, a file they wrote is invalid, a dependency violation.
//!
//! One path: the event log taps the events that may call for a notice
//! ([`wanted`]); once per batch [`Supervisor::send_notices`] looks at each
//! against what squadd knows now (a task no longer ready is not announced),
//! asks `squad_policies::notices` which notices the fact calls for, and
//! writes each as a protocol message file from `squadd` into the session
//! (`role-comm-squadd-to-<agent>-msg_squadd_<kind>_<hash>.md`). The file is
//! then indexed, validated and delivered like any message: Maildir inbox,
//! priorities, notify hooks, escalation. Its id is a hash of the fact, so the
//! file is the record: a fact already told (before a restart too) is never
//! told again. At start-up every standing fact is looked at once, so a fact
//! that arose while squadd was down, or a notice a kill -9 interrupted, is
//! still told.

use super::Supervisor;
use super::core::RootId;
use crate::events::EventKind;
use chrono::{DateTime, SecondsFormat, Utc};
use squad_policies::notices::{Fact, Notice, SENDER, notices, writer_of};
use squad_protocol::FileKind;
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, TaskStatus,
};
use std::path::{Path, PathBuf};

/// A tapped event: (root, session, path, kind).
pub type Tapped = (RootId, Option<String>, Option<PathBuf>, EventKind);

/// The most tapped facts one batch turns into notices: a start-up with
/// thousands of standing facts writes them a batch per wake-up, after
/// READY, never holding up readiness, the control socket or a file change
/// for longer than one batch.
pub const NOTICE_BATCH: usize = 256;

/// The most diagnostics an invalid-file notice lists.
const MAX_LISTED: usize = 20;

/// Whether an event may call for a notice (the event log taps these).
pub fn wanted(kind: &EventKind) -> bool {
    matches!(
        kind,
        EventKind::TaskReady { .. }
            | EventKind::TaskOverdue { .. }
            | EventKind::DependencyViolation { .. }
            | EventKind::FileInvalid { .. }
            | EventKind::MessageRefused { .. }
    )
}

/// A notice's message id: stable for (session, fact, recipient).
fn notice_id(session: &str, n: &Notice) -> String {
    let hash = crate::index::fingerprint(format!("{session}|{}", n.key).as_bytes());
    format!("msg_{SENDER}_{}_{hash:016x}", n.kind.as_str())
}

impl Supervisor {
    /// Taps every standing fact of a session (start-up): ready, overdue and
    /// violating tasks. Invalid files are tapped by their `file-invalid`
    /// events.
    pub(super) fn tap_standing_facts(&mut self, i: RootId, name: &str) {
        let Some(core) = self.roots.core(i).sessions.get(name) else {
            return;
        };
        let mut facts = Vec::new();
        for t in core.tasks().values() {
            if t.ready {
                facts.push(EventKind::TaskReady {
                    task_id: t.task_id.clone(),
                    agent: t.agent.clone(),
                });
            }
            if t.overdue {
                facts.push(EventKind::TaskOverdue {
                    task_id: t.task_id.clone(),
                    agent: t.agent.clone(),
                });
            }
            if t.violation {
                facts.push(EventKind::DependencyViolation {
                    task_id: t.task_id.clone(),
                    unmet: t.unmet.clone(),
                });
            }
        }
        for kind in facts {
            self.log.tap((i, Some(name.to_string()), None, kind));
        }
    }

    /// Writes the notices the tapped events call for, at most
    /// [`NOTICE_BATCH`] facts at a time (the rest wait for the next wake-up:
    /// see [`Self::notices_pending`]), as one group commit: every notice
    /// file of the batch is written, then each session directory is fsynced
    /// once. Each written notice is indexed from the bytes squadd wrote
    /// (never read back) and routed into the outbox; the deliveries are
    /// made by the next [`Self::flush_outbox`], as the batch's last step.
    pub(super) fn send_notices(&mut self, wall: DateTime<Utc>) {
        let tapped = self.log.take_tapped(NOTICE_BATCH);
        if tapped.is_empty() {
            return;
        }
        let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        let mut whose: Vec<(RootId, String, String)> = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for (i, session, path, kind) in tapped {
            let Some(name) = session else { continue };
            for (file, text) in self.notice_files(i, &name, path.as_deref(), &kind, wall) {
                let path = self.roots.core(i).session_dir(&name).join(&file);
                // The same fact tapped twice in a batch is one notice.
                if seen.insert(path.clone()) {
                    files.push((path, text.into_bytes()));
                    whose.push((i, name.clone(), file));
                }
            }
        }
        let results = self.writer.write_group(&files);
        for (((path, bytes), (i, name, file)), result) in files.into_iter().zip(whose).zip(results)
        {
            match result {
                // Indexed, validated and routed like any message, from
                // what was written.
                Ok(()) => {
                    let loaded = crate::index::index_bytes(&path, FileKind::Message, &bytes);
                    let own = std::sync::Arc::<[u8]>::from(bytes);
                    self.apply_loaded(i, &name, &file, &path, Some(loaded), Some(own));
                }
                Err(e) => self.log.emit(
                    i,
                    Some(&name),
                    Some(&path),
                    EventKind::OutputFailed {
                        output: "notice".into(),
                        error: e.to_string(),
                    },
                ),
            }
        }
    }

    /// Whether tapped facts wait for [`Self::send_notices`] (more than one
    /// batch's worth, as at start-up with many standing facts): the event
    /// loop comes back at once, between other work.
    pub(super) fn notices_pending(&self) -> bool {
        self.log.has_tapped()
    }

    /// The notice files (name, text) an event calls for that do not exist yet.
    fn notice_files(
        &self,
        i: RootId,
        name: &str,
        path: Option<&Path>,
        kind: &EventKind,
        wall: DateTime<Utc>,
    ) -> Vec<(String, String)> {
        let r = self.roots.core(i);
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
}

/// What a notice says: its fact, subject, body, task and file.
type NoticeParts<'a> = (Fact<'a>, String, String, Option<String>, Option<String>);

/// The notice telling the sender of
/// `file` that it was not delivered because `kept_by` keeps its message id;
/// `None` when the clash is gone by now.
fn refused_notice<'a>(
    core: &'a super::session::SessionCore,
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

#[cfg(test)]
mod tests {
    use super::*;
    use squad_policies::notices::NoticeKind;
    use squad_protocol::model::Priority;

    #[test]
    fn a_notice_id_is_stable_per_session_fact_and_recipient_and_short() {
        let n = |key: &str, to: &str| Notice {
            kind: NoticeKind::TaskReady,
            to: to.into(),
            priority: Priority::Medium,
            key: key.into(),
        };
        let a = notice_id("s1", &n("ready|task_1|bob|bob", "bob"));
        assert_eq!(a, notice_id("s1", &n("ready|task_1|bob|bob", "bob")));
        assert_ne!(a, notice_id("s2", &n("ready|task_1|bob|bob", "bob")));
        assert_ne!(a, notice_id("s1", &n("ready|task_2|bob|bob", "bob")));
        assert!(squad_protocol::IdKind::Message.matches(&a), "{a}");
        assert!(a.len() <= 40, "{a}");
        assert!(wanted(&EventKind::TaskReady {
            task_id: "task_1".into(),
            agent: "bob".into()
        }));
        assert!(!wanted(&EventKind::FileRemoved));
    }
}
