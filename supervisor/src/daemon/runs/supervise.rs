//! Supervision of a root's runs as `RootRuns` methods: what was seen of
//! each run's process (through [`crate::runners::Processes`]) and the
//! session's facts (through [`RunFacts`]) in, the decisions of
//! [`super::decide`] carried out on the processes, and what the rest of
//! squadd must do ([`Out`]: records, events, word to the lead) returned in
//! order. No `Supervisor` here.

use super::decide::{self, Watch};
use super::{Live, RootRuns, RunError};
use crate::daemon::session::SessionCore;
use crate::events::EventKind;
use crate::runners::{self, RunRecord, RunState, Signal};
use chrono::{DateTime, Utc};
use squad_policies::runners::{Candidate, Pool, RunnersPolicy};
use squad_protocol::model::TaskStatus;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// A run whose task completed: if it ran in a worktree of its own, merge
    /// its branch or hold it (docs/worktrees.md; a no-op otherwise).
    FinishWorktree {
        /// The run's folder.
        dir: PathBuf,
        /// The run's final record.
        rec: RunRecord,
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

impl RootRuns {
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
        if completed {
            out.push(Out::FinishWorktree {
                dir: live.dir.clone(),
                rec: rec.clone(),
            });
        }
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
    pub(super) fn started(&mut self, rec: RunRecord, dir: PathBuf, session_dir: PathBuf) {
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

    /// The candidates among `sessions`: ready tasks, and failed runs' tasks.
    pub(super) fn candidates(&self, sessions: &BTreeMap<String, SessionCore>) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (name, core) in sessions {
            if core.ended().is_some() {
                continue;
            }
            for t in core.tasks().values() {
                if t.state == TaskStatus::Completed || !t.unmet.is_empty() {
                    continue;
                }
                let past = self.past.get(&(name.clone(), t.task_id.clone()));
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

    /// What is running now.
    pub(super) fn pool(&self) -> Pool {
        let r = self;
        Pool {
            running: r.live.len(),
            max_concurrent: usize::try_from(r.config.sessions.max_concurrent).unwrap_or(usize::MAX),
            busy_agents: r.live.values().map(|l| l.rec.agent.clone()).collect(),
            busy_tasks: r.live.keys().cloned().collect(),
        }
    }

    /// The candidate `squadctl run` names (the task in `session`, or in
    /// the one session that plans it), whatever its past runs.
    pub(super) fn candidate(
        &self,
        sessions: &BTreeMap<String, SessionCore>,
        session: Option<&str>,
        task: &str,
    ) -> Result<Candidate, RunError> {
        let mut found = Vec::new();
        for (name, core) in sessions {
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
        let past = self.past.get(&(name.clone(), task.to_string()));
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
}
