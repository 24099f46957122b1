//! Tests of [`super`].

use super::RunError;

/// The replies `squadctl run|stop` print read as they did when they were
/// strings.
#[test]
fn refusals_read_as_before() {
    let cases = [
        (RunError::NoTask, "give the task"),
        (
            RunError::UnknownAction("go".into()),
            "unknown runs action `go` (list, run, stop)",
        ),
        (RunError::NotPlanned("t1".into()), "no session plans `t1`"),
        (
            RunError::Ambiguous {
                task: "t1".into(),
                sessions: "a, b".into(),
            },
            "`t1` is planned in several sessions (a, b); pass --session",
        ),
        (RunError::Ended("s".into()), "session `s` has ended"),
        (RunError::Completed("t1".into()), "`t1` is completed"),
        (
            RunError::Waiting {
                task: "t2".into(),
                unmet: "t1".into(),
            },
            "`t2` waits for t1",
        ),
        (
            RunError::Wait(squad_policies::runners::Wait::PoolFull),
            "the pool is full (sessions.maxConcurrent)",
        ),
        (
            RunError::NotRunning("t1".into()),
            "`t1` has no run in progress",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}

// ---- Run supervision without processes -------------------------------------

use super::{Out, RootRuns, RunFacts};
use crate::events::EventKind;
use crate::runners::{Ended, Processes, RunRecord, RunState, Signal, SpawnRequest, Spawned};
use chrono::{DateTime, TimeZone, Utc};
use squad_policies::runners::RunnersPolicy;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One pretend process of the [`Fake`].
#[derive(Debug, Clone)]
struct Proc {
    start: u64,
    session: String,
    task: String,
    /// Ignores SIGTERM (only SIGKILL ends it).
    ignores_term: bool,
    /// How it ended (seen by the next `try_exit`).
    ended: Option<Ended>,
}

/// The signals a pretend leftover process survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resists {
    /// SIGTERM (it traps it).
    Term,
    /// Every signal (another user's, or stuck in the kernel).
    All,
}

/// A test double of [`Processes`] (in the manner of watchexec's TestChild):
/// starts nothing, records every signal, and ends a pretend process when a
/// signal would (SIGKILL always, SIGTERM unless it ignores it) or when the
/// test says so.
#[derive(Clone, Default)]
struct Fake(Arc<Mutex<FakeState>>);

#[derive(Default)]
struct FakeState {
    procs: BTreeMap<u32, Proc>,
    /// What each run (by its leader's pid) started that outlives the
    /// leader, and which signals it resists.
    leftovers: BTreeMap<u32, Vec<(u32, Resists)>>,
    /// The signals sent to what was left of a run, by its leader's pid.
    swept: Vec<(u32, Signal)>,
    signals: Vec<(u32, Signal)>,
    spawned: Vec<SpawnRequest>,
}

impl Fake {
    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().unwrap()
    }
    fn add(&self, pid: u32, start: u64, session: &str, task: &str, ignores_term: bool) {
        self.state().procs.insert(
            pid,
            Proc {
                start,
                session: session.into(),
                task: task.into(),
                ignores_term,
                ended: None,
            },
        );
    }
    fn exit(&self, pid: u32, code: i32) {
        if let Some(p) = self.state().procs.get_mut(&pid) {
            p.ended = Some(Ended {
                code: Some(code),
                signal: None,
            });
        }
    }
    fn leave(&self, leader: u32, pid: u32, resists: Resists) {
        self.state()
            .leftovers
            .entry(leader)
            .or_default()
            .push((pid, resists));
    }
    fn signals(&self) -> Vec<(u32, Signal)> {
        self.state().signals.clone()
    }
}

impl Processes for Fake {
    fn spawn(&mut self, request: &SpawnRequest) -> io::Result<Spawned> {
        let mut s = self.state();
        s.spawned.push(request.clone());
        let pid = 1000 + u32::try_from(s.spawned.len()).unwrap_or(0);
        Ok(Spawned {
            pid,
            process_start: 7,
        })
    }
    fn signal_group(&mut self, pid: u32, signal: Signal) -> io::Result<()> {
        let mut s = self.state();
        s.signals.push((pid, signal));
        let Some(p) = s.procs.get_mut(&pid) else {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        };
        if p.ended.is_none() && (signal == Signal::Kill || !p.ignores_term) {
            p.ended = Some(Ended {
                code: None,
                signal: Some(signal.number()),
            });
        }
        Ok(())
    }
    fn try_exit(&mut self, pid: u32, process_start: u64) -> Option<Ended> {
        let mut s = self.state();
        match s.procs.get(&pid) {
            Some(p) if p.start == process_start => {
                let ended = p.ended?;
                s.procs.remove(&pid);
                Some(ended)
            }
            _ => Some(Ended::default()),
        }
    }
    fn is_run_process(&self, rec: &RunRecord) -> bool {
        self.state().procs.get(&rec.pid).is_some_and(|p| {
            p.start == rec.process_start
                && p.ended.is_none()
                && p.task == rec.task
                && p.session == rec.session
        })
    }
    fn find_run_process(&self, _root: &Path, session: &str, task: &str) -> Option<(u32, u64)> {
        self.state()
            .procs
            .iter()
            .find(|(_, p)| p.session == session && p.task == task && p.ended.is_none())
            .map(|(pid, p)| (*pid, p.start))
    }
    fn adopt(&mut self, _: &RunRecord, _: &Path, _: u64) {}
    fn contain(&mut self, record: &RunRecord, signal: Signal) -> usize {
        let mut s = self.state();
        let left = s.leftovers.entry(record.pid).or_default();
        let alive = left.len();
        left.retain(|(_, resists)| *resists == Resists::All || signal == Signal::Term);
        if alive > 0 {
            s.swept.push((record.pid, signal));
        }
        alive
    }
    fn drained(&self, _: u32) -> bool {
        true
    }
}

/// Session facts as the test sets them.
#[derive(Default)]
struct Facts {
    completed: bool,
    last_write: Option<DateTime<Utc>>,
}

impl RunFacts for Facts {
    fn completed(&self, _: &Path, _: &RunRecord) -> bool {
        self.completed
    }
    fn last_write(&self, _: &Path, _: &str) -> Option<DateTime<Utc>> {
        self.last_write
    }
}

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
}

fn policy(max_retries: u32) -> RunnersPolicy {
    let yaml = format!(
        "runners:\n  dispatch: true\n  grace: 10s\n  idle_after: none\n  retry_backoff: 30s\n  agents:\n    \"*\":\n      command: [\"agent\"]\n      max_retries: {max_retries}\n"
    );
    squad_policies::Policy::parse(Some(&yaml)).unwrap().runners
}

fn running(pid: u32, task: &str, attempt: u32, limit_secs: i64) -> RunRecord {
    RunRecord {
        task: task.into(),
        agent: "alpha".into(),
        session: "s1".into(),
        attempt,
        state: RunState::Running,
        pid,
        process_start: 7,
        started_at: t(0),
        deadline: t(limit_secs),
        command: vec!["agent".into()],
        exit: None,
        completed: false,
        retry_at: None,
        held: false,
    }
}

fn runs_with(fake: &Fake) -> RootRuns {
    RootRuns::with_processes(Box::new(fake.clone()))
}

fn start(runs: &mut RootRuns, fake: &Fake, rec: RunRecord, ignores_term: bool) {
    fake.add(
        rec.pid,
        rec.process_start,
        &rec.session,
        &rec.task,
        ignores_term,
    );
    runs.started(
        rec,
        PathBuf::from("/nowhere/run"),
        PathBuf::from("/nowhere"),
    );
}

fn records(out: &[Out]) -> Vec<RunRecord> {
    out.iter()
        .filter_map(|o| match o {
            Out::Record { rec, .. } => Some(rec.clone()),
            _ => None,
        })
        .collect()
}

fn events(out: &[Out]) -> Vec<&EventKind> {
    out.iter()
        .filter_map(|o| match o {
            Out::Event { kind, .. } => Some(kind),
            _ => None,
        })
        .collect()
}

fn lead_words(out: &[Out]) -> Vec<&str> {
    out.iter()
        .filter_map(|o| match o {
            Out::TellLead { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_time_limit_sends_term_then_kill_after_the_grace() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let p = policy(0);
    start(&mut runs, &fake, running(42, "task_1", 1, 60), true);
    let facts = Facts::default();
    assert!(runs.poll(&p, &facts, t(59)).is_empty());
    assert!(fake.signals().is_empty(), "nothing before the deadline");
    let out = runs.poll(&p, &facts, t(60));
    assert_eq!(fake.signals(), [(42, Signal::Term)]);
    assert!(
        matches!(
            events(&out)[..],
            [EventKind::AgentTimeout { limit_secs: 60, .. }]
        ),
        "{out:?}"
    );
    // It ignores SIGTERM: nothing more until the grace has passed.
    assert!(runs.poll(&p, &facts, t(69)).is_empty());
    assert_eq!(fake.signals().len(), 1, "one SIGTERM only");
    assert!(runs.poll(&p, &facts, t(70)).is_empty());
    assert_eq!(fake.signals(), [(42, Signal::Term), (42, Signal::Kill)]);
    let out = runs.poll(&p, &facts, t(71));
    let rec = &records(&out)[0];
    assert_eq!(rec.state, RunState::TimedOut);
    assert_eq!(
        rec.exit.as_ref().and_then(|e| e.signal),
        Some(libc::SIGKILL)
    );
    assert!(rec.held, "no retry left");
    assert!(lead_words(&out)[0].contains("was stopped at its time limit"));
    // Record, then event, then word to the lead.
    assert!(matches!(out[0], Out::Record { .. }));
    assert!(matches!(out[1], Out::Event { .. }));
    assert!(matches!(out[2], Out::TellLead { .. }));
    assert!(runs.live().is_empty());
    assert_eq!(fake.signals().len(), 2, "nothing signalled after the exit");
}

#[test]
fn a_run_that_stops_on_term_is_never_killed() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let p = policy(0);
    start(&mut runs, &fake, running(42, "task_1", 1, 60), false);
    runs.poll(&p, &Facts::default(), t(60));
    let out = runs.poll(&p, &Facts::default(), t(100));
    assert_eq!(fake.signals(), [(42, Signal::Term)]);
    assert_eq!(records(&out)[0].state, RunState::TimedOut);
}

#[test]
fn a_failed_run_is_retried_with_backoff_then_escalated() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let p = policy(1);
    let facts = Facts::default();
    start(&mut runs, &fake, running(42, "task_1", 1, 3600), false);
    fake.exit(42, 3);
    let out = runs.poll(&p, &facts, t(5));
    let rec = &records(&out)[0];
    assert_eq!(rec.state, RunState::Exited);
    assert_eq!(rec.retry_at, Some(t(35)), "after retry_backoff");
    assert!(!rec.held);
    assert_eq!(runs.next_retry(t(5)), Some(t(35)));
    let word = lead_words(&out)[0];
    assert!(word.contains("exited with code 3"), "{word}");
    assert!(word.contains("Next: run 2 at"), "{word}");
    // The retry (run 2) fails too: retries used up, held, the lead told.
    start(&mut runs, &fake, running(43, "task_1", 2, 3600), false);
    fake.exit(43, 3);
    let out = runs.poll(&p, &facts, t(40));
    let rec = &records(&out)[0];
    assert!(rec.held);
    assert_eq!(rec.retry_at, None);
    assert!(lead_words(&out)[0].contains("retries used up"));
    assert_eq!(runs.next_retry(t(40)), None);
    assert!(fake.signals().is_empty());
}

#[test]
fn a_completed_run_is_done_and_nobody_is_told() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    start(&mut runs, &fake, running(42, "task_1", 1, 3600), false);
    fake.exit(42, 0);
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let out = runs.poll(&policy(2), &facts, t(5));
    let rec = &records(&out)[0];
    assert!(rec.completed && !rec.held && rec.retry_at.is_none());
    assert!(lead_words(&out).is_empty());
}

#[test]
fn stop_by_hand_holds_the_run_and_kills_after_the_grace() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let p = policy(2);
    start(&mut runs, &fake, running(42, "task_1", 1, 3600), true);
    let (out, session, pid) = runs.stop(None, "task_1", t(10)).unwrap();
    assert_eq!((session.as_str(), pid), ("s1", 42));
    assert!(matches!(out, Out::Record { ref rec, .. } if rec.state == RunState::Stopped));
    assert!(runs.poll(&p, &Facts::default(), t(19)).is_empty());
    runs.poll(&p, &Facts::default(), t(20));
    assert_eq!(fake.signals(), [(42, Signal::Term), (42, Signal::Kill)]);
    let out = runs.poll(&p, &Facts::default(), t(21));
    let rec = &records(&out)[0];
    assert_eq!(rec.state, RunState::Stopped);
    assert!(rec.held, "a human decides");
    assert!(lead_words(&out).is_empty(), "the human knows");
    assert!(matches!(
        runs.stop(None, "task_1", t(22)),
        Err(super::RunError::NotRunning(_))
    ));
}

#[test]
fn after_a_restart_only_the_same_pid_and_start_time_are_readopted() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    fake.add(42, 7, "s1", "task_1", false);
    // A pid reused by another process: another start time.
    fake.add(43, 8, "s1", "task_2", false);
    let dir = PathBuf::from("/nowhere");
    let recs = vec![
        (dir.clone(), running(42, "task_1", 1, 3600)),
        (dir.clone(), running(43, "task_2", 1, 3600)),
        (dir.clone(), running(44, "task_3", 1, 3600)),
    ];
    let out = runs.restart(Path::new("/p"), recs, &policy(0), &Facts::default(), t(100));
    let live = runs.live();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].record.task, "task_1");
    let kinds: Vec<String> = events(&out).iter().map(|k| k.name().to_string()).collect();
    assert_eq!(kinds, ["run-adopted", "run-lost", "run-lost"]);
    let lost = records(&out);
    assert!(lost.iter().all(|r| r.state == RunState::Lost && r.held));
    assert_eq!(lead_words(&out).len(), 2);
    // The adopted run is supervised as before: its time limit holds.
    runs.poll(&policy(0), &Facts::default(), t(3600));
    assert_eq!(fake.signals(), [(42, Signal::Term)]);
}

#[test]
fn a_run_whose_pid_was_not_recorded_is_found_by_its_environment() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    fake.add(50, 7, "s1", "task_1", false);
    let recs = vec![(PathBuf::from("/nowhere"), running(0, "task_1", 1, 3600))];
    let out = runs.restart(Path::new("/p"), recs, &policy(0), &Facts::default(), t(100));
    assert_eq!(records(&out)[0].pid, 50, "its pid recorded first");
    assert_eq!(runs.live()[0].record.pid, 50);
    assert_eq!(events(&out)[0].name(), "run-adopted");
}

/// Issue 26 item 7: squadd killed between the record and the spawn.
#[test]
fn a_run_recorded_but_never_started_is_redispatched_not_held() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let recs = vec![(PathBuf::from("/nowhere"), running(0, "task_1", 1, 3600))];
    let out = runs.restart(Path::new("/p"), recs, &policy(0), &Facts::default(), t(100));
    assert!(runs.live().is_empty());
    let rec = &records(&out)[0];
    assert!(!rec.held, "not held: nothing ever ran");
    assert_eq!(rec.attempt, 0, "the same run number is given again");
    assert_eq!(rec.retry_at, Some(t(100)), "due now");
    assert!(lead_words(&out).is_empty(), "no human step needed");
    // A recorded pid that is gone is lost and held, as before.
    let mut runs = runs_with(&fake);
    let recs = vec![(PathBuf::from("/nowhere"), running(77, "task_1", 1, 3600))];
    let out = runs.restart(Path::new("/p"), recs, &policy(0), &Facts::default(), t(100));
    assert!(records(&out)[0].held);
}

#[test]
fn idleness_is_reported_once() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let mut p = policy(0);
    p.idle_after = Some(Duration::from_secs(60));
    start(&mut runs, &fake, running(42, "task_1", 1, 3600), false);
    let facts = Facts {
        last_write: Some(t(30)),
        ..Facts::default()
    };
    assert!(runs.poll(&p, &facts, t(89)).is_empty());
    let out = runs.poll(&p, &facts, t(90));
    assert!(matches!(
        events(&out)[..],
        [EventKind::AgentIdle { idle_secs: 60, .. }]
    ));
    assert!(runs.poll(&p, &facts, t(200)).is_empty());
}

/// Issue 26 item 8: no clock addition in run supervision panics.
#[test]
fn the_largest_durations_never_overflow_the_clock() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let mut p = policy(u32::MAX);
    p.grace = Duration::MAX;
    p.retry_backoff = Duration::MAX;
    p.idle_after = Some(Duration::MAX);
    let mut rec = running(42, "task_1", 1, 0);
    rec.deadline = super::decide::deadline(t(0), Duration::MAX);
    assert_eq!(rec.deadline, DateTime::<Utc>::MAX_UTC);
    start(&mut runs, &fake, rec, true);
    let facts = Facts::default();
    assert!(runs.poll(&p, &facts, DateTime::<Utc>::MAX_UTC).len() == 1);
    runs.poll(&p, &facts, DateTime::<Utc>::MAX_UTC);
    fake.exit(42, 1);
    let out = runs.poll(&p, &facts, DateTime::<Utc>::MAX_UTC);
    assert_eq!(records(&out).len(), 1);
}

/// Issue 26 item 4: what a run started outlives its leader (a double-forked
/// child that ignores SIGTERM): the run stays live, stopping, until it is
/// gone: SIGTERM, SIGKILL after the grace, and only then the exit recorded.
#[test]
fn a_run_is_stopping_until_nothing_of_it_is_left() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let p = policy(0);
    let facts = Facts::default();
    start(&mut runs, &fake, running(42, "task_1", 1, 3600), false);
    fake.leave(42, 4242, Resists::Term);
    fake.exit(42, 0);
    assert!(
        runs.poll(&p, &facts, t(5)).is_empty(),
        "stopping, not ended"
    );
    assert_eq!(runs.live().len(), 1, "still holds its place in the pool");
    assert!(runs.poll(&p, &facts, t(14)).is_empty());
    assert_eq!(fake.state().swept, [(42, Signal::Term), (42, Signal::Term)]);
    assert!(
        runs.poll(&p, &facts, t(15)).is_empty(),
        "the grace passed: SIGKILL"
    );
    assert_eq!(fake.state().swept.last(), Some(&(42, Signal::Kill)));
    let out = runs.poll(&p, &facts, t(16));
    assert_eq!(records(&out)[0].state, RunState::Exited);
    assert_eq!(records(&out)[0].exit.as_ref().and_then(|e| e.code), Some(0));
    assert!(runs.live().is_empty());
}

/// A leftover squadd cannot end does not hold the pool for ever: the run
/// is recorded ended `LINGER` after the grace.
#[test]
fn a_leftover_that_cannot_be_ended_is_given_up_after_the_grace_and_linger() {
    let fake = Fake::default();
    let mut runs = runs_with(&fake);
    let p = policy(0);
    let facts = Facts::default();
    start(&mut runs, &fake, running(42, "task_1", 1, 3600), false);
    fake.leave(42, 4242, Resists::All);
    fake.exit(42, 0);
    let linger = i64::try_from(super::decide::LINGER.as_secs()).unwrap();
    assert!(runs.poll(&p, &facts, t(5)).is_empty());
    assert!(runs.poll(&p, &facts, t(15)).is_empty(), "SIGKILL sent");
    assert!(runs.poll(&p, &facts, t(14 + linger)).is_empty());
    assert_eq!(runs.live().len(), 1);
    let out = runs.poll(&p, &facts, t(15 + linger));
    assert_eq!(records(&out).len(), 1, "given up: recorded ended");
    assert!(runs.live().is_empty());
}
