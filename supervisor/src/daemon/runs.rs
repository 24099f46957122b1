//! squadd's agent runs (docs/runners.md): dispatch of ready tasks, the
//! supervision of each run (exit, time limit, idleness, log cap),
//! re-adoption after a restart, and `squadctl run|stop` over the socket.
//!
//! One call site in the loop: [`Supervisor::supervise_runs`] at the end of
//! every batch, so a task completed in a batch starts its dependents in the
//! same batch. While runs are live it is also woken every
//! [`POLL`] to see exits (runs re-adopted after a restart are not our
//! children: only polling sees them end).

use super::Supervisor;
use super::core::RootId;
use super::timers::Timer;
use crate::events::EventKind;
use crate::index::Entry;
use crate::runners::{self, Exit, OsProcesses, Processes, RunRecord, RunState, Signal, prompt};
use chrono::{DateTime, Utc};
use decide::Watch;
use squad_policies::runners::{Candidate, Pool, RunnersPolicy, Vars};
use squad_protocol::FileKind;
use squad_protocol::config::{CONFIG_FILE, RuntimeConfig};
use squad_protocol::model::{Document, TaskAssignment, TaskStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod decide;
mod start;

/// How often live runs are looked at.
pub const POLL: Duration = Duration::from_millis(200);

/// Why a run did not start.
enum Failed {
    /// Before anything was started or recorded.
    Before(String),
    /// Recorded in run.json and reported already.
    Reported(String),
}

/// Why `squadctl run|stop` (the `runs` method of the control socket) was
/// refused; its text is the reply's error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `run` or `stop` without a task.
    #[error("give the task")]
    NoTask,
    /// An action other than list, run and stop.
    #[error("unknown runs action `{0}` (list, run, stop)")]
    UnknownAction(String),
    /// No session plans the task.
    #[error("no session plans `{0}`")]
    NotPlanned(String),
    /// Several sessions plan it and none was named.
    #[error("`{task}` is planned in several sessions ({sessions}); pass --session")]
    Ambiguous {
        /// The task.
        task: String,
        /// The sessions, comma-separated.
        sessions: String,
    },
    /// The session ended.
    #[error("session `{0}` has ended")]
    Ended(String),
    /// The task is completed.
    #[error("`{0}` is completed")]
    Completed(String),
    /// The task waits for others.
    #[error("`{task}` waits for {unmet}")]
    Waiting {
        /// The task.
        task: String,
        /// What it waits for, comma-separated.
        unmet: String,
    },
    /// The runner policy says not now.
    #[error("{}", .0.reason())]
    Wait(squad_policies::runners::Wait),
    /// The run could not be started (its reason as reported).
    #[error("{0}")]
    Start(String),
    /// `stop` of a task with no live run.
    #[error("`{0}` has no run in progress")]
    NotRunning(String),
    /// The run's process group could not be signalled.
    #[error("{0}")]
    Signal(std::io::Error),
    /// The list could not be encoded.
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
}

/// One live run.
struct Live {
    rec: RunRecord,
    dir: PathBuf,
    session_dir: PathBuf,
    watch: Watch,
    /// How its leader ended, once it did: the run is stopping until
    /// nothing of it is left.
    ended: Option<runners::Ended>,
}

/// The runs of one root.
pub struct RootRuns {
    /// config.json in force.
    pub config: RuntimeConfig,
    live: BTreeMap<(String, String), Live>,
    /// The last record of each task not running now, by (session, task).
    past: BTreeMap<(String, String), RunRecord>,
    /// Process I/O (the real processes; a test double in unit tests).
    procs: Box<dyn Processes + Send>,
}

impl Default for RootRuns {
    fn default() -> Self {
        RootRuns::with_processes(Box::new(OsProcesses::default()))
    }
}

/// What supervising a root's runs asks of the rest of squadd, in the order
/// given (a run's record first, then its event, then word to the lead).
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// Write a run's run.json.
    Record {
        /// The run's folder.
        dir: PathBuf,
        /// The record.
        rec: RunRecord,
    },
    /// Emit an event.
    Event {
        /// The run's session.
        session: String,
        /// The run's folder.
        dir: PathBuf,
        /// The event.
        kind: EventKind,
    },
    /// A high-priority message to the lead.
    TellLead {
        /// The session.
        session: String,
        /// The task.
        task: String,
        /// The text.
        text: String,
        /// A run folder whose run.log's tail is appended.
        tail_of: Option<PathBuf>,
    },
}

/// A record whose pid is not known to be the run's (read from run.json and
/// not verified): without it.
fn untrusted(rec: &RunRecord) -> RunRecord {
    RunRecord {
        pid: 0,
        process_start: 0,
        ..rec.clone()
    }
}

/// A run met lost after a restart: its record, then `run-lost`.
fn lost(out: &mut Vec<Out>, dir: &Path, rec: &RunRecord, pid: u32) {
    out.push(Out::Record {
        dir: dir.to_path_buf(),
        rec: rec.clone(),
    });
    out.push(Out::Event {
        session: rec.session.clone(),
        dir: dir.to_path_buf(),
        kind: EventKind::RunLost {
            task_id: rec.task.clone(),
            agent: rec.agent.clone(),
            pid,
        },
    });
}

/// What supervision reads from the session files (the shell answers).
pub trait RunFacts {
    /// Whether the run's task is completed (index or its progress file).
    fn completed(&self, session_dir: &Path, rec: &RunRecord) -> bool;
    /// When the agent last wrote a protocol file in the session.
    fn last_write(&self, session_dir: &Path, agent: &str) -> Option<DateTime<Utc>>;
}

/// A live run as `squadctl runs` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunView {
    /// The record.
    #[serde(flatten)]
    pub record: RunRecord,
    /// run directory.
    pub dir: String,
}

/// Reads config.json of a root: (config, first error).
pub fn load_config(root: &Path) -> (RuntimeConfig, Option<String>) {
    let team = squad_protocol::teamdir::locate(root)
        .map(|t| t.path)
        .unwrap_or_else(|| root.join(squad_protocol::tree::SQUAD_DIR));
    let path = team.join(CONFIG_FILE);
    let text = match squad_protocol::fsx::read_regular_to_string(&path, 1 << 20) {
        Ok(t) => t,
        Err(squad_protocol::fsx::ReadError::NotFound) => {
            return (RuntimeConfig::default(), None);
        }
        Err(e) => {
            return (
                RuntimeConfig::default(),
                Some(format!("{}: {e}", path.display())),
            );
        }
    };
    let (config, diags) = squad_protocol::config::parse(&path, &text);
    let first = diags.iter().find(|d| d.is_error()).map(|d| d.to_string());
    (config, first)
}

fn completed_in_file(session_dir: &Path, agent: &str, task: &str) -> bool {
    // The agent may have written `completed` and exited before the file's
    // watch event settled: read it rather than wait for the index.
    let path = session_dir.join(format!("role-comm-{agent}-{task}.md"));
    let Ok(bytes) =
        squad_protocol::fsx::read_regular(&path, squad_protocol::validate::MAX_FILE_BYTES)
    else {
        return false;
    };
    let f = crate::index::index_bytes(&path, FileKind::ProgressUpdate, &bytes);
    matches!(&f.entry, Entry::Progress(p) if p.status == TaskStatus::Completed)
}

impl RootRuns {
    /// No runs, the default config, process I/O through `procs`.
    pub fn with_processes(procs: Box<dyn Processes + Send>) -> RootRuns {
        RootRuns {
            config: RuntimeConfig::default(),
            live: BTreeMap::new(),
            past: BTreeMap::new(),
            procs,
        }
    }

    /// A root's runs, its config.json read now.
    pub fn load(root: &Path) -> RootRuns {
        let (config, error) = load_config(root);
        if let Some(e) = error {
            tracing::warn!(error = %e, "config.json invalid; using the defaults");
        }
        let mut runs = RootRuns::with_processes(Box::new(OsProcesses::new(root)));
        runs.config = config;
        runs
    }

    /// After a restart, the records of the root's runs: those recorded as
    /// running are re-adopted when their process is alive (same pid, same
    /// start time, its environment naming the run), re-dispatched when no
    /// process was ever started, else reported lost and held for a human.
    /// Nothing is started twice.
    pub fn restart(
        &mut self,
        root: &Path,
        records: Vec<(PathBuf, RunRecord)>,
        policy: &RunnersPolicy,
        facts: &dyn RunFacts,
        now: DateTime<Utc>,
    ) -> Vec<Out> {
        let mut out = Vec::new();
        for (session_dir, mut rec) in records {
            let key = (rec.session.clone(), rec.task.clone());
            let dir = runners::run_dir(&session_dir, &rec.task);
            if rec.state != RunState::Running {
                self.past.insert(key, rec);
                continue;
            }
            let never_recorded = rec.pid == 0;
            if never_recorded
                && let Some((pid, start)) =
                    self.procs.find_run_process(root, &rec.session, &rec.task)
            {
                // Spawned, but squadd was killed before its pid was recorded.
                rec.pid = pid;
                rec.process_start = start;
                out.push(Out::Record {
                    dir: dir.clone(),
                    rec: rec.clone(),
                });
            }
            let found = if self.procs.is_run_process(&rec) {
                decide::Found::Alive
            } else if rec.pid == 0 {
                decide::Found::NeverStarted
            } else {
                decide::Found::Gone
            };
            let completed = found != decide::Found::Alive && facts.completed(&session_dir, &rec);
            let session = rec.session.clone();
            match decide::restarted(rec, found, completed, now) {
                decide::Restart::Adopt(rec) => {
                    out.push(Out::Event {
                        session,
                        dir: dir.clone(),
                        kind: EventKind::RunAdopted {
                            task_id: rec.task.clone(),
                            agent: rec.agent.clone(),
                            pid: rec.pid,
                        },
                    });
                    self.procs.adopt(&rec, &dir, policy.log_max_bytes);
                    self.started(rec, dir, session_dir);
                }
                decide::Restart::Lost { rec, tell_lead } => {
                    // Its leader is gone: what it left behind ends now,
                    // found by its environment only (run.json is writable
                    // by agents: its pid must not aim squadd at a group).
                    self.procs.contain(&untrusted(&rec), Signal::Kill);
                    lost(&mut out, &dir, &rec, rec.pid);
                    if let Some(text) = tell_lead {
                        out.push(Out::TellLead {
                            session,
                            task: rec.task.clone(),
                            text,
                            tail_of: None,
                        });
                    }
                    self.past.insert(key, rec);
                }
                decide::Restart::Redispatch(rec) => {
                    self.procs.contain(&untrusted(&rec), Signal::Kill);
                    lost(&mut out, &dir, &rec, 0);
                    self.past.insert(key, rec);
                }
            }
        }
        out
    }

    /// One look at every live run: time limits (SIGTERM, then SIGKILL after
    /// the grace), idleness; once its leader ended, what is left of the run
    /// ended too (SIGTERM, SIGKILL after the grace) and, when nothing is
    /// left and its output is drained, the exit (the record, `agent-exited`,
    /// word to the lead, a retry or a hold).
    pub fn poll(
        &mut self,
        policy: &RunnersPolicy,
        facts: &dyn RunFacts,
        now: DateTime<Utc>,
    ) -> Vec<Out> {
        let mut out = Vec::new();
        let keys: Vec<(String, String)> = self.live.keys().cloned().collect();
        for key in keys {
            let Some(live) = self.live.get_mut(&key) else {
                continue;
            };
            if live.ended.is_none() {
                live.ended = self.procs.try_exit(live.rec.pid, live.rec.process_start);
            }
            if let Some(ended) = live.ended {
                // The leader is gone: everything the run started ends too,
                // and the run stays live (stopping) until nothing is left.
                let signal = decide::leftover_signal(&mut live.watch, policy, now);
                let left = self.procs.contain(&live.rec, signal);
                let drained = self.procs.drained(live.rec.pid);
                if decide::gone(&live.watch, policy, left, drained, now) {
                    if left > 0 {
                        tracing::warn!(
                            task = %live.rec.task,
                            left,
                            "processes of an ended run could not be ended"
                        );
                    }
                    if let Some(live) = self.live.remove(&key) {
                        self.ended(live, policy, facts, ended, now, &mut out);
                    }
                }
                continue;
            }
            let (session_dir, agent) = (&live.session_dir, &live.rec.agent);
            let steps = decide::look(
                &live.rec,
                &mut live.watch,
                policy,
                || facts.last_write(session_dir, agent),
                now,
            );
            for step in steps {
                match step {
                    decide::Step::Signal(signal) => {
                        if let Err(e) = self.procs.signal_group(live.rec.pid, signal) {
                            tracing::warn!(pid = live.rec.pid, error = %e, "cannot signal a run");
                        }
                    }
                    decide::Step::Event(kind) => out.push(Out::Event {
                        session: live.rec.session.clone(),
                        dir: live.dir.clone(),
                        kind,
                    }),
                }
            }
        }
        out
    }

    fn ended(
        &mut self,
        live: Live,
        policy: &RunnersPolicy,
        facts: &dyn RunFacts,
        ended: runners::Ended,
        now: DateTime<Utc>,
        out: &mut Vec<Out>,
    ) {
        let completed = facts.completed(&live.session_dir, &live.rec);
        let decide::Exited {
            rec,
            event,
            tell_lead,
        } = decide::exited(live.rec, &live.watch, policy, completed, ended, now);
        out.push(Out::Record {
            dir: live.dir.clone(),
            rec: rec.clone(),
        });
        out.push(Out::Event {
            session: rec.session.clone(),
            dir: live.dir.clone(),
            kind: event,
        });
        if let Some(text) = tell_lead {
            out.push(Out::TellLead {
                session: rec.session.clone(),
                task: rec.task.clone(),
                text,
                tail_of: Some(live.dir),
            });
        }
        self.past
            .insert((rec.session.clone(), rec.task.clone()), rec);
    }

    /// A run just started: live from now on (its past record forgotten).
    fn started(&mut self, rec: RunRecord, dir: PathBuf, session_dir: PathBuf) {
        let key = (rec.session.clone(), rec.task.clone());
        self.past.remove(&key);
        let live = Live {
            rec,
            dir,
            session_dir,
            watch: Watch::default(),
            ended: None,
        };
        self.live.insert(key, live);
    }

    /// The earliest retry due after `now` (dispatch wakes for it).
    pub fn next_retry(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.past
            .values()
            .filter(|r| !r.held && !r.completed)
            .filter_map(|r| r.retry_at)
            .filter(|at| *at > now)
            .min()
    }

    /// `squadctl stop`: SIGTERM to the run's group (SIGKILL after the grace
    /// at a later poll); the run is recorded `stopped` (then held).
    pub fn stop(
        &mut self,
        session: Option<&str>,
        task: &str,
        now: DateTime<Utc>,
    ) -> Result<(Out, String, u32), RunError> {
        let Some(live) = self
            .live
            .values_mut()
            .find(|l| l.rec.task == task && session.is_none_or(|s| s == l.rec.session))
        else {
            return Err(RunError::NotRunning(task.to_string()));
        };
        self.procs
            .signal_group(live.rec.pid, Signal::Term)
            .map_err(RunError::Signal)?;
        live.rec.state = RunState::Stopped;
        live.watch.term_at = Some(now);
        let record = Out::Record {
            dir: live.dir.clone(),
            rec: live.rec.clone(),
        };
        Ok((record, live.rec.session.clone(), live.rec.pid))
    }

    /// The live runs.
    pub fn live(&self) -> Vec<RunView> {
        self.live
            .values()
            .map(|l| RunView {
                record: l.rec.clone(),
                dir: l.dir.display().to_string(),
            })
            .collect()
    }
}

impl Supervisor {
    /// config.json changed: the new one if valid, else the previous stays.
    pub(super) fn reload_config(&mut self, i: RootId) {
        let (config, error) = load_config(&self.roots.core(i).root);
        if error.is_none() {
            self.roots.shell_mut(i).runs.config = config;
        }
        self.log
            .emit(i, None, None, EventKind::ConfigReloaded { error });
        self.timers.set(Timer::Runs, Instant::now());
    }

    /// Whether `path` is a root's config.json.
    pub(super) fn is_config(&self, i: RootId, path: &Path) -> bool {
        path.file_name().is_some_and(|n| n == CONFIG_FILE)
            && path.parent().and_then(Path::file_name).is_some_and(|n| {
                n == squad_protocol::tree::SQUAD_DIR
                    || n == squad_protocol::teamdir::LEGACY_TEAM_DIR
            })
            && path.parent().and_then(Path::parent) == Some(self.roots.core(i).root.as_path())
    }

    /// After the start-up scan: the root's run records met again (see
    /// [`RootRuns::restart`]).
    pub(super) fn adopt_runs(&mut self, i: RootId, now: DateTime<Utc>) {
        let root = self.roots.core(i).root.clone();
        let records = runners::all_records(&root);
        let (core, shell) = self.roots.both_mut(i);
        let facts = Facts { core };
        let out = shell
            .runs
            .restart(&root, records, &core.policy.runners, &facts, now);
        self.carry_out(i, out, now);
        self.timers.set(Timer::Runs, Instant::now());
    }

    /// The one call of the loop: exits, time limits, idleness, then dispatch.
    pub(super) fn supervise_runs(&mut self, wall: DateTime<Utc>) {
        self.timers.cancel(&Timer::Runs);
        let mut next: Option<DateTime<Utc>> = None;
        for i in self.roots.ids() {
            let had = !self.roots.shell(i).runs.live.is_empty();
            let (core, shell) = self.roots.both_mut(i);
            let facts = Facts { core };
            let out = shell.runs.poll(&core.policy.runners, &facts, wall);
            self.carry_out(i, out, wall);
            if self.roots.core(i).policy.runners.dispatch {
                self.dispatch(i, wall);
                let due = self.roots.shell(i).runs.next_retry(wall);
                next = match (next, due) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            if had && self.roots.shell(i).runs.live.is_empty() {
                self.log.emit(i, None, None, EventKind::PoolEmpty);
            }
        }
        if self.roots.shells().any(|(_, s)| !s.runs.live.is_empty()) {
            self.timers.set(Timer::Runs, Instant::now() + POLL);
        } else if let Some(at) = next {
            self.timers.set_wall(Timer::Runs, at, wall, Instant::now());
        }
    }

    /// Carries out what run supervision asked, in order.
    fn carry_out(&mut self, i: RootId, out: Vec<Out>, now: DateTime<Utc>) {
        for o in out {
            match o {
                Out::Record { dir, rec } => keep_record(&dir, &rec),
                Out::Event { session, dir, kind } => {
                    self.log.emit(i, Some(&session), Some(&dir), kind);
                }
                Out::TellLead {
                    session,
                    task,
                    text,
                    tail_of,
                } => {
                    let text = match tail_of {
                        Some(dir) => format!(
                            "{text}\n\nLast lines of {}:\n{}",
                            dir.join(runners::RUN_LOG).display(),
                            runners::log_tail(&dir, 10).join("\n")
                        ),
                        None => text,
                    };
                    self.tell_lead(i, &session, &task, &text, now);
                }
            }
        }
    }

    fn tell_lead(&mut self, i: RootId, session: &str, task: &str, text: &str, now: DateTime<Utc>) {
        let Some(lead) = self.roots.core(i).policy.runners.lead.clone() else {
            return;
        };
        use squad_protocol::model::{Message, MessageContext, MessageMeta, MessageType, Priority};
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let message_id = format!(
            "msg_{}_run{:04x}{:04x}",
            now.format("%Y%m%dT%H%M%S%3fZ"),
            std::process::id() & 0xffff,
            n & 0xffff
        );
        let doc = Document::Message(Message {
            meta: MessageMeta {
                message_id,
                from_agent: "squadd".into(),
                to_agent: lead,
                created_at: now.fixed_offset(),
                priority: Priority::High,
            },
            kind: MessageType::Notification,
            subject: format!("run of {task} failed"),
            message: text.to_string(),
            context: Some(MessageContext {
                task_id: Some(task.to_string()),
                ..MessageContext::default()
            }),
            response_needed: None,
            response_by: None,
            in_reply_to: None,
        });
        let dir = self.roots.core(i).session_dir(session);
        match doc.to_file_text() {
            Ok(text) => {
                // Never through a link planted on the way (see safefs).
                if let Err(e) =
                    crate::safefs::write_atomic(&dir.join(doc.file_name()), text.as_bytes())
                {
                    tracing::warn!(error = %e, "cannot write the message to the lead");
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot render the message to the lead"),
        }
    }

    /// The candidates of root `i`: ready tasks, and failed runs' tasks.
    fn candidates(&self, i: RootId) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (name, core) in &self.roots.core(i).sessions {
            if core.ended().is_some() {
                continue;
            }
            for t in core.tasks().values() {
                if t.state == TaskStatus::Completed || !t.unmet.is_empty() {
                    continue;
                }
                let past = self
                    .roots
                    .shell(i)
                    .runs
                    .past
                    .get(&(name.clone(), t.task_id.clone()));
                let c = Candidate {
                    session: name.clone(),
                    task: t.task_id.clone(),
                    agent: t.agent.clone(),
                    priority: t.priority,
                    attempts: past.map_or(0, |p| p.attempt),
                    retry_at: past.and_then(|p| p.retry_at),
                    held: past.is_some_and(|p| p.held),
                };
                match past {
                    Some(p) if p.completed => {}
                    Some(_) if matches!(t.state, TaskStatus::Pending | TaskStatus::InProgress) => {
                        out.push(c)
                    }
                    None if t.ready => out.push(c),
                    _ => {}
                }
            }
        }
        out
    }

    fn pool(&self, i: RootId) -> Pool {
        let r = &self.roots.shell(i).runs;
        Pool {
            running: r.live.len(),
            max_concurrent: usize::try_from(r.config.sessions.max_concurrent).unwrap_or(usize::MAX),
            busy_agents: r.live.values().map(|l| l.rec.agent.clone()).collect(),
            busy_tasks: r.live.keys().cloned().collect(),
        }
    }

    fn dispatch(&mut self, i: RootId, wall: DateTime<Utc>) {
        let candidates = self.candidates(i);
        if candidates.is_empty() {
            return;
        }
        let start = squad_policies::runners::dispatch(
            &self.roots.core(i).policy.runners,
            &candidates,
            &self.pool(i),
            wall,
        );
        for c in start {
            if let Err(e) = self.start_run(i, &c, wall) {
                tracing::warn!(task = %c.task, error = %e, "cannot start the runner");
            }
        }
    }

    /// `squadctl run TASK`: starts a run by hand (same checks, except that
    /// held tasks and used-up retries may start).
    pub(super) fn run_by_hand(
        &mut self,
        i: RootId,
        session: Option<&str>,
        task: &str,
    ) -> Result<(String, u32), RunError> {
        let wall = Utc::now();
        let candidates = self.candidates_any(i, session, task)?;
        let c = &candidates;
        squad_policies::runners::may_start(
            &self.roots.core(i).policy.runners,
            c,
            &self.pool(i),
            wall,
            true,
        )
        .map_err(RunError::Wait)?;
        let pool = self.pool(i);
        if pool.running >= pool.max_concurrent {
            return Err(RunError::Wait(squad_policies::runners::Wait::PoolFull));
        }
        let pid = self.start_run(i, c, wall).map_err(RunError::Start)?;
        Ok((c.session.clone(), pid))
    }

    fn candidates_any(
        &self,
        i: RootId,
        session: Option<&str>,
        task: &str,
    ) -> Result<Candidate, RunError> {
        let mut found = Vec::new();
        for (name, core) in &self.roots.core(i).sessions {
            if session.is_some_and(|s| s != name) {
                continue;
            }
            if let Some(t) = core.tasks().get(task) {
                found.push((name.clone(), t.clone(), core.ended().is_some()));
            }
        }
        let (name, t, ended) = match found.len() {
            0 => return Err(RunError::NotPlanned(task.to_string())),
            1 => found.remove(0),
            _ => {
                return Err(RunError::Ambiguous {
                    task: task.to_string(),
                    sessions: found
                        .iter()
                        .map(|f| f.0.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        };
        if ended {
            return Err(RunError::Ended(name));
        }
        if t.state == TaskStatus::Completed {
            return Err(RunError::Completed(task.to_string()));
        }
        if !t.unmet.is_empty() {
            return Err(RunError::Waiting {
                task: task.to_string(),
                unmet: t.unmet.join(", "),
            });
        }
        let past = self
            .roots
            .shell(i)
            .runs
            .past
            .get(&(name.clone(), task.to_string()));
        Ok(Candidate {
            session: name,
            task: task.to_string(),
            agent: t.agent.clone(),
            priority: t.priority,
            attempts: past.map_or(0, |p| p.attempt),
            retry_at: None,
            held: false,
        })
    }

    /// `squadctl stop TASK`: SIGTERM to the run's group (SIGKILL after the
    /// grace period); the task is then held for a human.
    pub(super) fn stop_by_hand(
        &mut self,
        i: RootId,
        session: Option<&str>,
        task: &str,
    ) -> Result<(String, u32), RunError> {
        let (record, session, pid) =
            self.roots
                .shell_mut(i)
                .runs
                .stop(session, task, Utc::now())?;
        self.carry_out(i, vec![record], Utc::now());
        self.timers.set_earlier(Timer::Runs, Instant::now() + POLL);
        Ok((session, pid))
    }
}

/// The session facts run supervision reads, from a root's core (and the
/// progress file when the index has not caught up).
struct Facts<'a> {
    core: &'a super::core::Root,
}

impl RunFacts for Facts<'_> {
    fn completed(&self, session_dir: &Path, rec: &RunRecord) -> bool {
        let indexed = self
            .core
            .sessions
            .get(&rec.session)
            .and_then(|s| s.tasks().get(&rec.task))
            .is_some_and(|t| t.state == TaskStatus::Completed);
        indexed || completed_in_file(session_dir, &rec.agent, &rec.task)
    }

    fn last_write(&self, session_dir: &Path, agent: &str) -> Option<DateTime<Utc>> {
        runners::last_write(session_dir, agent)
    }
}

impl Supervisor {
    /// The `runs` method of the control socket.
    pub(super) fn answer_runs(
        &mut self,
        i: RootId,
        action: &str,
        session: Option<&str>,
        task: Option<&str>,
    ) -> crate::control::Response {
        use crate::control::Response;
        let need_task = || task.ok_or(RunError::NoTask);
        let result = match action {
            "list" => serde_json::to_value(self.roots.shell(i).runs.live()).map_err(RunError::from),
            "run" => need_task()
                .and_then(|t| self.run_by_hand(i, session, t))
                .map(|(s, pid)| serde_json::json!({"session": s, "pid": pid})),
            "stop" => need_task()
                .and_then(|t| self.stop_by_hand(i, session, t))
                .map(|(s, pid)| serde_json::json!({"session": s, "pid": pid})),
            other => Err(RunError::UnknownAction(other.to_string())),
        };
        match result {
            Ok(v) => Response::ok(v),
            Err(e) => Response::error(e.to_string()),
        }
    }
}

/// Writes a run's record after the fact it records happened (a spawn, an
/// exit, a stop): a failure is logged, never a reason to undo what happened;
/// the next write of the record catches up.
fn keep_record(dir: &std::path::Path, rec: &runners::RunRecord) {
    if let Err(e) = runners::write_record(dir, rec) {
        tracing::warn!(error = %e, "cannot write run.json");
    }
}

#[cfg(test)]
mod tests;
