//! Notices: the messages squadd sends agents about what concerns them (a task
//! became ready, went overdue, a file they wrote is invalid, a dependency
//! violation). Which notice goes to whom, at what priority, and under which
//! stable key, as a pure function of (policy, fact). squadd writes each
//! notice as a message file from `squadd` whose id derives from the key, so
//! the file is the record: one notice per fact, across restarts.

use serde::Deserialize;
use squad_protocol::IdKind;
use squad_protocol::model::Priority;

/// The sender of every notice.
pub const SENDER: &str = "squadd";

/// `notices:` of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticePolicy {
    /// Tell an agent its task became ready (medium).
    pub task_ready: bool,
    /// Tell an agent (and the lead) its task went overdue (high).
    pub task_overdue: bool,
    /// Tell an agent a file it wrote is invalid (high).
    pub file_invalid: bool,
    /// Tell an agent its task started before its prerequisites completed (high).
    pub dependency_violation: bool,
    /// The agent that leads the sessions: also told of overdue tasks.
    pub lead: Option<String>,
}

impl Default for NoticePolicy {
    fn default() -> Self {
        NoticePolicy {
            task_ready: true,
            task_overdue: true,
            file_invalid: true,
            dependency_violation: true,
            lead: None,
        }
    }
}

/// `notices:` as written in the policy file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotices {
    task_ready: bool,
    task_overdue: bool,
    file_invalid: bool,
    dependency_violation: bool,
    lead: String,
}

impl RawNotices {
    /// The checked policy; the error names the bad field.
    pub(crate) fn check(self) -> Result<NoticePolicy, (String, String)> {
        let lead = match self.lead.trim() {
            "none" | "" => None,
            l if IdKind::Agent.matches(l) => Some(l.to_string()),
            l => {
                return Err((
                    "notices.lead".into(),
                    format!(
                        "`{l}` is not an agent name (lowercase letters, digits and single dashes) nor `none`"
                    ),
                ));
            }
        };
        Ok(NoticePolicy {
            task_ready: self.task_ready,
            task_overdue: self.task_overdue,
            file_invalid: self.file_invalid,
            dependency_violation: self.dependency_violation,
            lead,
        })
    }
}

/// What happened, as squadd's derivation sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact<'a> {
    /// A task is ready to start.
    TaskReady {
        /// Task id.
        task: &'a str,
        /// Assignee.
        agent: &'a str,
    },
    /// A task passed its deadline.
    TaskOverdue {
        /// Task id.
        task: &'a str,
        /// Assignee.
        agent: &'a str,
    },
    /// A task started or finished while prerequisites are unmet.
    DependencyViolation {
        /// Task id.
        task: &'a str,
        /// Assignee.
        agent: &'a str,
        /// The unmet prerequisites.
        unmet: &'a [String],
    },
    /// A protocol file has errors.
    FileInvalid {
        /// Its file name in the session.
        file: &'a str,
        /// Who wrote it (see [`writer_of`]).
        agent: &'a str,
        /// Its content's fingerprint: a new invalid version is a new fact.
        fingerprint: u64,
    },
}

/// The kinds of notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// [`Fact::TaskReady`].
    TaskReady,
    /// [`Fact::TaskOverdue`].
    TaskOverdue,
    /// [`Fact::FileInvalid`].
    FileInvalid,
    /// [`Fact::DependencyViolation`].
    DependencyViolation,
}

impl NoticeKind {
    /// A short name, used in message ids (`msg_squadd_<name>_…`).
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::TaskReady => "ready",
            NoticeKind::TaskOverdue => "overdue",
            NoticeKind::FileInvalid => "invalid",
            NoticeKind::DependencyViolation => "violation",
        }
    }
}

/// One notice to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// What it is about.
    pub kind: NoticeKind,
    /// The recipient.
    pub to: String,
    /// Its priority.
    pub priority: Priority,
    /// Identifies the fact and the recipient: the same key is never sent twice.
    pub key: String,
}

/// The notices a fact calls for under `policy` (none for a kind turned off;
/// never to squadd itself).
pub fn notices(policy: &NoticePolicy, fact: &Fact<'_>) -> Vec<Notice> {
    let (kind, on, priority, mut to, key) = match fact {
        Fact::TaskReady { task, agent } => (
            NoticeKind::TaskReady,
            policy.task_ready,
            Priority::Medium,
            vec![*agent],
            format!("ready|{task}|{agent}"),
        ),
        Fact::TaskOverdue { task, agent } => {
            let mut to = vec![*agent];
            to.extend(policy.lead.as_deref().filter(|l| l != agent));
            (
                NoticeKind::TaskOverdue,
                policy.task_overdue,
                Priority::High,
                to,
                format!("overdue|{task}|{agent}"),
            )
        }
        Fact::DependencyViolation { task, agent, unmet } => (
            NoticeKind::DependencyViolation,
            policy.dependency_violation,
            Priority::High,
            vec![*agent],
            format!("violation|{task}|{agent}|{}", unmet.join(",")),
        ),
        Fact::FileInvalid {
            file,
            agent,
            fingerprint,
        } => (
            NoticeKind::FileInvalid,
            policy.file_invalid,
            Priority::High,
            vec![*agent],
            format!("invalid|{file}|{fingerprint:016x}"),
        ),
    };
    if !on {
        return Vec::new();
    }
    to.retain(|a| *a != SENDER && IdKind::Agent.matches(a));
    to.into_iter()
        .map(|a| Notice {
            kind,
            to: a.to_string(),
            priority,
            key: format!("{key}|{a}"),
        })
        .collect()
}

/// The agent a protocol file's name says wrote it: the author of a progress
/// update, message or error report; for a task assignment, its assignee
/// (the one who has to live with it). `None` for other names.
pub fn writer_of(file_name: &str) -> Option<&str> {
    let stem = file_name.strip_suffix(".md")?;
    let agent = if let Some(rest) = stem.strip_prefix("role-comm-") {
        match (rest.find("-to-"), rest.find("-task_")) {
            (Some(to), _) if rest.contains("-msg_") => &rest[..to],
            (_, Some(t)) => &rest[..t],
            _ => return None,
        }
    } else if let Some(rest) = stem.strip_prefix("role-plan-") {
        &rest[..rest.find("-task_")?]
    } else if let Some(rest) = stem.strip_prefix("error-") {
        &rest[..rest.rfind('-')?]
    } else {
        return None;
    };
    IdKind::Agent.matches(agent).then_some(agent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_goes_to_the_agent_concerned_at_its_priority() {
        let p = NoticePolicy {
            lead: Some("lead".into()),
            ..NoticePolicy::default()
        };
        let ready = notices(
            &p,
            &Fact::TaskReady {
                task: "task_1",
                agent: "bob",
            },
        );
        assert_eq!(ready.len(), 1);
        assert_eq!(
            (ready[0].to.as_str(), ready[0].priority),
            ("bob", Priority::Medium)
        );
        let overdue = notices(
            &p,
            &Fact::TaskOverdue {
                task: "task_1",
                agent: "bob",
            },
        );
        let to: Vec<&str> = overdue.iter().map(|n| n.to.as_str()).collect();
        assert_eq!(to, ["bob", "lead"]);
        assert!(overdue.iter().all(|n| n.priority == Priority::High));
        assert_ne!(overdue[0].key, overdue[1].key);
        // The lead's own overdue task: told once.
        let own = notices(
            &p,
            &Fact::TaskOverdue {
                task: "task_1",
                agent: "lead",
            },
        );
        assert_eq!(own.len(), 1);
        let unmet = ["task_0".to_string()];
        let v = notices(
            &p,
            &Fact::DependencyViolation {
                task: "task_1",
                agent: "bob",
                unmet: &unmet,
            },
        );
        assert_eq!(v[0].priority, Priority::High);
        assert!(v[0].key.contains("task_0"));
        let invalid = |fingerprint| Fact::FileInvalid {
            file: "role-comm-bob-task_1.md",
            agent: "bob",
            fingerprint,
        };
        assert_ne!(
            notices(&p, &invalid(1))[0].key,
            notices(&p, &invalid(2))[0].key
        );
        // Never to squadd itself.
        let mine = Fact::FileInvalid {
            file: "role-comm-squadd-to-bob-msg_x.md",
            agent: SENDER,
            fingerprint: 1,
        };
        assert!(notices(&p, &mine).is_empty());
    }

    #[test]
    fn kinds_turn_off_one_by_one() {
        let p = NoticePolicy {
            task_ready: false,
            ..NoticePolicy::default()
        };
        let fact = Fact::TaskReady {
            task: "task_1",
            agent: "bob",
        };
        assert!(notices(&p, &fact).is_empty());
        let fact = Fact::TaskOverdue {
            task: "task_1",
            agent: "bob",
        };
        assert_eq!(notices(&p, &fact).len(), 1);
    }

    #[test]
    fn the_writer_comes_from_the_canonical_name() {
        assert_eq!(
            writer_of("role-comm-backend-dev-task_1.md"),
            Some("backend-dev")
        );
        assert_eq!(
            writer_of("role-comm-api-lead-to-backend-dev-msg_1.md"),
            Some("api-lead")
        );
        assert_eq!(writer_of("role-plan-bob-task_7.md"), Some("bob"));
        assert_eq!(
            writer_of("error-qa-bot-20240115T100000Z.md"),
            Some("qa-bot")
        );
        assert_eq!(writer_of("session-status.md"), None);
        assert_eq!(writer_of("role-comm-Bad Name-task_1.md"), None);
    }
}
