//! The edit-time guard's decision: may this tool call write these paths?
//!
//! Pure: the caller (`squadctl guard`) parses the hook input, resolves every
//! candidate path against the project root (absolute paths inside the root
//! become root-relative; paths outside it, `..` escapes and symlink escapes
//! are marked as such), reads the task, the policy and the live locks, and
//! passes them in. The answer is allow, or deny with a reason the agent can
//! act on: which glob, which holder and until when, and the command to ask.

use crate::boundary::{Boundaries, Decision, Refusal, is_glob, literal_prefix};
use crate::check::{Ownership, Task, ownership};
use crate::locks::{LockRecord, targets_overlap};
use chrono::{DateTime, SecondsFormat, Utc};
use std::fmt::Write as _;

/// Where a candidate path lies, as the caller resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Inside the project: the normalized root-relative path.
    Inside(String),
    /// Outside the project root (absolute, or climbing out with `..`).
    Outside {
        /// The path as resolved.
        resolved: String,
    },
    /// Refused before resolution (empty, NUL, too long, symlink escape).
    Refused(Refusal),
    /// A path the guard must not judge (a special device like `/dev/null`).
    Ignored,
    /// A write whose place cannot be known (a relative path after `cd "$X"`,
    /// a patch naming no file): refused, with the reason.
    Unjudged(String),
}

/// One write the tool call would make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// A path (or a glob, from a shell command).
    Path {
        /// As the tool named it, for messages.
        shown: String,
        /// Where it lies.
        place: Place,
        /// The operation works recursively below it (`rm -r`, `git clean DIR`).
        recursive: bool,
    },
    /// A git operation over the whole working tree.
    WholeTree {
        /// The command, for messages.
        command: String,
    },
}

/// What the guard knows besides the candidates.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    /// The agent making the call (`SQUAD_AGENT`), when known.
    pub agent: Option<&'a str>,
    /// Its task, when known. Without one, only project-wide rules, protocol
    /// file ownership and other agents' locks apply.
    pub task: Option<&'a Task>,
    /// The policy's lead agents (`runners.lead`, `notices.lead`): with a
    /// human (no agent), the only writers of task assignments.
    pub leads: &'a [String],
    /// The policy's project-wide `boundaries.forbidden`.
    pub project_forbidden: &'a [String],
    /// Live (not stale) lock records of the project.
    pub locks: &'a [LockRecord],
    /// Now, for messages about lock expiry.
    pub now: DateTime<Utc>,
}

/// The guard's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let the tool run.
    Allow,
    /// Refuse it, with the reason shown to the agent.
    Deny(String),
}

impl Verdict {
    /// Whether the call may go ahead.
    pub fn is_allow(&self) -> bool {
        matches!(self, Verdict::Allow)
    }
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Locks held by someone else (another agent, or another task of the same
/// agent) whose targets overlap `path`; a recursive write also meets every
/// lock whose target lies below it.
fn held_by_others<'a>(
    facts: &'a Facts<'_>,
    path: &str,
    recursive: bool,
) -> Option<(&'a LockRecord, &'a str)> {
    let below = format!("{path}/");
    facts.locks.iter().find_map(|l| {
        let mine = facts.agent == Some(l.agent.as_str())
            && facts.task.is_none_or(|t| t.task_id == l.task_id);
        if mine {
            return None;
        }
        l.targets
            .iter()
            .find(|t| {
                targets_overlap(t, path)
                    || (recursive && literal_prefix(t).starts_with(&below))
                    || (is_glob(path) && literal_prefix(t).starts_with(literal_prefix(path)))
            })
            .map(|t| (l, t.as_str()))
    })
}

fn lock_reason(
    facts: &Facts<'_>,
    shown: &str,
    path: &str,
    lock: &LockRecord,
    target: &str,
) -> String {
    let mut s = format!(
        "`{shown}` is locked by {} ({}, {} lock on `{target}`, session {}) until {}",
        lock.agent,
        lock.task_id,
        lock.mode,
        lock.session,
        stamp(lock.expires_at),
    );
    let left = u64::try_from((lock.expires_at - facts.now).num_seconds()).unwrap_or(0);
    let _ = write!(s, " ({} min left). ", left.div_ceil(60));
    match (facts.agent, facts.task) {
        (Some(agent), Some(task)) => {
            let _ = write!(
                s,
                "Wait for it with `squadctl lock acquire {path} --agent {agent} --task {} --wait 15m`, or ask the holder: `squadctl send --from {agent} --to {} --priority high --type request --subject 'release {target}' --message '…'`.",
                task.task_id, lock.agent
            );
        }
        _ => {
            let _ = write!(
                s,
                "Wait until it is released (`squadctl lock list`), or ask {} to release it.",
                lock.agent
            );
        }
    }
    s
}

fn boundary_reason(task: &Task, shown: &str, decision: &Decision) -> Option<String> {
    let plan = format!(
        ".squad/sessions/{}/role-plan-{}-{}.md",
        task.session, task.agent, task.task_id
    );
    match decision {
        Decision::Allowed { .. } => None,
        Decision::Forbidden { rule }
            if rule.source == crate::boundary::Source::ProjectForbidden =>
        {
            Some(format!(
                "`{shown}` is forbidden for every task by the project policy ({rule}). No agent may change it; if it must change, ask a human to edit .squad/policies.yaml."
            ))
        }
        Decision::Forbidden { rule } => Some(format!(
            "`{shown}` is forbidden for {} by {rule} in {plan}. Leave it to the task that owns it, or ask the lead to change the boundaries.",
            task.task_id
        )),
        Decision::NotAllowed { .. } => {
            let globs = if task.allowed.is_empty() {
                "none".to_string()
            } else {
                task.allowed
                    .iter()
                    .map(|g| format!("`{g}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            Some(format!(
                "`{shown}` is outside the boundaries of {} ({decision}; allowed: {globs}). Change only files inside them, or ask the lead to add this path to boundaries.allowed in {plan}.",
                task.task_id
            ))
        }
        Decision::Refused { refusal } => Some(format!("`{shown}` is refused: {refusal}.")),
    }
}

/// Decides about one path inside the project.
fn decide_inside(facts: &Facts<'_>, shown: &str, path: &str, recursive: bool) -> Option<String> {
    // Protocol files follow ownership, not boundaries (as in `squadctl check`).
    match ownership(path) {
        Ownership::Supervisor(what) => {
            return Some(format!(
                "`{shown}` is written by the supervisor only ({what}); agents report through their own progress updates, messages and error reports (`squadctl send`, `squadctl inbox`)."
            ));
        }
        Ownership::LockRecord => {
            return Some(format!(
                "`{shown}` is a lock record; take and release locks with `squadctl lock acquire|release`, never by editing files."
            ));
        }
        Ownership::Agent(owner) => {
            return match (facts.agent, owner) {
                (Some(me), Some(owner)) if me != owner => Some(format!(
                    "`{shown}` belongs to {owner}: agents write only their own progress updates, error reports and sent messages. Send {owner} a message instead: `squadctl send --from {me} --to {owner} …`."
                )),
                _ => None,
            };
        }
        Ownership::Artifact { session } => {
            if let Some(task) = facts.task
                && task.session != session
            {
                return Some(format!(
                    "`{shown}` is an artifact of session {session}; write artifacts into your own session's .squad/sessions/{}/artifacts/.",
                    task.session
                ));
            }
            return None;
        }
        Ownership::Exempt => {
            // A task assignment holds the boundaries the guard enforces: an
            // agent that could write one could widen its own.
            return match facts.agent {
                Some(me) if !facts.leads.iter().any(|l| l == me) => Some(format!(
                    "`{shown}` is a task assignment; task assignments are the lead's to write ({}), not {me}'s. Ask the lead to change it: `squadctl send --from {me} --to {} --type request …`.",
                    if facts.leads.is_empty() {
                        "a human's: the policy names no lead agent".to_string()
                    } else {
                        facts.leads.join(", ")
                    },
                    facts.leads.first().map_or("lead", String::as_str)
                )),
                _ => None,
            };
        }
        Ownership::Ordinary => {}
    }
    let boundaries = match facts.task {
        Some(task) => Boundaries::new(&task.allowed, &task.forbidden, facts.project_forbidden),
        None => Boundaries::project_only(facts.project_forbidden),
    };
    let mut decisions = Vec::new();
    if is_glob(path) {
        decisions.push(boundaries.decide_target(path));
    } else {
        decisions.push(boundaries.decide(path, None));
        if recursive {
            decisions.push(boundaries.decide_target(&format!("{path}/**")));
        }
    }
    // A recursive operation is allowed when the directory itself or
    // everything below it is; a forbidden match anywhere refuses it.
    let forbidden = decisions
        .iter()
        .find(|d| matches!(d, Decision::Forbidden { .. }));
    let verdict = match (forbidden, facts.task) {
        (Some(d), Some(task)) => boundary_reason(task, shown, d),
        (Some(d), None) => {
            let fake = Task {
                task_id: String::new(),
                agent: String::new(),
                session: String::new(),
                allowed: Vec::new(),
                forbidden: Vec::new(),
            };
            boundary_reason(&fake, shown, d)
        }
        (None, Some(task)) => {
            if decisions.iter().any(Decision::is_allowed) {
                None
            } else {
                boundary_reason(task, shown, &decisions[0])
            }
        }
        (None, None) => None,
    };
    if verdict.is_some() {
        return verdict;
    }
    held_by_others(facts, path, recursive)
        .map(|(lock, target)| lock_reason(facts, shown, path, lock, target))
}

/// Decides about every candidate write of one tool call: the first refusal
/// wins (one reason is easier to act on than a list).
pub fn decide(facts: &Facts<'_>, candidates: &[Candidate]) -> Verdict {
    for c in candidates {
        let reason = match c {
            Candidate::Path {
                shown,
                place,
                recursive,
            } => match place {
                Place::Ignored => None,
                Place::Outside { resolved } => Some(format!(
                    "`{shown}` resolves to {resolved}, outside the project root; the guard allows writes inside the project only."
                )),
                Place::Refused(refusal) => Some(format!("`{shown}` is refused: {refusal}.")),
                Place::Unjudged(why) => Some(format!(
                    "`{shown}` cannot be judged: {why}. Name the path from the project root, or from a directory the command reaches with a literal `cd DIR`."
                )),
                Place::Inside(path) => decide_inside(facts, shown, path, *recursive),
            },
            Candidate::WholeTree { command } => {
                let others = facts.locks.iter().find(|l| {
                    !(facts.agent == Some(l.agent.as_str())
                        && facts.task.is_none_or(|t| t.task_id == l.task_id))
                });
                others.map(|l| {
                    format!(
                        "`{command}` rewrites the whole working tree while {} ({}) holds a lock on {} until {}; it would destroy their work in progress. Name the paths you mean (`git checkout -- <path>`, `git restore <path>`, `git stash push -- <path>`), or wait until `squadctl lock list` shows no other holder.",
                        l.agent,
                        l.task_id,
                        l.targets.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", "),
                        stamp(l.expires_at)
                    )
                })
            }
        };
        if let Some(reason) = reason {
            return Verdict::Deny(reason);
        }
    }
    Verdict::Allow
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::Mode;
    use chrono::TimeZone;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn task() -> Task {
        Task {
            task_id: "task_1".into(),
            agent: "backend".into(),
            session: "s1".into(),
            allowed: s(&["backend/**", "shared/**"]),
            forbidden: s(&["backend/secrets/**"]),
        }
    }

    fn lock(agent: &str, task: &str, targets: &[&str]) -> LockRecord {
        LockRecord {
            targets: s(targets),
            mode: Mode::Exclusive,
            agent: agent.into(),
            task_id: task.into(),
            session: "s1".into(),
            pid: None,
            pid_started_at: None,
            host: "h".into(),
            acquired_at: Utc.with_ymd_and_hms(2024, 1, 15, 10, 0, 0).unwrap(),
            expires_at: Utc.with_ymd_and_hms(2024, 1, 15, 10, 15, 0).unwrap(),
        }
    }

    fn path(p: &str) -> Candidate {
        Candidate::Path {
            shown: p.into(),
            place: Place::Inside(p.into()),
            recursive: false,
        }
    }

    #[test]
    fn table() {
        let t = task();
        let locks = vec![
            lock("frontend", "task_2", &["shared/api.ts"]),
            lock("backend", "task_1", &["backend/mine.rs"]),
        ];
        let pf = s(&[".env", ".git/**", ".squad/policies.yaml"]);
        let leads = s(&["lead"]);
        let facts = Facts {
            agent: Some("backend"),
            task: Some(&t),
            leads: &leads,
            project_forbidden: &pf,
            locks: &locks,
            now: Utc.with_ymd_and_hms(2024, 1, 15, 10, 5, 0).unwrap(),
        };
        let cases: &[(Candidate, Option<&str>)] = &[
            (path("backend/a.rs"), None),
            (path("backend/mine.rs"), None),
            (
                path("backend/secrets/k.pem"),
                Some("forbidden for task_1 by boundaries.forbidden[0] `backend/secrets/**`"),
            ),
            (
                path(".env"),
                Some("forbidden for every task by the project policy"),
            ),
            (
                path("frontend/x.ts"),
                Some("outside the boundaries of task_1"),
            ),
            (
                path("shared/api.ts"),
                Some(
                    "locked by frontend (task_2, exclusive lock on `shared/api.ts`, session s1) until 2024-01-15T10:15:00Z (10 min left)",
                ),
            ),
            (
                path("shared/api.ts"),
                Some(
                    "squadctl lock acquire shared/api.ts --agent backend --task task_1 --wait 15m",
                ),
            ),
            (
                Candidate::Path {
                    shown: "shared".into(),
                    place: Place::Inside("shared".into()),
                    recursive: true,
                },
                Some("locked by frontend"),
            ),
            (
                path(".squad/sessions/s1/session-status.md"),
                Some("written by the supervisor only"),
            ),
            (path(".squad/sessions/s1/locks/x.json"), Some("lock record")),
            // Not in this policy's forbidden list: squadd's runtime state
            // (the guard's cached plan verdicts among it) is never an agent's.
            (
                path(".squad/run/guard-plans/0.json"),
                Some("written by the supervisor only (.squad/run/)"),
            ),
            (path(".squad/run"), Some("written by the supervisor only")),
            (path(".squad/runbook.md"), Some("outside the boundaries")),
            (
                path(".squad/sessions/s1/role-comm-frontend-task_2.md"),
                Some("belongs to frontend"),
            ),
            (path(".squad/sessions/s1/role-comm-backend-task_1.md"), None),
            (
                path(".squad/sessions/s2/artifacts/a.png"),
                Some("artifact of session s2"),
            ),
            (
                Candidate::Path {
                    shown: "/etc/passwd".into(),
                    place: Place::Outside {
                        resolved: "/etc/passwd".into(),
                    },
                    recursive: false,
                },
                Some("outside the project root"),
            ),
            (
                Candidate::Path {
                    shown: "backend/link".into(),
                    place: Place::Refused(Refusal::SymlinkOutside {
                        target: "/etc".into(),
                    }),
                    recursive: false,
                },
                Some("symlink to /etc"),
            ),
            (
                Candidate::Path {
                    shown: "/dev/null".into(),
                    place: Place::Ignored,
                    recursive: false,
                },
                None,
            ),
            (
                Candidate::WholeTree {
                    command: "git stash".into(),
                },
                Some(
                    "`git stash` rewrites the whole working tree while frontend (task_2) holds a lock on `shared/api.ts`",
                ),
            ),
            (path("backend/*.rs"), None),
            (path("frontend/*.ts"), Some("outside the boundaries")),
            (
                path(".squad/sessions/s1/role-plan-backend-task_1.md"),
                Some("task assignments are the lead's to write (lead), not backend's"),
            ),
            (
                path(".squad/sessions/s1/role-plan-frontend-task_2.md"),
                Some("task assignment"),
            ),
            (
                Candidate::Path {
                    shown: "src".into(),
                    place: Place::Unjudged("after `cd $X`".into()),
                    recursive: false,
                },
                Some("`src` cannot be judged: after `cd $X`"),
            ),
        ];
        for (c, want) in cases {
            match (decide(&facts, std::slice::from_ref(c)), want) {
                (Verdict::Allow, None) => {}
                (Verdict::Deny(r), Some(w)) => assert!(r.contains(w), "{c:?}: {r}"),
                (got, want) => panic!("{c:?}: got {got:?}, want {want:?}"),
            }
        }
        // Without other holders, whole-tree operations go ahead.
        let mine = vec![lock("backend", "task_1", &["backend/**"])];
        let facts = Facts {
            locks: &mine,
            ..facts
        };
        assert!(
            decide(
                &facts,
                &[Candidate::WholeTree {
                    command: "git stash".into()
                }]
            )
            .is_allow()
        );
    }

    #[test]
    fn without_a_task_only_project_rules_and_locks_apply() {
        let pf = s(&[".env"]);
        let locks = vec![lock("frontend", "task_2", &["web/**"])];
        let facts = Facts {
            agent: None,
            task: None,
            leads: &[],
            project_forbidden: &pf,
            locks: &locks,
            now: Utc.with_ymd_and_hms(2024, 1, 15, 10, 5, 0).unwrap(),
        };
        assert!(decide(&facts, &[path("anything/x.rs")]).is_allow());
        assert!(!decide(&facts, &[path(".env")]).is_allow());
        let Verdict::Deny(r) = decide(&facts, &[path("web/a.ts")]) else {
            panic!()
        };
        assert!(r.contains("ask frontend to release it"), "{r}");
        // A human, and the lead, write task assignments.
        let plan = path(".squad/sessions/s1/role-plan-frontend-task_2.md");
        assert!(decide(&facts, std::slice::from_ref(&plan)).is_allow());
        let leads = s(&["lead"]);
        let lead = Facts {
            agent: Some("lead"),
            leads: &leads,
            ..facts
        };
        assert!(decide(&lead, &[plan]).is_allow());
    }
}
