//! The protocol's fields, declared once.
//!
//! Validation walks a document against these tables, `squadctl schema` turns
//! them into JSON Schema, and `docs/protocol.md` is checked against them, so the
//! three never disagree.

use crate::ids::IdKind;
use crate::kind::FileKind;

/// Task and message priorities, most urgent first.
pub const PRIORITIES: &[&str] = &["critical", "high", "medium", "low"];
/// Progress update statuses.
pub const TASK_STATUSES: &[&str] = &["pending", "in_progress", "completed", "blocked"];
/// Session statuses.
pub const SESSION_STATUSES: &[&str] = &["active", "completed", "failed"];
/// Session phases, in order.
pub const PHASES: &[&str] = &["requirements", "design", "implementation", "quality"];
/// Validation gate states.
pub const GATES: &[&str] = &["passed", "in_progress", "pending", "failed"];
/// Message types.
pub const MESSAGE_TYPES: &[&str] = &["question", "request", "notification"];
/// Error report severities.
pub const SEVERITIES: &[&str] = &["critical", "error", "warning"];
/// Validation result statuses in progress updates.
pub const VALIDATION_STATUSES: &[&str] = &["passing", "failing", "not_run"];

/// The type a field's value must have.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// A string.
    Text,
    /// A string following an identifier grammar.
    Id(IdKind),
    /// One of the listed strings.
    Enum(&'static [&'static str]),
    /// An RFC 3339 timestamp with an offset, as a string.
    Timestamp,
    /// An integer in `min..=max`.
    Int {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value, if any.
        max: Option<i64>,
    },
    /// A finite number (integer or float) in `min..=max`.
    Number {
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
    /// `true` or `false`.
    Bool,
    /// A boundary glob: valid glob syntax, relative, no `..`.
    Glob,
    /// A project-relative file path: relative, no `..`.
    RelPath,
    /// A list of values of one type.
    List(&'static Ty),
    /// A mapping with known fields.
    Object(&'static [Field]),
    /// A mapping with free keys whose values share one type.
    Map(&'static Ty),
    /// Any YAML value.
    Any,
}

/// One field of a mapping.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The key.
    pub name: &'static str,
    /// The value's type.
    pub ty: Ty,
    /// Whether the field must be present.
    pub required: bool,
    /// Whether the field is one of our documented extensions to the seed.
    pub extension: bool,
    /// What the field means.
    pub doc: &'static str,
}

const fn req(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: true,
        extension: false,
        doc,
    }
}

const fn opt(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: false,
        extension: false,
        doc,
    }
}

const fn ext(name: &'static str, ty: Ty, doc: &'static str) -> Field {
    Field {
        name,
        ty,
        required: false,
        extension: true,
        doc,
    }
}

const TEXT_LIST: Ty = Ty::List(&Ty::Text);
const TASK_LIST: Ty = Ty::List(&Ty::Id(IdKind::Task));
const NON_NEGATIVE: Ty = Ty::Int { min: 0, max: None };

/// `session-status.md`.
pub const SESSION_STATUS: &[Field] = &[
    req(
        "session_id",
        Ty::Id(IdKind::Session),
        "Session id, `sess_[timestamp]_[hash]`.",
    ),
    req("started_at", Ty::Timestamp, "When the session started."),
    req(
        "status",
        Ty::Enum(SESSION_STATUSES),
        "Session state; the supervisor sets `completed` when every task is completed; `failed` is only ever set explicitly.",
    ),
    opt("phase", Ty::Enum(PHASES), "Current phase."),
    opt(
        "agents_active",
        Ty::List(&Ty::Id(IdKind::Agent)),
        "Agents with a task in progress (derived by the supervisor).",
    ),
    opt(
        "tasks_total",
        NON_NEGATIVE,
        "Number of task assignments (derived).",
    ),
    opt(
        "tasks_completed",
        NON_NEGATIVE,
        "Number of completed tasks (derived).",
    ),
    opt(
        "validation_gates",
        Ty::Object(VALIDATION_GATES),
        "State of each phase's gate.",
    ),
    ext(
        "completed_at",
        Ty::Timestamp,
        "When the session became completed (recorded by the supervisor; drives retention).",
    ),
    ext(
        "failed_at",
        Ty::Timestamp,
        "When the session failed (recorded by the supervisor; drives retention).",
    ),
    ext("failure_reason", Ty::Text, "Why the session was failed."),
    ext(
        "archived_at",
        Ty::Timestamp,
        "When the session was moved to .squad/archives/ (recorded by the supervisor; drives retention).",
    ),
];

const VALIDATION_GATES: &[Field] = &[
    opt("requirements", Ty::Enum(GATES), "Requirements gate."),
    opt("design", Ty::Enum(GATES), "Design gate."),
    opt("implementation", Ty::Enum(GATES), "Implementation gate."),
    opt("quality", Ty::Enum(GATES), "Quality gate."),
];

/// `role-plan-<agent>-<task_id>.md`.
pub const TASK_ASSIGNMENT: &[Field] = &[
    req(
        "meta",
        Ty::Object(TASK_META),
        "Who does what, and how urgently.",
    ),
    opt(
        "dependencies",
        Ty::Object(DEPENDENCIES),
        "Ordering against other tasks of the session.",
    ),
    req("instruction", Ty::Text, "What to do."),
    opt(
        "boundaries",
        Ty::Object(BOUNDARIES),
        "Which paths the task may touch. Absent or an empty `allowed` list means nothing is allowed.",
    ),
    opt("outputs", Ty::Map(&Ty::RelPath), "Named output paths."),
    opt(
        "success_criteria",
        TEXT_LIST,
        "How to tell the task is done.",
    ),
];

const TASK_META: &[Field] = &[
    req(
        "task_id",
        Ty::Id(IdKind::Task),
        "Task id, `task_[timestamp]_[sequence]`.",
    ),
    req(
        "agent",
        Ty::Id(IdKind::Agent),
        "The agent the task is assigned to.",
    ),
    req("created_at", Ty::Timestamp, "When the task was assigned."),
    req("priority", Ty::Enum(PRIORITIES), "Task priority."),
    opt(
        "timeout",
        // 3650 days, the longest duration a policy accepts: a larger
        // timeout is a typo, and past i64 seconds no deadline is computable.
        Ty::Int {
            min: 1,
            max: Some(315_360_000),
        },
        "Seconds (at most 315360000, 3650 days) from the first `in_progress` report until the task is overdue.",
    ),
    ext(
        "merge",
        Ty::Enum(&["review"]),
        "`review`: in worktree mode the task's branch waits for the lead's review (`squadctl review`) when it completes, whatever `runners.merge` says (docs/review.md).",
    ),
];

const DEPENDENCIES: &[Field] = &[
    opt(
        "requires",
        TASK_LIST,
        "Tasks that must complete before this one starts.",
    ),
    opt(
        "blocks",
        TASK_LIST,
        "Tasks that cannot start until this one completes.",
    ),
];

const BOUNDARIES: &[Field] = &[
    opt(
        "allowed",
        Ty::List(&Ty::Glob),
        "Globs of paths the task may change.",
    ),
    opt(
        "forbidden",
        Ty::List(&Ty::Glob),
        "Globs of paths the task must not change; beats `allowed`.",
    ),
];

/// `role-comm-<agent>-<task_id>.md`.
pub const PROGRESS_UPDATE: &[Field] = &[
    req(
        "meta",
        Ty::Object(PROGRESS_META),
        "Which task this update is about.",
    ),
    req("status", Ty::Enum(TASK_STATUSES), "Task state."),
    opt(
        "progress_percentage",
        Ty::Int {
            min: 0,
            max: Some(100),
        },
        "0 to 100.",
    ),
    opt("current_action", Ty::Text, "What the agent is doing now."),
    opt("completed_steps", TEXT_LIST, "Steps done."),
    opt("remaining_steps", TEXT_LIST, "Steps left."),
    opt(
        "artifacts_created",
        Ty::List(&Ty::Object(ARTIFACT)),
        "Files the task created or changed.",
    ),
    opt(
        "validation_results",
        Ty::Map(&Ty::Object(VALIDATION_RESULT)),
        "Results per check (typescript, eslint, tests, build, …).",
    ),
    opt(
        "blockers",
        Ty::List(&Ty::Object(BLOCKER)),
        "What stops progress.",
    ),
    opt("time_spent", NON_NEGATIVE, "Seconds spent so far."),
    ext(
        "decisions",
        Ty::List(&Ty::Object(DECISION)),
        "Decisions the agent made; synced to `agent_decisions` in shared-context.json.",
    ),
    ext("completed_at", Ty::Timestamp, "When the task completed."),
];

const PROGRESS_META: &[Field] = &[
    req("task_id", Ty::Id(IdKind::Task), "The task."),
    req(
        "agent",
        Ty::Id(IdKind::Agent),
        "The reporting agent (the task's assignee).",
    ),
    req("updated_at", Ty::Timestamp, "When this update was written."),
];

const ARTIFACT: &[Field] = &[
    req("path", Ty::RelPath, "Project-relative path."),
    opt("lines", NON_NEGATIVE, "Line count."),
    opt("status", Ty::Text, "Free-form state, e.g. `draft`."),
];

const VALIDATION_RESULT: &[Field] = &[
    req("status", Ty::Enum(VALIDATION_STATUSES), "Check result."),
    opt("errors", NON_NEGATIVE, "Number of errors."),
    opt("warnings", NON_NEGATIVE, "Number of warnings."),
    opt(
        "coverage",
        Ty::Number {
            min: 0.0,
            max: 100.0,
        },
        "Coverage percentage.",
    ),
];

const BLOCKER: &[Field] = &[
    req("description", Ty::Text, "What blocks the task."),
    opt("blocking_since", Ty::Timestamp, "Since when."),
    opt(
        "requires_agent",
        Ty::Id(IdKind::Agent),
        "The agent who can unblock it; the supervisor routes the blocker to them.",
    ),
];

const DECISION: &[Field] = &[
    req("type", Ty::Text, "Kind of decision, e.g. `architecture`."),
    req("description", Ty::Text, "The decision."),
    opt("data", Ty::Any, "Structured details."),
];

/// `role-comm-<from>-to-<to>-<message_id>.md`.
pub const MESSAGE: &[Field] = &[
    req(
        "meta",
        Ty::Object(MESSAGE_META),
        "Sender, recipient and urgency.",
    ),
    req("type", Ty::Enum(MESSAGE_TYPES), "Message type."),
    req("subject", Ty::Text, "One line."),
    req("message", Ty::Text, "The body."),
    opt(
        "context",
        Ty::Object(MESSAGE_CONTEXT),
        "What the message is about.",
    ),
    opt("response_needed", Ty::Bool, "Whether a reply is expected."),
    opt(
        "response_by",
        Ty::Timestamp,
        "When the reply is due; not before `meta.created_at`.",
    ),
    ext(
        "in_reply_to",
        Ty::Id(IdKind::Message),
        "The message this one answers.",
    ),
];

const MESSAGE_META: &[Field] = &[
    req(
        "message_id",
        Ty::Id(IdKind::Message),
        "Message id, `msg_[timestamp]_[hash]`.",
    ),
    req("from_agent", Ty::Id(IdKind::Agent), "Sender."),
    req("to_agent", Ty::Id(IdKind::Agent), "Recipient."),
    req("created_at", Ty::Timestamp, "When the message was written."),
    req("priority", Ty::Enum(PRIORITIES), "Delivery priority."),
];

const MESSAGE_CONTEXT: &[Field] = &[
    opt(
        "task_id",
        Ty::Id(IdKind::Task),
        "The task the message is about.",
    ),
    opt("component", Ty::Text, "Component name."),
    opt("file", Ty::RelPath, "Project-relative path."),
];

/// `error-<agent>-<stamp>.md`.
pub const ERROR_REPORT: &[Field] = &[
    req(
        "error_id",
        Ty::Id(IdKind::Error),
        "Error id, `err_[timestamp]_[hash]`; the `[timestamp]` part names the file.",
    ),
    req("agent", Ty::Id(IdKind::Agent), "Reporting agent."),
    opt("task_id", Ty::Id(IdKind::Task), "The task that failed."),
    req("severity", Ty::Enum(SEVERITIES), "How bad it is."),
    req("occurred_at", Ty::Timestamp, "When it happened."),
    req("error", Ty::Object(ERROR_DETAIL), "The error itself."),
    opt(
        "attempted_fixes",
        Ty::List(&Ty::Any),
        "What was tried (strings or small mappings).",
    ),
    opt(
        "requires_intervention",
        Ty::Bool,
        "Whether another agent must step in; routed to `suggested_agent`.",
    ),
    opt(
        "suggested_agent",
        Ty::Id(IdKind::Agent),
        "Who should step in.",
    ),
];

const ERROR_DETAIL: &[Field] = &[
    req(
        "type",
        Ty::Text,
        "Error class, e.g. `TypeScriptCompilationError`.",
    ),
    req("message", Ty::Text, "The error message."),
    opt("file", Ty::RelPath, "Project-relative path."),
    opt("line", Ty::Int { min: 1, max: None }, "1-based line."),
    opt("column", Ty::Int { min: 1, max: None }, "1-based column."),
];

/// The top-level fields of a kind.
pub fn fields(kind: FileKind) -> &'static [Field] {
    match kind {
        FileKind::SessionStatus => SESSION_STATUS,
        FileKind::TaskAssignment => TASK_ASSIGNMENT,
        FileKind::ProgressUpdate => PROGRESS_UPDATE,
        FileKind::Message => MESSAGE,
        FileKind::ErrorReport => ERROR_REPORT,
    }
}
