//! The shell's calls into run supervision, each one input: a batch's end
//! ([`supervise`]), the `runs` request as asked ([`Asked`]), and the run
//! records read at start-up ([`records_read`], each probed first).

use super::super::Input;
use super::{Effect, FoundRun, Now, Root, RootId, RunFacts, RunKey, due, exited, found};
use crate::runners::{Ended, RunRecord, RunState};
use std::path::{Path, PathBuf};

/// What the shell's processes say of each run record read at start-up:
/// only a run recorded `running` is looked at; one recorded without a pid
/// (squadd was killed between the spawn and the record) is looked for by
/// its environment; alive means the process (recorded or found) is that
/// run's.
fn probe(
    root: &Path,
    records: Vec<(PathBuf, RunRecord)>,
    procs: &dyn crate::runners::Processes,
) -> Vec<FoundRun> {
    records
        .into_iter()
        .map(|(session_dir, rec)| {
            // Stopped by hand and not ended yet: still in progress.
            let running = rec.state == RunState::Running
                || (rec.state == RunState::Stopped && rec.exit.is_none());
            let found = (running && rec.pid == 0)
                .then(|| procs.find_run_process(root, &rec.session, &rec.task))
                .flatten();
            let mut seen = rec.clone();
            if let Some((pid, start)) = found {
                seen.pid = pid;
                seen.process_start = start;
            }
            let alive = running && procs.is_run_process(&seen);
            FoundRun {
                session_dir,
                rec,
                found,
                alive,
            }
        })
        .collect()
}

/// What the shell brings to a batch's end ([`super::Input::SuperviseRuns`]).
pub(crate) struct Supervise<'a> {
    /// The live runs whose leader ended ([`Runs::watched`] as polled).
    pub exits: Vec<(RunKey, Ended)>,
    /// The shell's answers about session files.
    pub facts: &'a dyn RunFacts,
    /// With `cluster:`: this host's id (see [`super::Input::DispatchDue`]).
    pub cluster: Option<String>,
}

/// The `runs` request of the control socket as asked
/// ([`super::Input::RunsAsked`]).
pub(crate) struct Asked {
    /// The action as the client sent it.
    pub action: String,
    /// The session named, if any.
    pub session: Option<String>,
    /// The task named, if any.
    pub task: Option<String>,
    /// The lead's comment (`changes`, `reject`).
    pub text: Option<String>,
}

/// The run records read at start-up ([`super::Input::RunRecordsRead`]).
pub(crate) struct RecordsRead<'a> {
    /// (session directory, run.json) of each record.
    pub records: Vec<(PathBuf, RunRecord)>,
    /// The root's processes (only asked: nothing is started or signalled
    /// while deciding).
    pub procs: &'a dyn crate::runners::Processes,
    /// The shell's answers about session files.
    pub facts: &'a dyn RunFacts,
}

/// The records read at start-up: each probed ([`probe`]), then re-adopted,
/// lost or dispatched again ([`found`]).
pub(crate) fn records_read(
    root: &mut Root,
    id: RootId,
    read: RecordsRead<'_>,
    now: Now,
) -> Vec<Effect> {
    let records = probe(&root.root, read.records, read.procs);
    found(root, id, records, read.facts, now)
}

/// The loop's call at a batch's end: the exits the shell saw are taken in
/// (no effect of their own), every live run is looked at, and only once
/// the look's effects are carried out (what is left of an ended run
/// reported, which may free the pool) are ready tasks dispatched.
pub(crate) fn supervise(root: &mut Root, id: RootId, call: Supervise<'_>, now: Now) -> Vec<Effect> {
    let Supervise {
        exits,
        facts,
        cluster,
    } = call;
    let mut out = Vec::new();
    for (run, ended) in exits {
        out.extend(exited(root, &run, ended));
    }
    out.extend(due(root, id, facts, now));
    out.push(Effect::DispatchRuns { root: id, cluster });
    out
}

/// The agent runs' inputs, taken apart from [`super::super::Core::step`]
/// to keep that match a screen long.
pub(crate) fn step(root: &mut Root, id: RootId, input: Input<'_>, now: Now) -> Vec<Effect> {
    match input {
        Input::ConfigRead { config, error } => {
            super::config_read(root, id, config.map(|c| *c), error)
        }
        Input::RunLeft {
            run,
            left,
            drained,
            facts,
        } => super::left(root, id, &run, left, drained, facts, now),
        Input::WorktreeFinished {
            run,
            outcome,
            by_hand,
        } => super::handover::finished(root, id, &run, outcome, by_hand),
        Input::TreeLooked { run, found } => super::overlap::looked(root, id, &run, found),
        Input::DispatchDue { cluster } => {
            // Only the agent's host starts its runs; the leader those
            // of agents without a `host:` (the gate: core/outputs.rs).
            let cluster = cluster.map(|here| (here, root.leads));
            super::dispatch(root, id, cluster.as_ref(), now)
        }
        Input::RunsLooked { retry_at } => super::looked(root, id, retry_at),
        Input::RunSpawned { spec, rec, dir } => super::spawned(root, id, &spec, *rec, dir),
        Input::SpawnFailed {
            spec,
            written,
            error,
        } => {
            // A run the lead asked for in review that could not start: its
            // branch waits for the lead again (docs/review.md).
            if spec.review.is_some() {
                let key = (spec.candidate.session.clone(), spec.candidate.task.clone());
                let h = super::handover::Handover::Review(
                    "its run with the changes could not start".into(),
                );
                root.runs.trees.insert(key, h);
            }
            super::spawn_failed(
                root,
                id,
                spec.candidate,
                spec.by_hand,
                written.map(|w| *w),
                error,
                now,
            )
        }
        Input::RunStopped { run } => super::by_hand::stopped(root, id, &run, now),
        Input::RunOutput { run, seen } => super::output::seen(root, id, &run, *seen, now),
        Input::LeadMessageDue {
            session,
            task,
            subject,
            text,
            salt,
        } => {
            let about = super::lead::About { task, subject };
            super::lead::due(root, id, &session, about, &text, salt, now)
        }
        Input::SuperviseRuns(call) => super::supervise(root, id, call, now),
        Input::RunsAsked(asked) => super::by_hand::asked(root, id, asked, now),
        Input::RunRecordsRead(read) => super::records_read(root, id, read, now),
        // Not a run's input: `Core::step` routes none here.
        _ => Vec::new(),
    }
}
