//! `squadd`: watch → read → parse → validate → index → derive → act → audit.
//!
//! One task owns all state (the [`Supervisor`]); the file watcher and the
//! control connections send it messages. Nothing polls: the task sleeps until
//! a file event, a request, the next task deadline or (under systemd) the
//! next watchdog ping.

pub mod health;
pub mod messages;
pub mod pidfile;
pub mod server;
pub mod systemd;

use crate::audit::AuditLog;
use crate::control::{Method, Response, socket_path};
use crate::derive::{SessionView, changes, derive_session, new_starts, newly_overdue};
use crate::events::{Event, EventKind};
use crate::index::{IndexedFile, SessionIndex, index_bytes, load_file, scan_root, scan_session};
use crate::layout::create_layout;
use crate::outputs::{render_shared_context, render_status, render_summary};
use crate::state::State;
use crate::status::{DaemonReport, RootReport, StatusReport, session_report};
use chrono::{DateTime, Utc};
use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
use notify::{EventKind as FsKind, RecommendedWatcher, RecursiveMode, Watcher};
use squad_protocol::atomic::is_temp_name;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::tree::{RUN_DIR, SESSIONS_DIR, SQUAD_DIR, default_threads, parallel_map};
use squad_protocol::validate::read_limited;
use squad_protocol::{FileKind, Severity, write_atomic};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};

/// How long a file written in place may keep changing before it is read
/// anyway. Renames, closes after writing and deletions are handled at once;
/// only bare modifications wait, and never longer than this.
const SETTLE: Duration = Duration::from_millis(3);

/// How long the shared context may lag a burst of changes. It spans every
/// session of a root, so it is rendered once per burst rather than once per
/// file (the status file of the session, the latency-critical output, is
/// never delayed).
const CONTEXT_DELAY: Duration = Duration::from_millis(20);

/// How long a session's status file waits after files were only removed
/// from it. Writing into a directory that `rm -rf` is emptying would make the
/// removal fail (ENOTEMPTY); a session that is being deleted is gone by then.
const REMOVAL_DELAY: Duration = Duration::from_millis(100);

/// Events kept for `squadctl events` without `--follow`.
const RECENT_EVENTS: usize = 256;

/// The relative path of the shared context file.
pub const SHARED_CONTEXT: &str = ".claude/context/shared-context.json";

/// Daemon options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Project roots to supervise.
    pub roots: Vec<PathBuf>,
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A root is unusable.
    #[error("{root}: {message}")]
    Root {
        /// The root.
        root: String,
        /// What is wrong.
        message: String,
    },
    /// Another daemon holds a root.
    #[error(transparent)]
    Locked(#[from] pidfile::PidLockError),
    /// The watcher could not start.
    #[error("cannot watch files: {0}")]
    Watch(String),
    /// The runtime could not start.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

struct RootState {
    root: PathBuf,
    sessions_dir: PathBuf,
    sessions: BTreeMap<String, SessionIndex>,
    views: BTreeMap<String, SessionView>,
    state: State,
    audit: AuditLog,
    watched: BTreeSet<PathBuf>,
    missing: bool,
    policy: squad_policies::Policy,
    /// Lock records as last read.
    locks: Vec<crate::locks::Entry>,
    /// Re-read the lock table at this moment (a change was seen, a lock
    /// expires, or the table mutex was busy).
    locks_due: Option<Instant>,
    /// The next scheduled retention run.
    next_gc: Option<DateTime<Utc>>,
    /// The next deferred (low-priority) delivery.
    deliveries_due: Option<Instant>,
    /// The next escalation or reply deadline check.
    inbox_due: Option<Instant>,
    _lock: pidfile::PidLock,
}

/// The next run of a retention schedule after `now`.
fn next_run(policy: &squad_policies::Policy, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    policy.retention.schedule().ok()?.after(&now).next()
}

/// The daemon's state and its one owner.
struct Supervisor {
    roots: Vec<RootState>,
    watcher: RecommendedWatcher,
    pending: HashMap<PathBuf, Instant>,
    rescans: BTreeSet<usize>,
    context_due: BTreeMap<usize, Instant>,
    status_due: BTreeMap<(usize, String), Instant>,
    queue: Arc<AtomicUsize>,
    bus: broadcast::Sender<Event>,
    recent: VecDeque<Event>,
    seq: u64,
    started: Instant,
    last_status_line: String,
    hooks: tokio::sync::mpsc::UnboundedSender<messages::HookOutcome>,
    /// Whether systemd listens for STATUS= lines.
    notify_socket: bool,
}

fn watch_error_hint(e: &notify::Error) -> String {
    match &e.kind {
        notify::ErrorKind::MaxFilesWatch => format!(
            "{e}: the inotify watch limit is reached; raise it with `sudo sysctl fs.inotify.max_user_watches=524288` (persist in /etc/sysctl.d/)"
        ),
        notify::ErrorKind::Io(io) if io.raw_os_error() == Some(28) => format!(
            "{e}: the inotify watch limit is reached (ENOSPC); raise it with `sudo sysctl fs.inotify.max_user_watches=524288`"
        ),
        _ => e.to_string(),
    }
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(options: Options) -> Result<(), StartError> {
    let (fs_tx, mut fs_rx) = mpsc::unbounded_channel();
    let queue = Arc::new(AtomicUsize::new(0));
    let queue_in = queue.clone();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        queue_in.fetch_add(1, Ordering::Relaxed);
        let _ = fs_tx.send(res);
    })
    .map_err(|e| StartError::Watch(watch_error_hint(&e)))?;

    // Handlers first: a SIGTERM that arrives while starting (or right after
    // READY) must stop the daemon cleanly, not kill it.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;

    let (bus, _) = broadcast::channel(1024);
    let (hooks, mut hook_rx) = messages::hook_channel();
    let mut sup = Supervisor {
        roots: Vec::new(),
        watcher,
        pending: HashMap::new(),
        rescans: BTreeSet::new(),
        context_due: BTreeMap::new(),
        status_due: BTreeMap::new(),
        queue,
        bus,
        recent: VecDeque::new(),
        seq: 0,
        started: Instant::now(),
        last_status_line: String::new(),
        hooks,
        notify_socket: std::env::var_os("NOTIFY_SOCKET").is_some(),
    };

    for root in &options.roots {
        sup.open_root(root)?;
    }
    // Watches first, then the scan: a change during the scan is seen twice
    // at worst (and ignored the second time), never missed.
    for i in 0..sup.roots.len() {
        sup.watch_root(i);
    }
    let now = Utc::now();
    for i in 0..sup.roots.len() {
        sup.initial_scan(i, now);
    }
    release_scan_memory();

    let (call_tx, mut call_rx) = mpsc::channel::<server::Call>(64);
    for (i, r) in sup.roots.iter().enumerate() {
        let path = socket_path(&r.root);
        let listener = server::bind(&path).map_err(|e| StartError::Root {
            root: r.root.display().to_string(),
            message: format!("cannot bind {}: {e}", path.display()),
        })?;
        tokio::spawn(server::accept_loop(listener, i, call_tx.clone()));
    }
    drop(call_tx);

    let summary = sup.summary();
    systemd::ready(&summary);
    sup.last_status_line = summary;
    tracing::info!(roots = sup.roots.len(), "ready");

    let watchdog = systemd::watchdog_interval();
    let mut next_ping = watchdog.map(|d| Instant::now() + d);

    let reason = loop {
        let wake = sup.next_wake(Utc::now(), next_ping);
        tokio::select! {
            biased;
            _ = sigterm.recv() => break "SIGTERM",
            _ = sigint.recv() => break "SIGINT",
            Some(res) = fs_rx.recv() => {
                sup.note(res);
                while let Ok(res) = fs_rx.try_recv() {
                    sup.note(res);
                }
            }
            Some(outcome) = hook_rx.recv() => {
                if let Some(error) = outcome.error {
                    sup.emit(
                        outcome.root,
                        Some(&outcome.session),
                        None,
                        EventKind::NotifyFailed {
                            to: outcome.to,
                            message_id: outcome.message_id,
                            error,
                        },
                    );
                }
            }
            Some(call) = call_rx.recv() => {
                let reply = sup.answer(call.root, call.method);
                let _ = call.reply.send(reply);
            }
            _ = sleep_until(wake) => {}
        }
        if let (Some(at), Some(every)) = (next_ping, watchdog)
            && Instant::now() >= at
        {
            systemd::watchdog();
            next_ping = Some(Instant::now() + every);
        }
        sup.flush(Instant::now(), Utc::now());
    };

    tracing::info!(reason, "stopping");
    systemd::stopping();
    for i in std::mem::take(&mut sup.context_due).into_keys() {
        sup.write_shared_context(i);
    }
    for i in 0..sup.roots.len() {
        sup.emit(
            i,
            None,
            None,
            EventKind::Stopping {
                reason: reason.to_string(),
            },
        );
        let _ = std::fs::remove_file(socket_path(&sup.roots[i].root));
    }
    Ok(())
}

/// Returns the memory the parallel start-up scan freed to the OS. The scan's
/// worker threads leave freed parse buffers in their own malloc arenas, which
/// glibc keeps resident; a long-running daemon should not carry them.
fn release_scan_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl Supervisor {
    fn open_root(&mut self, root: &Path) -> Result<(), StartError> {
        let fail = |message: String| StartError::Root {
            root: root.display().to_string(),
            message,
        };
        let root =
            std::fs::canonicalize(root).map_err(|e| fail(format!("cannot open the root: {e}")))?;
        if !root.is_dir() {
            return Err(fail("not a directory".into()));
        }
        if self.roots.iter().any(|r| r.root == root) {
            return Err(fail("given twice".into()));
        }
        create_layout(&root).map_err(|e| fail(format!("cannot create .squad/: {e}")))?;
        let lock = pidfile::acquire(&root.join(SQUAD_DIR).join(RUN_DIR).join("squadd.pid"))?;
        let policy = crate::locks::load_policy(&root).map_err(fail)?;
        let next_gc = next_run(&policy, Utc::now());
        self.roots.push(RootState {
            sessions_dir: root.join(SQUAD_DIR).join(SESSIONS_DIR),
            audit: AuditLog::new(&root),
            state: State::load(&root),
            sessions: BTreeMap::new(),
            views: BTreeMap::new(),
            watched: BTreeSet::new(),
            missing: false,
            policy,
            locks: Vec::new(),
            locks_due: Some(Instant::now()),
            next_gc,
            deliveries_due: None,
            inbox_due: None,
            root,
            _lock: lock,
        });
        Ok(())
    }

    fn watch(&mut self, i: usize, path: &Path) {
        if self.roots[i].watched.contains(path) {
            return;
        }
        match self.watcher.watch(path, RecursiveMode::NonRecursive) {
            Ok(()) => {
                self.roots[i].watched.insert(path.to_path_buf());
            }
            Err(e) => {
                let error = watch_error_hint(&e);
                tracing::error!(path = %path.display(), %error, "cannot watch");
                self.emit(i, None, Some(path), EventKind::WatchError { error });
            }
        }
    }

    /// Watches a session's `locks/` when it exists (squadctl creates it on
    /// the first acquisition; its creation event brings us back here).
    fn watch_locks(&mut self, i: usize, session_dir: &Path) {
        let locks = session_dir.join(crate::locks::LOCKS_DIR);
        if locks.is_dir() {
            self.watch(i, &locks);
        }
    }

    /// Re-reads the lock table and reclaims expired locks, unless a command
    /// holds the table right now (then it retries shortly).
    fn refresh_locks(&mut self, i: usize) {
        let root = self.roots[i].root.clone();
        let guard = match crate::locks::try_lock_table(&root) {
            Ok(Some(g)) => g,
            Ok(None) => {
                self.roots[i].locks_due = Some(Instant::now() + Duration::from_millis(50));
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot lock the lock table");
                self.roots[i].locks_due = Some(Instant::now() + Duration::from_secs(5));
                return;
            }
        };
        let ttl = self.roots[i].policy.lock_default_ttl;
        let mut entries = match crate::locks::load(&root, ttl) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read lock records");
                Vec::new()
            }
        };
        // Only expiry is decided here; dead holders are reclaimed by the next
        // acquisition, which checks their processes.
        let expired: Vec<crate::locks::Entry> = entries
            .iter()
            .filter(|e| match e {
                crate::locks::Entry::Held { record, .. } => record.expires_at <= Utc::now(),
                crate::locks::Entry::Corrupt { held_until, .. } => *held_until <= Utc::now(),
            })
            .cloned()
            .collect();
        let mut events = Vec::new();
        if !expired.is_empty() {
            let mut only_expired = expired;
            events = crate::locks::reclaim(&mut only_expired, Utc::now(), "");
            entries.retain(|e| !events.iter().any(|(_, p, _)| p == e.path()));
        }
        drop(guard);
        for (session, path, kind) in events {
            self.emit(i, Some(&session), Some(&path), kind);
        }
        let next = crate::locks::next_expiry(&entries);
        self.roots[i].locks = entries;
        self.roots[i].locks_due =
            next.map(|at| Instant::now() + (at - Utc::now()).to_std().unwrap_or(Duration::ZERO));
    }

    /// The scheduled retention job: the same plan and execution as
    /// `squadctl gc`, leaving alone sessions with files still being processed.
    fn run_retention(&mut self, i: usize, wall: DateTime<Utc>) {
        let root = self.roots[i].root.clone();
        let sessions_dir = self.roots[i].sessions_dir.clone();
        let mut busy: BTreeSet<String> = self
            .pending
            .keys()
            .filter_map(|p| p.strip_prefix(&sessions_dir).ok())
            .filter_map(|rel| rel.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        busy.extend(
            self.status_due
                .keys()
                .filter(|(r, _)| *r == i)
                .map(|(_, n)| n.clone()),
        );
        match crate::retention::gather(&root, wall, &busy) {
            Ok(facts) => {
                let plan =
                    squad_policies::retention::plan(&self.roots[i].policy.retention, &facts, wall);
                for (session, path, kind) in crate::retention::execute(&root, &plan, wall) {
                    self.emit(i, Some(&session), Some(&path), kind);
                }
            }
            Err(e) => self.emit(
                i,
                None,
                None,
                EventKind::RetentionFailed {
                    error: e.to_string(),
                },
            ),
        }
        self.roots[i].next_gc = next_run(&self.roots[i].policy, wall);
    }

    /// Re-reads `.squad/policies.yaml`; an invalid edit keeps the previous
    /// policy and says so.
    fn reload_policy(&mut self, i: usize) {
        let root = self.roots[i].root.clone();
        let error = match crate::locks::load_policy(&root) {
            Ok(p) if p == self.roots[i].policy => return,
            Ok(p) => {
                self.roots[i].next_gc = next_run(&p, Utc::now());
                self.roots[i].policy = p;
                String::new()
            }
            Err(e) => format!("{e}; the previous policy stays in force"),
        };
        let path = root.join(SQUAD_DIR).join("policies.yaml");
        self.emit(i, None, Some(&path), EventKind::PolicyReloaded { error });
    }

    /// Wraps up a session that ended: summary.md, temporary files removed.
    fn end_session(&mut self, i: usize, name: &str, status: &str, wall: DateTime<Utc>) {
        let dir = self.roots[i].sessions_dir.join(name);
        let (Some(session), Some(view)) = (
            self.roots[i].sessions.get(name),
            self.roots[i].views.get(name),
        ) else {
            return;
        };
        // Temporary files go first: summary.md is the sign the wrap-up is done.
        let removed = remove_temporary_files(&dir);
        let escalations: Vec<String> = self.roots[i]
            .state
            .escalated
            .get(name)
            .map(|e| e.iter().cloned().collect())
            .unwrap_or_default();
        let summary = render_summary(session, view, &escalations, wall);
        if let Err(e) = write_atomic(&dir.join(SUMMARY_FILE), summary.as_bytes()) {
            self.emit(
                i,
                Some(name),
                Some(&dir.join(SUMMARY_FILE)),
                EventKind::OutputFailed {
                    output: "summary".into(),
                    error: e.to_string(),
                },
            );
            return;
        }
        self.emit(
            i,
            Some(name),
            Some(&dir),
            EventKind::SessionEnded {
                status: status.into(),
                removed,
            },
        );
    }

    /// Releases the locks of a session that ended.
    fn release_session_locks(&mut self, i: usize, name: &str, status: &str) {
        let root = self.roots[i].root.clone();
        let dir = self.roots[i].sessions_dir.join(name);
        let events = crate::locks::lock_table(&root)
            .and_then(|_guard| crate::locks::release_session(&dir, &format!("session {status}")));
        match events {
            Ok(events) => {
                for (session, path, kind) in events {
                    self.emit(i, Some(&session), Some(&path), kind);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, session = name, "cannot release the session's locks")
            }
        }
        self.roots[i].locks_due = Some(Instant::now());
    }

    fn unwatch(&mut self, i: usize, path: &Path) {
        if self.roots[i].watched.remove(path) {
            // The kernel drops watches of deleted directories itself.
            let _ = self.watcher.unwatch(path);
        }
    }

    /// Watches the root, `.squad`, `.squad/sessions` and each session
    /// directory, each non-recursively: artifacts and other subdirectories
    /// cost nothing.
    fn watch_root(&mut self, i: usize) {
        let root = self.roots[i].root.clone();
        self.watch(i, &root);
        self.watch(i, &root.join(SQUAD_DIR));
        let sessions = self.roots[i].sessions_dir.clone();
        self.watch(i, &sessions);
        if let Ok(dirs) = squad_protocol::tree::session_dirs(&root) {
            for dir in dirs {
                self.watch(i, &dir);
                self.watch_locks(i, &dir);
            }
        }
    }

    fn initial_scan(&mut self, i: usize, now: DateTime<Utc>) {
        let root = self.roots[i].root.clone();
        let sessions = match scan_root(&root, default_threads()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(root = %root.display(), error = %e, "start-up scan failed");
                self.roots[i].missing = true;
                self.emit(i, None, None, EventKind::RootMissing);
                BTreeMap::new()
            }
        };
        let files = sessions.values().map(|s| s.files.len()).sum();
        let count = sessions.len();
        self.roots[i].sessions = sessions;
        let names: Vec<String> = self.roots[i].sessions.keys().cloned().collect();
        // The first derivation is the baseline: no task-ready storm at start.
        for name in &names {
            self.record_starts(i, name);
            let view = self.derive(i, name, now);
            self.roots[i].views.insert(name.clone(), view);
            self.report_invalid_files(i, name);
            self.report_overdue(i, name);
            // A session that ended while squadd was down still holds its locks.
            let ended = self.roots[i].views.get(name).map(|v| v.status).filter(|s| {
                matches!(
                    s,
                    squad_protocol::model::SessionState::Completed
                        | squad_protocol::model::SessionState::Failed
                )
            });
            if let Some(status) = ended {
                let dir = self.roots[i].sessions_dir.join(name);
                if dir.join(crate::locks::LOCKS_DIR).is_dir() {
                    self.release_session_locks(i, name, status.as_str());
                }
                if !dir.join(SUMMARY_FILE).exists() {
                    self.end_session(i, name, status.as_str(), now);
                }
            }
        }
        self.write_statuses(i, &names, now);
        // The backlog written while squadd was down: critical first.
        self.deliver_messages(i, None, now);
        self.check_inboxes(i, None, now);
        self.save_state(i);
        self.write_shared_context(i);
        self.emit(
            i,
            None,
            None,
            EventKind::Started {
                sessions: count,
                files,
            },
        );
    }

    fn report_invalid_files(&mut self, i: usize, name: &str) {
        let invalid: Vec<(PathBuf, usize, String)> = self.roots[i]
            .sessions
            .get(name)
            .map(|s| {
                s.files
                    .values()
                    .filter_map(|f| invalid_summary(f).map(|(n, first)| (f.path.clone(), n, first)))
                    .collect()
            })
            .unwrap_or_default();
        for (path, errors, first) in invalid {
            self.emit(
                i,
                Some(name),
                Some(&path),
                EventKind::FileInvalid { errors, first },
            );
        }
    }

    fn derive(&self, i: usize, name: &str, now: DateTime<Utc>) -> SessionView {
        let r = &self.roots[i];
        let empty = Default::default();
        let starts = r.state.task_starts.get(name).unwrap_or(&empty);
        match r.sessions.get(name) {
            Some(s) => derive_session(s, starts, now),
            None => derive_session(&SessionIndex::new(r.sessions_dir.join(name)), starts, now),
        }
    }

    /// Records first-seen `in_progress` times; returns whether any was new.
    fn record_starts(&mut self, i: usize, name: &str) -> bool {
        let r = &mut self.roots[i];
        let Some(session) = r.sessions.get(name) else {
            return false;
        };
        let starts = r.state.task_starts.entry(name.to_string()).or_default();
        let new = new_starts(session, starts);
        let changed = !new.is_empty();
        starts.extend(new);
        changed
    }

    /// Reports overdue tasks not reported before; returns whether any was new.
    fn report_overdue(&mut self, i: usize, name: &str) -> bool {
        let r = &mut self.roots[i];
        let Some(view) = r.views.get(name) else {
            return false;
        };
        let reported = r
            .state
            .overdue_reported
            .entry(name.to_string())
            .or_default();
        let new: Vec<(String, String)> = newly_overdue(view, reported)
            .map(|t| (t.task_id.clone(), t.agent.clone()))
            .collect();
        reported.extend(new.iter().map(|(t, _)| t.clone()));
        let any = !new.is_empty();
        for (task_id, agent) in new {
            self.emit(
                i,
                Some(name),
                None,
                EventKind::TaskOverdue { task_id, agent },
            );
        }
        any
    }

    fn save_state(&mut self, i: usize) {
        let r = &self.roots[i];
        if let Err(e) = r.state.save(&r.root) {
            tracing::warn!(error = %e, "cannot save state.json");
        }
    }

    fn emit(&mut self, i: usize, session: Option<&str>, path: Option<&Path>, kind: EventKind) {
        self.seq += 1;
        let r = &mut self.roots[i];
        let event = Event {
            seq: self.seq,
            at: Utc::now(),
            root: r.root.display().to_string(),
            session: session.map(str::to_string),
            path: path.map(|p| p.strip_prefix(&r.root).unwrap_or(p).display().to_string()),
            kind,
        };
        tracing::info!(
            event = event.kind.name(),
            session = event.session.as_deref().unwrap_or(""),
            path = event.path.as_deref().unwrap_or(""),
            detail = %event.kind.detail(),
        );
        if event.kind.audited()
            && let Err(e) = r.audit.append(&event)
        {
            tracing::warn!(error = %e, "cannot append to audit.jsonl");
        }
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(event.clone());
        let _ = self.bus.send(event);
    }

    /// Takes one watcher notification.
    fn note(&mut self, res: notify::Result<notify::Event>) {
        self.queue.fetch_sub(1, Ordering::Relaxed);
        let now = Instant::now();
        let event = match res {
            Ok(e) => e,
            Err(e) => {
                let error = watch_error_hint(&e);
                tracing::error!(%error, "watcher error");
                for i in 0..self.roots.len() {
                    self.emit(
                        i,
                        None,
                        None,
                        EventKind::WatchError {
                            error: error.clone(),
                        },
                    );
                    self.rescans.insert(i);
                }
                return;
            }
        };
        if event.need_rescan() {
            for path in &event.paths {
                if let Some(i) = self.root_of(path) {
                    self.rescans.insert(i);
                }
            }
            if event.paths.is_empty() {
                self.rescans.extend(0..self.roots.len());
            }
            return;
        }
        let settle = match event.kind {
            // Our own reads (and everyone's) produce access events; only a
            // close after writing means a writer has finished.
            FsKind::Access(AccessKind::Close(AccessMode::Write)) => Duration::ZERO,
            FsKind::Access(_) => return,
            FsKind::Modify(ModifyKind::Metadata(_)) => return,
            FsKind::Modify(ModifyKind::Data(_)) | FsKind::Create(CreateKind::File) => SETTLE,
            _ => Duration::ZERO,
        };
        for path in event.paths {
            let due = now + settle;
            self.pending
                .entry(path)
                .and_modify(|d| *d = (*d).min(due))
                .or_insert(due);
        }
    }

    fn root_of(&self, path: &Path) -> Option<usize> {
        self.roots.iter().position(|r| path.starts_with(&r.root))
    }

    /// The next moment something is due: a settling file, a task deadline or
    /// a watchdog ping.
    fn next_wake(&self, now: DateTime<Utc>, ping: Option<Instant>) -> Option<Instant> {
        let file = self.pending.values().min().copied();
        let deadline = self
            .roots
            .iter()
            .flat_map(|r| r.views.values())
            .filter_map(|v| v.next_deadline(now))
            .min()
            .map(|d| {
                let wait = (d - now).to_std().unwrap_or(Duration::ZERO);
                Instant::now() + wait
            });
        let rescan = (!self.rescans.is_empty()).then(Instant::now);
        let context = self.context_due.values().min().copied();
        let status = self.status_due.values().min().copied();
        let locks = self.roots.iter().filter_map(|r| r.locks_due).min();
        let gc = self
            .roots
            .iter()
            .filter_map(|r| r.next_gc)
            .min()
            .map(|at| Instant::now() + (at - now).to_std().unwrap_or(Duration::ZERO));
        let messages = self
            .roots
            .iter()
            .flat_map(|r| [r.deliveries_due, r.inbox_due])
            .flatten()
            .min();
        [
            file, deadline, ping, rescan, context, status, locks, gc, messages,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Processes everything due: rescans, settled paths, passed deadlines.
    fn flush(&mut self, now: Instant, wall: DateTime<Utc>) {
        let mut touched: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        // Sessions that saw something other than a removal in this batch.
        let mut changed: BTreeSet<(usize, String)> = BTreeSet::new();
        for i in std::mem::take(&mut self.rescans) {
            let names = self.rescan(i);
            changed.extend(names.iter().map(|n| (i, n.clone())));
            touched.entry(i).or_default().extend(names);
        }
        let due: Vec<PathBuf> = self
            .pending
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for path in due {
            self.pending.remove(&path);
            let Some(i) = self.root_of(&path) else {
                continue;
            };
            if let Some((name, removal)) = self.apply_path(i, &path) {
                if !removal {
                    changed.insert((i, name.clone()));
                }
                touched.entry(i).or_default().insert(name);
            }
        }
        // Sessions whose deadline passed re-derive even without a file change.
        for (i, r) in self.roots.iter().enumerate() {
            for (name, view) in &r.views {
                let passed = view.tasks.iter().any(|t| {
                    !t.overdue
                        && t.state != squad_protocol::model::TaskStatus::Completed
                        && t.due_at.is_some_and(|d| d <= wall)
                });
                if passed {
                    changed.insert((i, name.clone()));
                    touched.entry(i).or_default().insert(name.clone());
                }
            }
        }
        for (i, names) in touched {
            let deferred: BTreeSet<String> = names
                .iter()
                .filter(|n| !changed.contains(&(i, (*n).clone())))
                .cloned()
                .collect();
            self.settle(i, &names, &deferred, wall);
        }
        let due: Vec<(usize, String)> = self
            .status_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for (i, name) in due {
            self.status_due.remove(&(i, name.clone()));
            self.write_statuses(i, std::slice::from_ref(&name), wall);
            if self.roots[i].sessions_dir.join(&name).is_dir() {
                let one = BTreeSet::from([name]);
                self.deliver_messages(i, Some(&one), wall);
                self.check_inboxes(i, Some(&one), wall);
            }
        }
        let due: Vec<usize> = self
            .context_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(i, _)| *i)
            .collect();
        for i in due {
            self.context_due.remove(&i);
            self.write_shared_context(i);
        }
        for i in 0..self.roots.len() {
            if self.roots[i].locks_due.is_some_and(|at| at <= now) {
                self.refresh_locks(i);
            }
            if self.roots[i].next_gc.is_some_and(|at| at <= wall) {
                self.run_retention(i, wall);
            }
            if self.roots[i].deliveries_due.is_some_and(|at| at <= now) {
                self.roots[i].deliveries_due = None;
                self.deliver_messages(i, None, wall);
            }
            if self.roots[i].inbox_due.is_some_and(|at| at <= now) {
                self.roots[i].inbox_due = None;
                self.check_inboxes(i, None, wall);
            }
        }
        // The STATUS= line walks every session: only worth it when a service
        // manager listens.
        if !self.notify_socket {
            return;
        }
        let summary = self.summary();
        if summary != self.last_status_line {
            systemd::status(&summary);
            self.last_status_line = summary;
        }
    }

    /// Re-reads a whole root; returns the sessions to re-derive.
    fn rescan(&mut self, i: usize) -> Vec<String> {
        let root = self.roots[i].root.clone();
        if !self.roots[i].sessions_dir.is_dir() {
            // The kernel dropped the watches of everything that vanished;
            // forget them too, or the directories that come back later would
            // count as watched and never be watched again.
            let squad = root.join(SQUAD_DIR);
            self.roots[i].watched.retain(|p| !p.starts_with(&squad));
            if !self.roots[i].missing {
                self.roots[i].missing = true;
                self.emit(i, None, None, EventKind::RootMissing);
            }
            return Vec::new();
        }
        self.watch_root(i);
        let fresh = match scan_root(&root, default_threads()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "rescan failed");
                return Vec::new();
            }
        };
        release_scan_memory();
        let old: BTreeSet<String> = self.roots[i].sessions.keys().cloned().collect();
        let mut names: BTreeSet<String> = fresh.keys().cloned().collect();
        for gone in old.difference(&names) {
            self.roots[i].views.remove(gone);
            let dir = self.roots[i].sessions_dir.join(gone);
            self.unwatch(i, &dir);
            self.emit(i, Some(gone), None, EventKind::SessionRemoved);
        }
        self.roots[i].sessions = fresh;
        let was_missing = std::mem::replace(&mut self.roots[i].missing, false);
        let reason = if was_missing {
            self.emit(i, None, None, EventKind::RootRestored);
            "root restored"
        } else {
            "the watcher asked for a rescan"
        };
        self.emit(
            i,
            None,
            None,
            EventKind::Rescanned {
                reason: reason.into(),
            },
        );
        names.extend(old);
        names.into_iter().collect()
    }

    /// Applies one changed path; returns the session it touched and whether
    /// the change was only a removal.
    fn apply_path(&mut self, i: usize, path: &Path) -> Option<(String, bool)> {
        let sessions_dir = self.roots[i].sessions_dir.clone();
        if path == self.roots[i].root.join(SQUAD_DIR).join("policies.yaml") {
            self.reload_policy(i);
            return None;
        }
        let Ok(rel) = path.strip_prefix(&sessions_dir) else {
            // The root, .squad or .squad/sessions itself changed.
            let affects_sessions = sessions_dir.starts_with(path);
            if affects_sessions {
                self.rescans.insert(i);
            }
            return None;
        };
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        match parts.as_slice() {
            [] => {
                self.rescans.insert(i);
                None
            }
            [name] => {
                if name.starts_with('.') {
                    return None;
                }
                let dir = sessions_dir.join(name);
                let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
                let known = self.roots[i].sessions.contains_key(name);
                match (is_dir, known) {
                    (true, false) => {
                        // Watch first, then scan: files created before the
                        // watch existed are found by the scan.
                        self.watch(i, &dir);
                        self.watch_locks(i, &dir);
                        match scan_session(&dir) {
                            Ok(s) => {
                                self.roots[i].sessions.insert(name.clone(), s);
                                self.emit(i, Some(name), Some(&dir), EventKind::SessionAdded);
                                self.report_invalid_files(i, name);
                                Some((name.clone(), false))
                            }
                            Err(e) => {
                                tracing::warn!(dir = %dir.display(), error = %e, "cannot scan new session");
                                None
                            }
                        }
                    }
                    (false, true) => {
                        self.roots[i].sessions.remove(name);
                        self.roots[i].views.remove(name);
                        self.status_due.remove(&(i, name.clone()));
                        self.unwatch(i, &dir);
                        self.emit(i, Some(name), Some(&dir), EventKind::SessionRemoved);
                        self.context_due
                            .entry(i)
                            .or_insert_with(|| Instant::now() + CONTEXT_DELAY);
                        None
                    }
                    _ => None,
                }
            }
            [name, locks] if locks == crate::locks::LOCKS_DIR => {
                let dir = sessions_dir.join(name);
                self.watch_locks(i, &dir);
                self.roots[i].locks_due = Some(Instant::now());
                None
            }
            [_, locks, _] if locks == crate::locks::LOCKS_DIR => {
                self.roots[i].locks_due = Some(Instant::now());
                None
            }
            [name, file] => {
                if is_temp_name(file) {
                    return None;
                }
                let kind = FileKind::from_file_name(file)?;
                if !self.roots[i].sessions.contains_key(name) {
                    // An event for a session we have not seen yet: scan it.
                    return self.apply_path(i, &sessions_dir.join(name));
                }
                self.apply_file(i, name, file, path, kind)
            }
            _ => None,
        }
    }

    fn apply_file(
        &mut self,
        i: usize,
        name: &str,
        file: &str,
        path: &Path,
        kind: FileKind,
    ) -> Option<(String, bool)> {
        let loaded = match load_file(path, kind) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read");
                return None;
            }
        };
        let session = self.roots[i].sessions.get_mut(name)?;
        match loaded {
            None => {
                session.files.remove(file)?;
                self.emit(i, Some(name), Some(path), EventKind::FileRemoved);
                Some((name.to_string(), true))
            }
            Some(new) => {
                let old = session.files.get(file);
                if old.is_some_and(|o| o.fingerprint == new.fingerprint && new.fingerprint != 0) {
                    // Same bytes: a repeated event, or our own write.
                    return None;
                }
                let was_invalid = old.is_some_and(|o| invalid_summary(o).is_some());
                let event = match invalid_summary(&new) {
                    Some((errors, first)) => EventKind::FileInvalid { errors, first },
                    None if was_invalid => EventKind::FileFixed,
                    None => EventKind::FileValidated {
                        warnings: new.diagnostics.len(),
                    },
                };
                session.files.insert(file.to_string(), new);
                self.emit(i, Some(name), Some(path), event);
                Some((name.to_string(), false))
            }
        }
    }

    /// Re-derives sessions, emits what changed, writes outputs.
    /// `deferred` sessions only lost files: their status file is written
    /// after [`REMOVAL_DELAY`], if the session still exists then.
    fn settle(
        &mut self,
        i: usize,
        names: &BTreeSet<String>,
        deferred: &BTreeSet<String>,
        wall: DateTime<Utc>,
    ) {
        let mut derived = Vec::new();
        let mut state_changed = false;
        for name in names {
            if !self.roots[i].sessions.contains_key(name) {
                continue;
            }
            if let Some(s) = self.roots[i].sessions.get_mut(name) {
                s.recheck();
            }
            state_changed |= self.record_starts(i, name);
            let view = self.derive(i, name, wall);
            let before = self.roots[i].views.get(name);
            let diff = changes(before, &view);
            self.roots[i].views.insert(name.clone(), view);
            for kind in diff {
                if let EventKind::SessionStatusChanged { status } = &kind
                    && matches!(
                        status,
                        squad_protocol::model::SessionState::Completed
                            | squad_protocol::model::SessionState::Failed
                    )
                {
                    let status = status.to_string();
                    self.emit(i, Some(name), None, kind);
                    self.release_session_locks(i, name, &status);
                    self.end_session(i, name, &status, wall);
                    continue;
                }
                self.emit(i, Some(name), None, kind);
            }
            state_changed |= self.report_overdue(i, name);
            if deferred.contains(name) {
                self.status_due
                    .entry((i, name.clone()))
                    .or_insert_with(|| Instant::now() + REMOVAL_DELAY);
            } else {
                self.status_due.remove(&(i, name.clone()));
                derived.push(name.clone());
            }
        }
        self.write_statuses(i, &derived, wall);
        // Sessions only losing files get no deliveries either: recreating an
        // inbox in a session being deleted would make `rm -rf` fail.
        let live: BTreeSet<String> = derived.iter().cloned().collect();
        self.deliver_messages(i, Some(&live), wall);
        self.check_inboxes(i, Some(&live), wall);
        let any = !names.is_empty();
        if state_changed {
            self.save_state(i);
        }
        if any {
            self.context_due
                .entry(i)
                .or_insert_with(|| Instant::now() + CONTEXT_DELAY);
        }
    }

    /// The new session-status.md of a session, when it differs from the file.
    fn status_update(
        &self,
        i: usize,
        name: &str,
        wall: DateTime<Utc>,
    ) -> Option<(PathBuf, String)> {
        let r = &self.roots[i];
        let view = r.views.get(name)?;
        let dir = r.sessions_dir.join(name);
        let path = dir.join(SESSION_STATUS_FILE);
        let existing = match read_limited(&path) {
            Ok(bytes) => Some(String::from_utf8(bytes).ok()?),
            Err(_) if !path.exists() && dir.is_dir() => None,
            Err(_) => return None,
        };
        let text = render_status(existing.as_deref(), view, wall)?;
        (existing.as_deref() != Some(text.as_str())).then_some((path, text))
    }

    /// Writes the session-status.md of each named session that changed. The
    /// writes (each with its fsyncs) run in parallel so the file system can
    /// commit them together instead of one journal commit after another.
    fn write_statuses(&mut self, i: usize, names: &[String], wall: DateTime<Utc>) {
        let updates: Vec<(String, PathBuf, String)> = names
            .iter()
            .filter_map(|n| {
                self.status_update(i, n, wall)
                    .map(|(p, t)| (n.clone(), p, t))
            })
            .collect();
        let threads = updates.len().min(8);
        let results = parallel_map(&updates, threads, |(_, path, text)| {
            write_atomic(path, text.as_bytes())
        });
        for ((name, path, text), result) in updates.into_iter().zip(results) {
            let kind = match result {
                Ok(()) => {
                    // Index what we wrote, so its watch event is recognised as ours.
                    let entry = index_bytes(&path, FileKind::SessionStatus, text.as_bytes());
                    if let Some(s) = self.roots[i].sessions.get_mut(&name) {
                        s.files.insert(SESSION_STATUS_FILE.to_string(), entry);
                    }
                    EventKind::OutputWritten {
                        output: "session-status".into(),
                    }
                }
                Err(e) => EventKind::OutputFailed {
                    output: "session-status".into(),
                    error: e.to_string(),
                },
            };
            self.emit(i, Some(&name), Some(&path), kind);
        }
    }

    fn write_shared_context(&mut self, i: usize) {
        let r = &self.roots[i];
        let path = r.root.join(SHARED_CONTEXT);
        let existing = std::fs::read_to_string(&path).ok();
        let pairs: Vec<(&SessionIndex, &SessionView)> = r
            .sessions
            .iter()
            .filter_map(|(name, s)| r.views.get(name).map(|v| (s, v)))
            .collect();
        let text = render_shared_context(existing.as_deref(), &pairs);
        if existing.as_deref() == Some(text.as_str()) {
            return;
        }
        let result = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| write_atomic(&path, text.as_bytes()));
        let kind = match result {
            Ok(()) => EventKind::OutputWritten {
                output: "shared-context".into(),
            },
            Err(e) => EventKind::OutputFailed {
                output: "shared-context".into(),
                error: e.to_string(),
            },
        };
        self.emit(i, None, Some(&path), kind);
    }

    fn summary(&self) -> String {
        let sessions: usize = self.roots.iter().map(|r| r.sessions.len()).sum();
        let problems: usize = self
            .roots
            .iter()
            .flat_map(|r| r.sessions.values())
            .map(|s| {
                s.diagnostics()
                    .filter(|d| d.severity == Severity::Error)
                    .count()
            })
            .sum();
        let overdue: usize = self
            .roots
            .iter()
            .flat_map(|r| r.views.values())
            .map(|v| v.overdue().count())
            .sum();
        format!(
            "{} root(s), {sessions} session(s), {problems} validation error(s), {overdue} overdue task(s)",
            self.roots.len()
        )
    }

    fn root_report(&self, i: usize, session: Option<&str>) -> RootReport {
        let r = &self.roots[i];
        RootReport {
            root: r.root.display().to_string(),
            missing: r.missing,
            next_retention_run: r.next_gc,
            sessions: r
                .sessions
                .iter()
                .filter(|(name, _)| session.is_none_or(|s| s == name.as_str()))
                .filter_map(|(name, s)| {
                    r.views.get(name).map(|v| {
                        let mut report =
                            session_report(s, v, crate::status::session_locks(&r.locks, name));
                        crate::status::add_messages(
                            &mut report,
                            s,
                            r.state.escalated.get(name),
                            Utc::now(),
                        );
                        report
                    })
                })
                .collect(),
        }
    }

    fn answer(&mut self, i: usize, method: Method) -> server::Reply {
        let json = |v: Result<serde_json::Value, serde_json::Error>| {
            server::Reply::Once(match v {
                Ok(v) => Response::ok(v),
                Err(e) => Response::error(e.to_string()),
            })
        };
        match method {
            Method::Ping => json(Ok(serde_json::json!("pong"))),
            Method::Status { session } => {
                let report = StatusReport {
                    daemon: DaemonReport::Running {
                        pid: std::process::id(),
                        uptime_secs: self.started.elapsed().as_secs(),
                        version: env!("CARGO_PKG_VERSION").to_string(),
                        roots: self
                            .roots
                            .iter()
                            .map(|r| r.root.display().to_string())
                            .collect(),
                        last_event: self.recent.back().cloned().map(Box::new),
                    },
                    // The socket belongs to one root; report that root.
                    roots: vec![self.root_report(i, session.as_deref())],
                };
                json(serde_json::to_value(report))
            }
            Method::Events { follow } => {
                let root = self.roots[i].root.display().to_string();
                let backlog: Vec<Event> = self
                    .recent
                    .iter()
                    .filter(|e| e.root == root)
                    .cloned()
                    .collect();
                if follow {
                    server::Reply::Stream {
                        backlog,
                        events: self.bus.subscribe(),
                    }
                } else {
                    json(serde_json::to_value(backlog))
                }
            }
            // Lock events squadctl made: numbered, audited and streamed like
            // squadd's own (other kinds are squadd's alone to report).
            Method::Record { events } => {
                for e in events.into_iter().filter(|e| e.kind.is_lock()) {
                    let path = e.path.as_deref().map(Path::new);
                    self.emit(i, e.session.as_deref(), path, e.kind);
                }
                json(Ok(serde_json::Value::Null))
            }
            Method::Health => {
                let watches = self.roots.iter().map(|r| r.watched.len()).sum();
                let queue = self.queue.load(Ordering::Relaxed) + self.pending.len();
                let roots: Vec<&Path> = self.roots.iter().map(|r| r.root.as_path()).collect();
                json(serde_json::to_value(health::measure(
                    watches, queue, &roots,
                )))
            }
        }
    }
}

/// The summary file written when a session ends.
pub const SUMMARY_FILE: &str = "summary.md";

/// Removes a session's temporary files (`*.tmp` and our own `.x.tmp.*`
/// leftovers at its top level, and `artifacts/tmp/`); returns how many
/// entries went. Links are removed, never followed.
fn remove_temporary_files(dir: &Path) -> usize {
    let mut removed = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_file = e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink());
            if is_file
                && (name.ends_with(".tmp") || is_temp_name(&name))
                && std::fs::remove_file(e.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    let tmp = dir.join("artifacts").join("tmp");
    if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir())
        && std::fs::remove_dir_all(&tmp).is_ok()
    {
        removed += 1;
    }
    removed
}

/// `(error count, first error)` when a file has errors.
fn invalid_summary(f: &IndexedFile) -> Option<(usize, String)> {
    let errors: Vec<_> = f
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    let first = errors.first()?;
    let at = first
        .location
        .map(|l| format!("{}:{} ", l.line, l.column))
        .unwrap_or_default();
    Some((
        errors.len(),
        format!("{at}{}: {}", first.rule, first.message),
    ))
}
