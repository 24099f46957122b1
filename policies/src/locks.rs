//! Lock decisions: target syntax, conflicts and staleness, as pure functions.

use crate::boundary::{
    Refusal, compile_glob, glob_matches, is_glob, literal_prefix, normalize, prefixes_nest,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Exclusive or shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Nobody else may hold an overlapping lock.
    Exclusive,
    /// Others may hold overlapping shared locks.
    Shared,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Exclusive => "exclusive",
            Mode::Shared => "shared",
        })
    }
}

/// One acquisition: every target it took, taken together and released
/// together, so all-or-none survives a crash (the record is one file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// Normalized paths or globs.
    pub targets: Vec<String>,
    /// Exclusive or shared.
    pub mode: Mode,
    /// Holder.
    pub agent: String,
    /// The holder's task.
    pub task_id: String,
    /// The session directory the record lives in.
    pub session: String,
    /// A process whose death releases the lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// That process's start time (seconds since the epoch), to tell a reused
    /// pid from the original process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_started_at: Option<u64>,
    /// Host the pid lives on.
    pub host: String,
    /// When taken.
    pub acquired_at: DateTime<Utc>,
    /// When it lapses unless renewed.
    pub expires_at: DateTime<Utc>,
}

/// Why a target is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// The path is unsafe.
    Path(Refusal),
    /// The glob does not compile.
    BadGlob(String),
    /// The glob matches the whole project.
    Everything,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::Path(r) => r.fmt(f),
            TargetError::BadGlob(e) => f.write_str(e),
            TargetError::Everything => f.write_str(
                "the glob matches every path in the project; lock the directories you will change",
            ),
        }
    }
}

/// Normalizes and checks a lock target (a path or a glob).
pub fn parse_target(target: &str) -> Result<String, TargetError> {
    let normalized = normalize(target).map_err(TargetError::Path)?;
    if is_glob(&normalized) {
        let m = compile_glob(&normalized).map_err(TargetError::BadGlob)?;
        // A glob matching a top-level name and a deep path alike covers it all.
        if m.is_match("x") && m.is_match("a/b/c/d.e") && m.is_match(".hidden/f") {
            return Err(TargetError::Everything);
        }
    }
    Ok(normalized)
}

/// Whether two normalized targets overlap: the same path; a path matched by
/// a glob; two globs whose literal prefixes nest (conservative: may report an
/// overlap that no real path has, never misses one).
pub fn targets_overlap(a: &str, b: &str) -> bool {
    match (is_glob(a), is_glob(b)) {
        (false, false) => a == b,
        (true, false) => glob_matches(a, b),
        (false, true) => glob_matches(b, a),
        (true, true) => prefixes_nest(literal_prefix(a), literal_prefix(b)),
    }
}

/// The first overlap between a held lock and a request: (held target,
/// requested target). Shared locks conflict only with exclusive ones.
pub fn conflict<'a>(
    held: &'a LockRecord,
    mode: Mode,
    targets: &'a [String],
) -> Option<(&'a str, &'a str)> {
    if held.mode == Mode::Shared && mode == Mode::Shared {
        return None;
    }
    held.targets.iter().find_map(|h| {
        targets
            .iter()
            .find(|t| targets_overlap(h, t))
            .map(|t| (h.as_str(), t.as_str()))
    })
}

/// What is known about a lock's recorded process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessFact {
    /// Not checked (another host, or no pid recorded).
    Unknown,
    /// No process with that pid.
    Gone,
    /// A process with that pid, started at this time (seconds since the epoch).
    Running {
        /// Its start time.
        started_at: u64,
    },
}

/// Why a lock may be reclaimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Stale {
    /// Past `expires_at`.
    Expired,
    /// Its process is gone.
    ProcessGone {
        /// The pid.
        pid: u32,
    },
    /// Its pid now belongs to another process.
    PidReused {
        /// The pid.
        pid: u32,
    },
    /// Taken on this host before it last started: no holder survives a
    /// restart.
    Restarted,
    /// An unreadable record past its time to live.
    Unreadable,
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::Expired => f.write_str("expired"),
            Stale::ProcessGone { pid } => write!(f, "its process {pid} is gone"),
            Stale::PidReused { pid } => {
                write!(
                    f,
                    "pid {pid} now belongs to another process (started later)"
                )
            }
            Stale::Restarted => f.write_str("taken before this machine restarted"),
            Stale::Unreadable => f.write_str("unreadable record past its time to live"),
        }
    }
}

/// Whether a lock may be reclaimed at `now`, given what is known of its process.
pub fn staleness(record: &LockRecord, now: DateTime<Utc>, process: ProcessFact) -> Option<Stale> {
    if record.expires_at <= now {
        return Some(Stale::Expired);
    }
    let pid = record.pid?;
    match process {
        ProcessFact::Unknown => None,
        ProcessFact::Gone => Some(Stale::ProcessGone { pid }),
        ProcessFact::Running { started_at } => match record.pid_started_at {
            // A process started after the lock was recorded is not the holder.
            Some(recorded) if started_at > recorded => Some(Stale::PidReused { pid }),
            _ => None,
        },
    }
}

/// One record of the lock table, as found on disk, with what is known of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableEntry<'a> {
    /// A readable record and what is known of its process.
    Record {
        /// The record.
        record: &'a LockRecord,
        /// Its process (checked only on this host).
        process: ProcessFact,
    },
    /// A record file that does not parse: it counts as held on everything
    /// until `held_until` (its modification time plus the default TTL).
    Unreadable {
        /// When the file was last written.
        written_at: DateTime<Utc>,
        /// Until when it counts as held.
        held_until: DateTime<Utc>,
    },
}

/// The facts every decision about the table shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFacts<'a> {
    /// The time of the decision.
    pub now: DateTime<Utc>,
    /// This machine's host name (records of other hosts keep their pid).
    pub host: &'a str,
    /// When this machine started, when known. Lock records are not fsynced
    /// (see docs/daemon.md, "Locks and power loss"): a record written on this
    /// host before it started has no live holder, and may be a torn file.
    pub booted_at: Option<DateTime<Utc>>,
}

/// Why an entry of the table may be reclaimed, if it may.
pub fn entry_staleness(entry: &TableEntry<'_>, facts: &TableFacts<'_>) -> Option<Stale> {
    let before_boot = |t: DateTime<Utc>| facts.booted_at.is_some_and(|boot| t < boot);
    match entry {
        TableEntry::Record { record, process } => {
            staleness(record, facts.now, *process).or_else(|| {
                (record.host == facts.host && before_boot(record.acquired_at))
                    .then_some(Stale::Restarted)
            })
        }
        TableEntry::Unreadable {
            written_at,
            held_until,
        } => {
            if before_boot(*written_at) {
                Some(Stale::Restarted)
            } else if *held_until <= facts.now {
                Some(Stale::Unreadable)
            } else {
                None
            }
        }
    }
}

/// An acquisition request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The agent asking.
    pub agent: &'a str,
    /// Its task.
    pub task_id: &'a str,
    /// The session holding the task.
    pub session: &'a str,
    /// Exclusive or shared.
    pub mode: Mode,
    /// Normalized targets ([`parse_target`]).
    pub targets: &'a [String],
}

/// What an acquisition does, decided from the table alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcquirePlan {
    /// Entries to remove first (index into the table, why).
    pub reclaim: Vec<(usize, Stale)>,
    /// Take the lock, or what stands in the way.
    pub outcome: AcquireOutcome,
}

/// Taken, or blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// Write the new record, then rewrite the requester's own older records
    /// (same agent, task and session) that held any of the requested targets:
    /// (index, the targets it keeps; empty = remove it). Re-taking one's own
    /// lock is a renewal, not a conflict.
    Take {
        /// The older records the new one supersedes.
        supersede: Vec<(usize, Vec<String>)>,
    },
    /// Someone else holds an overlapping lock.
    Blocked {
        /// The blocking entry.
        by: usize,
        /// Its target that overlaps (empty for an unreadable record).
        held: String,
        /// The requested target it overlaps (empty for an unreadable record).
        wanted: String,
        /// When the blocker lapses unless renewed.
        until: DateTime<Utc>,
    },
}

fn is_own(record: &LockRecord, req: &Request<'_>) -> bool {
    record.agent == req.agent && record.task_id == req.task_id && record.session == req.session
}

/// Decides an acquisition: stale entries are reclaimed, any live overlapping
/// lock of someone else (or any live unreadable record) blocks, otherwise the
/// lock is taken and the requester's own overlapping records are superseded.
pub fn plan_acquire(
    req: &Request<'_>,
    table: &[TableEntry<'_>],
    facts: &TableFacts<'_>,
) -> AcquirePlan {
    let reclaim: Vec<(usize, Stale)> = table
        .iter()
        .enumerate()
        .filter_map(|(i, e)| entry_staleness(e, facts).map(|s| (i, s)))
        .collect();
    let live = || {
        table
            .iter()
            .enumerate()
            .filter(|(i, _)| !reclaim.iter().any(|(r, _)| r == i))
    };
    for (i, entry) in live() {
        let blocked = match entry {
            TableEntry::Record { record, .. } if is_own(record, req) => None,
            TableEntry::Record { record, .. } => conflict(record, req.mode, req.targets)
                .map(|(h, w)| (h.to_string(), w.to_string(), record.expires_at)),
            TableEntry::Unreadable { held_until, .. } => {
                Some((String::new(), String::new(), *held_until))
            }
        };
        if let Some((held, wanted, until)) = blocked {
            return AcquirePlan {
                outcome: AcquireOutcome::Blocked {
                    by: i,
                    held,
                    wanted,
                    until,
                },
                reclaim,
            };
        }
    }
    let supersede = live()
        .filter_map(|(i, e)| match e {
            TableEntry::Record { record, .. } if is_own(record, req) => {
                let kept: Vec<String> = record
                    .targets
                    .iter()
                    .filter(|t| !req.targets.contains(t))
                    .cloned()
                    .collect();
                (kept.len() != record.targets.len()).then_some((i, kept))
            }
            _ => None,
        })
        .collect();
    AcquirePlan {
        reclaim,
        outcome: AcquireOutcome::Take { supersede },
    }
}

/// What a release does to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseStep {
    /// Index into the table.
    pub index: usize,
    /// Targets released.
    pub released: Vec<String>,
    /// Targets the record keeps (empty = remove the record).
    pub kept: Vec<String>,
}

/// Decides a release: every record of `agent` loses the `wanted` targets
/// (all of them when `wanted` is `None`).
pub fn plan_release(
    agent: &str,
    wanted: Option<&[String]>,
    table: &[TableEntry<'_>],
) -> Vec<ReleaseStep> {
    table
        .iter()
        .enumerate()
        .filter_map(|(index, e)| {
            let TableEntry::Record { record, .. } = e else {
                return None;
            };
            if record.agent != agent {
                return None;
            }
            let (released, kept): (Vec<String>, Vec<String>) = record
                .targets
                .iter()
                .cloned()
                .partition(|t| wanted.is_none_or(|w| w.contains(t)));
            (!released.is_empty()).then_some(ReleaseStep {
                index,
                released,
                kept,
            })
        })
        .collect()
}

/// Decides a renewal: stale entries are reclaimed (an expired lock is not
/// renewed: it may already be someone else's turn), and every live record of
/// `agent` holding one of the `wanted` targets gets `expires_at`.
pub fn plan_renew(
    agent: &str,
    wanted: &[String],
    table: &[TableEntry<'_>],
    facts: &TableFacts<'_>,
) -> (Vec<(usize, Stale)>, Vec<usize>) {
    let mut reclaim = Vec::new();
    let mut renew = Vec::new();
    for (i, e) in table.iter().enumerate() {
        if let Some(s) = entry_staleness(e, facts) {
            reclaim.push((i, s));
        } else if let TableEntry::Record { record, .. } = e
            && record.agent == agent
            && record.targets.iter().any(|t| wanted.contains(t))
        {
            renew.push(i);
        }
    }
    (reclaim, renew)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn record(targets: &[&str], mode: Mode) -> LockRecord {
        LockRecord {
            targets: targets.iter().map(|t| t.to_string()).collect(),
            mode,
            agent: "a".into(),
            task_id: "task_1".into(),
            session: "s".into(),
            pid: Some(42),
            pid_started_at: Some(1000),
            host: "h".into(),
            acquired_at: Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap(),
            expires_at: Utc.with_ymd_and_hms(2024, 1, 15, 10, 15, 0).unwrap(),
        }
    }

    #[test]
    fn targets_table() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("src/a.rs", Ok("src/a.rs")),
            ("./src/*.rs", Ok("src/*.rs")),
            ("**", Err("every")),
            ("**/*", Err("every")),
            ("*", Ok("*")),
            ("src/**", Ok("src/**")),
            ("../x", Err("..")),
            ("/etc/passwd", Err("absolute")),
            ("src/[a-", Err("invalid glob")),
        ];
        for (input, want) in cases {
            match (parse_target(input), want) {
                (Ok(got), Ok(w)) => assert_eq!(&got, w),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{input}: {e}"),
                (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
            }
        }
        assert!(matches!(
            parse_target(&"a".repeat(10_000)),
            Err(TargetError::Path(Refusal::TooLong { .. }))
        ));
    }

    #[test]
    fn overlap_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("src/a.rs", "src/a.rs", true),
            ("src/a.rs", "src/b.rs", false),
            ("src/*.rs", "src/a.rs", true),
            ("src/a.rs", "src/*.rs", true),
            ("src/*.rs", "src/x/a.rs", false),
            ("src/**", "src/x/a.rs", true),
            ("src/**", "src/api/*.rs", true),
            ("src/api/*.rs", "src/db/*.rs", false),
            ("*.md", "src/*.rs", true),
            ("docs/*.md", "src/*.rs", false),
        ];
        for (a, b, want) in cases {
            assert_eq!(targets_overlap(a, b), *want, "{a} vs {b}");
        }
    }

    #[test]
    fn shared_locks_conflict_only_with_exclusive_ones() {
        let held = record(&["src/**"], Mode::Shared);
        let req = vec!["src/a.rs".to_string()];
        assert_eq!(conflict(&held, Mode::Shared, &req), None);
        assert_eq!(
            conflict(&held, Mode::Exclusive, &req),
            Some(("src/**", "src/a.rs"))
        );
        let held = record(&["src/**"], Mode::Exclusive);
        assert!(conflict(&held, Mode::Shared, &req).is_some());
    }

    #[test]
    fn staleness_table() {
        let r = record(&["x"], Mode::Exclusive);
        let before = Utc.with_ymd_and_hms(2024, 1, 15, 10, 5, 0).unwrap();
        let after = Utc.with_ymd_and_hms(2024, 1, 15, 10, 15, 0).unwrap();
        assert_eq!(
            staleness(&r, after, ProcessFact::Unknown),
            Some(Stale::Expired)
        );
        assert_eq!(staleness(&r, before, ProcessFact::Unknown), None);
        assert_eq!(
            staleness(&r, before, ProcessFact::Gone),
            Some(Stale::ProcessGone { pid: 42 })
        );
        assert_eq!(
            staleness(&r, before, ProcessFact::Running { started_at: 1000 }),
            None
        );
        assert_eq!(
            staleness(&r, before, ProcessFact::Running { started_at: 2000 }),
            Some(Stale::PidReused { pid: 42 })
        );
        let no_pid = LockRecord { pid: None, ..r };
        assert_eq!(staleness(&no_pid, before, ProcessFact::Gone), None);
    }

    fn at(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 15, h, m, 0).unwrap()
    }

    fn held(agent: &str, task: &str, session: &str, targets: &[&str], mode: Mode) -> LockRecord {
        LockRecord {
            agent: agent.into(),
            task_id: task.into(),
            session: session.into(),
            ..record(targets, mode)
        }
    }

    fn facts() -> TableFacts<'static> {
        TableFacts {
            now: at(10, 5),
            host: "h",
            booted_at: Some(at(9, 0)),
        }
    }

    fn entry(record: &LockRecord) -> TableEntry<'_> {
        TableEntry::Record {
            record,
            process: ProcessFact::Running { started_at: 1000 },
        }
    }

    #[test]
    fn entry_staleness_table() {
        let live = record(&["x"], Mode::Exclusive);
        let before_boot = LockRecord {
            acquired_at: at(8, 0),
            ..live.clone()
        };
        let other_host_before_boot = LockRecord {
            host: "elsewhere".into(),
            ..before_boot.clone()
        };
        let cases: Vec<(&str, TableEntry<'_>, Option<Stale>)> = vec![
            ("live", entry(&live), None),
            (
                "process not checked",
                TableEntry::Record {
                    record: &live,
                    process: ProcessFact::Unknown,
                },
                None,
            ),
            (
                "process gone",
                TableEntry::Record {
                    record: &live,
                    process: ProcessFact::Gone,
                },
                Some(Stale::ProcessGone { pid: 42 }),
            ),
            (
                "taken before boot",
                entry(&before_boot),
                Some(Stale::Restarted),
            ),
            ("another host's clock", entry(&other_host_before_boot), None),
            (
                "unreadable, fresh",
                TableEntry::Unreadable {
                    written_at: at(10, 0),
                    held_until: at(10, 15),
                },
                None,
            ),
            (
                "unreadable, past its ttl",
                TableEntry::Unreadable {
                    written_at: at(9, 30),
                    held_until: at(10, 5),
                },
                Some(Stale::Unreadable),
            ),
            (
                "unreadable, torn by a power loss",
                TableEntry::Unreadable {
                    written_at: at(8, 59),
                    held_until: at(12, 0),
                },
                Some(Stale::Restarted),
            ),
        ];
        for (name, e, want) in cases {
            assert_eq!(entry_staleness(&e, &facts()), want, "{name}");
        }
        let unknown_boot = TableFacts {
            booted_at: None,
            ..facts()
        };
        assert_eq!(entry_staleness(&entry(&before_boot), &unknown_boot), None);
    }

    #[test]
    fn acquire_table() {
        let targets = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let other = held("b", "task_2", "s", &["src/**"], Mode::Exclusive);
        let other_shared = held("b", "task_2", "s", &["src/**"], Mode::Shared);
        let own = held(
            "a",
            "task_1",
            "s",
            &["src/a.rs", "docs/x.md"],
            Mode::Exclusive,
        );
        let own_other_session = held("a", "task_1", "old", &["src/a.rs"], Mode::Exclusive);
        let dead = LockRecord {
            pid: Some(7),
            ..other.clone()
        };
        let want = targets(&["src/a.rs"]);
        let req = |mode| Request {
            agent: "a",
            task_id: "task_1",
            session: "s",
            mode,
            targets: &want,
        };
        let take = |supersede: Vec<(usize, Vec<String>)>| AcquireOutcome::Take { supersede };
        let blocked = |by, held: &str, wanted: &str, until| AcquireOutcome::Blocked {
            by,
            held: held.into(),
            wanted: wanted.into(),
            until,
        };
        type Case<'a> = (
            &'a str,
            Mode,
            Vec<TableEntry<'a>>,
            Vec<(usize, Stale)>,
            AcquireOutcome,
        );
        let cases: Vec<Case<'_>> = vec![
            ("empty table", Mode::Exclusive, vec![], vec![], take(vec![])),
            (
                "someone else's glob",
                Mode::Exclusive,
                vec![entry(&other)],
                vec![],
                blocked(0, "src/**", "src/a.rs", at(10, 15)),
            ),
            (
                "shared with shared",
                Mode::Shared,
                vec![entry(&other_shared)],
                vec![],
                take(vec![]),
            ),
            (
                "exclusive against shared",
                Mode::Exclusive,
                vec![entry(&other_shared)],
                vec![],
                blocked(0, "src/**", "src/a.rs", at(10, 15)),
            ),
            (
                "a dead holder is reclaimed, then taken",
                Mode::Exclusive,
                vec![TableEntry::Record {
                    record: &dead,
                    process: ProcessFact::Gone,
                }],
                vec![(0, Stale::ProcessGone { pid: 7 })],
                take(vec![]),
            ),
            (
                "re-taking one's own target supersedes it",
                Mode::Exclusive,
                vec![entry(&own)],
                vec![],
                take(vec![(0, targets(&["docs/x.md"]))]),
            ),
            (
                "the same task id in another session is someone else",
                Mode::Exclusive,
                vec![entry(&own_other_session)],
                vec![],
                blocked(0, "src/a.rs", "src/a.rs", at(10, 15)),
            ),
            (
                "an unreadable record blocks everything",
                Mode::Shared,
                vec![TableEntry::Unreadable {
                    written_at: at(10, 0),
                    held_until: at(10, 30),
                }],
                vec![],
                blocked(0, "", "", at(10, 30)),
            ),
        ];
        for (name, mode, table, reclaim, outcome) in cases {
            let plan = plan_acquire(&req(mode), &table, &facts());
            assert_eq!(plan.reclaim, reclaim, "{name}");
            assert_eq!(plan.outcome, outcome, "{name}");
        }
    }

    #[test]
    fn release_and_renew_tables() {
        let one = held("a", "task_1", "s", &["x", "y"], Mode::Exclusive);
        let two = held("a", "task_1", "s", &["z"], Mode::Exclusive);
        let theirs = held("b", "task_2", "s", &["x"], Mode::Shared);
        let table = vec![entry(&one), entry(&two), entry(&theirs)];
        let x = vec!["x".to_string()];
        assert_eq!(
            plan_release("a", Some(&x), &table),
            vec![ReleaseStep {
                index: 0,
                released: x.clone(),
                kept: vec!["y".into()],
            }]
        );
        assert_eq!(plan_release("a", None, &table).len(), 2);
        assert!(plan_release("c", None, &table).is_empty());
        let expired = LockRecord {
            expires_at: at(10, 0),
            ..one.clone()
        };
        let table = vec![entry(&expired), entry(&two), entry(&theirs)];
        let (reclaim, renew) = plan_renew("a", &["x".into(), "z".into()], &table, &facts());
        assert_eq!(reclaim, vec![(0, Stale::Expired)]);
        assert_eq!(renew, vec![1]);
    }
}
