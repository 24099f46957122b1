//! Notification hooks: the per-agent argv commands of the message policy,
//! run on their own tasks (with timeout and retries) so a slow or failing
//! hook never delays anything else. Outcomes come back on a channel.
//!
//! Bounded: at most `hooks.max_concurrent` commands of a project run at
//! once; the rest wait in a queue that starts critical messages first (see
//! [`squad_policies::hooks::start_order`]), so a burst of 2,000 messages
//! never starts 2,000 processes.
//!
//! At least once: each command is journalled in the project's
//! `.squad/run/hooks.jsonl` (a `pending` line before the delivery it is for,
//! a `done` line when it finished, whether it succeeded or failed after its
//! retries, or when the delivery was not new).
//! On start, [`Hooks::resume`] queues again every command pending without
//! a `done` line (squadd stopped, even by SIGTERM or kill -9, while it
//! waited or ran), then rewrites the journal atomically to just those. A
//! command may therefore run twice (stopped after it ran, before its `done`
//! line), never zero times once its `pending` line is written.

use super::core::RootId;
use crate::safefs::Dir;
use serde::{Deserialize, Serialize};
use squad_policies::hooks::{HooksPolicy, start_order};
use squad_policies::messages::{MessagePolicy, NotifyCommand};
use squad_protocol::model::Priority;
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The journal of notify commands in a project's `.squad/run/`.
pub(crate) const JOURNAL_FILE: &str = "hooks.jsonl";

/// The largest journal read back on start (a line is about 300 bytes).
const JOURNAL_LIMIT: u64 = 256 << 20;

/// A journal with this many lines and nothing in flight is emptied.
const COMPACT_AFTER_LINES: usize = 10_000;

/// The outcome of a notify command, reported back to the supervisor task.
pub(crate) struct HookOutcome {
    /// Root index.
    pub root: RootId,
    /// Session directory name.
    pub session: String,
    /// Recipient.
    pub to: String,
    /// Message id.
    pub message_id: String,
    /// Why it failed after all retries, if it did.
    pub error: Option<String>,
}

/// What a hook is told about the message.
pub(crate) struct Notice<'a> {
    /// Root index.
    pub root: RootId,
    /// Session directory name.
    pub session: &'a str,
    /// Sender (`squadd` for escalations and routed reports).
    pub from: &'a str,
    /// Recipient.
    pub to: &'a str,
    /// Message id.
    pub message_id: &'a str,
    /// Priority.
    pub priority: Priority,
    /// The delivered inbox file.
    pub path: &'a Path,
}

/// One journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Line {
    Pending {
        id: String,
        session: String,
        from: String,
        to: String,
        message_id: String,
        priority: Priority,
        path: String,
    },
    Done {
        id: String,
    },
}

/// A project's journal, open for appending (never through a link).
struct Journal {
    run: Dir,
    file: File,
    lines: usize,
    /// Pending lines without their done line yet: only a journal with none
    /// is compacted (so a pending line written just before a delivery is
    /// never dropped).
    open: usize,
}

impl Journal {
    fn open(root: &Path) -> std::io::Result<Journal> {
        let run = Dir::open_root(root)?.walk(&Path::new(SQUAD_DIR).join(RUN_DIR), Some(0o700))?;
        let file = run.open_file(
            JOURNAL_FILE,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
            0o600,
        )?;
        Ok(Journal {
            run,
            file,
            lines: 0,
            open: 0,
        })
    }

    /// Appends one line in one write (a kill leaves it whole or absent).
    fn append(&mut self, line: &Line) {
        let Ok(mut bytes) = serde_json::to_vec(line) else {
            return;
        };
        bytes.push(b'\n');
        if let Err(e) = self.file.write_all(&bytes) {
            tracing::warn!(error = %e, "cannot write the hook journal");
        }
        self.lines += 1;
        match line {
            Line::Pending { .. } => self.open += 1,
            Line::Done { .. } => self.open = self.open.saturating_sub(1),
        }
    }

    /// Replaces the journal by `lines` (atomically) and reopens it.
    fn rewrite(&mut self, lines: &[Line]) -> std::io::Result<()> {
        let mut text = Vec::new();
        for l in lines {
            text.extend(serde_json::to_vec(l).map_err(std::io::Error::other)?);
            text.push(b'\n');
        }
        self.run.write_atomic(JOURNAL_FILE, &text, 0o600)?;
        self.file = self.run.open_file(
            JOURNAL_FILE,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
            0o600,
        )?;
        self.lines = lines.len();
        self.open = lines.len();
        Ok(())
    }
}

type Journals = Arc<Mutex<HashMap<RootId, Journal>>>;

pub(crate) use crate::status::HooksReport;

/// Failures per minute over the last hour: 60 buckets, so the count stays
/// bounded however many hooks fail.
#[derive(Debug, Clone)]
struct FailureWindow {
    /// (minute since the dispatcher started, failures in it).
    buckets: [(u64, u64); 60],
}

impl Default for FailureWindow {
    fn default() -> FailureWindow {
        FailureWindow {
            buckets: [(0, 0); 60],
        }
    }
}

impl FailureWindow {
    /// Counts a failure in `minute`.
    fn add(&mut self, minute: u64) {
        let b = &mut self.buckets[(minute % 60) as usize];
        if b.0 != minute || b.1 == 0 {
            *b = (minute, 0);
        }
        b.1 += 1;
    }

    /// Failures in the 60 minutes up to `minute` (itself included).
    fn last_hour(&self, minute: u64) -> u64 {
        self.buckets
            .iter()
            .filter(|(m, _)| *m <= minute && minute - *m < 60)
            .map(|(_, n)| n)
            .sum()
    }
}

/// What the dispatcher tells of one project's queue.
#[derive(Debug, Default)]
struct Tally {
    queued: usize,
    running: usize,
    oldest_queued: Option<Instant>,
    succeeded: u64,
    failed: u64,
    consecutive_failures: u64,
    last_error: Option<String>,
    window: FailureWindow,
}

/// Each project's tally (the dispatcher writes it, `status`/`health` read
/// it), and the instant failure minutes count from.
struct Tallies {
    epoch: Instant,
    roots: Mutex<HashMap<RootId, Tally>>,
}

impl Tallies {
    fn minute(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_secs() / 60
    }
}

/// A queued notify command.
struct Job {
    id: String,
    root: RootId,
    priority: Priority,
    limit: usize,
    cmd: NotifyCommand,
    path: String,
    env: Vec<(&'static str, String)>,
    outcome: HookOutcome,
}

enum Cmd {
    Queue(Box<Job>),
    Finished { root: RootId, error: Option<String> },
}

/// Starts hooks and collects their outcomes.
pub(crate) struct Hooks {
    tx: mpsc::UnboundedSender<Cmd>,
    journals: Journals,
    tallies: Arc<Tallies>,
    cores: usize,
    /// Ids unique across restarts: the start time, then a counter.
    run_id: String,
    seq: u64,
}

impl Hooks {
    /// The hook runner and the channel of outcomes. Call inside the runtime.
    pub(crate) fn new() -> (Hooks, mpsc::UnboundedReceiver<HookOutcome>) {
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (tx, rx) = mpsc::unbounded_channel();
        let journals: Journals = Arc::default();
        let tallies = Arc::new(Tallies {
            epoch: Instant::now(),
            roots: Mutex::default(),
        });
        tokio::spawn(dispatch(
            rx,
            tx.clone(),
            out_tx,
            journals.clone(),
            tallies.clone(),
        ));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let run_id = chrono::Utc::now()
            .timestamp_nanos_opt()
            .unwrap_or_default()
            .to_string();
        (
            Hooks {
                tx,
                journals,
                tallies,
                cores,
                run_id,
                seq: 0,
            },
            out_rx,
        )
    }

    /// How root `root`'s notify commands stand now.
    pub(crate) fn report(
        &self,
        root: RootId,
        policy: &MessagePolicy,
        hooks: &HooksPolicy,
    ) -> HooksReport {
        let now = Instant::now();
        let minute = self.tallies.minute(now);
        let mut r = HooksReport {
            configured: !policy.notify.is_empty(),
            max_concurrent: hooks.limit(self.cores),
            ..HooksReport::default()
        };
        if let Ok(roots) = self.tallies.roots.lock()
            && let Some(t) = roots.get(&root)
        {
            r.queued = t.queued;
            r.running = t.running;
            r.oldest_queued_secs = t
                .oldest_queued
                .map(|at| now.saturating_duration_since(at).as_secs());
            r.succeeded = t.succeeded;
            r.failed = t.failed;
            r.failed_last_hour = t.window.last_hour(minute);
            r.consecutive_failures = t.consecutive_failures;
            r.last_error = t.last_error.clone();
        }
        r
    }

    fn command(policy: &MessagePolicy, to: &str) -> Option<NotifyCommand> {
        policy
            .notify
            .get(to)
            .or_else(|| policy.notify.get("*"))
            .cloned()
    }

    /// Opens a project's journal and queues again the commands a previous
    /// squadd left pending (for recipients the policy still has a command
    /// for). Returns how many.
    pub(crate) fn resume(
        &mut self,
        root: RootId,
        path: &Path,
        policy: &MessagePolicy,
        hooks: &HooksPolicy,
    ) -> usize {
        let mut journal = match Journal::open(path) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!(error = %e, root = %path.display(), "cannot open the hook journal; hooks run without it (at most once)");
                return 0;
            }
        };
        let text = journal
            .run
            .read(JOURNAL_FILE, JOURNAL_LIMIT)
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read the hook journal");
                Vec::new()
            });
        // Pending in journal order; a torn or foreign line is skipped.
        let mut pending: BTreeMap<usize, Line> = BTreeMap::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for (n, raw) in text.split(|b| *b == b'\n').enumerate() {
            match serde_json::from_slice::<Line>(raw) {
                Ok(l @ Line::Pending { .. }) => {
                    if let Line::Pending { id, .. } = &l {
                        at.insert(id.clone(), n);
                    }
                    pending.insert(n, l);
                }
                Ok(Line::Done { id }) => {
                    if let Some(n) = at.remove(&id) {
                        pending.remove(&n);
                    }
                }
                Err(_) => {}
            }
        }
        let keep: Vec<Line> = pending
            .into_values()
            .filter(
                |l| matches!(l, Line::Pending { to, .. } if Self::command(policy, to).is_some()),
            )
            .collect();
        if let Err(e) = journal.rewrite(&keep) {
            tracing::warn!(error = %e, "cannot rewrite the hook journal");
        }
        if let Ok(mut j) = self.journals.lock() {
            j.insert(root, journal);
        }
        let resumed = keep.len();
        for l in keep {
            if let Line::Pending {
                id,
                session,
                from,
                to,
                message_id,
                priority,
                path,
            } = l
            {
                self.queue(
                    policy,
                    hooks,
                    id,
                    Notice {
                        root,
                        session: &session,
                        from: &from,
                        to: &to,
                        message_id: &message_id,
                        priority,
                        path: Path::new(&path),
                    },
                    false,
                );
            }
        }
        if resumed > 0 {
            tracing::info!(
                resumed,
                "notify commands left pending by the previous run queued again"
            );
        }
        resumed
    }

    /// Runs the recipient's notify command, if the policy names one (policy
    /// only: never a command an agent wrote): journalled, then queued.
    pub(crate) fn notify(&mut self, policy: &MessagePolicy, hooks: &HooksPolicy, n: Notice<'_>) {
        let hook = self.intend(policy, hooks, n);
        self.start(hook);
    }

    /// Journals the recipient's notify command as pending (before the
    /// delivery it is for, so a crash in between cannot lose it); then
    /// [`Hooks::start`] it once delivered, or [`Hooks::cancel`] it.
    pub(crate) fn intend(
        &mut self,
        policy: &MessagePolicy,
        hooks: &HooksPolicy,
        n: Notice<'_>,
    ) -> Hook {
        self.seq += 1;
        let id = format!("{}-{}", self.run_id, self.seq);
        self.job(policy, hooks, id, n, true)
    }

    /// Queues a journalled command.
    pub(crate) fn start(&self, hook: Hook) {
        if let Some(job) = hook.0 {
            let _ = self.tx.send(Cmd::Queue(job));
        }
    }

    /// Drops a journalled command (its message was not freshly delivered).
    pub(crate) fn cancel(&self, hook: Hook) {
        if let Some(job) = hook.0 {
            self.done(job.root, job.id);
        }
    }

    fn done(&self, root: RootId, id: String) {
        if let Some(j) = self
            .journals
            .lock()
            .ok()
            .as_mut()
            .and_then(|j| j.get_mut(&root))
        {
            j.append(&Line::Done { id });
        }
    }

    fn queue(
        &mut self,
        policy: &MessagePolicy,
        hooks: &HooksPolicy,
        id: String,
        n: Notice<'_>,
        journal: bool,
    ) {
        let hook = self.job(policy, hooks, id, n, journal);
        self.start(hook);
    }

    fn job(
        &mut self,
        policy: &MessagePolicy,
        hooks: &HooksPolicy,
        id: String,
        n: Notice<'_>,
        journal: bool,
    ) -> Hook {
        let Some(cmd) = Self::command(policy, n.to) else {
            return Hook(None);
        };
        let path = n.path.display().to_string();
        if journal
            && let Some(j) = self
                .journals
                .lock()
                .ok()
                .as_mut()
                .and_then(|j| j.get_mut(&n.root))
        {
            j.append(&Line::Pending {
                id: id.clone(),
                session: n.session.to_string(),
                from: n.from.to_string(),
                to: n.to.to_string(),
                message_id: n.message_id.to_string(),
                priority: n.priority,
                path: path.clone(),
            });
        }
        let env = vec![
            ("SQUAD_MESSAGE_PATH", path.clone()),
            ("SQUAD_PRIORITY", n.priority.to_string()),
            ("SQUAD_FROM", n.from.to_string()),
            ("SQUAD_TO", n.to.to_string()),
            ("SQUAD_SESSION", n.session.to_string()),
        ];
        Hook(Some(Box::new(Job {
            id,
            root: n.root,
            priority: n.priority,
            limit: hooks.limit(self.cores),
            cmd,
            path,
            env,
            outcome: HookOutcome {
                root: n.root,
                session: n.session.to_string(),
                to: n.to.to_string(),
                message_id: n.message_id.to_string(),
                error: None,
            },
        })))
    }
}

/// A notify command journalled as pending, not started yet (`None`: the
/// policy names no command for the recipient).
#[must_use = "start or cancel it, or it stays pending until the next start"]
pub(crate) struct Hook(Option<Box<Job>>);

/// One project's queue.
#[derive(Default)]
struct Queue {
    waiting: BTreeMap<(u8, u64), Job>,
    /// When each waiting job was queued, by its sequence number (the first
    /// is the oldest whatever its priority).
    queued_at: BTreeMap<u64, Instant>,
    running: usize,
    limit: usize,
}

/// The dispatcher: owns the queues, starts commands while under each
/// project's limit, most urgent first.
async fn dispatch(
    mut rx: mpsc::UnboundedReceiver<Cmd>,
    me: mpsc::UnboundedSender<Cmd>,
    out: mpsc::UnboundedSender<HookOutcome>,
    journals: Journals,
    tallies: Arc<Tallies>,
) {
    let mut queues: HashMap<RootId, Queue> = HashMap::new();
    let mut seq = 0u64;
    while let Some(first) = rx.recv().await {
        // Take everything already sent, so a critical message queued in the
        // same burst goes before the low ones ahead of it.
        let mut cmds = vec![first];
        while let Ok(c) = rx.try_recv() {
            cmds.push(c);
        }
        let now = Instant::now();
        let mut finished: Vec<(RootId, Option<String>)> = Vec::new();
        for c in cmds {
            match c {
                Cmd::Queue(job) => {
                    seq += 1;
                    let q = queues.entry(job.root).or_default();
                    q.limit = job.limit;
                    q.queued_at.insert(seq, now);
                    q.waiting.insert(start_order(job.priority, seq), *job);
                }
                Cmd::Finished { root, error } => {
                    let q = queues.entry(root).or_default();
                    q.running = q.running.saturating_sub(1);
                    compact(&journals, root);
                    finished.push((root, error));
                }
            }
        }
        for q in queues.values_mut() {
            while q.running < q.limit.max(1) {
                let Some(((_, s), job)) = q.waiting.pop_first() else {
                    break;
                };
                q.queued_at.remove(&s);
                q.running += 1;
                let (me, out, journals) = (me.clone(), out.clone(), journals.clone());
                tokio::spawn(async move {
                    let error = run_hook(&job.cmd, &job.path, &job.env)
                        .await
                        .err()
                        .map(|e| e.to_string());
                    if let Some(j) = journals
                        .lock()
                        .ok()
                        .as_mut()
                        .and_then(|j| j.get_mut(&job.root))
                    {
                        j.append(&Line::Done { id: job.id });
                    }
                    let _ = me.send(Cmd::Finished {
                        root: job.root,
                        error: error.clone(),
                    });
                    let _ = out.send(HookOutcome {
                        error,
                        ..job.outcome
                    });
                });
            }
        }
        publish(&tallies, &queues, finished, now);
    }
}

/// Writes each queue's figures and the batch's outcomes into the tallies.
fn publish(
    tallies: &Tallies,
    queues: &HashMap<RootId, Queue>,
    finished: Vec<(RootId, Option<String>)>,
    now: Instant,
) {
    let minute = tallies.minute(now);
    let Ok(mut roots) = tallies.roots.lock() else {
        return;
    };
    for (root, q) in queues {
        let t = roots.entry(*root).or_default();
        t.queued = q.waiting.len();
        t.running = q.running;
        t.oldest_queued = q.queued_at.first_key_value().map(|(_, at)| *at);
    }
    for (root, error) in finished {
        let t = roots.entry(root).or_default();
        match error {
            None => {
                t.succeeded += 1;
                t.consecutive_failures = 0;
            }
            Some(e) => {
                t.failed += 1;
                t.consecutive_failures += 1;
                t.last_error = Some(e);
                t.window.add(minute);
            }
        }
    }
}

/// Empties a long journal once nothing in it is pending.
fn compact(journals: &Journals, root: RootId) {
    if let Some(j) = journals.lock().ok().as_mut().and_then(|j| j.get_mut(&root))
        && j.open == 0
        && j.lines >= COMPACT_AFTER_LINES
        && let Err(e) = j.rewrite(&[])
    {
        tracing::warn!(error = %e, "cannot compact the hook journal");
    }
}

/// Why a notify command failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HookError {
    /// The policy's command has no program.
    #[error("empty notify command")]
    Empty,
    /// Every attempt failed; the last one's reason.
    #[error("{last} (after {attempts} attempt(s))")]
    Failed {
        /// What the last attempt ran into (could not start, exit status,
        /// timeout).
        last: String,
        /// How many attempts were made.
        attempts: u32,
    },
}

/// Runs a notify command with its timeout and retries (1 s, 2 s, 4 s… apart).
async fn run_hook(
    cmd: &NotifyCommand,
    path: &str,
    env: &[(&str, String)],
) -> Result<(), HookError> {
    let argv: Vec<String> = cmd
        .command
        .iter()
        .map(|a| a.replace("{path}", path))
        .collect();
    let Some(program) = argv.first() else {
        return Err(HookError::Empty);
    };
    let mut last = String::new();
    for attempt in 0..=cmd.retries {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1).min(6))).await;
        }
        // squadd's environment (its service tokens) is not the hook's: the
        // cleared one runs get, then the message's variables.
        let mut child = match tokio::process::Command::new(program)
            .args(&argv[1..])
            .env_clear()
            .envs(crate::child_env::cleared(std::env::vars_os(), &[]))
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                last = format!("cannot run {program}: {e}");
                continue;
            }
        };
        match tokio::time::timeout(cmd.timeout, child.wait()).await {
            Ok(Ok(s)) if s.success() => return Ok(()),
            Ok(Ok(s)) => last = format!("{program} exited with {s}"),
            Ok(Err(e)) => last = format!("{program}: {e}"),
            Err(_) => {
                let _ = child.kill().await;
                last = format!("{program} timed out after {:?}", cmd.timeout);
            }
        }
    }
    Err(HookError::Failed {
        last,
        attempts: cmd.retries.saturating_add(1),
    })
}

#[cfg(test)]
mod tests;
