//! Agent runs in the model: the world's processes (started, signalled,
//! ended), the shell's loop over them (`processes.rs`,
//! `supervise_runs`), word to the lead written as a file, and the
//! oracle's rule for which runs should exist and what each record says,
//! written from scratch from the snapshot (never from `core/runs.rs`).

use super::oracle::*;
use super::world::{Facts, Proc, World};
use super::*;
use crate::daemon::core::runs::{RunKey, RunSpec};
use crate::runners::{Ended, RunRecord, RunState, Signal};
use squad_protocol::model::SessionState;

/// The runner policy of every root: every agent dispatched, two retries,
/// a minute after a failure (two minutes after the second), a minute's
/// grace between SIGTERM and SIGKILL, no idle reports, the lead told.
pub(super) const RUNNERS: &str = "runners:\n  dispatch: true\n  lead: lead\n  grace: 1m\n  idle_after: none\n  retry_backoff: 1m\n  agents:\n    \"*\":\n      command: [\"agent\"]\n      max_retries: 2\n";

/// config.json: the pool's size, a run's default limit of 20 minutes.
pub(super) fn config(max: u64) -> squad_protocol::config::RuntimeConfig {
    let mut c = squad_protocol::config::RuntimeConfig::default();
    c.sessions.max_concurrent = max.max(1);
    c.sessions.default_timeout_ms = 20 * 60 * 1000;
    c
}

impl World {
    /// The one call of the loop at a batch's end (`supervise_runs`): for
    /// each root, the runs whose leader ended, the look, then dispatch.
    pub(super) fn supervise(&mut self) {
        // Each root's look sets the timer again (the earliest wins).
        self.timers.remove(&Timer::Runs);
        for p in self.procs.values_mut() {
            p.looked = p.ended.is_some();
        }
        for r in 0..ROOTS {
            let rid = id(r);
            let exits: Vec<(RunKey, Ended)> = self.cores[r]
                .runs
                .watched()
                .into_iter()
                .filter_map(|(run, pid, _)| Some((run, self.procs.get(&pid)?.ended?)))
                .collect();
            // One input, as `processes.rs` hands it over; the dispatch
            // comes back last (`Effect::DispatchRuns`).
            let now = self.wall();
            let facts = Facts(&self.snaps[r]);
            let call = crate::daemon::core::runs::Supervise {
                exits,
                facts: &facts,
                cluster: None,
            };
            let effects = Core::new(rid, &mut self.cores[r]).step(Input::SuperviseRuns(call), now);
            self.perform(effects);
        }
    }

    /// [`Effect::SpawnRun`] as `runs/start.rs` carries it out: the record
    /// written first, then the process started (or not: the root's runner
    /// is broken).
    pub(super) fn spawn(&mut self, root: RootId, spec: RunSpec) {
        let r = root.0 as usize;
        let c = &spec.candidate;
        let key = (c.session.clone(), c.task.clone());
        // The oracle's count: a task's runs are numbered from its records.
        let before = self.snaps[r].records.get(&key).map_or(0, |p| p.attempt);
        assert_eq!(c.attempts, before, "{key:?}: runs so far");
        // And by its rule the task may start now, the agent free, the
        // pool with room.
        let want = Known::from_scratch(&self.snaps[r], self.now);
        let running = running(&self.snaps[r]);
        let max = pool_size(&self.snaps[r]);
        assert!(
            running.len() < max,
            "root {r}: {key:?} started in a full pool"
        );
        assert!(
            !running.values().any(|rec| rec.agent == c.agent),
            "root {r}: {key:?} started while {} runs",
            c.agent
        );
        let may = want.sessions.get(&c.session).is_some_and(|s| {
            let task = s.view.tasks.iter().find(|t| t.task_id == c.task);
            task.is_some_and(|t| may_start(&self.snaps[r], &s.view, t, self.now))
        });
        // By hand, the answer is checked against the oracle's (`by_hand.rs`).
        assert!(
            may || spec.by_hand,
            "root {r}: {key:?} started, but may not start"
        );
        let limit = squad_policies::runners::run_timeout(
            Some(&spec.runner),
            spec.plan.meta.timeout,
            spec.default_timeout,
        );
        let dir = crate::runners::run_dir(&spec.session_dir, &c.task);
        // The record written before the spawn, as the shell writes it.
        let mut rec = crate::daemon::core::runs::new_record(c, self.now, limit);
        self.snaps[r].records.insert(key.clone(), rec.clone());
        if self.broken.contains(&root) {
            let input = Input::SpawnFailed {
                spec: Box::new(spec),
                written: Some(Box::new((dir, rec))),
                error: "agent: No such file or directory (os error 2)".into(),
            };
            return self.step(root, input);
        }
        let pid = 1000 + u32::try_from(self.procs.len()).unwrap_or(0);
        rec.pid = pid;
        rec.process_start = u64::from(pid);
        rec.command = spec.runner.command.clone();
        // Runs of odd-numbered tasks ignore SIGTERM.
        let stubborn = c.task.ends_with(['1', '3']);
        self.procs.insert(
            pid,
            Proc {
                root,
                run: key,
                stubborn,
                ended: None,
                termed_at: None,
                looked: false,
                gone_unseen: false,
            },
        );
        let input = Input::RunSpawned {
            spec: Box::new(spec),
            rec: Box::new(rec),
            dir,
        };
        self.step(root, input);
    }

    /// A signal to a run's group ([`Effect::SignalRun`]): SIGTERM ends it
    /// unless it is stubborn, SIGKILL always.
    pub(super) fn signal(&mut self, pid: u32, signal: Signal) {
        let now = self.now;
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if signal == Signal::Term {
            p.termed_at.get_or_insert(now);
        }
        if p.ended.is_none() && (signal == Signal::Kill || !p.stubborn) {
            let n = if signal == Signal::Kill { 9 } else { 15 };
            p.ended = Some(Ended {
                code: None,
                signal: Some(n),
            });
        }
    }

    /// Word to the lead ([`Effect::TellLead`]), written into the session
    /// as a message from squadd: its watch event comes in the next batch.
    pub(super) fn tell_lead(
        &mut self,
        root: RootId,
        session: String,
        task: String,
        subject: String,
    ) {
        self.told += 1;
        let n = self.told;
        let name = format!("role-comm-squadd-to-lead-msg_run{n}.md");
        let text = format!(
            "meta:\n  message_id: msg_run{n}\n  from_agent: squadd\n  to_agent: lead\n  created_at: {}\n  priority: high\ntype: notification\nsubject: {subject}\nmessage: m\ncontext:\n  task_id: {task}\n",
            stamp(self.now)
        );
        self.written
            .push((root.0 as usize, session, name, text.into_bytes()));
    }

    /// A run's process ends on its own: with `ok`, its agent reported
    /// `completed` first (code 0), else code 1 without a report.
    pub(super) fn exit(&mut self, root: usize, session: &str, task: u8, ok: bool) {
        let run = (session.to_string(), format!("task_{task}"));
        let Some((&pid, p)) = self
            .procs
            .iter()
            .find(|(_, p)| p.root == id(root) && p.run == run && p.ended.is_none())
        else {
            return;
        };
        let agent = self.snaps[root]
            .records
            .get(&p.run)
            .map(|r| r.agent.clone());
        if ok && let Some(agent) = agent {
            let text = progress(task, &agent, "completed", self.now);
            let name = format!("role-comm-{agent}-task_{task}.md");
            self.file(root, session, &name, Some(text.into_bytes()));
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.ended = Some(Ended {
                code: Some(if ok { 0 } else { 1 }),
                signal: None,
            });
        }
    }

    // ------------------------------------------------- the runs' oracle

    /// What the snapshot says of a root's runs, checked against the core
    /// and the world: the runs live are the records running; no process
    /// runs unsupervised; one run per agent and per task (a run starts
    /// only while the pool has room, checked by `spawn`);
    /// each ended record holds its retry or hold by the policy's rule;
    /// every task that may start has started while the pool has room; a
    /// run past its time limit was stopped; the runs timer is armed for
    /// the next retry.
    pub(super) fn check_runs(&self, r: usize, want: &Known) {
        let rid = id(r);
        let snap = &self.snaps[r];
        let runners = &snap.policy.runners;
        let live: BTreeSet<RunKey> = self.cores[r]
            .runs
            .live()
            .into_iter()
            .map(|v| (v.record.session, v.record.task))
            .collect();
        let running = running(snap);
        let keys: BTreeSet<RunKey> = running.keys().map(|k| (*k).clone()).collect();
        assert_eq!(live, keys, "root {r}: live runs against records running");
        for (pid, p) in self.procs.iter().filter(|(_, p)| p.root == rid) {
            let rec = snap.records.get(&p.run);
            let current =
                rec.is_some_and(|rec| rec.pid == *pid && super::by_hand::in_progress(rec));
            if p.ended.is_none() {
                assert!(
                    current,
                    "root {r}: process {pid} of {:?} unsupervised",
                    p.run
                );
            }
            if p.looked {
                assert!(
                    !current,
                    "root {r}: {:?} ended before a look, still running",
                    p.run
                );
            }
        }
        let busy: BTreeSet<&str> = running.values().map(|rec| rec.agent.as_str()).collect();
        assert_eq!(busy.len(), running.len(), "root {r}: two runs of one agent");
        // A pool made smaller stops no run: it may hold more than its size
        // until runs end; `spawn` checks that none starts in a full pool.
        let max = pool_size(snap);
        for (key, rec) in &snap.records {
            let proc_ = self.procs.get(&rec.pid);
            expect_record(r, key, rec, proc_, runners, self.now);
        }
        // Every task that may start has started, while the pool has room.
        if running.len() < max {
            for (name, s) in &want.sessions {
                for t in &s.view.tasks {
                    let key = (name.clone(), t.task_id.clone());
                    let may =
                        !busy.contains(t.agent.as_str()) && may_start(snap, &s.view, t, self.now);
                    assert!(
                        !may,
                        "root {r}: {key:?} may start, the pool has room, no run"
                    );
                }
            }
        }
        // The next retry has the runs timer armed for it.
        let next = snap
            .records
            .values()
            .filter(|rec| !rec.held && !rec.completed && !super::by_hand::in_progress(rec))
            .filter_map(|rec| rec.retry_at)
            .filter(|at| *at > self.now)
            .min();
        if let Some(next) = next {
            let armed = self.timers.get(&Timer::Runs);
            assert!(
                armed.is_some_and(|a| *a <= next),
                "root {r}: retry due {next} but runs timer {armed:?}"
            );
        }
    }
}

/// The records of runs in progress (running, or stopping after
/// `squadctl stop`), by (session, task).
fn running(snap: &Snapshot) -> BTreeMap<&RunKey, &RunRecord> {
    snap.records
        .iter()
        .filter(|(_, rec)| super::by_hand::in_progress(rec))
        .collect()
}

/// config.json's pool size.
fn pool_size(snap: &Snapshot) -> usize {
    usize::try_from(snap.config.sessions.max_concurrent).unwrap_or(usize::MAX)
}

/// Whether task `t` of a session (its view `view`) may start now, by the
/// rule (docs/runners.md), whatever runs: its session not ended, the task
/// not completed and every prerequisite completed; never run and pending,
/// or its last run ended without completing, not held, its retries not
/// used up and its backoff passed (the task pending or in progress).
fn may_start(
    snap: &Snapshot,
    view: &crate::derive::SessionView,
    t: &crate::derive::TaskView,
    now: DateTime<Utc>,
) -> bool {
    if matches!(view.status, SessionState::Completed | SessionState::Failed)
        || t.state == TaskStatus::Completed
        || !t.unmet.is_empty()
    {
        return false;
    }
    match snap.records.get(&(view.name.clone(), t.task_id.clone())) {
        None => t.state == TaskStatus::Pending,
        Some(rec) => {
            !rec.completed
                && !rec.held
                && !super::by_hand::in_progress(rec)
                && matches!(t.state, TaskStatus::Pending | TaskStatus::InProgress)
                && rec.attempt <= max_retries(&snap.policy.runners)
                && rec.retry_at.is_none_or(|at| at <= now)
        }
    }
}

fn max_retries(runners: &squad_policies::runners::RunnersPolicy) -> u32 {
    runners.agents.get("*").map_or(0, |s| s.max_retries)
}

/// One run record by the rule, from scratch: a run still running was not
/// stopped before its limit and was stopped once past it (SIGKILL a grace
/// later); a run that could not start is held; a run ended without
/// completing is retried after the backoff (doubled per retry) or, its
/// retries used up, held; a run stopped at its limit says so.
fn expect_record(
    r: usize,
    key: &RunKey,
    rec: &RunRecord,
    p: Option<&Proc>,
    runners: &squad_policies::runners::RunnersPolicy,
    now: DateTime<Utc>,
) {
    let at = format!("root {r} {key:?} run {}", rec.attempt);
    let termed = p.and_then(|p| p.termed_at);
    match rec.state {
        RunState::Running => {
            assert!(rec.exit.is_none() && !rec.held, "{at}: running {rec:?}");
            if let Some(t) = termed {
                assert!(t >= rec.deadline, "{at}: stopped before its limit");
            }
            // Only a process that ignores SIGTERM outlives its limit.
            if now >= rec.deadline && p.is_some_and(|p| p.ended.is_none()) {
                assert!(termed.is_some(), "{at}: past its limit, not stopped");
                let kill = termed.map(|t| t + after_of(runners.grace));
                assert!(
                    kill.is_none_or(|k| now < k),
                    "{at}: no SIGKILL after the grace"
                );
            }
        }
        RunState::Failed => {
            assert!(
                rec.held && rec.retry_at.is_none(),
                "{at}: start failure not held"
            );
        }
        RunState::Exited | RunState::TimedOut => {
            let Some(exit) = &rec.exit else {
                panic!("{at}: ended without an exit");
            };
            let timed_out = termed.is_some();
            assert_eq!(rec.state == RunState::TimedOut, timed_out, "{at}: state");
            if rec.completed {
                assert!(
                    !rec.held && rec.retry_at.is_none(),
                    "{at}: completed {rec:?}"
                );
            } else if rec.attempt > max_retries(runners) {
                assert!(rec.held && rec.retry_at.is_none(), "{at}: retries used up");
            } else {
                let backoff = runners.retry_backoff * (1u32 << (rec.attempt - 1).min(16));
                let backoff = backoff.min(std::time::Duration::from_secs(3600));
                assert!(!rec.held, "{at}: held with a retry left");
                assert_eq!(
                    rec.retry_at,
                    Some(exit.at + after_of(backoff)),
                    "{at}: retry"
                );
            }
        }
        // Over budget: the model world reports no usage, so never.
        RunState::OverBudget => panic!("{at}: over budget without usage: {rec:?}"),
        RunState::Rejected => panic!("{at}: rejected without a review: {rec:?}"),
        // Lost: running when squadd stopped, gone when it started again
        // (never restarted on its own: held).
        RunState::Lost => {
            assert!(
                p.is_some_and(|p| p.gone_unseen),
                "{at}: lost, but squadd saw it end: {rec:?}"
            );
            assert!(
                rec.held && rec.retry_at.is_none() && rec.exit.is_some(),
                "{at}: lost {rec:?}"
            );
        }
        // Stopped by hand: SIGTERM sent, SIGKILL a grace later; once ended,
        // held for a human unless its task completed.
        RunState::Stopped => {
            let Some(t) = termed else {
                panic!("{at}: stopped, never sent SIGTERM");
            };
            if rec.exit.is_none() && p.is_some_and(|p| p.ended.is_none()) {
                let kill = t + after_of(runners.grace);
                assert!(now < kill, "{at}: stopped, no SIGKILL after the grace");
            }
            if rec.exit.is_some() {
                assert_eq!(rec.held, !rec.completed, "{at}: stopped {rec:?}");
                assert!(rec.retry_at.is_none(), "{at}: stopped {rec:?}");
            }
        }
    }
}
