//! Whole sessions and roots, decided: a session scanned (at start-up, the
//! baseline; later, announced), a session directory that appeared or
//! vanished, a root listed by a rescan (lost events, a root that came
//! back), a session's inboxes listed (its mailbox seeded, its backlog
//! offered). The shell lists and scans; the core says what follows.

use super::batch::CONTEXT_DELAY;
use super::files::{self, FileRef};
use super::timer::{ROOT_CHECK_FIRST, Timer};
use super::{Effect, Now, Root, RootId, notices};
use crate::daemon::routing::Mailbox;
use crate::events::EventKind;
use crate::index::SessionIndex;
use chrono::{DateTime, Utc};
use squad_protocol::FileKind;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// How long after the last burst batch (or rescan) freed memory is given
/// back to the OS.
pub(crate) const TRIM_DELAY: Duration = Duration::from_secs(2);

/// Why a session was scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scanned {
    /// The start-up scan: the baseline, nothing announced.
    StartUp,
    /// Its directory appeared (announced as added, its mail seeded).
    Appeared,
    /// A rescan found it (its changes announced; the listing seeds its
    /// mail).
    Rescan,
}

/// One entry of a session's inboxes as listed: (agent, file name, unread,
/// modification time of an unread one).
pub(crate) type InboxListing = (String, String, bool, Option<DateTime<Utc>>);

/// A session was scanned.
pub(crate) fn scanned(
    root: &mut Root,
    id: RootId,
    index: SessionIndex,
    why: Scanned,
    now: Now,
) -> Vec<Effect> {
    let name = index.name.clone();
    let dir = index.dir.clone();
    let out = root.load_session(index, now.wall, why != Scanned::StartUp);
    let mut effects = Vec::new();
    if why == Scanned::Appeared {
        effects.push(emit(id, &name, Some(dir), EventKind::SessionAdded));
    }
    if why != Scanned::Rescan {
        effects.extend(invalid_files(root, id, &name));
    }
    if why == Scanned::StartUp {
        // Facts that arose while squadd was down (told once: see notices),
        // tapped as each session loads, but the overdue facts the load
        // reported: their `task-overdue` events are tapped already.
        effects.extend(notices::standing_facts_but(root, id, &name, &out.overdue));
        // A session that ended while squadd was down may still hold its
        // locks, and may lack its summary: the shell looks.
        let ended = out.ended;
        effects.extend(files::outcome(
            id,
            &name,
            crate::daemon::session::Outcome { ended: None, ..out },
            false,
        ));
        if let Some(status) = ended {
            effects.push(Effect::FinishEnded {
                root: id,
                session: name,
                status: status.to_string(),
            });
        }
        return effects;
    }
    effects.extend(files::outcome(id, &name, out, false));
    if why == Scanned::Appeared {
        effects.push(Effect::SeedMail {
            root: id,
            session: name.clone(),
        });
        effects.push(Effect::Touched {
            root: id,
            session: name,
            removal: false,
        });
    }
    effects
}

/// Every invalid file of a session, reported (an unreadable one is read
/// again later).
fn invalid_files(root: &Root, id: RootId, name: &str) -> Vec<Effect> {
    let mut effects = Vec::new();
    for (path, errors, first, unreadable) in root.invalid_files(name) {
        if unreadable {
            effects.push(Effect::RetryUnreadable(path.clone()));
        }
        effects.push(emit(
            id,
            name,
            Some(path),
            EventKind::FileInvalid { errors, first },
        ));
    }
    effects
}

fn emit(id: RootId, session: &str, path: Option<PathBuf>, kind: EventKind) -> Effect {
    Effect::Emit {
        root: id,
        session: Some(session.to_string()),
        path,
        kind,
    }
}

/// The start-up scan could not read the root: it counts as missing and is
/// looked for.
pub(crate) fn start_failed(root: &mut Root, id: RootId) -> Vec<Effect> {
    root.missing = true;
    vec![
        Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::RootMissing,
        },
        Effect::SetTimer {
            timer: Timer::RootCheck(id),
            after: ROOT_CHECK_FIRST,
        },
    ]
}

/// Every session of the start-up scan is loaded (`complete`: the scan
/// read the root, so the persisted state of sessions not found is
/// dropped; each session's standing facts were tapped as it loaded):
/// their status files written, skills read, the backlog of mail offered, the first batch of notices told,
/// the state and shared context written, the start announced.
pub(crate) fn start_done(root: &mut Root, id: RootId, files: usize, complete: bool) -> Vec<Effect> {
    if complete {
        // Sessions deleted or archived while squadd was down.
        root.prune_state();
    }
    let names: Vec<String> = root.sessions.keys().cloned().collect();
    let mut effects = vec![
        Effect::WriteStatuses {
            root: id,
            sessions: names.clone(),
        },
        Effect::RefreshSkills(id),
    ];
    // The backlog written while squadd was down: critical first.
    for name in &names {
        effects.push(Effect::SeedMail {
            root: id,
            session: name.clone(),
        });
    }
    // A few notices now: a start-up that owes a few is quiet once ready;
    // one that owes thousands tells the rest after READY, a batch per
    // wake-up (issue 23 item 2).
    effects.extend([
        Effect::SendFirstNotices,
        Effect::FlushOutbox,
        Effect::SaveState(id),
        Effect::WriteSharedContextNow(id),
        Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::Started {
                sessions: names.len(),
                files,
            },
        },
    ]);
    effects
}

/// A rescan is due; `present`: whether the root's `.squad/sessions` is
/// there.
pub(crate) fn rescan_due(root: &mut Root, id: RootId, present: bool) -> Vec<Effect> {
    if root.taken_over.is_some() {
        return Vec::new();
    }
    if !present {
        // The kernel dropped the watches of everything that vanished.
        let mut effects = vec![Effect::ForgetWatches(id)];
        if !root.missing {
            root.missing = true;
            // A root deleted and recreated is a new directory that no
            // watch covers: look for it (only while it is missing).
            root.check_after = ROOT_CHECK_FIRST;
            effects.push(Effect::Emit {
                root: id,
                session: None,
                path: None,
                kind: EventKind::RootMissing,
            });
            effects.push(Effect::SetTimer {
                timer: Timer::RootCheck(id),
                after: ROOT_CHECK_FIRST,
            });
        }
        return effects;
    }
    let mut effects = Vec::new();
    if root.missing {
        // Watches of a root directory that was replaced are dead.
        effects.push(Effect::CancelTimer(Timer::RootCheck(id)));
        effects.push(Effect::UnwatchRoot(id));
    }
    effects.push(Effect::ListSessions(id));
    effects
}

/// A rescan listed the root's session directories: sessions gone are
/// forgotten, known ones brought up to date file by file, new ones
/// scanned, each one's mail seeded; every session counts as changed.
pub(crate) fn listed(root: &mut Root, id: RootId, names: BTreeSet<String>) -> Vec<Effect> {
    let mut effects = vec![
        Effect::SetTimer {
            timer: Timer::Skills(id),
            after: Duration::ZERO,
        },
        // What the reads of a rescan used goes back once the rescans of a
        // burst are over.
        Effect::SetTimer {
            timer: Timer::Trim,
            after: TRIM_DELAY,
        },
    ];
    let old: BTreeSet<String> = root.sessions.keys().cloned().collect();
    for gone in old.difference(&names) {
        effects.extend(session_gone(root, id, gone));
    }
    // What changed while events were lost is announced as changes.
    for name in &names {
        effects.push(if old.contains(name) {
            Effect::RescanSession {
                root: id,
                session: name.clone(),
            }
        } else {
            Effect::ScanSession {
                root: id,
                session: name.clone(),
                why: Scanned::Rescan,
            }
        });
        effects.push(Effect::SeedMail {
            root: id,
            session: name.clone(),
        });
    }
    effects.push(Effect::FinishRescan(id));
    for session in names.union(&old) {
        effects.push(Effect::Touched {
            root: id,
            session: session.clone(),
            removal: false,
        });
    }
    effects
}

/// The missing root's `.squad/` was found under another name (another
/// tool's import moved it, with squadd's sessions, `run/` and policy): said
/// once per place (`root-moved`), kept for `status` and `health` until the
/// root is back.
pub(crate) fn root_moved(root: &mut Root, id: RootId, to: String) -> Vec<Effect> {
    if !root.missing || root.moved_to.as_deref() == Some(to.as_str()) {
        return Vec::new();
    }
    root.moved_to = Some(to.clone());
    vec![Effect::Emit {
        root: id,
        session: None,
        path: None,
        kind: EventKind::RootMoved { to },
    }]
}

/// The sessions of a rescan are read: the root is present again.
pub(crate) fn rescanned(root: &mut Root, id: RootId) -> Vec<Effect> {
    let was_missing = std::mem::replace(&mut root.missing, false);
    root.moved_to = None;
    let mut effects = Vec::new();
    let reason = if was_missing {
        effects.push(Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::RootRestored,
        });
        "root restored"
    } else {
        "the watcher asked for a rescan"
    };
    effects.push(Effect::Emit {
        root: id,
        session: None,
        path: None,
        kind: EventKind::Rescanned {
            reason: reason.into(),
        },
    });
    effects
}

/// A known session's files as listed by a rescan: each on disk is read
/// the way a file event reads it (the same bytes as indexed are not
/// parsed again), each indexed file no longer listed is read too (found
/// gone: a removal).
pub(crate) fn files_listed(
    root: &Root,
    id: RootId,
    session: &str,
    on_disk: Vec<(PathBuf, FileKind)>,
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    let dir = root.session_dir(session);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut effects = Vec::new();
    for (path, kind) in on_disk {
        let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let file = file.to_string();
        seen.insert(file.clone());
        effects.push(read(id, session, file, path, kind));
    }
    for (file, f) in core.index().files.iter() {
        if !seen.contains(file) {
            effects.push(read(id, session, file.to_string(), dir.join(file), f.kind));
        }
    }
    effects
}

fn read(id: RootId, session: &str, file: String, path: PathBuf, kind: FileKind) -> Effect {
    Effect::ReadFile {
        root: id,
        file: FileRef {
            session: session.to_string(),
            file,
            path,
        },
        kind,
    }
}

/// A session directory is there (`present`) or not: a new one is watched
/// and scanned (watch first: files created before the watch existed are
/// found by the scan), a known one gone is forgotten.
pub(crate) fn session_dir(
    root: &mut Root,
    id: RootId,
    session: &str,
    present: bool,
) -> Vec<Effect> {
    let known = root.sessions.contains_key(session);
    match (present, known) {
        (true, false) => vec![
            Effect::WatchSession {
                root: id,
                session: session.to_string(),
            },
            Effect::ScanSession {
                root: id,
                session: session.to_string(),
                why: Scanned::Appeared,
            },
        ],
        (false, true) => session_gone(root, id, session),
        _ => Vec::new(),
    }
}

/// A session directory vanished: it is forgotten with everything
/// remembered of it, its timers, watches and staged writes go, and the
/// shared context and state are written without it.
pub(crate) fn session_gone(root: &mut Root, id: RootId, session: &str) -> Vec<Effect> {
    let dir = root.session_dir(session);
    root.remove_session(session);
    vec![
        Effect::ForgetSession {
            root: id,
            session: session.to_string(),
        },
        emit(id, session, Some(dir), EventKind::SessionRemoved),
        Effect::SetTimerEarlier {
            timer: Timer::Context(id),
            after: CONTEXT_DELAY,
        },
        Effect::SetTimerEarlier {
            timer: Timer::SaveState(id),
            after: CONTEXT_DELAY,
        },
    ]
}

/// A session's inboxes were listed: its mailbox is seeded from the
/// listing (unread counts, the escalation queue), what is past due is
/// escalated now, and everything its files ask to deliver is offered (the
/// backlog).
pub(crate) fn inboxes_listed(
    root: &mut Root,
    id: RootId,
    session: &str,
    entries: Vec<InboxListing>,
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(session) else {
        return Vec::new();
    };
    let mut mail = Mailbox::default();
    mail.seed(&root.policy.messages, entries);
    let mut files = Vec::new();
    for (file, f) in core.index().files.iter() {
        if let crate::index::Entry::Message(m) = &f.entry {
            mail.note_reply(m.in_reply_to.as_deref(), true);
        }
        files.push(file.to_string());
    }
    root.mail.insert(session.to_string(), mail);
    let mut effects = vec![Effect::RunEscalations {
        root: id,
        session: session.to_string(),
    }];
    effects.extend(files.into_iter().map(|file| Effect::Route {
        root: id,
        session: session.to_string(),
        file,
        own: None,
    }));
    effects
}
