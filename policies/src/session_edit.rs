//! Explicit changes to a session's supervisor-owned fields (`squadctl session
//! complete|fail|phase|gate`): which fields an edit sets, given what the
//! status file says now. One decision, used by squadd (applying the edit over
//! its socket) and by squadctl (applying it under the per-session lock when
//! squadd is not running).

use serde::{Deserialize, Serialize};
use squad_protocol::model::{Gate, Phase, SessionState, SessionStatus};

/// An explicit change to a session's status file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "edit", rename_all = "kebab-case")]
pub enum SessionEdit {
    /// Mark the session completed.
    Complete {
        /// Complete a session that was marked failed.
        #[serde(default)]
        force: bool,
    },
    /// Mark the session failed.
    Fail {
        /// Why (recorded as `failure_reason`).
        reason: String,
    },
    /// Set the phase.
    Phase {
        /// The new phase.
        phase: Phase,
    },
    /// Set one validation gate.
    Gate {
        /// Which gate.
        gate: Phase,
        /// Its new state.
        status: Gate,
    },
}

/// One field the edit sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldSet {
    /// A top-level field.
    Top(&'static str, String),
    /// A field of `validation_gates`.
    Gate(&'static str, String),
}

/// Why an edit is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `complete` of a failed session without `force`.
    #[error("the session was marked failed{}; pass --force to complete it anyway", .reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Failed {
        /// The recorded `failure_reason`.
        reason: Option<String>,
    },
}

impl SessionEdit {
    /// What the edit did, for people: `completed`, `phase design`, ….
    pub fn said(&self) -> String {
        match self {
            SessionEdit::Complete { .. } => "completed".into(),
            SessionEdit::Fail { .. } => "failed".into(),
            SessionEdit::Phase { phase } => format!("phase {phase}"),
            SessionEdit::Gate { gate, status } => format!("gate {gate} {status}"),
        }
    }
}

/// The fields `edit` sets on a status file that says `current` (None: it is
/// not valid), at `now` (RFC 3339). Completing again keeps the first
/// `completed_at`, failing again for the same reason the first
/// `failed_at`; completing a failed session needs `force`.
pub fn plan(
    current: Option<&SessionStatus>,
    edit: &SessionEdit,
    now: &str,
) -> Result<Vec<FieldSet>, Refusal> {
    Ok(match edit {
        SessionEdit::Complete { force } => {
            if !force && current.is_some_and(|s| s.status == SessionState::Failed) {
                return Err(Refusal::Failed {
                    reason: current.and_then(|s| s.failure_reason.clone()),
                });
            }
            let mut fields = vec![FieldSet::Top("status", "completed".into())];
            if current.is_none_or(|s| s.completed_at.is_none()) {
                fields.push(FieldSet::Top("completed_at", now.into()));
            }
            fields
        }
        SessionEdit::Fail { reason } => {
            // Failing again for the same reason keeps the first time, as
            // completing again does: a retried edit (a follower's forward
            // that reached a new leader) leaves the file as it was.
            let again = current.is_some_and(|s| {
                s.status == SessionState::Failed
                    && s.failed_at.is_some()
                    && s.failure_reason.as_deref() == Some(reason.as_str())
            });
            let mut fields = vec![FieldSet::Top("status", "failed".into())];
            if !again {
                fields.push(FieldSet::Top("failed_at", now.into()));
            }
            fields.push(FieldSet::Top("failure_reason", reason.clone()));
            fields
        }
        SessionEdit::Phase { phase } => vec![FieldSet::Top("phase", phase.as_str().into())],
        SessionEdit::Gate { gate, status } => {
            vec![FieldSet::Gate(gate.as_str(), status.as_str().into())]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: SessionState, completed_at: bool) -> SessionStatus {
        let t = chrono::DateTime::parse_from_rfc3339("2024-01-15T10:00:00Z").unwrap();
        SessionStatus {
            session_id: "sess_x".into(),
            started_at: t,
            status: state,
            phase: None,
            agents_active: None,
            tasks_total: None,
            tasks_completed: None,
            validation_gates: None,
            completed_at: completed_at.then_some(t),
            failed_at: None,
            failure_reason: (state == SessionState::Failed).then(|| "index down".into()),
            archived_at: None,
        }
    }

    #[test]
    fn complete_after_fail_needs_force_and_completing_again_keeps_the_time() {
        let failed = status(SessionState::Failed, false);
        let e = plan(
            Some(&failed),
            &SessionEdit::Complete { force: false },
            "now",
        )
        .unwrap_err();
        assert!(e.to_string().contains("index down"), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
        let forced = plan(Some(&failed), &SessionEdit::Complete { force: true }, "now").unwrap();
        assert!(forced.contains(&FieldSet::Top("completed_at", "now".into())));
        let done = status(SessionState::Completed, true);
        let again = plan(Some(&done), &SessionEdit::Complete { force: false }, "now").unwrap();
        assert_eq!(again, vec![FieldSet::Top("status", "completed".into())]);
    }

    #[test]
    fn failing_again_for_the_same_reason_keeps_the_first_time() {
        let mut failed = status(SessionState::Failed, false);
        failed.failed_at = Some(failed.started_at);
        let same = SessionEdit::Fail {
            reason: "index down".into(),
        };
        let again = plan(Some(&failed), &same, "now").unwrap();
        assert!(
            !again
                .iter()
                .any(|f| matches!(f, FieldSet::Top("failed_at", _))),
            "{again:?}"
        );
        let other = SessionEdit::Fail {
            reason: "disk full".into(),
        };
        let moved = plan(Some(&failed), &other, "now").unwrap();
        assert!(moved.contains(&FieldSet::Top("failed_at", "now".into())));
        let active = status(SessionState::Active, false);
        let first = plan(Some(&active), &same, "now").unwrap();
        assert!(first.contains(&FieldSet::Top("failed_at", "now".into())));
    }

    #[test]
    fn edits_round_trip_as_json_lines_fields() {
        let e = SessionEdit::Gate {
            gate: Phase::Design,
            status: Gate::Passed,
        };
        assert_eq!(e.said(), "gate design passed");
        let v = serde_yaml::to_string(&e).unwrap();
        assert_eq!(serde_yaml::from_str::<SessionEdit>(&v).unwrap(), e);
    }
}
