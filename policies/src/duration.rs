//! Durations as people write them in policy and on the command line:
//! `500ms`, `90s`, `15m`, `2h`, `7d`, `1h30m`, or a bare number of seconds.

use std::time::Duration;

/// Parses a duration; the error says what is accepted.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
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
    fn format_round_trips() {
        for secs in [0, 1, 59, 60, 900, 5400, 90_061] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }
}
