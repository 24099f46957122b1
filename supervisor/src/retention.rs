//! Retention at the edge: gathering the facts the pure plan needs, and
//! carrying the plan out. `squadctl gc` and the daemon's scheduled job both
//! take the [`gc_lock`], open the [`Places`] once, then [`gather`] and
//! [`execute`] through those same descriptors: the plan and the actions see
//! the same directories, whatever happens to the paths in between.

use crate::events::EventKind;
use crate::index::{Entry, index_bytes};
use crate::locks::LOCKS_DIR;
use crate::safefs::Dir;
use chrono::{DateTime, Utc};
use squad_policies::retention::{Action, Place, Plan, SessionFacts, Verb};
use squad_protocol::FileKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::model::SessionState;
use squad_protocol::tree::{ARCHIVES_DIR, RUN_DIR, SESSIONS_DIR, SQUAD_DIR};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Prefix of a directory being deleted: renamed first, so a session vanishes
/// from its listing at once and a crash leaves only a remnant the next run
/// finishes.
const DELETING: &str = ".deleting-";

/// The name of the gc mutex in `.squad/run/`.
pub(crate) const GC_LOCK_FILE: &str = "gc.lock";

/// Holds the gc mutex (`.squad/run/gc.lock`, an advisory lock) while alive:
/// one retention run at a time per root, `squadctl gc` or squadd's.
pub(crate) struct GcGuard {
    _file: File,
}

/// Takes the gc mutex: `None` when another run holds it right now. The file
/// is opened without following a link, relative to the run directory.
pub(crate) fn try_gc_lock(root: &Path) -> io::Result<Option<GcGuard>> {
    let run = Dir::open_root(root)?.walk(&Path::new(SQUAD_DIR).join(RUN_DIR), Some(0o700))?;
    let file = run.open_file(GC_LOCK_FILE, libc::O_RDWR | libc::O_CREAT, 0o600)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(GcGuard { _file: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Takes the gc mutex, waiting up to `wait` for another run to finish;
/// `None` when it is still held then.
pub(crate) fn gc_lock(root: &Path, wait: std::time::Duration) -> io::Result<Option<GcGuard>> {
    let until = std::time::Instant::now() + wait;
    loop {
        if let Some(g) = try_gc_lock(root)? {
            return Ok(Some(g));
        }
        if std::time::Instant::now() >= until {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn dir_of(root: &Path, place: Place) -> PathBuf {
    root.join(SQUAD_DIR).join(match place {
        Place::Sessions => SESSIONS_DIR,
        Place::Archives => ARCHIVES_DIR,
    })
}

/// Live locks in a session's `locks/`, read through its descriptor.
fn live_locks(session: &Dir, now: DateTime<Utc>) -> usize {
    let Ok(locks) = session.open_dir(OsStr::new(LOCKS_DIR)) else {
        return 0;
    };
    locks
        .names()
        .unwrap_or_default()
        .iter()
        .filter(|n| n.ends_with(".json") && !squad_protocol::atomic::is_temp_name(n))
        .filter(|n| {
            // Never blocks on a FIFO, never follows a symlink.
            match locks.read(n, 1 << 20) {
                Ok(bytes) => serde_json::from_slice::<squad_policies::locks::LockRecord>(&bytes)
                    // Unreadable records count as held: never delete under them.
                    .map_or(true, |r| r.expires_at > now),
                Err(e) if crate::safefs::is_missing(&e) => false,
                Err(_) => true,
            }
        })
        .count()
}

/// `.squad/sessions` and `.squad/archives`, opened once from the root
/// without following a link: the plan is gathered and every action taken
/// relative to these descriptors, so swapping either path for a symlink
/// between (or during) planning and acting cannot aim a rename or a
/// deletion outside the root.
pub(crate) struct Places {
    root: PathBuf,
    squad: Dir,
    sessions: Option<Dir>,
    archives: Option<Dir>,
}

impl Places {
    /// Opens the places of a root (missing ones are empty; nothing created).
    pub(crate) fn open(root: &Path) -> io::Result<Places> {
        let squad = Dir::open_root(root)?.open_dir(OsStr::new(SQUAD_DIR))?;
        let open = |name: &str| match squad.open_dir(OsStr::new(name)) {
            Ok(d) => Ok(Some(d)),
            Err(e) if crate::safefs::is_missing(&e) => Ok(None),
            Err(e) => Err(e),
        };
        Ok(Places {
            sessions: open(SESSIONS_DIR)?,
            archives: open(ARCHIVES_DIR)?,
            squad,
            root: root.to_path_buf(),
        })
    }

    fn of(&self, place: Place) -> Option<&Dir> {
        match place {
            Place::Sessions => self.sessions.as_ref(),
            Place::Archives => self.archives.as_ref(),
        }
    }
}

/// Collects the facts about every session and archive, through the
/// descriptors of `places`. `busy` names sessions the daemon is still
/// processing files of.
pub(crate) fn gather(
    places: &Places,
    now: DateTime<Utc>,
    busy: &BTreeSet<String>,
) -> Vec<SessionFacts> {
    let mut out = Vec::new();
    for place in [Place::Sessions, Place::Archives] {
        let Some(dir) = places.of(place) else {
            continue;
        };
        let dev = dir.stat(".").map(|st| st.st_dev).ok();
        let mut names: Vec<String> = dir
            .names()
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !n.starts_with('.') || n.starts_with(DELETING))
            .collect();
        names.sort();
        for name in names {
            let Ok(st) = dir.stat(&name) else {
                continue;
            };
            let kind = st.st_mode & libc::S_IFMT;
            let is_symlink = kind == libc::S_IFLNK;
            if !is_symlink && kind != libc::S_IFDIR {
                continue;
            }
            let interrupted = name.starts_with(DELETING);
            let session = if is_symlink || interrupted {
                None
            } else {
                dir.open_dir(OsStr::new(&name)).ok()
            };
            // Opened with O_NOFOLLOW from the verified directory: only a
            // mount point can lead elsewhere (another device).
            let escapes = session
                .as_ref()
                .and_then(|s| s.stat(".").ok())
                .is_some_and(|s| Some(s.st_dev) != dev);
            let status = session.as_ref().filter(|_| !escapes).and_then(|s| {
                let bytes = s
                    .read(
                        SESSION_STATUS_FILE,
                        squad_protocol::validate::MAX_FILE_BYTES,
                    )
                    .ok()?;
                let path = dir_of(&places.root, place)
                    .join(&name)
                    .join(SESSION_STATUS_FILE);
                match index_bytes(&path, FileKind::SessionStatus, &bytes).entry {
                    Entry::Status(s) => Some(s),
                    _ => None,
                }
            });
            let utc =
                |t: Option<squad_protocol::model::Timestamp>| t.map(|t| t.with_timezone(&Utc));
            let ended_at = status.as_ref().and_then(|s| match s.status {
                SessionState::Completed => utc(s.completed_at),
                SessionState::Failed => utc(s.failed_at),
                SessionState::Active => None,
            });
            let mtime = DateTime::<Utc>::from_timestamp(st.st_mtime, 0);
            out.push(SessionFacts {
                place,
                status: status.as_ref().map(|s| s.status),
                ended_at,
                archived_at: status.as_ref().and_then(|s| utc(s.archived_at)),
                mtime,
                is_symlink,
                escapes,
                live_locks: match (&session, escapes) {
                    (Some(s), false) => live_locks(s, now),
                    _ => 0,
                },
                busy: place == Place::Sessions && busy.contains(&name),
                archive_exists: place == Place::Sessions
                    && places.archives.as_ref().is_some_and(|a| a.contains(&name)),
                interrupted,
                name,
            });
        }
    }
    out
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

/// What became of one action.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Done; the event to audit.
    Done(EventKind),
    /// Someone else (another gc, an agent) had already done it: not a
    /// failure, nothing to audit.
    AlreadyDone,
    /// Failed; the `retention-failed` event to audit.
    Failed(EventKind),
}

/// A failure of an action, in words (session names as they are).
fn failure(a: &Action, e: &io::Error) -> EventKind {
    let verb = match a.verb {
        Verb::Archive => "archive",
        Verb::Delete => "delete",
        Verb::Finish => "finish deleting",
    };
    EventKind::RetentionFailed {
        error: format!("{verb} {}: {e}", a.name),
    }
}

enum Done {
    Now,
    Already,
}

fn carry_out(places: &Places, action: &Action, stamp: DateTime<Utc>) -> io::Result<Done> {
    let Some(parent) = places.of(action.place) else {
        return Ok(Done::Already);
    };
    let name = action.name.as_str();
    // Checked at the moment of acting, relative to the verified directory:
    // never follow a link.
    if !parent.contains(name) {
        return Ok(Done::Already);
    }
    if !parent.is_dir(name) {
        return Err(io::Error::other(
            "not a directory (a link or a file); not touched",
        ));
    }
    let gone = |r: io::Result<()>| match r {
        Ok(()) => Ok(Done::Now),
        Err(e) if crate::safefs::is_missing(&e) => Ok(Done::Already),
        Err(e) => Err(e),
    };
    match action.verb {
        Verb::Archive => {
            let Some(archives) = places.archives.as_ref() else {
                return Err(io::Error::other("no archives directory"));
            };
            if archives.contains(name) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "an archive of that name exists; not overwritten",
                ));
            }
            let session = match parent.open_dir(OsStr::new(name)) {
                Ok(s) => s,
                Err(e) if crate::safefs::is_missing(&e) => return Ok(Done::Already),
                Err(e) => return Err(e),
            };
            // Temporaries a crash left are not carried into the archive.
            crate::safefs::sweep_temporaries(&session, crate::safefs::STALE_AFTER);
            stamp_archived(&session, stamp)?;
            // One rename: the session is wholly in sessions/ or wholly in
            // archives/, whenever a crash comes. (The directories are synced
            // once for the whole run, in `execute`.)
            gone(parent.rename(name, archives, name))
        }
        Verb::Delete => {
            let doomed = format!("{DELETING}{name}-{}", std::process::id());
            match gone(parent.rename(name, parent, &doomed))? {
                Done::Already => Ok(Done::Already),
                // A failure from here on leaves a `.deleting-*` remnant that
                // every later run plans to finish (and reports until it can).
                Done::Now => parent.remove_tree(&doomed).map(|()| Done::Now),
            }
        }
        Verb::Finish => parent.remove_tree(name).map(|()| Done::Now),
    }
}

/// Carries out a plan through the descriptors it was gathered from;
/// `stamp` is the `archived_at` written (always the real time). Returns,
/// per action, its outcome. Call it holding the [`gc_lock`].
pub(crate) fn execute(
    places: &mut Places,
    plan: &Plan,
    stamp: DateTime<Utc>,
) -> Vec<(String, PathBuf, Outcome)> {
    if places.archives.is_none() && plan.actions.iter().any(|a| a.verb == Verb::Archive) {
        // Created relative to the verified .squad descriptor.
        match places.squad.create_dir(OsStr::new(ARCHIVES_DIR), 0o777) {
            Ok(d) => places.archives = Some(d),
            Err(e) => {
                return plan
                    .actions
                    .iter()
                    .map(|a| {
                        (
                            a.name.clone(),
                            dir_of(&places.root, a.place).join(&a.name),
                            Outcome::Failed(failure(a, &e)),
                        )
                    })
                    .collect();
            }
        }
    }
    let places = &*places;
    // Actions touch distinct directories: run them side by side so the file
    // system can commit their fsyncs together.
    let threads = plan.actions.len().clamp(1, 8);
    let outcomes =
        squad_protocol::tree::parallel_map(&plan.actions, threads, |a| carry_out(places, a, stamp));
    // Make every rename durable before reporting it.
    for place in [Place::Sessions, Place::Archives] {
        if let Some(d) = places.of(place) {
            let _ = d.sync();
        }
    }
    // The edit locks (`.squad/run/session-<name>.lock`) of sessions no
    // longer in sessions/ (archived, deleted, removed by hand) go too,
    // unless someone holds one.
    if let Ok(run) = places.squad.open_dir(OsStr::new(RUN_DIR)) {
        crate::session_edit::sweep_locks(&run, places.sessions.as_ref());
    }
    // The git worktrees of runs of sessions no longer in sessions/
    // (docs/worktrees.md).
    crate::worktree::sweep(&places.root, |name| {
        places.sessions.as_ref().is_some_and(|d| d.contains(name))
    });
    plan.actions
        .iter()
        .zip(outcomes)
        .map(|(a, outcome)| {
            let path = dir_of(&places.root, a.place).join(&a.name);
            let rule = a.rule.into();
            let since_source = a.since_source.into();
            let outcome = match outcome {
                Ok(Done::Already) => Outcome::AlreadyDone,
                Ok(Done::Now) if a.verb == Verb::Archive => {
                    Outcome::Done(EventKind::SessionArchived {
                        rule,
                        age_secs: a.age_secs,
                        since_source,
                        by: None,
                    })
                }
                Ok(Done::Now) => Outcome::Done(EventKind::SessionDeleted {
                    rule,
                    age_secs: a.age_secs,
                    since_source,
                    by: None,
                }),
                Err(e) => Outcome::Failed(failure(a, &e)),
            };
            (a.name.clone(), path, outcome)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn failed(dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join(SESSION_STATUS_FILE),
            "session_id: sess_1\nstarted_at: 2023-01-01T00:00:00Z\nstatus: failed\nfailed_at: 2023-01-02T00:00:00Z\n",
        )
        .unwrap();
    }

    #[test]
    fn planning_and_acting_use_the_same_directories_whatever_the_paths_become() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = tmp.path();
        failed(&root.join(".squad/sessions/20230101T000000Z-a"));
        let places = Places::open(root).unwrap();
        // After opening, .squad/sessions is swapped for a link to a
        // directory outside holding a same-named session.
        failed(&outside.path().join("20230101T000000Z-a"));
        fs::rename(root.join(".squad/sessions"), root.join(".squad/moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join(".squad/sessions")).unwrap();
        let now = Utc::now();
        let facts = gather(&places, now, &BTreeSet::new());
        assert_eq!(facts.len(), 1);
        let policy = squad_policies::Policy::defaults();
        let plan = squad_policies::retention::plan(&policy.retention, &facts, now);
        assert_eq!(plan.actions.len(), 1);
        let mut places = places;
        let out = execute(&mut places, &plan, now);
        assert!(matches!(out[0].2, Outcome::Done(_)), "{:?}", out[0].2);
        assert!(
            outside.path().join("20230101T000000Z-a").exists(),
            "outside untouched"
        );
        assert!(!root.join(".squad/moved/20230101T000000Z-a").exists());
    }

    #[test]
    fn failures_name_sessions_as_they_are_and_work_already_done_is_no_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        failed(&root.join(".squad/sessions/20230101T000000Z-Plan"));
        failed(&root.join(".squad/sessions/20230102T000000Z-Gone"));
        let now = Utc::now();
        let mut places = Places::open(root).unwrap();
        let facts = gather(&places, now, &BTreeSet::new());
        let plan = squad_policies::retention::plan(
            &squad_policies::Policy::defaults().retention,
            &facts,
            now,
        );
        // Between plan and act: one becomes a file, one is removed by
        // someone else.
        fs::remove_dir_all(root.join(".squad/sessions/20230101T000000Z-Plan")).unwrap();
        fs::write(root.join(".squad/sessions/20230101T000000Z-Plan"), "x").unwrap();
        fs::remove_dir_all(root.join(".squad/sessions/20230102T000000Z-Gone")).unwrap();
        let out = execute(&mut places, &plan, now);
        match &out[0].2 {
            Outcome::Failed(EventKind::RetentionFailed { error }) => {
                assert!(
                    error.starts_with("delete 20230101T000000Z-Plan: not a directory"),
                    "{error}"
                )
            }
            o => panic!("{o:?}"),
        }
        assert!(matches!(out[1].2, Outcome::AlreadyDone), "{:?}", out[1].2);
    }
}
