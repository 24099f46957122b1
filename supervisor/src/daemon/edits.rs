//! Explicit session edits (`squadctl session complete|fail|phase|gate`)
//! applied by squadd itself, and the per-session lock around every status
//! write (see [`crate::session_edit`]).
//!
//! The text after an edit and what its write calls for are decided in
//! [`core::edits`] (`decide`, `Input::EditWritten`, `Input::SessionEdited`);
//! what still decides here: how long an edit waits for the lock, and the
//! answer's wording for a session squadd does not know.
//!
//! squadd is the one writer of session-status.md while it runs: an edit is
//! applied to the text squadd holds (after re-reading the file under the
//! lock, in case something changed it behind squadd's back), written, and
//! indexed before the answer goes back, so no later render starts from a
//! text older than the edit.

use super::Supervisor;
use super::core::{self, RootId};
use crate::control::Response;
use crate::session_edit::{EditError, lock_session};
use chrono::{DateTime, Utc};
use squad_policies::session_edit::SessionEdit;
use squad_protocol::FileKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use std::fs::File;
use std::time::{Duration, Instant};

/// How long an edit waits for a session lock someone else holds (squadctl
/// holds it for one read-modify-write; a holder that keeps it longer gets
/// the edit refused, not the daemon stalled).
const EDIT_LOCK_WAIT: Duration = Duration::from_millis(250);

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

impl Supervisor {
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
        if !self.roots.core(i).sessions.contains_key(name) {
            return Response::error(format!(
                "no session `{}` is known to squadd",
                crate::text::escape(name)
            ));
        }
        let waited = Instant::now();
        let lock = loop {
            match self.lock_status(i, name) {
                Locked::Held(f) => break Some(f),
                Locked::Unavailable => break None,
                Locked::Busy if waited.elapsed() < EDIT_LOCK_WAIT => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Locked::Busy => {
                    return Response::error(format!(
                        "another process holds the lock of session `{}`; try again",
                        crate::text::escape(name)
                    ));
                }
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

    /// The edit itself, under the lock: (the text now in the file, whether
    /// it changed).
    fn edit_locked(
        &mut self,
        i: RootId,
        name: &str,
        edit: &SessionEdit,
        wall: DateTime<Utc>,
    ) -> Result<(String, bool), EditError> {
        let core::edits::Edited {
            path,
            text: new,
            write,
        } = core::edits::decide(self.roots.core(i), name, edit, core::Now { wall })?;
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
