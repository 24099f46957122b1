//! Message delivery decisions: inbox naming, when to deliver, when to
//! escalate, when a requested reply is overdue. Pure functions of (policy,
//! facts, now), so deadlines are tested by passing times, not by sleeping.

use crate::duration::after;
use chrono::{DateTime, Utc};
use squad_protocol::model::Priority;
use std::collections::BTreeMap;
use std::time::Duration;

/// A notification command for an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyCommand {
    /// argv; `{path}` is replaced by the delivered file's path.
    pub command: Vec<String>,
    /// Kill the command after this long.
    pub timeout: Duration,
    /// Further attempts after a failure (with doubling backoff from 1 s).
    pub retries: u32,
}

/// `messages:` of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagePolicy {
    /// Delivery deadline for critical, high and medium.
    pub deliver_within: [Duration; 3],
    /// The longest a low-priority message waits for its recipient to be free.
    pub low_max_wait: Duration,
    /// Escalation delay per priority (critical, high, medium, low); None: never.
    pub escalate_after: [Option<Duration>; 4],
    /// Notification commands by agent (`*` for everyone else).
    pub notify: BTreeMap<String, NotifyCommand>,
}

/// The index of a priority in per-priority arrays such as
/// [`MessagePolicy::escalate_after`] (critical first).
pub fn rank(p: Priority) -> usize {
    match p {
        Priority::Critical => 0,
        Priority::High => 1,
        Priority::Medium => 2,
        Priority::Low => 3,
    }
}

/// The longest message id kept whole in an inbox name; a longer one keeps
/// its first [`INBOX_ID_KEPT`] bytes and a hash of the whole.
pub const INBOX_ID_MAX: usize = 120;
/// How much of a long message id an inbox name keeps before the hash.
pub const INBOX_ID_KEPT: usize = 96;

/// The file name a message is delivered under, so that a plain directory
/// listing sorts critical → high → medium → low, then by creation time:
/// `<rank>-<priority>-<created, UTC, compact>-<message_id>.md`.
///
/// Every name parses back with [`parse_inbox_name`] and fits a file name
/// (at most 160 bytes): the time is clamped to the years 0000–9999 (a
/// fixed width, no sign; order is kept) and a message id longer than
/// [`INBOX_ID_MAX`] bytes is shortened to its first [`INBOX_ID_KEPT`] bytes,
/// `_h` and 16 hex digits of a hash of the whole id.
pub fn inbox_name(priority: Priority, created_at: DateTime<Utc>, message_id: &str) -> String {
    use chrono::TimeZone;
    let first = Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).single();
    let last = Utc
        .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .map(|t| t + chrono::Duration::milliseconds(999));
    let mut t = created_at;
    if let Some(first) = first {
        t = t.max(first);
    }
    if let Some(last) = last {
        t = t.min(last);
    }
    format!(
        "{}-{}-{}-{}.md",
        rank(priority),
        priority,
        t.format("%Y%m%dT%H%M%S%.3fZ"),
        short_id(message_id)
    )
}

/// A message id bounded to [`INBOX_ID_MAX`] bytes (see [`inbox_name`]).
fn short_id(id: &str) -> std::borrow::Cow<'_, str> {
    if id.len() <= INBOX_ID_MAX {
        return id.into();
    }
    let mut cut = INBOX_ID_KEPT;
    while !id.is_char_boundary(cut) {
        cut -= 1;
    }
    // FNV-1a: stable across versions and platforms (the name is a record).
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}_h{hash:016x}", &id[..cut]).into()
}

/// The priority and message id encoded in an inbox file name.
pub fn parse_inbox_name(name: &str) -> Option<(Priority, String)> {
    let stem = name.strip_suffix(".md")?;
    let mut parts = stem.splitn(4, '-');
    let _rank = parts.next()?;
    let priority = Priority::parse(parts.next()?)?;
    let _created = parts.next()?;
    let id = parts.next()?;
    id.starts_with("msg_").then(|| (priority, id.to_string()))
}

/// How late a delivery may be and still count as on time: squadd's own
/// reaction time (the watch event, reading and parsing the file, the write
/// into the inbox) plus the whole-second precision agents stamp
/// `created_at` with. A deadline of 0 s (critical) means "at once", and no
/// delivery takes 0 s.
pub const ON_TIME_TOLERANCE: Duration = Duration::from_secs(2);

/// When a message's wait began: its `created_at`, unless squadd first saw
/// it earlier (a message stamped in the future waits from when it was seen,
/// never from a time an agent wrote).
pub fn wait_since(created_at: DateTime<Utc>, first_seen: DateTime<Utc>) -> DateTime<Utc> {
    created_at.min(first_seen)
}

/// Whether a delivery at `delivered` missed the priority's `deliver_within`
/// deadline counted from `since` (see [`wait_since`]) by more than
/// [`ON_TIME_TOLERANCE`]. Low priority has no deadline, so is never late.
pub fn is_late(
    policy: &MessagePolicy,
    priority: Priority,
    since: DateTime<Utc>,
    delivered: DateTime<Utc>,
) -> bool {
    deadline(policy, priority, since).is_some_and(|by| delivered > after(by, ON_TIME_TOLERANCE))
}

/// When to deliver: at once, except a low-priority message to a recipient
/// with a task in progress, which waits until it is free or `low_max_wait`
/// has passed since `created_at` (pass [`wait_since`]: the earlier of the
/// stamp and when squadd first saw the message).
pub fn deliver_at(
    policy: &MessagePolicy,
    priority: Priority,
    created_at: DateTime<Utc>,
    recipient_busy: bool,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    if priority != Priority::Low || !recipient_busy {
        return now;
    }
    let latest = after(created_at, policy.low_max_wait);
    latest.max(now)
}

/// The delivery deadline of a message (None for low: "when available").
pub fn deadline(
    policy: &MessagePolicy,
    priority: Priority,
    created_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let within = match priority {
        Priority::Critical => policy.deliver_within[0],
        Priority::High => policy.deliver_within[1],
        Priority::Medium => policy.deliver_within[2],
        Priority::Low => return None,
    };
    Some(after(created_at, within))
}

/// When an unacknowledged delivered message escalates (None: never).
pub fn escalation_at(
    policy: &MessagePolicy,
    priority: Priority,
    delivered_at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    policy.escalate_after[rank(priority)].map(|d| after(delivered_at, d))
}

/// Whether a message that asked for a reply is overdue at `now`.
pub fn response_overdue(
    response_needed: bool,
    response_by: Option<DateTime<Utc>>,
    replied: bool,
    now: DateTime<Utc>,
) -> bool {
    response_needed && !replied && response_by.is_some_and(|by| by <= now)
}

/// The priority a routed error report gets: critical → critical, error →
/// high, warning → medium.
pub fn routed_priority(severity: squad_protocol::model::ErrorSeverity) -> Priority {
    use squad_protocol::model::ErrorSeverity::*;
    match severity {
        Critical => Priority::Critical,
        Error => Priority::High,
        Warning => Priority::Medium,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 1, 15, 10, m, s).unwrap()
    }

    fn policy() -> MessagePolicy {
        crate::Policy::defaults().messages
    }

    #[test]
    fn inbox_names_sort_by_priority_then_time() {
        let mut names = [
            inbox_name(Priority::Low, t(0, 0), "msg_a"),
            inbox_name(Priority::Critical, t(5, 0), "msg_b"),
            inbox_name(Priority::High, t(1, 0), "msg_c"),
            inbox_name(Priority::Critical, t(2, 0), "msg_d"),
            inbox_name(Priority::Medium, t(0, 0), "msg_e"),
        ];
        names.sort();
        let ids: Vec<String> = names
            .iter()
            .map(|n| parse_inbox_name(n).unwrap().1)
            .collect();
        assert_eq!(ids, ["msg_d", "msg_b", "msg_c", "msg_e", "msg_a"]);
        assert_eq!(
            inbox_name(Priority::High, t(36, 0), "msg_x"),
            "1-high-20240115T103600.000Z-msg_x.md"
        );
        assert_eq!(parse_inbox_name("junk.md"), None);
    }

    #[test]
    fn inbox_names_parse_back_for_every_year_and_sort_by_time() {
        use chrono::FixedOffset;
        let year0 = DateTime::parse_from_rfc3339("0000-01-01T00:00:00+01:00").unwrap();
        let times = [
            year0.with_timezone(&Utc),
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
            FixedOffset::east_opt(0)
                .unwrap()
                .with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
                .unwrap()
                .with_timezone(&Utc),
            t(0, 0),
        ];
        for at in times {
            let name = inbox_name(Priority::Critical, at, "msg_a");
            assert_eq!(
                parse_inbox_name(&name),
                Some((Priority::Critical, "msg_a".to_string())),
                "{name}"
            );
        }
        let a = inbox_name(Priority::High, year0.with_timezone(&Utc), "msg_a");
        let b = inbox_name(Priority::High, t(0, 0), "msg_a");
        assert!(a < b, "{a} {b}");
    }

    #[test]
    fn long_message_ids_give_bounded_distinct_names() {
        let long = format!("msg_{}", "x".repeat(246));
        let other = format!("msg_{}y", "x".repeat(245));
        let a = inbox_name(Priority::Medium, t(0, 0), &long);
        let b = inbox_name(Priority::Medium, t(0, 0), &other);
        assert!(a.len() <= 160, "{} bytes", a.len());
        assert_ne!(a, b);
        let (_, id) = parse_inbox_name(&a).unwrap();
        assert!(long.starts_with(&id[..INBOX_ID_KEPT]), "{id}");
        let short = format!("msg_{}", "x".repeat(INBOX_ID_MAX - 4));
        assert!(inbox_name(Priority::Medium, t(0, 0), &short).contains(&short));
    }

    /// Survivors of `.ci/mutants` (issue 42): the clamp's last second
    /// kept to the millisecond, and an id cut where a multi-byte character
    /// straddles [`INBOX_ID_KEPT`] cut before that character.
    #[test]
    fn the_last_millisecond_is_kept_and_a_long_id_is_cut_on_a_character() {
        let last = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap()
            + chrono::Duration::milliseconds(500);
        let name = inbox_name(Priority::Low, last, "m");
        assert!(name.contains("99991231T235959.500Z"), "{name}");
        let ascii = format!("msg_{}", "x".repeat(INBOX_ID_KEPT - 5));
        let id = format!("{ascii}{}", "é".repeat(20));
        let (_, short) = parse_inbox_name(&inbox_name(Priority::Low, t(0, 0), &id)).unwrap();
        assert!(short.starts_with(&format!("{ascii}_h")), "{short}");
    }

    #[test]
    fn delivery_within_the_reaction_time_is_on_time() {
        let p = policy();
        // critical: deliver_within 0 s.
        assert!(!is_late(&p, Priority::Critical, t(0, 0), t(0, 0)));
        assert!(!is_late(&p, Priority::Critical, t(0, 0), t(0, 2)));
        assert!(is_late(&p, Priority::Critical, t(0, 0), t(0, 3)));
        // high: 60 s.
        assert!(!is_late(&p, Priority::High, t(0, 0), t(1, 2)));
        assert!(is_late(&p, Priority::High, t(0, 0), t(1, 3)));
        assert!(!is_late(&p, Priority::Low, t(0, 0), t(59, 0)));
        // Stamped in the future: the wait starts when squadd saw it.
        assert_eq!(wait_since(t(30, 0), t(1, 0)), t(1, 0));
        assert_eq!(wait_since(t(0, 0), t(1, 0)), t(0, 0));
    }

    #[test]
    fn low_priority_waits_for_a_free_recipient_at_most_low_max_wait() {
        let p = policy();
        assert_eq!(
            deliver_at(&p, Priority::Critical, t(0, 0), true, t(1, 0)),
            t(1, 0)
        );
        assert_eq!(
            deliver_at(&p, Priority::Low, t(0, 0), false, t(1, 0)),
            t(1, 0)
        );
        assert_eq!(
            deliver_at(&p, Priority::Low, t(0, 0), true, t(1, 0)),
            t(30, 0)
        );
        assert_eq!(
            deliver_at(&p, Priority::Low, t(0, 0), true, t(45, 0)),
            t(45, 0)
        );
    }

    #[test]
    fn deadlines_and_escalations_per_priority() {
        let p = policy();
        assert_eq!(deadline(&p, Priority::Critical, t(0, 0)), Some(t(0, 0)));
        assert_eq!(deadline(&p, Priority::High, t(0, 0)), Some(t(1, 0)));
        assert_eq!(deadline(&p, Priority::Medium, t(0, 0)), Some(t(5, 0)));
        assert_eq!(deadline(&p, Priority::Low, t(0, 0)), None);
        assert_eq!(
            escalation_at(&p, Priority::Critical, t(0, 0)),
            Some(t(2, 0))
        );
        assert_eq!(escalation_at(&p, Priority::High, t(0, 0)), Some(t(10, 0)));
        assert_eq!(escalation_at(&p, Priority::Medium, t(0, 0)), Some(t(30, 0)));
        assert_eq!(escalation_at(&p, Priority::Low, t(0, 0)), None);
    }

    #[test]
    fn responses() {
        assert!(response_overdue(true, Some(t(5, 0)), false, t(5, 0)));
        assert!(!response_overdue(true, Some(t(5, 0)), true, t(6, 0)));
        assert!(!response_overdue(true, Some(t(5, 0)), false, t(4, 59)));
        assert!(!response_overdue(false, Some(t(5, 0)), false, t(6, 0)));
    }
}
