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
use crate::runners::{self, Exit, RunRecord, RunState, prompt};
use chrono::{DateTime, Utc};
use squad_policies::runners::{AfterExit, Candidate, Pool, Vars};
use squad_protocol::FileKind;
use squad_protocol::config::{CONFIG_FILE, RuntimeConfig};
use squad_protocol::model::{Document, TaskAssignment, TaskStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// `None` for a run re-adopted after a restart.
    child: Option<std::process::Child>,
    term_at: Option<DateTime<Utc>>,
    killed: bool,
    idle_reported: bool,
}

/// The runs of one root.
#[derive(Default)]
pub struct RootRuns {
    /// config.json in force.
    pub config: RuntimeConfig,
    live: BTreeMap<(String, String), Live>,
    /// The last record of each task not running now, by (session, task).
    past: BTreeMap<(String, String), RunRecord>,
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
    /// A root's runs, its config.json read now.
    pub fn load(root: &Path) -> RootRuns {
        let (config, error) = load_config(root);
        if let Some(e) = error {
            tracing::warn!(error = %e, "config.json invalid; using the defaults");
        }
        RootRuns {
            config,
            ..Default::default()
        }
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

    /// After the start-up scan: runs recorded as running are re-adopted when
    /// their process is alive (same pid, same start time), else reported lost
    /// and held for a human. Nothing is started twice.
    pub(super) fn adopt_runs(&mut self, i: RootId, now: DateTime<Utc>) {
        let root = self.roots.core(i).root.clone();
        for (session_dir, mut rec) in runners::all_records(&root) {
            let key = (rec.session.clone(), rec.task.clone());
            let dir = runners::run_dir(&session_dir, &rec.task);
            if rec.state != RunState::Running {
                self.roots.shell_mut(i).runs.past.insert(key, rec);
                continue;
            }
            if rec.pid == 0
                && let Some((pid, start)) =
                    runners::find_run_process(&root, &rec.session, &rec.task)
            {
                // Spawned, but killed before its pid was recorded.
                rec.pid = pid;
                rec.process_start = start;
                keep_record(&dir, &rec);
            }
            if runners::is_run_process(&rec) {
                self.log.emit(
                    i,
                    Some(&rec.session),
                    Some(&dir),
                    EventKind::RunAdopted {
                        task_id: rec.task.clone(),
                        agent: rec.agent.clone(),
                        pid: rec.pid,
                    },
                );
                self.roots.shell_mut(i).runs.live.insert(
                    key,
                    Live {
                        rec,
                        dir,
                        session_dir,
                        child: None,
                        term_at: None,
                        killed: false,
                        idle_reported: false,
                    },
                );
            } else {
                rec.state = RunState::Lost;
                rec.held = true;
                rec.exit = Some(Exit {
                    at: now,
                    code: None,
                    signal: None,
                });
                rec.completed = completed_in_file(&session_dir, &rec.agent, &rec.task);
                keep_record(&dir, &rec);
                self.log.emit(
                    i,
                    Some(&rec.session),
                    Some(&dir),
                    EventKind::RunLost {
                        task_id: rec.task.clone(),
                        agent: rec.agent.clone(),
                        pid: rec.pid,
                    },
                );
                if !rec.completed {
                    self.tell_lead(
                        i,
                        &rec.session,
                        &rec.task,
                        &format!(
                            "Run lost: {} of {} (pid {}) was running when squadd stopped and is gone now. It is not restarted automatically; `squadctl run {}` starts it again.",
                            rec.task, rec.agent, rec.pid, rec.task
                        ),
                        now,
                    );
                }
                self.roots.shell_mut(i).runs.past.insert(key, rec);
            }
        }
        self.timers.set(Timer::Runs, Instant::now());
    }

    /// The one call of the loop: exits, time limits, idleness, then dispatch.
    pub(super) fn supervise_runs(&mut self, wall: DateTime<Utc>) {
        self.timers.cancel(&Timer::Runs);
        let mut next: Option<DateTime<Utc>> = None;
        for i in self.roots.ids() {
            let had = !self.roots.shell(i).runs.live.is_empty();
            self.watch_live(i, wall);
            if self.roots.core(i).policy.runners.dispatch {
                self.dispatch(i, wall);
                let due = self
                    .roots
                    .shell(i)
                    .runs
                    .past
                    .values()
                    .filter(|r| !r.held && !r.completed)
                    .filter_map(|r| r.retry_at)
                    .filter(|at| *at > wall)
                    .min();
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

    fn watch_live(&mut self, i: RootId, wall: DateTime<Utc>) {
        let policy = self.roots.core(i).policy.runners.clone();
        let keys: Vec<(String, String)> = self.roots.shell(i).runs.live.keys().cloned().collect();
        for key in keys {
            let Some(live) = self.roots.shell_mut(i).runs.live.get_mut(&key) else {
                continue;
            };
            let ended = match &mut live.child {
                Some(child) => match child.try_wait() {
                    Ok(Some(status)) => {
                        use std::os::unix::process::ExitStatusExt;
                        Some((status.code(), status.signal()))
                    }
                    Ok(None) => None,
                    Err(_) => Some((None, None)),
                },
                None => {
                    (!runners::alive(live.rec.pid, live.rec.process_start)).then_some((None, None))
                }
            };
            if let Some((code, signal)) = ended {
                if let Some(live) = self.roots.shell_mut(i).runs.live.remove(&key) {
                    self.run_ended(i, live, code, signal, wall);
                }
                continue;
            }
            runners::cap_log(&live.dir, policy.log_max_bytes);
            let (session, task, agent) = (
                live.rec.session.clone(),
                live.rec.task.clone(),
                live.rec.agent.clone(),
            );
            let mut emit = Vec::new();
            if wall >= live.rec.deadline && live.term_at.is_none() {
                let _ = runners::signal_group(live.rec.pid, libc::SIGTERM);
                live.term_at = Some(wall);
                let limit = (live.rec.deadline - live.rec.started_at).num_seconds();
                emit.push(EventKind::AgentTimeout {
                    task_id: task.clone(),
                    agent: agent.clone(),
                    limit_secs: u64::try_from(limit).unwrap_or(0),
                });
            } else if let Some(term) = live.term_at
                && !live.killed
                && wall - term
                    >= chrono::Duration::from_std(policy.grace).unwrap_or(chrono::Duration::zero())
            {
                let _ = runners::signal_group(live.rec.pid, libc::SIGKILL);
                live.killed = true;
            }
            if let Some(limit) = policy.idle_after
                && !live.idle_reported
            {
                let last = runners::last_write(&live.session_dir, &agent)
                    .map_or(live.rec.started_at, |w| w.max(live.rec.started_at));
                let idle = (wall - last).to_std().unwrap_or_default();
                if idle >= limit {
                    live.idle_reported = true;
                    emit.push(EventKind::AgentIdle {
                        task_id: task.clone(),
                        agent: agent.clone(),
                        idle_secs: idle.as_secs(),
                    });
                }
            }
            let dir = live.dir.clone();
            for kind in emit {
                self.log.emit(i, Some(&session), Some(&dir), kind);
            }
        }
    }

    fn task_completed(&self, i: RootId, session_dir: &Path, rec: &RunRecord) -> bool {
        let indexed = self
            .roots
            .core(i)
            .sessions
            .get(&rec.session)
            .and_then(|s| s.tasks().get(&rec.task))
            .is_some_and(|t| t.state == TaskStatus::Completed);
        indexed || completed_in_file(session_dir, &rec.agent, &rec.task)
    }

    fn run_ended(
        &mut self,
        i: RootId,
        live: Live,
        code: Option<i32>,
        signal: Option<i32>,
        wall: DateTime<Utc>,
    ) {
        let mut rec = live.rec;
        let completed = self.task_completed(i, &live.session_dir, &rec);
        let policy = &self.roots.core(i).policy.runners;
        let decision = squad_policies::runners::after_exit(
            policy.runner_for(&rec.agent),
            policy,
            rec.attempt,
            completed,
            wall,
        );
        rec.exit = Some(Exit {
            at: wall,
            code,
            signal,
        });
        rec.completed = completed;
        // issue 30 (docs/worktrees.md): a completed worktree run's branch is
        // merged into the session's branch, or held (the lead is told below).
        let held_tree = if completed {
            let core = self.roots.core(i);
            crate::worktree::finish(&core.root, &core.policy, &live.dir, &rec)
        } else {
            None
        };
        if rec.state == RunState::Running {
            rec.state = if live.term_at.is_some() {
                RunState::TimedOut
            } else {
                RunState::Exited
            };
        }
        let next = match (&decision, rec.state) {
            (AfterExit::Done, _) => "done".to_string(),
            // Stopped by hand: a human decides what comes next.
            (_, RunState::Stopped) => {
                rec.held = true;
                "stopped; held for a human (`squadctl run`)".to_string()
            }
            (AfterExit::Retry { at, attempt }, _) => {
                rec.retry_at = Some(*at);
                format!("run {attempt} at {}", at.to_rfc3339())
            }
            (AfterExit::GiveUp, _) => {
                rec.held = true;
                "retries used up; held for a human (`squadctl run`)".to_string()
            }
        };
        keep_record(&live.dir, &rec);
        self.log.emit(
            i,
            Some(&rec.session),
            Some(&live.dir),
            EventKind::AgentExited {
                task_id: rec.task.clone(),
                agent: rec.agent.clone(),
                code,
                signal,
                completed,
                next: next.clone(),
            },
        );
        if !completed && rec.state != RunState::Stopped {
            let how = match (rec.state, code, signal) {
                (RunState::TimedOut, ..) => "was stopped at its time limit".to_string(),
                (_, Some(c), _) => format!("exited with code {c}"),
                (_, None, Some(s)) => format!("was killed by signal {s}"),
                _ => "ended".to_string(),
            };
            let tail = runners::log_tail(&live.dir, 10).join("\n");
            self.tell_lead(
                i,
                &rec.session,
                &rec.task,
                &format!(
                    "Run {} of {} by {} {how} without reporting `completed`. Next: {next}.\n\nLast lines of {}:\n{tail}",
                    rec.attempt,
                    rec.task,
                    rec.agent,
                    live.dir.join(runners::RUN_LOG).display()
                ),
                wall,
            );
        }
        if let Some(reason) = held_tree {
            self.tell_lead(i, &rec.session, &rec.task, &reason, wall);
        }
        let key = (rec.session.clone(), rec.task.clone());
        self.roots.shell_mut(i).runs.past.insert(key, rec);
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
        let wall = Utc::now();
        let Some(live) = self
            .roots
            .shell_mut(i)
            .runs
            .live
            .values_mut()
            .find(|l| l.rec.task == task && session.is_none_or(|s| s == l.rec.session))
        else {
            return Err(RunError::NotRunning(task.to_string()));
        };
        runners::signal_group(live.rec.pid, libc::SIGTERM).map_err(RunError::Signal)?;
        live.rec.state = RunState::Stopped;
        live.term_at = Some(wall);
        keep_record(&live.dir, &live.rec);
        let out = (live.rec.session.clone(), live.rec.pid);
        self.timers.set_earlier(Timer::Runs, Instant::now() + POLL);
        Ok(out)
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
