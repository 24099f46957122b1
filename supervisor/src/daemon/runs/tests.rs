//! Tests of [`super`] (run supervision's decisions are tested in
//! `core/runs/tests.rs`, without processes).

use super::RunError;

/// The replies `squadctl run|stop` print read as they did when they were
/// strings.
#[test]
fn refusals_read_as_before() {
    let cases = [
        (RunError::NoTask, "give the task"),
        (
            RunError::UnknownAction("go".into()),
            "unknown runs action `go` (list, run, stop, merge, drop, approve, changes, reject)",
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
