//! The retention plan: which sessions to archive or delete, by which rule,
//! at which age, and which to leave alone and why. Pure; the same plan is
//! shown by `squadctl gc --dry-run`, executed by `squadctl gc`, and run by
//! the daemon on its schedule.

use crate::policy::Retention;
use chrono::{DateTime, Utc};
use serde::Serialize;
use squad_protocol::model::SessionState;
use std::time::Duration;

/// Where a session directory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    /// `.squad/sessions/`.
    Sessions,
    /// `.squad/archives/`.
    Archives,
}

/// What is known about one session directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFacts {
    /// Directory name.
    pub name: String,
    /// Where it is.
    pub place: Place,
    /// The status its session-status.md records (None: missing or unreadable).
    pub status: Option<SessionState>,
    /// `completed_at` or `failed_at`, whichever the status calls for.
    pub ended_at: Option<DateTime<Utc>>,
    /// `archived_at` (archives only).
    pub archived_at: Option<DateTime<Utc>>,
    /// The directory's modification time (the fallback clock).
    pub mtime: Option<DateTime<Utc>>,
    /// The entry is a symbolic link.
    pub is_symlink: bool,
    /// The entry resolves outside `.squad/`.
    pub escapes: bool,
    /// Live (unexpired) locks held in it.
    pub live_locks: usize,
    /// Files in it are still being processed by the daemon.
    pub busy: bool,
    /// (Sessions only) an archive of the same name already exists.
    pub archive_exists: bool,
    /// A deletion that did not finish (a `.deleting-*` remnant of a crash
    /// or of an error): finished by every run until it is gone.
    pub interrupted: bool,
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    /// Move into `.squad/archives/`.
    Archive,
    /// Remove.
    Delete,
    /// Finish removing a deletion that was interrupted.
    Finish,
}

/// One planned action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    /// Directory name.
    pub name: String,
    /// Where it is now.
    pub place: Place,
    /// Archive or delete.
    pub verb: Verb,
    /// The policy field that decided (`retention.archive_completed_after`…).
    pub rule: &'static str,
    /// Its age under that rule, in seconds.
    pub age_secs: u64,
    /// The moment the age counts from.
    pub since: DateTime<Utc>,
    /// Which record gave that moment (`completed_at`, `failed_at`,
    /// `archived_at`, or `directory mtime` as the fallback).
    pub since_source: &'static str,
}

/// A session the plan leaves alone although a rule would act on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skip {
    /// Directory name.
    pub name: String,
    /// Where it is.
    pub place: Place,
    /// Why.
    pub reason: String,
}

/// The plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// What to do, in order.
    pub actions: Vec<Action>,
    /// What not to do, and why.
    pub skips: Vec<Skip>,
    /// What is kept for now and until when, nothing being wrong with it
    /// (an active session, one not old enough yet): so that a run that
    /// does nothing says why.
    pub kept: Vec<Skip>,
}

fn age(now: DateTime<Utc>, since: DateTime<Utc>) -> Duration {
    (now - since).to_std().unwrap_or(Duration::ZERO)
}

/// Plans retention at `now`.
pub fn plan(policy: &Retention, sessions: &[SessionFacts], now: DateTime<Utc>) -> Plan {
    let mut out = Plan::default();
    for s in sessions {
        let skip = |reason: String| Skip {
            name: s.name.clone(),
            place: s.place,
            reason,
        };
        if s.is_symlink {
            out.skips
                .push(skip("is a symbolic link; links are never followed".into()));
            continue;
        }
        if s.escapes {
            out.skips
                .push(skip("resolves outside .squad/; never touched".into()));
            continue;
        }
        if s.interrupted {
            // Already decided by an earlier run: no rule, no wait.
            let since = s.mtime.unwrap_or(now);
            out.actions.push(Action {
                name: s.name.clone(),
                place: s.place,
                verb: Verb::Finish,
                rule: "an interrupted deletion",
                age_secs: age(now, since).as_secs(),
                since,
                since_source: "directory mtime",
            });
            continue;
        }
        let (verb, rule, limit, moment, source) = match (s.place, s.status) {
            (Place::Archives, _) => (
                Verb::Delete,
                "retention.delete_archived_after",
                policy.delete_archived_after,
                s.archived_at,
                "archived_at",
            ),
            (Place::Sessions, Some(SessionState::Completed)) => (
                Verb::Archive,
                "retention.archive_completed_after",
                policy.archive_completed_after,
                s.ended_at,
                "completed_at",
            ),
            (Place::Sessions, Some(SessionState::Failed)) => (
                Verb::Delete,
                "retention.delete_failed_after",
                policy.delete_failed_after,
                s.ended_at,
                "failed_at",
            ),
            // Active sessions (and ones whose status cannot be read) are kept
            // indefinitely.
            (Place::Sessions, state) => {
                out.kept.push(skip(match state {
                    Some(_) => "active: kept until it completes or fails".into(),
                    None => "its session-status.md cannot be read: kept".into(),
                }));
                continue;
            }
        };
        let (since, since_source) = match (moment, s.mtime) {
            (Some(t), _) => (t, source),
            (None, Some(m)) => (m, "directory mtime"),
            (None, None) => {
                out.skips
                    .push(skip(format!("has no {source} and no readable mtime")));
                continue;
            }
        };
        let age = age(now, since);
        if age < limit {
            let what = if verb == Verb::Archive {
                "archived"
            } else {
                "deleted"
            };
            out.kept.push(skip(format!(
                "{source} {} ago; {what} {} after it ({rule}), in {}",
                crate::duration::format_duration(Duration::from_secs(age.as_secs())),
                crate::duration::format_duration(limit),
                crate::duration::format_duration(Duration::from_secs(
                    (limit - age).as_secs().max(1)
                ))
            )));
            continue;
        }
        if s.live_locks > 0 {
            out.skips
                .push(skip(format!("holds {} live lock(s)", s.live_locks)));
            continue;
        }
        if s.busy {
            out.skips
                .push(skip("has files the daemon is still processing".into()));
            continue;
        }
        if verb == Verb::Archive && s.archive_exists {
            out.skips.push(skip(format!(
                "an archive named {} already exists; it is not overwritten",
                s.name
            )));
            continue;
        }
        out.actions.push(Action {
            name: s.name.clone(),
            place: s.place,
            verb,
            rule,
            age_secs: age.as_secs(),
            since,
            since_source,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 6, 1, 12, 0, 0).unwrap()
    }

    fn ago(hours: i64) -> Option<DateTime<Utc>> {
        Some(now() - chrono::Duration::hours(hours))
    }

    fn facts(
        name: &str,
        place: Place,
        status: Option<SessionState>,
        ended: Option<DateTime<Utc>>,
    ) -> SessionFacts {
        SessionFacts {
            name: name.into(),
            place,
            status,
            ended_at: ended,
            archived_at: if place == Place::Archives {
                ended
            } else {
                None
            },
            mtime: ago(10_000),
            is_symlink: false,
            escapes: false,
            live_locks: 0,
            busy: false,
            archive_exists: false,
            interrupted: false,
        }
    }

    fn retention() -> Retention {
        crate::Policy::defaults().retention
    }

    #[test]
    fn table() {
        use SessionState::*;
        let sessions = vec![
            facts("completed-25h", Place::Sessions, Some(Completed), ago(25)),
            facts("completed-1h", Place::Sessions, Some(Completed), ago(1)),
            facts("failed-8d", Place::Sessions, Some(Failed), ago(8 * 24)),
            facts("failed-2d", Place::Sessions, Some(Failed), ago(2 * 24)),
            facts("archived-31d", Place::Archives, None, ago(31 * 24)),
            facts("archived-3d", Place::Archives, None, ago(3 * 24)),
            facts("active-1y", Place::Sessions, Some(Active), ago(365 * 24)),
            SessionFacts {
                live_locks: 2,
                ..facts(
                    "completed-locked",
                    Place::Sessions,
                    Some(Completed),
                    ago(48),
                )
            },
            SessionFacts {
                is_symlink: true,
                ..facts("link", Place::Sessions, Some(Completed), ago(48))
            },
            SessionFacts {
                busy: true,
                ..facts("busy", Place::Sessions, Some(Failed), ago(30 * 24))
            },
            SessionFacts {
                archive_exists: true,
                ..facts("dup", Place::Sessions, Some(Completed), ago(48))
            },
            facts("completed-no-stamp", Place::Sessions, Some(Completed), None),
            SessionFacts {
                interrupted: true,
                ..facts(".deleting-x-1", Place::Archives, None, None)
            },
        ];
        let p = plan(&retention(), &sessions, now());
        let acts: Vec<(&str, Verb, &str, &str)> = p
            .actions
            .iter()
            .map(|a| (a.name.as_str(), a.verb, a.rule, a.since_source))
            .collect();
        assert_eq!(
            acts,
            [
                (
                    "completed-25h",
                    Verb::Archive,
                    "retention.archive_completed_after",
                    "completed_at"
                ),
                (
                    "failed-8d",
                    Verb::Delete,
                    "retention.delete_failed_after",
                    "failed_at"
                ),
                (
                    "archived-31d",
                    Verb::Delete,
                    "retention.delete_archived_after",
                    "archived_at"
                ),
                (
                    "completed-no-stamp",
                    Verb::Archive,
                    "retention.archive_completed_after",
                    "directory mtime"
                ),
                (
                    ".deleting-x-1",
                    Verb::Finish,
                    "an interrupted deletion",
                    "directory mtime"
                ),
            ]
        );
        assert_eq!(p.actions[0].age_secs, 25 * 3600);
        let skips: Vec<(&str, &str)> = p
            .skips
            .iter()
            .map(|s| (s.name.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(
            skips,
            [
                ("completed-locked", "holds 2 live lock(s)"),
                ("link", "is a symbolic link; links are never followed"),
                ("busy", "has files the daemon is still processing"),
                (
                    "dup",
                    "an archive named dup already exists; it is not overwritten"
                ),
            ]
        );
    }
}
