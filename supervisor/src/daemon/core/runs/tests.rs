//! Unit tests of agent runs through [`Core::step`]: what the shell reports
//! of processes goes in as inputs, and the effects (spawn, signal, contain,
//! records, events, word to the lead, timers) are asserted in order. No
//! process is started and no file is read: the session facts come from the
//! test.

use super::{FoundRun, POLL, RunFacts, RunKey, RunSpec};
use crate::daemon::core::timer::Timer;
use crate::daemon::core::{Core, Effect, Input, Now, Root, RootId};
use crate::daemon::session::SessionCore;
use crate::events::EventKind;
use crate::runners::{Ended, RunRecord, RunState, Signal};
use chrono::{DateTime, TimeZone, Utc};
use std::path::{Path, PathBuf};
use std::time::Duration;

const SESSION: &str = "20240115T100000Z";

/// Session facts as the test sets them.
#[derive(Default)]
struct Facts {
    completed: bool,
    last_write: Option<DateTime<Utc>>,
}

impl RunFacts for Facts {
    fn completed_in_file(&self, _: &Path, _: &RunRecord) -> bool {
        self.completed
    }
    fn last_write(&self, _: &Path, _: &str) -> Option<DateTime<Utc>> {
        self.last_write
    }
}

fn t(secs: i64) -> Now {
    Now {
        wall: Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap()
            + chrono::Duration::seconds(secs),
    }
}

fn id() -> RootId {
    RootId::nth(0)
}

/// A root dispatching to `agent` (grace 10 s, retries after 30 s,
/// `max_retries` of them, a lead to tell) whose one session plans
/// `task_1` for `alpha`.
fn root(max_retries: u32) -> Root {
    root_with(max_retries, "")
}

/// [`root`] with more keys under `runners:` (indented two spaces).
fn root_with(max_retries: u32, runners_extra: &str) -> Root {
    let yaml = format!(
        "runners:\n  dispatch: true\n  lead: lead\n  grace: 10s\n  idle_after: none\n  retry_backoff: 30s\n{runners_extra}  agents:\n    \"*\":\n      command: [\"agent\"]\n      timeout: 60s\n      max_retries: {max_retries}\n"
    );
    let policy = squad_policies::Policy::parse(Some(&yaml)).unwrap();
    let mut r = Root::new(
        PathBuf::from("/p"),
        crate::state::State::default(),
        policy,
        t(0).wall,
    );
    let dir = r.session_dir(SESSION);
    let mut core = SessionCore::new(dir.clone());
    let name = "role-plan-alpha-task_1.md";
    let text = "meta:\n  task_id: task_1\n  agent: alpha\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ndependencies:\n  requires: []\n  blocks: []\ninstruction: x\n";
    let kind = squad_protocol::FileKind::from_file_name(name).unwrap();
    let f = crate::index::index_bytes(&dir.join(name), kind, text.as_bytes());
    core.apply(name, Some(f), t(0).wall);
    r.insert_session(SESSION, core);
    r
}

fn step(r: &mut Root, input: Input<'_>, now: Now) -> Vec<Effect> {
    Core::new(id(), r).step(input, now)
}

fn key() -> RunKey {
    (SESSION.to_string(), "task_1".to_string())
}

fn run_dir() -> PathBuf {
    PathBuf::from("/p/.squad/sessions")
        .join(SESSION)
        .join("runs/task_1")
}

/// What `f` picks out of each effect, in order.
fn pick<T>(effects: &[Effect], f: impl Fn(&Effect) -> Option<T>) -> Vec<T> {
    effects.iter().filter_map(f).collect()
}

/// The runs asked to start.
fn spawns(effects: &[Effect]) -> Vec<RunSpec> {
    pick(effects, |e| match e {
        Effect::SpawnRun { spec, .. } => Some((**spec).clone()),
        _ => None,
    })
}

fn records(effects: &[Effect]) -> Vec<RunRecord> {
    pick(effects, |e| match e {
        Effect::WriteRunRecord { rec, .. } => Some((**rec).clone()),
        _ => None,
    })
}

fn events(effects: &[Effect]) -> Vec<EventKind> {
    pick(effects, |e| match e {
        Effect::Emit { kind, .. } => Some(kind.clone()),
        _ => None,
    })
}

fn signals(effects: &[Effect]) -> Vec<(u32, Signal)> {
    pick(effects, |e| match e {
        Effect::SignalRun { pid, signal, .. } => Some((*pid, *signal)),
        _ => None,
    })
}

fn told_lead(effects: &[Effect]) -> Vec<String> {
    pick(effects, |e| match e {
        Effect::TellLead { text, .. } => Some(text.clone()),
        _ => None,
    })
}

/// What the shell's process would report once started: the record as
/// `runs/start.rs` makes it, with `pid`.
fn started_record(spec: &RunSpec, pid: u32, at: Now) -> RunRecord {
    RunRecord {
        task: spec.candidate.task.clone(),
        agent: spec.candidate.agent.clone(),
        session: spec.candidate.session.clone(),
        attempt: spec.candidate.attempts + 1,
        state: RunState::Running,
        pid,
        process_start: 7,
        started_at: at.wall,
        deadline: at.wall + chrono::Duration::seconds(60),
        command: vec!["agent".into()],
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

/// Dispatch at `at`: exactly one run asked for, reported started as `pid`.
fn dispatch_and_start(r: &mut Root, pid: u32, at: Now) -> RunSpec {
    let effects = step(r, Input::DispatchDue { cluster: None }, at);
    let mut asked = spawns(&effects);
    assert_eq!(asked.len(), 1, "{effects:?}");
    let spec = asked.remove(0);
    let rec = started_record(&spec, pid, at);
    let effects = step(
        r,
        Input::RunSpawned {
            spec: Box::new(spec.clone()),
            rec: Box::new(rec.clone()),
            dir: run_dir(),
        },
        at,
    );
    assert_eq!(records(&effects), vec![rec], "{effects:?}");
    assert!(effects.contains(&Effect::SetTimerEarlier {
        timer: Timer::Runs,
        after: POLL,
    }));
    spec
}

/// The leader ended with `ended`; the look contains what is left (nothing)
/// and reports it: the effects of the run's end.
fn end(r: &mut Root, ended: Ended, facts: &Facts, at: Now) -> Vec<Effect> {
    assert!(step(r, Input::RunExited { run: key(), ended }, at).is_empty());
    let look = step(r, Input::RunsDue { facts }, at);
    assert!(
        matches!(
            look.as_slice(),
            [Effect::ContainRun { report: true, run, .. }] if *run == key()
        ),
        "{look:?}"
    );
    left(r, 0, facts, at)
}

#[test]
fn the_time_limit_sends_term_then_kill_after_the_grace() {
    let mut r = root(0);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    assert!(step(&mut r, Input::RunsDue { facts: &facts }, t(59)).is_empty());
    let at_limit = step(&mut r, Input::RunsDue { facts: &facts }, t(60));
    assert_eq!(signals(&at_limit), vec![(42, Signal::Term)]);
    assert!(matches!(
        events(&at_limit).as_slice(),
        [EventKind::AgentTimeout { limit_secs: 60, .. }]
    ));
    // Within the grace: nothing more; after it, SIGKILL once.
    assert!(step(&mut r, Input::RunsDue { facts: &facts }, t(69)).is_empty());
    let after_grace = step(&mut r, Input::RunsDue { facts: &facts }, t(70));
    assert_eq!(signals(&after_grace), vec![(42, Signal::Kill)]);
    assert!(step(&mut r, Input::RunsDue { facts: &facts }, t(80)).is_empty());
    // It ends: recorded as timed out, and the lead told.
    let ended = end(
        &mut r,
        Ended {
            code: None,
            signal: Some(9),
        },
        &facts,
        t(81),
    );
    assert_eq!(records(&ended)[0].state, RunState::TimedOut);
    assert_eq!(told_lead(&ended).len(), 1, "{ended:?}");
}

#[test]
fn a_failed_run_is_retried_after_the_backoff_then_held() {
    let mut r = root(1);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    let ended = end(
        &mut r,
        Ended {
            code: Some(1),
            signal: None,
        },
        &facts,
        t(10),
    );
    // Record, event, then word to the lead with the log's tail, in order.
    let rec = &records(&ended)[0];
    assert_eq!(rec.retry_at, Some(t(40).wall));
    assert!(!rec.held);
    assert!(
        matches!(ended[0], Effect::WriteRunRecord { .. }),
        "{ended:?}"
    );
    assert!(matches!(
        ended[1],
        Effect::Emit {
            kind: EventKind::AgentExited { .. },
            ..
        }
    ));
    assert!(matches!(
        &ended[2],
        Effect::TellLead { tail_of: Some(dir), .. } if *dir == run_dir()
    ));
    // Before the backoff: nothing starts; the look wakes at the retry.
    let early = step(&mut r, Input::DispatchDue { cluster: None }, t(20));
    assert!(spawns(&early).is_empty(), "{early:?}");
    assert_eq!(
        early.last(),
        Some(&Effect::RunsLooked {
            root: id(),
            retry_at: Some(t(40).wall)
        })
    );
    let looked = step(
        &mut r,
        Input::RunsLooked {
            retry_at: Some(t(40).wall),
        },
        t(20),
    );
    assert!(looked.contains(&Effect::SetTimerEarlierAt {
        timer: Timer::Runs,
        at: t(40).wall
    }));
    // At the retry: run 2 starts; it fails too and is held (retries used up).
    let spec = dispatch_and_start(&mut r, 43, t(40));
    assert_eq!(spec.candidate.attempts, 1);
    let ended = end(
        &mut r,
        Ended {
            code: Some(1),
            signal: None,
        },
        &facts,
        t(50),
    );
    let rec = &records(&ended)[0];
    assert_eq!((rec.attempt, rec.held, rec.retry_at), (2, true, None));
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(500))).is_empty());
}

#[test]
fn a_completed_run_finishes_its_worktree_and_nobody_is_told() {
    let mut r = root(3);
    dispatch_and_start(&mut r, 42, t(0));
    let facts = Facts {
        completed: true,
        ..Facts::default()
    };
    let ended = end(&mut r, Ended::default(), &facts, t(10));
    assert!(records(&ended)[0].completed);
    assert!(
        ended
            .iter()
            .any(|e| matches!(e, Effect::FinishWorktree { .. }))
    );
    assert!(told_lead(&ended).is_empty(), "{ended:?}");
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(100))).is_empty());
}

#[test]
fn the_pool_is_said_empty_once_the_last_run_ended() {
    let mut r = root(0);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    end(&mut r, Ended::default(), &facts, t(10));
    let dispatched = step(&mut r, Input::DispatchDue { cluster: None }, t(10));
    let Some(Effect::RunsLooked { retry_at, .. }) = dispatched.last().cloned() else {
        panic!("{dispatched:?}");
    };
    let looked = step(&mut r, Input::RunsLooked { retry_at }, t(10));
    assert!(
        events(&looked).contains(&EventKind::PoolEmpty),
        "{looked:?}"
    );
    // Said once: the next look has no runs to lose.
    step(&mut r, Input::RunsDue { facts: &facts }, t(11));
    let again = step(&mut r, Input::RunsLooked { retry_at: None }, t(11));
    assert!(events(&again).is_empty(), "{again:?}");
}

fn recorded(pid: u32, attempt: u32) -> RunRecord {
    RunRecord {
        task: "task_1".into(),
        agent: "alpha".into(),
        session: SESSION.into(),
        attempt,
        state: RunState::Running,
        pid,
        process_start: 7,
        started_at: t(0).wall,
        deadline: t(60).wall,
        command: vec!["agent".into()],
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

fn found(rec: RunRecord, found: Option<(u32, u64)>, alive: bool) -> Vec<FoundRun> {
    vec![FoundRun {
        session_dir: PathBuf::from("/p/.squad/sessions").join(SESSION),
        rec,
        found,
        alive,
    }]
}

/// squadd restarted at 5 s and met `rec` (with what it saw of its process).
fn met(
    r: &mut Root,
    rec: RunRecord,
    seen: Option<(u32, u64)>,
    alive: bool,
    facts: &Facts,
) -> Vec<Effect> {
    let records = found(rec, seen, alive);
    step(r, Input::RunsFound { records, facts }, t(5))
}

#[test]
fn a_live_run_met_after_a_restart_is_readopted_and_supervised() {
    let mut r = root(0);
    let facts = Facts::default();
    let effects = met(&mut r, recorded(42, 1), None, true, &facts);
    assert!(matches!(
        events(&effects).as_slice(),
        [EventKind::RunAdopted { pid: 42, .. }]
    ));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::AdoptRun { rec, .. } if rec.pid == 42))
    );
    // Not started a second time; supervised as before (its time limit).
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(5))).is_empty());
    let at_limit = step(&mut r, Input::RunsDue { facts: &facts }, t(60));
    assert_eq!(signals(&at_limit), vec![(42, Signal::Term)]);
}

#[test]
fn a_run_gone_while_squadd_was_down_is_lost_held_and_its_leftovers_killed_by_environment() {
    let mut r = root(3);
    let facts = Facts::default();
    let effects = met(&mut r, recorded(42, 1), None, false, &facts);
    // What it left behind is found by its environment, never by the pid
    // run.json (writable by agents) names.
    assert!(matches!(
        &effects[0],
        Effect::ContainRun { rec, signal: Signal::Kill, report: false, .. } if rec.pid == 0
    ));
    let rec = &records(&effects)[0];
    assert_eq!((rec.state, rec.held), (RunState::Lost, true));
    assert!(matches!(
        events(&effects).as_slice(),
        [EventKind::RunLost { pid: 42, .. }]
    ));
    assert_eq!(told_lead(&effects).len(), 1);
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(6))).is_empty());
}

#[test]
fn a_run_recorded_but_never_started_is_dispatched_again_as_the_same_run() {
    let mut r = root(0);
    let facts = Facts::default();
    let effects = met(&mut r, recorded(0, 1), None, false, &facts);
    let rec = &records(&effects)[0];
    assert_eq!(
        (rec.state, rec.held, rec.attempt),
        (RunState::Lost, false, 0)
    );
    assert!(told_lead(&effects).is_empty(), "{effects:?}");
    // Dispatched again at once, as run 1 (not counted as a retry).
    let spec = dispatch_and_start(&mut r, 50, t(5));
    assert_eq!(spec.candidate.attempts, 0);
}

#[test]
fn a_run_whose_pid_was_not_recorded_but_is_found_is_recorded_and_readopted() {
    let mut r = root(0);
    let facts = Facts::default();
    let effects = met(&mut r, recorded(0, 1), Some((77, 9)), true, &facts);
    let rec = &records(&effects)[0];
    assert_eq!((rec.pid, rec.process_start), (77, 9));
    assert!(matches!(
        events(&effects).as_slice(),
        [EventKind::RunAdopted { pid: 77, .. }]
    ));
}

#[test]
fn stop_by_hand_records_the_run_stopped_holds_it_and_kills_after_the_grace() {
    let mut r = root(3);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    let asked = step(
        &mut r,
        Input::RunStop {
            session: None,
            task: "task_1".into(),
        },
        t(1),
    );
    assert_eq!(
        asked,
        vec![Effect::StopRun {
            root: id(),
            run: key(),
            pid: 42
        }]
    );
    let stopped = step(&mut r, Input::RunStopped { run: key() }, t(1));
    assert_eq!(records(&stopped)[0].state, RunState::Stopped);
    assert_eq!(
        stopped.last(),
        Some(&Effect::RunReply {
            root: id(),
            reply: Ok((SESSION.to_string(), 42))
        })
    );
    assert!(signals(&step(&mut r, Input::RunsDue { facts: &facts }, t(10))).is_empty());
    let killed = step(&mut r, Input::RunsDue { facts: &facts }, t(11));
    assert_eq!(signals(&killed), vec![(42, Signal::Kill)]);
    let ended = end(&mut r, Ended::default(), &facts, t(12));
    assert!(records(&ended)[0].held);
    assert!(
        told_lead(&ended).is_empty(),
        "a human stopped it: {ended:?}"
    );
    // A stop of a task with no run is refused.
    let none = step(
        &mut r,
        Input::RunStop {
            session: None,
            task: "task_1".into(),
        },
        t(13),
    );
    assert!(
        matches!(&none[..], [Effect::RunReply { reply: Err(e), .. }] if e.to_string().contains("no run in progress"))
    );
}

/// Regression: a second `squadctl stop` of a run already stopping started
/// the SIGKILL grace again, so a run ignoring SIGTERM lived on for as long
/// as someone kept asking it to stop.
#[test]
fn a_second_stop_keeps_the_first_stops_kill_time() {
    let mut r = root(3);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    let stop = |r: &mut Root, at| {
        let asked = step(
            r,
            Input::RunStop {
                session: None,
                task: "task_1".into(),
            },
            at,
        );
        assert_eq!(asked.len(), 1, "{asked:?}");
        step(r, Input::RunStopped { run: key() }, at)
    };
    stop(&mut r, t(1));
    let again = stop(&mut r, t(8));
    assert!(
        matches!(again.last(), Some(Effect::RunReply { reply: Ok(_), .. })),
        "{again:?}"
    );
    let killed = step(&mut r, Input::RunsDue { facts: &facts }, t(11));
    assert_eq!(signals(&killed), vec![(42, Signal::Kill)]);
}

#[test]
fn a_failed_spawn_is_recorded_held_and_reported_and_not_tried_again() {
    let mut r = root(3);
    let asked = spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(0)));
    let spec = asked[0].clone();
    let written = started_record(&spec, 0, t(0));
    let effects = step(
        &mut r,
        Input::SpawnFailed {
            spec: Box::new(spec),
            written: Some(Box::new((run_dir(), written))),
            error: "agent: not found".into(),
        },
        t(0),
    );
    let rec = &records(&effects)[0];
    assert_eq!((rec.state, rec.held), (RunState::Failed, true));
    assert!(matches!(
        events(&effects).as_slice(),
        [EventKind::RunFailed { error, .. }] if error == "agent: not found"
    ));
    assert_eq!(told_lead(&effects).len(), 1);
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(100))).is_empty());
}

#[test]
fn a_config_reload_keeps_the_previous_config_when_invalid_and_looks_at_runs_now() {
    let mut r = root(0);
    let mut config = squad_protocol::config::RuntimeConfig::default();
    config.sessions.max_concurrent = 0;
    let effects = step(
        &mut r,
        Input::ConfigRead {
            config: Some(Box::new(config)),
            error: None,
        },
        t(0),
    );
    assert_eq!(
        effects.last(),
        Some(&Effect::SetTimer {
            timer: Timer::Runs,
            after: Duration::ZERO
        })
    );
    // A pool of none: nothing starts.
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(0))).is_empty());
    let refused = step(
        &mut r,
        Input::ConfigRead {
            config: None,
            error: Some("bad".into()),
        },
        t(1),
    );
    assert!(matches!(
        events(&refused).as_slice(),
        [EventKind::ConfigReloaded { error: Some(_) }]
    ));
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(1))).is_empty());
}

/// The signal of the look's containment of an ended run.
fn contained(effects: &[Effect]) -> Vec<Signal> {
    pick(effects, |e| match e {
        Effect::ContainRun { signal, .. } => Some(*signal),
        _ => None,
    })
}

fn left(r: &mut Root, n: usize, facts: &Facts, at: Now) -> Vec<Effect> {
    step(
        r,
        Input::RunLeft {
            run: key(),
            left: n,
            drained: true,
            facts,
        },
        at,
    )
}

/// Issue 26 item 4: what a run started outlives its leader; the run stays
/// live (stopping, holding its place in the pool) until nothing is left:
/// SIGTERM, SIGKILL after the grace, then its end recorded; a leftover
/// squadd cannot end is given up `LINGER` after the grace.
#[test]
fn a_run_is_stopping_until_nothing_of_it_is_left_or_given_up_after_the_linger() {
    let mut r = root(0);
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    let exited = Ended {
        code: Some(0),
        signal: None,
    };
    step(
        &mut r,
        Input::RunExited {
            run: key(),
            ended: exited,
        },
        t(5),
    );
    assert_eq!(
        contained(&step(&mut r, Input::RunsDue { facts: &facts }, t(5))),
        vec![Signal::Term]
    );
    assert!(
        left(&mut r, 1, &facts, t(5)).is_empty(),
        "stopping, not ended"
    );
    assert_eq!(r.runs.live().len(), 1, "still holds its place in the pool");
    assert_eq!(
        contained(&step(&mut r, Input::RunsDue { facts: &facts }, t(15))),
        vec![Signal::Kill]
    );
    assert!(left(&mut r, 1, &facts, t(15)).is_empty());
    let linger = i64::try_from(super::decide::LINGER.as_secs()).unwrap();
    assert!(left(&mut r, 1, &facts, t(14 + linger)).is_empty());
    let given_up = left(&mut r, 1, &facts, t(15 + linger));
    let rec = &records(&given_up)[0];
    assert_eq!(
        (rec.state, rec.exit.as_ref().and_then(|e| e.code)),
        (RunState::Exited, Some(0))
    );
    assert!(r.runs.live().is_empty());
}

#[test]
fn idleness_is_reported_once() {
    let mut r = root(0);
    r.policy.runners.idle_after = Some(Duration::from_secs(60));
    dispatch_and_start(&mut r, 42, t(0));
    let facts = Facts {
        last_write: Some(t(30).wall),
        ..Facts::default()
    };
    assert!(step(&mut r, Input::RunsDue { facts: &facts }, t(59)).is_empty());
    // (Its time limit, 60 s, passes too: `agent-timeout` beside it.)
    let idle = step(&mut r, Input::RunsDue { facts: &facts }, t(90));
    let idles: Vec<EventKind> = events(&idle)
        .into_iter()
        .filter(|e| matches!(e, EventKind::AgentIdle { .. }))
        .collect();
    assert!(
        matches!(
            idles.as_slice(),
            [EventKind::AgentIdle { idle_secs: 60, .. }]
        ),
        "{idle:?}"
    );
    assert!(
        events(&step(&mut r, Input::RunsDue { facts: &facts }, t(200)))
            .iter()
            .all(|e| !matches!(e, EventKind::AgentIdle { .. }))
    );
}

/// Issue 26 item 8: no clock addition in run supervision panics, whatever
/// the policy says.
#[test]
fn the_largest_durations_never_overflow_the_clock() {
    let mut r = root(u32::MAX);
    r.policy.runners.grace = Duration::MAX;
    r.policy.runners.retry_backoff = Duration::MAX;
    r.policy.runners.idle_after = Some(Duration::MAX);
    let spec = spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(0)))[0].clone();
    let mut rec = started_record(&spec, 42, t(0));
    rec.deadline = super::decide::deadline(t(0).wall, Duration::MAX);
    assert_eq!(rec.deadline, DateTime::<Utc>::MAX_UTC);
    step(
        &mut r,
        Input::RunSpawned {
            spec: Box::new(spec),
            rec: Box::new(rec),
            dir: run_dir(),
        },
        t(0),
    );
    let end_of_time = Now {
        wall: DateTime::<Utc>::MAX_UTC,
    };
    let facts = Facts::default();
    assert_eq!(
        signals(&step(&mut r, Input::RunsDue { facts: &facts }, end_of_time)).len(),
        1
    );
    step(&mut r, Input::RunsDue { facts: &facts }, end_of_time);
    let ended = end(
        &mut r,
        Ended {
            code: Some(1),
            signal: None,
        },
        &facts,
        end_of_time,
    );
    assert_eq!(records(&ended).len(), 1);
    let dispatched = step(&mut r, Input::DispatchDue { cluster: None }, end_of_time);
    let Some(Effect::RunsLooked { retry_at, .. }) = dispatched.last().cloned() else {
        panic!("{dispatched:?}");
    };
    step(&mut r, Input::RunsLooked { retry_at }, end_of_time);
}

/// The shell's remaining calls, each one input (issue 22): a batch's end,
/// the `runs` request, the records read at start-up (with a process
/// double).
mod calls;
/// Hand-over on the branch: dependents and the session's end wait for the
/// merge (docs/worktrees.md).
mod handover;
mod output;
/// The review gate's transitions (docs/review.md).
mod review;
