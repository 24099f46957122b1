//! Unit tests of the wrap-up of a session that ended (`core/wrapup.rs`:
//! its locks released, its summary written, each reported) and of squadd's
//! word to the lead about a run, through [`Core::step`], with the effects
//! and their order asserted. (Split from `tests_outputs.rs`: no file under
//! `daemon/` exceeds 800 lines.)

use super::tests::{SESSION, id, now, root_with};
use super::tests_mail::plan;
use super::timer::Timer;
use super::wrapup::WrapUpWhy;
use super::{Core, Effect, Input, Now, Root};
use crate::events::EventKind;
use std::path::PathBuf;
use std::time::Duration;

fn step(r: &mut Root, input: Input<'_>, at: Now) -> Vec<Effect> {
    Core::new(id(0), r).step(input, at)
}

fn wrap_up(r: &mut Root, session: &str, why: WrapUpWhy) -> Vec<Effect> {
    let input = Input::WrapUpDue {
        session: session.into(),
        status: "completed".into(),
        why,
    };
    step(r, input, now(0))
}

/// What a wrap-up does, in order: "release" and/or "summary".
fn parts(effects: &[Effect]) -> Vec<&'static str> {
    effects
        .iter()
        .map(|e| match e {
            Effect::ReleaseSessionLocks { reason, .. } => {
                assert_eq!(reason, "session completed");
                "release"
            }
            Effect::EndSession { path, text, .. } => {
                assert!(path.ends_with("summary.md"), "{path:?}");
                assert!(text.contains("task_1"), "{text}");
                "summary"
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_wrap_up_releases_the_locks_then_writes_the_summary_as_its_reason_says() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let both = vec!["release", "summary"];
    assert_eq!(parts(&wrap_up(&mut r, SESSION, WrapUpWhy::Ended)), both);
    // Held back while only losing files: nothing into a directory gone.
    let gone = WrapUpWhy::Held { dir_present: false };
    assert!(wrap_up(&mut r, SESSION, gone).is_empty());
    let there = WrapUpWhy::Held { dir_present: true };
    assert_eq!(parts(&wrap_up(&mut r, SESSION, there)), both);
    // Found ended at start-up: only what a stop cut short.
    let found = |locks_dir, summary_present| WrapUpWhy::Found {
        locks_dir,
        summary_present,
    };
    assert!(wrap_up(&mut r, SESSION, found(false, true)).is_empty());
    assert_eq!(
        parts(&wrap_up(&mut r, SESSION, found(true, true))),
        ["release"]
    );
    assert_eq!(
        parts(&wrap_up(&mut r, SESSION, found(false, false))),
        ["summary"]
    );
    // An unknown session: its locks go, no summary is rendered.
    let unknown = wrap_up(&mut r, "20240115T110000Z", WrapUpWhy::Ended);
    assert!(matches!(&unknown[..], [Effect::ReleaseSessionLocks { .. }]));
}

#[test]
fn a_wrap_up_reports_the_locks_released_then_the_session_ended_or_its_summary_failed() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let lock = (
        SESSION.to_string(),
        PathBuf::from("/p/a.json"),
        EventKind::LockReleased {
            targets: vec!["src/**".into()],
            agent: "bob".into(),
            reason: "session completed".into(),
        },
    );
    let effects = step(&mut r, Input::SessionLocksReleased(vec![lock]), now(0));
    assert!(matches!(
        &effects[0],
        Effect::Emit {
            kind: EventKind::LockReleased { .. },
            ..
        }
    ));
    assert_eq!(
        effects[1..],
        [Effect::SetTimer {
            timer: Timer::Locks(id(0)),
            after: Duration::ZERO,
        }]
    );
    let dir = r.session_dir(SESSION);
    let ended = |error| Input::SessionEnded {
        session: SESSION.into(),
        status: "completed".into(),
        path: dir.join("summary.md"),
        removed: 2,
        error,
    };
    assert_eq!(
        step(&mut r, ended(None), now(0)),
        vec![Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(dir.clone()),
            kind: EventKind::SessionEnded {
                status: "completed".into(),
                removed: 2,
            },
        }]
    );
    assert_eq!(
        step(&mut r, ended(Some("EROFS".into())), now(0)),
        vec![Effect::Emit {
            root: id(0),
            session: Some(SESSION.into()),
            path: Some(dir.join("summary.md")),
            kind: EventKind::OutputFailed {
                output: "summary".into(),
                error: "EROFS".into(),
            },
        }]
    );
}

#[test]
fn word_to_the_lead_is_a_high_priority_message_file_only_when_the_policy_names_one() {
    let mut r = root_with(&[plan(1, "bob", &[])]);
    let due = |salt| Input::LeadMessageDue {
        session: SESSION.into(),
        task: Some("task_1".into()),
        subject: "run of task_1 failed".into(),
        text: "exit status 2".into(),
        salt,
    };
    r.policy.runners.lead = None;
    assert!(step(&mut r, due(1), now(0)).is_empty());
    r.policy.runners.lead = Some("lead".into());
    let effects = step(&mut r, due(0x1234_0001), now(0));
    let [Effect::WriteLeadMessage { path, text, .. }] = &effects[..] else {
        panic!("{effects:?}");
    };
    assert_eq!(
        path,
        &r.session_dir(SESSION)
            .join("role-comm-squadd-to-lead-msg_20240115T100000000Z_run12340001.md")
    );
    let kind =
        squad_protocol::FileKind::from_file_name(&path.file_name().unwrap().to_string_lossy())
            .unwrap();
    let f = crate::index::index_bytes(path, kind, text.as_bytes());
    assert!(f.diagnostics.is_empty(), "{:?}", f.diagnostics);
    assert!(text.contains("priority: high"), "{text}");
    assert!(text.contains("run of task_1 failed"), "{text}");
    assert!(text.contains("exit status 2"), "{text}");
    // Another salt, another message.
    let again = step(&mut r, due(0x1234_0002), now(0));
    assert!(matches!(&again[..], [Effect::WriteLeadMessage { path: p, .. }] if p != path));
}
