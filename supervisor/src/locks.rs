//! The lock table: records in each session's `locks/`, read and changed only
//! while holding an OS advisory lock (flock semantics, std `File::lock`) on
//! `.squad/run/locks.mutex`, so it is correct across processes, with or
//! without the daemon.
//!
//! One record file per acquisition, written atomically (temporary file and
//! rename): a kill -9 leaves every target of an acquisition taken, or none.
//! Records are not fsynced: after a power loss no holder process survives,
//! so a lost or torn record is harmless, and records written before this
//! machine started are reclaimed (docs/daemon.md, "Locks and power loss").
//!
//! Every change to the table is one [`transact`]: take the mutex, read every
//! record, reclaim the stale ones, let a pure plan from
//! `squad_policies::locks` decide, apply it, release the mutex, report.

use crate::audit::AuditLog;
use crate::events::{Event, EventKind};
use chrono::{DateTime, Utc};
use squad_policies::locks::{LockRecord, ProcessFact, TableEntry, TableFacts, entry_staleness};
use squad_protocol::atomic::is_temp_name;
use squad_protocol::fsx::{self, ReadError};
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR, session_dirs};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

mod record;

/// The largest lock record read; anything bigger is unreadable (a record of
/// a few targets is a few hundred bytes).
const RECORD_LIMIT: u64 = 1 << 20;

/// The directory of a session's lock records.
pub(crate) use squad_protocol::tree::LOCKS_DIR;

/// Holds `.squad/run/locks.mutex` for as long as it lives.
pub(crate) struct TableGuard {
    _file: File,
}

fn mutex_file(root: &Path) -> io::Result<File> {
    // Never through a link planted at `.squad/run` or the mutex itself.
    crate::safefs::Dir::open_root(root)?
        .walk(&Path::new(SQUAD_DIR).join(RUN_DIR), Some(0o700))?
        .open_file("locks.mutex", libc::O_RDWR | libc::O_CREAT, 0o666)
}

/// Takes the table mutex, blocking until it is free.
pub(crate) fn lock_table(root: &Path) -> io::Result<TableGuard> {
    let file = mutex_file(root)?;
    file.lock()?;
    Ok(TableGuard { _file: file })
}

/// Takes the table mutex if it is free right now.
pub(crate) fn try_lock_table(root: &Path) -> io::Result<Option<TableGuard>> {
    let file = mutex_file(root)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(TableGuard { _file: file })),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

/// A record file as found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
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
        /// When the file was last written.
        written_at: DateTime<Utc>,
        /// Until when it counts as held.
        held_until: DateTime<Utc>,
        /// The parse error.
        error: String,
    },
}

impl Entry {
    /// The record file.
    pub(crate) fn path(&self) -> &Path {
        match self {
            Entry::Held { path, .. } | Entry::Corrupt { path, .. } => path,
        }
    }
}

/// Reads one lock record without following a symlink or blocking on a FIFO
/// (anyone can create files in `locks/`). `Ok(None)`: the file is gone.
pub(crate) fn read_record(path: &Path) -> Result<Option<LockRecord>, String> {
    match fsx::read_regular(path, RECORD_LIMIT) {
        Ok(bytes) => record::parse(&bytes).map(Some),
        Err(ReadError::NotFound) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The record files of one session's `locks/` (our temporary files left
/// out), sorted.
fn record_files(session_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(session_dir.join(LOCKS_DIR)) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names: Vec<std::ffi::OsString> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .filter(|n| {
            Path::new(n).extension().is_some_and(|x| x == "json")
                && !is_temp_name(&n.to_string_lossy())
        })
        .collect();
    // One parent: the names' order is the paths'. Sorted as names, joined
    // after: comparing paths re-parses their components at every step
    // (~90K instructions for one session's 21 records).
    names.sort_unstable();
    let dir = session_dir.join(LOCKS_DIR);
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// Reads every lock record of every session. `corrupt_ttl` is how long an
/// unreadable record (bad JSON, a FIFO, a symlink, a directory) counts as
/// held after its last modification.
pub(crate) fn load(root: &Path, corrupt_ttl: Duration) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for dir in session_dirs(root)? {
        let session = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for path in record_files(&dir)? {
            match read_record(&path) {
                Ok(Some(record)) => out.push(Entry::Held { path, record }),
                Ok(None) => {}
                Err(error) => {
                    let written_at = fs::symlink_metadata(&path)
                        .and_then(|m| m.modified())
                        .map_or_else(|_| Utc::now(), DateTime::<Utc>::from);
                    let held_until = squad_policies::duration::after(written_at, corrupt_ttl);
                    out.push(Entry::Corrupt {
                        path,
                        session: session.clone(),
                        written_at,
                        held_until,
                        error,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// This machine's host name, as recorded in locks.
pub(crate) fn host_name() -> String {
    sysinfo::System::host_name().unwrap_or_else(|| "localhost".into())
}

/// The start time (seconds since the epoch) of a running process.
pub(crate) fn process_start(pid: u32) -> Option<u64> {
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
pub(crate) fn process_fact(record: &LockRecord, host: &str) -> ProcessFact {
    match record.pid {
        Some(pid) if record.host == host => match process_start(pid) {
            Some(started_at) => ProcessFact::Running { started_at },
            None => ProcessFact::Gone,
        },
        _ => ProcessFact::Unknown,
    }
}

/// When this machine started, to the second (cached per process). squadd
/// and `squadctl` both judge "a record from before the boot" by this one
/// function, so they agree.
pub(crate) fn booted_at() -> Option<DateTime<Utc>> {
    static BOOT: OnceLock<Option<DateTime<Utc>>> = OnceLock::new();
    *BOOT.get_or_init(|| {
        let secs = boot_secs_from_clocks().or_else(|| {
            // Not Linux's clocks: the kernel's own figure, via sysinfo.
            i64::try_from(sysinfo::System::boot_time())
                .ok()
                .filter(|s| *s > 0)
        })?;
        DateTime::<Utc>::from_timestamp(secs, 0)
    })
}

/// The boot time as the kernel computes `btime` in `/proc/stat` (the wall
/// clock minus the time since boot, suspend included, whole seconds
/// truncated), from two `clock_gettime` calls: no `/proc/stat` to open and
/// format (~50 µs in every guard call that judges a lock).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn boot_secs_from_clocks() -> Option<i64> {
    let read = |clock| {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid, writable timespec for the call's duration.
        (unsafe { libc::clock_gettime(clock, &mut t) } == 0)
            .then(|| i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec))
    };
    let since_boot = read(libc::CLOCK_BOOTTIME)?;
    let wall = read(libc::CLOCK_REALTIME)?;
    let boot = (wall - since_boot).div_euclid(1_000_000_000);
    i64::try_from(boot).ok().filter(|s| *s > 0)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn boot_secs_from_clocks() -> Option<i64> {
    None
}

/// The facts of one entry, for the pure decisions of `squad_policies::locks`.
pub(crate) fn table_entry<'a>(entry: &'a Entry, host: &str) -> TableEntry<'a> {
    match entry {
        Entry::Held { record, .. } => TableEntry::Record {
            record,
            process: process_fact(record, host),
        },
        Entry::Corrupt {
            written_at,
            held_until,
            ..
        } => TableEntry::Unreadable {
            written_at: *written_at,
            held_until: *held_until,
        },
    }
}

/// The facts of this machine at `now` for deciding about `entries`; an
/// empty `host` checks no process and no restart (only expiry). The boot
/// time is only read when there is an entry to judge.
pub(crate) fn table_facts<'h>(
    now: DateTime<Utc>,
    host: &'h str,
    entries: &[Entry],
) -> TableFacts<'h> {
    TableFacts {
        now,
        host,
        booted_at: if host.is_empty() || entries.is_empty() {
            None
        } else {
            booted_at()
        },
    }
}

/// The stale entries at `now`, with the reason.
pub(crate) fn stale_entries(
    entries: &[Entry],
    now: DateTime<Utc>,
    host: &str,
) -> Vec<(Entry, String)> {
    let facts = table_facts(now, host, entries);
    entries
        .iter()
        .filter_map(|e| {
            entry_staleness(&table_entry(e, host), &facts).map(|s| (e.clone(), s.to_string()))
        })
        .collect()
}

/// Records events made by the command line: lock events through squadd when
/// it runs (it numbers them, audits them and streams them to `squadctl
/// events`), everything else, and lock events while squadd is down,
/// straight into the audit log with `seq` 0 (not numbered by squadd) and the
/// root as squadd names it (its canonical path).
pub(crate) fn audit_events(root: &Path, events: Vec<(Option<String>, Option<PathBuf>, EventKind)>) {
    if events.is_empty() {
        return;
    }
    let canonical = fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let relative = |p: &Path| {
        p.strip_prefix(root)
            .or_else(|_| p.strip_prefix(&canonical))
            .unwrap_or(p)
            .display()
            .to_string()
    };
    let events: Vec<Event> = events
        .into_iter()
        .map(|(session, path, kind)| Event {
            seq: 0,
            at: Utc::now(),
            root: canonical.display().to_string(),
            session,
            path: path.as_deref().map(relative),
            kind,
        })
        .collect();
    // squadd takes lock events only; anything else is audited here.
    let (locks, others): (Vec<Event>, Vec<Event>) =
        events.into_iter().partition(|e| e.kind.is_lock());
    let mut rest = others;
    if !locks.is_empty() && !crate::control::record_events(&canonical, &locks) {
        rest.extend(locks);
    }
    let mut log = AuditLog::new(root);
    for event in &rest {
        // The audit log is a record, not a precondition: a failure to
        // append is a warning, never fatal.
        if let Err(e) = log.append(event) {
            tracing::warn!(error = %e, "cannot append to audit.jsonl");
        }
    }
}

/// Records one event made by the command line ([`audit_events`]).
pub(crate) fn audit(root: &Path, session: Option<&str>, path: Option<&Path>, kind: EventKind) {
    audit_events(
        root,
        vec![(
            session.map(str::to_string),
            path.map(Path::to_path_buf),
            kind,
        )],
    );
}

/// A lock-table change to report: session, record file, what happened.
pub(crate) type LockEvent = (String, PathBuf, EventKind);

/// Removes stale records (the caller holds the table mutex); returns what
/// it reclaimed, for the caller to audit or emit.
pub(crate) fn reclaim(entries: &mut Vec<Entry>, now: DateTime<Utc>, host: &str) -> Vec<LockEvent> {
    let stale: Vec<(usize, String)> = {
        let facts = table_facts(now, host, entries);
        entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                entry_staleness(&table_entry(e, host), &facts).map(|s| (i, s.to_string()))
            })
            .collect()
    };
    remove_stale(entries, &stale).0
}

/// Removes the given entries' files and drops them from `entries`; an entry
/// whose file cannot be removed stays. Returns the events and the indexes
/// (into `entries` as it was) of what went.
fn remove_stale(
    entries: &mut Vec<Entry>,
    stale: &[(usize, String)],
) -> (Vec<LockEvent>, Vec<usize>) {
    let mut events = Vec::new();
    let mut gone = Vec::new();
    for (i, reason) in stale {
        let Some(entry) = entries.get(*i) else {
            continue;
        };
        match crate::safefs::remove_project_file(entry.path()) {
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
        gone.push(*i);
    }
    let mut i = 0;
    entries.retain(|_| {
        i += 1;
        !gone.contains(&(i - 1))
    });
    (events, gone)
}

/// One read-check-write of the lock table, see [`transact`].
pub(crate) struct Txn {
    /// The time of the transaction.
    pub now: DateTime<Utc>,
    /// This machine's host name.
    pub host: String,
    entries: Vec<Entry>,
    processes: Vec<ProcessFact>,
    events: Vec<(Option<String>, Option<PathBuf>, EventKind)>,
}

impl Txn {
    /// The live entries (stale ones were reclaimed).
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The live entries with their facts, index for index with
    /// [`Txn::entries`], for `squad_policies::locks`' plans.
    pub(crate) fn table(&self) -> Vec<TableEntry<'_>> {
        self.entries
            .iter()
            .zip(&self.processes)
            .map(|(e, process)| match e {
                Entry::Held { record, .. } => TableEntry::Record {
                    record,
                    process: *process,
                },
                Entry::Corrupt {
                    written_at,
                    held_until,
                    ..
                } => TableEntry::Unreadable {
                    written_at: *written_at,
                    held_until: *held_until,
                },
            })
            .collect()
    }

    /// The facts shared by every decision of this transaction.
    pub(crate) fn facts(&self) -> TableFacts<'_> {
        table_facts(self.now, &self.host, &self.entries)
    }

    /// Writes a record ([`write_record`]).
    pub(crate) fn write(&mut self, path: &Path, record: &LockRecord) -> Result<(), RecordError> {
        write_record(path, record).map_err(|source| RecordError {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Removes a record (already gone is fine).
    pub(crate) fn remove(&mut self, path: &Path) -> Result<(), RecordError> {
        match crate::safefs::remove_project_file(path) {
            Err(source) if source.kind() != io::ErrorKind::NotFound => Err(RecordError {
                path: path.to_path_buf(),
                source,
            }),
            _ => Ok(()),
        }
    }

    /// An event to record once the table is released.
    pub(crate) fn report(&mut self, session: &str, path: &Path, kind: EventKind) {
        self.events
            .push((Some(session.to_string()), Some(path.to_path_buf()), kind));
    }
}

/// A lock record could not be written or removed.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct RecordError {
    /// The record.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: io::Error,
}

// A transaction's closure reports its failures as `String`
// (ctl/lock.rs): `?` on a record write keeps working in it.
impl From<RecordError> for String {
    fn from(e: RecordError) -> Self {
        e.to_string()
    }
}

/// Whether a transaction reclaims stale records before deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaim {
    /// Reclaim them (acquire, renew).
    Stale,
    /// Leave them (release: a holder may release what already lapsed).
    No,
}

/// The one read-check-write of the lock table: takes the table mutex, reads
/// every record, reclaims the stale ones (expired, process gone or reused,
/// taken before this machine started, unreadable past their time to live)
/// unless told not to, runs `f` on the table, releases the mutex, then
/// records the events (reclaims included, also when `f` fails).
pub(crate) fn transact<T>(
    root: &Path,
    corrupt_ttl: Duration,
    reclaim: Reclaim,
    f: impl FnOnce(&mut Txn) -> Result<T, String>,
) -> Result<T, String> {
    let guard = lock_table(root).map_err(|e| format!("cannot lock the lock table: {e}"))?;
    let now = Utc::now();
    let host = host_name();
    let mut txn = Txn {
        now,
        entries: load(root, corrupt_ttl).map_err(|e| format!("cannot read lock records: {e}"))?,
        processes: Vec::new(),
        events: Vec::new(),
        host,
    };
    txn.processes = txn
        .entries
        .iter()
        .map(|e| match e {
            Entry::Held { record, .. } => process_fact(record, &txn.host),
            Entry::Corrupt { .. } => ProcessFact::Unknown,
        })
        .collect();
    let stale: Vec<(usize, String)> = if reclaim == Reclaim::No {
        Vec::new()
    } else {
        let facts = txn.facts();
        txn.table()
            .iter()
            .enumerate()
            .filter_map(|(i, e)| entry_staleness(e, &facts).map(|s| (i, s.to_string())))
            .collect()
    };
    let (reclaimed, gone) = remove_stale(&mut txn.entries, &stale);
    // Keep the process facts aligned with the entries that stay.
    txn.processes = std::mem::take(&mut txn.processes)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, p)| p)
        .collect();
    txn.events.extend(
        reclaimed
            .into_iter()
            .map(|(session, path, kind)| (Some(session), Some(path), kind)),
    );
    let result = f(&mut txn);
    drop(guard);
    audit_events(root, std::mem::take(&mut txn.events));
    result
}

/// The earliest expiry among held records (corrupt ones count until their
/// time to live), when there is any.
pub(crate) fn next_expiry(entries: &[Entry]) -> Option<DateTime<Utc>> {
    entries
        .iter()
        .map(|e| match e {
            Entry::Held { record, .. } => record.expires_at,
            Entry::Corrupt { held_until, .. } => *held_until,
        })
        .min()
}

/// Writes a record atomically into its session's `locks/` (created when
/// missing; a symlink there is refused, never written through).
///
/// Atomic, not durable: a temporary file renamed into place, with no fsync.
/// A kill -9 leaves the old record or the new one; a power loss may lose or
/// tear it, which is harmless because no holder survives a power loss and
/// records from before the machine started are reclaimed.
pub(crate) fn write_record(path: &Path, record: &LockRecord) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no directory"))?;
    // The session directory is reached from the project root and `locks/`
    // opened (or made) in it without following a link anywhere below the
    // root: a planted link is refused, naming it.
    let (session, locks_name) = crate::safefs::project_parent(dir, None)?;
    let locks = session.create_dir(std::ffi::OsStr::new(&locks_name), 0o777)?;
    let mut bytes = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    bytes.push(b'\n');
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    // Our temporary-file naming (`.name.tmp.pid.n`), so `load` and the
    // sweeps of stale temporaries recognise it.
    let temp = format!(".{name}.tmp.{}.0", std::process::id());
    let result = (|| {
        let mut file =
            locks.open_file(&temp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o666)?;
        file.write_all(&bytes)?;
        drop(file);
        locks.rename(&temp, &locks, name)
    })();
    if result.is_err() {
        let _ = locks.unlink(&temp);
    }
    result
}

/// The file a new record goes to.
pub(crate) fn record_path(session_dir: &Path, record: &LockRecord) -> PathBuf {
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
pub(crate) fn release_session(session_dir: &Path, reason: &str) -> io::Result<Vec<LockEvent>> {
    let session = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut events = Vec::new();
    for path in record_files(session_dir)? {
        let record = read_record(&path).ok().flatten();
        match crate::safefs::remove_project_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
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

/// Why a project's `.squad/policies.yaml` is not in force.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum PolicyLoadError {
    /// The file is there but cannot be read (a link, too large, …).
    #[error("{}: {source}", path.display())]
    Read {
        /// policies.yaml.
        path: PathBuf,
        /// Why (shared: the daemon keeps the error it started with).
        #[source]
        source: std::sync::Arc<ReadError>,
    },
    /// The file does not make a valid policy.
    #[error("{}: {source}", path.display())]
    Invalid {
        /// policies.yaml.
        path: PathBuf,
        /// The field and what is wrong with it.
        #[source]
        source: squad_policies::policy::PolicyError,
    },
}

/// The project's effective policy: defaults overridden by
/// `.squad/policies.yaml` when present.
pub(crate) fn load_policy(root: &Path) -> Result<squad_policies::Policy, PolicyLoadError> {
    let path = root.join(SQUAD_DIR).join("policies.yaml");
    let text = match fsx::read_regular_to_string(&path, RECORD_LIMIT) {
        Ok(t) => Some(t),
        Err(ReadError::NotFound) => None,
        Err(e) => {
            return Err(PolicyLoadError::Read {
                path,
                source: std::sync::Arc::new(e),
            });
        }
    };
    squad_policies::Policy::parse(text.as_deref())
        .map_err(|source| PolicyLoadError::Invalid { path, source })
}

/// Every problem of a project's `.squad/policies.yaml` (for `validate` and
/// `status`), each at its key's line and column: none when the file is
/// absent or loads. The count is the files checked (0 or 1).
pub(crate) fn policy_diagnostics(root: &Path) -> (Vec<squad_protocol::Diagnostic>, usize) {
    use squad_protocol::{Diagnostic, Location, Rule};
    let path = root.join(SQUAD_DIR).join("policies.yaml");
    let hint = "fix the key (docs/install.md lists the policy keys); squadd runs on the previous policy, or the defaults, until it loads";
    let text = match fsx::read_regular_to_string(&path, RECORD_LIMIT) {
        Ok(t) => t,
        Err(ReadError::NotFound) => return (Vec::new(), 0),
        Err(e) => {
            return (
                vec![Diagnostic::new(
                    &path,
                    Rule::PolicyInvalid,
                    format!("cannot read policies.yaml: {e}"),
                    "policies.yaml is a regular UTF-8 file",
                )],
                1,
            );
        }
    };
    let found = squad_policies::policy::check(&text)
        .into_iter()
        .map(|f| {
            let message = format!("{}: {}", f.error.field, f.error.message);
            let hint = match typo_of(&f.error.message) {
                Some(meant) => format!("did you mean `{meant}`? {hint}"),
                None => hint.to_string(),
            };
            Diagnostic::new(&path, Rule::PolicyInvalid, message, hint).at(f.at.map(
                |(line, column)| Location {
                    line: line as u32,
                    column: column as u32,
                },
            ))
        })
        .collect();
    (found, 1)
}

/// The key an "unknown field `x`, expected one of `a`, `b`" message most
/// likely meant: the expected one within one edit of `x`.
fn typo_of(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    let (unknown, expected) = rest.split_once('`')?;
    let candidates = expected.split('`').skip(1).step_by(2);
    squad_protocol::suggest::closest(unknown, candidates, 1)
}

/// Where a project-relative path leads when it resolves through a symlink to
/// outside the project, or `None` when it stays inside (or does not exist
/// yet: then its longest existing ancestor is checked).
pub(crate) fn escapes_root(root: &Path, relative: &str) -> Option<String> {
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

/// Releases the locks of a session that ended, under the lock table's
/// lock: the events of each lock released (none when the table cannot be
/// locked, which is logged). squadd's wrap-up and a removal arriving from
/// the cluster's leader both end a session's locks this way.
pub(crate) fn release_ended_session(
    root: &std::path::Path,
    session_dir: &std::path::Path,
    reason: &str,
) -> Vec<LockEvent> {
    let events = lock_table(root).and_then(|_guard| release_session(session_dir, reason));
    events.unwrap_or_else(|e| {
        tracing::warn!(error = %e, dir = %session_dir.display(), "cannot release the session's locks");
        Vec::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_key_one_edit_from_an_expected_one_is_named() {
        assert_eq!(
            typo_of(
                "unknown field `task_redy`, expected one of `task_ready`, `task_overdue`, `lead`"
            ),
            Some("task_ready")
        );
        assert_eq!(
            typo_of("unknown field `default_tl`, expected `default_ttl` or `max_ttl`"),
            Some("default_ttl")
        );
        assert_eq!(typo_of("unknown field `colour`, expected `a` or `b`"), None);
        assert_eq!(typo_of("invalid type: string"), None);
    }

    /// The kernel's own `btime` line of `/proc/stat`.
    #[cfg(target_os = "linux")]
    fn proc_stat_btime() -> i64 {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        stat.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_default()
    }

    /// squadd and `squadctl` share `booted_at`; what it returns now comes
    /// from the clocks instead of `/proc/stat`, and must be the kernel's
    /// figure (which is truncated to the second and moves by one when the
    /// wall clock is stepped between the two reads: allow that one).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_boot_time_from_the_clocks_is_the_kernels_btime() {
        let before = proc_stat_btime();
        let ours = boot_secs_from_clocks();
        let after = proc_stat_btime();
        assert!(before > 0, "no btime in /proc/stat");
        let ours = ours.unwrap_or_default();
        assert!(
            (before - 1..=after + 1).contains(&ours),
            "clocks say {ours}, /proc/stat says {before}..{after}"
        );
        let shared = booted_at().map(|t| t.timestamp()).unwrap_or_default();
        assert!(
            (before - 1..=after + 1).contains(&shared),
            "booted_at says {shared}, /proc/stat says {before}..{after}"
        );
    }
}
