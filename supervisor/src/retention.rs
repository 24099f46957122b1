//! Retention at the edge: gathering the facts the pure plan needs, and
//! carrying the plan out. `squadctl gc` and the daemon's scheduled job both
//! call [`gather`] then [`execute`].

use crate::events::EventKind;
use crate::index::{Entry, load_file};
use crate::locks::LOCKS_DIR;
use crate::safefs::Dir;
use chrono::{DateTime, Utc};
use squad_policies::retention::{Action, Place, Plan, SessionFacts, Verb};
use squad_protocol::FileKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::model::SessionState;
use squad_protocol::tree::{ARCHIVES_DIR, SESSIONS_DIR, SQUAD_DIR};
use std::collections::BTreeSet;
use std::ffi::OsStr;
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
fn stamp_archived(session: &Dir, now: DateTime<Utc>) -> io::Result<()> {
    let Ok(bytes) = session.read(
        SESSION_STATUS_FILE,
        squad_protocol::validate::MAX_FILE_BYTES,
    ) else {
        return Ok(());
    };
    let Ok(text) = String::from_utf8(bytes) else {
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
    session.write_atomic(SESSION_STATUS_FILE, new.as_bytes(), 0o666)
}

/// `.squad/sessions` and `.squad/archives`, opened once from the root
/// without following a link: every action is taken relative to these
/// descriptors, so swapping either path for a symlink mid-run cannot aim
/// a rename or a deletion outside the root.
struct Places {
    sessions: Dir,
    archives: Dir,
}

impl Places {
    fn open(root: &Path) -> io::Result<Places> {
        let squad = Dir::open_root(root)?.open_dir(OsStr::new(SQUAD_DIR))?;
        Ok(Places {
            sessions: squad.open_dir(OsStr::new(SESSIONS_DIR))?,
            archives: squad.create_dir(OsStr::new(ARCHIVES_DIR), 0o777)?,
        })
    }

    fn of(&self, place: Place) -> &Dir {
        match place {
            Place::Sessions => &self.sessions,
            Place::Archives => &self.archives,
        }
    }
}

fn carry_out(places: &Places, action: &Action, now: DateTime<Utc>) -> io::Result<()> {
    let parent = places.of(action.place);
    let name = action.name.as_str();
    // Checked at the moment of acting, relative to the verified directory:
    // never follow a link.
    if !parent.is_dir(name) {
        return Err(io::Error::other(
            "not a directory (a link or a file); not touched",
        ));
    }
    match action.verb {
        Verb::Archive => {
            if places.archives.contains(name) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "an archive of that name exists; not overwritten",
                ));
            }
            let session = parent.open_dir(OsStr::new(name))?;
            // Temporaries a crash left are not carried into the archive.
            crate::safefs::sweep_temporaries(&session, crate::safefs::STALE_AFTER);
            stamp_archived(&session, now)?;
            // One rename: the session is wholly in sessions/ or wholly in
            // archives/, whenever a crash comes. (The directories are synced
            // once for the whole run, in `execute`.)
            parent.rename(name, &places.archives, name)
        }
        Verb::Delete => {
            let doomed = format!("{DELETING}{name}-{}", std::process::id());
            parent.rename(name, parent, &doomed)?;
            parent.remove_tree(&doomed)
        }
    }
}

/// Finishes deletions a crash interrupted (`.deleting-*` remnants).
fn finish_interrupted(places: &Places) {
    for dir in [&places.sessions, &places.archives] {
        for name in dir.names().unwrap_or_default() {
            if name.starts_with(DELETING) && dir.is_dir(&name) {
                let _ = dir.remove_tree(&name);
            }
        }
    }
}

/// Carries out a plan; returns, per action, the event to audit.
pub fn execute(root: &Path, plan: &Plan, now: DateTime<Utc>) -> Vec<(String, PathBuf, EventKind)> {
    let places = match Places::open(root) {
        Ok(p) => p,
        Err(e) => {
            return plan
                .actions
                .iter()
                .map(|a| {
                    (
                        a.name.clone(),
                        dir_of(root, a.place).join(&a.name),
                        EventKind::RetentionFailed {
                            error: format!("{:?} {}: {e}", a.verb, a.name).to_lowercase(),
                        },
                    )
                })
                .collect();
        }
    };
    finish_interrupted(&places);
    // Actions touch distinct directories: run them side by side so the file
    // system can commit their fsyncs together.
    let threads = plan.actions.len().clamp(1, 8);
    let outcomes =
        squad_protocol::tree::parallel_map(&plan.actions, threads, |a| carry_out(&places, a, now));
    // Make every rename durable before reporting it.
    for place in [Place::Sessions, Place::Archives] {
        let _ = places.of(place).sync();
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
