//! Explicit session edits (`squadctl session complete|fail|phase|gate`)
//! applied by squadd itself, and the per-session lock around every status
//! write (see [`crate::session_edit`]).
//!
//! What an edit does is decided in [`core::edits`]: the session known or
//! not, the lock taken, tried again or given up (`Input::Edit`), the text
//! after the edit (`decide`), what its write calls for
//! (`Input::EditWritten`, `Input::SessionEdited`). What is here is I/O:
//! taking the lock, waiting the pause the core asked for, re-reading and
//! writing the file, answering the request.
//!
//! squadd is the one writer of session-status.md while it runs: an edit is
//! applied to the text squadd holds (after re-reading the file under the
//! lock, in case something changed it behind squadd's back), written, and
//! indexed before the answer goes back, so no later render starts from a
//! text older than the edit.

use super::EventLoop;
use super::core::edits::{EditInput, EditNext, LockTry};
use super::core::{self, RootId};
use crate::control::Response;
use crate::session_edit::{EditError, lock_session};
use chrono::{DateTime, Utc};
use squad_policies::session_edit::SessionEdit;
use squad_protocol::FileKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::fs::File;
use std::time::Instant;

/// What taking a session's lock for a status write gave.
pub(crate) enum Locked {
    /// Held until dropped.
    Held(File),
    /// Someone else holds it: try later.
    Busy,
    /// The lock file cannot be used (`.squad/run` unusable, a name too
    /// long): the write goes ahead unlocked rather than not at all.
    Unavailable,
}

impl EventLoop {
    /// Takes session `name`'s lock without waiting.
    pub(super) fn lock_status(&self, i: RootId, name: &str) -> Locked {
        match lock_session(&self.roots.core(i).root, name, false) {
            Ok(Some(f)) => Locked::Held(f),
            Ok(None) => Locked::Busy,
            Err(e) => {
                tracing::debug!(session = name, error = %e, "session lock unavailable");
                Locked::Unavailable
            }
        }
    }

    /// Under the session's lock: re-reads session-status.md and indexes it
    /// when it is not what squadd holds (an edit squadctl made while squadd
    /// was not answering yet).
    pub(super) fn reread_status(&mut self, i: RootId, name: &str) {
        let path = self
            .roots
            .core(i)
            .session_dir(name)
            .join(SESSION_STATUS_FILE);
        if self.roots.core(i).sessions.contains_key(name) {
            self.apply_file(i, name, SESSION_STATUS_FILE, &path, FileKind::SessionStatus);
        }
    }

    /// Applies a session edit and answers the control request.
    pub(super) fn session_edit(&mut self, i: RootId, name: &str, edit: SessionEdit) -> Response {
        let wall = Utc::now();
        let now = core::Now { wall };
        let asked = EditInput::Asked {
            session: name.to_string(),
        };
        let mut next = self.edit_step(i, asked, now);
        let mut waited: Option<Instant> = None;
        let lock = loop {
            match next {
                Some(EditNext::TakeLock) => {}
                Some(EditNext::RetryLock(after)) => std::thread::sleep(after),
                Some(EditNext::Proceed) => break None,
                Some(EditNext::Refuse(why)) => return Response::error(why),
                Some(EditNext::Apply(_)) | None => {
                    return Response::error("no answer from the session edit".to_string());
                }
            }
            let first = *waited.get_or_insert_with(Instant::now);
            let (held, lock) = match self.lock_status(i, name) {
                Locked::Held(f) => (Some(f), LockTry::Held),
                Locked::Busy => (None, LockTry::Busy),
                Locked::Unavailable => (None, LockTry::Unavailable),
            };
            let tried = EditInput::LockTried {
                session: name.to_string(),
                lock,
                waited: first.elapsed(),
            };
            next = self.edit_step(i, tried, now);
            if held.is_some() && next == Some(EditNext::Proceed) {
                break held;
            }
        };
        self.reread_status(i, name);
        match self.edit_locked(i, name, &edit, wall) {
            Ok((text, changed)) => {
                let held = lock.map(|f| (name, f));
                self.lock_statuses(i, vec![name.to_string()], held, core::Now { wall });
                let input = core::Input::SessionEdited {
                    session: name.to_string(),
                };
                self.step(i, input, core::Now { wall });
                let path = self
                    .roots
                    .core(i)
                    .session_dir(name)
                    .join(SESSION_STATUS_FILE);
                let o = crate::session_edit::outcome(&path, &text, &edit, changed, "squadd");
                match serde_json::to_value(o) {
                    Ok(v) => Response::ok(v),
                    Err(e) => Response::error(e.to_string()),
                }
            }
            Err(EditError::Refused(why)) => Response::ok(serde_json::json!({ "refused": why })),
            Err(EditError::Failed(why)) => Response::error(why),
        }
    }

    /// One step of an edit's request: its next step (the core's
    /// [`core::Effect::Edit`]), every other effect carried out.
    fn edit_step(&mut self, i: RootId, input: EditInput, now: core::Now) -> Option<EditNext> {
        let effects =
            core::Core::new(i, self.roots.core_mut(i)).step(core::Input::Edit(input), now);
        let mut next = None;
        let mut rest = Vec::new();
        for e in effects {
            match e {
                core::Effect::Edit { next: n, .. } => next = Some(n),
                other => rest.push(other),
            }
        }
        self.perform(rest, now);
        next
    }

    /// The edit itself, under the lock: (the text now in the file, whether
    /// it changed).
    fn edit_locked(
        &mut self,
        i: RootId,
        name: &str,
        edit: &SessionEdit,
        wall: DateTime<Utc>,
    ) -> Result<(String, bool), EditError> {
        let apply = EditInput::Apply {
            session: name.to_string(),
            edit: edit.clone(),
        };
        let Some(EditNext::Apply(edited)) = self.edit_step(i, apply, core::Now { wall }) else {
            return Err(EditError::Failed(
                "no answer from the session edit".to_string(),
            ));
        };
        let core::edits::Edited {
            path,
            text: new,
            write,
        } = edited?;
        if !write {
            return Ok((new, false));
        }
        self.writer
            .write(&path, new.as_bytes(), false)
            .map_err(|e| EditError::Failed(format!("{}: {e}", path.display())))?;
        let input = core::Input::EditWritten {
            session: name.to_string(),
            path,
            text: &new,
        };
        self.step(i, input, core::Now { wall });
        // Replication call site: the leader's edit (its own or a
        // follower's, forwarded) to every checkout (docs/cluster.md).
        self.roots.shell(i).publish_owned(name, SESSION_STATUS_FILE);
        Ok((new, true))
    }
}
