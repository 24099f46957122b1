//! The five protocol file kinds and how a file name maps to one.

use serde::Serialize;
use std::fmt;

/// A protocol file kind (docs/protocol.md, "File names and kinds").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// `session-status.md`, maintained by the supervisor.
    SessionStatus,
    /// `role-plan-<agent>-<task_id>.md`.
    TaskAssignment,
    /// `role-comm-<agent>-<task_id>.md`.
    ProgressUpdate,
    /// `role-comm-<from>-to-<to>-<message_id>.md`.
    Message,
    /// `error-<agent>-<stamp>.md`.
    ErrorReport,
}

/// The name of the session status file.
pub const SESSION_STATUS_FILE: &str = "session-status.md";

impl FileKind {
    /// All kinds, in protocol order.
    pub const ALL: [FileKind; 5] = [
        FileKind::SessionStatus,
        FileKind::TaskAssignment,
        FileKind::ProgressUpdate,
        FileKind::Message,
        FileKind::ErrorReport,
    ];

    /// The kind a file name denotes, or `None` for files that are not protocol files.
    ///
    /// The prefix decides (`role-plan-`, `role-comm-`, `error-`, `session-status`);
    /// among `role-comm-` files the id suffix decides: `-msg_…` is a message,
    /// anything else a progress update. A wrong name of the right prefix is still
    /// classified, so validation can say `filename-mismatch` instead of ignoring it.
    pub fn from_file_name(name: &str) -> Option<FileKind> {
        let stem = name.strip_suffix(".md")?;
        if stem.eq_ignore_ascii_case("session-status")
            || stem.to_ascii_lowercase().starts_with("session-status")
        {
            Some(FileKind::SessionStatus)
        } else if stem.starts_with("role-plan-") {
            Some(FileKind::TaskAssignment)
        } else if let Some(rest) = stem.strip_prefix("role-comm-") {
            if rest.contains("-msg_") {
                Some(FileKind::Message)
            } else {
                Some(FileKind::ProgressUpdate)
            }
        } else if stem.starts_with("error-") {
            Some(FileKind::ErrorReport)
        } else {
            None
        }
    }

    /// The kebab-case name used on the command line and in JSON, e.g. `task-assignment`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::SessionStatus => "session-status",
            FileKind::TaskAssignment => "task-assignment",
            FileKind::ProgressUpdate => "progress-update",
            FileKind::Message => "message",
            FileKind::ErrorReport => "error-report",
        }
    }

    /// Parses a kind name; the seed's file prefixes (`role-plan`, `role-comm`, `error`)
    /// are accepted as aliases.
    pub fn from_name(name: &str) -> Option<FileKind> {
        match name {
            "session-status" => Some(FileKind::SessionStatus),
            "task-assignment" | "role-plan" => Some(FileKind::TaskAssignment),
            "progress-update" | "role-comm" => Some(FileKind::ProgressUpdate),
            "message" => Some(FileKind::Message),
            "error-report" | "error" => Some(FileKind::ErrorReport),
            _ => None,
        }
    }

    /// The file name pattern, for help texts.
    pub fn file_pattern(self) -> &'static str {
        match self {
            FileKind::SessionStatus => "session-status.md",
            FileKind::TaskAssignment => "role-plan-<agent>-<task_id>.md",
            FileKind::ProgressUpdate => "role-comm-<agent>-<task_id>.md",
            FileKind::Message => "role-comm-<from_agent>-to-<to_agent>-<message_id>.md",
            FileKind::ErrorReport => "error-<agent>-<stamp>.md",
        }
    }

    /// A human title, as the seed names the kind.
    pub fn title(self) -> &'static str {
        match self {
            FileKind::SessionStatus => "Session Status",
            FileKind::TaskAssignment => "Task Assignment",
            FileKind::ProgressUpdate => "Progress Update",
            FileKind::Message => "Inter-Agent Message",
            FileKind::ErrorReport => "Error Report",
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        let cases: &[(&str, Option<FileKind>)] = &[
            ("session-status.md", Some(FileKind::SessionStatus)),
            ("Session-Status.md", Some(FileKind::SessionStatus)),
            ("session-status-copy.md", Some(FileKind::SessionStatus)),
            ("role-plan-a-task_1.md", Some(FileKind::TaskAssignment)),
            ("role-comm-a-task_1.md", Some(FileKind::ProgressUpdate)),
            ("role-comm-a-to-b-msg_1.md", Some(FileKind::Message)),
            (
                "role-comm-go-to-market-task_1.md",
                Some(FileKind::ProgressUpdate),
            ),
            ("error-a-20240115T103800Z.md", Some(FileKind::ErrorReport)),
            ("summary.md", None),
            ("role-plan-a-task_1.yaml", None),
            ("notes.md", None),
        ];
        for &(name, expected) in cases {
            assert_eq!(FileKind::from_file_name(name), expected, "{name}");
        }
    }

    #[test]
    fn names_round_trip() {
        for kind in FileKind::ALL {
            assert_eq!(FileKind::from_name(kind.as_str()), Some(kind));
        }
    }
}
