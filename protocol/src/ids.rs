//! Identifier grammars (docs/protocol.md, "Identifier grammars").
//!
//! Hand-written matchers rather than regexes: they run for every field of
//! every file, and the grammars are small enough to read at a glance.

use std::fmt;

/// The one key two names are compared by: Unicode NFC, then lower case. A
/// name typed composed (`café`, U+00E9) and one typed decomposed (`cafe`
/// and U+0301) look alike and are one name; so are `Ana` and `ana`, which
/// collide on case-insensitive file systems. Agent ids are ASCII only
/// ([`IdKind::Agent`]), so the names this decides for are those of a team
/// (folders, roster, skills) and the paths an import writes.
pub fn name_key(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    name.nfc().collect::<String>().to_lowercase()
}

/// Whether `a` and `b` are one name by [`name_key`].
pub fn same_name(a: &str, b: &str) -> bool {
    a == b || name_key(a) == name_key(b)
}

/// The kinds of identifier the protocol uses, each with its own grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    /// `^[a-z0-9]+(-[a-z0-9]+)*$`, e.g. `backend-system-architect`.
    Agent,
    /// `^task_[A-Za-z0-9_]+$`, e.g. `task_001`.
    Task,
    /// `^msg_[A-Za-z0-9_]+$`.
    Message,
    /// `^err_[A-Za-z0-9_]+$`.
    Error,
    /// `^sess_[A-Za-z0-9_]+$`.
    Session,
}

impl IdKind {
    /// The grammar as a regular expression, for messages, docs and JSON Schema.
    pub fn pattern(self) -> &'static str {
        match self {
            IdKind::Agent => "^[a-z0-9]+(-[a-z0-9]+)*$",
            IdKind::Task => "^task_[A-Za-z0-9_]+$",
            IdKind::Message => "^msg_[A-Za-z0-9_]+$",
            IdKind::Error => "^err_[A-Za-z0-9_]+$",
            IdKind::Session => "^sess_[A-Za-z0-9_]+$",
        }
    }

    /// A valid example, used in hints.
    pub fn example(self) -> &'static str {
        match self {
            IdKind::Agent => "backend-system-architect",
            IdKind::Task => "task_001",
            IdKind::Message => "msg_20240115T103600Z_a1b2",
            IdKind::Error => "err_20240115T103800Z_c3d4",
            IdKind::Session => "sess_20240115T100000Z_e5f6",
        }
    }

    fn prefix(self) -> Option<&'static str> {
        match self {
            IdKind::Agent => None,
            IdKind::Task => Some("task_"),
            IdKind::Message => Some("msg_"),
            IdKind::Error => Some("err_"),
            IdKind::Session => Some("sess_"),
        }
    }

    /// Whether `s` matches this kind's grammar.
    pub fn matches(self, s: &str) -> bool {
        match self.prefix() {
            None => is_agent_name(s),
            Some(prefix) => s.strip_prefix(prefix).is_some_and(|rest| {
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            }),
        }
    }
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdKind::Agent => "agent name",
            IdKind::Task => "task id",
            IdKind::Message => "message id",
            IdKind::Error => "error id",
            IdKind::Session => "session id",
        })
    }
}

fn is_agent_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// The `[timestamp]` part of an error id `err_<T>_<hash>`: everything between
/// `err_` and the last `_`, or everything after `err_` when there is no hash.
///
/// The canonical file name of an error report is `error-<agent>-<T>.md`.
pub fn error_id_stamp(error_id: &str) -> Option<&str> {
    let rest = error_id.strip_prefix("err_")?;
    match rest.rfind('_') {
        Some(i) if i > 0 => Some(&rest[..i]),
        _ => Some(rest),
    }
}

/// Whether `name` is a valid session directory name: `YYYYMMDDTHHMMSSZ[-slug]`
/// where the slug follows the agent-name grammar.
pub fn is_session_dir_name(name: &str) -> bool {
    let (stamp, slug) = match name.split_once('-') {
        Some((stamp, slug)) => (stamp, Some(slug)),
        None => (name, None),
    };
    let b = stamp.as_bytes();
    let stamp_ok = b.len() == 16
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z';
    stamp_ok && slug.is_none_or(is_agent_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammars_table() {
        let cases: &[(IdKind, &str, bool)] = &[
            (IdKind::Agent, "backend-system-architect", true),
            (IdKind::Agent, "a1", true),
            (IdKind::Agent, "", false),
            (IdKind::Agent, "Backend", false),
            (IdKind::Agent, "-a", false),
            (IdKind::Agent, "a-", false),
            (IdKind::Agent, "a--b", false),
            (IdKind::Agent, "a_b", false),
            (IdKind::Task, "task_001", true),
            (IdKind::Task, "task_A_b_9", true),
            (IdKind::Task, "task_", false),
            (IdKind::Task, "task-001", false),
            (IdKind::Task, "task_0 1", false),
            (IdKind::Message, "msg_1", true),
            (IdKind::Message, "task_1", false),
            (IdKind::Error, "err_20240115T103800Z_ab", true),
            (IdKind::Error, "err_é", false),
            (IdKind::Session, "sess_x", true),
            (IdKind::Session, "sess", false),
        ];
        for &(kind, input, expected) in cases {
            assert_eq!(kind.matches(input), expected, "{kind:?} {input:?}");
        }
    }

    #[test]
    fn examples_match_their_own_grammar() {
        for kind in [
            IdKind::Agent,
            IdKind::Task,
            IdKind::Message,
            IdKind::Error,
            IdKind::Session,
        ] {
            assert!(kind.matches(kind.example()), "{kind:?}");
        }
    }

    #[test]
    fn error_stamp() {
        assert_eq!(
            error_id_stamp("err_20240115T103800Z_ab12"),
            Some("20240115T103800Z")
        );
        assert_eq!(error_id_stamp("err_2024_01_15_ab"), Some("2024_01_15"));
        assert_eq!(error_id_stamp("err_abc"), Some("abc"));
        assert_eq!(error_id_stamp("msg_abc"), None);
    }

    #[test]
    fn session_dir_names() {
        assert!(is_session_dir_name("20240115T100000Z"));
        assert!(is_session_dir_name("20240115T100000Z-user-search"));
        assert!(!is_session_dir_name("20240115T100000"));
        assert!(!is_session_dir_name("20240115T100000Z-"));
        assert!(!is_session_dir_name("20240115T100000Z-Bad"));
        assert!(!is_session_dir_name("sess_1"));
    }
}

#[cfg(test)]
mod name_key_tests {
    use super::*;

    #[test]
    fn composed_decomposed_and_cased_spellings_are_one_name() {
        assert!(same_name("caf\u{e9}", "cafe\u{301}"));
        assert!(same_name("Caf\u{e9}", "cafe\u{301}"));
        assert_eq!(name_key("cafe\u{301}"), "caf\u{e9}");
        assert!(!same_name("cafe", "caf\u{e9}"));
    }
}
