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
