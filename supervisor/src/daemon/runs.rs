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
use crate::runners::{self, Exit, OsProcesses, Processes, RunRecord, RunState, prompt};
use chrono::{DateTime, Utc};
use decide::Watch;
use squad_policies::runners::{Candidate, Vars};
use squad_protocol::FileKind;
use squad_protocol::config::{CONFIG_FILE, RuntimeConfig};
use squad_protocol::model::{Document, TaskAssignment, TaskStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod decide;
mod start;
mod supervise;

pub use supervise::{Out, RunFacts};

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
                // issue 30 (docs/worktrees.md): a completed worktree run's
                // branch is merged into the session's branch, or held with
                // word to the lead.
                Out::FinishWorktree { dir, rec } => {
                    let core = self.roots.core(i);
                    if let Some(reason) =
                        crate::worktree::finish(&core.root, &core.policy, &dir, &rec)
                    {
                        self.tell_lead(i, &rec.session, &rec.task, &reason, now);
                    }
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

    fn dispatch(&mut self, i: RootId, wall: DateTime<Utc>) {
        let mut candidates = self
            .roots
            .shell(i)
            .runs
            .candidates(&self.roots.core(i).sessions);
        // Cluster call site (docs/cluster.md): only the agent's host starts
        // its runs.
        if self.roots.shell(i).cluster.is_some() {
            let here = crate::cluster::host_id(&self.roots.core(i).root);
            let leads = self.leads(i);
            let runners = &self.roots.core(i).policy.runners;
            candidates.retain(|c| runners.dispatches_here(&c.agent, &here, leads));
        }
        if candidates.is_empty() {
            return;
        }
        let start = squad_policies::runners::dispatch(
            &self.roots.core(i).policy.runners,
            &candidates,
            &self.roots.shell(i).runs.pool(),
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
        let runs = &self.roots.shell(i).runs;
        let c = &runs.candidate(&self.roots.core(i).sessions, session, task)?;
        let pool = runs.pool();
        squad_policies::runners::may_start(
            &self.roots.core(i).policy.runners,
            c,
            &pool,
            wall,
            true,
        )
        .map_err(RunError::Wait)?;
        if pool.running >= pool.max_concurrent {
            return Err(RunError::Wait(squad_policies::runners::Wait::PoolFull));
        }
        let pid = self.start_run(i, c, wall).map_err(RunError::Start)?;
        Ok((c.session.clone(), pid))
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
