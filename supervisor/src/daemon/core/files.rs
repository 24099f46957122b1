//! A protocol file as the shell read it, decided: whether it is new to
//! squadd (a repeated event or squadd's own write is recognised by
//! fingerprint), whether a file found gone counts as removed yet, whether
//! an unreadable file is read again, and what the session core's outcome
//! calls for (events, the wrap-up of a session that ended, task deadline
//! timers, the persisted state, the file's deliveries).
//!
//! The shell reads and hands over bytes, a read error or "gone"; the
//! answers it owes back (is a vanished file still gone after the grace?)
//! come as further inputs.

use super::batch::{CONTEXT_DELAY, REMOVAL_DELAY};
use super::timer::Timer;
use super::{Effect, Now, Root, RootId, is_unreadable};
use crate::daemon::session::{FileOutcome, Outcome};
use crate::index::{Entry, IndexedFile, fingerprint, index_bytes};
use squad_protocol::FileKind;
use std::path::PathBuf;
use std::sync::Arc;

/// One file of a session, as an input names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRef {
    /// Session directory name.
    pub session: String,
    /// The file's name.
    pub file: String,
    /// Its path.
    pub path: PathBuf,
}

/// The shell read a file's bytes.
pub(crate) fn read(
    root: &mut Root,
    id: RootId,
    f: FileRef,
    kind: FileKind,
    bytes: &[u8],
    now: Now,
) -> Vec<Effect> {
    let Some(core) = root.sessions.get(&f.session) else {
        return Vec::new();
    };
    let indexed = core.index().files.get(&f.file).map(|i| i.fingerprint);
    if indexed == Some(fingerprint(bytes)) {
        // A repeated event, or squadd's own write: nothing to parse.
        return vec![Effect::PathPresent(f.path)];
    }
    let loaded = index_bytes(&f.path, kind, bytes);
    present(root, id, f, loaded, now)
}

/// The shell could not read a file: `indexed` is the file indexed with the
/// reason (unreadable, too large, not a regular file), or read after all.
pub(crate) fn unreadable(
    root: &mut Root,
    id: RootId,
    f: FileRef,
    indexed: IndexedFile,
    now: Now,
) -> Vec<Effect> {
    if !root.sessions.contains_key(&f.session) {
        return Vec::new();
    }
    present(root, id, f, indexed, now)
}

/// A file there (read, or indexed as unreadable).
fn present(root: &mut Root, id: RootId, f: FileRef, loaded: IndexedFile, now: Now) -> Vec<Effect> {
    let mut effects = vec![Effect::PathPresent(f.path.clone())];
    if is_unreadable(&loaded) {
        // A read error is never sticky: the file is read again later (its
        // attribute change is an event too).
        effects.push(Effect::RetryUnreadable(f.path.clone()));
        let same = root
            .sessions
            .get(&f.session)
            .and_then(|s| s.index().files.get(&f.file))
            .is_some_and(|old| is_unreadable(old) && old.diagnostics == loaded.diagnostics);
        if same {
            return effects;
        }
    } else {
        effects.push(Effect::PathReadable(f.path.clone()));
    }
    effects.extend(apply(root, id, f, Some(loaded), None, now));
    effects
}

/// The shell found a file gone. An indexed file counts as removed only
/// once it stayed gone for a moment (a file replaced by unlink or rename
/// and create is a change): the shell is asked to confirm
/// ([`Effect::ConfirmGone`], answered by [`removed`]).
pub(crate) fn gone(root: &mut Root, id: RootId, f: FileRef, now: Now) -> Vec<Effect> {
    let Some(core) = root.sessions.get(&f.session) else {
        return Vec::new();
    };
    if core.index().files.contains_key(&f.file) {
        return vec![Effect::ConfirmGone { root: id, file: f }];
    }
    let mut effects = vec![
        Effect::PathPresent(f.path.clone()),
        Effect::PathReadable(f.path.clone()),
    ];
    effects.extend(apply(root, id, f, None, None, now));
    effects
}

/// A file found gone stayed gone: its removal counts now.
pub(crate) fn removed(root: &mut Root, id: RootId, f: FileRef, now: Now) -> Vec<Effect> {
    let mut effects = vec![Effect::PathReadable(f.path.clone())];
    effects.extend(apply(root, id, f, None, None, now));
    effects
}

/// squadd wrote a notice file (`bytes`): indexed from what was written and
/// delivered from it, never read back.
pub(crate) fn notice_written(
    root: &mut Root,
    id: RootId,
    f: FileRef,
    bytes: Arc<[u8]>,
    now: Now,
) -> Vec<Effect> {
    let loaded = index_bytes(&f.path, FileKind::Message, &bytes);
    apply(root, id, f, Some(loaded), Some(bytes), now)
}

/// squadd wrote one of its own outputs into a session (session-status.md):
/// indexed from the bytes written, so its watch event is recognised as
/// squadd's; what the new text derives is carried out, the file itself
/// announces nothing (the write is its own event).
pub(crate) fn own_write(
    root: &mut Root,
    id: RootId,
    f: FileRef,
    kind: FileKind,
    bytes: &[u8],
    now: Now,
) -> Vec<Effect> {
    let entry = index_bytes(&f.path, kind, bytes);
    match root.apply_file(&f.session, &f.file, Some(entry), now.wall) {
        Some(out) => outcome(id, &f.session, out, false),
        None => Vec::new(),
    }
}

/// Tasks of a session whose deadline passed: re-derived without a file
/// change.
pub(crate) fn tasks_due(
    root: &mut Root,
    id: RootId,
    session: &str,
    tasks: &[String],
    now: Now,
) -> Vec<Effect> {
    let Some(out) = root.tick(session, tasks, now.wall) else {
        return Vec::new();
    };
    let mut effects = outcome(id, session, out, false);
    effects.push(Effect::Touched {
        root: id,
        session: session.to_string(),
        removal: false,
    });
    effects
}

/// Hands a file's new contents (`None`: gone) to the session core: what it
/// asks to deliver is routed (from `own`, the bytes squadd wrote, when
/// given), its event emitted, the outcome carried out, and the session
/// marked touched for the batch.
fn apply(
    root: &mut Root,
    id: RootId,
    f: FileRef,
    loaded: Option<IndexedFile>,
    own: Option<Arc<[u8]>>,
    now: Now,
) -> Vec<Effect> {
    let reply_to = |f: Option<&IndexedFile>| match f.map(|f| &f.entry) {
        Some(Entry::Message(m)) => m.in_reply_to.clone(),
        _ => None,
    };
    let Some(core) = root.sessions.get(&f.session) else {
        return Vec::new();
    };
    let before = reply_to(core.index().file(&f.file));
    let after = reply_to(loaded.as_ref());
    // The other files carrying its message id, if it kept the id (first by
    // name, or delivered): they may keep it once this one changed.
    let siblings = if kept_id(root, &f.session, &f.file) {
        core.others_with_message_id(&f.file)
            .into_iter()
            .map(str::to_string)
            .collect()
    } else {
        Vec::new()
    };
    // The file keeping the id this one names now: if this one sorts before
    // it, it takes the id over, and that one is routed again (refused now
    // unless delivered before; what it had waiting withdrawn).
    let new_id = loaded
        .as_ref()
        .filter(|l| l.kind == squad_protocol::FileKind::Message)
        .and_then(|l| squad_protocol::session::SessionMember::message_id(l))
        .map(str::to_string);
    let keeper_before = new_id
        .as_deref()
        .and_then(|m| core.message_file(m))
        .filter(|k| *k != f.file && siblings.iter().all(|s| s != k))
        .map(str::to_string);
    // A progress update of a task: its worktree run's branch is looked at
    // for overlaps (core/runs/overlap.rs).
    let progress_of = loaded.as_ref().and_then(|l| match &l.entry {
        Entry::Progress(p) => Some(p.task_id.clone()),
        _ => None,
    });
    let Some(mut out) = root.apply_file(&f.session, &f.file, loaded, now.wall) else {
        return Vec::new();
    };
    let mut effects = Vec::new();
    if out
        .file
        .as_ref()
        .is_some_and(|o| *o != FileOutcome::Unchanged)
    {
        let mail = root.mail.entry(f.session.clone()).or_default();
        mail.note_reply(before.as_deref(), false);
        mail.note_reply(after.as_deref(), true);
        // Routed by the shell: it reads the inbox copies when message ids
        // clash, then hands the file over (`Input::FileApplied`).
        effects.push(Effect::Route {
            root: id,
            session: f.session.clone(),
            file: f.file.clone(),
            own,
        });
        // It kept a message id and changed (removed, rewritten,
        // unreadable): the others carrying the id are routed again, as a
        // restart would route them (one refused while this one kept the id
        // may keep it now; the clash check decides, nothing goes twice).
        let taken_over = keeper_before.filter(|_| {
            root.sessions
                .get(&f.session)
                .and_then(|c| c.kept_message_id(&f.file))
                .is_some_and(|kept| Some(&kept) == new_id.as_ref())
        });
        for other in siblings.into_iter().chain(taken_over) {
            effects.push(Effect::Route {
                root: id,
                session: f.session.clone(),
                file: other,
                own: None,
            });
        }
        // A reply removed or rewritten: its question may be overdue now.
        if let Some(message_id) = before.filter(|b| Some(b) != after.as_ref()) {
            effects.extend(super::replies::withdrawn(
                root,
                id,
                &f.session,
                &message_id,
                now,
            ));
        }
    }
    let (event, removal) = match out.file.take() {
        None | Some(FileOutcome::Unchanged) => return effects,
        Some(FileOutcome::Removed) => (crate::events::EventKind::FileRemoved, true),
        Some(FileOutcome::Changed(event)) => (event, false),
    };
    effects.push(Effect::Emit {
        root: id,
        session: Some(f.session.clone()),
        path: Some(f.path),
        kind: event,
    });
    effects.extend(outcome(id, &f.session, out, removal));
    if let Some(task) = progress_of {
        effects.extend(super::runs::overlap::progress(root, id, &f.session, &task));
    }
    effects.push(Effect::Touched {
        root: id,
        session: f.session,
        removal,
    });
    effects
}

/// Whether message file `file` keeps its message id: the first by name
/// carrying it, or one of its deliveries made (delivered before a clash).
fn kept_id(root: &Root, session: &str, file: &str) -> bool {
    let Some(core) = root.sessions.get(session) else {
        return false;
    };
    if core.kept_message_id(file).is_some() {
        return true;
    }
    let (Some(f), Some(mail)) = (core.index().files.get(file), root.mail.get(session)) else {
        return false;
    };
    crate::daemon::routing::file_deliveries(&root.root, session, &core.index().dir, f)
        .iter()
        .any(|d| mail.is_delivered(&d.to, &d.name))
}

/// What a session change caused, as effects: events, the wrap-up of a
/// session that ended, the persisted state, task deadline timers. A
/// session that ended by `removal` (only losing files) is wrapped up after
/// [`REMOVAL_DELAY`] if it still exists and still ended then.
pub(crate) fn outcome(id: RootId, session: &str, out: Outcome, removal: bool) -> Vec<Effect> {
    let emit = |kind| Effect::Emit {
        root: id,
        session: Some(session.to_string()),
        path: None,
        kind,
    };
    let mut effects: Vec<Effect> = out.events.into_iter().map(emit).collect();
    if let Some(status) = out.ended {
        let timer = Timer::WrapUp {
            root: id,
            session: session.to_string(),
        };
        effects.push(if removal {
            Effect::SetTimer {
                timer,
                after: REMOVAL_DELAY,
            }
        } else {
            Effect::WrapUp {
                root: id,
                session: session.to_string(),
                status: status.to_string(),
            }
        });
    }
    effects.extend(out.overdue.into_iter().map(emit));
    if out.state_changed {
        // Written behind: at most once per burst.
        effects.push(Effect::SetTimerEarlier {
            timer: Timer::SaveState(id),
            after: CONTEXT_DELAY,
        });
    }
    for (task, at) in out.timers {
        let timer = Timer::TaskDue {
            root: id,
            session: session.to_string(),
            task,
        };
        effects.push(match at {
            Some(at) => Effect::SetTimerAt { timer, at },
            None => Effect::CancelTimer(timer),
        });
    }
    effects
}
