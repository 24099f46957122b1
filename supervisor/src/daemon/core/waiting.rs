//! Agents waiting for their person, told (issue 38, item 7): an agent's
//! presence record (`.squad/run/presence/<agent>.json`, written by its
//! CLI's hook: `squadctl presence`) read by the shell is handed in
//! ([`super::Input::PresenceRead`]; all of them when squadd starts or
//! re-reads the root: [`super::Input::PresenceListed`]); when it starts
//! waiting, `agent-waiting` is said and, for an agent of one of the root's
//! sessions (`SQUAD_SESSION`), the lead is told with a high-priority
//! message, as for a failed run. Said once per wait, a wait being known by
//! its start (the record's `since`, kept by the hook while the agent
//! waits): a record rewritten during the wait says nothing (Claude Code
//! follows its `PermissionRequest` with a `Notification` about the same
//! prompt), and a new wait is told even when squadd read no record of the
//! work between the two. A record gone forgets the agent's wait.
//!
//! The start of each wait told is kept in `state.json` (`waits_told`), so
//! that a wait that began while squadd was down is told once it is up, and
//! one told before a restart is not told again.
//!
//! At most one message per agent per [`TELL_EVERY`] ([`may_tell`]): an
//! agent whose waits come faster (a CLI flapping, or a forged record) has
//! its next wait held back and told when the time is up, if it still
//! waits then, saying how many waits it stands for.
//!
//! The record is written by whoever runs the CLI: its session must be one
//! squadd knows and its task a task id, or the lead is not told (a name
//! like `../x` never becomes a path).

use super::timer::Timer;
use super::{Effect, Root, RootId};
use crate::agent_presence::{Record, State};
use crate::events::EventKind;
use chrono::{DateTime, Utc};
use squad_protocol::IdKind;
use std::collections::BTreeMap;

/// The shortest time between two messages to a lead about one agent.
pub(crate) const TELL_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// What squadd knows of the agents' waits (a part of [`Root`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Waits {
    /// The start of the last wait said, per agent with a record (kept in
    /// `state.json`).
    pub told: BTreeMap<String, DateTime<Utc>>,
    /// When a lead was last told about each agent, for [`TELL_EVERY`].
    pub told_at: BTreeMap<String, DateTime<Utc>>,
    /// A wait held back by the limit: the newest record of the agent's
    /// wait.
    pub held: BTreeMap<String, Record>,
    /// How many waits of each agent began since its last message (while
    /// the limit held them back).
    pub untold: BTreeMap<String, u32>,
}

impl Waits {
    /// Starts from the waits told before a restart.
    pub(crate) fn from_told(told: BTreeMap<String, DateTime<Utc>>) -> Waits {
        Waits {
            told,
            ..Waits::default()
        }
    }

    /// Whether nothing is known of any agent.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.told.is_empty() && self.held.is_empty()
    }
}

/// Whether a lead last told about an agent at `last` may be told again at
/// `now`: `Ok`, or `Err(when)` it may.
pub(crate) fn may_tell(
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<(), DateTime<Utc>> {
    match last {
        Some(last) if now < last + TELL_EVERY && now >= last => Err(last + TELL_EVERY),
        _ => Ok(()),
    }
}

/// Every record as listed when squadd starts or re-reads the root (`None`:
/// unreadable, or its CLI is gone): a wait told that is no longer there is
/// forgotten, each record is read as one changed, and what was told is
/// saved.
pub(crate) fn presence_listed(
    root: &mut Root,
    id: RootId,
    records: Vec<(String, Option<Record>)>,
    now: DateTime<Utc>,
) -> Vec<Effect> {
    let before = root.waiting.told.clone();
    let there: std::collections::BTreeSet<&str> = records
        .iter()
        .filter(|(_, r)| r.is_some())
        .map(|(a, _)| a.as_str())
        .collect();
    root.waiting.told.retain(|a, _| there.contains(a.as_str()));
    root.waiting.held.retain(|a, _| there.contains(a.as_str()));
    let mut out = Vec::new();
    for (agent, record) in records {
        out.extend(read(root, id, &agent, record, now));
    }
    if root.waiting.told != before && !out.contains(&Effect::SaveState(id)) {
        out.push(Effect::SaveState(id));
    }
    out
}

/// An agent's record as read (`None`: gone, or its CLI is).
pub(crate) fn presence_read(
    root: &mut Root,
    id: RootId,
    agent: &str,
    record: Option<Record>,
    now: DateTime<Utc>,
) -> Vec<Effect> {
    let had = root.waiting.told.contains_key(agent);
    let mut out = read(root, id, agent, record, now);
    if had && !root.waiting.told.contains_key(agent) {
        out.push(Effect::SaveState(id));
    }
    out
}

fn read(
    root: &mut Root,
    id: RootId,
    agent: &str,
    record: Option<Record>,
    now: DateTime<Utc>,
) -> Vec<Effect> {
    let waits = &mut root.waiting;
    let Some(r) = record.filter(|r| r.agent == agent) else {
        waits.told.remove(agent);
        waits.held.remove(agent);
        return Vec::new();
    };
    // Working or idle: the wait told is kept, so that a late read of it
    // (two hooks racing) is not told again; a new wait has a new start. A
    // wait held back is over: nobody waits for its message.
    if r.state != State::Waiting {
        waits.held.remove(agent);
        return Vec::new();
    }
    let since = r.since.unwrap_or(r.at);
    if waits.told.get(agent) == Some(&since) {
        return Vec::new();
    }
    // The wait held back, written again: its newest words kept.
    if let Some(held) = waits.held.get_mut(agent)
        && held.since.unwrap_or(held.at) == since
    {
        *held = r;
        return Vec::new();
    }
    let detail = r.detail.clone().unwrap_or_else(|| "an answer".into());
    let session = r.session.clone().filter(|s| root.sessions.contains_key(s));
    let mut out = vec![Effect::Emit {
        root: id,
        session: session.clone(),
        path: None,
        kind: EventKind::AgentWaiting {
            agent: agent.to_string(),
            detail,
        },
    }];
    if session.is_none() {
        // Nobody to tell: said, and known as said.
        waits.told.insert(agent.to_string(), since);
        out.push(Effect::SaveState(id));
        return out;
    }
    let count = waits.untold.remove(agent).unwrap_or(0) + 1;
    match may_tell(waits.told_at.get(agent).copied(), now) {
        Ok(()) => out.extend(tell(root, id, agent, r, count, now)),
        Err(when) => {
            waits.untold.insert(agent.to_string(), count);
            waits.held.insert(agent.to_string(), r);
            out.push(Effect::SetTimerEarlierAt {
                timer: Timer::WaitsHeld(id),
                at: when,
            });
        }
    }
    out
}

/// The lead told of `r`'s wait (`count`: the waits it stands for since
/// the last message), and the wait known as told.
fn tell(
    root: &mut Root,
    id: RootId,
    agent: &str,
    r: Record,
    count: u32,
    now: DateTime<Utc>,
) -> Vec<Effect> {
    let since = r.since.unwrap_or(r.at);
    root.waiting.told.insert(agent.to_string(), since);
    root.waiting.told_at.insert(agent.to_string(), now);
    let Some(session) = r.session.filter(|s| root.sessions.contains_key(s)) else {
        return vec![Effect::SaveState(id)];
    };
    let detail = r.detail.unwrap_or_else(|| "an answer".into());
    let task = r.task.filter(|t| IdKind::Task.matches(t));
    let on = task
        .as_ref()
        .map_or_else(String::new, |t| format!(" on {t}"));
    let place = r.cwd.map_or_else(String::new, |c| format!(" in {c}"));
    let more = if count > 1 {
        format!(
            " ({count} waits since the last message about {agent}: at most one message per agent every {} s.)",
            TELL_EVERY.num_seconds()
        )
    } else {
        String::new()
    };
    vec![
        Effect::TellLead {
            root: id,
            session,
            task,
            subject: format!("{agent} is waiting for you"),
            text: format!(
                "{agent}{on} is waiting for you: {detail}. Answer it in its {} session{place}.{more}",
                r.cli
            ),
            tail_of: None,
        },
        Effect::SaveState(id),
    ]
}

/// The held-back waits whose time has come are told
/// ([`Timer::WaitsHeld`]); the timer is set again for the others.
pub(crate) fn held_due(root: &mut Root, id: RootId, now: DateTime<Utc>) -> Vec<Effect> {
    let mut out = vec![Effect::CancelTimer(Timer::WaitsHeld(id))];
    // Limits older than the limit are forgotten (bounded by the agents
    // told in the last TELL_EVERY).
    root.waiting
        .told_at
        .retain(|_, at| may_tell(Some(*at), now).is_err());
    let due: Vec<String> = root
        .waiting
        .held
        .keys()
        .filter(|a| may_tell(root.waiting.told_at.get(*a).copied(), now).is_ok())
        .cloned()
        .collect();
    for agent in due {
        let count = root.waiting.untold.remove(&agent).unwrap_or(1);
        if let Some(r) = root.waiting.held.remove(&agent) {
            out.extend(tell(root, id, &agent, r, count, now));
        }
    }
    let waits = &mut root.waiting;
    waits
        .untold
        .retain(|a, _| waits.told_at.contains_key(a) || waits.held.contains_key(a));
    let next = root
        .waiting
        .held
        .keys()
        .filter_map(|a| may_tell(root.waiting.told_at.get(a).copied(), now).err())
        .min();
    if let Some(at) = next {
        out.push(Effect::SetTimerEarlierAt {
            timer: Timer::WaitsHeld(id),
            at,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::core::tests::{SESSION, root_with};
    use chrono::{TimeZone, Utc};

    fn record(state: State, detail: &str, session: &str, task: Option<&str>) -> Record {
        Record {
            agent: "backend".into(),
            state,
            detail: Some(detail.into()),
            cli: "claude".into(),
            session: Some(session.into()),
            task: task.map(str::to_string),
            cwd: Some("/p".into()),
            pid: 0,
            process_start: 0,
            at: Utc.with_ymd_and_hms(2024, 1, 15, 10, 5, 0).unwrap(),
            since: (state == State::Waiting).then_some(at(0)),
        }
    }

    fn at(minute: u32) -> chrono::DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap()
            + chrono::TimeDelta::minutes(minute.into())
    }

    fn since(mut r: Record, minute: u32) -> Record {
        r.since = Some(at(minute));
        r
    }

    fn told(out: &[Effect]) -> Vec<(String, Option<String>, String, String)> {
        out.iter()
            .filter_map(|e| match e {
                Effect::TellLead {
                    session,
                    task,
                    subject,
                    text,
                    ..
                } => Some((session.clone(), task.clone(), subject.clone(), text.clone())),
                _ => None,
            })
            .collect()
    }

    fn said(out: &[Effect]) -> usize {
        out.iter()
            .filter(|e| {
                matches!(e, Effect::Emit { kind: EventKind::AgentWaiting { agent, .. }, .. }
                    if agent == "backend")
            })
            .count()
    }

    #[test]
    fn a_wait_is_said_and_the_lead_told_once_until_it_ends() {
        let mut r = root_with(&[]);
        let id = RootId::nth(0);
        let ask = "permission to use Bash: ls";
        let wait = record(State::Waiting, ask, SESSION, Some("task_1"));
        let out = presence_read(&mut r, id, "backend", Some(wait.clone()), at(12));
        assert_eq!(said(&out), 1, "{out:?}");
        assert_eq!(
            told(&out),
            [(
                SESSION.to_string(),
                Some("task_1".to_string()),
                "backend is waiting for you".to_string(),
                format!(
                    "backend on task_1 is waiting for you: {ask}. Answer it in its claude session in /p."
                )
            )]
        );
        // The same wait again (the record rewritten): nothing.
        assert!(presence_read(&mut r, id, "backend", Some(wait.clone()), at(14)).is_empty());
        // The same wait in other words (a Notification after the
        // PermissionRequest): nothing.
        let other = record(
            State::Waiting,
            "Claude needs your permission",
            SESSION,
            None,
        );
        assert!(presence_read(&mut r, id, "backend", Some(other), at(16)).is_empty());
        // Working, then the same wait again (a record read late): nothing;
        // a new wait: said again.
        let working = record(State::Working, "", SESSION, None);
        assert!(presence_read(&mut r, id, "backend", Some(working), at(18)).is_empty());
        assert!(presence_read(&mut r, id, "backend", Some(wait.clone()), at(20)).is_empty());
        let wait = since(wait, 1);
        assert_eq!(
            told(&presence_read(
                &mut r,
                id,
                "backend",
                Some(wait.clone()),
                at(22)
            ))
            .len(),
            1
        );
        // A new wait squadd saw no work before: said.
        let wait = since(wait, 2);
        assert_eq!(
            told(&presence_read(
                &mut r,
                id,
                "backend",
                Some(wait.clone()),
                at(24)
            ))
            .len(),
            1
        );
        // Gone (SessionEnd, or its CLI died): forgotten.
        assert_eq!(
            presence_read(&mut r, id, "backend", None, at(26)),
            [Effect::SaveState(id)]
        );
        assert!(r.waiting.is_empty());
        // A record without `since` (an older hook): its time stands in.
        let mut old = since(wait, 0);
        old.since = None;
        assert_eq!(
            told(&presence_read(
                &mut r,
                id,
                "backend",
                Some(old.clone()),
                at(28)
            ))
            .len(),
            1
        );
        assert!(presence_read(&mut r, id, "backend", Some(old), at(30)).is_empty());
    }

    #[test]
    fn only_a_session_squadd_knows_gets_word_and_a_task_must_be_a_task_id() {
        let mut r = root_with(&[]);
        let id = RootId::nth(0);
        for (n, session) in ["../../etc", "20990101T000000Z", ""]
            .into_iter()
            .enumerate()
        {
            let rec = since(
                record(State::Waiting, "q", session, Some("task_1")),
                n as u32 + 1,
            );
            let out = presence_read(&mut r, id, "backend", Some(rec), at(32));
            assert_eq!(said(&out), 1, "{out:?}");
            assert!(told(&out).is_empty(), "{out:?}");
            assert!(
                out.iter().all(|e| matches!(
                    e,
                    Effect::Emit { session: None, .. } | Effect::SaveState(_)
                )),
                "{out:?}"
            );
        }
        let rec = record(State::Waiting, "q", SESSION, Some("../task_1"));
        let out = told(&presence_read(&mut r, id, "backend", Some(rec), at(34)));
        assert_eq!(out[0].1, None, "{out:?}");
        assert!(out[0].3.starts_with("backend is waiting"), "{out:?}");
        // A record under another agent's name is not that agent's.
        let mut r = root_with(&[]);
        let rec = record(State::Waiting, "q", SESSION, None);
        assert!(presence_read(&mut r, id, "frontend", Some(rec), at(36)).is_empty());
    }

    #[test]
    fn the_lead_is_told_at_most_once_a_minute_per_agent() {
        let t = at(0);
        assert_eq!(may_tell(None, t), Ok(()));
        let s = chrono::TimeDelta::seconds;
        assert_eq!(may_tell(Some(t), t + s(1)), Err(t + TELL_EVERY));
        assert_eq!(may_tell(Some(t), t + s(59)), Err(t + TELL_EVERY));
        assert_eq!(may_tell(Some(t), t + TELL_EVERY), Ok(()));
        // A clock set back does not silence an agent for good.
        assert_eq!(may_tell(Some(t), t - s(5)), Ok(()));
    }

    fn timer_at(out: &[Effect]) -> Option<chrono::DateTime<Utc>> {
        out.iter().find_map(|e| match e {
            Effect::SetTimerEarlierAt {
                timer: Timer::WaitsHeld(_),
                at,
            } => Some(*at),
            _ => None,
        })
    }

    #[test]
    fn waits_that_flap_are_held_back_and_told_in_one_message() {
        let mut r = root_with(&[]);
        let id = RootId::nth(0);
        let s = chrono::TimeDelta::seconds;
        let t0 = at(0);
        let wait = |n: i64, ask: &str| {
            let mut w = record(State::Waiting, ask, SESSION, Some("task_1"));
            w.since = Some(t0 + s(n));
            w
        };
        let working = record(State::Working, "", SESSION, None);
        let out = presence_read(&mut r, id, "backend", Some(wait(0, "first")), t0);
        assert_eq!(told(&out).len(), 1);
        assert!(out.contains(&Effect::SaveState(id)), "{out:?}");
        // Ten more waits in the next seconds: each said, none told; the
        // timer set for the minute's end.
        for n in 1..=10 {
            presence_read(&mut r, id, "backend", Some(working.clone()), t0 + s(n));
            let out = presence_read(
                &mut r,
                id,
                "backend",
                Some(wait(n, &format!("ask {n}"))),
                t0 + s(n),
            );
            assert_eq!(said(&out), 1, "{out:?}");
            assert!(told(&out).is_empty(), "{out:?}");
            assert_eq!(timer_at(&out), Some(t0 + TELL_EVERY), "{out:?}");
        }
        // The held wait written again: nothing new.
        assert!(
            presence_read(
                &mut r,
                id,
                "backend",
                Some(wait(10, "ask 10 again")),
                t0 + s(11)
            )
            .is_empty()
        );
        // Too early: nothing, the timer set again.
        let out = held_due(&mut r, id, t0 + s(30));
        assert!(told(&out).is_empty(), "{out:?}");
        assert_eq!(timer_at(&out), Some(t0 + TELL_EVERY));
        // The minute is up: one message, for the newest wait, saying how
        // many it stands for.
        let out = held_due(&mut r, id, t0 + TELL_EVERY);
        let t = told(&out);
        assert_eq!(t.len(), 1, "{out:?}");
        assert!(
            t[0].3
                .starts_with("backend on task_1 is waiting for you: ask 10 again."),
            "{}",
            t[0].3
        );
        assert!(t[0].3.contains("(10 waits since the last message about backend: at most one message per agent every 60 s.)"), "{}", t[0].3);
        assert_eq!(timer_at(&out), None);
        // Told: the same wait again says nothing.
        assert!(presence_read(&mut r, id, "backend", Some(wait(10, "x")), t0 + s(61)).is_empty());
        // A wait held back that ended before the minute was up: nobody
        // is told of it; the record going and coming back does not reset
        // the limit.
        presence_read(&mut r, id, "backend", Some(working.clone()), t0 + s(62));
        let out = presence_read(&mut r, id, "backend", Some(wait(63, "brief")), t0 + s(63));
        assert!(told(&out).is_empty());
        presence_read(&mut r, id, "backend", Some(working.clone()), t0 + s(64));
        presence_read(&mut r, id, "backend", None, t0 + s(65));
        let out = presence_read(&mut r, id, "backend", Some(wait(66, "again")), t0 + s(66));
        assert!(told(&out).is_empty(), "{out:?}");
        assert_eq!(timer_at(&out), Some(t0 + s(120)));
        let t = told(&held_due(&mut r, id, t0 + s(120)));
        assert_eq!(t.len(), 1, "{t:?}");
        assert!(
            t[0].3
                .starts_with("backend on task_1 is waiting for you: again."),
            "{}",
            t[0].3
        );
        // (The brief wait counts.)
        assert!(
            t[0].3
                .contains("(2 waits since the last message about backend"),
            "{}",
            t[0].3
        );
        // Another agent has its own limit.
        let mut other = wait(124, "other");
        other.agent = "frontend".into();
        assert_eq!(
            told(&presence_read(
                &mut r,
                id,
                "frontend",
                Some(other),
                t0 + s(124)
            ))
            .len(),
            1
        );
    }

    #[test]
    fn a_wait_told_before_a_restart_is_not_told_again_and_one_begun_while_down_is() {
        let id = RootId::nth(0);
        let wait = record(State::Waiting, "q", SESSION, Some("task_1"));
        let mut r = root_with(&[]);
        assert_eq!(
            told(&presence_read(
                &mut r,
                id,
                "backend",
                Some(wait.clone()),
                at(0)
            ))
            .len(),
            1
        );
        // What is saved, and a root started again from it.
        let state = r.state_to_save();
        assert_eq!(state.waits_told.get("backend"), wait.since.as_ref());
        let bytes = state.encode().unwrap();
        let mut again = root_with(&[]);
        let loaded: crate::state::State = serde_json::from_slice(&bytes).unwrap();
        again.waiting = Waits::from_told(loaded.waits_told);
        let out = presence_listed(
            &mut again,
            id,
            vec![("backend".into(), Some(wait.clone()))],
            at(5),
        );
        assert!(told(&out).is_empty(), "{out:?}");
        // A new wait begun while it was down: told at the start.
        let new = since(wait.clone(), 3);
        let out = presence_listed(&mut again, id, vec![("backend".into(), Some(new))], at(5));
        assert_eq!(told(&out).len(), 1, "{out:?}");
        // An agent whose record went while it was down is forgotten (and
        // that is saved).
        let out = presence_listed(&mut again, id, vec![("other".into(), None)], at(6));
        assert!(again.waiting.is_empty(), "{:?}", again.waiting);
        assert_eq!(out, [Effect::SaveState(id)]);
    }
}
