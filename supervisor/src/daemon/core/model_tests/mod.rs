//! The root-level model test (issue 22 item 3): random operations over two
//! roots with two sessions each, driven through the core's entry points by
//! one adapter ([`World::apply`]); after every step what the incremental
//! core knows equals [`Known::from_scratch`] of a snapshot of the files
//! alone (session files, inbox entries, the persisted facts as the shell
//! would read them, the policy). In the habit of atuin's `journal_model.rs`:
//! a simple oracle, random operations, one comparison after each.
//!
//! The oracle is written apart from the incremental bookkeeping: it
//! re-indexes every file ([`index_bytes`], [`SessionIndex::recheck`]),
//! derives the session with [`derive_session`], and keeps the persisted
//! facts (task starts, overdue and violation reports, escalations,
//! overdue replies) itself from the snapshot after every step: the task
//! start times are never taken from the core under test. Its mail rules
//! (who a file's deliveries go to and under which inbox name, when an
//! unread message escalates, when a question is overdue) are its own,
//! written again from the docs' text in `rules.rs`: it shares no routing
//! code with the core, so a delivery to the wrong agent (its sender, say)
//! leaves a delivery pending the core does not have, and an inbox entry
//! no file asked for.
//!
//! The adapter ([`World::apply`], `adapter.rs`) tells the core what
//! happened with exactly the inputs the shell steps: a file read, gone
//! (then confirmed removed) or written by squadd itself, an inbox entry
//! read, timers fired, a rescan after lost events, config.json and the
//! policy re-read, and agent runs (dispatch answered by a process started
//! or a start that failed, a process that exits, is stopped at its time
//! limit or ignores SIGTERM until SIGKILL, retries). Every effect is
//! carried out in one match ([`World::effect`], `world.rs`). The runs'
//! oracle (`runs.rs`) derives from the snapshot's run records and session
//! files which runs should exist and what each record says, by its own
//! rule. A message id reused by another file (`Op::Clash`) is checked
//! with the inbox copies the world delivered (the shell's answer in
//! `Input::Route`), against the oracle's own rule (`oracle.rs`,
//! `refused`). squadd restarts (`Op::Restart`, clean or kill -9:
//! `restart.rs`) rebuild a root's core as the shell starts one; facts
//! reported once ever are counted across restarts. `squadctl run|stop`
//! (`Op::Run`, `Op::Stop`: `by_hand.rs`) are answered as the oracle's
//! rule says.

use super::batch;
use super::timer::Timer;
use super::{Core, Effect, Input, Now, Root, RootId};
use crate::daemon::routing::Delivery;
use crate::daemon::session::SessionCore;
use crate::derive::{SessionView, derive_session};
use crate::events::EventKind;
use crate::index::{Entry, IndexedFile, SessionIndex, index_bytes};
use crate::state::State;
use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;
use squad_protocol::FileKind;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::model::TaskStatus;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const ROOTS: usize = 2;
const SESSIONS: [&str; 2] = ["20240115T100000Z", "20240115T110000Z"];
const AGENTS: [&str; 3] = ["alice", "bob", "carol"];

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap()
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn root_dir(r: usize) -> PathBuf {
    PathBuf::from(format!("/model/root{r}"))
}

fn id(r: usize) -> RootId {
    RootId::nth(r as u32)
}

/// The two policies a root switches between: the defaults, and one that
/// escalates sooner and lets low-priority mail wait less.
fn policy(n: usize) -> squad_policies::Policy {
    let Ok(mut p) = squad_policies::Policy::parse(Some(runs::RUNNERS)) else {
        panic!("the model's runner policy does not parse");
    };
    if n % 2 == 1 {
        let m = std::time::Duration::from_secs(60);
        p.messages.escalate_after = [Some(m), Some(m * 3), Some(m * 5), Some(m * 10)];
        p.messages.low_max_wait = m * 4;
        p.messages.deliver_within = [std::time::Duration::ZERO, m, m * 2];
    }
    p
}

// ---------------------------------------------------------------- files

fn plan(task: u8, agent: &str, requires: &[u8], timeout: Option<u8>) -> String {
    let list = requires
        .iter()
        .map(|t| format!("task_{t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let timeout = timeout
        .map(|m| format!("  timeout: {}\n", u32::from(m) * 60))
        .unwrap_or_default();
    format!(
        "meta:\n  task_id: task_{task}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n{timeout}dependencies:\n  requires: [{list}]\n  blocks: []\ninstruction: x\n"
    )
}

fn progress(task: u8, agent: &str, status: &str, at: DateTime<Utc>) -> String {
    format!(
        "meta:\n  task_id: task_{task}\n  agent: {agent}\n  updated_at: {}\nstatus: {status}\n",
        stamp(at)
    )
}

/// A message: its id names one file (from and to follow from it).
fn message(
    id: u8,
    priority: usize,
    reply_to: Option<u8>,
    respond_in: Option<u8>,
) -> (String, String) {
    let (f, t) = (
        AGENTS[usize::from(id) % 3],
        AGENTS[(usize::from(id) / 3 + 1 + usize::from(id)) % 3],
    );
    let priority = ["critical", "high", "medium", "low"][priority % 4];
    let reply = reply_to
        .map(|r| format!("in_reply_to: msg_{r}\n"))
        .unwrap_or_default();
    let respond = respond_in
        .map(|m| {
            format!(
                "response_needed: true\nresponse_by: {}\n",
                stamp(base() + Duration::minutes(i64::from(m)))
            )
        })
        .unwrap_or_default();
    (
        format!("role-comm-{f}-to-{t}-msg_{id}.md"),
        format!(
            "meta:\n  message_id: msg_{id}\n  from_agent: {f}\n  to_agent: {t}\n  created_at: 2024-01-15T10:0{}:00Z\n  priority: {priority}\ntype: question\nsubject: s\nmessage: m\ncontext:\n  task_id: task_{}\n{reply}{respond}",
            id % 10,
            id % 4
        ),
    )
}

/// Another file reusing message `id`'s id: from the same sender to
/// another recipient (a name of its own).
fn clashing_message(id: u8, priority: usize) -> (String, String) {
    let (name, text) = message(id, priority, None, None);
    let Some((f, t)) = name
        .strip_prefix("role-comm-")
        .and_then(|n| n.split_once("-to-"))
        .map(|(f, rest)| {
            (
                f.to_string(),
                rest.split('-').next().unwrap_or("").to_string(),
            )
        })
    else {
        panic!("the model's message name {name}");
    };
    let other = AGENTS
        .iter()
        .find(|a| **a != f && **a != t)
        .copied()
        .unwrap_or("carol");
    (
        format!("role-comm-{f}-to-{other}-msg_{id}.md"),
        text.replace(&format!("to_agent: {t}\n"), &format!("to_agent: {other}\n")),
    )
}

fn error_report(agent: usize, to: usize, n: u8) -> (String, String) {
    let a = AGENTS[agent % 3];
    (
        format!("error-{a}-20240115T10380{n}Z.md"),
        format!(
            "error_id: err_20240115T103800Z_{n}\nagent: {a}\ntask_id: task_1\nseverity: critical\noccurred_at: 2024-01-15T10:38:00Z\nerror:\n  type: BuildBroken\n  message: linker failed\nrequires_intervention: true\nsuggested_agent: {}\n",
            AGENTS[to % 3]
        ),
    )
}

fn status_file(s: usize) -> String {
    match s % 3 {
        0 => "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n".into(),
        1 => "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: completed\ncompleted_at: 2024-01-15T11:00:00Z\n".into(),
        _ => "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: failed\nfailed_at: 2024-01-15T11:00:00Z\n".into(),
    }
}

mod adapter;
mod by_hand;
mod check;
mod oracle;
mod replays;
mod restart;
mod rules;
mod runs;
mod status;
mod world;

use oracle::*;
use runs::config;
use world::World;
/// One operation on the world.
#[derive(Debug, Clone)]
enum Op {
    Plan {
        root: usize,
        session: usize,
        agent: usize,
        task: u8,
        requires: Vec<u8>,
        timeout: Option<u8>,
    },
    Progress {
        root: usize,
        session: usize,
        agent: usize,
        task: u8,
        status: usize,
        minute: u8,
    },
    Message {
        root: usize,
        session: usize,
        id: u8,
        priority: usize,
        reply_to: Option<u8>,
        respond_in: Option<u8>,
    },
    Error {
        root: usize,
        session: usize,
        agent: usize,
        to: usize,
        n: u8,
    },
    Status {
        root: usize,
        session: usize,
        s: usize,
    },
    Garbage {
        root: usize,
        session: usize,
        n: usize,
    },
    Remove {
        root: usize,
        session: usize,
        n: usize,
    },
    Rename {
        root: usize,
        session: usize,
        n: usize,
        agent: usize,
    },
    /// An agent reads (acknowledges) an unread inbox entry.
    Ack {
        root: usize,
        session: usize,
        n: usize,
    },
    /// Time passes: every timer due by then fires.
    Advance(u8),
    /// `squadctl session complete|fail`.
    Edit {
        root: usize,
        session: usize,
        fail: bool,
    },
    /// An agent starts a task: the task planned for it (with a deadline),
    /// then its report `in_progress` stamped now (what a run's start
    /// leaves behind: the recipient is busy, the deadline counts).
    Start {
        root: usize,
        session: usize,
        agent: usize,
        task: u8,
        timeout: u8,
    },
    /// A run's process exits on its own (`ok`: its agent reported
    /// `completed` first).
    Exit {
        root: usize,
        session: usize,
        task: u8,
        ok: bool,
    },
    /// config.json changes the pool's size.
    Config { root: usize, max: u64 },
    /// The runner's command goes missing (or comes back).
    Break { root: usize, broken: bool },
    /// A file removed while the watcher lost events: a rescan.
    Lost {
        root: usize,
        session: usize,
        n: usize,
    },
    /// `.squad/policies.yaml` changes.
    Policy { root: usize, n: usize },
    /// Another file reuses message `id`'s id (a message id clash).
    Clash {
        root: usize,
        session: usize,
        id: u8,
        priority: usize,
    },
    /// squadd stops (SIGTERM, or kill -9) and starts again on the root.
    Restart { root: usize, kill: bool },
    /// `squadctl run task_N [--session S]`.
    Run {
        root: usize,
        session: Option<usize>,
        task: u8,
    },
    /// `squadctl stop task_N [--session S]`.
    Stop {
        root: usize,
        session: Option<usize>,
        task: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let r = 0usize..ROOTS;
    let s = 0usize..2;
    prop_oneof![
        4 => (r.clone(), s.clone(), 0usize..3, 0u8..5, proptest::collection::vec(0u8..5, 0..3), proptest::option::of(1u8..30))
            .prop_map(|(root, session, agent, task, requires, timeout)| Op::Plan { root, session, agent, task, requires, timeout }),
        5 => (r.clone(), s.clone(), 0usize..3, 0u8..5, 0usize..4, 0u8..60)
            .prop_map(|(root, session, agent, task, status, minute)| Op::Progress { root, session, agent, task, status, minute }),
        5 => (r.clone(), s.clone(), 0u8..8, 0usize..4, proptest::option::of(0u8..8), proptest::option::of(0u8..90))
            .prop_map(|(root, session, id, priority, reply_to, respond_in)| Op::Message { root, session, id, priority, reply_to, respond_in }),
        1 => (r.clone(), s.clone(), 0usize..3, 0usize..3, 0u8..3)
            .prop_map(|(root, session, agent, to, n)| Op::Error { root, session, agent, to, n }),
        1 => (r.clone(), s.clone(), 0usize..3).prop_map(|(root, session, s)| Op::Status { root, session, s }),
        1 => (r.clone(), s.clone(), any::<usize>()).prop_map(|(root, session, n)| Op::Garbage { root, session, n }),
        2 => (r.clone(), s.clone(), any::<usize>()).prop_map(|(root, session, n)| Op::Remove { root, session, n }),
        1 => (r.clone(), s.clone(), any::<usize>(), 0usize..3).prop_map(|(root, session, n, agent)| Op::Rename { root, session, n, agent }),
        3 => (r.clone(), s.clone(), any::<usize>()).prop_map(|(root, session, n)| Op::Ack { root, session, n }),
        3 => (0u8..40).prop_map(Op::Advance),
        1 => (r.clone(), s.clone(), any::<bool>()).prop_map(|(root, session, fail)| Op::Edit { root, session, fail }),
        3 => (r.clone(), s.clone(), 0usize..3, 0u8..5, 1u8..30).prop_map(|(root, session, agent, task, timeout)| Op::Start { root, session, agent, task, timeout }),
        4 => (r.clone(), s.clone(), 0u8..5, any::<bool>()).prop_map(|(root, session, task, ok)| Op::Exit { root, session, task, ok }),
        1 => (r.clone(), 1u64..4).prop_map(|(root, max)| Op::Config { root, max }),
        1 => (r.clone(), proptest::bool::weighted(0.3)).prop_map(|(root, broken)| Op::Break { root, broken }),
        1 => (r.clone(), s.clone(), any::<usize>()).prop_map(|(root, session, n)| Op::Lost { root, session, n }),
        1 => (r.clone(), 0usize..2).prop_map(|(root, n)| Op::Policy { root, n }),
        2 => (r.clone(), any::<bool>()).prop_map(|(root, kill)| Op::Restart { root, kill }),
        2 => (r.clone(), s.clone(), 0u8..8, 0usize..4).prop_map(|(root, session, id, priority)| Op::Clash { root, session, id, priority }),
        2 => (r.clone(), proptest::option::of(s.clone()), 0u8..5).prop_map(|(root, session, task)| Op::Run { root, session, task }),
        2 => (r, proptest::option::of(s), 0u8..5).prop_map(|(root, session, task)| Op::Stop { root, session, task }),
    ]
}

fn model_cases() -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(128)
}

fn after_of(d: std::time::Duration) -> Duration {
    Duration::from_std(d).unwrap_or(Duration::zero())
}

proptest! {
    // `MODEL_CASES=n` runs more cases by hand (a soak before a merge).
    #![proptest_config(ProptestConfig { cases: model_cases(), ..ProptestConfig::default() })]
    /// Issue 22 item 3: after every random operation over two roots with
    /// two sessions each, the incremental core equals a from-scratch
    /// derivation of the same files, inbox and persisted facts.
    #[test]
    fn the_core_equals_a_from_scratch_derivation_after_every_step(ops in proptest::collection::vec(op(), 1..40)) {
        replays::replay(ops);
    }
}

/// Issue 22 item 3: in a root whose session holds 2,000 messages, a
/// single-file change through the adapter does work bounded by the change
/// (tasks derived, files whose rules ran, effects returned, deliveries
/// offered), never by the session's size.
#[test]
fn a_single_file_change_in_a_root_with_2000_messages_does_constant_work() {
    let mut w = World::new();
    let s = SESSIONS[0];
    for t in 0..10u8 {
        let requires: Vec<u8> = if t == 0 { vec![] } else { vec![t - 1] };
        w.file(
            0,
            s,
            &format!("role-plan-alice-task_{t}.md"),
            Some(plan(t, "alice", &requires, None).into_bytes()),
        );
    }
    // The messages come while the watcher lost events: the rescan it
    // asks for reads them.
    for m in 0..2000u32 {
        let name = format!("role-comm-bob-to-alice-msg_b{m}.md");
        let text = format!(
            "meta:\n  message_id: msg_b{m}\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: notification\nsubject: s\nmessage: m\ncontext:\n  task_id: task_{}\n",
            m % 10
        );
        // Straight into the snapshot: messages start no task.
        if let Some(files) = w.snaps[0].files.get_mut(s) {
            files.insert(name, text.into_bytes());
        }
    }
    w.step(id(0), Input::RescanDue { present: true });
    w.end_batch();
    let work = |w: &World| {
        let c: &SessionCore = &w.cores[0].sessions[s];
        (c.derivations(), c.member_checks())
    };
    // Count the effects the core returns for the change.
    let before = work(&w);
    w.file(
        0,
        s,
        "role-comm-alice-task_3.md",
        Some(progress(3, "alice", "completed", base()).into_bytes()),
    );
    let (derived, checked) = (work(&w).0 - before.0, work(&w).1 - before.1);
    assert!(derived <= 2, "derived {derived} tasks");
    assert!(checked <= 1, "checked {checked} files' rules");
    // The file's step offered nothing and the batch wrote one session.
    let now = w.wall();
    let effects = Core::new(id(0), &mut w.cores[0]).step(
        Input::FileApplied {
            session: s.into(),
            file: "role-comm-alice-task_3.md".into(),
            own: None,
        },
        now,
    );
    assert!(effects.len() <= 2, "{effects:?}");
    w.end_batch();
    // One more message: one delivery offered, one file's rules.
    let before = work(&w);
    let (name, text) = message(5, 2, None, None);
    let effects_before = w.outbox.len();
    w.file(0, s, &name, Some(text.into_bytes()));
    assert!(work(&w).0 - before.0 <= 1);
    assert!(work(&w).1 - before.1 <= 1);
    assert!(w.outbox.len() - effects_before <= 1);
    w.end_batch();
    // Waiting deliveries are rechecked, not the session's 2,000 messages.
    let now = w.wall();
    let effects =
        Core::new(id(0), &mut w.cores[0]).step(Input::WaitingChanged { session: s.into() }, now);
    assert!(effects.len() <= 2, "{effects:?}");
    // And the core still equals the derivation from scratch.
    let want = Known::from_scratch(&w.snaps[0], w.now);
    let got = Known::of(&mut w.cores[0]);
    assert_eq!(got.sessions[s].view, want.sessions[s].view);
    assert_eq!(got.sessions[s].files, want.sessions[s].files);
    assert_eq!(got.sessions[s].diagnostics, want.sessions[s].diagnostics);
}
