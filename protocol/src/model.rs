//! Typed documents, one struct per file kind.
//!
//! A file becomes a [`Document`] only after it validated without errors (see
//! [`crate::validate`]), so these types can be strict. Field names and
//! optionality mirror [`crate::spec`]; the round-trip property tests keep the
//! two in step.

use crate::ids::error_id_stamp;
use crate::kind::{FileKind, SESSION_STATUS_FILE};
use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An RFC 3339 timestamp with its offset, as written in the file.
pub type Timestamp = DateTime<FixedOffset>;

macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vdoc])* #[serde(rename = $text)] $variant, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The value as written in files.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// Parses the value as written in files.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)* _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum! {
    /// Priority of a task or message. Ordered most urgent first, so sorting puts
    /// `critical` before `low`.
    Priority {
        /// System failures, blocking issues: immediate.
        Critical = "critical",
        /// Task dependencies, validation failures: within a minute.
        High = "high",
        /// Standard work: within five minutes.
        Medium = "medium",
        /// Nice to have: when the recipient is free.
        Low = "low",
    }
}

string_enum! {
    /// State of a task, as reported in progress updates.
    TaskStatus {
        /// Not started.
        Pending = "pending",
        /// Being worked on.
        InProgress = "in_progress",
        /// Done.
        Completed = "completed",
        /// Cannot proceed.
        Blocked = "blocked",
    }
}

string_enum! {
    /// State of a session.
    SessionState {
        /// Work is going on.
        Active = "active",
        /// Every task completed.
        Completed = "completed",
        /// Explicitly failed.
        Failed = "failed",
    }
}

string_enum! {
    /// Session phase.
    Phase {
        /// Gathering requirements.
        Requirements = "requirements",
        /// Designing.
        Design = "design",
        /// Building.
        Implementation = "implementation",
        /// Reviewing and testing.
        Quality = "quality",
    }
}

string_enum! {
    /// State of a phase's validation gate.
    Gate {
        /// Gate passed.
        Passed = "passed",
        /// Being evaluated.
        InProgress = "in_progress",
        /// Not yet evaluated.
        Pending = "pending",
        /// Gate failed.
        Failed = "failed",
    }
}

string_enum! {
    /// What a message asks of its recipient.
    MessageType {
        /// Expects an answer.
        Question = "question",
        /// Expects an action.
        Request = "request",
        /// For information.
        Notification = "notification",
    }
}

string_enum! {
    /// Severity of an error report.
    ErrorSeverity {
        /// Stops the team.
        Critical = "critical",
        /// Stops the task.
        Error = "error",
        /// Worth knowing.
        Warning = "warning",
    }
}

string_enum! {
    /// Result of one validation check in a progress update.
    ValidationStatus {
        /// The check passes.
        Passing = "passing",
        /// The check fails.
        Failing = "failing",
        /// The check has not run.
        NotRun = "not_run",
    }
}

/// `session-status.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// `sess_…`.
    pub session_id: String,
    /// When the session started.
    pub started_at: Timestamp,
    /// Session state.
    pub status: SessionState,
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Agents with a task in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents_active: Option<Vec<String>>,
    /// Number of tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_total: Option<u64>,
    /// Number of completed tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks_completed: Option<u64>,
    /// Gate state per phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_gates: Option<ValidationGates>,
    /// Extension: when the session completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Extension: when the session failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Timestamp>,
    /// Extension: why the session failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Extension: when the session was archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<Timestamp>,
}

/// Gate state per phase.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ValidationGates {
    /// Requirements gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Gate>,
    /// Design gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<Gate>,
    /// Implementation gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implementation: Option<Gate>,
    /// Quality gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Gate>,
}

/// `role-plan-<agent>-<task_id>.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskAssignment {
    /// Identity and urgency.
    pub meta: TaskMeta,
    /// Ordering against other tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Dependencies>,
    /// What to do.
    pub instruction: String,
    /// Where the task may write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boundaries: Option<Boundaries>,
    /// Named output paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<BTreeMap<String, String>>,
    /// How to tell the task is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_criteria: Option<Vec<String>>,
}

/// `meta` of a task assignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskMeta {
    /// `task_…`.
    pub task_id: String,
    /// Assignee.
    pub agent: String,
    /// When assigned.
    pub created_at: Timestamp,
    /// Priority.
    pub priority: Priority,
    /// Seconds from the first `in_progress` report until overdue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// `review`: a worktree run's branch waits for the lead's review
    /// when the task completes, whatever `runners.merge` says
    /// (docs/review.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<String>,
}

/// `dependencies` of a task assignment.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Dependencies {
    /// Tasks that must complete first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Vec<String>>,
    /// Tasks that wait for this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<Vec<String>>,
}

/// `boundaries` of a task assignment.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Boundaries {
    /// Globs the task may change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    /// Globs the task must not change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forbidden: Option<Vec<String>>,
}

impl TaskAssignment {
    /// Tasks this one requires (empty when none are declared).
    pub fn requires(&self) -> &[String] {
        self.dependencies
            .as_ref()
            .and_then(|d| d.requires.as_deref())
            .unwrap_or(&[])
    }

    /// Tasks this one blocks (empty when none are declared).
    pub fn blocks(&self) -> &[String] {
        self.dependencies
            .as_ref()
            .and_then(|d| d.blocks.as_deref())
            .unwrap_or(&[])
    }

    /// Allowed globs (empty means nothing is allowed).
    pub fn allowed(&self) -> &[String] {
        self.boundaries
            .as_ref()
            .and_then(|b| b.allowed.as_deref())
            .unwrap_or(&[])
    }

    /// Forbidden globs.
    pub fn forbidden(&self) -> &[String] {
        self.boundaries
            .as_ref()
            .and_then(|b| b.forbidden.as_deref())
            .unwrap_or(&[])
    }
}

/// `role-comm-<agent>-<task_id>.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressUpdate {
    /// Which task.
    pub meta: ProgressMeta,
    /// Task state.
    pub status: TaskStatus,
    /// 0..=100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_percentage: Option<u8>,
    /// What the agent is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_action: Option<String>,
    /// Steps done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_steps: Option<Vec<String>>,
    /// Steps left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_steps: Option<Vec<String>>,
    /// Files created or changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts_created: Option<Vec<Artifact>>,
    /// Results per check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation_results: Option<BTreeMap<String, ValidationResult>>,
    /// What stops progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blockers: Option<Vec<Blocker>>,
    /// Seconds spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_spent: Option<u64>,
    /// Extension: decisions made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<Vec<Decision>>,
    /// Extension: when the task completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
}

/// `meta` of a progress update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressMeta {
    /// The task.
    pub task_id: String,
    /// The reporting agent.
    pub agent: String,
    /// When written.
    pub updated_at: Timestamp,
}

/// One entry of `artifacts_created`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Project-relative path.
    pub path: String,
    /// Line count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// Free-form state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// One entry of `validation_results`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationResult {
    /// Check result.
    pub status: ValidationStatus,
    /// Error count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// Warning count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<u64>,
    /// Coverage percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f64>,
}

/// One entry of `blockers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blocker {
    /// What blocks.
    pub description: String,
    /// Since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_since: Option<Timestamp>,
    /// Who can unblock it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_agent: Option<String>,
}

/// Extension: one entry of `decisions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Kind of decision.
    #[serde(rename = "type")]
    pub kind: String,
    /// The decision.
    pub description: String,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_yaml::Value>,
}

/// `role-comm-<from>-to-<to>-<message_id>.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Sender, recipient, urgency.
    pub meta: MessageMeta,
    /// Message type.
    #[serde(rename = "type")]
    pub kind: MessageType,
    /// One line.
    pub subject: String,
    /// The body.
    pub message: String,
    /// What it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<MessageContext>,
    /// Whether a reply is expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_needed: Option<bool>,
    /// When the reply is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_by: Option<Timestamp>,
    /// Extension: the message this one answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
}

/// `meta` of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageMeta {
    /// `msg_…`.
    pub message_id: String,
    /// Sender.
    pub from_agent: String,
    /// Recipient.
    pub to_agent: String,
    /// When written.
    pub created_at: Timestamp,
    /// Delivery priority.
    pub priority: Priority,
}

/// `context` of a message.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MessageContext {
    /// The task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Component name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// Project-relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// `error-<agent>-<stamp>.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// `err_<stamp>_<hash>`.
    pub error_id: String,
    /// Reporting agent.
    pub agent: String,
    /// The task that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// How bad.
    pub severity: ErrorSeverity,
    /// When.
    pub occurred_at: Timestamp,
    /// The error.
    pub error: ErrorDetail,
    /// What was tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempted_fixes: Option<Vec<serde_yaml::Value>>,
    /// Whether another agent must step in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires_intervention: Option<bool>,
    /// Who should step in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_agent: Option<String>,
}

/// `error` of an error report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Error class.
    #[serde(rename = "type")]
    pub kind: String,
    /// Message.
    pub message: String,
    /// Project-relative path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// 1-based line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// 1-based column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u64>,
}

/// A valid protocol document of any kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// `session-status.md`.
    SessionStatus(SessionStatus),
    /// A task assignment.
    TaskAssignment(TaskAssignment),
    /// A progress update.
    ProgressUpdate(ProgressUpdate),
    /// An inter-agent message.
    Message(Message),
    /// An error report.
    ErrorReport(ErrorReport),
}

/// Builds the canonical file name of a kind from its identifying fields:
/// `agent` is the sender for messages, `id` the task, message or error id,
/// `to_agent` the recipient (messages only).
pub fn canonical_file_name(kind: FileKind, agent: &str, id: &str, to_agent: &str) -> String {
    match kind {
        FileKind::SessionStatus => SESSION_STATUS_FILE.to_string(),
        FileKind::TaskAssignment => format!("role-plan-{agent}-{id}.md"),
        FileKind::ProgressUpdate => format!("role-comm-{agent}-{id}.md"),
        FileKind::Message => format!("role-comm-{agent}-to-{to_agent}-{id}.md"),
        FileKind::ErrorReport => {
            format!("error-{agent}-{}.md", error_id_stamp(id).unwrap_or(id))
        }
    }
}

impl Document {
    /// The document's kind.
    pub fn kind(&self) -> FileKind {
        match self {
            Document::SessionStatus(_) => FileKind::SessionStatus,
            Document::TaskAssignment(_) => FileKind::TaskAssignment,
            Document::ProgressUpdate(_) => FileKind::ProgressUpdate,
            Document::Message(_) => FileKind::Message,
            Document::ErrorReport(_) => FileKind::ErrorReport,
        }
    }

    /// The canonical file name built from the content.
    pub fn file_name(&self) -> String {
        let kind = self.kind();
        match self {
            Document::SessionStatus(_) => canonical_file_name(kind, "", "", ""),
            Document::TaskAssignment(d) => {
                canonical_file_name(kind, &d.meta.agent, &d.meta.task_id, "")
            }
            Document::ProgressUpdate(d) => {
                canonical_file_name(kind, &d.meta.agent, &d.meta.task_id, "")
            }
            Document::Message(d) => canonical_file_name(
                kind,
                &d.meta.from_agent,
                &d.meta.message_id,
                &d.meta.to_agent,
            ),
            Document::ErrorReport(d) => canonical_file_name(kind, &d.agent, &d.error_id, ""),
        }
    }

    /// Serializes the document as a plain-YAML protocol file with the seed's
    /// `# Title` comment on top.
    pub fn to_file_text(&self) -> Result<String, serde_yaml::Error> {
        let body = match self {
            Document::SessionStatus(d) => serde_yaml::to_string(d),
            Document::TaskAssignment(d) => serde_yaml::to_string(d),
            Document::ProgressUpdate(d) => serde_yaml::to_string(d),
            Document::Message(d) => serde_yaml::to_string(d),
            Document::ErrorReport(d) => serde_yaml::to_string(d),
        }?;
        Ok(format!("# {}\n{body}", self.kind().title()))
    }
}
