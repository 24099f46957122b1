//! Retention at the edge: gathering the facts the pure plan needs, and
//! carrying the plan out. `squadctl gc` and the daemon's scheduled job both
//! call [`gather`] then [`execute`].

use crate::events::EventKind;
use crate::index::{Entry, load_file};
use crate::locks::LOCKS_DIR;
use chrono::{DateTime, Utc};
use squad_policies::retention::{Action, Place, Plan, SessionFacts, Verb};
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::model::SessionState;
use squad_protocol::tree::{ARCHIVES_DIR, SESSIONS_DIR, SQUAD_DIR};
use squad_protocol::{FileKind, write_atomic};
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Prefix of a directory being deleted: renamed first, so a session vanishes
/// from its listing at once and a crash leaves only a remnant the next run
/// finishes.
const DELETING: &str = ".deleting-";

fn dir_of(root: &Path, place: Place) -> PathBuf {
    root.join(SQUAD_DIR).join(match place {
        Place::Sessions => SESSIONS_DIR,
        Place::Archives => ARCHIVES_DIR,
    })
}

fn live_locks(dir: &Path, now: DateTime<Utc>) -> usize {
    let Ok(entries) = fs::read_dir(dir.join(LOCKS_DIR)) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter(|e| {
            // Never blocks on a FIFO, never follows a symlink.
            match crate::locks::read_record(&e.path()) {
                Ok(Some(r)) => r.expires_at > now,
                Ok(None) => false,
                // Unreadable records count as held: never delete under them.
                Err(_) => true,
            }
        })
        .count()
}

/// Collects the facts about every session and archive of a root. `busy`
/// names sessions the daemon is still processing files of.
pub fn gather(
    root: &Path,
    now: DateTime<Utc>,
    busy: &BTreeSet<String>,
) -> io::Result<Vec<SessionFacts>> {
    let squad = fs::canonicalize(root.join(SQUAD_DIR))?;
    let mut out = Vec::new();
    for place in [Place::Sessions, Place::Archives] {
        let dir = dir_of(root, place);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            let is_symlink = meta.file_type().is_symlink();
            if !is_symlink && !meta.is_dir() {
                continue;
            }
            let escapes = !is_symlink
                && fs::canonicalize(&path).map_or(true, |real| !real.starts_with(&squad));
            let status = if is_symlink || escapes {
                None
            } else {
                load_file(&path.join(SESSION_STATUS_FILE), FileKind::SessionStatus)
                    .ok()
                    .flatten()
                    .and_then(|f| match f.entry {
                        Entry::Status(s) => Some(s),
                        _ => None,
                    })
            };
            let utc =
                |t: Option<squad_protocol::model::Timestamp>| t.map(|t| t.with_timezone(&Utc));
            let ended_at = status.as_ref().and_then(|s| match s.status {
                SessionState::Completed => utc(s.completed_at),
                SessionState::Failed => utc(s.failed_at),
                SessionState::Active => None,
            });
            out.push(SessionFacts {
                place,
                status: status.as_ref().map(|s| s.status),
                ended_at,
                archived_at: status.as_ref().and_then(|s| utc(s.archived_at)),
                mtime: meta.modified().ok().map(DateTime::<Utc>::from),
                is_symlink,
                escapes,
                live_locks: if is_symlink || escapes {
                    0
                } else {
                    live_locks(&path, now)
                },
                busy: place == Place::Sessions && busy.contains(&name),
                archive_exists: place == Place::Sessions
                    && fs::symlink_metadata(dir_of(root, Place::Archives).join(&name)).is_ok(),
                name,
            });
        }
    }
    Ok(out)
}

/// Records `archived_at` in a session's status file before it moves, so the
/// archive's age is its own record, not a directory time.
fn stamp_archived(dir: &Path, now: DateTime<Utc>) -> io::Result<()> {
    let path = dir.join(SESSION_STATUS_FILE);
    let Ok(text) = squad_protocol::fsx::read_regular_to_string(
        &path,
        squad_protocol::validate::MAX_FILE_BYTES,
    ) else {
        return Ok(());
    };
    let Some(new) = crate::outputs::set_status_fields(
        &text,
        &[(
            "archived_at",
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )],
    ) else {
        return Ok(());
    };
    write_atomic(&path, new.as_bytes())
}

fn carry_out(root: &Path, action: &Action, now: DateTime<Utc>) -> io::Result<()> {
    let from = dir_of(root, action.place).join(&action.name);
    // Checked again at the moment of acting: never follow a link.
    if fs::symlink_metadata(&from)?.file_type().is_symlink() {
        return Err(io::Error::other("became a symbolic link; not touched"));
    }
    match action.verb {
        Verb::Archive => {
            let archives = dir_of(root, Place::Archives);
            fs::create_dir_all(&archives)?;
            let to = archives.join(&action.name);
            if fs::symlink_metadata(&to).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "an archive of that name exists; not overwritten",
                ));
            }
            stamp_archived(&from, now)?;
            // One rename: the session is wholly in sessions/ or wholly in
            // archives/, whenever a crash comes. (The parent directories are
            // synced once for the whole run, in `execute`.)
            fs::rename(&from, &to)
        }
        Verb::Delete => {
            let parent = dir_of(root, action.place);
            let doomed = parent.join(format!("{DELETING}{}-{}", action.name, std::process::id()));
            fs::rename(&from, &doomed)?;
            fs::remove_dir_all(&doomed)
        }
    }
}

/// Finishes deletions a crash interrupted (`.deleting-*` remnants).
fn finish_interrupted(root: &Path) {
    for place in [Place::Sessions, Place::Archives] {
        let Ok(entries) = fs::read_dir(dir_of(root, place)) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(DELETING) && e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Carries out a plan; returns, per action, the event to audit.
pub fn execute(root: &Path, plan: &Plan, now: DateTime<Utc>) -> Vec<(String, PathBuf, EventKind)> {
    finish_interrupted(root);
    // Actions touch distinct directories: run them side by side so the file
    // system can commit their fsyncs together.
    let threads = plan.actions.len().clamp(1, 8);
    let outcomes =
        squad_protocol::tree::parallel_map(&plan.actions, threads, |a| carry_out(root, a, now));
    // Make every rename durable before reporting it.
    for place in [Place::Sessions, Place::Archives] {
        let _ = squad_protocol::atomic::sync_dir(&dir_of(root, place));
    }
    plan.actions
        .iter()
        .zip(outcomes)
        .map(|(a, outcome)| {
            let path = dir_of(root, a.place).join(&a.name);
            let kind = match outcome {
                Ok(()) if a.verb == Verb::Archive => EventKind::SessionArchived {
                    rule: a.rule.into(),
                    age_secs: a.age_secs,
                    since_source: a.since_source.into(),
                },
                Ok(()) => EventKind::SessionDeleted {
                    rule: a.rule.into(),
                    age_secs: a.age_secs,
                    since_source: a.since_source.into(),
                },
                Err(e) => EventKind::RetentionFailed {
                    error: format!("{:?} {}: {e}", a.verb, a.name).to_lowercase(),
                },
            };
            (a.name.clone(), path, kind)
        })
        .collect()
}
