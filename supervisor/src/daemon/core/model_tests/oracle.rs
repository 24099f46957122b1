//! The oracle: what a root's files alone say, derived from scratch.

use super::*;

pub(super) fn index_file(dir: &Path, name: &str, bytes: &[u8]) -> Option<IndexedFile> {
    let kind = FileKind::from_file_name(name)?;
    Some(index_bytes(&dir.join(name), kind, bytes))
}

/// Parses by (path, bytes).
pub(super) type Parses = std::collections::HashMap<(PathBuf, Vec<u8>), Option<IndexedFile>>;

thread_local! {
    /// The oracle's parses, by (path, bytes): parsing is pure, and the
    /// oracle indexes every file of every session after every step.
    static PARSED: std::cell::RefCell<Parses> = Default::default();
}

/// [`index_file`], remembered (the oracle's side only).
pub(super) fn index_file_once(dir: &Path, name: &str, bytes: &[u8]) -> Option<IndexedFile> {
    let key = (dir.join(name), bytes.to_vec());
    if let Some(f) = PARSED.with(|p| p.borrow().get(&key).cloned()) {
        return f;
    }
    let f = index_file(dir, name, bytes);
    PARSED.with(|p| p.borrow_mut().insert(key, f.clone()));
    f
}

// ------------------------------------------------------------- snapshot

/// One inbox entry as a listing shows it: in `new/` with its mtime
/// (unread), or in `cur/` (read).
pub(super) type InboxListing = BTreeMap<(String, String), Option<DateTime<Utc>>>;

/// The files of one root: what [`Known::from_scratch`] reads.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub(super) root: PathBuf,
    /// Session → file → bytes.
    pub(super) files: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// Session → inbox entries.
    pub(super) inbox: BTreeMap<String, InboxListing>,
    /// The persisted facts, as the shell would read `state.json`.
    pub(super) state: State,
    pub(super) policy: squad_policies::Policy,
    /// config.json as last written.
    pub(super) config: squad_protocol::config::RuntimeConfig,
    /// Each task's run.json, as last written.
    pub(super) records: BTreeMap<(String, String), crate::runners::RunRecord>,
    /// state.json as squadd last wrote it (what a restart reads back).
    pub(super) state_file: Option<Vec<u8>>,
    /// What each inbox copy holds (inbox directory, name): the
    /// fingerprint of the bytes delivered.
    pub(super) copies: BTreeMap<(PathBuf, String), u64>,
    /// Session → every delivery the oracle's rule ([`rules::deliveries`])
    /// ever asked of a kept file: an inbox entry outside it was delivered
    /// against the rule.
    pub(super) expected: BTreeMap<String, BTreeSet<(String, String)>>,
}

impl Snapshot {
    /// Every session's index, built from its files alone.
    pub(super) fn indexes(&self) -> BTreeMap<String, SessionIndex> {
        let sessions_dir = self
            .root
            .join(squad_protocol::tree::SQUAD_DIR)
            .join(squad_protocol::tree::SESSIONS_DIR);
        self.files
            .iter()
            .map(|(name, files)| (name.clone(), scratch_index(&sessions_dir.join(name), files)))
            .collect()
    }
}

/// Everything the core knows of one session, in comparable form.
#[derive(Debug, PartialEq)]
pub(super) struct SessionKnown {
    /// Files and their fingerprints.
    pub(super) files: Vec<(String, u64)>,
    /// Session diagnostics, sorted (squadd lists graph findings first).
    pub(super) diagnostics: Vec<String>,
    /// The derived view (tasks, counters, status).
    pub(super) view: SessionView,
    /// Every inbox entry squadd knows of, with its unread state.
    pub(super) inbox: BTreeMap<(String, String), Option<DateTime<Utc>>>,
    /// Deliveries asked for and not made yet (recipient, inbox name).
    pub(super) pending: BTreeSet<(String, String)>,
    /// Replies seen, by the id they answer.
    pub(super) replies: BTreeMap<String, usize>,
}

/// Everything the core knows of one root, in comparable form.
#[derive(Debug, PartialEq)]
pub(super) struct Known {
    pub(super) sessions: BTreeMap<String, SessionKnown>,
    /// The persisted facts (task starts, overdue and violation reports,
    /// escalations, overdue replies).
    pub(super) state: State,
}

/// The session index of a session's files, from scratch.
pub(super) fn scratch_index(dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> SessionIndex {
    let mut s = SessionIndex::new(dir.to_path_buf());
    for (name, bytes) in files {
        if let Some(f) = index_file_once(dir, name, bytes) {
            s.insert(name.clone(), f);
        }
    }
    s.recheck();
    s
}

pub(super) fn diagnostics(s: &SessionIndex) -> Vec<String> {
    let mut v: Vec<String> = s
        .session_diagnostics
        .iter()
        .map(|d| format!("{d:?}"))
        .collect();
    v.sort();
    v
}

pub(super) fn prints(s: &SessionIndex) -> Vec<(String, u64)> {
    s.files
        .iter()
        .map(|(n, f)| (n.to_string(), f.fingerprint))
        .collect()
}

pub(super) fn messages(s: &SessionIndex) -> impl Iterator<Item = &crate::index::MessageInfo> {
    s.files.values().filter_map(|f| match &f.entry {
        Entry::Message(m) => Some(&**m),
        _ => None,
    })
}

/// Replies by the id they answer, counted from the message files.
pub(super) fn replies_of(s: &SessionIndex) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in messages(s) {
        if let Some(r) = &m.in_reply_to {
            *out.entry(r.clone()).or_insert(0) += 1;
        }
    }
    out
}

/// The message files refused for reusing a message id, by the rule
/// (docs/daemon.md, Messages): of the message files carrying one id (valid
/// or not), the
/// first by name keeps it, unless another one's inbox copy holds its bytes
/// (delivered before the clash arose): then that one keeps it. The others
/// are neither delivered nor wait for a reply.
pub(super) fn refused(
    name: &str,
    s: &SessionIndex,
    copies: &BTreeMap<(PathBuf, String), u64>,
) -> BTreeSet<String> {
    let delivered = |file: &str, f: &IndexedFile| {
        rules::deliveries(name, file, f).into_iter().any(|(to, n)| {
            let inbox = crate::inbox::inbox_dir(&s.dir, &to);
            copies.get(&(inbox, n)) == Some(&f.fingerprint)
        })
    };
    let mut by_id: BTreeMap<&str, Vec<(String, &IndexedFile)>> = BTreeMap::new();
    // A message file invalid for another reason still carries the id it
    // says (the `duplicate-message-id` finding counts it): first by name,
    // it keeps the id although it is never delivered.
    for (file, f) in s.files.iter() {
        if f.kind == FileKind::Message
            && let Some(id) = squad_protocol::session::SessionMember::message_id(f)
        {
            let files = by_id.entry(id).or_default();
            files.push((file.to_string(), f));
        }
    }
    let mut refused = BTreeSet::new();
    for files in by_id.values_mut().filter(|files| files.len() > 1) {
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let keeps_first =
            delivered(&files[0].0, files[0].1) || !files[1..].iter().any(|(n, f)| delivered(n, f));
        for (i, (file, _)) in files.iter().enumerate() {
            if i > 0 || !keeps_first {
                refused.insert(file.clone());
            }
        }
    }
    refused
}

/// The messages of a session not [`refused`] for a reused id.
pub(super) fn kept_messages<'a>(
    copies: &BTreeMap<(PathBuf, String), u64>,
    name: &str,
    index: &'a SessionIndex,
) -> Vec<&'a crate::index::MessageInfo> {
    let refused = refused(name, index, copies);
    index
        .files
        .iter()
        .filter(|(file, _)| !refused.contains(&**file))
        .filter_map(|(_, f)| match &f.entry {
            Entry::Message(m) => Some(&**m),
            _ => None,
        })
        .collect()
}

/// The slots of what a session's files ask to deliver by the oracle's
/// rule, the files [`refused`] for a reused message id left out.
pub(super) fn asked_kept(
    name: &str,
    s: &SessionIndex,
    copies: &BTreeMap<(PathBuf, String), u64>,
) -> BTreeSet<(String, String)> {
    let refused = refused(name, s, copies);
    s.files
        .iter()
        .filter(|(file, _)| !refused.contains(&**file))
        .flat_map(|(file, f)| rules::deliveries(name, file, f))
        .collect()
}

/// The slots of what a session's files ask to deliver, by the oracle's
/// rule.
pub(super) fn asked(name: &str, s: &SessionIndex) -> BTreeSet<(String, String)> {
    s.files
        .iter()
        .flat_map(|(file, f)| rules::deliveries(name, file, f))
        .collect()
}

impl Known {
    /// What the core would know of a root holding exactly `snap`, at
    /// `now`: derived from the files alone.
    pub(super) fn from_scratch(snap: &Snapshot, now: DateTime<Utc>) -> Known {
        Known::from_indexes(snap, &snap.indexes(), now)
    }

    /// [`Known::from_scratch`] with the session indexes of the snapshot
    /// built already.
    pub(super) fn from_indexes(
        snap: &Snapshot,
        indexes: &BTreeMap<String, SessionIndex>,
        now: DateTime<Utc>,
    ) -> Known {
        let mut sessions = BTreeMap::new();
        for (name, index) in indexes {
            let starts = snap
                .state
                .task_starts
                .get(name)
                .cloned()
                .unwrap_or_default();
            let view = derive_session(index, &starts, now);
            // A delivery is made when its name is in the inbox, `new/` or
            // `cur/` ("the inbox is the record").
            let listing = snap.inbox.get(name).cloned().unwrap_or_default();
            let pending = asked_kept(name, index, &snap.copies)
                .into_iter()
                .filter(|slot| !listing.contains_key(slot))
                .collect();
            sessions.insert(
                name.clone(),
                SessionKnown {
                    files: prints(index),
                    diagnostics: diagnostics(index),
                    view,
                    inbox: listing,
                    pending,
                    replies: replies_of(index),
                },
            );
        }
        Known {
            sessions,
            state: snap.state.clone(),
        }
    }

    /// What the incremental core knows of `root`. Deliveries waiting are
    /// counted only if the session's files still ask for them (a message
    /// changed or removed leaves its old delivery to its timer).
    pub(super) fn of(root: &mut Root) -> Known {
        let mut sessions = BTreeMap::new();
        for (name, core) in &root.sessions {
            let index = core.index();
            let mail = root.mail.get(name).cloned().unwrap_or_default();
            let wanted = asked(name, index);
            sessions.insert(
                name.clone(),
                SessionKnown {
                    files: prints(index),
                    diagnostics: diagnostics(index),
                    view: core.view(),
                    inbox: mail.entries(),
                    pending: mail
                        .waiting
                        .keys()
                        .filter(|k| wanted.contains(*k))
                        .cloned()
                        .collect(),
                    replies: mail.replies.clone(),
                },
            );
        }
        let mut state = root.state_to_save().clone();
        // Sessions with nothing recorded have no entry either way.
        state.task_starts.retain(|_, v| !v.is_empty());
        state.overdue_reported.retain(|_, v| !v.is_empty());
        state.violations.retain(|_, v| !v.is_empty());
        state.escalated.retain(|_, v| !v.is_empty());
        state.replies_overdue.retain(|_, v| !v.is_empty());
        Known { sessions, state }
    }
}

/// The oracle's persisted facts brought up to date with the snapshot at
/// `now`: what a task's first `in_progress` report said (the effective
/// plan's agent's, the last by file name), tasks overdue or violating
/// their prerequisites at any step, unread messages whose escalation time
/// came, questions whose reply deadline passed unanswered.
pub(super) fn keep_facts(
    snap: &mut Snapshot,
    indexes: &BTreeMap<String, SessionIndex>,
    now: DateTime<Utc>,
) {
    let state = &mut snap.state;
    for (name, index) in indexes {
        let starts = state.task_starts.entry(name.clone()).or_default();
        let first = crate::derive::new_starts(index, starts);
        starts.extend(first);
        let view = derive_session(index, starts, now);
        for t in &view.tasks {
            if t.overdue {
                state
                    .overdue_reported
                    .entry(name.clone())
                    .or_default()
                    .insert(t.task_id.clone());
            }
            if t.violation {
                state
                    .violations
                    .entry(name.clone())
                    .or_default()
                    .entry(t.task_id.clone())
                    .or_insert(t.unmet.clone());
            }
        }
        for ((_, inbox_name), at) in snap.inbox.get(name).into_iter().flatten() {
            let Some((message_id, due)) =
                at.and_then(|at| rules::escalation_due(&snap.policy, inbox_name, at))
            else {
                continue;
            };
            // A notice of squadd's whose fact is gone when it is due is
            // moot: never escalated (issue 40 item 4).
            if due <= now
                && !crate::daemon::core::notices::is_moot(
                    &message_id,
                    &crate::daemon::core::notices::live_notice_ids(
                        name,
                        index,
                        &view.tasks,
                        snap.policy.notices.lead.as_deref(),
                    ),
                )
            {
                state
                    .escalated
                    .entry(name.clone())
                    .or_default()
                    .insert(message_id);
            }
        }
        let replies = replies_of(index);
        for m in kept_messages(&snap.copies, name, index) {
            let replied = replies.contains_key(&m.message_id);
            if !replied && rules::reply_due(m).is_some_and(|by| by <= now) {
                state
                    .replies_overdue
                    .entry(name.clone())
                    .or_default()
                    .insert(m.message_id.clone());
            }
        }
        snap.expected
            .entry(name.clone())
            .or_default()
            .extend(asked_kept(name, index, &snap.copies));
    }
    state.task_starts.retain(|_, v| !v.is_empty());
}
