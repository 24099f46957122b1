//! Agents waiting for their person, told (issue 38, item 7): an agent's
//! presence record (`.squad/run/presence/<agent>.json`, written by its
//! CLI's hook: `squadctl presence`) read by the shell is handed in
//! ([`super::Input::PresenceRead`]); when it starts waiting,
//! `agent-waiting` is said and, for an agent of one of the root's sessions
//! (`SQUAD_SESSION`), the lead is told with a high-priority message, as for
//! a failed run. Said once per wait, a wait being known by its start (the
//! record's `since`, kept by the hook while the agent waits): a record
//! rewritten during the wait says nothing (Claude Code follows its
//! `PermissionRequest` with a `Notification` about the same prompt), and a
//! new wait is told even when squadd read no record of the work between
//! the two. A record gone forgets the agent. A wait that began while
//! squadd was down is not told once it is up (`status` and `top` show it).
//!
//! The record is written by whoever runs the CLI: its session must be one
//! squadd knows and its task a task id, or the lead is not told (a name
//! like `../x` never becomes a path).

use super::{Effect, Root, RootId};
use crate::agent_presence::{Record, State};
use crate::events::EventKind;
use squad_protocol::IdKind;

/// An agent's record as read (`None`: gone, or its CLI is).
pub(crate) fn presence_read(
    root: &mut Root,
    id: RootId,
    agent: &str,
    record: Option<Record>,
) -> Vec<Effect> {
    let Some(r) = record.filter(|r| r.agent == agent) else {
        root.waiting.remove(agent);
        return Vec::new();
    };
    // Working or idle: the wait told is kept, so that a late read of it
    // (two hooks racing) is not told again; a new wait has a new start.
    if r.state != State::Waiting {
        return Vec::new();
    }
    let since = r.since.unwrap_or(r.at);
    if root.waiting.get(agent) == Some(&since) {
        return Vec::new();
    }
    root.waiting.insert(agent.to_string(), since);
    let detail = r.detail.clone().unwrap_or_else(|| "an answer".into());
    let session = r.session.filter(|s| root.sessions.contains_key(s));
    let mut out = vec![Effect::Emit {
        root: id,
        session: session.clone(),
        path: None,
        kind: EventKind::AgentWaiting {
            agent: agent.to_string(),
            detail: detail.clone(),
        },
    }];
    if let Some(session) = session {
        let task = r.task.filter(|t| IdKind::Task.matches(t));
        let on = task
            .as_ref()
            .map_or_else(String::new, |t| format!(" on {t}"));
        let place = r.cwd.map_or_else(String::new, |c| format!(" in {c}"));
        out.push(Effect::TellLead {
            root: id,
            session,
            task,
            subject: format!("{agent} is waiting for you"),
            text: format!(
                "{agent}{on} is waiting for you: {detail}. Answer it in its {} session{place}.",
                r.cli
            ),
            tail_of: None,
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
        Utc.with_ymd_and_hms(2024, 1, 15, 10, minute, 0).unwrap()
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
        let out = presence_read(&mut r, id, "backend", Some(wait.clone()));
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
        assert!(presence_read(&mut r, id, "backend", Some(wait.clone())).is_empty());
        // The same wait in other words (a Notification after the
        // PermissionRequest): nothing.
        let other = record(
            State::Waiting,
            "Claude needs your permission",
            SESSION,
            None,
        );
        assert!(presence_read(&mut r, id, "backend", Some(other)).is_empty());
        // Working, then the same wait again (a record read late): nothing;
        // a new wait: said again.
        let working = record(State::Working, "", SESSION, None);
        assert!(presence_read(&mut r, id, "backend", Some(working)).is_empty());
        assert!(presence_read(&mut r, id, "backend", Some(wait.clone())).is_empty());
        let wait = since(wait, 1);
        assert_eq!(
            told(&presence_read(&mut r, id, "backend", Some(wait.clone()))).len(),
            1
        );
        // A new wait squadd saw no work before: said.
        let wait = since(wait, 2);
        assert_eq!(
            told(&presence_read(&mut r, id, "backend", Some(wait.clone()))).len(),
            1
        );
        // Gone (SessionEnd, or its CLI died): forgotten.
        assert!(presence_read(&mut r, id, "backend", None).is_empty());
        assert!(r.waiting.is_empty());
        // A record without `since` (an older hook): its time stands in.
        let mut old = since(wait, 0);
        old.since = None;
        assert_eq!(
            told(&presence_read(&mut r, id, "backend", Some(old.clone()))).len(),
            1
        );
        assert!(presence_read(&mut r, id, "backend", Some(old)).is_empty());
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
            let out = presence_read(&mut r, id, "backend", Some(rec));
            assert_eq!(said(&out), 1, "{out:?}");
            assert!(told(&out).is_empty(), "{out:?}");
            assert!(
                out.iter()
                    .all(|e| matches!(e, Effect::Emit { session: None, .. })),
                "{out:?}"
            );
        }
        let rec = record(State::Waiting, "q", SESSION, Some("../task_1"));
        let out = told(&presence_read(&mut r, id, "backend", Some(rec)));
        assert_eq!(out[0].1, None, "{out:?}");
        assert!(out[0].3.starts_with("backend is waiting"), "{out:?}");
        // A record under another agent's name is not that agent's.
        let mut r = root_with(&[]);
        let rec = record(State::Waiting, "q", SESSION, None);
        assert!(presence_read(&mut r, id, "frontend", Some(rec)).is_empty());
    }
}
