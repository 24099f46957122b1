//! The wrap-up of a session that ended, decided here: whether its locks
//! are released and its summary written (a session that ended in this
//! batch; one held back while it was only losing files, if its directory
//! is still there; one found ended at start-up, for what a stop cut
//! short), the summary's text, and what each part reports. The shell
//! looks at the directories, releases the locks, removes the temporary
//! files and writes the summary (`daemon/writes.rs`, `daemon/upkeep.rs`).

use super::timer::Timer;
use super::{Effect, Now, Root, RootId};
use crate::daemon::SUMMARY_FILE;
use crate::events::EventKind;
use crate::outputs::render_summary;
use std::path::PathBuf;
use std::time::Duration;

/// Why a session is wrapped up, with what the shell saw of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WrapUpWhy {
    /// It ended in this batch ([`Effect::WrapUp`]).
    Ended,
    /// It ended while only losing files and its wait is over
    /// ([`Effect::WrapUpIfPresent`]): only if its directory is still
    /// there (a session being deleted is never written into).
    Held {
        /// Whether the session directory is there.
        dir_present: bool,
    },
    /// It was found ended at start-up ([`Effect::FinishEnded`]): what a
    /// stop cut short is finished (locks whose `locks/` is still there
    /// released, a missing summary written).
    Found {
        /// Whether its `locks/` is there.
        locks_dir: bool,
        /// Whether its summary.md is there.
        summary_present: bool,
    },
}

/// A session's wrap-up is due: its lock release and its summary, in that
/// order, as [`WrapUpWhy`] says.
pub(crate) fn due(
    root: &mut Root,
    id: RootId,
    session: &str,
    status: &str,
    why: WrapUpWhy,
    now: Now,
) -> Vec<Effect> {
    // A session that completed while a run of it is live or a branch of it
    // is not merged (nor dropped) yet ends when they are (docs/worktrees.md,
    // "Hand-over"): `session-ended` never comes before the last merge.
    if !matches!(why, WrapUpWhy::Found { .. })
        && super::runs::handover::defer_wrap_up(root, session, status)
    {
        return Vec::new();
    }
    let (release, summarize) = match why {
        WrapUpWhy::Ended => (true, true),
        WrapUpWhy::Held { dir_present } => (dir_present, dir_present),
        WrapUpWhy::Found {
            locks_dir,
            summary_present,
        } => (locks_dir, !summary_present),
    };
    let mut effects = Vec::new();
    if release {
        effects.push(Effect::ReleaseSessionLocks {
            root: id,
            session: session.to_string(),
            reason: format!("session {status}"),
        });
    }
    // An unknown session has no summary to render (nor temporaries
    // removed: it may be being deleted).
    if let Some(core) = root.sessions.get(session).filter(|_| summarize) {
        let dir = root.session_dir(session);
        let text = render_summary(
            core.index(),
            &core.view(),
            &root.escalations(session),
            &core.violations,
            now.wall,
        );
        effects.push(Effect::EndSession {
            root: id,
            session: session.to_string(),
            status: status.to_string(),
            path: dir.join(SUMMARY_FILE),
            text,
        });
    }
    effects
}

/// A session's locks were released (`events`: (session, path, kind) of
/// each): recorded, and the lock table looked at again at once.
pub(crate) fn locks_released(id: RootId, events: Vec<(String, PathBuf, EventKind)>) -> Vec<Effect> {
    let mut effects = super::outputs::lock_events(id, events);
    effects.push(Effect::SetTimer {
        timer: Timer::Locks(id),
        after: Duration::ZERO,
    });
    effects
}

/// A session's temporaries were removed and its summary written (or
/// not): `session-ended`, or why the summary is missing.
pub(crate) fn ended(
    id: RootId,
    session: String,
    status: String,
    path: PathBuf,
    removed: usize,
    error: Option<String>,
) -> Vec<Effect> {
    let (path, kind) = match error {
        None => (
            path.parent().map(PathBuf::from).unwrap_or_default(),
            EventKind::SessionEnded { status, removed },
        ),
        Some(error) => (
            path,
            EventKind::OutputFailed {
                output: "summary".into(),
                error,
            },
        ),
    };
    vec![Effect::Emit {
        root: id,
        session: Some(session),
        path: Some(path),
        kind,
    }]
}
