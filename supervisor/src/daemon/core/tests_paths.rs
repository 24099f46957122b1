//! Unit tests of [`super::paths`], the watch failures of
//! [`super::presence`] and the shell's reports of its writes (an edit
//! written, a notice not written) through [`Core::step`]: what a changed
//! path calls for, what a failed watch or watcher calls for, what a write
//! calls for.

use super::paths::{CONTROL_DELAY, MEMORY_INBOX_DELAY, SKILLS_DELAY};
use super::tests::*;
use super::timer::Timer;
use super::{Core, Effect, Input, Root};
use crate::events::EventKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn changed(r: &mut Root, path: &str) -> Vec<Effect> {
    let input = Input::PathChanged {
        path: Path::new(path),
    };
    Core::new(id(0), r).step(input, now(0))
}

fn at_once(timer: Timer) -> Effect {
    Effect::SetTimer {
        timer,
        after: Duration::ZERO,
    }
}

fn session_path(rest: &str) -> String {
    format!("/p/.squad/sessions/{SESSION}/{rest}")
}

#[test]
fn a_changed_path_calls_for_what_it_is() {
    let mut r = root_with(&[]);
    let root = id(0);
    let cases: Vec<(String, Vec<Effect>)> = vec![
        (
            "/p/.squad/config.json".into(),
            vec![Effect::ReloadConfig(root)],
        ),
        (
            "/p/.squad/policies.yaml".into(),
            vec![Effect::ReloadPolicy(root)],
        ),
        ("/p/.squad".into(), vec![at_once(Timer::Rescan(root))]),
        (
            "/p/.squad/run/squadd.sock".into(),
            vec![Effect::SetTimerEarlier {
                timer: Timer::RootCheck(root),
                after: CONTROL_DELAY,
            }],
        ),
        (
            "/p/.claude/skills/review/SKILL.md".into(),
            vec![Effect::SetTimerEarlier {
                timer: Timer::Skills(root),
                after: SKILLS_DELAY,
            }],
        ),
        (
            format!("/p/.squad/sessions/{SESSION}"),
            vec![Effect::LookAtSessionDir {
                root,
                session: SESSION.into(),
            }],
        ),
        (
            session_path("locks"),
            vec![
                Effect::WatchLocks {
                    root,
                    session: SESSION.into(),
                },
                at_once(Timer::Locks(root)),
            ],
        ),
        (
            session_path("locks/src.lock.json"),
            vec![at_once(Timer::Locks(root))],
        ),
        (
            session_path("inbox/bob/new/m.md"),
            vec![Effect::LookAtInboxEntry {
                root,
                session: SESSION.into(),
                agent: "bob".into(),
                file: "m.md".into(),
                path: PathBuf::from(session_path("inbox/bob/new/m.md")),
            }],
        ),
        (
            session_path("role-plan-alice-task_1.md"),
            vec![Effect::ApplyFile {
                root,
                file: super::files::FileRef {
                    session: SESSION.into(),
                    file: "role-plan-alice-task_1.md".into(),
                    path: PathBuf::from(session_path("role-plan-alice-task_1.md")),
                },
                kind: squad_protocol::FileKind::TaskAssignment,
            }],
        ),
        // A file of a session not seen yet: the session is looked at.
        (
            "/p/.squad/sessions/20240116T000000Z/role-plan-alice-task_1.md".into(),
            vec![Effect::LookAtSessionDir {
                root,
                session: "20240116T000000Z".into(),
            }],
        ),
        // Nothing squadd follows: a temporary, a copy being prepared.
        (session_path(".x.md.tmp.1.2"), vec![]),
        (
            "/p/.squad/sessions/20240116T000001Z.tmp/a.md".into(),
            vec![],
        ),
        // The decisions inbox, with merging off (the default).
        ("/p/.squad/decisions/inbox/d.md".into(), vec![]),
    ];
    for (path, want) in cases {
        assert_eq!(changed(&mut r, &path), want, "{path}");
    }
    // Merging on: each change restarts the quiet period.
    r.policy.memory.merge = true;
    assert_eq!(
        changed(&mut r, "/p/.squad/decisions/inbox/d.md"),
        vec![Effect::SetTimer {
            timer: Timer::MemoryInbox(root),
            after: MEMORY_INBOX_DELAY,
        }]
    );
}

#[test]
fn a_directory_not_watched_is_said_and_retried_only_when_kept_for_another_try() {
    let mut r = root_with(&[]);
    let dir = PathBuf::from(session_path("inbox/bob/new"));
    let failed = |rewatch_after| Input::WatchFailed {
        path: dir.clone(),
        error: "ENOSPC".into(),
        rewatch_after,
    };
    let said = Effect::Emit {
        root: id(0),
        session: None,
        path: Some(dir.clone()),
        kind: EventKind::WatchError {
            error: "ENOSPC".into(),
        },
    };
    let after = Duration::from_secs(2);
    let effects = Core::new(id(0), &mut r).step(failed(Some(after)), now(0));
    assert_eq!(
        effects,
        vec![
            said.clone(),
            Effect::SetTimerEarlier {
                timer: Timer::Rewatch,
                after,
            },
        ]
    );
    let effects = Core::new(id(0), &mut r).step(failed(None), now(0));
    assert_eq!(effects, vec![said]);
}

#[test]
fn a_watcher_failure_is_said_and_lost_events_rescan_the_root() {
    let mut r = root_with(&[]);
    let input = Input::WatcherFailed {
        error: "queue".into(),
    };
    let effects = Core::new(id(0), &mut r).step(input, now(0));
    assert_eq!(
        effects,
        vec![
            Effect::Emit {
                root: id(0),
                session: None,
                path: None,
                kind: EventKind::WatchError {
                    error: "queue".into(),
                },
            },
            at_once(Timer::Rescan(id(0))),
        ]
    );
    let effects = Core::new(id(0), &mut r).step(Input::EventsLost, now(0));
    assert_eq!(effects, vec![at_once(Timer::Rescan(id(0)))]);
}

#[test]
fn an_edit_written_is_indexed_from_its_text_then_said_and_the_same_edit_again_writes_nothing() {
    use squad_policies::session_edit::SessionEdit;
    let mut r = root_with(&[]);
    let fail = SessionEdit::Fail {
        reason: "out of budget".into(),
    };
    let e = super::edits::decide(&r, SESSION, &fail, now(0)).unwrap();
    assert!(e.write);
    let input = Input::EditWritten {
        session: SESSION.into(),
        path: e.path.clone(),
        text: &e.text,
    };
    let effects = Core::new(id(0), &mut r).step(input, now(0));
    assert_eq!(
        effects.last(),
        Some(&Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(e.path.clone()),
            kind: EventKind::OutputWritten {
                output: "session-status".into(),
            },
        }),
        "{effects:?}"
    );
    // Indexed from the bytes written: the text squadd holds is the edit's.
    let again = super::edits::decide(&r, SESSION, &fail, now(0)).unwrap();
    assert!(!again.write, "{}", again.text);
}

#[test]
fn a_notice_not_written_is_said() {
    let mut r = root_with(&[]);
    let path = PathBuf::from(session_path("role-comm-squadd-to-bob-msg_squadd_x.md"));
    let input = Input::NoticeFailed {
        file: super::files::FileRef {
            session: SESSION.into(),
            file: "role-comm-squadd-to-bob-msg_squadd_x.md".into(),
            path: path.clone(),
        },
        error: "ENOSPC".into(),
    };
    let effects = Core::new(id(0), &mut r).step(input, now(0));
    assert_eq!(
        effects,
        vec![Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(path),
            kind: EventKind::OutputFailed {
                output: "notice".into(),
                error: "ENOSPC".into(),
            },
        }]
    );
}

#[test]
fn a_recreated_squad_dir_gets_the_pid_lock_back_or_is_given_up_to_the_squadd_holding_it() {
    use super::presence::PidLock;
    let mut r = root_with(&[]);
    let restored = |reason: &str, path: Option<PathBuf>| Effect::Emit {
        root: id(0),
        session: None,
        path,
        kind: EventKind::ControlRestored {
            reason: reason.into(),
        },
    };
    let tried =
        |r: &mut Root, outcome| Core::new(id(0), r).step(Input::PidLockTried(outcome), now(0));
    assert_eq!(
        tried(&mut r, PidLock::Taken),
        vec![restored(
            "pid lock taken again: .squad/ was recreated",
            None
        )]
    );
    assert!(tried(&mut r, PidLock::Failed).is_empty());
    assert_eq!(
        tried(&mut r, PidLock::Held("42".into())),
        vec![Effect::GiveUpRoot {
            root: id(0),
            pid: "42".into()
        }]
    );
    // The socket bound again: `.squad/run` watched before it is said.
    let sock = PathBuf::from("/p/.squad/run/squadd.sock");
    let input = Input::SocketBound { path: sock.clone() };
    assert_eq!(
        Core::new(id(0), &mut r).step(input, now(0)),
        vec![
            Effect::Watch {
                root: id(0),
                dir: PathBuf::from("/p/.squad/run"),
            },
            restored("control socket bound again", Some(sock)),
        ]
    );
}

#[test]
fn skills_read_again_are_what_status_reports() {
    let mut r = root_with(&[]);
    let skills = crate::skills::SkillsHealth {
        loaded: 3,
        ..Default::default()
    };
    let input = Input::SkillsRead {
        skills: Box::new(skills.clone()),
        team: Box::default(),
    };
    assert!(Core::new(id(0), &mut r).step(input, now(0)).is_empty());
    assert_eq!(r.skills.loaded, 3);
}
