//! `squadd`: watch → read → parse → validate → index → derive → act → audit.
//!
//! The daemon is split along the state each part owns:
//!
//! - [`intake`]: the watches and the paths waiting to be read, and what a
//!   changed path means;
//! - [`core`]: what squadd knows about each root's sessions and the decisions
//!   made from it (no I/O); [`routing`] decides message deliveries and
//!   escalations from it;
//! - [`timers`]: one queue for everything that happens at a time; its head is
//!   the next wake-up;
//! - [`writer`]: every file squadd writes (atomic, coalesced per path);
//! - [`answers`]: control-socket answers (transport in [`server`]);
//! - [`upkeep`]: lock expiry, retention, policy reloads, session wrap-up;
//! - [`hooks`]: notification commands, on their own tasks;
//! - this module: the wiring. One task owns all state (the [`Supervisor`]);
//!   the watcher, the hooks and the control connections send it messages.
//!   Nothing polls: the task sleeps until a file event, a request or the head
//!   of the timer queue.

pub mod answers;
pub mod context;
pub mod core;
pub mod edits;
pub mod eventlog;
pub mod health;
pub mod hooks;
pub mod intake;
pub mod notices;
pub mod pidfile;
pub mod roots;
pub mod routing;
pub mod runs;
pub mod server;
pub mod session;
pub mod shell;
pub mod systemd;
pub mod timers;
pub mod upkeep;
pub mod writer;

use self::core::batch::{CONTEXT_DELAY, REMOVAL_DELAY};
use self::core::timer::ROOT_CHECK_FIRST;
use self::core::{Now, Root};
use self::roots::{RootId, Roots, Shell};
use self::session::{FileOutcome, Outcome};
use crate::control::socket_path;
use crate::events::EventKind;
use crate::index::{load_file, scan_root, scan_session};
use crate::layout::create_layout;
use crate::outputs::render_status;
use crate::state::{State, state_path};
use chrono::{DateTime, Utc};
use eventlog::EventLog;
use hooks::{Hooks, Notice};
use intake::{Intake, Noted, PathChange, classify};
use squad_protocol::FileKind;
use squad_protocol::fsx::read_regular;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::tree::{RUN_DIR, SESSIONS_DIR, SQUAD_DIR, default_threads};
use squad_protocol::validate::MAX_FILE_BYTES;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use timers::{Timer, Timers};
use tokio::sync::mpsc;
use writer::{Tag, Writer};

/// How long skill checks wait for a burst of skill changes (a checkout, an
/// upgrade) to end: skills are re-read once per burst.
const SKILLS_DELAY: Duration = Duration::from_millis(50);
/// How long the STATUS= summary may lag the changes it counts.
const STATUS_LINE_DELAY: Duration = Duration::from_secs(1);
/// Quiet period before squadd merges a changed decisions inbox: a burst of
/// inbox writes is merged once, and a file still being written (by an agent
/// that does not use `squadctl memory add`) is given time to be complete.
const MEMORY_INBOX_DELAY: Duration = Duration::from_millis(500);

/// How long after a change to the control socket or pid file squadd checks
/// them (a `.squad/` being deleted is gone by then).
const CONTROL_DELAY: Duration = Duration::from_millis(250);

/// A batch of at least this many paths is a burst, after which freed
/// memory is returned to the OS ([`TRIM_DELAY`] after the last such batch).
const TRIM_AFTER_PATHS: usize = 64;
/// How long after the last burst batch memory is returned.
const TRIM_DELAY: Duration = Duration::from_secs(2);

/// The relative path of the shared context file.
pub const SHARED_CONTEXT: &str = ".claude/context/shared-context.json";

/// The summary file written when a session ends.
pub const SUMMARY_FILE: &str = "summary.md";

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

/// The daemon's state, and its one owner.
pub struct Supervisor {
    /// Every root: its core and its shell.
    roots: Roots,
    intake: Intake,
    timers: Timers,
    writer: Writer,
    log: EventLog,
    hooks: Hooks,
    started: Instant,
    last_status_line: String,
    /// Whether systemd listens for STATUS= lines.
    notify_socket: bool,
    watchdog: Option<Duration>,
    /// Where the control connections send their calls.
    calls: mpsc::Sender<server::Call>,
    /// Deliveries due now, made at the end of the batch (critical first).
    outbox: Vec<(RootId, routing::Delivery)>,
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(options: Options) -> Result<(), StartError> {
    let (intake, mut fs_rx) = Intake::start()?;

    // Handlers first: a SIGTERM that arrives while starting (or right after
    // READY) must stop the daemon cleanly, not kill it.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;

    let (hooks, mut hook_rx) = Hooks::new();
    let (calls, mut call_rx) = mpsc::channel::<server::Call>(64);
    let mut sup = Supervisor {
        roots: Roots::default(),
        intake,
        timers: Timers::default(),
        writer: Writer::default(),
        log: EventLog::default(),
        hooks,
        started: Instant::now(),
        last_status_line: String::new(),
        notify_socket: std::env::var_os("NOTIFY_SOCKET").is_some(),
        watchdog: systemd::watchdog_interval(),
        calls,
        outbox: Vec::new(),
    };

    let mut behind_rx = sup.writer.start_behind()?;
    for root in &options.roots {
        sup.open_root(root)?;
    }
    // Before the scan: its deliveries are journalled too.
    for (i, r) in sup.roots.cores() {
        sup.hooks
            .resume(i, &r.root, &r.policy.messages, &r.policy.hooks);
    }
    // Watches first, then the scan: a change during the scan is seen twice
    // at worst (and ignored the second time), never missed.
    for i in sup.roots.ids() {
        sup.watch_root(i);
    }
    let now = Utc::now();
    for i in sup.roots.ids() {
        sup.initial_scan(i, now);
        sup.adopt_runs(i, now);
    }
    release_scan_memory();

    for i in sup.roots.ids() {
        let root = sup.roots.core(i).root.clone();
        let path = socket_path(&root);
        let bound = server::Bound::start(&root, &path, i, sup.calls.clone()).map_err(|e| {
            StartError::Root {
                root: root.display().to_string(),
                message: format!("cannot bind {}: {e}", path.display()),
            }
        })?;
        sup.roots.shell_mut(i).socket = Some(bound);
    }

    let summary = answers::summary(&sup);
    systemd::ready(&summary);
    sup.last_status_line = summary;
    tracing::info!(roots = sup.roots.len(), "ready");
    if let Some(every) = sup.watchdog {
        sup.timers.set(Timer::Watchdog, Instant::now() + every);
    }

    let reason = loop {
        let wake = sup.next_wake();
        tokio::select! {
            biased;
            _ = sigterm.recv() => break "SIGTERM",
            _ = sigint.recv() => break "SIGINT",
            // Before file events: a steady stream of agent writes must not
            // starve a control request (a session edit waits on its answer).
            Some(call) = call_rx.recv() => {
                let reply = answers::answer(&mut sup, call.root, call.method);
                let _ = call.reply.send(reply);
            }
            Some(res) = fs_rx.recv() => {
                sup.note(res);
                while let Ok(res) = fs_rx.try_recv() {
                    sup.note(res);
                }
            }
            Some(outcome) = hook_rx.recv() => {
                if let Some(error) = outcome.error {
                    sup.log.emit(
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
            Some(done) = behind_rx.recv() => sup.written_behind(done),
            _ = sleep_until(wake) => {}
        }
        sup.flush(Instant::now(), Utc::now());
    };

    tracing::info!(reason, "stopping");
    systemd::stopping();
    sup.writer.finish_behind();
    while let Ok(done) = behind_rx.try_recv() {
        sup.written_behind(done);
    }
    for i in sup.roots.ids() {
        if sup.timers.contains(&Timer::Context(i)) {
            sup.write_shared_context(i, true);
        }
        if sup.timers.contains(&Timer::SaveState(i)) {
            sup.save_state(i);
        }
        sup.log.emit(
            i,
            None,
            None,
            EventKind::Stopping {
                reason: reason.to_string(),
            },
        );
        // Only our own socket: a squadd that took the root over keeps its.
        let path = socket_path(&sup.roots.core(i).root);
        if sup
            .roots
            .shell(i)
            .socket
            .as_ref()
            .is_some_and(|b| b.is_at(&path))
        {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(())
}

/// Returns the memory the parallel start-up scan (or a burst) freed to the
/// OS. The scan's worker threads leave freed parse buffers in their own
/// malloc arenas, and a burst's queued events and reads leave free holes,
/// which glibc keeps resident; a long-running daemon should not carry them.
fn release_scan_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether a file was indexed as unreadable (a read error, not its content).
fn is_unreadable(f: &crate::index::IndexedFile) -> bool {
    f.fingerprint == 0
        && f.diagnostics
            .first()
            .is_some_and(|d| d.rule == squad_protocol::Rule::Unreadable)
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
        if self.roots.cores().any(|(_, r)| r.root == root) {
            return Err(fail("given twice".into()));
        }
        create_layout(&root).map_err(|e| fail(format!("cannot create .squad/: {e}")))?;
        let lock = pidfile::acquire(
            &root,
            &Path::new(SQUAD_DIR).join(RUN_DIR).join("squadd.pid"),
        )?;
        let policy = crate::locks::load_policy(&root);
        self.writer.add_root(&root);
        let runs = runs::RootRuns::load(&root);
        // An invalid policy never stops squadd (under systemd that is a
        // restart loop): it runs on the defaults and names the field. The
        // defaults' retention could delete what the refused policy kept, so
        // retention waits for a valid policy.
        let refused = policy.as_ref().err().cloned();
        let policy = policy.unwrap_or_else(|_| squad_policies::Policy::defaults());
        let state = State::load(&root);
        let mut r = Root::new(root, state, policy, Utc::now());
        if refused.is_some() {
            r.next_gc = None;
        }
        let shell = Shell {
            pid_lock: Some(lock),
            socket: None,
            runs,
        };
        let i = self.roots.add(r, shell);
        let r = self.roots.core(i);
        self.log.add_root(i, &r.root);
        if let Some(error) = refused {
            tracing::error!(root = %r.root.display(), %error, "policy refused; running on the defaults");
            let path = r.root.join(SQUAD_DIR).join("policies.yaml");
            self.log.emit(
                i,
                None,
                Some(&path),
                EventKind::PolicyRefused {
                    error: format!(
                        "{error}; running on the default policy, retention held until the policy is valid"
                    ),
                },
            );
        }
        if let Some(at) = self.roots.core(i).next_gc {
            self.timers
                .set_wall(Timer::Retention(i), at, Utc::now(), Instant::now());
        }
        self.timers.set(Timer::Locks(i), Instant::now());
        Ok(())
    }

    fn watch(&mut self, i: RootId, path: &Path) {
        if let Err(error) = self.intake.watch(path) {
            tracing::error!(path = %path.display(), %error, "cannot watch");
            self.log
                .emit(i, None, Some(path), EventKind::WatchError { error });
            if self.intake.unwatched().contains(path) {
                self.timers
                    .set_earlier(Timer::Rewatch, Instant::now() + self.intake.rewatch_delay());
            }
        }
    }

    /// Retries the directories that could not be watched; the roots that
    /// got a watch back are rescanned (what changed there meanwhile was
    /// never reported).
    fn rewatch(&mut self) {
        let restored = self.intake.rewatch();
        let roots: BTreeSet<RootId> = restored.iter().filter_map(|p| self.root_of(p)).collect();
        for i in roots {
            let dirs = restored
                .iter()
                .filter(|p| self.root_of(p) == Some(i))
                .count();
            self.log
                .emit(i, None, None, EventKind::WatchRestored { dirs });
            self.timers.set(Timer::Rescan(i), Instant::now());
        }
        if !self.intake.unwatched().is_empty() {
            self.timers
                .set(Timer::Rewatch, Instant::now() + self.intake.rewatch_delay());
        }
    }

    /// Checks that root `i`'s pid lock and control socket are still where
    /// they belong, and restores them: a removed socket is bound again; a
    /// `.squad/` deleted and recreated gets our pid lock again, or, when
    /// another squadd took it first, the root is left to that squadd.
    /// Returns whether squadd still supervises the root.
    fn check_control(&mut self, i: RootId) -> bool {
        if self.roots.core(i).taken_over.is_some() {
            return false;
        }
        let root = self.roots.core(i).root.clone();
        if !self.roots.core(i).sessions_dir.is_dir() {
            // Missing: restored by the root check.
            return true;
        }
        let pid_rel = Path::new(SQUAD_DIR).join(RUN_DIR).join("squadd.pid");
        let pid_path = root.join(&pid_rel);
        if !self
            .roots
            .shell(i)
            .pid_lock
            .as_ref()
            .is_some_and(|l| l.is_at(&pid_path))
        {
            if let Err(e) = create_layout(&root) {
                tracing::warn!(root = %root.display(), error = %e, "cannot recreate .squad/run");
            }
            match pidfile::acquire(&root, &pid_rel) {
                Ok(lock) => {
                    self.roots.shell_mut(i).pid_lock = Some(lock);
                    self.log.reopen_audit(i);
                    self.log.emit(
                        i,
                        None,
                        None,
                        EventKind::ControlRestored {
                            reason: "pid lock taken again: .squad/ was recreated".into(),
                        },
                    );
                }
                Err(pidfile::PidLockError::Held { pid, .. }) => {
                    self.take_over(i, pid);
                    return false;
                }
                Err(e) => {
                    tracing::error!(root = %root.display(), error = %e, "cannot take the pid lock again");
                    return true;
                }
            }
        }
        let path = socket_path(&root);
        if !self
            .roots
            .shell(i)
            .socket
            .as_ref()
            .is_some_and(|b| b.is_at(&path))
        {
            // The old listener goes first (its file is gone or replaced).
            self.roots.shell_mut(i).socket = None;
            match server::Bound::start(&root, &path, i, self.calls.clone()) {
                Ok(bound) => {
                    self.roots.shell_mut(i).socket = Some(bound);
                    self.watch(i, &root.join(SQUAD_DIR).join(RUN_DIR));
                    self.log.emit(
                        i,
                        None,
                        Some(&path),
                        EventKind::ControlRestored {
                            reason: "control socket bound again".into(),
                        },
                    );
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot bind the control socket again");
                }
            }
        }
        true
    }

    /// Whether root `i` is not supervised now (its `.squad/sessions` is
    /// missing, or another squadd has it): nothing is written into it.
    fn root_gone(&self, i: RootId) -> bool {
        let r = self.roots.core(i);
        r.taken_over.is_some() || r.missing || !r.sessions_dir.is_dir()
    }

    /// What `health` reports of the watches and the roots.
    pub fn supervision(&self) -> health::Supervision {
        health::Supervision {
            watches: self.intake.watch_count(),
            queue_depth: self.intake.queue_depth(),
            unwatched: self
                .intake
                .unwatched()
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            roots: self
                .roots
                .ids()
                .map(|i| {
                    let r = self.roots.core(i);
                    let problem = if let Some(pid) = &r.taken_over {
                        Some(format!(
                            "taken over by another squadd (pid {pid}); not supervised"
                        ))
                    } else if r.missing {
                        Some(".squad/sessions is missing; waiting for it to come back".into())
                    } else if !self
                        .roots
                        .shell(i)
                        .socket
                        .as_ref()
                        .is_some_and(|b| b.is_at(&socket_path(&r.root)))
                    {
                        Some("control socket not bound".into())
                    } else {
                        None
                    };
                    health::RootControl {
                        root: r.root.display().to_string(),
                        problem,
                        hooks: self.hooks.report(i, &r.policy.messages, &r.policy.hooks),
                    }
                })
                .collect(),
        }
    }

    /// Another squadd holds root `i` now: stop supervising it, say so.
    fn take_over(&mut self, i: RootId, pid: String) {
        tracing::error!(root = %self.roots.core(i).root.display(), %pid, "another squadd took the root over");
        self.roots.core_mut(i).taken_over = Some(pid.clone());
        self.roots.shell_mut(i).pid_lock = None;
        self.roots.shell_mut(i).socket = None;
        let root = self.roots.core(i).root.clone();
        self.intake.unwatch_under(&root);
        self.timers.cancel_root(i);
        let names: Vec<String> = self.roots.core(i).sessions.keys().cloned().collect();
        for name in names {
            self.roots.core_mut(i).remove_session(&name);
        }
        self.log
            .emit(i, None, None, EventKind::RootTakenOver { pid });
    }

    /// Watches a session's `locks/` when it exists (squadctl creates it on
    /// the first acquisition; its creation event brings us back here).
    fn watch_locks(&mut self, i: RootId, session_dir: &Path) {
        let locks = session_dir.join(crate::locks::LOCKS_DIR);
        if locks.is_dir() {
            self.watch(i, &locks);
        }
    }

    /// Watches the root, `.squad`, `.squad/sessions` and each session
    /// directory, each non-recursively: artifacts and other subdirectories
    /// cost nothing.
    fn watch_root(&mut self, i: RootId) {
        let root = self.roots.core(i).root.clone();
        // `squadctl import` puts a new `.squad/` in the old one's place.
        self.intake.forget_if_replaced(&root.join(SQUAD_DIR));
        self.watch(i, &root);
        self.watch(i, &root.join(SQUAD_DIR));
        let sessions = self.roots.core(i).sessions_dir.clone();
        self.watch(i, &sessions);
        // The socket and pid file: a removed socket is bound again.
        self.watch(i, &root.join(SQUAD_DIR).join(RUN_DIR));
        if let Ok(dirs) = squad_protocol::tree::session_dirs(&root) {
            for dir in dirs {
                self.watch(i, &dir);
                self.watch_locks(i, &dir);
            }
        }
        for dir in crate::skills::watch_dirs(&root) {
            self.watch(i, &dir);
        }
        let inbox = root.join(SQUAD_DIR).join("decisions").join("inbox");
        if inbox.is_dir() {
            self.watch(i, &inbox);
        }
    }

    /// Re-checks a root's skills and watches skill folders that appeared.
    fn refresh_skills(&mut self, i: RootId) {
        self.timers.cancel(&Timer::Skills(i));
        let root = self.roots.core(i).root.clone();
        for dir in crate::skills::watch_dirs(&root) {
            self.watch(i, &dir);
        }
        self.roots.core_mut(i).skills = crate::skills::health(&root);
        for dir in crate::team::watch_dirs(&root) {
            // An import replaces the team's directories whole.
            self.intake.forget_if_replaced(&dir);
            self.watch(i, &dir);
        }
        self.roots.core_mut(i).team = crate::team::health(&root);
    }

    /// Records the events upkeep caused.
    fn record(&mut self, i: RootId, caused: Vec<upkeep::Caused>) {
        for (session, path, kind) in caused {
            self.log.emit(i, session.as_deref(), path.as_deref(), kind);
        }
    }

    fn initial_scan(&mut self, i: RootId, now: DateTime<Utc>) {
        let root = self.roots.core(i).root.clone();
        let mut scanned = true;
        let sessions = match scan_root(&root, default_threads()) {
            Ok(s) => s,
            Err(e) => {
                scanned = false;
                tracing::error!(root = %root.display(), error = %e, "start-up scan failed");
                self.roots.core_mut(i).missing = true;
                self.log.emit(i, None, None, EventKind::RootMissing);
                self.timers
                    .set(Timer::RootCheck(i), Instant::now() + ROOT_CHECK_FIRST);
                BTreeMap::new()
            }
        };
        let files = sessions.values().map(|s| s.files.len()).sum();
        let count = sessions.len();
        let names: Vec<String> = sessions.keys().cloned().collect();
        // Temporaries a kill -9 left behind (ours, older than a minute).
        if let Ok(dir) = crate::safefs::Dir::open_root(&root)
            .and_then(|d| d.walk(Path::new(SQUAD_DIR).join(SESSIONS_DIR).as_path(), None))
        {
            for name in &names {
                if let Ok(s) = dir.open_dir(std::ffi::OsStr::new(name)) {
                    crate::safefs::sweep_temporaries(&s, crate::safefs::STALE_AFTER);
                }
            }
        }
        // The first derivation is the baseline: no task-ready storm at start.
        for (name, index) in sessions {
            let out = self.roots.core_mut(i).load_session(index, now, false);
            self.report_invalid_files(i, &name);
            // A session that ended while squadd was down still holds its
            // locks, and may lack its summary.
            let ended = out.ended;
            let dir = self.roots.core(i).session_dir(&name);
            self.take_outcome(i, &name, Outcome { ended: None, ..out }, now, false);
            if let Some(status) = ended {
                let status = status.to_string();
                if dir.join(crate::locks::LOCKS_DIR).is_dir() {
                    self.release_session_locks(i, &name, &status);
                }
                if !dir.join(SUMMARY_FILE).exists() {
                    self.end_session(i, &name, &status, now);
                }
            }
        }
        if scanned {
            // Sessions deleted or archived while squadd was down.
            self.roots.core_mut(i).prune_state();
        }
        self.write_statuses(i, &names, now);
        self.refresh_skills(i);
        // Facts that arose while squadd was down (told once: see notices).
        for name in &names {
            self.tap_standing_facts(i, name);
        }
        // The backlog written while squadd was down: critical first.
        for name in &names {
            self.seed_mail(i, name, now);
        }
        self.flush_outbox(now);
        self.send_notices(now);
        self.save_state(i);
        self.write_shared_context(i, true);
        self.log.emit(
            i,
            None,
            None,
            EventKind::Started {
                sessions: count,
                files,
            },
        );
    }

    /// Carries out what a session change caused: events, the wrap-up of a
    /// session that ended, task deadline timers, the persisted state.
    /// A session that ended by `removal` (only losing files) is wrapped up
    /// after [`REMOVAL_DELAY`] if it still exists and still ended then.
    fn take_outcome(
        &mut self,
        i: RootId,
        name: &str,
        out: Outcome,
        wall: DateTime<Utc>,
        removal: bool,
    ) {
        for kind in out.events {
            self.log.emit(i, Some(name), None, kind);
        }
        if let Some(status) = out.ended {
            if removal {
                let timer = Timer::WrapUp {
                    root: i,
                    session: name.to_string(),
                };
                self.timers.set(timer, Instant::now() + REMOVAL_DELAY);
            } else {
                self.wrap_up(i, name, &status.to_string(), wall);
            }
        }
        for kind in out.overdue {
            self.log.emit(i, Some(name), None, kind);
        }
        if out.state_changed {
            self.state_changed(i);
        }
        for (task, at) in out.timers {
            let timer = Timer::TaskDue {
                root: i,
                session: name.to_string(),
                task,
            };
            match at {
                Some(at) => self.timers.set_wall(timer, at, wall, Instant::now()),
                None => self.timers.cancel(&timer),
            }
        }
    }

    fn report_invalid_files(&mut self, i: RootId, name: &str) {
        for (path, errors, first, unreadable) in self.roots.core(i).invalid_files(name) {
            if unreadable {
                self.intake.retry_unreadable(&path, Instant::now());
            }
            self.log.emit(
                i,
                Some(name),
                Some(&path),
                EventKind::FileInvalid { errors, first },
            );
        }
    }

    /// Writes the persisted state behind: at most once per burst.
    fn state_changed(&mut self, i: RootId) {
        self.timers
            .set_earlier(Timer::SaveState(i), Instant::now() + CONTEXT_DELAY);
    }

    fn save_state(&mut self, i: RootId) {
        self.timers.cancel(&Timer::SaveState(i));
        if self.root_gone(i) {
            // Never recreate what is being deleted; saved when it is back.
            return;
        }
        let path = state_path(&self.roots.core(i).root);
        let result = self
            .roots
            .core_mut(i)
            .state_to_save()
            .encode()
            .and_then(|bytes| self.writer.write_private(&path, &bytes));
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot save state.json");
        }
    }

    /// Takes one watcher notification.
    fn note(&mut self, res: intake::Notification) {
        match self.intake.note(res, Instant::now()) {
            Noted::Queued => {}
            Noted::Failed(error) => {
                tracing::error!(%error, "watcher error");
                for i in self.roots.ids() {
                    self.log.emit(
                        i,
                        None,
                        None,
                        EventKind::WatchError {
                            error: error.clone(),
                        },
                    );
                    self.timers.set(Timer::Rescan(i), Instant::now());
                }
            }
            Noted::Rescan(paths) => {
                let roots: BTreeSet<RootId> = if paths.is_empty() {
                    self.roots.ids().collect()
                } else {
                    paths.iter().filter_map(|p| self.root_of(p)).collect()
                };
                for i in roots {
                    self.timers.set(Timer::Rescan(i), Instant::now());
                }
            }
        }
    }

    fn root_of(&self, path: &Path) -> Option<RootId> {
        self.roots.of(path)
    }

    /// The next moment something is due: a settling file or the head of the
    /// timer queue.
    fn next_wake(&self) -> Option<Instant> {
        [self.intake.next_due(), self.timers.next()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Processes everything due: rescans, settled paths, timers.
    fn flush(&mut self, now: Instant, wall: DateTime<Utc>) {
        let due = self.timers.pop_due(now);
        let mut touched: BTreeMap<RootId, BTreeSet<String>> = BTreeMap::new();
        // Sessions that saw something other than a removal in this batch.
        let mut changed: BTreeSet<(RootId, String)> = BTreeSet::new();
        for t in &due {
            if let Timer::Rescan(i) = t {
                let names = self.rescan(*i);
                changed.extend(names.iter().map(|n| (*i, n.clone())));
                touched.entry(*i).or_default().extend(names);
            }
        }
        let paths = self.intake.take_due(now);
        if paths.len() >= TRIM_AFTER_PATHS {
            // A burst: once it is over, the memory its events and reads
            // used goes back to the OS (moved on while the burst lasts).
            self.timers.set(Timer::Trim, now + TRIM_DELAY);
        }
        let worked = !paths.is_empty()
            || due.iter().any(|t| {
                !matches!(
                    t,
                    Timer::StatusLine | Timer::Watchdog | Timer::Trim | Timer::Runs
                )
            });
        for path in paths {
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
        // Tasks whose deadline passed re-derive without a file change.
        let mut passed: BTreeMap<(RootId, String), Vec<String>> = BTreeMap::new();
        for t in &due {
            if let Timer::TaskDue {
                root,
                session,
                task,
            } = t
            {
                passed
                    .entry((*root, session.clone()))
                    .or_default()
                    .push(task.clone());
            }
        }
        for ((i, name), tasks) in passed {
            if let Some(out) = self.roots.core_mut(i).tick(&name, &tasks, wall) {
                self.take_outcome(i, &name, out, wall, false);
                changed.insert((i, name.clone()));
                touched.entry(i).or_default().insert(name);
            }
        }
        // What to write, in the order that matters (core::batch).
        let now = Now { wall };
        let roots = &self.roots;
        let effects = self::core::batch::settle(&touched, &changed, |id, name| {
            roots.core(id).sessions.contains_key(name)
        });
        self.perform(effects, now);
        for t in due {
            let root = t.root();
            let effects =
                self::core::timer::fire(t, root.map(|id| self.roots.core_mut(id)), &changed, now);
            self.perform(effects, now);
        }
        // Facts the writes and timers above brought up.
        self.send_notices(wall);
        self.supervise_runs(wall);
        // The STATUS= line walks every session: only worth it when a service
        // manager listens, and at most once a second after changes.
        if self.notify_socket && worked {
            self.timers
                .set_earlier(Timer::StatusLine, Instant::now() + STATUS_LINE_DELAY);
        }
    }

    fn schedule_retention(&mut self, i: RootId, wall: DateTime<Utc>) {
        match self.roots.core(i).next_gc {
            Some(at) => self
                .timers
                .set_wall(Timer::Retention(i), at, wall, Instant::now()),
            None => self.timers.cancel(&Timer::Retention(i)),
        }
    }

    /// Sessions retention must leave alone: paths still waiting to be read,
    /// status writes held back.
    fn busy_sessions(&self, i: RootId) -> BTreeSet<String> {
        let mut busy = self.intake.busy_sessions(&self.roots.core(i).sessions_dir);
        busy.extend(self.timers.held_sessions(i).map(str::to_string));
        busy
    }

    fn refresh_locks(&mut self, i: RootId) {
        if self.root_gone(i) {
            return;
        }
        let mut caused = Vec::new();
        let next = upkeep::refresh_locks(self.roots.core_mut(i), &mut caused);
        self.record(i, caused);
        match next {
            upkeep::LocksNext::Retry(after) => {
                self.timers.set(Timer::Locks(i), Instant::now() + after)
            }
            upkeep::LocksNext::At(Some(at)) => {
                self.timers
                    .set_wall(Timer::Locks(i), at, Utc::now(), Instant::now())
            }
            upkeep::LocksNext::At(None) => self.timers.cancel(&Timer::Locks(i)),
        }
    }

    fn release_session_locks(&mut self, i: RootId, name: &str, status: &str) {
        let mut caused = Vec::new();
        upkeep::release_session_locks(self.roots.core(i), name, status, &mut caused);
        self.record(i, caused);
        self.timers.set(Timer::Locks(i), Instant::now());
    }

    /// Releases a session's locks and writes its summary.
    fn wrap_up(&mut self, i: RootId, name: &str, status: &str, wall: DateTime<Utc>) {
        self.release_session_locks(i, name, status);
        self.end_session(i, name, status, wall);
    }

    fn end_session(&mut self, i: RootId, name: &str, status: &str, wall: DateTime<Utc>) {
        if let Some(caused) =
            upkeep::end_session(self.roots.core(i), &mut self.writer, name, status, wall)
        {
            self.record(i, vec![caused]);
        }
    }

    /// Re-reads a whole root; returns the sessions to re-derive.
    fn rescan(&mut self, i: RootId) -> Vec<String> {
        let root = self.roots.core(i).root.clone();
        if self.roots.core(i).taken_over.is_some() {
            return Vec::new();
        }
        if !self.roots.core(i).sessions_dir.is_dir() {
            // The kernel dropped the watches of everything that vanished;
            // forget them too, or the directories that come back later would
            // count as watched and never be watched again.
            self.intake.forget_under(&root.join(SQUAD_DIR));
            if !root.is_dir() {
                self.intake.forget_under(&root);
            }
            if !self.roots.core(i).missing {
                self.roots.core_mut(i).missing = true;
                self.log.emit(i, None, None, EventKind::RootMissing);
                // A root deleted and recreated is a new directory that no
                // watch covers: look for it (only while it is missing).
                self.roots.core_mut(i).check_after = ROOT_CHECK_FIRST;
                self.timers
                    .set(Timer::RootCheck(i), Instant::now() + ROOT_CHECK_FIRST);
            }
            return Vec::new();
        }
        if self.roots.core(i).missing {
            self.timers.cancel(&Timer::RootCheck(i));
            // Watches of a root directory that was replaced are dead.
            self.intake.unwatch_under(&root);
        }
        if !self.check_control(i) {
            return Vec::new();
        }
        self.watch_root(i);
        self.timers.set(Timer::Skills(i), Instant::now());
        let listed = match squad_protocol::tree::session_dirs(&root) {
            Ok(dirs) => dirs,
            Err(e) => {
                tracing::error!(error = %e, "rescan failed");
                return Vec::new();
            }
        };
        // squadd supervises only directories named like sessions (see
        // intake::classify).
        let mut names: BTreeSet<String> = listed
            .iter()
            .filter_map(|d| d.file_name()?.to_str())
            .filter(|n| squad_protocol::ids::is_session_dir_name(n))
            .map(str::to_string)
            .collect();
        // What the reads of a rescan used goes back once the rescans of a
        // burst are over.
        self.timers.set(Timer::Trim, Instant::now() + TRIM_DELAY);
        let old: BTreeSet<String> = self.roots.core(i).sessions.keys().cloned().collect();
        for gone in old.difference(&names) {
            self.forget_session(i, gone);
        }
        // What changed while events were lost is announced as changes.
        let wall = Utc::now();
        for name in &names {
            if old.contains(name) {
                self.rescan_session(i, name);
            } else {
                match scan_session(&self.roots.core(i).session_dir(name)) {
                    Ok(index) => {
                        let out = self.roots.core_mut(i).load_session(index, wall, true);
                        self.take_outcome(i, name, out, wall, false);
                    }
                    // Gone between the listing and the scan: its own event
                    // follows.
                    Err(e) => {
                        tracing::debug!(session = %name, error = %e, "session not scanned");
                        continue;
                    }
                }
            }
            self.seed_mail(i, name, wall);
        }
        let was_missing = std::mem::replace(&mut self.roots.core_mut(i).missing, false);
        let reason = if was_missing {
            self.log.emit(i, None, None, EventKind::RootRestored);
            "root restored"
        } else {
            "the watcher asked for a rescan"
        };
        self.log.emit(
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

    /// Brings a known session up to date after lost events: each file on
    /// disk goes the one way a file event goes ([`Self::apply_file`]: the
    /// same bytes as indexed are not parsed again), each indexed file no
    /// longer on disk is a removal. Beyond reading the files, the work is
    /// proportional to what changed, and the session is never indexed
    /// twice (a burst that overflows the notification queue rescans again
    /// and again: a second index each time was most of squadd's memory
    /// after such a burst).
    fn rescan_session(&mut self, i: RootId, name: &str) {
        let dir = self.roots.core(i).session_dir(name);
        // Unreadable now (or gone: its own event follows): keep what we have.
        let Ok(on_disk) = squad_protocol::tree::session_files(&dir) else {
            return;
        };
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (path, kind) in on_disk {
            let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let file = file.to_string();
            self.apply_file(i, name, &file, &path, kind);
            seen.insert(file);
        }
        let gone: Vec<(String, FileKind)> = self
            .roots
            .core(i)
            .sessions
            .get(name)
            .map(|core| {
                core.index()
                    .files
                    .iter()
                    .filter(|(file, _)| !seen.contains(*file))
                    .map(|(file, f)| (file.to_string(), f.kind))
                    .collect()
            })
            .unwrap_or_default();
        for (file, kind) in gone {
            let path = dir.join(&file);
            self.apply_file(i, name, &file, &path, kind);
        }
    }

    /// A session directory vanished.
    fn forget_session(&mut self, i: RootId, name: &str) {
        let dir = self.roots.core(i).session_dir(name);
        self.roots.core_mut(i).remove_session(name);
        self.timers.cancel_session(i, name);
        // Its inbox and lock watches go with it.
        self.intake.unwatch_under(&dir);
        self.writer.forget_under(&dir);
        self.log
            .emit(i, Some(name), Some(&dir), EventKind::SessionRemoved);
        self.timers
            .set_earlier(Timer::Context(i), Instant::now() + CONTEXT_DELAY);
        self.state_changed(i);
    }

    /// Applies one changed path; returns the session it touched and whether
    /// the change was only a removal.
    fn apply_path(&mut self, i: RootId, path: &Path) -> Option<(String, bool)> {
        if self.is_config(i, path) {
            self.reload_config(i);
            return None;
        }
        let r = self.roots.core(i);
        match classify(&r.root, &r.sessions_dir, path)? {
            PathChange::Policy => {
                if let Some(caused) = upkeep::reload_policy(self.roots.core_mut(i)) {
                    self.record(i, vec![caused]);
                    self.schedule_retention(i, Utc::now());
                }
                None
            }
            PathChange::Rescan => {
                self.timers.set(Timer::Rescan(i), Instant::now());
                None
            }
            PathChange::Control => {
                // Checked a moment later: a `.squad/` being deleted is gone
                // by then, and nothing is recreated inside it.
                self.timers
                    .set_earlier(Timer::RootCheck(i), Instant::now() + CONTROL_DELAY);
                None
            }
            PathChange::Skills => {
                self.timers
                    .set_earlier(Timer::Skills(i), Instant::now() + SKILLS_DELAY);
                None
            }
            PathChange::MemoryInbox => {
                if self.roots.core(i).policy.memory.merge {
                    // Each change restarts the quiet period.
                    self.timers
                        .set(Timer::MemoryInbox(i), Instant::now() + MEMORY_INBOX_DELAY);
                }
                None
            }
            PathChange::SessionDir(name) => self.apply_session_dir(i, &name),
            PathChange::LocksDir(name) => {
                let dir = self.roots.core(i).session_dir(&name);
                self.watch_locks(i, &dir);
                self.timers.set(Timer::Locks(i), Instant::now());
                None
            }
            PathChange::Inbox {
                session,
                agent,
                file,
            } => {
                self.inbox_changed(i, &session, agent, file, path);
                None
            }
            PathChange::LockRecord(_) => {
                self.timers.set(Timer::Locks(i), Instant::now());
                None
            }
            PathChange::SessionFile {
                session,
                file,
                kind,
            } => {
                if !self.roots.core(i).sessions.contains_key(&session) {
                    // An event for a session we have not seen yet: scan it.
                    return self.apply_session_dir(i, &session);
                }
                self.apply_file(i, &session, &file, path, kind)
            }
        }
    }

    fn apply_session_dir(&mut self, i: RootId, name: &str) -> Option<(String, bool)> {
        let dir = self.roots.core(i).session_dir(name);
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        let known = self.roots.core(i).sessions.contains_key(name);
        match (is_dir, known) {
            (true, false) => {
                // Watch first, then scan: files created before the watch
                // existed are found by the scan.
                self.watch(i, &dir);
                self.watch_locks(i, &dir);
                match scan_session(&dir) {
                    Ok(s) => {
                        let wall = Utc::now();
                        let out = self.roots.core_mut(i).load_session(s, wall, true);
                        self.log
                            .emit(i, Some(name), Some(&dir), EventKind::SessionAdded);
                        self.report_invalid_files(i, name);
                        self.take_outcome(i, name, out, wall, false);
                        self.seed_mail(i, name, wall);
                        Some((name.to_string(), false))
                    }
                    Err(e) => {
                        tracing::warn!(dir = %dir.display(), error = %e, "cannot scan new session");
                        None
                    }
                }
            }
            (false, true) => {
                self.forget_session(i, name);
                None
            }
            _ => None,
        }
    }

    fn apply_file(
        &mut self,
        i: RootId,
        name: &str,
        file: &str,
        path: &Path,
        kind: FileKind,
    ) -> Option<(String, bool)> {
        // Same bytes as indexed (a repeated event, or squadd's own write):
        // recognised by fingerprint, not parsed again.
        let indexed = self
            .roots
            .core(i)
            .sessions
            .get(name)?
            .index()
            .files
            .get(file)
            .map(|f| f.fingerprint);
        let loaded = match read_regular(path, MAX_FILE_BYTES) {
            Ok(bytes) if indexed == Some(crate::index::fingerprint(&bytes)) => {
                self.intake.clear_vanished(path);
                return None;
            }
            Ok(bytes) => Some(crate::index::index_bytes(path, kind, &bytes)),
            // Gone, or unreadable: indexed as such, with the reason.
            Err(_) => match load_file(path, kind) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read; retrying");
                    if squad_protocol::fsx::is_transient_io(&e) {
                        self.intake.retry(
                            path.to_path_buf(),
                            Instant::now() + Duration::from_millis(250),
                        );
                    }
                    return None;
                }
            },
        };
        // Gone: a removal counts once the file stayed gone for a moment (a
        // file replaced by unlink or rename and create is a change).
        if loaded.is_none() && indexed.is_some() {
            if !self.intake.vanished(path, Instant::now()) {
                tracing::debug!(path = %path.display(), "gone; removal counts if still gone in a moment");
                return None;
            }
        } else {
            self.intake.clear_vanished(path);
        }
        // A read error is never sticky: an unreadable file is read again
        // (its attribute change is an event too, see intake).
        if loaded.as_ref().is_some_and(is_unreadable) {
            self.intake.retry_unreadable(path, Instant::now());
            let same = self
                .roots
                .core(i)
                .sessions
                .get(name)?
                .index()
                .files
                .get(file)
                .zip(loaded.as_ref())
                .is_some_and(|(old, new)| is_unreadable(old) && old.diagnostics == new.diagnostics);
            if same {
                return None;
            }
        } else {
            self.intake.readable(path);
        }
        let wall = Utc::now();
        let reply_to = |f: Option<&crate::index::IndexedFile>| match f.map(|f| &f.entry) {
            Some(crate::index::Entry::Message(m)) => m.in_reply_to.clone(),
            _ => None,
        };
        let before = reply_to(self.roots.core(i).sessions.get(name)?.index().file(file));
        let after = reply_to(loaded.as_ref());
        let mut out = self
            .roots
            .core_mut(i)
            .apply_file(name, file, loaded, wall)?;
        if out
            .file
            .as_ref()
            .is_some_and(|f| *f != FileOutcome::Unchanged)
        {
            let mail = self
                .roots
                .core_mut(i)
                .mail
                .entry(name.to_string())
                .or_default();
            mail.note_reply(before.as_deref(), false);
            mail.note_reply(after.as_deref(), true);
            self.route_file(i, name, file, wall);
        }
        let touched = match out.file.take()? {
            FileOutcome::Unchanged => return None,
            FileOutcome::Removed => {
                self.log
                    .emit(i, Some(name), Some(path), EventKind::FileRemoved);
                (name.to_string(), true)
            }
            FileOutcome::Changed(event) => {
                self.log.emit(i, Some(name), Some(path), event);
                (name.to_string(), false)
            }
        };
        self.take_outcome(i, name, out, wall, touched.1);
        Some(touched)
    }

    /// The new session-status.md of a session, when it differs from the file.
    fn status_update(
        &self,
        i: RootId,
        name: &str,
        wall: DateTime<Utc>,
    ) -> Option<(PathBuf, String)> {
        let r = self.roots.core(i);
        let session = r.sessions.get(name)?;
        let view = session.head();
        let dir = r.session_dir(name);
        let path = dir.join(SESSION_STATUS_FILE);
        // The file as squadd last read or wrote it (a foreign edit is read
        // and indexed when its event arrives): no read here.
        let existing = match session.index().files.get(SESSION_STATUS_FILE) {
            // Not text (or unreadable): never overwritten.
            Some(f) => Some(f.text.as_deref()?),
            None if dir.is_dir() => None,
            None => return None,
        };
        let text = render_status(existing, &view, wall)?;
        (existing != Some(text.as_str())).then_some((path, text))
    }

    /// Writes the session-status.md of each named session that changed, as
    /// one batch of the writer.
    fn write_statuses(&mut self, i: RootId, names: &[String], wall: DateTime<Utc>) {
        self.write_statuses_locked(i, names, wall, None);
    }

    /// [`Self::write_statuses`], each under its session's lock (`held`: the
    /// lock of a session the caller already holds). Under the lock the file
    /// is re-read first, so an edit squadctl made without squadd (at its
    /// start-up) is the text the render starts from; a session whose lock is
    /// busy is written a moment later.
    fn write_statuses_locked(
        &mut self,
        i: RootId,
        names: &[String],
        wall: DateTime<Utc>,
        held: Option<(&str, std::fs::File)>,
    ) {
        let mut held = held;
        let mut locks = Vec::new();
        for name in names {
            if !self.roots.core(i).sessions.contains_key(name) {
                continue;
            }
            let mine = held.take_if(|(n, _)| *n == name.as_str());
            let lock = match mine {
                Some((_, f)) => edits::Locked::Held(f),
                None => {
                    let lock = self.lock_status(i, name);
                    if !matches!(lock, edits::Locked::Busy) {
                        self.reread_status(i, name);
                    }
                    lock
                }
            };
            match lock {
                edits::Locked::Held(f) => locks.push(f),
                edits::Locked::Busy => {
                    let timer = Timer::Status {
                        root: i,
                        session: name.clone(),
                    };
                    self.timers
                        .set_earlier(timer, Instant::now() + edits::STATUS_LOCK_RETRY);
                    continue;
                }
                edits::Locked::Unavailable => {}
            }
            // A status file found gone may be being replaced (`git
            // checkout` unlinks, then creates it): writing one now would
            // make that create fail. Written once it is back or surely gone.
            let status = self
                .roots
                .core(i)
                .session_dir(name)
                .join(SESSION_STATUS_FILE);
            if let Some(at) = self.intake.vanishing(&status) {
                let timer = Timer::Status {
                    root: i,
                    session: name.clone(),
                };
                self.timers.set_earlier(timer, at);
                continue;
            }
            if let Some((path, text)) = self.status_update(i, name, wall) {
                self.writer.stage(
                    path,
                    text.into_bytes(),
                    Tag {
                        root: i,
                        session: Some(name.clone()),
                        output: "session-status",
                    },
                );
            }
        }
        for writer::Committed {
            path,
            tag,
            bytes,
            result,
        } in self.writer.commit()
        {
            let name = tag.session.unwrap_or_default();
            let kind = match result {
                Ok(()) => {
                    // Index what we wrote, so its watch event is recognised as ours.
                    let entry = crate::index::index_bytes(&path, FileKind::SessionStatus, &bytes);
                    if let Some(out) = self.roots.core_mut(tag.root).apply_file(
                        &name,
                        SESSION_STATUS_FILE,
                        Some(entry),
                        wall,
                    ) {
                        self.take_outcome(tag.root, &name, out, wall, false);
                    }
                    EventKind::OutputWritten {
                        output: tag.output.into(),
                    }
                }
                Err(e) => EventKind::OutputFailed {
                    output: tag.output.into(),
                    error: e.to_string(),
                },
            };
            self.log.emit(tag.root, Some(&name), Some(&path), kind);
        }
        drop(locks);
    }

    /// Brings the shared context's fragments up to date and has the file
    /// assembled and written by the background writer (`now`: on this
    /// task, before returning, as at start-up and shutdown). The file is
    /// read again only when its (inode, size, mtime) is not what squadd's
    /// own last write left (see [`context`]).
    fn write_shared_context(&mut self, i: RootId, now: bool) {
        self.timers.cancel(&Timer::Context(i));
        if self.root_gone(i) {
            return;
        }
        let job = context::Job {
            path: self.roots.core(i).root.join(SHARED_CONTEXT),
            fragments: self.roots.core_mut(i).context_fragments(),
            tag: Tag {
                root: i,
                session: None,
                output: "shared-context",
            },
        };
        if let Some(done) = self.writer.write_context(job, now) {
            self.written_behind(done);
        }
    }

    /// A background write finished.
    fn written_behind(&mut self, (path, tag, result): writer::Done) {
        let kind = match result {
            Ok(()) => EventKind::OutputWritten {
                output: tag.output.into(),
            },
            Err(e) => EventKind::OutputFailed {
                output: tag.output.into(),
                error: e.to_string(),
            },
        };
        self.log
            .emit(tag.root, tag.session.as_deref(), Some(&path), kind);
    }

    /// Seeds a session's mailbox with one listing of its inboxes (start-up,
    /// a session that appeared, a rescan), watches each unread inbox, and
    /// offers everything its files ask to deliver (the backlog).
    fn seed_mail(&mut self, i: RootId, name: &str, wall: DateTime<Utc>) {
        let dir = self.roots.core(i).session_dir(name);
        let mut entries = Vec::new();
        let mut watch = Vec::new();
        if let Ok(agents) = std::fs::read_dir(dir.join("inbox")) {
            for a in agents.flatten() {
                if !a.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let agent = a.file_name().to_string_lossy().into_owned();
                for (sub, unread) in [("new", true), ("cur", false)] {
                    let Ok(files) = std::fs::read_dir(a.path().join(sub)) else {
                        continue;
                    };
                    if unread {
                        watch.push(a.path().join(sub));
                    }
                    for f in files.flatten() {
                        let at = unread
                            .then(|| f.metadata().and_then(|m| m.modified()).ok())
                            .flatten()
                            .map(DateTime::<Utc>::from);
                        let file = f.file_name().to_string_lossy().into_owned();
                        entries.push((agent.clone(), file, unread, at));
                    }
                }
            }
        }
        for path in watch {
            self.watch(i, &path);
        }
        let mut mail = routing::Mailbox::default();
        mail.seed(&self.roots.core(i).policy.messages, entries);
        let mut messages = Vec::new();
        let mut files = Vec::new();
        if let Some(core) = self.roots.core(i).sessions.get(name) {
            for (file, f) in core.index().files.iter() {
                if let crate::index::Entry::Message(m) = &f.entry {
                    mail.note_reply(m.in_reply_to.as_deref(), true);
                    messages.push(m.message_id.clone());
                }
                files.push(file.to_string());
            }
        }
        self.roots.core_mut(i).mail.insert(name.to_string(), mail);
        // What is past due (a backlog) is checked now, not after READY.
        self.run_escalations(i, name, Utc::now());
        for file in files {
            self.route_file(i, name, &file, wall);
        }
    }

    /// Offers what one file asks to deliver, and schedules its reply deadline.
    fn route_file(&mut self, i: RootId, name: &str, file: &str, wall: DateTime<Utc>) {
        let r = self.roots.core(i);
        let Some(core) = r.sessions.get(name) else {
            return;
        };
        let Some(f) = core.index().files.get(file) else {
            return;
        };
        // A reused message id is reported (duplicate-message-id), not
        // delivered: the recipient would take it for the first one.
        if core.reuses_message_id(file) {
            return;
        }
        let deliveries = routing::file_deliveries(&r.root, name, &core.index().dir, f);
        for d in deliveries {
            self.offer(i, d, wall);
        }
        let now = Now { wall };
        let effects = self::core::replies::asked(self.roots.core_mut(i), i, name, file, now);
        self.perform(effects, now);
    }

    /// Offers one delivery: into the outbox now, or a timer for later.
    fn offer(&mut self, i: RootId, d: routing::Delivery, wall: DateTime<Utc>) {
        let r = self.roots.core_mut(i);
        let busy = r.sessions.get(&d.session).is_some_and(|s| s.is_busy(&d.to));
        let session = d.session.clone();
        let slot = (d.to.clone(), d.name.clone());
        let mail = r.mail.entry(session.clone()).or_default();
        let timer = Timer::Delivery {
            root: i,
            session,
            to: slot.0,
            name: slot.1,
        };
        match mail.offer(&r.policy.messages, d, busy, wall) {
            routing::Offer::Now(d) => {
                self.timers.cancel(&timer);
                self.outbox.push((i, *d));
            }
            routing::Offer::Later(at) => self.timers.set_wall(timer, at, wall, Instant::now()),
            routing::Offer::Done => {}
        }
    }

    /// Offers a session's waiting deliveries again (a recipient may no
    /// longer be busy); only the few that wait are looked at.
    fn recheck_waiting(&mut self, i: RootId, name: &str, wall: DateTime<Utc>) {
        let waiting: Vec<routing::Delivery> = self
            .roots
            .core(i)
            .mail
            .get(name)
            .map(|m| m.waiting.values().cloned().collect())
            .unwrap_or_default();
        for d in waiting {
            self.offer(i, d, wall);
        }
    }

    /// A message became unread with an escalation time `at`: the session's
    /// escalation timer fires no later than that (a time already past is
    /// checked now: a backlog is not left until READY).
    fn escalation_queued(&mut self, i: RootId, name: &str, at: DateTime<Utc>) {
        let now = Utc::now();
        if at <= now {
            self.run_escalations(i, name, now);
            return;
        }
        let timer = Timer::Escalation {
            root: i,
            session: name.to_string(),
        };
        self.timers
            .set_earlier(timer, timers::instant_at(at, now, Instant::now()));
    }

    /// Makes the deliveries in the outbox, critical first, then by age.
    fn flush_outbox(&mut self, wall: DateTime<Utc>) {
        let mut outbox = std::mem::take(&mut self.outbox);
        self::core::batch::outbox_order(&mut outbox);
        for (i, d) in outbox {
            self.deliver(i, d, wall);
        }
    }

    fn deliver(&mut self, i: RootId, d: routing::Delivery, wall: DateTime<Utc>) {
        let dir = self.roots.core(i).session_dir(&d.session);
        // Never recreate a session that is going away.
        if !self.roots.core(i).sessions.contains_key(&d.session) {
            return;
        }
        let (bytes, routed_from) = match &d.body {
            routing::Body::File(path) => match read_regular(path, MAX_FILE_BYTES) {
                Ok(b) => (b, None),
                // Out of descriptors: the machine's fault, tried again.
                Err(squad_protocol::fsx::ReadError::Io(e))
                    if squad_protocol::fsx::is_transient_io(&e) =>
                {
                    self.retry_delivery(i, d);
                    return;
                }
                // Vanished or changed into something unreadable: its own
                // event will bring it back if it returns.
                Err(_) => return,
            },
            routing::Body::Routed { routed, rel, .. } => match routed.render(rel) {
                Some(text) => (text.into_bytes(), Some(rel.clone())),
                None => return,
            },
        };
        let new_dir = crate::inbox::inbox_dir(&dir, &d.to).join("new");
        let path = new_dir.join(&d.name);
        // Journalled before the delivery, so no delivered message loses its
        // hook to a crash (at least once; started only if fresh).
        let hook = self.hooks.intend(
            &self.roots.core(i).policy.messages,
            &self.roots.core(i).policy.hooks,
            Notice {
                root: i,
                session: &d.session,
                from: &d.from,
                to: &d.to,
                message_id: &d.message_id,
                priority: d.priority,
                path: &path,
            },
        );
        let result = self.writer.deliver(&dir, &d.to, &d.name, &bytes);
        match result {
            Ok(fresh) => {
                let r = self.roots.core_mut(i);
                let policy = &r.policy.messages;
                let mail = r.mail.entry(d.session.clone()).or_default();
                if let Some(at) = mail.delivered(policy, &d, wall) {
                    self.escalation_queued(i, &d.session, at);
                }
                self.watch(i, &new_dir);
                if !fresh {
                    self.hooks.cancel(hook);
                    return;
                }
                let late = routing::late(&self.roots.core(i).policy.messages, &d, wall);
                self.log.emit(
                    i,
                    Some(&d.session),
                    Some(&path),
                    EventKind::MessageDelivered {
                        to: d.to.clone(),
                        message_id: d.message_id.clone(),
                        priority: d.priority.to_string(),
                        late,
                        routed_from,
                    },
                );
                self.hooks.start(hook);
            }
            // Out of descriptors (EMFILE) and the like pass: a delivery
            // failing so is tried again, never dropped (and not audited at
            // every retry).
            Err(e) if squad_protocol::fsx::is_transient_io(&e) => {
                self.hooks.cancel(hook);
                tracing::warn!(session = %d.session, to = %d.to, error = %e, "delivery failed; retrying");
                self.retry_delivery(i, d);
            }
            Err(e) => {
                self.hooks.cancel(hook);
                self.log.emit(
                    i,
                    Some(&d.session),
                    None,
                    EventKind::OutputFailed {
                        output: format!("inbox of {}", d.to),
                        error: e.to_string(),
                    },
                );
            }
        }
    }

    /// Parks a delivery that failed for a passing reason (out of file
    /// descriptors) as waiting, offered again a moment later.
    fn retry_delivery(&mut self, i: RootId, d: routing::Delivery) {
        let slot = (d.to.clone(), d.name.clone());
        let timer = Timer::Delivery {
            root: i,
            session: d.session.clone(),
            to: slot.0.clone(),
            name: slot.1.clone(),
        };
        self.roots
            .core_mut(i)
            .mail
            .entry(d.session.clone())
            .or_default()
            .waiting
            .insert(slot, d);
        self.timers
            .set(timer, Instant::now() + Duration::from_millis(250));
    }

    /// Escalates the unread messages of a session whose escalation time
    /// passed (one `stat` each says whether it is still unread), then arms
    /// the session's escalation timer at the next one. Only the due ones
    /// are looked at.
    fn run_escalations(&mut self, i: RootId, session: &str, wall: DateTime<Utc>) {
        let timer = Timer::Escalation {
            root: i,
            session: session.to_string(),
        };
        let dir = self.roots.core(i).session_dir(session);
        let r = self.roots.core_mut(i);
        let Some(mail) = r.mail.get_mut(session) else {
            self.timers.cancel(&timer);
            return;
        };
        let policy = &r.policy.messages;
        let due = mail.take_due_escalations(policy, wall);
        let mut escalated = Vec::new();
        for d in due {
            if r.state
                .escalated
                .get(session)
                .is_some_and(|e| e.contains(&d.message_id))
            {
                continue;
            }
            let path = crate::inbox::inbox_dir(&dir, &d.to)
                .join("new")
                .join(&*d.name);
            if std::fs::symlink_metadata(&path).is_err() {
                mail.seen(policy, &d.to, &d.name, None);
                continue;
            }
            r.state
                .escalated
                .entry(session.to_string())
                .or_default()
                .insert(d.message_id.clone());
            escalated.push((d, path));
        }
        match mail.next_escalation(policy) {
            Some(at) => self.timers.set_wall(timer, at, wall, Instant::now()),
            None => self.timers.cancel(&timer),
        }
        if escalated.is_empty() {
            return;
        }
        for (d, path) in &escalated {
            self.log.emit(
                i,
                Some(session),
                Some(path),
                EventKind::MessageEscalated {
                    to: d.to.clone(),
                    message_id: d.message_id.clone(),
                    priority: d.priority.to_string(),
                },
            );
            self.hooks.notify(
                &self.roots.core(i).policy.messages,
                &self.roots.core(i).policy.hooks,
                Notice {
                    root: i,
                    session,
                    from: "squadd",
                    to: &d.to,
                    message_id: &d.message_id,
                    priority: d.priority,
                    path,
                },
            );
        }
        // Once for the batch: a burst escalating together is one write.
        self.save_state(i);
    }

    /// An entry of an unread inbox appeared or went (acknowledged): one
    /// `stat`, and the unread counters follow.
    fn inbox_changed(
        &mut self,
        i: RootId,
        session: &str,
        agent: String,
        file: String,
        path: &Path,
    ) {
        let present = std::fs::symlink_metadata(path).ok().map(|m| {
            m.modified()
                .map(DateTime::<Utc>::from)
                .unwrap_or_else(|_| Utc::now())
        });
        let r = self.roots.core_mut(i);
        let Some(mail) = r.mail.get_mut(session) else {
            return;
        };
        // Gone from `new/`: it leaves the escalation queue here; the
        // session's timer, if armed for it, finds nothing due and re-arms.
        if let Some(at) = mail.seen(&r.policy.messages, &agent, &file, present) {
            self.escalation_queued(i, session, at);
        }
    }
}
