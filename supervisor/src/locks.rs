//! The lock table: records in each session's `locks/`, read and changed only
//! while holding an OS advisory lock (flock semantics, std `File::lock`) on
//! `.squad/run/locks.mutex`, so it is correct across processes, with or
//! without the daemon.
//!
//! One record file per acquisition, written atomically: a crash leaves every
//! target of an acquisition taken, or none.

use crate::audit::AuditLog;
use crate::events::{Event, EventKind};
use chrono::{DateTime, Utc};
use squad_policies::locks::{LockRecord, ProcessFact, Stale, staleness};
use squad_protocol::atomic::is_temp_name;
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR, session_dirs};
use squad_protocol::write_atomic;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The directory of a session's lock records.
pub const LOCKS_DIR: &str = "locks";

/// Holds `.squad/run/locks.mutex` for as long as it lives.
pub struct TableGuard {
    _file: File,
}

fn mutex_file(root: &Path) -> io::Result<File> {
    let run = root.join(SQUAD_DIR).join(RUN_DIR);
    fs::create_dir_all(&run)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(run.join("locks.mutex"))
}

/// Takes the table mutex, blocking until it is free.
pub fn lock_table(root: &Path) -> io::Result<TableGuard> {
    let file = mutex_file(root)?;
    file.lock()?;
    Ok(TableGuard { _file: file })
}

/// Takes the table mutex if it is free right now.
pub fn try_lock_table(root: &Path) -> io::Result<Option<TableGuard>> {
    let file = mutex_file(root)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(TableGuard { _file: file })),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

/// A record file as found.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A readable record.
    Held {
        /// The record file.
        path: PathBuf,
        /// Its content.
        record: LockRecord,
    },
    /// A record that does not parse: treated as held, on everything, until
    /// its file is older than the policy's default TTL.
    Corrupt {
        /// The record file.
        path: PathBuf,
        /// The session directory name.
        session: String,
        /// Until when it counts as held.
        held_until: DateTime<Utc>,
        /// The parse error.
        error: String,
    },
}

impl Entry {
    /// The record file.
    pub fn path(&self) -> &Path {
        match self {
            Entry::Held { path, .. } | Entry::Corrupt { path, .. } => path,
        }
    }
}

/// Reads every lock record of every session. `corrupt_ttl` is how long an
/// unreadable record counts as held after its last modification.
pub fn load(root: &Path, corrupt_ttl: Duration) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for dir in session_dirs(root)? {
        let session = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let locks = dir.join(LOCKS_DIR);
        let entries = match fs::read_dir(&locks) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|x| x == "json")
                    && !p
                        .file_name()
                        .is_some_and(|n| is_temp_name(&n.to_string_lossy()))
            })
            .collect();
        paths.sort();
        for path in paths {
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            match serde_json::from_slice::<LockRecord>(&bytes) {
                Ok(record) => out.push(Entry::Held { path, record }),
                Err(e) => {
                    let modified = fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .unwrap_or_else(|_| SystemTime::now());
                    let held_until = DateTime::<Utc>::from(modified)
                        + chrono::Duration::from_std(corrupt_ttl).unwrap_or_default();
                    out.push(Entry::Corrupt {
                        path,
                        session: session.clone(),
                        held_until,
                        error: e.to_string(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// This machine's host name, as recorded in locks.
pub fn host_name() -> String {
    sysinfo::System::host_name().unwrap_or_else(|| "localhost".into())
}

/// The start time (seconds since the epoch) of a running process.
pub fn process_start(pid: u32) -> Option<u64> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    system.process(pid).map(|p| p.start_time())
}

/// What is known of a record's process (checked only on this host).
pub fn process_fact(record: &LockRecord, host: &str) -> ProcessFact {
    match record.pid {
        Some(pid) if record.host == host => match process_start(pid) {
            Some(started_at) => ProcessFact::Running { started_at },
            None => ProcessFact::Gone,
        },
        _ => ProcessFact::Unknown,
    }
}

/// The stale entries at `now`, with the reason (corrupt records count as
/// stale once their `held_until` passed).
pub fn stale_entries(entries: &[Entry], now: DateTime<Utc>, host: &str) -> Vec<(Entry, String)> {
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::Held { record, .. } => staleness(record, now, process_fact(record, host))
                .map(|s: Stale| (e.clone(), s.to_string())),
            Entry::Corrupt { held_until, .. } if *held_until <= now => {
                Some((e.clone(), "unreadable record past its time to live".into()))
            }
            Entry::Corrupt { .. } => None,
        })
        .collect()
}

/// An event for the audit log of `root` (the CLI has no event sequence).
pub fn audit(root: &Path, session: Option<&str>, path: Option<&Path>, kind: EventKind) {
    let event = Event {
        seq: 0,
        at: Utc::now(),
        root: root.display().to_string(),
        session: session.map(str::to_string),
        path: path.map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string()),
        kind,
    };
    // The audit log is a record, not a precondition: a failure to append is
    // reported on stderr by the caller's logging, never fatal.
    if let Err(e) = AuditLog::new(root).append(&event) {
        tracing::warn!(error = %e, "cannot append to audit.jsonl");
    }
}

/// A lock-table change to report: session, record file, what happened.
pub type LockEvent = (String, PathBuf, EventKind);

/// Removes stale records (the caller holds the table mutex); returns what
/// it reclaimed, for the caller to audit or emit.
pub fn reclaim(entries: &mut Vec<Entry>, now: DateTime<Utc>, host: &str) -> Vec<LockEvent> {
    let stale = stale_entries(entries, now, host);
    let mut events = Vec::new();
    for (entry, reason) in &stale {
        match fs::remove_file(entry.path()) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %entry.path().display(), error = %e, "cannot reclaim lock");
                continue;
            }
        }
        let (session, kind) = match entry {
            Entry::Held { record, .. } => (
                record.session.clone(),
                EventKind::LockReclaimed {
                    targets: record.targets.clone(),
                    agent: record.agent.clone(),
                    task_id: record.task_id.clone(),
                    reason: reason.clone(),
                },
            ),
            Entry::Corrupt { session, .. } => (
                session.clone(),
                EventKind::LockReclaimed {
                    targets: vec![],
                    agent: String::new(),
                    task_id: String::new(),
                    reason: reason.clone(),
                },
            ),
        };
        events.push((session, entry.path().to_path_buf(), kind));
    }
    let gone: Vec<PathBuf> = stale.iter().map(|(e, _)| e.path().to_path_buf()).collect();
    entries.retain(|e| !gone.iter().any(|g| g == e.path()));
    events
}

/// Audits lock events from the command line.
pub fn audit_all(root: &Path, events: Vec<LockEvent>) {
    for (session, path, kind) in events {
        audit(root, Some(&session), Some(&path), kind);
    }
}

/// The earliest expiry among held records (corrupt ones count until their
/// time to live), when there is any.
pub fn next_expiry(entries: &[Entry]) -> Option<DateTime<Utc>> {
    entries
        .iter()
        .map(|e| match e {
            Entry::Held { record, .. } => record.expires_at,
            Entry::Corrupt { held_until, .. } => *held_until,
        })
        .min()
}

/// Writes a record atomically into its session's `locks/`.
pub fn write_record(path: &Path, record: &LockRecord) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut bytes = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// The file a new record goes to.
pub fn record_path(session_dir: &Path, record: &LockRecord) -> PathBuf {
    let stamp = record.acquired_at.timestamp_nanos_opt().unwrap_or_default();
    let key = crate::index::fingerprint(
        format!(
            "{}|{}|{stamp}|{}",
            record.agent,
            record.task_id,
            record.targets.join("\n")
        )
        .as_bytes(),
    );
    session_dir.join(LOCKS_DIR).join(format!(
        "{}--{}--{:016x}.json",
        record.agent, record.task_id, key
    ))
}

/// Releases every lock held in a session (its session ended); returns what
/// it released. The caller holds the table mutex.
pub fn release_session(session_dir: &Path, reason: &str) -> io::Result<Vec<LockEvent>> {
    let session = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = session_dir.join(LOCKS_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut events = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let record = fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<LockRecord>(&b).ok());
        fs::remove_file(&path)?;
        events.push((
            session.clone(),
            path,
            EventKind::LockReleased {
                targets: record
                    .as_ref()
                    .map(|r| r.targets.clone())
                    .unwrap_or_default(),
                agent: record.map(|r| r.agent).unwrap_or_default(),
                reason: reason.into(),
            },
        ));
    }
    Ok(events)
}

/// The project's effective policy: defaults overridden by
/// `.squad/policies.yaml` when present.
pub fn load_policy(root: &Path) -> Result<squad_policies::Policy, String> {
    let path = root.join(SQUAD_DIR).join("policies.yaml");
    let text = match fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    squad_policies::Policy::parse(text.as_deref()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Where a project-relative path leads when it resolves through a symlink to
/// outside the project, or `None` when it stays inside (or does not exist
/// yet: then its longest existing ancestor is checked).
pub fn escapes_root(root: &Path, relative: &str) -> Option<String> {
    let canonical_root = fs::canonicalize(root).ok()?;
    let mut candidate = root.join(relative);
    loop {
        if let Ok(real) = fs::canonicalize(&candidate) {
            return (!real.starts_with(&canonical_root)).then(|| real.display().to_string());
        }
        if !candidate.pop() || candidate == root {
            return None;
        }
    }
}
