//! Lock decisions: target syntax, conflicts and staleness, as pure functions.

use crate::boundary::{Refusal, compile_glob, is_glob, literal_prefix, normalize, prefixes_nest};
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
        (true, false) => compile_glob(a).is_ok_and(|m| m.is_match(b)),
        (false, true) => compile_glob(b).is_ok_and(|m| m.is_match(a)),
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
}
