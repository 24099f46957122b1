//! Agent runs as the core's inputs and effects (docs/runners.md): each
//! root's runs ([`Runs`]: config.json in force, live runs, past records)
//! are part of its [`Root`]; what a run's process did comes in as an
//! [`Input`](super::Input) (exited, spawned or not, what is left of it, met
//! again after a restart, stopped by hand) and what to do with processes
//! leaves as effects (spawn, signal, contain, adopt), beside the records,
//! events and word to the lead. The decisions themselves are in
//! [`decide`]; the shell's side is `daemon/processes.rs`.

pub(crate) mod by_hand;
mod calls;
pub(crate) mod decide;
pub(crate) mod handover;
pub(crate) mod lead;
pub(crate) mod output;
pub(crate) mod overlap;
mod restart;
pub(crate) mod review;

pub(crate) use restart::found;

pub(crate) use calls::{Asked, RecordsRead, Supervise, records_read, step, supervise};

pub(crate) use by_hand::RunError;

use super::{Effect, Now, Root, RootId, timer::Timer};
use crate::events::EventKind;
use crate::runners::{Ended, Exit, RunRecord, RunState, Signal};
use chrono::{DateTime, Utc};
use decide::Watch;
use squad_policies::runners::{Candidate, Pool, RunnerSpec};
use squad_protocol::config::RuntimeConfig;
use squad_protocol::model::{TaskAssignment, TaskStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often live runs are looked at: runs re-adopted after a restart are
/// not squadd's children, only a look sees them end.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// A run's key: (session, task).
pub(crate) type RunKey = (String, String);

/// One live run.
#[derive(Debug, Clone)]
struct Live {
    rec: RunRecord,
    dir: PathBuf,
    session_dir: PathBuf,
    watch: Watch,
    /// How its leader ended, once it did: the run is stopping until
    /// nothing of it is left.
    ended: Option<Ended>,
    /// Usage recorded before squadd met the run again after a restart
    /// (the output it reads from then on counts from zero).
    usage_base: Option<squad_policies::usage::Usage>,
}

/// The runs of one root.
#[derive(Debug, Clone, Default)]
pub(crate) struct Runs {
    /// config.json in force.
    pub config: RuntimeConfig,
    live: BTreeMap<RunKey, Live>,
    /// The last record of each task not running now.
    past: BTreeMap<RunKey, RunRecord>,
    /// Whether runs were live when the last look began (`pool-empty` is
    /// said when the look and the dispatch after it leave none).
    had_live: bool,
    /// Where each worktree run's branch stands (docs/worktrees.md,
    /// "Hand-over"): dependents and the session's end wait for it.
    trees: BTreeMap<RunKey, handover::Handover>,
    /// Sessions that ended whose wrap-up waits for their runs and
    /// branches: (session, status).
    ending: BTreeMap<String, String>,
    /// What the unmerged branches change, and what the lead was told of
    /// their overlaps (docs/worktrees.md, "Overlap told before merge").
    seen: overlap::Seen,
}

/// What the core asks the shell about the session files while it decides
/// (the shell reads them; like the "still unread?" of escalations).
pub(crate) trait RunFacts {
    /// Whether the run's progress file says `completed` (read when the
    /// index may not have caught up with an agent that wrote it and exited).
    fn completed_in_file(&self, session_dir: &Path, rec: &RunRecord) -> bool;
    /// When the agent last wrote a protocol file in the session.
    fn last_write(&self, session_dir: &Path, agent: &str) -> Option<DateTime<Utc>>;
    /// The run's worktree as recorded (state, hold's summary), when it
    /// ran in one of its own (read at start-up).
    fn tree_state(
        &self,
        _session_dir: &Path,
        _rec: &RunRecord,
    ) -> Option<(crate::worktree::TreeState, Option<String>)> {
        None
    }
}

/// Everything decided before a run's process starts; the shell prepares
/// the run's folder, prompt, worktree and record and spawns it, then tells
/// the core ([`super::Input::RunSpawned`] or [`super::Input::SpawnFailed`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunSpec {
    /// The task to run.
    pub candidate: Candidate,
    /// Its session's directory.
    pub session_dir: PathBuf,
    /// Its full plan.
    pub plan: TaskAssignment,
    /// The runner entry.
    pub runner: RunnerSpec,
    /// Whether it runs in a worktree of its own (docs/worktrees.md).
    pub worktree: bool,
    /// `runners.worktree_setup`: the lines run in its new worktree before
    /// the agent starts.
    pub setup: Vec<String>,
    /// `runners.worktree_setup_timeout`.
    pub setup_timeout: Duration,
    /// The model config.json gives the agent (`None`: the CLI's own).
    pub model: Option<String>,
    /// MCP servers of config.json: (name, type, tools).
    pub mcp: Vec<(String, String, Vec<String>)>,
    /// config.json's default time limit.
    pub default_timeout: Duration,
    /// `squadctl run` asked for it (its answer waits for the outcome).
    pub by_hand: bool,
    /// `squadctl review changes`: the lead's comment, put in the run's
    /// prompt (docs/review.md).
    pub review: Option<String>,
    /// `review changes`: the agent CLI's conversation the run resumes
    /// (the previous run's recorded `conversation`; docs/runners.md,
    /// "Resuming the agent's conversation").
    pub resume: Option<String>,
}

/// A run's record as the shell found it after a restart, with what it saw
/// of its process.
#[derive(Debug, Clone)]
pub(crate) struct FoundRun {
    /// Its session's directory.
    pub session_dir: PathBuf,
    /// run.json as read.
    pub rec: RunRecord,
    /// For a run recorded without a pid: the process found by its
    /// environment (pid, start time).
    pub found: Option<(u32, u64)>,
    /// Whether the process (the record's, or the one found) is alive and
    /// really that run.
    pub alive: bool,
}

/// A live run as `squadctl runs` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct RunView {
    /// The record.
    #[serde(flatten)]
    pub record: RunRecord,
    /// run directory.
    pub dir: String,
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

pub(super) fn record(dir: &Path, rec: &RunRecord) -> Effect {
    Effect::WriteRunRecord {
        dir: dir.to_path_buf(),
        rec: Box::new(rec.clone()),
    }
}

fn emit(id: RootId, session: &str, dir: &Path, kind: EventKind) -> Effect {
    Effect::Emit {
        root: id,
        session: Some(session.to_string()),
        path: Some(dir.to_path_buf()),
        kind,
    }
}

fn tell_lead(id: RootId, rec: &RunRecord, text: String, tail_of: Option<PathBuf>) -> Effect {
    Effect::TellLead {
        root: id,
        session: rec.session.clone(),
        task: Some(rec.task.clone()),
        subject: format!("run of {} failed", rec.task),
        text,
        tail_of,
    }
}

/// Word to the lead about `task` under `subject` (what happened, in a few
/// words).
fn tell_lead_about(id: RootId, session: &str, task: &str, subject: String, text: String) -> Effect {
    Effect::TellLead {
        root: id,
        session: session.to_string(),
        task: Some(task.to_string()),
        subject,
        text,
        tail_of: None,
    }
}

impl Runs {
    /// The live runs.
    pub(crate) fn live(&self) -> Vec<RunView> {
        self.live
            .values()
            .map(|l| RunView {
                record: l.rec.clone(),
                dir: l.dir.display().to_string(),
            })
            .collect()
    }

    /// The live runs whose leader was not seen ended yet: (key, pid,
    /// process start), for the shell to look at.
    pub(crate) fn watched(&self) -> Vec<(RunKey, u32, u64)> {
        self.live
            .iter()
            .filter(|(_, l)| l.ended.is_none())
            .map(|(k, l)| (k.clone(), l.rec.pid, l.rec.process_start))
            .collect()
    }

    /// What is running now.
    fn pool(&self) -> Pool {
        Pool {
            running: self.live.len(),
            max_concurrent: usize::try_from(self.config.sessions.max_concurrent)
                .unwrap_or(usize::MAX),
            busy_agents: self.live.values().map(|l| l.rec.agent.clone()).collect(),
            busy_tasks: self.live.keys().cloned().collect(),
        }
    }

    /// The earliest retry due after `now` (dispatch wakes for it).
    fn next_retry(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.past
            .values()
            .filter(|r| !r.held && !r.completed)
            .filter_map(|r| r.retry_at)
            .filter(|at| *at > now)
            .min()
    }
}

/// Whether a run's task is completed: in the index, or its progress file
/// (the shell's answer).
fn completed(root: &Root, facts: &dyn RunFacts, session_dir: &Path, rec: &RunRecord) -> bool {
    let indexed = root
        .sessions
        .get(&rec.session)
        .and_then(|s| s.tasks().get(rec.task.as_str()))
        .is_some_and(|t| t.state == TaskStatus::Completed);
    indexed || facts.completed_in_file(session_dir, rec)
}

/// config.json was read again: the new one if valid (`None`: the previous
/// stays), said, and runs looked at now.
pub(crate) fn config_read(
    root: &mut Root,
    id: RootId,
    config: Option<RuntimeConfig>,
    error: Option<String>,
) -> Vec<Effect> {
    if let Some(config) = config {
        root.runs.config = config;
    }
    vec![
        Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::ConfigReloaded { error },
        },
        Effect::SetTimer {
            timer: Timer::Runs,
            after: Duration::ZERO,
        },
    ]
}

fn contain(id: RootId, key: &RunKey, rec: &RunRecord, signal: Signal, report: bool) -> Effect {
    Effect::ContainRun {
        root: id,
        run: key.clone(),
        rec: Box::new(rec.clone()),
        signal,
        report,
    }
}

/// The record of run `c` about to start at `wall` with time limit `limit`:
/// `running`, its pid not known yet (written before the spawn, so a squadd
/// killed in between finds it and starts the same run again).
pub(crate) fn new_record(c: &Candidate, wall: DateTime<Utc>, limit: Duration) -> RunRecord {
    RunRecord {
        task: c.task.clone(),
        agent: c.agent.clone(),
        session: c.session.clone(),
        attempt: c.attempts + 1,
        state: RunState::Running,
        pid: 0,
        process_start: 0,
        started_at: wall,
        deadline: decide::deadline(wall, limit),
        command: Vec::new(),
        exit: None,
        completed: false,
        retry_at: None,
        held: false,
        model: None,
        usage: None,
        model_warning: None,
        over_budget: None,
        earlier_usage: None,
        overlaps: Default::default(),
        conversation: None,
    }
}

/// A run just started: live from now on (its past record forgotten).
fn started(runs: &mut Runs, rec: RunRecord, dir: PathBuf, session_dir: PathBuf) {
    let key = (rec.session.clone(), rec.task.clone());
    runs.past.remove(&key);
    let live = Live {
        rec,
        dir,
        session_dir,
        watch: Watch::default(),
        ended: None,
        usage_base: None,
    };
    runs.live.insert(key, live);
}

/// The shell saw a run's leader end.
pub(crate) fn exited(root: &mut Root, run: &RunKey, ended: Ended) -> Vec<Effect> {
    if let Some(live) = root.runs.live.get_mut(run)
        && live.ended.is_none()
    {
        live.ended = Some(ended);
    }
    Vec::new()
}

/// The time to look at every live run: time limits (SIGTERM, then SIGKILL
/// after the grace), idleness; once its leader ended, what is left of the
/// run is ended too (SIGTERM, SIGKILL after the grace: the shell reports
/// what was left, [`left`]).
pub(crate) fn due(root: &mut Root, id: RootId, facts: &dyn RunFacts, now: Now) -> Vec<Effect> {
    let policy = &root.policy.runners;
    let runs = &mut root.runs;
    runs.had_live = !runs.live.is_empty();
    let mut out = Vec::new();
    for (key, live) in &mut runs.live {
        if live.ended.is_some() {
            let signal = decide::leftover_signal(&mut live.watch, policy, now.wall);
            out.push(contain(id, key, &live.rec, signal, true));
            continue;
        }
        let (session_dir, agent) = (&live.session_dir, &live.rec.agent);
        let steps = decide::look(
            &live.rec,
            &mut live.watch,
            policy,
            || facts.last_write(session_dir, agent),
            now.wall,
        );
        for step in steps {
            out.push(match step {
                decide::Step::Signal(signal) => Effect::SignalRun {
                    root: id,
                    pid: live.rec.pid,
                    signal,
                },
                decide::Step::Event(kind) => emit(id, &live.rec.session, &live.dir, kind),
            });
        }
    }
    out
}

/// What was left of an ended run after [`Effect::ContainRun`]: when nothing
/// is and its output is drained (or the grace and the linger passed), the
/// run's end (its record, `agent-exited`, its worktree finished, word to
/// the lead, a retry or a hold).
pub(crate) fn left(
    root: &mut Root,
    id: RootId,
    run: &RunKey,
    left: usize,
    drained: bool,
    facts: &dyn RunFacts,
    now: Now,
) -> Vec<Effect> {
    let policy = &root.policy.runners;
    let Some(live) = root.runs.live.get(run) else {
        return Vec::new();
    };
    let Some(ended) = live.ended else {
        return Vec::new();
    };
    if !decide::gone(&live.watch, policy, left, drained, now.wall) {
        return Vec::new();
    }
    let Some(live) = root.runs.live.remove(run) else {
        return Vec::new();
    };
    let done = completed(root, facts, &live.session_dir, &live.rec);
    let decide::Exited {
        rec,
        event,
        tell_lead: text,
    } = decide::exited(
        live.rec,
        &live.watch,
        &root.policy.runners,
        done,
        ended,
        now.wall,
    );
    let mut out = vec![
        record(&live.dir, &rec),
        emit(id, &rec.session, &live.dir, event),
    ];
    if done {
        // Its dependents and its session wait for the merge's outcome
        // ([`handover::finished`]), or for the lead's review.
        if let Some(h) = root.runs.trees.get_mut(run) {
            *h = handover::Handover::Merging;
        }
        out.push(Effect::FinishWorktree {
            root: id,
            dir: live.dir.clone(),
            rec: Box::new(rec.clone()),
            by_hand: false,
            review: review::wanted(root, run, &rec.agent),
        });
    }
    if let Some(text) = text {
        out.push(tell_lead(id, &rec, text, Some(live.dir.clone())));
    }
    root.runs.past.insert(run.clone(), rec);
    // The session's last run ended: its wrap-up, if it waited for it.
    out.extend(handover::wrapups_due(root, id));
    out
}

/// After the look: ready tasks started within the pool (when the policy
/// dispatches), `pool-empty` when the runs ended, and the next look
/// (every [`POLL`] while runs are live, else at the next retry).
pub(crate) fn dispatch(
    root: &mut Root,
    id: RootId,
    cluster: Option<&(String, bool)>,
    now: Now,
) -> Vec<Effect> {
    let mut out = Vec::new();
    let mut next = None;
    if root.policy.runners.dispatch {
        let mut candidates = candidates(root);
        if let Some((here, leads)) = cluster {
            let runners = &root.policy.runners;
            candidates.retain(|c| runners.dispatches_here(&c.agent, here, *leads));
        }
        if !candidates.is_empty() {
            let start = squad_policies::runners::dispatch(
                &root.policy.runners,
                &candidates,
                &root.runs.pool(),
                now.wall,
            );
            for c in start {
                out.extend(start_run(root, id, c, false, now));
            }
        }
        next = root.runs.next_retry(now.wall);
    }
    // The spawns above are carried out before this: the pool is as it
    // will be when `pool-empty` would be said.
    out.push(Effect::RunsLooked {
        root: id,
        retry_at: next,
    });
    out
}

/// The end of a look, after the spawns: `pool-empty`, the next look.
pub(crate) fn looked(root: &mut Root, id: RootId, retry_at: Option<DateTime<Utc>>) -> Vec<Effect> {
    let mut out = Vec::new();
    let runs = &mut root.runs;
    if runs.had_live && runs.live.is_empty() {
        out.push(Effect::Emit {
            root: id,
            session: None,
            path: None,
            kind: EventKind::PoolEmpty,
        });
    }
    runs.had_live = false;
    if !runs.live.is_empty() {
        out.push(Effect::SetTimerEarlier {
            timer: Timer::Runs,
            after: POLL,
        });
    } else if let Some(at) = retry_at {
        out.push(Effect::SetTimerEarlierAt {
            timer: Timer::Runs,
            at,
        });
    }
    out
}

/// A run to start: its spec, or (no valid plan, no runner) its start
/// failed at once.
pub(super) fn start_run(
    root: &mut Root,
    id: RootId,
    c: Candidate,
    by_hand: bool,
    now: Now,
) -> Vec<Effect> {
    match spec(root, &c, by_hand) {
        Ok(spec) => vec![Effect::SpawnRun {
            root: id,
            spec: Box::new(spec),
        }],
        Err(error) => spawn_failed(root, id, c, by_hand, None, error.to_string(), now),
    }
}

/// What is decided before a run starts (no file read).
fn spec(root: &Root, c: &Candidate, by_hand: bool) -> Result<RunSpec, RunError> {
    let plan = root
        .sessions
        .get(&c.session)
        .and_then(|s| s.index().full_plan(&c.task))
        .ok_or_else(|| RunError::NoPlan(c.task.clone()))?;
    let policy = &root.policy.runners;
    let runner = policy
        .runner_for(&c.agent)
        .cloned()
        .ok_or_else(|| RunError::NoRunner(c.agent.clone()))?;
    let config = &root.runs.config;
    Ok(RunSpec {
        candidate: c.clone(),
        session_dir: root.session_dir(&c.session),
        plan,
        runner,
        worktree: policy.worktree_for(&c.agent),
        setup: policy.worktree_setup.clone(),
        setup_timeout: policy.worktree_setup_timeout,
        model: config.model_for(&c.agent).map(str::to_string),
        mcp: config
            .mcp
            .iter()
            .map(|(n, s)| (n.clone(), s.kind.clone(), s.tools.clone()))
            .collect(),
        default_timeout: Duration::from_millis(config.sessions.default_timeout_ms),
        by_hand,
        review: None,
        resume: None,
    })
}

/// A run started: recorded with its pid, said, live, looked at soon.
pub(crate) fn spawned(
    root: &mut Root,
    id: RootId,
    spec: &RunSpec,
    mut rec: RunRecord,
    dir: PathBuf,
) -> Vec<Effect> {
    // The task's earlier runs: their usage carries over into this record.
    let key = (rec.session.clone(), rec.task.clone());
    rec.earlier_usage = root.runs.past.get(&key).and_then(RunRecord::task_usage);
    let mut out = vec![
        record(&dir, &rec),
        emit(
            id,
            &rec.session,
            &dir,
            EventKind::AgentSpawned {
                task_id: rec.task.clone(),
                agent: rec.agent.clone(),
                pid: rec.pid,
                attempt: rec.attempt,
            },
        ),
        Effect::SetTimerEarlier {
            timer: Timer::Runs,
            after: POLL,
        },
    ];
    if spec.by_hand {
        out.push(Effect::RunReply {
            root: id,
            reply: Ok((rec.session.clone(), rec.pid)),
        });
    }
    if spec.worktree {
        root.runs.trees.insert(key, handover::Handover::Working);
    }
    started(&mut root.runs, rec, dir, spec.session_dir.clone());
    out
}

/// A run that could not start (its folder, its prompt, the guard check or
/// the spawn failed; `written`: the run's folder and the record written
/// before the spawn, if it got that far): recorded failed and held, a
/// `run-failed` event and word to the lead.
pub(crate) fn spawn_failed(
    root: &mut Root,
    id: RootId,
    c: Candidate,
    by_hand: bool,
    written: Option<(PathBuf, RunRecord)>,
    error: String,
    now: Now,
) -> Vec<Effect> {
    let mut out = Vec::new();
    let (dir, rec) = match written {
        Some((dir, mut rec)) => {
            rec.state = RunState::Failed;
            rec.held = true;
            rec.exit = Some(Exit {
                at: now.wall,
                code: None,
                signal: None,
            });
            out.push(record(&dir, &rec));
            (Some(dir), rec)
        }
        // Nothing started and no run.json to record it in: held in memory
        // (so it is not tried again on every batch) and reported.
        None => (
            None,
            RunRecord {
                task: c.task.clone(),
                agent: c.agent.clone(),
                session: c.session.clone(),
                attempt: c.attempts + 1,
                state: RunState::Failed,
                pid: 0,
                process_start: 0,
                started_at: now.wall,
                deadline: now.wall,
                command: Vec::new(),
                exit: None,
                completed: false,
                retry_at: None,
                held: true,
                model: None,
                usage: None,
                model_warning: None,
                over_budget: None,
                earlier_usage: None,
                overlaps: Default::default(),
                conversation: None,
            },
        ),
    };
    out.push(Effect::Emit {
        root: id,
        session: Some(c.session.clone()),
        path: dir,
        kind: EventKind::RunFailed {
            task_id: c.task.clone(),
            agent: c.agent.clone(),
            error: error.clone(),
        },
    });
    out.push(tell_lead(
        id,
        &rec,
        format!(
            "The runner of {} ({}) could not start: {error}. The task is held; `squadctl run {}` tries again.",
            c.task, c.agent, c.task
        ),
        None,
    ));
    if by_hand {
        out.push(Effect::RunReply {
            root: id,
            reply: Err(RunError::Start(error)),
        });
    }
    root.runs.past.insert((c.session, c.task), rec);
    out
}

/// The candidates of a root: ready tasks, and failed runs' tasks.
fn candidates(root: &Root) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (name, core) in &root.sessions {
        if core.ended().is_some() {
            continue;
        }
        for t in core.tasks().values() {
            if t.state == TaskStatus::Completed || !t.unmet.is_empty() {
                continue;
            }
            // A prerequisite's work not on the session's branch yet.
            if !handover::waiting_for(root, name, &t.task_id).is_empty() {
                continue;
            }
            let past = root.runs.past.get(&(name.clone(), t.task_id.clone()));
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

#[cfg(test)]
mod tests;
