//! The shell's side of agent runs: what the runs' processes do turned into
//! the core's inputs, and the run effects carried out (spawn, signal,
//! contain, adopt through [`crate::runners::Processes`]; run records, the
//! worktree's end, the lead's message written). Every decision is the
//! core's (`core/runs.rs`; what the lead is told, `core/runs/lead.rs`); what
//! is left here is I/O: polling exits, reading run records and the run.log
//! tail, and turning a control request into an input and its answer.
//!
//! One call site in the loop: [`EventLoop::supervise_runs`] at the end of
//! every batch, so a task completed in a batch starts its dependents in the
//! same batch. While runs are live the core sets the runs timer every
//! `POLL` to see exits (runs re-adopted after a restart are not squadd's
//! children: only a look sees them end).

use super::EventLoop;
use super::core::runs::{Asked, RecordsRead, RunKey, Supervise};
use super::core::{Effect, Input, Now, RootId};
use super::roots::RunAnswer;
use super::runs::{FileFacts, RunError, keep_record, start};
use super::timers::Timer;
use crate::runners;
use chrono::{DateTime, Utc};
use std::path::Path;

impl EventLoop {
    /// config.json changed: handed to the core (the new one if valid).
    pub(super) fn reload_config(&mut self, i: RootId) {
        let (config, error) = super::runs::load_config(&self.roots.core(i).root);
        let config = error.is_none().then(|| Box::new(config));
        let now = Now { wall: Utc::now() };
        self.step(i, Input::ConfigRead { config, error }, now);
    }

    /// After the start-up scan: the root's run records, as read, handed to
    /// the core with the root's processes to ask about each (which to look
    /// for and which to re-adopt, lose or dispatch again is the core's).
    pub(super) fn adopt_runs(&mut self, i: RootId, now: DateTime<Utc>) {
        let records = runners::all_records(&self.roots.core(i).root);
        let now = Now { wall: now };
        let (core, shell) = self.roots.both_mut(i);
        let input = Input::RunRecordsRead(RecordsRead {
            records,
            procs: shell.procs.as_ref(),
            facts: &FileFacts,
        });
        let effects = super::core::Core::new(i, core).step(input, now);
        self.perform(effects, now);
    }

    /// The one call of the loop: for each root, the exits of the runs the
    /// core watches (polled here), handed to the core, which orders the
    /// rest (the look, then dispatch: [`Input::SuperviseRuns`]).
    pub(super) fn supervise_runs(&mut self, wall: DateTime<Utc>) {
        // Each root's look sets the timer again (the earliest wins).
        self.timers.cancel(&Timer::Runs);
        let now = Now { wall };
        for i in self.roots.ids() {
            let (core, shell) = self.roots.both_mut(i);
            let mut exits = Vec::new();
            let mut outputs = Vec::new();
            for (run, pid, start) in core.runs.watched() {
                if let Some(seen) = shell.procs.output(pid) {
                    outputs.push((run.clone(), Box::new(seen)));
                }
                if let Some(ended) = shell.procs.try_exit(pid, start) {
                    exits.push((run, ended));
                }
            }
            // What the runs' output said first: a run past its budget is
            // stopped in the look that follows.
            for (run, seen) in outputs {
                self.step(i, Input::RunOutput { run, seen }, now);
            }
            let (core, shell) = self.roots.both_mut(i);
            // Cluster call site (docs/cluster.md): only the agent's host
            // starts its runs (the core knows whether this host leads).
            let cluster = shell
                .cluster
                .is_some()
                .then(|| crate::cluster::host_id(&core.root));
            let input = Input::SuperviseRuns(Supervise {
                exits,
                facts: &FileFacts,
                cluster,
            });
            self.step(i, input, now);
        }
    }

    /// The `runs` method of the control socket: the request handed to the
    /// core as asked; the answer is the effect it returned.
    pub(super) fn answer_runs(
        &mut self,
        i: RootId,
        action: &str,
        session: Option<&str>,
        task: Option<&str>,
        text: Option<&str>,
    ) -> crate::control::Response {
        use crate::control::Response;
        let now = Now { wall: Utc::now() };
        let input = Input::RunsAsked(Asked {
            action: action.to_string(),
            session: session.map(str::to_string),
            task: task.map(str::to_string),
            text: text.map(str::to_string),
        });
        self.roots.shell_mut(i).run_reply = None;
        self.step(i, input, now);
        match self.roots.shell_mut(i).run_reply.take() {
            Some(RunAnswer::Listed(runs)) => match serde_json::to_value(runs) {
                Ok(v) => Response::ok(v),
                Err(e) => Response::error(e.to_string()),
            },
            Some(RunAnswer::Reply(Ok((session, pid)))) => {
                Response::ok(serde_json::json!({"session": session, "pid": pid}))
            }
            Some(RunAnswer::Reply(Err(e))) => Response::error(e.to_string()),
            None => Response::error("no answer from run supervision".to_string()),
        }
    }

    /// Carries out one run effect (see [`Effect`]).
    pub(super) fn perform_run(&mut self, effect: Effect, now: Now) {
        match effect {
            Effect::SpawnRun { root, spec } => {
                let (core, shell) = self.roots.both_mut(root);
                let policy = &core.policy.runners;
                let input = match start::spawn(
                    &core.root,
                    shell.procs.as_mut(),
                    policy.log_max_bytes,
                    &policy.pass_env,
                    &spec,
                    now.wall,
                ) {
                    Ok((rec, dir)) => Input::RunSpawned {
                        spec,
                        rec: Box::new(rec),
                        dir,
                    },
                    Err((written, error)) => {
                        tracing::warn!(task = %spec.candidate.task, error = %error, "cannot start the runner");
                        Input::SpawnFailed {
                            spec,
                            written,
                            error,
                        }
                    }
                };
                self.step(root, input, now);
            }
            Effect::SignalRun { root, pid, signal } => {
                if let Err(e) = self.roots.shell_mut(root).procs.signal_group(pid, signal) {
                    tracing::warn!(pid, error = %e, "cannot signal a run");
                }
            }
            Effect::ContainRun {
                root,
                run,
                rec,
                signal,
                report,
            } => {
                let procs = &mut self.roots.shell_mut(root).procs;
                let left = procs.contain(&rec, signal);
                if !report {
                    return;
                }
                let drained = procs.drained(rec.pid);
                // The output written after the leader's end (Claude Code's
                // totals come last) is in the record before the run's end.
                if let Some(seen) = procs.output(rec.pid) {
                    self.step(
                        root,
                        Input::RunOutput {
                            run: run.clone(),
                            seen: Box::new(seen),
                        },
                        now,
                    );
                }
                if left > 0 {
                    tracing::debug!(task = %rec.task, left, "processes of an ended run are left");
                }
                self.run_left(root, run, left, drained, now);
            }
            Effect::AdoptRun {
                root,
                rec,
                dir,
                log_max,
            } => self.roots.shell_mut(root).procs.adopt(&rec, &dir, log_max),
            Effect::StopRun { root, run, pid } => {
                let sent = self
                    .roots
                    .shell_mut(root)
                    .procs
                    .signal_group(pid, runners::Signal::Term);
                match sent {
                    Ok(()) => {
                        self.step(root, Input::RunStopped { run }, now);
                    }
                    Err(e) => {
                        let e = RunError::Signal(e.to_string());
                        self.roots.shell_mut(root).run_reply = Some(RunAnswer::Reply(Err(e)));
                    }
                }
            }
            Effect::WriteRunRecord { dir, rec } => keep_record(&dir, &rec),
            // issue 30 (docs/worktrees.md): a completed worktree run's
            // branch is merged into the session's branch, or held with word
            // to the lead.
            // The outcome goes back to the core, which tells the lead what
            // happened and frees the dependents (core/runs/handover.rs).
            Effect::FinishWorktree {
                root,
                dir,
                rec,
                by_hand,
                review,
            } => {
                let core = self.roots.core(root);
                let outcome = if review {
                    crate::worktree::to_review(&core.root, &dir, &rec)
                } else {
                    crate::worktree::finish(&core.root, &core.policy, &dir, &rec)
                };
                let run = (rec.session.clone(), rec.task.clone());
                let input = Input::WorktreeFinished {
                    run,
                    outcome,
                    by_hand,
                };
                self.step(root, input, now);
            }
            // issue 44 item 4: what the branch changes, for the core to
            // pair with its session's other unmerged runs.
            Effect::LookAtTree { root, run, dir } => {
                let core = self.roots.core(root);
                let found = crate::worktree::changes(&core.root, &dir, &run.0, &run.1);
                self.step(root, Input::TreeLooked { run, found }, now);
            }
            Effect::DropWorktree {
                root,
                dir,
                rec,
                rejected,
            } => {
                let core = self.roots.core(root);
                let outcome = match rejected {
                    Some(comment) => {
                        match crate::worktree::reject_branch(&dir, &core.root, &rec, &comment) {
                            Some(_) => crate::worktree::Finished::Rejected(comment),
                            None => crate::worktree::Finished::NoTree,
                        }
                    }
                    None => match crate::worktree::drop_branch(&dir, &core.root, &rec) {
                        Some(_) => crate::worktree::Finished::Dropped,
                        None => crate::worktree::Finished::NoTree,
                    },
                };
                let run = (rec.session.clone(), rec.task.clone());
                let input = Input::WorktreeFinished {
                    run,
                    outcome,
                    by_hand: true,
                };
                self.step(root, input, now);
            }
            Effect::TellLead {
                root,
                session,
                task,
                subject,
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
                self.tell_lead(root, &session, (task, subject), &text, now);
            }
            Effect::RunsLooked { root, retry_at } => {
                self.step(root, Input::RunsLooked { retry_at }, now);
            }
            Effect::RunReply { root, reply } => {
                self.roots.shell_mut(root).run_reply = Some(RunAnswer::Reply(reply));
            }
            Effect::WriteLeadMessage { path, text, .. } => Self::write_lead_message(&path, &text),
            Effect::DispatchRuns { root, cluster } => {
                self.step(root, Input::DispatchDue { cluster }, now);
            }
            Effect::RunsListed { root, runs } => {
                self.roots.shell_mut(root).run_reply = Some(RunAnswer::Listed(runs));
            }
            other => {
                self.perform(vec![other], now);
            }
        }
    }

    fn run_left(&mut self, root: RootId, run: RunKey, left: usize, drained: bool, now: Now) {
        let input = Input::RunLeft {
            run,
            left,
            drained,
            facts: &FileFacts,
        };
        self.step(root, input, now);
    }

    /// Word to the lead: handed to the core (whether anyone is told and
    /// what, `core/runs/lead.rs`) with what only the shell has, a salt
    /// distinct for each message of this process.
    fn tell_lead(
        &mut self,
        i: RootId,
        session: &str,
        (task, subject): (Option<String>, String),
        text: &str,
        now: Now,
    ) {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let salt = ((std::process::id() & 0xffff) << 16) | (n & 0xffff);
        let input = Input::LeadMessageDue {
            session: session.to_string(),
            task,
            subject,
            text: text.to_string(),
            salt,
        };
        self.step(i, input, now);
    }

    /// Carries out [`Effect::WriteLeadMessage`].
    fn write_lead_message(path: &Path, text: &str) {
        // Never through a link planted on the way (see safefs).
        if let Err(e) = crate::safefs::write_atomic(path, text.as_bytes()) {
            tracing::warn!(error = %e, "cannot write the message to the lead");
        }
    }
}
