//! Unit tests of the run decisions the shell used to make itself, through
//! [`Core::step`]: the order of a batch's end ([`Input::SuperviseRuns`]),
//! what the `runs` request asks ([`Input::RunsAsked`]), and which run
//! records read at start-up are looked for, re-adopted, lost or dispatched
//! again ([`Input::RunRecordsRead`], with [`FakeProcesses`], a double of
//! the root's processes: no process is started or looked up).

use super::*;
use crate::daemon::core::runs::{Asked, RecordsRead, RunError, RunView, Supervise};
use crate::runners::process::Spawned;
use crate::runners::{Processes, SpawnRequest};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The root's processes as the test sets them; records what was asked.
#[derive(Default)]
struct FakeProcesses {
    /// (pid, process start) of the processes alive and really their run.
    alive: Vec<(u32, u64)>,
    /// The process found by environment for a (session, task).
    by_env: BTreeMap<(String, String), (u32, u64)>,
    /// Each environment look-up asked: (session, task).
    looked_for: RefCell<Vec<(String, String)>>,
    /// Each liveness check asked: (pid, process start).
    checked: RefCell<Vec<(u32, u64)>>,
}

impl Processes for FakeProcesses {
    fn spawn(&mut self, _: &SpawnRequest) -> std::io::Result<Spawned> {
        panic!("deciding never spawns")
    }
    fn signal_group(&mut self, _: u32, _: Signal) -> std::io::Result<()> {
        panic!("deciding never signals")
    }
    fn try_exit(&mut self, _: u32, _: u64) -> Option<Ended> {
        panic!("deciding never polls")
    }
    fn is_run_process(&self, record: &RunRecord) -> bool {
        let p = (record.pid, record.process_start);
        self.checked.borrow_mut().push(p);
        record.pid != 0 && self.alive.contains(&p)
    }
    fn find_run_process(&self, _: &Path, session: &str, task: &str) -> Option<(u32, u64)> {
        let k = (session.to_string(), task.to_string());
        self.looked_for.borrow_mut().push(k.clone());
        self.by_env.get(&k).copied()
    }
    fn adopt(&mut self, _: &RunRecord, _: &Path, _: u64) {
        panic!("adopting is an effect, never done while deciding")
    }
    fn contain(&mut self, _: &RunRecord, _: Signal) -> usize {
        panic!("containing is an effect, never done while deciding")
    }
    fn drained(&self, _: u32) -> bool {
        panic!("deciding never asks")
    }
}

fn session_dir() -> PathBuf {
    PathBuf::from("/p/.squad/sessions").join(SESSION)
}

/// squadd restarted at 5 s and read `records` (session directory of the
/// test's session) with `procs` to ask.
fn read(
    r: &mut Root,
    records: Vec<RunRecord>,
    procs: &FakeProcesses,
    facts: &Facts,
) -> Vec<Effect> {
    let records = records
        .into_iter()
        .map(|rec| (session_dir(), rec))
        .collect();
    let input = Input::RunRecordsRead(RecordsRead {
        records,
        procs,
        facts,
    });
    step(r, input, t(5))
}

fn adopted(effects: &[Effect]) -> Vec<u32> {
    pick(effects, |e| match e {
        Effect::AdoptRun { rec, .. } => Some(rec.pid),
        _ => None,
    })
}

#[test]
fn a_record_read_at_start_up_whose_process_is_alive_is_readopted_and_supervised() {
    let mut r = root(0);
    let facts = Facts::default();
    let procs = FakeProcesses {
        alive: vec![(42, 7)],
        ..FakeProcesses::default()
    };
    let effects = read(&mut r, vec![recorded(42, 1)], &procs, &facts);
    assert_eq!(adopted(&effects), vec![42], "{effects:?}");
    // Its pid was recorded: checked, never looked for by environment.
    assert_eq!(*procs.checked.borrow(), vec![(42, 7)]);
    assert!(procs.looked_for.borrow().is_empty());
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(5))).is_empty());
    let at_limit = step(&mut r, Input::RunsDue { facts: &facts }, t(60));
    assert_eq!(signals(&at_limit), vec![(42, Signal::Term)]);
}

#[test]
fn a_record_whose_pid_is_alive_but_another_process_is_lost_never_adopted() {
    // The pid was reused (another start time): not the run, never
    // adopted (nor, later, signalled).
    let mut r = root(3);
    let facts = Facts::default();
    let procs = FakeProcesses {
        alive: vec![(42, 99)],
        ..FakeProcesses::default()
    };
    let effects = read(&mut r, vec![recorded(42, 1)], &procs, &facts);
    assert!(adopted(&effects).is_empty(), "{effects:?}");
    assert_eq!(records(&effects)[0].state, RunState::Lost);
    assert!(signals(&effects).is_empty());
}

#[test]
fn a_record_without_a_pid_is_looked_for_by_environment_and_readopted_as_found() {
    let mut r = root(0);
    let facts = Facts::default();
    let procs = FakeProcesses {
        alive: vec![(77, 9)],
        by_env: BTreeMap::from([(key(), (77, 9))]),
        ..FakeProcesses::default()
    };
    let effects = read(&mut r, vec![recorded(0, 1)], &procs, &facts);
    assert_eq!(*procs.looked_for.borrow(), vec![key()]);
    // The found process is the one checked, then recorded and adopted.
    assert_eq!(*procs.checked.borrow(), vec![(77, 9)]);
    let rec = &records(&effects)[0];
    assert_eq!((rec.pid, rec.process_start), (77, 9));
    assert_eq!(adopted(&effects), vec![77]);
}

#[test]
fn a_record_without_a_pid_not_found_is_dispatched_again_and_an_ended_one_not_looked_at() {
    let mut r = root(0);
    let facts = Facts::default();
    let procs = FakeProcesses::default();
    let mut done = recorded(42, 1);
    done.task = "task_0".into();
    done.state = RunState::Exited;
    let effects = read(&mut r, vec![done, recorded(0, 1)], &procs, &facts);
    // The ended record is neither looked for nor checked: only the one
    // recorded running without a pid is.
    assert_eq!(*procs.looked_for.borrow(), vec![key()]);
    assert_eq!(*procs.checked.borrow(), vec![(0, 7)]);
    assert!(adopted(&effects).is_empty());
    let rec = &records(&effects)[0];
    assert_eq!(
        (rec.state, rec.held, rec.attempt),
        (RunState::Lost, false, 0)
    );
    let spec = dispatch_and_start(&mut r, 50, t(5));
    assert_eq!(spec.candidate.attempts, 0);
}

#[test]
fn a_batch_end_takes_the_exits_in_then_looks_then_asks_for_dispatch_last() {
    let mut r = root(0);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    let ended = Ended {
        code: Some(0),
        signal: None,
    };
    let input = Input::SuperviseRuns(Supervise {
        exits: vec![(key(), ended)],
        facts: &facts,
        cluster: Some("host-a".into()),
    });
    let effects = step(&mut r, input, t(1));
    // The exit is known to the look (what is left of the run is
    // contained), and dispatch comes after the look's effects, with this
    // host's id.
    assert!(
        matches!(
            effects.as_slice(),
            [
                Effect::ContainRun { report: true, run, .. },
                Effect::DispatchRuns { cluster: Some(host), .. },
            ] if *run == key() && host == "host-a"
        ),
        "{effects:?}"
    );
    // Without an exit the same look finds the run running: only dispatch.
    let mut r = root(0);
    dispatch_and_start(&mut r, 42, t(0));
    let input = Input::SuperviseRuns(Supervise {
        exits: Vec::new(),
        facts: &facts,
        cluster: None,
    });
    let effects = step(&mut r, input, t(1));
    assert_eq!(
        effects,
        vec![Effect::DispatchRuns {
            root: id(),
            cluster: None
        }]
    );
}

#[test]
fn the_runs_request_lists_needs_a_task_to_run_or_stop_and_refuses_other_actions() {
    let mut r = root(0);
    dispatch_and_start(&mut r, 42, t(0));
    let ask = |r: &mut Root, action: &str, task: Option<&str>| {
        let input = Input::RunsAsked(Asked {
            action: action.into(),
            session: None,
            task: task.map(str::to_string),
            text: None,
        });
        step(r, input, t(1))
    };
    let listed = ask(&mut r, "list", None);
    assert!(
        matches!(listed.as_slice(), [Effect::RunsListed { runs, .. }]
            if runs.iter().map(|v: &RunView| v.record.pid).collect::<Vec<_>>() == vec![42]),
        "{listed:?}"
    );
    for action in ["run", "stop"] {
        assert_eq!(
            ask(&mut r, action, None),
            vec![Effect::RunReply {
                root: id(),
                reply: Err(RunError::NoTask)
            }]
        );
    }
    assert_eq!(
        ask(&mut r, "restart", Some("task_1")),
        vec![Effect::RunReply {
            root: id(),
            reply: Err(RunError::UnknownAction("restart".into()))
        }]
    );
    assert_eq!(
        ask(&mut r, "stop", Some("task_1")),
        vec![Effect::StopRun {
            root: id(),
            run: key(),
            pid: 42
        }]
    );
    // `run` of a task already running goes through the by-hand checks.
    let run = ask(&mut r, "run", Some("task_1"));
    assert!(
        matches!(run.as_slice(), [Effect::RunReply { reply: Err(_), .. }]),
        "{run:?}"
    );
}
