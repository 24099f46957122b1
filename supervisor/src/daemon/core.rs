//! The session core: what squadd knows about each root's sessions (the
//! index, the derived views, the persisted state and the policy) and the
//! decisions made from it. No watches, no sockets; the wiring reads files,
//! hands their contents here and carries out what comes back.

use crate::derive::{SessionView, changes, derive_session, new_starts, newly_overdue};
use crate::events::EventKind;
use crate::index::{IndexedFile, SessionIndex};
use crate::state::State;
use chrono::{DateTime, Utc};
use squad_protocol::Severity;
use squad_protocol::model::SessionState;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One supervised root.
pub struct Root {
    /// The root directory (canonical).
    pub root: PathBuf,
    /// `<root>/.squad/sessions`.
    pub sessions_dir: PathBuf,
    /// Sessions by directory name.
    pub sessions: BTreeMap<String, SessionIndex>,
    /// Derived views by session directory name.
    pub views: BTreeMap<String, SessionView>,
    /// What squadd remembers across restarts.
    pub state: State,
    /// Whether `.squad/sessions` is missing.
    pub missing: bool,
    /// The policy in force.
    pub policy: squad_policies::Policy,
    /// Lock records as last read.
    pub locks: Vec<crate::locks::Entry>,
    /// The next scheduled retention run.
    pub next_gc: Option<DateTime<Utc>>,
}

/// What re-deriving a session found.
#[derive(Debug, Default)]
pub struct Rederived {
    /// What changed, in order (a session-status change last).
    pub events: Vec<EventKind>,
    /// Tasks newly overdue (reported after the session's wrap-up).
    pub overdue: Vec<EventKind>,
    /// The session ended (`completed` or `failed`) with this change.
    pub ended: Option<String>,
    /// The persisted state changed.
    pub state_changed: bool,
    /// The session's next task deadline, if any.
    pub next_deadline: Option<DateTime<Utc>>,
}

/// What applying one file did.
#[derive(Debug)]
pub enum FileOutcome {
    /// Nothing changed (same bytes: a repeated event, or our own write).
    Unchanged,
    /// The file was removed.
    Removed,
    /// The file was added or changed; its event.
    Changed(EventKind),
}

/// The next run of a retention schedule after `now`.
pub fn next_run(policy: &squad_policies::Policy, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    policy.retention.schedule().ok()?.after(&now).next()
}

/// `(error count, first error)` when a file has errors.
pub fn invalid_summary(f: &IndexedFile) -> Option<(usize, String)> {
    let errors: Vec<_> = f
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
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

impl Root {
    /// A root with no sessions yet.
    pub fn new(root: PathBuf, state: State, policy: squad_policies::Policy) -> Root {
        let next_gc = next_run(&policy, Utc::now());
        Root {
            sessions_dir: root
                .join(squad_protocol::tree::SQUAD_DIR)
                .join(squad_protocol::tree::SESSIONS_DIR),
            root,
            sessions: BTreeMap::new(),
            views: BTreeMap::new(),
            state,
            missing: false,
            policy,
            locks: Vec::new(),
            next_gc,
        }
    }

    /// The session's directory.
    pub fn session_dir(&self, name: &str) -> PathBuf {
        self.sessions_dir.join(name)
    }

    /// Applies a file's new contents (`None`: it is gone).
    pub fn apply_file(
        &mut self,
        name: &str,
        file: &str,
        loaded: Option<IndexedFile>,
    ) -> Option<FileOutcome> {
        let session = self.sessions.get_mut(name)?;
        match loaded {
            None => {
                session.files.remove(file)?;
                Some(FileOutcome::Removed)
            }
            Some(new) => {
                let old = session.files.get(file);
                if old.is_some_and(|o| o.fingerprint == new.fingerprint && new.fingerprint != 0) {
                    return Some(FileOutcome::Unchanged);
                }
                let was_invalid = old.is_some_and(|o| invalid_summary(o).is_some());
                let event = match invalid_summary(&new) {
                    Some((errors, first)) => EventKind::FileInvalid { errors, first },
                    None if was_invalid => EventKind::FileFixed,
                    None => EventKind::FileValidated {
                        warnings: new.diagnostics.len(),
                    },
                };
                session.files.insert(file.to_string(), new);
                Some(FileOutcome::Changed(event))
            }
        }
    }

    /// The invalid files of a session, for `file-invalid` events.
    pub fn invalid_files(&self, name: &str) -> Vec<(PathBuf, usize, String)> {
        self.sessions
            .get(name)
            .map(|s| {
                s.files
                    .values()
                    .filter_map(|f| invalid_summary(f).map(|(n, first)| (f.path.clone(), n, first)))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn derive(&self, name: &str, now: DateTime<Utc>) -> SessionView {
        let empty = Default::default();
        let starts = self.state.task_starts.get(name).unwrap_or(&empty);
        match self.sessions.get(name) {
            Some(s) => derive_session(s, starts, now),
            None => derive_session(&SessionIndex::new(self.session_dir(name)), starts, now),
        }
    }

    /// Records first-seen `in_progress` times; returns whether any was new.
    fn record_starts(&mut self, name: &str) -> bool {
        let Some(session) = self.sessions.get(name) else {
            return false;
        };
        let starts = self.state.task_starts.entry(name.to_string()).or_default();
        let new = new_starts(session, starts);
        let changed = !new.is_empty();
        starts.extend(new);
        changed
    }

    /// Overdue tasks not reported before, now marked reported.
    fn overdue_news(&mut self, name: &str) -> Vec<EventKind> {
        let Some(view) = self.views.get(name) else {
            return Vec::new();
        };
        let reported = self
            .state
            .overdue_reported
            .entry(name.to_string())
            .or_default();
        let new: Vec<(String, String)> = newly_overdue(view, reported)
            .map(|t| (t.task_id.clone(), t.agent.clone()))
            .collect();
        reported.extend(new.iter().map(|(t, _)| t.clone()));
        new.into_iter()
            .map(|(task_id, agent)| EventKind::TaskOverdue { task_id, agent })
            .collect()
    }

    /// The first derivation of a session (start-up, or a session that came
    /// back): a baseline, with no task-ready storm. Returns overdue events
    /// and the session's status when it has ended.
    pub fn baseline(&mut self, name: &str, now: DateTime<Utc>) -> Rederived {
        let state_changed = self.record_starts(name);
        let view = self.derive(name, now);
        let next_deadline = view.next_deadline(now);
        let ended = matches!(view.status, SessionState::Completed | SessionState::Failed)
            .then(|| view.status.to_string());
        self.views.insert(name.to_string(), view);
        let overdue = self.overdue_news(name);
        Rederived {
            state_changed: state_changed || !overdue.is_empty(),
            events: Vec::new(),
            overdue,
            ended,
            next_deadline,
        }
    }

    /// Re-derives a session after a change and says what changed.
    pub fn rederive(&mut self, name: &str, now: DateTime<Utc>) -> Rederived {
        if let Some(s) = self.sessions.get_mut(name) {
            s.recheck();
        }
        let mut state_changed = self.record_starts(name);
        let view = self.derive(name, now);
        let next_deadline = view.next_deadline(now);
        let events = changes(self.views.get(name), &view);
        self.views.insert(name.to_string(), view);
        let ended = events.iter().find_map(|k| match k {
            EventKind::SessionStatusChanged { status }
                if matches!(status, SessionState::Completed | SessionState::Failed) =>
            {
                Some(status.to_string())
            }
            _ => None,
        });
        let overdue = self.overdue_news(name);
        state_changed |= !overdue.is_empty();
        Rederived {
            events,
            overdue,
            ended,
            state_changed,
            next_deadline,
        }
    }

    /// Forgets a session that vanished.
    pub fn remove_session(&mut self, name: &str) {
        self.sessions.remove(name);
        self.views.remove(name);
    }

    /// The escalated messages of a session.
    pub fn escalations(&self, name: &str) -> Vec<String> {
        self.state
            .escalated
            .get(name)
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default()
    }
}
