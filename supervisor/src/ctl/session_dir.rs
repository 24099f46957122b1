//! Creating a session directory: named after now (and a slug), built under
//! a hidden name with its status file, then renamed into place (used by
//! `session new` and `init --example`).

use chrono::{SubsecRound, Utc};
use squad_protocol::model::{Document, Gate, Phase, SessionState, SessionStatus, ValidationGates};
use squad_protocol::tree::sessions_dir;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::path::Path;

fn short_hash() -> String {
    let n = RandomState::new().hash_one((std::process::id(), Utc::now().timestamp_nanos_opt()));
    format!("{:06x}", n & 0xff_ffff)
}

/// A session made by [`create_session`].
pub(super) struct NewSession {
    /// The directory name.
    pub name: String,
    /// Its `session_id`.
    pub session_id: String,
    /// The directory.
    pub dir: std::path::PathBuf,
    /// When it started.
    pub started_at: chrono::DateTime<Utc>,
}

/// Creates a session directory named after now (and the slug) with a valid
/// session-status.md; `Err` says why not.
pub(super) fn create_session(root: &Path, slug: Option<&str>) -> Result<NewSession, String> {
    // Whole seconds: the directory name has no finer resolution either.
    let now = Utc::now().trunc_subsecs(0);
    let stamp = now.format("%Y%m%dT%H%M%SZ").to_string();
    let name = match slug {
        Some(slug) => format!("{stamp}-{slug}"),
        None => stamp.clone(),
    };
    let session_id = format!("sess_{stamp}_{}", short_hash());
    let status = SessionStatus {
        session_id: session_id.clone(),
        started_at: now.fixed_offset(),
        status: SessionState::Active,
        phase: Some(Phase::Requirements),
        agents_active: Some(Vec::new()),
        tasks_total: Some(0),
        tasks_completed: Some(0),
        validation_gates: Some(ValidationGates {
            requirements: Some(Gate::Pending),
            design: Some(Gate::Pending),
            implementation: Some(Gate::Pending),
            quality: Some(Gate::Pending),
        }),
        completed_at: None,
        failed_at: None,
        failure_reason: None,
        archived_at: None,
    };
    let sessions = sessions_dir(root);
    let dir = sessions.join(&name);
    build_session(&sessions, &name, &Document::SessionStatus(status))
        .map_err(|e| format!("cannot create session {}: {e}", dir.display()))?;
    Ok(NewSession {
        name,
        session_id,
        dir,
        started_at: now,
    })
}

/// Builds the session under a hidden name, then renames it into place, so the
/// daemon never sees a session without its status file.
fn build_session(sessions: &Path, name: &str, status: &Document) -> io::Result<()> {
    if !sessions.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} does not exist; run `squadctl init`", sessions.display()),
        ));
    }
    let target = sessions.join(name);
    if target.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "a session of that name already exists (one per second); pass --slug to tell them apart",
        ));
    }
    // Built and renamed relative to the sessions directory reached from the
    // project root without following a link (a planted `.squad/sessions`
    // link is refused, not written through).
    let (parent, sessions_name) = crate::safefs::project_parent(sessions, None)?;
    let dir = parent.open_dir(std::ffi::OsStr::new(&sessions_name))?;
    let staging = format!(".{name}.new.{}", std::process::id());
    let result = (|| {
        let s = dir.create_dir(std::ffi::OsStr::new(&staging), 0o777)?;
        s.create_dir(std::ffi::OsStr::new("artifacts"), 0o777)?;
        s.create_dir(std::ffi::OsStr::new("locks"), 0o777)?;
        let text = status
            .to_file_text()
            .map_err(|e| io::Error::other(e.to_string()))?;
        s.write_atomic(&status.file_name(), text.as_bytes(), 0o666)?;
        if dir.contains(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a session of that name already exists (one per second); pass --slug to tell them apart",
            ));
        }
        dir.rename(&staging, &dir, name)?;
        dir.sync()
    })();
    if result.is_err() {
        let _ = dir.remove_tree(&staging);
    }
    result
}
