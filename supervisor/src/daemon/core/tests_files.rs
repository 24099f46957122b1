//! Unit tests of [`super::files`] through [`Core::step`]: a file read,
//! gone, removed or unreadable, squadd's own writes, task deadlines; the
//! effects returned and their order.

use super::files::FileRef;
use super::timer::Timer;
use super::{Core, Effect, Input, Now, Root, RootId};
use crate::daemon::session::SessionCore;
use crate::events::EventKind;
use chrono::{DateTime, TimeZone, Utc};
use squad_protocol::FileKind;
use std::path::PathBuf;

pub(super) const SESSION: &str = "20240115T100000Z";
pub(super) const PLAN: &str = "role-plan-alice-task_1.md";
pub(super) const PROGRESS: &str = "role-comm-alice-task_1.md";

pub(super) fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap()
}

pub(super) fn now(minutes: i64) -> Now {
    Now {
        wall: base() + chrono::Duration::minutes(minutes),
    }
}

pub(super) fn id() -> RootId {
    RootId::nth(0)
}

pub(super) fn root() -> Root {
    let mut r = Root::new(
        PathBuf::from("/p"),
        crate::state::State::default(),
        squad_policies::Policy::defaults(),
        base(),
    );
    let dir = r.session_dir(SESSION);
    r.sessions
        .insert(SESSION.to_string(), Box::new(SessionCore::new(dir)));
    r
}

pub(super) fn plan(timeout_secs: Option<u32>) -> String {
    let timeout = timeout_secs
        .map(|s| format!("  timeout: {s}\n"))
        .unwrap_or_default();
    format!(
        "meta:\n  task_id: task_1\n  agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n{timeout}dependencies:\n  requires: []\n  blocks: []\ninstruction: x\n"
    )
}

pub(super) fn progress(status: &str) -> String {
    format!(
        "meta:\n  task_id: task_1\n  agent: alice\n  updated_at: 2024-01-15T10:01:00Z\nstatus: {status}\n"
    )
}

pub(super) fn message(id: &str) -> (String, String) {
    (
        format!("role-comm-alice-to-bob-{id}.md"),
        format!(
            "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: notification\nsubject: s\nmessage: m\n"
        ),
    )
}

pub(super) fn file(name: &str) -> FileRef {
    FileRef {
        session: SESSION.to_string(),
        file: name.to_string(),
        path: PathBuf::from("/p/.squad/sessions").join(SESSION).join(name),
    }
}

pub(super) fn read(r: &mut Root, name: &str, text: &str, at: Now) -> Vec<Effect> {
    let kind = FileKind::from_file_name(name).unwrap();
    let input = Input::FileRead {
        file: file(name),
        kind,
        bytes: text.as_bytes(),
    };
    Core::new(id(), r).step(input, at)
}

pub(super) fn step(r: &mut Root, input: Input<'_>, at: Now) -> Vec<Effect> {
    Core::new(id(), r).step(input, at)
}

pub(super) fn touched(effects: &[Effect]) -> Vec<(String, bool)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Touched {
                session, removal, ..
            } => Some((session.clone(), *removal)),
            _ => None,
        })
        .collect()
}

pub(super) fn emitted(effects: &[Effect]) -> Vec<&EventKind> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { kind, .. } => Some(kind),
            _ => None,
        })
        .collect()
}

pub(super) fn position(effects: &[Effect], want: impl Fn(&Effect) -> bool) -> usize {
    effects
        .iter()
        .position(want)
        .unwrap_or_else(|| panic!("not found in {effects:?}"))
}

fn indexed(r: &Root, name: &str) -> bool {
    r.sessions[SESSION].index().files.contains_key(name)
}

#[test]
fn a_new_file_is_routed_then_announced_then_its_session_touched() {
    let mut r = root();
    let effects = read(&mut r, PLAN, &plan(None), now(0));
    assert_eq!(effects[0], Effect::PathPresent(file(PLAN).path));
    assert_eq!(effects[1], Effect::PathReadable(file(PLAN).path));
    let route = position(
        &effects,
        |e| matches!(e, Effect::Route { file, own: None, .. } if file == PLAN),
    );
    let announced = position(
        &effects,
        |e| matches!(e, Effect::Emit { kind: EventKind::FileValidated { .. }, path: Some(p), .. } if *p == file(PLAN).path),
    );
    let ready = position(&effects, |e| {
        matches!(
            e,
            Effect::Emit {
                kind: EventKind::TaskReady { .. },
                ..
            }
        )
    });
    assert!(route < announced && announced < ready, "{effects:?}");
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), false)]);
    assert_eq!(
        effects.last(),
        Some(&Effect::Touched {
            root: id(),
            session: SESSION.into(),
            removal: false
        })
    );
    assert!(indexed(&r, PLAN));
}

#[test]
fn the_same_bytes_again_are_recognised_and_nothing_follows() {
    let mut r = root();
    read(&mut r, PLAN, &plan(None), now(0));
    // A repeated event, or squadd's own write seen again.
    let effects = read(&mut r, PLAN, &plan(None), now(1));
    assert_eq!(effects, vec![Effect::PathPresent(file(PLAN).path)]);
}

#[test]
fn a_file_found_gone_is_removed_only_once_the_shell_confirms_it() {
    let mut r = root();
    read(&mut r, PLAN, &plan(None), now(0));
    let effects = step(&mut r, Input::FileGone(file(PLAN)), now(1));
    assert_eq!(
        effects,
        vec![Effect::ConfirmGone {
            root: id(),
            file: file(PLAN)
        }],
        "a file replaced by unlink and create is a change, not a removal"
    );
    assert!(
        indexed(&r, PLAN),
        "nothing forgotten before the confirmation"
    );
    let effects = step(&mut r, Input::FileRemoved(file(PLAN)), now(1));
    assert_eq!(effects[0], Effect::PathReadable(file(PLAN).path));
    assert!(
        emitted(&effects).contains(&&EventKind::FileRemoved),
        "{effects:?}"
    );
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), true)]);
    assert!(!indexed(&r, PLAN));
}

#[test]
fn a_file_gone_that_was_never_indexed_touches_nothing() {
    let mut r = root();
    let effects = step(&mut r, Input::FileGone(file(PLAN)), now(0));
    assert!(touched(&effects).is_empty(), "{effects:?}");
    assert!(emitted(&effects).is_empty(), "{effects:?}");
    assert!(effects.contains(&Effect::PathPresent(file(PLAN).path)));
}

fn unreadable_file(name: &str) -> Box<crate::index::IndexedFile> {
    let path = file(name).path;
    let d = squad_protocol::Diagnostic::new(
        &path,
        squad_protocol::Rule::Unreadable,
        "cannot read the file: permission denied",
        "check that the file exists and is readable by this user",
    );
    Box::new(crate::index::IndexedFile::new(
        &path,
        FileKind::from_file_name(name).unwrap(),
        crate::index::Entry::Invalid,
        Default::default(),
        vec![d],
        0,
    ))
}

#[test]
fn an_unreadable_file_is_read_again_and_reported_once_per_reason() {
    let mut r = root();
    let input = |n| Input::FileUnreadable {
        file: file(n),
        indexed: unreadable_file(n),
    };
    let effects = step(&mut r, input(PLAN), now(0));
    let retry = position(&effects, |e| *e == Effect::RetryUnreadable(file(PLAN).path));
    let invalid = position(&effects, |e| {
        matches!(
            e,
            Effect::Emit {
                kind: EventKind::FileInvalid { .. },
                ..
            }
        )
    });
    assert!(retry < invalid, "{effects:?}");
    assert!(!effects.contains(&Effect::PathReadable(file(PLAN).path)));
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), false)]);
    // The same reason again: read again later, nothing reported.
    let effects = step(&mut r, input(PLAN), now(1));
    assert_eq!(
        effects,
        vec![
            Effect::PathPresent(file(PLAN).path),
            Effect::RetryUnreadable(file(PLAN).path)
        ]
    );
    // Readable again: fixed, and the retries end.
    let effects = read(&mut r, PLAN, &plan(None), now(2));
    assert!(effects.contains(&Effect::PathReadable(file(PLAN).path)));
    assert!(
        emitted(&effects).contains(&&EventKind::FileFixed),
        "{effects:?}"
    );
}

#[test]
fn a_session_ended_by_a_change_is_wrapped_up_at_once_by_a_removal_later() {
    let mut r = root();
    read(&mut r, PLAN, &plan(None), now(0));
    let effects = read(&mut r, PROGRESS, &progress("completed"), now(1));
    let wrap = position(
        &effects,
        |e| matches!(e, Effect::WrapUp { status, .. } if status == "completed"),
    );
    let status_changed = position(&effects, |e| {
        matches!(
            e,
            Effect::Emit {
                kind: EventKind::SessionStatusChanged { .. },
                ..
            }
        )
    });
    assert!(
        status_changed < wrap,
        "the change is told before the wrap-up: {effects:?}"
    );
    assert!(!effects.iter().any(|e| matches!(
        e,
        Effect::SetTimer {
            timer: Timer::WrapUp { .. },
            ..
        }
    )));

    // Another root where the session ends because a file went (the
    // in-progress update of a second task is removed): the wrap-up waits,
    // the directory may be being deleted.
    let mut r = root();
    let plan2 = plan(None).replace("task_1", "task_2");
    read(&mut r, PLAN, &plan(None), now(0));
    read(&mut r, PROGRESS, &progress("completed"), now(0));
    read(&mut r, "role-plan-alice-task_2.md", &plan2, now(0));
    step(
        &mut r,
        Input::FileGone(file("role-plan-alice-task_2.md")),
        now(1),
    );
    let effects = step(
        &mut r,
        Input::FileRemoved(file("role-plan-alice-task_2.md")),
        now(1),
    );
    assert!(
        effects.contains(&Effect::SetTimer {
            timer: Timer::WrapUp {
                root: id(),
                session: SESSION.into()
            },
            after: super::batch::REMOVAL_DELAY,
        }),
        "{effects:?}"
    );
    assert!(!effects.iter().any(|e| matches!(e, Effect::WrapUp { .. })));
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), true)]);
}

#[test]
fn a_task_deadline_arms_its_timer_and_its_passing_reports_it_once_and_saves_state() {
    let mut r = root();
    read(&mut r, PLAN, &plan(Some(60)), now(0));
    let effects = read(&mut r, PROGRESS, &progress("in_progress"), now(1));
    let due = Timer::TaskDue {
        root: id(),
        session: SESSION.into(),
        task: "task_1".into(),
    };
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::SetTimerAt { timer, .. } if *timer == due)),
        "{effects:?}"
    );
    let save = Effect::SetTimerEarlier {
        timer: Timer::SaveState(id()),
        after: super::batch::CONTEXT_DELAY,
    };
    assert!(
        effects.contains(&save),
        "the start is persisted: {effects:?}"
    );
    let tasks = || Input::TasksDue {
        session: SESSION.into(),
        tasks: vec!["task_1".into()],
    };
    let effects = step(&mut r, tasks(), now(5));
    let overdue = position(&effects, |e| {
        matches!(
            e,
            Effect::Emit {
                kind: EventKind::TaskOverdue { .. },
                ..
            }
        )
    });
    let saved = position(&effects, |e| *e == save);
    assert!(overdue < saved, "{effects:?}");
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), false)]);
    let again = step(&mut r, tasks(), now(6));
    assert!(
        !emitted(&again)
            .iter()
            .any(|k| matches!(k, EventKind::TaskOverdue { .. })),
        "reported once: {again:?}"
    );
}

#[test]
fn squadds_own_status_write_is_indexed_silently() {
    let mut r = root();
    read(&mut r, PLAN, &plan(None), now(0));
    let status = "---\nsession_id: x\nstatus: active\n---\n";
    let written = file("session-status.md");
    let input = Input::StatusWritten {
        session: written.session,
        path: written.path,
        bytes: status.as_bytes(),
        error: None,
    };
    let effects = step(&mut r, input, now(1));
    assert!(touched(&effects).is_empty(), "{effects:?}");
    assert!(!effects.iter().any(|e| matches!(e, Effect::Route { .. })));
    assert!(
        !emitted(&effects).iter().any(|k| matches!(
            k,
            EventKind::FileValidated { .. } | EventKind::FileInvalid { .. }
        )),
        "{effects:?}"
    );
    assert!(indexed(&r, "session-status.md"));
    // Its watch event then reads the same bytes: nothing.
    let effects = read(&mut r, "session-status.md", status, now(2));
    assert_eq!(
        effects,
        vec![Effect::PathPresent(file("session-status.md").path)]
    );
}

#[test]
fn a_notice_written_is_routed_from_the_bytes_squadd_wrote() {
    let mut r = root();
    let (name, text) = message("msg_1");
    let bytes: std::sync::Arc<[u8]> = std::sync::Arc::from(text.into_bytes());
    let input = Input::NoticeWritten {
        file: file(&name),
        bytes: bytes.clone(),
    };
    let effects = step(&mut r, input, now(0));
    assert!(
        effects.contains(&Effect::Route {
            root: id(),
            session: SESSION.into(),
            file: name.clone(),
            own: Some(bytes),
        }),
        "{effects:?}"
    );
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), false)]);
}

#[test]
fn a_file_of_an_unknown_session_does_nothing() {
    let mut r = root();
    let mut f = file(PLAN);
    f.session = "20990101T000000Z".into();
    let text = plan(None);
    let input = Input::FileRead {
        file: f.clone(),
        kind: FileKind::TaskAssignment,
        bytes: text.as_bytes(),
    };
    assert!(step(&mut r, input, now(0)).is_empty());
    assert!(step(&mut r, Input::FileGone(f), now(0)).is_empty());
}
