//! A lock record's bytes read directly in the layout [`super::write_record`]
//! writes (`serde_json::to_vec_pretty`, fields in declaration order, strings
//! without escapes, timestamps in chrono's `…Z` form): every `squadctl
//! guard` reads every record, and serde_json with chrono's parser cost about
//! 12K instructions a record. Anything else (another order, an escape, an
//! unknown field, an offset) goes the long way, through serde_json, which
//! stays the definition: the fast path must agree with it on every text it
//! accepts (property-tested below).

use chrono::{DateTime, Utc};
use squad_policies::locks::{LockRecord, Mode};

/// Parses a record file's bytes: the fixed layout directly, anything else by
/// serde_json (whose error is the one reported).
pub(crate) fn parse(bytes: &[u8]) -> Result<LockRecord, String> {
    match fixed_layout(bytes) {
        Some(record) => Ok(record),
        None => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
    }
}

/// What is left to read.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// Consumes `lit` exactly.
    fn lit(&mut self, lit: &str) -> Option<()> {
        self.rest = self.rest.strip_prefix(lit)?;
        Some(())
    }

    /// A JSON string without escapes or control characters (serde_json
    /// rejects raw control characters; an escape goes the long way).
    fn string(&mut self) -> Option<&'a str> {
        let body = self.rest.strip_prefix('"')?;
        let end = body.find('"')?;
        let s = &body[..end];
        if s.bytes().any(|b| b == b'\\' || b < 0x20) {
            return None;
        }
        self.rest = &body[end + 1..];
        Some(s)
    }

    /// An unsigned JSON integer as serde_json reads it (no leading zero, no
    /// sign, fraction or exponent: those go the long way).
    fn unsigned(&mut self) -> Option<u64> {
        let digits = self.rest.bytes().take_while(u8::is_ascii_digit).count();
        let (num, rest) = self.rest.split_at(digits);
        if num.is_empty() || (num.len() > 1 && num.starts_with('0')) {
            return None;
        }
        if rest.starts_with(['.', 'e', 'E']) {
            return None;
        }
        self.rest = rest;
        num.parse().ok()
    }

    /// A timestamp string in the `YYYY-MM-DDTHH:MM:SS[.f]Z` layout.
    fn timestamp(&mut self) -> Option<DateTime<Utc>> {
        let s = self.string()?;
        if !s.ends_with('Z') {
            return None;
        }
        squad_protocol::memory::fixed_layout(s).map(|d| d.with_timezone(&Utc))
    }
}

/// The record when `bytes` are in the written layout, else `None`.
fn fixed_layout(bytes: &[u8]) -> Option<LockRecord> {
    let mut c = Cursor {
        rest: std::str::from_utf8(bytes).ok()?,
    };
    c.lit("{\n  \"targets\": [")?;
    let mut targets = Vec::new();
    if c.lit("]").is_none() {
        loop {
            c.lit("\n    ")?;
            targets.push(c.string()?.to_owned());
            if c.lit(",").is_none() {
                c.lit("\n  ]")?;
                break;
            }
        }
    }
    c.lit(",\n  \"mode\": ")?;
    let mode = match c.string()? {
        "exclusive" => Mode::Exclusive,
        "shared" => Mode::Shared,
        _ => return None,
    };
    c.lit(",\n  \"agent\": ")?;
    let agent = c.string()?.to_owned();
    c.lit(",\n  \"task_id\": ")?;
    let task_id = c.string()?.to_owned();
    c.lit(",\n  \"session\": ")?;
    let session = c.string()?.to_owned();
    c.lit(",\n  \"")?;
    let pid = match c.lit("pid\": ") {
        Some(()) => {
            let pid = u32::try_from(c.unsigned()?).ok()?;
            c.lit(",\n  \"")?;
            Some(pid)
        }
        None => None,
    };
    let pid_started_at = match c.lit("pid_started_at\": ") {
        Some(()) => {
            let at = c.unsigned()?;
            c.lit(",\n  \"")?;
            Some(at)
        }
        None => None,
    };
    c.lit("host\": ")?;
    let host = c.string()?.to_owned();
    c.lit(",\n  \"acquired_at\": ")?;
    let acquired_at = c.timestamp()?;
    c.lit(",\n  \"expires_at\": ")?;
    let expires_at = c.timestamp()?;
    c.lit("\n}")?;
    // serde_json allows trailing whitespace and nothing else.
    if !c
        .rest
        .bytes()
        .all(|b| matches!(b, b' ' | b'\n' | b'\t' | b'\r'))
    {
        return None;
    }
    Some(LockRecord {
        targets,
        mode,
        agent,
        task_id,
        session,
        pid,
        pid_started_at,
        host,
        acquired_at,
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed test

    use super::*;
    use proptest::prelude::*;

    /// What serde_json makes of `bytes` (the definition).
    fn by_serde(bytes: &[u8]) -> Option<LockRecord> {
        serde_json::from_slice(bytes).ok()
    }

    /// Bytes as `write_record` writes them.
    fn written(record: &LockRecord) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(record).unwrap();
        bytes.push(b'\n');
        bytes
    }

    fn plain() -> LockRecord {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        LockRecord {
            targets: vec!["shared/f1_0.rs".into(), "src/**".into()],
            mode: Mode::Exclusive,
            agent: "agent-1".into(),
            task_id: "task_9_1".into(),
            session: "20240115T100009Z".into(),
            pid: Some(4242),
            pid_started_at: Some(1_764_000_000),
            host: "vm".into(),
            acquired_at: at("2026-11-26T09:11:23.906664688Z"),
            expires_at: at("2026-11-26T19:11:23Z"),
        }
    }

    /// The fast path reads what `write_record` writes at all (the
    /// properties below would hold for a fast path that refuses everything).
    #[test]
    fn the_written_layout_is_read_by_the_fast_path() {
        let mut r = plain();
        assert_eq!(fixed_layout(&written(&r)), Some(r.clone()));
        r.pid = None;
        r.pid_started_at = None;
        r.targets.clear();
        r.mode = Mode::Shared;
        assert_eq!(fixed_layout(&written(&r)), Some(r.clone()));
        r.acquired_at = "2026-01-01T00:00:00.5Z".parse().unwrap();
        assert_eq!(fixed_layout(&written(&r)), Some(r));
    }

    /// Escapes, other orders, unknown fields and offsets go the long way,
    /// and the long way's answer (or error) is what `parse` returns.
    #[test]
    fn anything_else_goes_through_serde_json() {
        let mut r = plain();
        r.agent = "quote\"d\\agent\n".into();
        let bytes = written(&r);
        assert_eq!(fixed_layout(&bytes), None);
        assert_eq!(parse(&bytes), Ok(r));
        let compact = serde_json::to_vec(&plain()).unwrap();
        assert_eq!(fixed_layout(&compact), None);
        assert_eq!(parse(&compact), Ok(plain()));
        let offset = String::from_utf8(written(&plain()))
            .unwrap()
            .replace("19:11:23Z", "21:11:23+02:00");
        assert_eq!(fixed_layout(offset.as_bytes()), None);
        assert_eq!(parse(offset.as_bytes()), Ok(plain()));
        let garbage = b"{\n  \"targets\": [\n    \"a\"\n  ],\n";
        assert_eq!(
            parse(garbage),
            Err(serde_json::from_slice::<LockRecord>(garbage)
                .unwrap_err()
                .to_string())
        );
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9_./*-]{0,12}",
            // Escapes, quotes, control characters, non-ASCII.
            "[a-z\"\\\\\u{0}-\u{1f}é☃/*]{0,8}",
        ]
    }

    fn moment() -> impl Strategy<Value = DateTime<Utc>> {
        (
            -62_000_000_000i64..250_000_000_000i64,
            prop_oneof![Just(0u32), 0u32..1000, 0u32..1_000_000, 0u32..1_000_000_000],
            0u32..3,
        )
            .prop_map(|(secs, frac, scale)| {
                let nanos = match scale {
                    0 => frac % 1000 * 1_000_000,
                    1 => frac % 1_000_000 * 1000,
                    _ => frac % 1_000_000_000,
                };
                DateTime::<Utc>::from_timestamp(secs, nanos).unwrap_or_default()
            })
    }

    fn record() -> impl Strategy<Value = LockRecord> {
        (
            proptest::collection::vec(text(), 0..4),
            any::<bool>(),
            (text(), text(), text(), text()),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u64>()),
            moment(),
            moment(),
        )
            .prop_map(
                |(targets, shared, (agent, task_id, session, host), pid, started, a, e)| {
                    LockRecord {
                        targets,
                        mode: if shared {
                            Mode::Shared
                        } else {
                            Mode::Exclusive
                        },
                        agent,
                        task_id,
                        session,
                        pid,
                        pid_started_at: started,
                        host,
                        acquired_at: a,
                        expires_at: e,
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Every written record reads back the same, and where the fast
        /// path reads it, it reads what serde_json reads.
        #[test]
        fn written_records_read_back_as_serde_json_reads_them(r in record()) {
            let bytes = written(&r);
            let fast = fixed_layout(&bytes);
            if let Some(f) = &fast {
                prop_assert_eq!(f, &r);
            }
            prop_assert_eq!(by_serde(&bytes), Some(r.clone()));
            prop_assert_eq!(parse(&bytes), Ok(r));
        }

        /// A record damaged anywhere (a byte changed, dropped or added): the
        /// fast path either declines it or reads exactly what serde_json
        /// reads, so a damaged record is never read as another lock (nor a
        /// corrupt one as held, or the reverse).
        #[test]
        fn damaged_records_are_declined_or_read_as_serde_json_reads_them(
            r in record(),
            at in any::<prop::sample::Index>(),
            byte in prop_oneof![any::<u8>(), Just(b'"'), Just(b'\\'), Just(b','), Just(b' '), Just(b'\n'), Just(b'0'), Just(b'Z')],
            how in 0u8..3,
        ) {
            let mut bytes = written(&r);
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] = byte,
                1 => { bytes.remove(i); }
                _ => bytes.insert(i, byte),
            }
            if let Some(f) = fixed_layout(&bytes) {
                prop_assert_eq!(Some(f), by_serde(&bytes));
            }
            prop_assert_eq!(parse(&bytes).ok(), by_serde(&bytes));
        }
    }
}
