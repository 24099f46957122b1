//! Durations as people write them in policy and on the command line:
//! `500ms`, `90s`, `15m`, `2h`, `7d`, `1h30m`, or a bare number of seconds.

use chrono::{DateTime, Utc};
use std::time::Duration;

/// The longest duration accepted anywhere (policy or command line): 3650
/// days, ten years. Longer is refused rather than clamped, so a typo like
/// `100000000d` is an error naming its field, never a crash or a deadline
/// that silently wraps to "now".
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 86_400);

/// `t + d`, saturating at the end of the calendar instead of panicking.
/// Every deadline computed from a policy or a file goes through here.
pub fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// Parses a duration of at most [`MAX_DURATION`]; the error says what is
/// accepted.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = parse_unbounded(text)?;
    if d > MAX_DURATION {
        return Err(format!(
            "`{}` is longer than the maximum of {}",
            text.trim(),
            format_duration(MAX_DURATION)
        ));
    }
    Ok(d)
}

fn parse_unbounded(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    let bad = || {
        format!(
            "`{text}` is not a duration; write e.g. `500ms`, `30s`, `15m`, `2h`, `7d` or `1h30m`"
        )
    };
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total_ms: u64 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let (unit_ms, len) = if rest.starts_with("ms") {
            (1, 2)
        } else {
            match rest.chars().next() {
                Some('s') => (1000, 1),
                Some('m') => (60_000, 1),
                Some('h') => (3_600_000, 1),
                Some('d') => (86_400_000, 1),
                _ => return Err(bad()),
            }
        };
        rest = &rest[len..];
        total_ms = n
            .checked_mul(unit_ms)
            .and_then(|x| total_ms.checked_add(x))
            .ok_or_else(bad)?;
    }
    Ok(Duration::from_millis(total_ms))
}

/// Formats a duration the way [`parse_duration`] reads it (`1h30m`).
pub fn format_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, name) in [(86_400, 'd'), (3600, 'h'), (60, 'm'), (1, 's')] {
        if secs >= unit {
            out.push_str(&format!("{}{name}", secs / unit));
            secs %= unit;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, Option<u64>)] = &[
            ("90", Some(90)),
            ("30s", Some(30)),
            ("15m", Some(900)),
            ("2h", Some(7200)),
            ("7d", Some(604_800)),
            ("1h30m", Some(5400)),
            ("", None),
            ("m", None),
            ("15", Some(15)),
            ("1500ms", Some(1)),
            ("1m30s", Some(90)),
            ("15x", None),
            ("1.5h", None),
            ("-5m", None),
            ("99999999999999999999d", None),
            ("100000000d", None),
            ("18446744073709551615", None),
            ("3650d", Some(3650 * 86_400)),
            ("3650d1s", None),
        ];
        for &(text, want) in cases {
            assert_eq!(
                parse_duration(text).ok().map(|d| d.as_secs()),
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn past_the_maximum_is_an_error_saying_so() {
        let e = parse_duration("18446744073709551615").unwrap_err();
        assert!(e.contains("maximum of 3650d"), "{e}");
    }

    #[test]
    fn after_saturates_at_the_end_of_the_calendar() {
        let end = DateTime::<Utc>::MAX_UTC;
        assert_eq!(after(end, Duration::from_secs(1)), end);
        assert_eq!(after(DateTime::<Utc>::MIN_UTC, Duration::MAX), end);
        let t = DateTime::<Utc>::UNIX_EPOCH;
        assert_eq!(after(t, Duration::from_secs(60)).timestamp(), 60);
    }

    #[test]
    fn format_round_trips() {
        for secs in [0, 1, 59, 60, 900, 5400, 90_061] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}
