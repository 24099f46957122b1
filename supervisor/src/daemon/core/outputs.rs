//! squadd's own outputs of a root, decided here: which session-status.md
//! files are written and with what text (under the session's lock, held
//! back while the lock is busy or the file is vanishing), the shared
//! context, the persisted state, the retention schedule and the lock
//! table's expiry, and the one-writer gate of a cluster (docs/cluster.md,
//! "Leader"). The shell takes the locks, reads what it is asked, writes
//! what it is given and reports back; it decides none of it.
//!
//! The gate: with `cluster:`, only the leader writes the supervisor-owned
//! outputs (status files, the shared context, notices) and runs retention.
//! The core holds whether this host leads ([`Root::leads`]) as a fact the
//! shell supplies ([`Input::Leadership`](super::Input::Leadership)): gained
//! with the cluster task's news of an election, lost with its news or
//! when the lease the shell reads before every batch ran out; while it
//! does not lead,
//! the effects that would write those outputs are not produced. On
//! election it returns the catch-up a follower owes ([`leadership`]).

use super::timer::Timer;
use super::{Effect, Now, Root, RootId, next_run, notices};
use crate::cluster::leader::News;
use crate::events::EventKind;
use crate::outputs::render_status;
use chrono::{DateTime, Utc};
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::path::PathBuf;
use std::time::Duration;

/// How soon a status write the session lock held back is tried again.
pub(crate) const STATUS_LOCK_RETRY: Duration = Duration::from_millis(10);

/// How soon the lock table is read again when a command holds it.
pub(crate) const LOCKS_BUSY_RETRY: Duration = Duration::from_millis(50);

/// How soon the lock table is read again when it could not be locked.
pub(crate) const LOCKS_FAILED_RETRY: Duration = Duration::from_secs(5);

/// How soon retention runs again when `squadctl gc` holds the gc lock (or
/// at the next scheduled run, whichever comes first).
pub(crate) const GC_BUSY_RETRY: chrono::Duration = chrono::Duration::seconds(60);

/// What taking a session's lock for a status write gave (the shell holds
/// the lock itself until the write is done).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusLock {
    /// Held (the file was re-read under it).
    Held,
    /// Someone else holds it: written a moment later.
    Busy,
    /// The lock file cannot be used (`.squad/run` unusable, a name too
    /// long): the write goes ahead unlocked rather than not at all.
    Unavailable,
}

/// What the shell saw of one session before its status write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusFacts {
    /// Session directory name.
    pub session: String,
    /// The session's lock.
    pub lock: StatusLock,
    /// The status file was found gone a moment ago and its removal is
    /// not confirmed yet: how long until it is.
    pub vanishing: Option<Duration>,
    /// Whether the session directory is there.
    pub dir_present: bool,
}

/// One status file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusText {
    /// Session directory name.
    pub session: String,
    /// The file.
    pub path: PathBuf,
    /// Its new text.
    pub text: String,
}

/// What a retention run gave (the shell ran it: `squadctl gc`'s plan and
/// execution).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RetentionRun {
    /// `squadctl gc` holds the gc lock: nothing was done.
    LockBusy,
    /// The gc lock could not be taken.
    LockFailed(String),
    /// It ran: the events it caused, (session, path, kind).
    Ran(Vec<(Option<String>, Option<PathBuf>, EventKind)>),
}

/// The lock table as the shell read it (under the table's lock, which it
/// holds while the effects of this step are carried out).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LockTable {
    /// Read: every lock record.
    Read(Vec<crate::locks::Entry>),
    /// A command holds the table right now.
    Busy,
    /// The table could not be locked.
    Failed,
}

/// Whether nothing may be written into the root now: its `.squad/sessions`
/// is missing (`present`: the shell's look), or another squadd has it.
pub(crate) fn gone(root: &Root, present: bool) -> bool {
    root.taken_over.is_some() || root.missing || !present
}

/// Status files are due: those of known sessions, while this host leads.
/// The shell takes their locks next ([`Effect::LockStatuses`]).
pub(crate) fn statuses_due(root: &Root, id: RootId, sessions: Vec<String>) -> Vec<Effect> {
    if !root.leads {
        return Vec::new();
    }
    let sessions: Vec<String> = sessions
        .into_iter()
        .filter(|s| root.sessions.contains_key(s))
        .collect();
    if sessions.is_empty() {
        return Vec::new();
    }
    vec![Effect::LockStatuses { root: id, sessions }]
}

/// The new session-status.md of a session, when it differs from the file
/// as squadd last read or wrote it (a foreign edit is read and indexed when
/// its event arrives, or under the lock before this).
pub(crate) fn status_update(
    root: &Root,
    name: &str,
    dir_present: bool,
    wall: DateTime<Utc>,
) -> Option<StatusText> {
    let session = root.sessions.get(name)?;
    let view = session.head();
    let path = root.session_dir(name).join(SESSION_STATUS_FILE);
    let existing = match session.index().files.get(SESSION_STATUS_FILE) {
        // Not text (or unreadable): never overwritten.
        Some(f) => Some(f.text.as_deref()?),
        None if dir_present => None,
        None => return None,
    };
    let text = render_status(existing, &view, wall)?;
    (existing != Some(text.as_str())).then(|| StatusText {
        session: name.to_string(),
        path,
        text,
    })
}

/// The sessions' locks were taken: a busy lock or a vanishing status file
/// holds its write back (retried by the session's status timer); the rest
/// are rendered and those that changed written, as one batch.
pub(crate) fn statuses_locked(
    root: &Root,
    id: RootId,
    facts: Vec<StatusFacts>,
    now: Now,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut texts = Vec::new();
    for f in facts {
        if !root.sessions.contains_key(&f.session) {
            continue;
        }
        let timer = Timer::Status {
            root: id,
            session: f.session.clone(),
        };
        if f.lock == StatusLock::Busy {
            effects.push(Effect::SetTimerEarlier {
                timer,
                after: STATUS_LOCK_RETRY,
            });
            continue;
        }
        // A status file found gone may be being replaced (`git checkout`
        // unlinks, then creates it): writing one now would make that
        // create fail. Written once it is back or surely gone.
        if let Some(after) = f.vanishing {
            effects.push(Effect::SetTimerEarlier { timer, after });
            continue;
        }
        texts.extend(status_update(root, &f.session, f.dir_present, now.wall));
    }
    if !texts.is_empty() {
        effects.push(Effect::WriteStatusTexts { root: id, texts });
    }
    effects
}

/// A status file was written (or not): indexed from the bytes written, so
/// its watch event is recognised as squadd's own, and reported.
pub(crate) fn status_written(
    root: &mut Root,
    id: RootId,
    session: String,
    path: PathBuf,
    bytes: &[u8],
    error: Option<String>,
    now: Now,
) -> Vec<Effect> {
    let output = "session-status".to_string();
    let (mut effects, kind) = match error {
        None => {
            let file = super::files::FileRef {
                session: session.clone(),
                file: SESSION_STATUS_FILE.to_string(),
                path: path.clone(),
            };
            let kind = squad_protocol::FileKind::SessionStatus;
            (
                super::files::own_write(root, id, file, kind, bytes, now),
                EventKind::OutputWritten { output },
            )
        }
        Some(error) => (Vec::new(), EventKind::OutputFailed { output, error }),
    };
    effects.push(Effect::Emit {
        root: id,
        session: Some(session),
        path: Some(path),
        kind,
    });
    effects
}

/// The shared context is due (its timer fired, or start-up and shutdown
/// with `now`): its fragments brought up to date and the file handed to
/// the writer, unless the root is gone or this host does not lead.
pub(crate) fn context_due(root: &mut Root, id: RootId, present: bool, now: bool) -> Vec<Effect> {
    let mut effects = vec![Effect::CancelTimer(Timer::Context(id))];
    if gone(root, present) || !root.leads {
        return effects;
    }
    effects.push(Effect::WriteContext {
        root: id,
        path: root.root.join(crate::outputs::SHARED_CONTEXT),
        fragments: root.context_fragments(),
        now,
    });
    effects
}

/// A write of one of squadd's outputs finished (`error`: why not).
pub(crate) fn output_done(
    id: RootId,
    session: Option<String>,
    path: PathBuf,
    output: &str,
    error: Option<String>,
) -> Vec<Effect> {
    let output = output.to_string();
    let kind = match error {
        None => EventKind::OutputWritten { output },
        Some(error) => EventKind::OutputFailed { output, error },
    };
    vec![Effect::Emit {
        root: id,
        session,
        path: Some(path),
        kind,
    }]
}

/// The persisted state is due: written unless the root is gone (never
/// recreate what is being deleted; it is saved when the root is back).
pub(crate) fn save_state_due(root: &mut Root, id: RootId, present: bool) -> Vec<Effect> {
    let mut effects = vec![Effect::CancelTimer(Timer::SaveState(id))];
    if gone(root, present) {
        return effects;
    }
    let path = crate::state::state_path(&root.root);
    let bytes = root.state_to_save().encode().map_err(|e| e.to_string());
    effects.push(Effect::WriteState {
        root: id,
        path,
        bytes,
    });
    effects
}

/// The project policy as read again ([`super::Input::PolicyRead`]): the
/// same policy changes nothing; another replaces the one in force (said,
/// retention rescheduled by it, then the mail area's delays follow it); a
/// refused one is said and the previous one stays in force.
pub(crate) fn policy_read(
    root: &mut Root,
    id: RootId,
    read: Result<Box<squad_policies::Policy>, crate::locks::PolicyLoadError>,
    now: Now,
) -> Vec<Effect> {
    let kind = match read {
        Ok(p) if *p == root.policy && root.policy_refused.is_none() => return Vec::new(),
        // A new policy, or the one in force put back after a refusal
        // (undoing the bad edit is the usual fix: said, so the refusal
        // stops needing attention, and retention held by it resumes).
        Ok(p) => {
            root.policy_refused = None;
            root.next_gc = next_run(&p, now.wall);
            root.policy = *p;
            EventKind::PolicyReloaded
        }
        Err(e) => {
            let error = format!("{e}; the previous policy stays in force");
            root.policy_refused = Some(error.clone());
            EventKind::PolicyRefused { error }
        }
    };
    let replaced = matches!(kind, EventKind::PolicyReloaded);
    let mut effects = vec![
        Effect::Emit {
            root: id,
            session: None,
            path: Some(
                root.root
                    .join(squad_protocol::tree::SQUAD_DIR)
                    .join("policies.yaml"),
            ),
            kind,
        },
        retention_timer(root, id),
    ];
    if replaced {
        effects.extend(super::mail::policy_changed(root, id, now));
    }
    effects
}

/// The retention timer as the root's schedule says (`next_gc`).
pub(crate) fn retention_timer(root: &Root, id: RootId) -> Effect {
    match root.next_gc {
        Some(at) => Effect::SetTimerAt {
            timer: Timer::Retention(id),
            at,
        },
        None => Effect::CancelTimer(Timer::Retention(id)),
    }
}

/// The retention schedule came: run it while this host leads. A follower
/// skips this run (the leader runs it) and waits for the next one.
pub(crate) fn retention_due(root: &mut Root, id: RootId, now: Now) -> Vec<Effect> {
    if root.leads {
        return vec![Effect::RunRetention(id)];
    }
    root.next_gc = next_run(&root.policy, now.wall);
    vec![retention_timer(root, id)]
}

/// A retention run finished: its events recorded and the next run
/// scheduled (when `squadctl gc` held the lock: in a minute, or at the
/// next scheduled run if that is sooner).
pub(crate) fn retention_ran(
    root: &mut Root,
    id: RootId,
    run: RetentionRun,
    now: Now,
) -> Vec<Effect> {
    let wall = now.wall;
    let mut effects = Vec::new();
    let next = next_run(&root.policy, wall);
    root.next_gc = match run {
        RetentionRun::LockBusy => {
            // Checked: the wall clock may say anything (issue 26 item 8).
            let retry = wall
                .checked_add_signed(GC_BUSY_RETRY)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            Some(next.map_or(retry, |at| at.min(retry)))
        }
        RetentionRun::LockFailed(e) => {
            effects.push(Effect::Emit {
                root: id,
                session: None,
                path: None,
                kind: EventKind::RetentionFailed {
                    error: format!("cannot take the gc lock: {e}"),
                },
            });
            next
        }
        RetentionRun::Ran(caused) => {
            effects.extend(
                caused
                    .into_iter()
                    .map(|(session, path, kind)| Effect::Emit {
                        root: id,
                        session,
                        path,
                        kind,
                    }),
            );
            effects.extend(super::upkeep::memory_upkeep(root, id));
            next
        }
    };
    effects.push(retention_timer(root, id));
    effects
}

/// The lock table is due: read unless the root is gone.
pub(crate) fn locks_due(root: &Root, id: RootId, present: bool) -> Vec<Effect> {
    if gone(root, present) {
        return Vec::new();
    }
    vec![Effect::ReadLocks(id)]
}

/// The lock table as read: expired locks are reclaimed (only expiry is
/// decided here; a dead holder's lock is reclaimed by the next
/// acquisition, which checks its process), then the table is looked at
/// again when the next lock expires.
pub(crate) fn locks_read(root: &mut Root, id: RootId, table: LockTable, now: Now) -> Vec<Effect> {
    let retry = |after| {
        vec![Effect::SetTimer {
            timer: Timer::Locks(id),
            after,
        }]
    };
    let entries = match table {
        LockTable::Busy => return retry(LOCKS_BUSY_RETRY),
        LockTable::Failed => return retry(LOCKS_FAILED_RETRY),
        LockTable::Read(entries) => entries,
    };
    let expired: Vec<crate::locks::Entry> = entries
        .iter()
        .filter(|e| match e {
            crate::locks::Entry::Held { record, .. } => record.expires_at <= now.wall,
            crate::locks::Entry::Corrupt { held_until, .. } => *held_until <= now.wall,
        })
        .cloned()
        .collect();
    root.locks = entries;
    if expired.is_empty() {
        return vec![locks_timer(root, id)];
    }
    vec![Effect::ReclaimLocks { root: id, expired }]
}

/// Expired locks were reclaimed (`events`: (session, path, kind) of each
/// lock reclaimed): recorded, and dropped from the table as known.
pub(crate) fn locks_reclaimed(
    root: &mut Root,
    id: RootId,
    events: Vec<(String, PathBuf, EventKind)>,
) -> Vec<Effect> {
    root.locks
        .retain(|e| !events.iter().any(|(_, p, _)| p == e.path()));
    let mut effects = lock_events(id, events);
    effects.push(locks_timer(root, id));
    effects
}

/// The events of locks reclaimed or released, (session, path, kind) each,
/// as the effects that record them.
pub(crate) fn lock_events(id: RootId, events: Vec<(String, PathBuf, EventKind)>) -> Vec<Effect> {
    events
        .into_iter()
        .map(|(session, path, kind)| Effect::Emit {
            root: id,
            session: Some(session),
            path: Some(path),
            kind,
        })
        .collect()
}

/// The lock timer: when the next lock of the table expires.
fn locks_timer(root: &Root, id: RootId) -> Effect {
    match crate::locks::next_expiry(&root.locks) {
        Some(at) => Effect::SetTimerAt {
            timer: Timer::Locks(id),
            at,
        },
        None => Effect::CancelTimer(Timer::Locks(id)),
    }
}

/// The lease as the shell read it, or the cluster task's news (`epoch`:
/// the lease's epoch when it is valid now; `news`: what the task said,
/// recorded as an event). On the news of an election with a valid lease,
/// the outputs
/// a follower left unwritten are written: every session's status, the
/// shared context, the notices of every standing fact (a notice already
/// written is never written twice: its id is the fact's hash), and the
/// runs of agents without a `host:` start here now.
pub(crate) fn leadership(
    root: &mut Root,
    id: RootId,
    epoch: Option<u64>,
    news: Option<News>,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    let elected = matches!(news, Some(News::Elected { .. }));
    if let Some(news) = news {
        let kind = match news {
            News::Elected { epoch } => EventKind::LeaderElected { epoch },
            News::Lost { epoch, reason } => EventKind::LeaderLost { epoch, reason },
        };
        effects.push(Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind,
        });
    }
    // Leadership is gained only with the news of an election, so that
    // its `leader-elected` comes before any write it allows (the lease is
    // valid a moment before the news reaches the loop); the look before a
    // batch only takes it away (a lease that ran out unrenewed). The
    // catch-up writes only what differs.
    root.leads = epoch.is_some() && (root.leads || elected);
    if !(root.leads && elected) {
        return effects;
    }
    let names: Vec<String> = root.sessions.keys().cloned().collect();
    effects.push(Effect::WriteStatuses {
        root: id,
        sessions: names.clone(),
    });
    effects.push(Effect::WriteSharedContext(id));
    for name in &names {
        effects.extend(notices::standing_facts(root, id, name));
    }
    effects.push(Effect::FlushOutbox);
    effects.push(Effect::SetTimerEarlier {
        timer: Timer::Runs,
        after: Duration::ZERO,
    });
    effects
}
