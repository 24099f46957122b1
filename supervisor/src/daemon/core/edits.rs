//! Session edits (`squadctl session complete|fail|phase|gate` over the
//! socket) decided: the text session-status.md is to hold after the edit,
//! from the text squadd holds (the shell re-read it under the session's
//! lock just before), and what follows an edit that was written. The shell
//! takes the lock, writes the file and answers the request
//! (`daemon/edits.rs`).

use super::batch::CONTEXT_DELAY;
use super::files::{self, FileRef};
use super::timer::Timer;
use super::{Effect, Now, Root, RootId};
use crate::events::EventKind;
use crate::session_edit::EditError;
use squad_policies::session_edit::SessionEdit;
use squad_protocol::FileKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::path::PathBuf;
use std::time::Duration;

/// What an edit makes of session-status.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edited {
    /// The file.
    pub path: PathBuf,
    /// Its text after the edit.
    pub text: String,
    /// Whether that text is to be written (it differs from the file's, or
    /// there is no file yet).
    pub write: bool,
}

/// The text session-status.md holds after `edit`, applied at `now` to the
/// text squadd holds (none yet: the one squadd would write). A file that is
/// not readable text is refused rather than overwritten.
pub(crate) fn decide(
    root: &Root,
    session: &str,
    edit: &SessionEdit,
    now: Now,
) -> Result<Edited, EditError> {
    let path = root.session_dir(session).join(SESSION_STATUS_FILE);
    let core = root
        .sessions
        .get(session)
        .ok_or_else(|| EditError::Failed("the session went away".into()))?;
    let current: String = match core.index().files.get(SESSION_STATUS_FILE) {
        Some(f) => match f.text.as_deref() {
            Some(t) => t.to_string(),
            None => {
                return Err(EditError::Failed(format!(
                    "{}: not readable text; fix it first (squadctl validate)",
                    path.display()
                )));
            }
        },
        // No status file yet: the one squadd would write.
        None => crate::outputs::render_status(None, &core.head(), now.wall)
            .ok_or_else(|| EditError::Failed("cannot render a status file".into()))?,
    };
    let text = crate::session_edit::apply(&path, &current, edit, now.wall)?;
    let on_disk = core.index().files.contains_key(SESSION_STATUS_FILE);
    let write = text != current || !on_disk;
    Ok(Edited { path, text, write })
}

/// The text an edit decided ([`decide`]) was written to session-status.md
/// at `path`: indexed from the bytes written (squadd's own write, never
/// read back, so no later render starts from an older text), then said
/// (`output-written`).
pub(crate) fn written(
    root: &mut Root,
    id: RootId,
    session: &str,
    path: PathBuf,
    text: &str,
    now: Now,
) -> Vec<Effect> {
    let file = FileRef {
        session: session.to_string(),
        file: SESSION_STATUS_FILE.to_string(),
        path: path.clone(),
    };
    let kind = FileKind::SessionStatus;
    let mut effects = files::own_write(root, id, file, kind, text.as_bytes(), now);
    effects.push(Effect::Emit {
        root: id,
        session: Some(session.to_string()),
        path: Some(path),
        kind: EventKind::OutputWritten {
            output: "session-status".into(),
        },
    });
    effects
}

/// An edit was applied and its status file written: deliveries waiting on
/// the session are offered again and made, and the shared context follows
/// soon (coalesced with a burst).
pub(crate) fn applied(id: RootId, session: &str) -> Vec<Effect> {
    vec![
        Effect::RecheckWaiting {
            root: id,
            session: session.to_string(),
        },
        Effect::FlushOutbox,
        Effect::SetTimerEarlier {
            timer: Timer::Context(id),
            after: CONTEXT_DELAY,
        },
    ]
}

/// How long an edit waits for a session lock someone else holds (squadctl
/// holds it for one read-modify-write; a holder that keeps it longer gets
/// the edit refused, not the daemon stalled).
pub(crate) const EDIT_LOCK_WAIT: Duration = Duration::from_millis(250);

/// The pause before an edit tries a busy session lock again.
pub(crate) const EDIT_LOCK_RETRY: Duration = Duration::from_millis(2);

/// What taking a session's lock for an edit gave (the shell keeps the
/// lock itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockTry {
    /// Taken: held until the edit is written.
    Held,
    /// Someone else holds it.
    Busy,
    /// The lock file cannot be used (`.squad/run` unusable, a name too
    /// long).
    Unavailable,
}

/// A session edit's request and its lock, as the shell saw them
/// ([`super::Input::Edit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditInput {
    /// `squadctl session ...` asked to edit `session`.
    Asked {
        /// Session directory name, as the client sent it.
        session: String,
    },
    /// The session's lock was tried, `waited` after the first try.
    LockTried {
        /// Session directory name.
        session: String,
        /// What the try gave.
        lock: LockTry,
        /// How long the edit has waited for the lock so far.
        waited: Duration,
    },
    /// The edit is to be made now (the lock taken or given up, the status
    /// file re-read): what session-status.md holds after it
    /// ([`EditNext::Apply`]).
    Apply {
        /// Session directory name.
        session: String,
        /// The edit asked for.
        edit: SessionEdit,
    },
}

/// What an edit does next ([`Effect::Edit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EditNext {
    /// Take the session's lock without waiting, and say what it gave.
    TakeLock,
    /// Try the lock again after this pause.
    RetryLock(Duration),
    /// Go ahead: re-read the status file and apply the edit (under the
    /// lock if it was taken; unlocked when the lock cannot be used: the
    /// write goes ahead rather than not at all).
    Proceed,
    /// Answer the request with this error.
    Refuse(String),
    /// The edit's text ([`decide`]): write it if it says so, or answer
    /// with its refusal or failure.
    Apply(Result<Edited, EditError>),
}

/// A session edit's request or lock: an unknown session is refused; a
/// known one's lock is taken, tried again while someone else holds it
/// for less than [`EDIT_LOCK_WAIT`], then the edit is refused.
pub(crate) fn step(root: &Root, id: RootId, input: EditInput, now: Now) -> Vec<Effect> {
    let (session, next) = match input {
        EditInput::Apply { session, edit } => {
            let edited = decide(root, &session, &edit, now);
            (session, EditNext::Apply(edited))
        }
        EditInput::Asked { session } if !root.sessions.contains_key(&session) => {
            let why = format!(
                "no session `{}` is known to squadd",
                crate::text::escape(&session)
            );
            (session, EditNext::Refuse(why))
        }
        EditInput::Asked { session } => (session, EditNext::TakeLock),
        EditInput::LockTried {
            session,
            lock: LockTry::Held | LockTry::Unavailable,
            ..
        } => (session, EditNext::Proceed),
        EditInput::LockTried {
            session, waited, ..
        } if waited < EDIT_LOCK_WAIT => (session, EditNext::RetryLock(EDIT_LOCK_RETRY)),
        EditInput::LockTried { session, .. } => {
            let why = format!(
                "another process holds the lock of session `{}`; try again",
                crate::text::escape(&session)
            );
            (session, EditNext::Refuse(why))
        }
    };
    vec![Effect::Edit {
        root: id,
        session,
        next,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::core::tests::{SESSION, id, now, root, root_with};
    use crate::daemon::core::{Core, Input};

    fn next(r: &mut Root, input: EditInput) -> Vec<Effect> {
        Core::new(id(0), r).step(Input::Edit(input), now(0))
    }

    fn edit(session: &str, next: EditNext) -> Vec<Effect> {
        vec![Effect::Edit {
            root: id(0),
            session: session.to_string(),
            next,
        }]
    }

    fn tried(lock: LockTry, waited_ms: u64) -> EditInput {
        EditInput::LockTried {
            session: SESSION.into(),
            lock,
            waited: Duration::from_millis(waited_ms),
        }
    }

    #[test]
    fn an_edit_of_an_unknown_session_is_refused_with_its_name_escaped_and_takes_no_lock() {
        let mut r = root();
        let asked = EditInput::Asked {
            session: "nope\u{1b}[2J".into(),
        };
        let effects = next(&mut r, asked);
        assert_eq!(
            effects,
            edit(
                "nope\u{1b}[2J",
                EditNext::Refuse(format!(
                    "no session `{}` is known to squadd",
                    crate::text::escape("nope\u{1b}[2J")
                ))
            )
        );
        let Effect::Edit {
            next: EditNext::Refuse(why),
            ..
        } = &effects[0]
        else {
            unreachable!()
        };
        assert!(!why.contains('\u{1b}'), "{why}");
    }

    /// Issue 42 item 2: the edit's text comes back through the door
    /// (`EditNext::Apply`), never from a call of the shell's.
    #[test]
    fn an_edit_to_apply_comes_back_with_its_text_or_why_not() {
        let fail = SessionEdit::Fail {
            reason: "out of budget".into(),
        };
        let apply = || EditInput::Apply {
            session: SESSION.into(),
            edit: fail.clone(),
        };
        let mut r = root_with(&[crate::daemon::core::tests_mail::plan(1, "bob", &[])]);
        assert_eq!(
            next(&mut r, apply()),
            edit(SESSION, EditNext::Apply(decide(&r, SESSION, &fail, now(0))))
        );
        let [
            Effect::Edit {
                next: EditNext::Apply(Ok(e)),
                ..
            },
        ] = &next(&mut r, apply())[..]
        else {
            unreachable!()
        };
        assert!(e.write && e.text.contains("out of budget"), "{}", e.text);
        // A session squadd does not have: why, not a write.
        let mut gone = root();
        assert!(matches!(
            &next(&mut gone, apply())[..],
            [Effect::Edit {
                next: EditNext::Apply(Err(EditError::Failed(_))),
                ..
            }]
        ));
    }

    #[test]
    fn an_edit_takes_the_lock_retries_it_while_busy_then_gives_up_after_the_wait() {
        let mut r = root_with(&[]);
        let asked = EditInput::Asked {
            session: SESSION.into(),
        };
        assert_eq!(next(&mut r, asked), edit(SESSION, EditNext::TakeLock));
        // Busy: tried again after a short pause, as long as the wait lasts.
        for waited in [0, 100, 249] {
            assert_eq!(
                next(&mut r, tried(LockTry::Busy, waited)),
                edit(SESSION, EditNext::RetryLock(EDIT_LOCK_RETRY)),
                "waited {waited} ms"
            );
        }
        // Still busy once the wait is over: refused, the daemon not stalled.
        assert_eq!(
            next(&mut r, tried(LockTry::Busy, 250)),
            edit(
                SESSION,
                EditNext::Refuse(format!(
                    "another process holds the lock of session `{SESSION}`; try again"
                ))
            )
        );
        // Taken, or unusable (the write goes ahead unlocked): go ahead,
        // however long it took.
        for lock in [LockTry::Held, LockTry::Unavailable] {
            for waited in [0, 250, 10_000] {
                assert_eq!(
                    next(&mut r, tried(lock, waited)),
                    edit(SESSION, EditNext::Proceed)
                );
            }
        }
    }
}
