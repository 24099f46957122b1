//! `squadd`: watch → read → parse → validate → index → derive → act → audit.
//!
//! The daemon is split along the state each part owns:
//!
//! - [`intake`]: the watches and the paths waiting to be read, and what a
//!   changed path means;
//! - [`core`]: what squadd knows about each root's sessions and the decisions
//!   made from it, free of I/O: given what the world said and the time, it
//!   returns [`core::Effect`]s in order, which [`shell`] carries out;
//!   [`routing`] decides message deliveries and escalations from it;
//! - [`roots`]: every root in one slot named by a [`core::RootId`] (its core
//!   and its shell: pid lock, socket, runs);
//! - [`timers`]: one queue for everything that happens at a time; its head is
//!   the next wake-up;
//! - [`writer`]: every file squadd writes (atomic, coalesced per path);
//! - [`answers`]: control-socket answers (transport in [`server`]);
//! - [`upkeep`]: upkeep's I/O (the lock table, retention, team memory;
//!   when and what is [`core::upkeep`]'s and [`core::outputs`]'s);
//! - [`hooks`]: notification commands, on their own tasks;
//! - [`apply`], [`scan`]: reading paths, sessions and roots, each read
//!   handed to the core as an input ([`core::files`], [`core::scan`]);
//! - [`writes`], [`leader`]: squadd's own outputs and the cluster's lease,
//!   the I/O only (the decisions are [`core::outputs`], [`core::wrapup`]);
//! - [`presence`]: the shell's part that still decides as it does I/O
//!   (issue 22 moves it into the core);
//! - this module: the wiring. One task owns all state (the [`EventLoop`]);
//!   the watcher, the hooks and the control connections send it messages.
//!   A root opened, a hook's outcome, a batch's due timers and shutdown are
//!   handed to the core ([`core::upkeep`]), which decides what follows.
//!   Nothing polls: the task sleeps until a file event, a request or the head
//!   of the timer queue.

pub(crate) mod answers;
mod apply;
pub(crate) mod context;
pub(crate) mod core;
pub(crate) mod edits;
pub(crate) mod eventlog;
pub(crate) mod health;
pub(crate) mod hooks;
pub(crate) mod intake;
mod leader;
pub mod logging;
mod mail;
pub(crate) mod notices;
mod notifier;
pub(crate) mod pidfile;
mod presence;
mod processes;
pub(crate) mod roots;
pub(crate) mod routing;
pub(crate) mod runs;
mod scan;
pub(crate) mod server;
pub(crate) mod session;
pub(crate) mod shell;
pub(crate) mod systemd;
pub(crate) mod timers;
pub(crate) mod upkeep;
pub(crate) mod writer;
mod writes;

use self::core::batch::{Batch, Fired};
use self::core::{Now, Root};
use self::roots::{RootId, Roots, Shell};
use crate::control::socket_path;
use crate::index::{load_file, scan_root, scan_session};
use crate::layout::create_layout;
use crate::state::State;
use chrono::{DateTime, Utc};
use eventlog::EventLog;
use hooks::{Hooks, Notice};
use intake::{Intake, Noted};
use squad_protocol::FileKind;
use squad_protocol::fsx::read_regular;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR, default_threads};
use squad_protocol::validate::MAX_FILE_BYTES;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use timers::{Timer, Timers};
use tokio::sync::mpsc;
use writer::{Tag, Writer};

/// The pause between two batches of notices of a backlog (see
/// [`EventLoop::next_wake`]).
const NOTICE_PAUSE: Duration = Duration::from_millis(1);

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

/// The shell's event loop: it owns every root (its core and its shell),
/// the intake, the timers, the writer and the event log; it turns what the
/// OS says into core inputs and carries out the effects the cores return.
pub struct EventLoop {
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
    /// Fresh deliveries of the outbox being flushed, written but not yet
    /// durable (see `mail.rs`).
    unsynced: Vec<mail::Made>,
    /// Where the replication tasks send their events (docs/cluster.md).
    replica_reports: mpsc::UnboundedSender<crate::cluster::replicate::Report>,
    /// Where the roots' cluster tasks say this host became or stopped
    /// being the leader (docs/cluster.md).
    leader_news: mpsc::UnboundedSender<(RootId, crate::cluster::leader::News)>,
    /// The loop's wake-ups by cause (`health --json`).
    turns: health::Turns,
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(options: Options) -> Result<(), StartError> {
    limit_malloc_arenas();
    crate::child_env::mark_daemon();
    let (intake, mut fs_rx) = Intake::start()?;
    if let Some(why) = intake.polling() {
        tracing::warn!("{why}");
    }

    // Handlers first: a SIGTERM that arrives while starting (or right after
    // READY) must stop the daemon cleanly, not kill it.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;

    let (hooks, mut hook_rx) = Hooks::new();
    let (calls, mut call_rx) = mpsc::channel::<server::Call>(64);
    let (replica_reports, mut replica_rx) = mpsc::unbounded_channel();
    let (leader_news, mut leader_rx) = mpsc::unbounded_channel();
    let mut sup = EventLoop {
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
        unsynced: Vec::new(),
        replica_reports,
        leader_news,
        turns: health::Turns::default(),
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
    sup.sync_leadership(now);
    for i in sup.roots.ids() {
        sup.initial_scan(i, now);
        sup.adopt_runs(i, now);
        sup.list_presence(i);
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
        // Let the control socket's tasks run every turn. On this
        // single-threaded runtime they run only while this loop waits, and
        // with file events always ready (an agent writing 1,000 times a
        // second) it waited only when tokio's budget ran out, every 128
        // turns: a session edit was answered 8-10 s late (issue 22's flaky
        // session_edit race). Only when something is ready already: with
        // nothing ready the select below waits, which lets them run, and a
        // yield then was a trip through the runtime (two polls of epoll and
        // a wake-up of this task) for every turn of every change.
        let ready = !fs_rx.is_empty()
            || !call_rx.is_empty()
            || !hook_rx.is_empty()
            || !behind_rx.is_empty()
            || !replica_rx.is_empty()
            || !leader_rx.is_empty()
            || sup.next_wake().is_some_and(|at| at <= Instant::now());
        if ready {
            sup.turns.yields += 1;
            tokio::task::yield_now().await;
        }
        let wake = sup.next_wake();
        let woken = tokio::select! {
            biased;
            _ = sigterm.recv() => break "SIGTERM",
            _ = sigint.recv() => break "SIGINT",
            // Before file events: a steady stream of agent writes must not
            // starve a control request (a session edit waits on its answer).
            Some(call) = call_rx.recv() => {
                sup.turns.count(health::Woken::Call);
                let reply = answers::answer(&mut sup, call.root, call.method);
                let _ = call.reply.send(reply);
                health::Woken::Call
            }
            Some(res) = fs_rx.recv() => {
                sup.note(res);
                while let Ok(res) = fs_rx.try_recv() {
                    sup.note(res);
                }
                health::Woken::FileEvent
            }
            Some(o) = hook_rx.recv() => {
                let input = self::core::Input::HookDone {
                    session: o.session,
                    to: o.to,
                    message_id: o.message_id,
                    error: o.error,
                };
                sup.step(o.root, input, Now { wall: Utc::now() });
                health::Woken::Other
            }
            Some(()) = behind_rx.recv() => {
                sup.report_written_behind();
                health::Woken::WrittenBehind
            }
            Some(r) = replica_rx.recv() => {
                sup.replica_report(r);
                health::Woken::Other
            }
            Some((i, news)) = leader_rx.recv() => {
                sup.leader_news(i, news);
                health::Woken::Other
            }
            _ = sleep_until(wake) => health::Woken::Due,
        };
        // A call is counted before it is answered (`health` sees itself).
        if woken != health::Woken::Call {
            sup.turns.count(woken);
        }
        sup.flush(Instant::now(), Utc::now());
        // Back to the runtime after each batch happens at the top of the
        // loop: it reads signals and accepts control connections only when
        // this task is pending, and under a stream of file events (a burst,
        // a backlog of notices whose own writes are events too) a branch
        // above is always ready.
    };

    tracing::info!(reason, "stopping");
    systemd::stopping();
    sup.writer.finish_behind();
    while behind_rx.try_recv().is_ok() {}
    sup.report_written_behind();
    for i in sup.roots.ids() {
        // What is owed is the core's (core/upkeep.rs::shutdown).
        let path = socket_path(&sup.roots.core(i).root);
        let socket_ours = sup
            .roots
            .shell(i)
            .socket
            .as_ref()
            .is_some_and(|b| b.is_at(&path));
        let input = self::core::Input::Shutdown {
            reason: reason.to_string(),
            armed: sup.timers.of_root(i),
            socket_ours,
        };
        sup.step(i, input, Now { wall: Utc::now() });
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

/// At most two malloc arenas (the main one and one for every other
/// thread). glibc gives each thread that allocates an arena of its own, up
/// to eight per core: the start-up scan's workers, the writer and the
/// watcher left eleven at READY, each with free space resident and the
/// index's entries spread over them; two hold the same ~0.8 MB less
/// (docs/performance.md, "After (rss …)"). Called before any thread starts.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; no thread of ours
    // allocates concurrently yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl EventLoop {
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
        for note in crate::team::recover_interrupted_import(&root) {
            tracing::warn!(root = %root.display(), "{note}");
        }
        create_layout(&root).map_err(|e| fail(format!("cannot create .squad/: {e}")))?;
        let lock = pidfile::acquire(
            &root,
            &Path::new(SQUAD_DIR).join(RUN_DIR).join("squadd.pid"),
        )?;
        let policy = crate::locks::load_policy(&root);
        self.writer.add_root(&root);
        let config = runs::initial_config(&root);
        if let Err(error) = &policy {
            tracing::error!(root = %root.display(), %error, "policy refused; running on the defaults");
        }
        let state = State::load(&root);
        // A refused policy runs on the defaults, which have no `cluster:`.
        let policy_cluster = policy.as_ref().ok().and_then(|p| p.cluster.clone());
        let root_path = root.clone();
        // What the policy as read means (in force, or refused: the
        // defaults, said, retention held; the leader gate) is the core's,
        // stepped below (core/upkeep.rs::opened).
        let defaults = squad_policies::Policy::defaults();
        let mut r = Root::new(root, state, defaults, Utc::now());
        r.runs.config = config;
        let shell = Shell {
            pid_lock: Some(lock),
            socket: None,
            procs: Box::new(crate::runners::OsProcesses::new(&root_path)),
            run_reply: None,
            // Started once the root has its id (below).
            cluster: None,
            // Replication call site: protocol files and message delivery
            // across checkouts (docs/cluster.md).
            replica: policy_cluster.as_ref().map(|c| {
                crate::cluster::replicate::start(
                    &root_path,
                    c.clone(),
                    self.replica_reports.clone(),
                )
            }),
            retire: None,
            // The leader's shared context to every checkout (cluster/context.rs).
            context: policy_cluster.as_ref().map(|c| {
                crate::cluster::context::start(&root_path, c.clone(), self.replica_reports.clone())
            }),
            skills: crate::skills::SkillCache::default(),
        };
        self.intake.follow_root(&r.root, &r.sessions_dir);
        let i = self.roots.add(r, shell);
        // issue 44: `notify:` on its own threads, off squadd's loop.
        notifier::start(root_path.clone());
        // Cluster call site: the task holds the NATS connection, renews this
        // checkout's cluster locks and the leader lease (docs/cluster.md).
        if let Some(c) = policy_cluster {
            let tx = self.leader_news.clone();
            let news = Box::new(move |n| {
                let _ = tx.send((i, n));
            });
            let applied = self.roots.shell(i).replica.as_ref().map(|r| r.applied());
            let to_loop = server::forwarded_edits(i, self.calls.clone());
            let handle =
                crate::cluster::daemon::start(&root_path, c.clone(), news, applied, to_loop);
            // Arriving leader's outputs are checked against this lease.
            if let Some(r) = self.roots.shell(i).replica.as_ref() {
                r.follow_leader(handle.leadership());
            }
            // Removals across hosts: the leader's retention published, the
            // others' applied (docs/cluster.md, "Retention across hosts").
            self.roots.shell_mut(i).retire = Some(crate::cluster::retire::start(
                &root_path,
                c,
                handle.leadership(),
                self.replica_reports.clone(),
                upkeep::carry_out_removal,
            ));
            self.roots.shell_mut(i).cluster = Some(handle);
        }
        self.log.add_root(i, &self.roots.core(i).root);
        let input = self::core::Input::RootOpened(policy.map(Box::new));
        self.step(i, input, Now { wall: Utc::now() });
        Ok(())
    }

    /// An event of a replication task, into the log of its root.
    fn replica_report(&mut self, r: crate::cluster::replicate::Report) {
        if let Some(i) = self.roots.of(&r.root) {
            // The shared context's events name no session.
            let session = (!r.session.is_empty()).then_some(r.session.as_str());
            self.log.emit(i, session, Some(&r.path), r.kind);
        }
    }

    fn root_of(&self, path: &Path) -> Option<RootId> {
        self.roots.of(path)
    }

    /// The next moment something is due: a settling file or the head of the
    /// timer queue.
    fn next_wake(&self) -> Option<Instant> {
        // Standing facts beyond one batch of notices (a start-up with many
        // overdue tasks): the next batch a moment later. Not at once: a
        // wake-up already due never lets the runtime park, and only when it
        // parks does it look at signals and the control sockets.
        let notices = self
            .notices_pending()
            .then(|| Instant::now() + NOTICE_PAUSE);
        [self.intake.next_due(), self.timers.next(), notices]
            .into_iter()
            .flatten()
            .min()
    }

    /// Processes everything due: rescans, settled paths, timers.
    fn flush(&mut self, now: Instant, wall: DateTime<Utc>) {
        // The lease as it is now: a leader frozen past its lease and woken
        // writes nothing of this batch.
        self.sync_leadership(wall);
        // The batch's stages and their order are the core's (core::batch).
        let mut batch = Batch::new(self.timers.pop_due(now));
        let rescanned = batch.rescans();
        for &i in &rescanned {
            for name in self.rescan(i) {
                batch.touched(i, name, false);
            }
        }
        let paths = self.intake.take_due(now);
        // The trim after a burst, the STATUS= line after work.
        self.perform(batch.timers(paths.len(), self.notify_socket), Now { wall });
        for path in paths {
            let Some(i) = self.root_of(&path) else {
                continue;
            };
            if let Some((name, removal)) = self.apply_path(i, &path) {
                batch.touched(i, name, removal);
            }
        }
        // Tasks whose deadline passed re-derive without a file change.
        for (i, input) in batch.tasks_due() {
            for (name, _) in self.step(i, input, Now { wall }) {
                batch.touched(i, name, false);
            }
        }
        let now = Now { wall };
        let roots = &self.roots;
        let effects = batch.settle(|id, name| roots.core(id).sessions.contains_key(name));
        self.perform(effects, now);
        // A root read again from scratch (events lost): its presence
        // records too, once its sessions are loaded again.
        for i in rescanned {
            self.list_presence(i);
        }
        for fired in batch.fire(now) {
            match fired {
                Fired::Root(i, input) => {
                    self.step(i, *input, now);
                }
                Fired::Daemon(effects) => {
                    self.perform(effects, now);
                }
            }
        }
        // Off the status path: the status files of the batch are written
        // by now.
        self.perform(Batch::tail(), now);
    }
}
