// Over 800 lines: every event kind with its name and its one-line detail,
// one match each (exhaustive on purpose); grouping the kinds by area
// (issue 42 item 3) splits it.
//! Events: every change the supervisor notices or makes. They go to the event
//! bus (`squadctl events`) and, when they record an action or a finding, to
//! `.squad/audit.jsonl`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use squad_protocol::model::SessionState;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum EventKind {
    /// The daemon started supervising a root.
    Started {
        /// Sessions found by the start-up scan.
        sessions: usize,
        /// Protocol files found by the start-up scan.
        files: usize,
    },
    /// The daemon is stopping.
    Stopping {
        /// Why.
        reason: String,
    },
    /// A protocol file was (re)validated and is valid.
    FileValidated {
        /// Warnings it has.
        warnings: usize,
    },
    /// A protocol file has errors.
    FileInvalid {
        /// Number of errors.
        errors: usize,
        /// The first error, `line:col rule: message`.
        first: String,
    },
    /// A protocol file that had errors no longer has any.
    FileFixed,
    /// A protocol file was removed.
    FileRemoved,
    /// A session directory appeared.
    SessionAdded,
    /// A session directory disappeared.
    SessionRemoved,
    /// The supervisor wrote one of its outputs.
    OutputWritten {
        /// `session-status` or `shared-context`.
        output: String,
    },
    /// An output could not be written.
    OutputFailed {
        /// `session-status` or `shared-context`.
        output: String,
        /// The I/O error.
        error: String,
    },
    /// A task became ready to start.
    TaskReady {
        /// Task id.
        task_id: String,
        /// Its assignee, who should be told.
        agent: String,
    },
    /// A task completed.
    TaskCompleted {
        /// Task id.
        task_id: String,
        /// Its assignee.
        agent: String,
    },
    /// A task passed its deadline (`meta.timeout` after its first
    /// `in_progress` report) without completing.
    TaskOverdue {
        /// Task id.
        task_id: String,
        /// Its assignee.
        agent: String,
    },
    /// A task started (or finished) while its prerequisites are unmet.
    DependencyViolation {
        /// Task id.
        task_id: String,
        /// Unmet prerequisites.
        unmet: Vec<String>,
    },
    /// The session's derived status changed.
    SessionStatusChanged {
        /// New status.
        status: SessionState,
    },
    /// The root (or its `.squad/sessions`) disappeared.
    RootMissing,
    /// The root is back and was rescanned.
    RootRestored,
    /// The root's `.squad/` (sessions, `run/`, policy) was moved away,
    /// under this name in the root: another tool's import (`squad import
    /// --force` moves it to `.squad-archive-<timestamp>/`).
    RootMoved {
        /// The directory it is now, relative to the root.
        to: String,
    },
    /// The watcher lost events or failed; the root was rescanned.
    Rescanned {
        /// Why.
        reason: String,
    },
    /// A watcher error (e.g. the inotify watch limit).
    WatchError {
        /// The error and what to do about it.
        error: String,
    },
    /// A lock was taken.
    LockAcquired {
        /// Targets.
        targets: Vec<String>,
        /// `exclusive` or `shared`.
        mode: String,
        /// Holder.
        agent: String,
        /// The holder's task.
        task_id: String,
    },
    /// A lock was released by its holder (or because its session ended).
    LockReleased {
        /// Targets.
        targets: Vec<String>,
        /// Holder.
        agent: String,
        /// Why.
        reason: String,
    },
    /// Retention moved a session into `.squad/archives/`.
    SessionArchived {
        /// The policy field that decided.
        rule: String,
        /// The session's age under it, in seconds.
        age_secs: u64,
        /// Where the age counts from.
        since_source: String,
        /// With `cluster:`, on a host other than the leader: the leader
        /// whose retention removed it (docs/cluster.md, "Retention across
        /// hosts").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// Retention deleted a session or an archive.
    SessionDeleted {
        /// The policy field that decided.
        rule: String,
        /// The age under it, in seconds.
        age_secs: u64,
        /// Where the age counts from.
        since_source: String,
        /// As for [`EventKind::SessionArchived`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// A retention action failed.
    RetentionFailed {
        /// What went wrong.
        error: String,
    },
    /// A session ended: summary written, temporary files removed.
    SessionEnded {
        /// `completed` or `failed`.
        status: String,
        /// Temporary files removed.
        removed: usize,
    },
    /// The policy file changed and the new policy is in force.
    PolicyReloaded,
    /// The policy file changed but is invalid: the previous policy stays.
    PolicyRefused {
        /// The error, naming the field.
        error: String,
    },
    /// A message was delivered into its recipient's inbox.
    MessageDelivered {
        /// Recipient.
        to: String,
        /// Message id.
        message_id: String,
        /// Priority.
        priority: String,
        /// Delivered after its priority's `deliver_within`, counted from when
        /// squadd first saw it at the latest, by more than squadd's reaction
        /// time (`squad_policies::messages::ON_TIME_TOLERANCE`, 2 s).
        late: bool,
        /// For routed reports: the file the message was generated from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        routed_from: Option<String>,
    },
    /// A message file reuses the message id of another file of its session
    /// (the first by name keeps it): it is not delivered, and its sender is
    /// told (a notice, when `notices.file_invalid` is on).
    MessageRefused {
        /// The reused message id.
        message_id: String,
        /// Its sender, as the file says.
        from: String,
        /// Its recipient, as the file says.
        to: String,
        /// The refused file's name.
        file: String,
        /// The file that keeps the id.
        kept_by: String,
    },
    /// A delivered message stayed unacknowledged past `escalate_after`: the
    /// recipient was notified again.
    MessageEscalated {
        /// Recipient.
        to: String,
        /// Message id.
        message_id: String,
        /// Priority.
        priority: String,
    },
    /// A message asked for a reply by `response_by` and got none.
    ResponseOverdue {
        /// Sender, who is waiting.
        from: String,
        /// Recipient, who owes the reply.
        to: String,
        /// Message id.
        message_id: String,
    },
    /// A notify command failed after all its retries.
    NotifyFailed {
        /// Recipient.
        to: String,
        /// Message id.
        message_id: String,
        /// What went wrong.
        error: String,
    },
    /// A stale lock was reclaimed.
    LockReclaimed {
        /// Targets.
        targets: Vec<String>,
        /// Holder.
        agent: String,
        /// The holder's task.
        task_id: String,
        /// Why it was stale.
        reason: String,
    },
    /// This host became the project's leader (docs/cluster.md, "Leader"):
    /// it writes the supervisor-owned outputs from now on.
    LeaderElected {
        /// The leader's epoch (the lease's revision at election).
        epoch: u64,
    },
    /// This host stopped being the project's leader: its supervisor-owned
    /// writes stopped.
    LeaderLost {
        /// The epoch it led with.
        epoch: u64,
        /// Why.
        reason: String,
    },
    /// squadd's control socket or pid lock was missing and is back: the
    /// socket file was removed (squadd bound it again) or `.squad/` was
    /// deleted and recreated (squadd took the new pid lock and bound again).
    ControlRestored {
        /// What was restored and why.
        reason: String,
    },
    /// `.squad/` was recreated and another squadd holds its pid lock: this
    /// squadd no longer supervises the root (`squadctl health` says so).
    RootTakenOver {
        /// The other squadd's pid, as its pid file says.
        pid: String,
    },
    /// Directories that could not be watched (the inotify limit) are
    /// watched now.
    WatchRestored {
        /// How many.
        dirs: usize,
    },
    /// squadd started an agent's runner for a ready task.
    AgentSpawned {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// The run's pid (and process group).
        pid: u32,
        /// Run number of the task, from 1.
        attempt: u32,
    },
    /// A run ended.
    AgentExited {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// Exit code, when it exited.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// Signal, when one ended it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        /// Whether the task was completed.
        completed: bool,
        /// What follows: `done`, `retry at …`, `held for a human`.
        next: String,
        /// Tokens and cost the run's output reported (docs/runners.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Box<squad_policies::usage::Usage>>,
    },
    /// A run passed its time limit: its process group got SIGTERM (then
    /// SIGKILL after the grace period).
    AgentTimeout {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// The limit, in seconds.
        limit_secs: u64,
    },
    /// A run passed its budget (`runners.budget.run`): its process group
    /// got SIGTERM (then SIGKILL after the grace period) and it is held.
    AgentOverBudget {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// What passed which limit (`12000 tokens of a 10000-token budget`).
        figures: String,
    },
    /// An agent a person runs waits for them (its CLI's hook said so:
    /// `squadctl presence`).
    AgentWaiting {
        /// Agent.
        agent: String,
        /// What it waits for.
        detail: String,
    },
    /// A run wrote no protocol file for longer than `runners.idle_after`.
    AgentIdle {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// Seconds since its last write.
        idle_secs: u64,
    },
    /// The last run of the pool ended.
    PoolEmpty,
    /// A restarted squadd found a run's process alive and supervises it again.
    RunAdopted {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// Its pid.
        pid: u32,
    },
    /// A restarted squadd found a run's process gone (or a run that never
    /// got its pid recorded): reported, not started again.
    RunLost {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// Its pid (0: unknown).
        pid: u32,
    },
    /// A worktree run's branch was merged into the session's branch,
    /// held at merge, or dropped by the lead (docs/worktrees.md,
    /// "Hand-over").
    WorktreeMerge {
        /// Task id.
        task_id: String,
        /// `merged`, `held` or `dropped`.
        state: String,
        /// Why it is held, in a few words (empty otherwise).
        detail: String,
    },
    /// Before either merges, a worktree run's branch changes files another
    /// unmerged run of its session changes too (`other`), or (no `other`)
    /// would conflict on them with the session's branch
    /// (docs/worktrees.md, "Overlap told before merge"). Said once each.
    BranchOverlap {
        /// Task id.
        task_id: String,
        /// The other run's task.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        other: Option<String>,
        /// The files.
        files: Vec<String>,
    },
    /// The review gate (docs/review.md): a worktree run's branch waits
    /// for the lead's review, or the lead approved it, asked for changes or
    /// rejected it.
    Review {
        /// Task id.
        task_id: String,
        /// `waiting`, `approved`, `changes` or `rejected`.
        action: String,
        /// What the branch changes (`waiting`: "2 files, +10 −3"), or the
        /// lead's comment.
        detail: String,
    },
    /// A runner could not be started.
    RunFailed {
        /// Task id.
        task_id: String,
        /// Agent.
        agent: String,
        /// Why.
        error: String,
    },
    /// `.squad/config.json` changed; `error` set: it is invalid and the
    /// previous configuration stays.
    ConfigReloaded {
        /// The first error, when the new file was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// Two hosts wrote one protocol file from the same version (the
    /// cluster, docs/cluster.md): the other host's version was committed
    /// first and is the file now; this host's is kept aside.
    ReplicaConflict {
        /// The file's name in its session.
        file: String,
        /// Where this host's version is kept, relative to the session.
        kept: String,
        /// The host whose version won.
        winner: String,
        /// The winning revision in the files bucket.
        revision: u64,
    },
    /// A replicated version was not applied (fenced by its epoch).
    ReplicaDropped {
        /// The file's name in its session.
        file: String,
        /// The host it came from.
        origin: String,
        /// Why.
        reason: String,
    },
}

impl EventKind {
    /// The kebab-case name, as in JSON.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            EventKind::Started { .. } => "started",
            EventKind::Stopping { .. } => "stopping",
            EventKind::FileValidated { .. } => "file-validated",
            EventKind::FileInvalid { .. } => "file-invalid",
            EventKind::FileFixed => "file-fixed",
            EventKind::FileRemoved => "file-removed",
            EventKind::SessionAdded => "session-added",
            EventKind::SessionRemoved => "session-removed",
            EventKind::OutputWritten { .. } => "output-written",
            EventKind::OutputFailed { .. } => "output-failed",
            EventKind::TaskReady { .. } => "task-ready",
            EventKind::TaskCompleted { .. } => "task-completed",
            EventKind::TaskOverdue { .. } => "task-overdue",
            EventKind::DependencyViolation { .. } => "dependency-violation",
            EventKind::SessionStatusChanged { .. } => "session-status-changed",
            EventKind::RootMissing => "root-missing",
            EventKind::RootRestored => "root-restored",
            EventKind::RootMoved { .. } => "root-moved",
            EventKind::Rescanned { .. } => "rescanned",
            EventKind::WatchError { .. } => "watch-error",
            EventKind::MessageDelivered { .. } => "message-delivered",
            EventKind::MessageRefused { .. } => "message-refused",
            EventKind::MessageEscalated { .. } => "message-escalated",
            EventKind::ResponseOverdue { .. } => "response-overdue",
            EventKind::NotifyFailed { .. } => "notify-failed",
            EventKind::SessionArchived { .. } => "session-archived",
            EventKind::SessionDeleted { .. } => "session-deleted",
            EventKind::RetentionFailed { .. } => "retention-failed",
            EventKind::SessionEnded { .. } => "session-ended",
            EventKind::PolicyReloaded => "policy-reloaded",
            EventKind::PolicyRefused { .. } => "policy-refused",
            EventKind::LockAcquired { .. } => "lock-acquired",
            EventKind::LockReleased { .. } => "lock-released",
            EventKind::LockReclaimed { .. } => "lock-reclaimed",
            EventKind::LeaderElected { .. } => "leader-elected",
            EventKind::LeaderLost { .. } => "leader-lost",
            EventKind::ControlRestored { .. } => "control-restored",
            EventKind::RootTakenOver { .. } => "root-taken-over",
            EventKind::WatchRestored { .. } => "watch-restored",
            EventKind::AgentSpawned { .. } => "agent-spawned",
            EventKind::AgentExited { .. } => "agent-exited",
            EventKind::AgentTimeout { .. } => "agent-timeout",
            EventKind::AgentOverBudget { .. } => "agent-over-budget",
            EventKind::AgentWaiting { .. } => "agent-waiting",
            EventKind::AgentIdle { .. } => "agent-idle",
            EventKind::PoolEmpty => "pool-empty",
            EventKind::RunAdopted { .. } => "run-adopted",
            EventKind::RunLost { .. } => "run-lost",
            EventKind::RunFailed { .. } => "run-failed",
            EventKind::WorktreeMerge { .. } => "worktree-merge",
            EventKind::BranchOverlap { .. } => "branch-overlap",
            EventKind::Review { .. } => "review",
            EventKind::ConfigReloaded { .. } => "config-reloaded",
            EventKind::ReplicaConflict { .. } => "replica-conflict",
            EventKind::ReplicaDropped { .. } => "replica-dropped",
        }
    }

    /// Whether this is a lock event (the kinds squadctl reports to squadd).
    pub(crate) fn is_lock(&self) -> bool {
        matches!(
            self,
            EventKind::LockAcquired { .. }
                | EventKind::LockReleased { .. }
                | EventKind::LockReclaimed { .. }
        )
    }

    /// Every kind's name, taken from the enum itself (serde lists the
    /// variants it knows when it meets an unknown one), so `events --help`
    /// cannot fall behind the enum. Names decided by content (today
    /// `policy-refused`, a refused `policy-reloaded`) are added.
    pub(crate) fn all_names() -> Vec<String> {
        let err = serde_json::from_str::<EventKind>(r#"{"kind":"?"}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let mut names: Vec<String> = err
            .split_once("expected one of ")
            .map(|(_, list)| list)
            .unwrap_or_default()
            .split(", ")
            .map(|n| n.trim_matches(|c: char| c == '`' || c.is_whitespace()))
            .filter(|n| !n.is_empty())
            .map(|n| n.split_once('`').map_or(n, |(a, _)| a).to_string())
            .collect();
        if names.iter().any(|n| n == "policy-reloaded")
            && !names.iter().any(|n| n == "policy-refused")
        {
            names.push("policy-refused".into());
        }
        names
    }

    /// Whether the event records an action or a finding worth keeping in
    /// the audit log (a valid file being re-read is not).
    pub(crate) fn audited(&self) -> bool {
        !matches!(self, EventKind::FileValidated { .. })
    }

    /// [`Self::detail`] of the events of files, sessions, mail, retention
    /// and locks; `None` for the others (listed in `detail`'s own match,
    /// which stays exhaustive).
    fn file_and_mail_detail(&self) -> Option<String> {
        let detail = match self {
            EventKind::Started { sessions, files } => {
                format!(
                    "{}, {} indexed",
                    crate::text::count(*sessions, "session", "sessions"),
                    crate::text::count(*files, "file", "files")
                )
            }
            EventKind::Stopping { reason } => reason.clone(),
            EventKind::RootMoved { to } => format!(".squad/ is now {to}/"),
            EventKind::FileValidated { warnings } => {
                crate::text::count(*warnings, "warning", "warnings")
            }
            EventKind::FileInvalid { errors, first } => {
                format!(
                    "{}; {first}",
                    crate::text::count(*errors, "error", "errors")
                )
            }
            EventKind::OutputWritten { output } => output.clone(),
            EventKind::OutputFailed { output, error } => format!("{output}: {error}"),
            EventKind::TaskReady { task_id, agent }
            | EventKind::TaskCompleted { task_id, agent }
            | EventKind::TaskOverdue { task_id, agent } => format!("{task_id} ({agent})"),
            EventKind::DependencyViolation { task_id, unmet } => {
                format!("{task_id} waits for {}", unmet.join(", "))
            }
            EventKind::SessionStatusChanged { status } => status.to_string(),
            EventKind::Rescanned { reason } => reason.clone(),
            EventKind::WatchError { error } => error.clone(),
            EventKind::SessionArchived {
                rule,
                age_secs,
                since_source,
                by,
            }
            | EventKind::SessionDeleted {
                rule,
                age_secs,
                since_source,
                by,
            } => match by {
                Some(by) => format!("{rule}: {age_secs} s since {since_source} (by {by})"),
                None => format!("{rule}: {age_secs} s since {since_source}"),
            },
            EventKind::RetentionFailed { error } => error.clone(),
            EventKind::MessageDelivered {
                to,
                message_id,
                priority,
                late,
                routed_from,
            } => format!(
                "{message_id} ({priority}) to {to}{}{}",
                if *late { ", late" } else { "" },
                routed_from
                    .as_ref()
                    .map(|f| format!(", routed from {f}"))
                    .unwrap_or_default()
            ),
            EventKind::MessageRefused {
                message_id,
                from,
                to,
                file,
                kept_by,
            } => format!(
                "{message_id} from {from} to {to} not delivered: {file} reuses the id {kept_by} keeps"
            ),
            EventKind::MessageEscalated {
                to,
                message_id,
                priority,
            } => format!("{message_id} ({priority}) still unread by {to}"),
            EventKind::ResponseOverdue {
                from,
                to,
                message_id,
            } => format!("{to} owes {from} a reply to {message_id}"),
            EventKind::NotifyFailed {
                to,
                message_id,
                error,
            } => format!("{message_id} to {to}: {error}"),
            EventKind::SessionEnded { status, removed } => {
                format!("{status}; {removed} temporary file(s) removed")
            }
            EventKind::PolicyRefused { error } => error.clone(),
            EventKind::LockAcquired {
                targets,
                mode,
                agent,
                task_id,
            } => format!("{} ({mode}) by {agent} for {task_id}", targets.join(", ")),
            EventKind::LockReleased {
                targets,
                agent,
                reason,
            } => format!("{} by {agent}: {reason}", targets.join(", ")),
            EventKind::LockReclaimed {
                targets,
                agent,
                task_id,
                reason,
            } => format!("{} of {agent} ({task_id}): {reason}", targets.join(", ")),
            _ => return None,
        };
        Some(detail)
    }

    /// A one-line human description of the details.
    pub(crate) fn detail(&self) -> String {
        if let Some(detail) = self.file_and_mail_detail() {
            return detail;
        }
        match self {
            EventKind::LeaderElected { epoch } => format!("epoch {epoch}"),
            EventKind::LeaderLost { epoch, reason } => format!("epoch {epoch}: {reason}"),
            EventKind::ControlRestored { reason } => reason.clone(),
            EventKind::RootTakenOver { pid } => {
                format!("another squadd (pid {pid}) holds the recreated root; not supervised here")
            }
            EventKind::WatchRestored { dirs } => {
                format!(
                    "{} watched again",
                    crate::text::count(*dirs, "directory", "directories")
                )
            }
            EventKind::AgentSpawned {
                task_id,
                agent,
                pid,
                attempt,
            } => format!("{task_id} ({agent}) pid {pid}, run {attempt}"),
            EventKind::AgentExited {
                task_id,
                agent,
                code,
                signal,
                completed,
                next,
                usage,
            } => format!(
                "{task_id} ({agent}) {}{}: {next}{}",
                match (code, signal) {
                    (Some(c), _) => format!("exit {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "ended".to_string(),
                },
                if *completed {
                    ", completed"
                } else {
                    ", not completed"
                },
                usage
                    .as_ref()
                    .map_or_else(String::new, |u| format!(" ({})", u.summary()))
            ),
            EventKind::AgentTimeout {
                task_id,
                agent,
                limit_secs,
            } => format!("{task_id} ({agent}) past its {limit_secs} s limit"),
            EventKind::AgentOverBudget {
                task_id,
                agent,
                figures,
            } => format!("{task_id} ({agent}) over budget: {figures}"),
            EventKind::AgentWaiting { agent, detail } => {
                format!("{agent} is waiting for you: {detail}")
            }
            EventKind::AgentIdle {
                task_id,
                agent,
                idle_secs,
            } => format!("{task_id} ({agent}) wrote nothing for {idle_secs} s"),
            EventKind::RunAdopted {
                task_id,
                agent,
                pid,
            }
            | EventKind::RunLost {
                task_id,
                agent,
                pid,
            } => format!("{task_id} ({agent}) pid {pid}"),
            EventKind::RunFailed {
                task_id,
                agent,
                error,
            } => format!("{task_id} ({agent}): {error}"),
            EventKind::WorktreeMerge {
                task_id,
                state,
                detail,
            } if detail.is_empty() => format!("{task_id} {state}"),
            EventKind::WorktreeMerge {
                task_id,
                state,
                detail,
            } => format!("{task_id} {state}: {detail}"),
            EventKind::BranchOverlap {
                task_id,
                other: Some(other),
                files,
            } => format!("{task_id} and {other} both change {}", files.join(", ")),
            EventKind::BranchOverlap {
                task_id,
                other: None,
                files,
            } => format!("{task_id} would conflict on {}", files.join(", ")),
            EventKind::Review {
                task_id,
                action,
                detail,
            } if detail.is_empty() => format!("{task_id} {action}"),
            EventKind::Review {
                task_id,
                action,
                detail,
            } => format!("{task_id} {action}: {detail}"),
            EventKind::ConfigReloaded { error } => error.clone().unwrap_or_default(),
            EventKind::ReplicaConflict {
                file,
                kept,
                winner,
                revision,
            } => {
                format!("{file}: {winner}'s version won (revision {revision}); ours kept as {kept}")
            }
            EventKind::ReplicaDropped {
                file,
                origin,
                reason,
            } => format!("{file} from {origin}: {reason}"),
            EventKind::PoolEmpty
            | EventKind::FileFixed
            | EventKind::FileRemoved
            | EventKind::SessionAdded
            | EventKind::SessionRemoved
            | EventKind::RootMissing
            | EventKind::RootRestored
            | EventKind::PolicyReloaded => String::new(),
            // Described by `file_and_mail_detail`.
            EventKind::Started { .. }
            | EventKind::Stopping { .. }
            | EventKind::RootMoved { .. }
            | EventKind::FileValidated { .. }
            | EventKind::FileInvalid { .. }
            | EventKind::OutputWritten { .. }
            | EventKind::OutputFailed { .. }
            | EventKind::TaskReady { .. }
            | EventKind::TaskCompleted { .. }
            | EventKind::TaskOverdue { .. }
            | EventKind::DependencyViolation { .. }
            | EventKind::SessionStatusChanged { .. }
            | EventKind::Rescanned { .. }
            | EventKind::WatchError { .. }
            | EventKind::SessionArchived { .. }
            | EventKind::SessionDeleted { .. }
            | EventKind::RetentionFailed { .. }
            | EventKind::MessageDelivered { .. }
            | EventKind::MessageRefused { .. }
            | EventKind::MessageEscalated { .. }
            | EventKind::ResponseOverdue { .. }
            | EventKind::NotifyFailed { .. }
            | EventKind::SessionEnded { .. }
            | EventKind::PolicyRefused { .. }
            | EventKind::LockAcquired { .. }
            | EventKind::LockReleased { .. }
            | EventKind::LockReclaimed { .. } => String::new(),
        }
    }
}

/// One event on the bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Event {
    /// Sequence number, increasing from 1 per daemon run.
    pub seq: u64,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The project root.
    pub root: String,
    /// The session directory name, when the event is about a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The file, when the event is about a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// `2024-01-15T10:30:00Z task-ready 2024…-user-search task_010 (frontend)`.
    pub(crate) fn human(&self) -> String {
        let mut out = format!(
            "{} {}",
            self.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            self.kind.name()
        );
        if let Some(s) = &self.session {
            out.push(' ');
            out.push_str(s);
        }
        if let Some(p) = &self.path {
            out.push(' ');
            out.push_str(p);
        }
        let detail = self.kind.detail();
        if !detail.is_empty() {
            out.push_str(": ");
            out.push_str(&detail);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_in_json(kind: EventKind) -> String {
        let event = Event {
            seq: 1,
            at: Utc::now(),
            root: "/p".into(),
            session: None,
            path: None,
            kind,
        };
        let v = serde_json::to_value(&event).unwrap();
        v["kind"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_refused_policy_edit_has_its_own_kind_in_json_and_in_name() {
        let refused = EventKind::PolicyRefused {
            error: "messages.low_max_wait: bad".into(),
        };
        assert_eq!(refused.name(), "policy-refused");
        assert_eq!(kind_in_json(refused.clone()), "policy-refused");
        assert_eq!(kind_in_json(EventKind::PolicyReloaded), "policy-reloaded");
        assert_eq!(EventKind::PolicyReloaded.name(), "policy-reloaded");
        // What is written is read back as the same kind (audit log readers).
        let line = serde_json::to_string(&Event {
            seq: 2,
            at: Utc::now(),
            root: "/p".into(),
            session: None,
            path: None,
            kind: refused.clone(),
        })
        .unwrap();
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back.kind, refused);
    }
}
