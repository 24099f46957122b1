//! Team memory archiving: which entries of a live memory file move to its
//! archive. Pure: the same plan serves `squadctl memory archive` and squadd.

use chrono::{DateTime, FixedOffset, Utc};
use std::time::Duration;

/// `memory:` of the policy: what squadd does with team memory on the
/// retention schedule. Both are off unless a project turns them on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryPolicy {
    /// Merge `decisions/inbox/` into decisions.md.
    pub merge: bool,
    /// Archive old entries by this rule.
    pub archive: Option<ArchiveRule>,
}

/// Parses a size such as `20KB`, `1MB`, `512` (bytes; K and M are 1024-based).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    let unit = t[digits.len()..].trim().to_ascii_uppercase();
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size (e.g. 20KB)"))?;
    let mult = match unit.as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1024,
        "M" | "MB" | "MIB" => 1024 * 1024,
        _ => return Err(format!("`{s}`: unknown unit (use B, KB or MB)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// What an archive decision needs to know about one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryFacts {
    /// The entry's moment, when one can be read.
    pub moment: Option<DateTime<FixedOffset>>,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The archive rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveRule {
    /// Entries older than this move.
    pub older_than: Duration,
    /// After that, while the live file is larger than this, the oldest dated
    /// entries move too.
    pub max_size: Option<u64>,
}

/// For each entry, whether it moves to the archive. Undated entries never
/// move: their age is unknown and losing their order would be worse than a
/// large file. `file_bytes` is the live file's whole size (text outside
/// entries counts and always stays).
pub fn plan(
    entries: &[EntryFacts],
    file_bytes: u64,
    rule: ArchiveRule,
    now: DateTime<Utc>,
) -> Vec<bool> {
    let cutoff = chrono::Duration::from_std(rule.older_than)
        .ok()
        .and_then(|d| now.checked_sub_signed(d));
    let mut moves: Vec<bool> = entries
        .iter()
        .map(|e| match (e.moment, cutoff) {
            (Some(m), Some(c)) => m.with_timezone(&Utc) < c,
            _ => false,
        })
        .collect();
    if let Some(max) = rule.max_size {
        let mut size: u64 = file_bytes.saturating_sub(
            entries
                .iter()
                .zip(&moves)
                .filter(|(_, m)| **m)
                .map(|(e, _)| e.bytes)
                .sum(),
        );
        let mut order: Vec<usize> = (0..entries.len())
            .filter(|&i| !moves[i] && entries[i].moment.is_some())
            .collect();
        order.sort_by_key(|&i| (entries[i].moment, i));
        for i in order {
            if size <= max {
                break;
            }
            moves[i] = true;
            size = size.saturating_sub(entries[i].bytes);
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Option<DateTime<FixedOffset>> {
        DateTime::parse_from_rfc3339(s).ok()
    }

    #[test]
    fn old_entries_move_undated_stay_and_size_moves_oldest_first() {
        let now = at("2026-03-31T00:00:00Z").unwrap().with_timezone(&Utc);
        let e = |m: Option<&str>, b| EntryFacts {
            moment: m.and_then(at),
            bytes: b,
        };
        let entries = [
            e(Some("2026-01-01T00:00:00Z"), 10),
            e(None, 10),
            e(Some("2026-03-20T00:00:00Z"), 10),
            e(Some("2026-03-10T00:00:00Z"), 10),
        ];
        let rule = ArchiveRule {
            older_than: Duration::from_secs(30 * 86400),
            max_size: None,
        };
        assert_eq!(plan(&entries, 40, rule, now), [true, false, false, false]);
        let rule = ArchiveRule {
            max_size: Some(20),
            ..rule
        };
        assert_eq!(plan(&entries, 40, rule, now), [true, false, false, true]);
    }
}
