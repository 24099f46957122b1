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

const SESSION: &str = "20240115T100000Z";
const PLAN: &str = "role-plan-alice-task_1.md";
const PROGRESS: &str = "role-comm-alice-task_1.md";

fn base() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap()
}

fn now(minutes: i64) -> Now {
    Now {
        wall: base() + chrono::Duration::minutes(minutes),
    }
}

fn id() -> RootId {
    RootId::nth(0)
}

fn root() -> Root {
    let mut r = Root::new(
        PathBuf::from("/p"),
        crate::state::State::default(),
        squad_policies::Policy::defaults(),
        base(),
    );
    let dir = r.session_dir(SESSION);
    r.sessions
        .insert(SESSION.to_string(), SessionCore::new(dir));
    r
}

fn plan(timeout_secs: Option<u32>) -> String {
    let timeout = timeout_secs
        .map(|s| format!("  timeout: {s}\n"))
        .unwrap_or_default();
    format!(
        "meta:\n  task_id: task_1\n  agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n{timeout}dependencies:\n  requires: []\n  blocks: []\ninstruction: x\n"
    )
}

fn progress(status: &str) -> String {
    format!(
        "meta:\n  task_id: task_1\n  agent: alice\n  updated_at: 2024-01-15T10:01:00Z\nstatus: {status}\n"
    )
}

fn message(id: &str) -> (String, String) {
    (
        format!("role-comm-alice-to-bob-{id}.md"),
        format!(
            "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: bob\n  created_at: 2024-01-15T10:00:00Z\n  priority: medium\ntype: notification\nsubject: s\nmessage: m\n"
        ),
    )
}

fn file(name: &str) -> FileRef {
    FileRef {
        session: SESSION.to_string(),
        file: name.to_string(),
        path: PathBuf::from("/p/.squad/sessions").join(SESSION).join(name),
    }
}

fn read(r: &mut Root, name: &str, text: &str, at: Now) -> Vec<Effect> {
    let kind = FileKind::from_file_name(name).unwrap();
    let input = Input::FileRead {
        file: file(name),
        kind,
        bytes: text.as_bytes(),
    };
    Core::new(id(), r).step(input, at)
}

fn step(r: &mut Root, input: Input<'_>, at: Now) -> Vec<Effect> {
    Core::new(id(), r).step(input, at)
}

fn touched(effects: &[Effect]) -> Vec<(String, bool)> {
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

fn emitted(effects: &[Effect]) -> Vec<&EventKind> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit { kind, .. } => Some(kind),
            _ => None,
        })
        .collect()
}

fn position(effects: &[Effect], want: impl Fn(&Effect) -> bool) -> usize {
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
    let input = Input::OwnWrite {
        file: file("session-status.md"),
        kind: FileKind::SessionStatus,
        bytes: status.as_bytes(),
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

// Whole sessions and roots (core/scan.rs).

use super::scan::Scanned;
use crate::index::SessionIndex;
use std::collections::BTreeSet;

/// A scanned session `name` holding `files` (name, text).
fn index(name: &str, files: &[(&str, String)]) -> Box<SessionIndex> {
    let dir = PathBuf::from("/p/.squad/sessions").join(name);
    let mut s = SessionIndex::new(dir.clone());
    for (file, text) in files {
        let kind = FileKind::from_file_name(file).unwrap();
        s.insert(
            file.to_string(),
            crate::index::index_bytes(&dir.join(file), kind, text.as_bytes()),
        );
    }
    s.recheck();
    Box::new(s)
}

fn bare_root() -> Root {
    Root::new(
        PathBuf::from("/p"),
        crate::state::State::default(),
        squad_policies::Policy::defaults(),
        base(),
    )
}

const BROKEN: &str = "role-plan-bob-task_2.md";

#[test]
fn the_start_up_scan_is_a_baseline_that_reports_invalid_files_and_finishes_ended_sessions() {
    let mut r = bare_root();
    let files = [
        (PLAN, plan(None)),
        (PROGRESS, progress("completed")),
        (BROKEN, "meta: [".to_string()),
    ];
    let input = Input::SessionScanned {
        index: index(SESSION, &files),
        why: Scanned::StartUp,
    };
    let effects = step(&mut r, input, now(0));
    let invalid = position(
        &effects,
        |e| matches!(e, Effect::Emit { kind: EventKind::FileInvalid { .. }, path: Some(p), .. } if p.ends_with(BROKEN)),
    );
    let finish = position(
        &effects,
        |e| matches!(e, Effect::FinishEnded { status, .. } if status == "completed"),
    );
    assert!(invalid < finish, "{effects:?}");
    assert!(
        !emitted(&effects)
            .iter()
            .any(|k| matches!(k, EventKind::TaskReady { .. } | EventKind::SessionAdded)),
        "the start-up is a baseline: {effects:?}"
    );
    assert!(!effects.iter().any(|e| matches!(e, Effect::WrapUp { .. })));
    assert!(touched(&effects).is_empty(), "{effects:?}");
    assert!(r.sessions.contains_key(SESSION));
}

#[test]
fn the_start_up_ends_with_statuses_facts_mail_notices_state_context_then_started() {
    let mut r = bare_root();
    r.state
        .task_starts
        .insert("20200101T000000Z".into(), Default::default());
    let input = Input::SessionScanned {
        index: index(SESSION, &[(PLAN, plan(None))]),
        why: Scanned::StartUp,
    };
    step(&mut r, input, now(0));
    let effects = step(
        &mut r,
        Input::StartScanned {
            files: 1,
            complete: true,
        },
        now(0),
    );
    let at = |want: &dyn Fn(&Effect) -> bool| position(&effects, want);
    let order = [
        at(
            &|e| matches!(e, Effect::WriteStatuses { sessions, .. } if sessions == &vec![SESSION.to_string()]),
        ),
        at(&|e| matches!(e, Effect::RefreshSkills(_))),
        at(&|e| {
            matches!(
                e,
                Effect::Tap {
                    kind: EventKind::TaskReady { .. },
                    ..
                }
            )
        }),
        at(&|e| matches!(e, Effect::SeedMail { .. })),
        at(&|e| *e == Effect::SendNotices),
        at(&|e| *e == Effect::FlushOutbox),
        at(&|e| *e == Effect::SaveState(id())),
        at(&|e| *e == Effect::WriteSharedContextNow(id())),
        at(&|e| {
            matches!(
                e,
                Effect::Emit {
                    kind: EventKind::Started {
                        sessions: 1,
                        files: 1
                    },
                    ..
                }
            )
        }),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "{order:?} {effects:?}"
    );
    assert!(
        !r.state.task_starts.contains_key("20200101T000000Z"),
        "a session gone while squadd was down is forgotten"
    );
    // A scan that could not read the root prunes nothing.
    let mut r = bare_root();
    r.state
        .task_starts
        .insert("20200101T000000Z".into(), Default::default());
    let failed = step(&mut r, Input::StartScanFailed, now(0));
    assert!(r.missing);
    assert!(emitted(&failed).contains(&&EventKind::RootMissing));
    step(
        &mut r,
        Input::StartScanned {
            files: 0,
            complete: false,
        },
        now(0),
    );
    assert!(r.state.task_starts.contains_key("20200101T000000Z"));
}

#[test]
fn a_session_directory_that_appears_is_watched_then_scanned_and_announced() {
    let mut r = bare_root();
    let dir = |present| Input::SessionDir {
        session: SESSION.into(),
        present,
    };
    let effects = step(&mut r, dir(true), now(0));
    assert_eq!(
        effects,
        vec![
            Effect::WatchSession {
                root: id(),
                session: SESSION.into()
            },
            Effect::ScanSession {
                root: id(),
                session: SESSION.into(),
                why: Scanned::Appeared
            }
        ],
        "watched first: files created before the watch are found by the scan"
    );
    let files = [(PLAN, plan(None)), (BROKEN, "meta: [".to_string())];
    let input = Input::SessionScanned {
        index: index(SESSION, &files),
        why: Scanned::Appeared,
    };
    let effects = step(&mut r, input, now(0));
    assert!(matches!(
        &effects[0],
        Effect::Emit {
            kind: EventKind::SessionAdded,
            ..
        }
    ));
    let invalid = position(&effects, |e| {
        matches!(
            e,
            Effect::Emit {
                kind: EventKind::FileInvalid { .. },
                ..
            }
        )
    });
    let ready = position(&effects, |e| {
        matches!(
            e,
            Effect::Emit {
                kind: EventKind::TaskReady { .. },
                ..
            }
        )
    });
    let seed = position(&effects, |e| matches!(e, Effect::SeedMail { .. }));
    assert!(invalid < ready && ready < seed, "{effects:?}");
    assert_eq!(touched(&effects), vec![(SESSION.to_string(), false)]);
    // Known and there: nothing.
    assert!(step(&mut r, dir(true), now(1)).is_empty());
}

#[test]
fn a_session_directory_that_vanished_is_forgotten_with_its_state() {
    let mut r = root();
    read(&mut r, PLAN, &plan(Some(60)), now(0));
    read(&mut r, PROGRESS, &progress("in_progress"), now(1));
    r.state_to_save();
    assert!(r.state.task_starts.contains_key(SESSION));
    r.mail.insert(SESSION.into(), Default::default());
    let effects = step(
        &mut r,
        Input::SessionDir {
            session: SESSION.into(),
            present: false,
        },
        now(2),
    );
    assert_eq!(
        effects[0],
        Effect::ForgetSession {
            root: id(),
            session: SESSION.into()
        }
    );
    assert!(emitted(&effects).contains(&&EventKind::SessionRemoved));
    for timer in [Timer::Context(id()), Timer::SaveState(id())] {
        assert!(
            effects.contains(&Effect::SetTimerEarlier {
                timer,
                after: super::batch::CONTEXT_DELAY
            }),
            "{effects:?}"
        );
    }
    assert!(!r.sessions.contains_key(SESSION) && !r.mail.contains_key(SESSION));
    assert!(!r.state.task_starts.contains_key(SESSION));
    // Unknown and absent: nothing.
    let again = Input::SessionDir {
        session: SESSION.into(),
        present: false,
    };
    assert!(step(&mut r, again, now(3)).is_empty());
}

#[test]
fn a_rescan_of_a_missing_root_says_so_once_then_restores_it_when_listed() {
    let mut r = root();
    let due = |present| Input::RescanDue { present };
    let effects = step(&mut r, due(false), now(0));
    assert_eq!(effects[0], Effect::ForgetWatches(id()));
    assert!(emitted(&effects).contains(&&EventKind::RootMissing));
    assert!(effects.contains(&Effect::SetTimer {
        timer: Timer::RootCheck(id()),
        after: super::timer::ROOT_CHECK_FIRST
    }));
    assert!(r.missing);
    assert_eq!(
        step(&mut r, due(false), now(1)),
        vec![Effect::ForgetWatches(id())],
        "missing is said once"
    );
    assert_eq!(
        step(&mut r, due(true), now(2)),
        vec![
            Effect::CancelTimer(Timer::RootCheck(id())),
            Effect::UnwatchRoot(id()),
            Effect::ListSessions(id())
        ]
    );
    // Listed: the known session is read again file by file, a new one
    // scanned, one gone forgotten; each one's mail seeded after it.
    r.sessions.insert(
        "20200101T000000Z".into(),
        SessionCore::new(PathBuf::from("/p/.squad/sessions/20200101T000000Z")),
    );
    let names = BTreeSet::from([SESSION.to_string(), "20250101T000000Z".to_string()]);
    let effects = step(&mut r, Input::SessionListed { names }, now(3));
    let gone = position(
        &effects,
        |e| matches!(e, Effect::ForgetSession { session, .. } if session == "20200101T000000Z"),
    );
    let rescan = position(
        &effects,
        |e| matches!(e, Effect::RescanSession { session, .. } if session == SESSION),
    );
    let scan = position(
        &effects,
        |e| matches!(e, Effect::ScanSession { session, why: Scanned::Rescan, .. } if session == "20250101T000000Z"),
    );
    let seeds: Vec<usize> = effects
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Effect::SeedMail { .. }))
        .map(|(n, _)| n)
        .collect();
    let finish = position(&effects, |e| *e == Effect::FinishRescan(id()));
    assert!(
        gone < rescan
            && rescan < seeds[0]
            && seeds[0] < scan
            && scan < seeds[1]
            && seeds[1] < finish,
        "{effects:?}"
    );
    let mut all: Vec<String> = touched(&effects)
        .into_iter()
        .map(|(s, removal)| {
            assert!(!removal);
            s
        })
        .collect();
    all.sort();
    assert_eq!(all, vec!["20200101T000000Z", SESSION, "20250101T000000Z"]);
    assert!(r.missing, "still missing until the sessions are read");
    let effects = step(&mut r, Input::Rescanned, now(4));
    assert!(!r.missing);
    assert_eq!(
        emitted(&effects),
        vec![
            &EventKind::RootRestored,
            &EventKind::Rescanned {
                reason: "root restored".into()
            }
        ]
    );
    let effects = step(&mut r, Input::Rescanned, now(5));
    assert_eq!(
        emitted(&effects),
        vec![&EventKind::Rescanned {
            reason: "the watcher asked for a rescan".into()
        }]
    );
    // A root another squadd took over is not rescanned.
    r.taken_over = Some("42".into());
    assert!(step(&mut r, due(true), now(6)).is_empty());
}

#[test]
fn a_known_session_listed_by_a_rescan_reads_each_file_and_each_indexed_one_gone() {
    let mut r = root();
    read(&mut r, PLAN, &plan(None), now(0));
    read(&mut r, PROGRESS, &progress("in_progress"), now(0));
    let on_disk = vec![
        (file(PLAN).path, FileKind::TaskAssignment),
        (file(BROKEN).path, FileKind::TaskAssignment),
    ];
    let effects = step(
        &mut r,
        Input::SessionFilesListed {
            session: SESSION.into(),
            on_disk,
        },
        now(1),
    );
    let reads: Vec<&str> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::ReadFile { file, .. } => Some(file.file.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reads, vec![PLAN, BROKEN, PROGRESS], "{effects:?}");
    assert_eq!(reads.len(), effects.len());
}

#[test]
fn a_sessions_inboxes_listed_seed_its_mailbox_then_escalations_run_then_its_files_are_routed() {
    let mut r = root();
    let (name, text) = message("msg_1");
    read(&mut r, &name, &text, now(0));
    read(&mut r, PLAN, &plan(None), now(0));
    r.mail.remove(SESSION);
    let entries = vec![(
        "bob".to_string(),
        "3-medium-20240115T100000Z-msg_1.md".to_string(),
        true,
        Some(base()),
    )];
    let input = Input::InboxesListed {
        session: SESSION.into(),
        entries: entries.clone(),
    };
    let effects = step(&mut r, input, now(1));
    assert_eq!(
        effects[0],
        Effect::RunEscalations {
            root: id(),
            session: SESSION.into()
        }
    );
    let routed: Vec<&str> = effects[1..]
        .iter()
        .filter_map(|e| match e {
            Effect::Route {
                file, own: None, ..
            } => Some(file.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(routed.len(), effects.len() - 1, "{effects:?}");
    let mut want = vec![name.as_str(), PLAN];
    want.sort();
    assert_eq!(routed, want);
    assert!(r.mail.contains_key(SESSION), "the mailbox is seeded");
    // A session squadd does not know (gone meanwhile): nothing, no mailbox.
    let input = Input::InboxesListed {
        session: "20990101T000000Z".into(),
        entries,
    };
    assert!(step(&mut r, input, now(2)).is_empty());
    assert!(!r.mail.contains_key("20990101T000000Z"));
}
