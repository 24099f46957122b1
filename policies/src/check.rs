//! `squadctl check` decisions: which task each changed file belongs to, and
//! whether that task (and the project) allow the change. Pure: the caller
//! reads git, the task assignments and the file system, and passes facts in.

use crate::boundary::{Boundaries, Decision, normalize};
use crate::policy::{Policy, Unattributed};
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::tree::{RUN_DIR, SESSIONS_DIR, SQUAD_DIR};
use squad_protocol::{Diagnostic, Rule, Severity};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One changed path, as git reports it for one commit (or for `--changed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Project-relative path (for a rename, one change for each side).
    pub path: String,
    /// git's status letter: A, M, D, R (both sides), C, T.
    pub status: char,
    /// The commit, when known.
    pub commit: Option<String>,
    /// Tasks named by the commit's `Squad-Task` trailers (or `--task`).
    pub trailer_tasks: Vec<String>,
    /// The agent that made the change, when known: the commit's
    /// `Squad-Agent` trailer (the commit-msg hook writes it from
    /// SQUAD_AGENT), or SQUAD_AGENT for `--staged`.
    pub agent: Option<String>,
}

/// A change to a task assignment, as `check` read it from git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanEdit {
    /// The task the plan assigns (after the change, else before).
    pub task_id: String,
    /// What widened (see [`widening`]).
    pub widened: Vec<String>,
}

/// How a task assignment widened from `before` to `after` (`None`: absent):
/// a new or deleted plan, another assignee, globs added to
/// `boundaries.allowed`, globs taken off `boundaries.forbidden`.
pub fn widening(before: Option<&Task>, after: Option<&Task>) -> Vec<String> {
    let list = |v: &[String]| {
        v.iter()
            .map(|g| format!("`{g}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (before, after) {
        (None, None) => Vec::new(),
        (None, Some(a)) => vec![format!(
            "a new task assignment for {} (allowed: {})",
            a.agent,
            list(&a.allowed)
        )],
        (Some(_), None) => vec!["the task assignment deleted".into()],
        (Some(b), Some(a)) => {
            let mut out = Vec::new();
            if b.agent != a.agent {
                out.push(format!("agent {} → {}", b.agent, a.agent));
            }
            // Globs of `from` that `other` lacks.
            let missing = |from: &[String], other: &[String]| -> Vec<String> {
                from.iter()
                    .filter(|g| !other.contains(g))
                    .cloned()
                    .collect()
            };
            let added = missing(&a.allowed, &b.allowed);
            if !added.is_empty() {
                out.push(format!("boundaries.allowed + {}", list(&added)));
            }
            let dropped = missing(&b.forbidden, &a.forbidden);
            if !dropped.is_empty() {
                out.push(format!("boundaries.forbidden − {}", list(&dropped)));
            }
            out
        }
    }
}

/// A task assignment, as far as `check` needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Task id.
    pub task_id: String,
    /// Assignee.
    pub agent: String,
    /// The session directory holding the plan.
    pub session: String,
    /// `boundaries.allowed`.
    pub allowed: Vec<String>,
    /// `boundaries.forbidden`.
    pub forbidden: Vec<String>,
}

/// Everything `check` knows besides the changes.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Every task assignment of the project.
    pub tasks: Vec<Task>,
    /// Normalized path → tasks whose progress update lists it in `artifacts_created`.
    pub artifacts: HashMap<String, Vec<String>>,
    /// Protocol file path → the agent who owns it (writer of the progress
    /// update, error report or message).
    pub owners: HashMap<String, String>,
    /// Changed paths that resolve through a symlink out of the project → target.
    pub escapes: HashMap<String, String>,
    /// The policy's lead agents: with humans, the writers of task assignments.
    pub leads: Vec<String>,
    /// Changed task assignments, by (commit, or "" for staged, path).
    pub plan_edits: HashMap<(String, String), PlanEdit>,
    /// Changed paths that are symlinks leading elsewhere inside the project
    /// → where they lead (root-relative): writing through a link writes
    /// there, so the task must be allowed both places.
    pub links: HashMap<String, String>,
    /// Changed paths that the checkout holds as hard links → the file's
    /// number of names: a write to one name writes every other, which git
    /// cannot show (it commits each name as a copy).
    pub hard_links: HashMap<String, u64>,
}

/// Where a committed symlink leads, read from git's object (the link's
/// bytes), not from a checkout where it may not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkTarget {
    /// Inside the project: the root-relative path it leads to.
    Inside(String),
    /// Out of the project: the target as written.
    Outside(String),
}

/// Where the symlink at the root-relative `link` with the text `target`
/// leads. A relative target is taken from the link's directory, lexically
/// (`..` past the root is out of the project); an absolute one is inside
/// only under one of `roots` (the longest that holds it), the absolute paths naming the project (its
/// main checkout, the worktree the link was committed in), each without a
/// trailing `/`. A target naming the project's root itself, or a path no
/// boundary can name, is out of it.
pub fn link_target(link: &str, target: &str, roots: &[&str]) -> LinkTarget {
    let outside = || LinkTarget::Outside(target.to_string());
    let rest = if target.starts_with('/') {
        // The longest root first: a worktree lies inside the main checkout.
        let under = roots
            .iter()
            .filter_map(|r| {
                let r = r.trim_end_matches('/');
                target.strip_prefix(r).filter(|rest| rest.starts_with('/'))
            })
            .min_by_key(|rest| rest.len());
        match under {
            Some(rest) => rest.to_string(),
            None => return outside(),
        }
    } else {
        let dir = link.rsplit_once('/').map_or("", |(d, _)| d);
        format!("{dir}/{target}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return outside();
                }
            }
            s => parts.push(s),
        }
    }
    match normalize(&parts.join("/")) {
        Ok(p) => LinkTarget::Inside(p),
        Err(_) => outside(),
    }
}

/// What a path under `.squad/` is, for ownership.
enum Owned {
    /// The supervisor's output: session-status.md, summary.md, inbox/, the
    /// audit log, the shared context.
    Supervisor(&'static str),
    /// An agent's protocol file (progress update, error report, message).
    Agent,
    /// A session's `artifacts/` (the attributed agent's, if in its session).
    Artifact {
        /// The session directory name.
        session: String,
    },
    /// Task assignments and lock records: not subject to ownership here.
    Exempt,
    /// Anything else: ordinary boundary rules.
    Ordinary,
}

fn classify(path: &str) -> Owned {
    if path == ".claude/context/shared-context.json" {
        return Owned::Supervisor("shared-context.json");
    }
    if path == format!("{SQUAD_DIR}/audit.jsonl") {
        return Owned::Supervisor("audit.jsonl");
    }
    // squadd's and squadctl's runtime state (pid lock, socket, the guard's
    // plan verdicts, run journals): trusted by the tools that read it, so
    // never an agent's to write, whatever the project policy forbids.
    if path
        .strip_prefix(SQUAD_DIR)
        .and_then(|p| p.strip_prefix('/'))
        .and_then(|p| p.strip_prefix(RUN_DIR))
        .is_some_and(|p| p.is_empty() || p.starts_with('/'))
    {
        return Owned::Supervisor(".squad/run/");
    }
    let prefix = format!("{SQUAD_DIR}/{SESSIONS_DIR}/");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return Owned::Ordinary;
    };
    let mut parts = rest.splitn(3, '/');
    let (Some(session), Some(second)) = (parts.next(), parts.next()) else {
        return Owned::Ordinary;
    };
    let deeper = parts.next();
    match (second, deeper) {
        (SESSION_STATUS_FILE, None) => Owned::Supervisor("session-status.md"),
        ("summary.md", None) => Owned::Supervisor("summary.md"),
        ("inbox", Some(_)) => Owned::Supervisor("inboxes"),
        ("artifacts", Some(_)) => Owned::Artifact {
            session: session.to_string(),
        },
        ("locks", Some(_)) => Owned::Exempt,
        (name, None) => match squad_protocol::FileKind::from_file_name(name) {
            Some(squad_protocol::FileKind::TaskAssignment) => Owned::Exempt,
            Some(_) => Owned::Agent,
            None => Owned::Ordinary,
        },
        _ => Owned::Ordinary,
    }
}

/// What a project-relative path is, for writing it (used by the edit-time
/// guard; `squadctl check` applies the same classification to changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// The supervisor's output (session-status.md, summary.md, inboxes,
    /// audit.jsonl, shared-context.json) or runtime state (`.squad/run/`).
    Supervisor(&'static str),
    /// A lock record: changed through `squadctl lock` only.
    LockRecord,
    /// An agent's protocol file and its owner, when the name tells.
    Agent(Option<String>),
    /// A session's `artifacts/`.
    Artifact {
        /// The session directory name.
        session: String,
    },
    /// A task assignment: not subject to ownership.
    Exempt,
    /// Anything else: ordinary boundary rules.
    Ordinary,
}

/// Classifies a normalized project-relative path (see [`Ownership`]).
pub fn ownership(path: &str) -> Ownership {
    match classify(path) {
        Owned::Supervisor(what) => Ownership::Supervisor(what),
        Owned::Agent => Ownership::Agent(path.rsplit('/').next().and_then(owner_from_name)),
        Owned::Artifact { session } => Ownership::Artifact { session },
        Owned::Exempt if path.split('/').nth(3) == Some("locks") => Ownership::LockRecord,
        Owned::Exempt => Ownership::Exempt,
        Owned::Ordinary => Ownership::Ordinary,
    }
}

/// The owner of a protocol file from its name alone (for deleted files):
/// `role-comm-<agent>-task_…`, `error-<agent>-<stamp>`, and the sender of
/// `role-comm-<from>-to-<to>-msg_…` when the name is unambiguous.
pub fn owner_from_name(file_name: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".md")?;
    if let Some(rest) = stem.strip_prefix("role-comm-") {
        if let Some(i) = rest.find("-msg_") {
            let pair = &rest[..i];
            let mut splits = pair.match_indices("-to-");
            let (at, _) = splits.next()?;
            return splits.next().is_none().then(|| pair[..at].to_string());
        }
        return rest.find("-task_").map(|i| rest[..i].to_string());
    }
    let rest = stem.strip_prefix("error-")?;
    rest.rfind('-').map(|i| rest[..i].to_string())
}

fn short(commit: &Option<String>) -> String {
    commit
        .as_deref()
        .map(|c| format!(" (commit {})", &c[..c.len().min(10)]))
        .unwrap_or_default()
}

/// Checks every change; returns diagnostics (one per problem, deduplicated).
pub fn check_changes(policy: &Policy, facts: &Facts, changes: &[Change]) -> Vec<Diagnostic> {
    let tasks: BTreeMap<&str, &Task> = facts
        .tasks
        .iter()
        .map(|t| (t.task_id.as_str(), t))
        .collect();
    let mut compiled: HashMap<&str, Boundaries> = HashMap::new();
    let project = Boundaries::project_only(&policy.forbidden);
    let mut out: Vec<Diagnostic> = Vec::new();
    let mut seen: BTreeSet<(String, Rule, String)> = BTreeSet::new();
    let mut push = |d: Diagnostic, out: &mut Vec<Diagnostic>| {
        if seen.insert((d.path.display().to_string(), d.rule, d.message.clone())) {
            out.push(d);
        }
    };

    for change in changes {
        let path = match normalize(&change.path) {
            Ok(p) => p,
            Err(refusal) => {
                push(
                    Diagnostic::new(
                        &change.path,
                        Rule::BoundaryViolation,
                        format!("changed path refused: {refusal}"),
                        "changes stay inside the project",
                    ),
                    &mut out,
                );
                continue;
            }
        };
        let at = short(&change.commit);
        // A change without a commit (`--changed`) names its task with
        // `--task`, not with a trailer: say which one was used.
        let from_commit = change.commit.is_some();

        // Tasks the change is attributed to: trailers first, then artifacts.
        let (attributed, via) =
            attribution(change, &path, &tasks, facts, &mut |d| push(d, &mut out));
        if let Some(names) = facts.hard_links.get(&path) {
            push(
                Diagnostic::new(
                    &path,
                    Rule::BoundaryViolation,
                    format!(
                        "`{path}`{at} is a hard link in this checkout ({names} names for one file): writing it writes the file under its other names too, which may lie outside any boundary, and git shows none of it"
                    ),
                    "replace the link with a copy of the file (`cp`, not `ln`)",
                ),
                &mut out,
            );
        }
        if let Some(target) = facts.escapes.get(&path) {
            push(
                Diagnostic::new(
                    &path,
                    Rule::BoundaryViolation,
                    format!(
                        "`{path}`{at} resolves through a symlink to {target}, outside the project"
                    ),
                    "commit the file itself, not a link out of the project",
                ),
                &mut out,
            );
            continue;
        }

        // The project-wide forbidden set binds everyone.
        if let Some(rule) = project.forbidden_by(&path) {
            let who = attributed
                .first()
                .map(|t| format!(" by {} ({})", t.agent, t.task_id))
                .unwrap_or_default();
            push(
                Diagnostic::new(
                    &path,
                    Rule::BoundaryViolation,
                    format!("`{path}` changed{who}{at}: forbidden by {rule}"),
                    "no task may change this path; revert the change or change the policy",
                ),
                &mut out,
            );
            continue;
        }

        let unattributed =
            |out: &mut Vec<Diagnostic>, push: &mut dyn FnMut(Diagnostic, &mut Vec<Diagnostic>)| {
                let severity = match policy.unattributed {
                    Unattributed::Ignore => return,
                    Unattributed::Error => Severity::Error,
                    Unattributed::Warn => Severity::Warning,
                };
                let mut d = Diagnostic::new(
                    &path,
                    Rule::UnattributedChange,
                    format!("`{path}` changed{at} but no task claims it"),
                    if from_commit {
                        "add a `Squad-Task: <task_id>` trailer to the commit, or list the file in the task's artifacts_created"
                    } else {
                        "pass `--task <task_id>`, or list the file in the task's artifacts_created"
                    },
                );
                d.severity = severity;
                push(d, out);
            };

        match classify(&path) {
            Owned::Supervisor(what) => {
                if let Some(task) = attributed.first() {
                    push(
                        Diagnostic::new(
                            &path,
                            Rule::OwnershipViolation,
                            format!(
                                "`{path}` changed by {} ({}){at}: only the supervisor writes {what}",
                                task.agent, task.task_id
                            ),
                            "revert the change; squadd derives this file",
                        ),
                        &mut out,
                    );
                } else {
                    unattributed(&mut out, &mut push);
                }
            }
            Owned::Agent => {
                let owner = facts
                    .owners
                    .get(&path)
                    .cloned()
                    .or_else(|| path.rsplit('/').next().and_then(owner_from_name));
                match (attributed.first(), owner) {
                    (None, _) => unattributed(&mut out, &mut push),
                    (Some(task), Some(owner)) if attributed.iter().all(|t| t.agent != owner) => {
                        push(
                            Diagnostic::new(
                                &path,
                                Rule::OwnershipViolation,
                                format!(
                                    "`{path}` belongs to {owner} but was changed by {} ({}){at}",
                                    task.agent, task.task_id
                                ),
                                "agents write only their own progress updates, error reports and sent messages",
                            ),
                            &mut out,
                        )
                    }
                    _ => {}
                }
            }
            Owned::Artifact { session } => {
                if attributed.is_empty() {
                    unattributed(&mut out, &mut push);
                } else if attributed.iter().all(|t| t.session != session) {
                    let task = attributed[0];
                    push(
                        Diagnostic::new(
                            &path,
                            Rule::OwnershipViolation,
                            format!(
                                "`{path}` is an artifact of session {session}, changed by {} ({}) of session {}{at}",
                                task.agent, task.task_id, task.session
                            ),
                            "write artifacts into your own session's artifacts/",
                        ),
                        &mut out,
                    );
                }
            }
            Owned::Exempt => {
                if let Some(d) = plan_change(change, &path, &attributed, facts, &at) {
                    push(d, &mut out);
                }
            }
            Owned::Ordinary => {
                if attributed.is_empty() {
                    unattributed(&mut out, &mut push);
                    continue;
                }
                if let Some(d) =
                    boundary_refusal(&path, &attributed, via, &at, &mut compiled, policy, facts)
                {
                    push(d, &mut out);
                }
            }
        }
    }
    out
}

/// The tasks a change is attributed to (its trailers or `--task`, else
/// the artifacts_created listing it) and how; a trailer naming another
/// agent's task or no task is reported.
/// A change of an ordinary path that none of its tasks' boundaries allows
/// (a link judged where it leads as well): the first refusal, reported.
fn boundary_refusal<'t>(
    path: &str,
    attributed: &[&'t Task],
    via: &str,
    at: &str,
    compiled: &mut HashMap<&'t str, Boundaries>,
    policy: &Policy,
    facts: &Facts,
) -> Option<Diagnostic> {
    let mut first_refusal: Option<(&Task, Decision)> = None;
    let mut allowed = false;
    for &task in attributed {
        let b = compiled
            .entry(task.task_id.as_str())
            .or_insert_with(|| Boundaries::new(&task.allowed, &task.forbidden, &policy.forbidden));
        let d = b.decide(path, None);
        // A link is judged where it leads as well.
        let d = match facts.links.get(path) {
            Some(target) if d.is_allowed() => b.decide(target, None),
            _ => d,
        };
        if d.is_allowed() {
            allowed = true;
            break;
        }
        first_refusal.get_or_insert((task, d));
    }
    if !allowed && let Some((task, decision)) = first_refusal {
        let shown = match facts.links.get(path) {
            Some(target) => format!("`{path}` (a symlink to `{target}`)"),
            None => format!("`{path}`"),
        };
        return Some(Diagnostic::new(
            path,
            Rule::BoundaryViolation,
            format!(
                "{shown} changed by {} for {} (attributed by {via}){at}: {decision}",
                task.agent, task.task_id
            ),
            format!(
                "keep {}'s changes inside its boundaries, or widen them in its role-plan",
                task.task_id
            ),
        ));
    }
    None
}

fn attribution<'t>(
    change: &Change,
    path: &str,
    tasks: &BTreeMap<&str, &'t Task>,
    facts: &Facts,
    push: &mut dyn FnMut(Diagnostic),
) -> (Vec<&'t Task>, &'static str) {
    let at = short(&change.commit);
    let from_commit = change.commit.is_some();
    // Tasks the change is attributed to: trailers first, then artifacts.
    let mut attributed: Vec<&Task> = Vec::new();
    for t in &change.trailer_tasks {
        match tasks.get(t.as_str()) {
            // An agent claims only its own tasks: a trailer naming
            // another agent's (wider) task attributes nothing.
            Some(task) if change.agent.as_ref().is_some_and(|a| *a != task.agent) => {
                let by = change.agent.as_deref().unwrap_or_default();
                push(Diagnostic::new(
                    path,
                    Rule::ForeignTaskTrailer,
                    if from_commit {
                        format!(
                            "`Squad-Task: {t}`{at} names {}'s task, but the commit was made by {by} (Squad-Agent trailer)",
                            task.agent
                        )
                    } else {
                        format!(
                            "{t} is {}'s task, but SQUAD_AGENT={by} is committing",
                            task.agent
                        )
                    },
                    "attribute commits to the committing agent's own task (SQUAD_TASK is set by the runner)",
                ));
            }
            Some(task) => attributed.push(task),
            None if from_commit => push(Diagnostic::new(
                path,
                Rule::UnknownTrailerTask,
                format!("`Squad-Task: {t}`{at} names a task with no task assignment"),
                "fix the trailer, or commit the task's role-plan file",
            )),
            None => push(Diagnostic::new(
                path,
                Rule::UnknownTrailerTask,
                format!("`--task {t}` names a task with no task assignment"),
                "pass the id of an assigned task (`squadctl status` lists them)",
            )),
        }
    }
    let via = if attributed.is_empty() {
        if let Some(ids) = facts.artifacts.get(path) {
            attributed.extend(ids.iter().filter_map(|id| tasks.get(id.as_str()).copied()));
        }
        "artifacts_created"
    } else if from_commit {
        "Squad-Task trailer"
    } else {
        "--task"
    };
    (attributed, via)
}

/// A task assignment changed by an agent that is not a lead (it may have
/// widened its own boundaries).
fn plan_change(
    change: &Change,
    path: &str,
    attributed: &[&Task],
    facts: &Facts,
    at: &str,
) -> Option<Diagnostic> {
    // Task assignments are the lead's: one changed by an agent
    // that is not a lead may have widened its own boundaries.
    let is_plan = path
        .rsplit('/')
        .next()
        .and_then(squad_protocol::FileKind::from_file_name)
        == Some(squad_protocol::FileKind::TaskAssignment);
    let committer = change
        .agent
        .clone()
        .or_else(|| attributed.first().map(|t| t.agent.clone()));
    if is_plan
        && let Some(who) = committer
        && !facts.leads.contains(&who)
    {
        let edit = facts
            .plan_edits
            .get(&(change.commit.clone().unwrap_or_default(), path.to_string()));
        let task = edit.map_or_else(
            || path.rsplit('/').next().unwrap_or(path).to_string(),
            |e| e.task_id.clone(),
        );
        let what = match edit {
            Some(e) if !e.widened.is_empty() => {
                format!("; widened: {}", e.widened.join("; "))
            }
            _ => String::new(),
        };
        return Some(Diagnostic::new(
            path,
            Rule::PlanChangedByAgent,
            format!(
                "the task assignment of {task} was changed by {who}{at}, who is not a lead{what}"
            ),
            "task assignments are the lead's: revert the change and ask the lead (the policy's runners.lead / notices.lead, or a human) to make it",
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, agent: &str, session: &str, allowed: &[&str], forbidden: &[&str]) -> Task {
        Task {
            task_id: id.into(),
            agent: agent.into(),
            session: session.into(),
            allowed: allowed.iter().map(|s| s.to_string()).collect(),
            forbidden: forbidden.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn change(path: &str, tasks: &[&str]) -> Change {
        Change {
            path: path.into(),
            status: 'M',
            commit: Some("0123456789abcdef".into()),
            trailer_tasks: tasks.iter().map(|s| s.to_string()).collect(),
            agent: None,
        }
    }

    fn facts() -> Facts {
        let mut f = Facts {
            tasks: vec![
                task(
                    "task_1",
                    "backend",
                    "s1",
                    &["backend/**"],
                    &["backend/secrets/**"],
                ),
                task("task_2", "frontend", "s1", &["frontend/**"], &[]),
            ],
            ..Facts::default()
        };
        f.artifacts
            .insert("frontend/app.ts".into(), vec!["task_2".into()]);
        f.owners.insert(
            ".squad/sessions/s1/role-comm-backend-task_1.md".into(),
            "backend".into(),
        );
        f
    }

    fn rules(policy: &Policy, changes: &[Change]) -> Vec<(String, &'static str, Severity)> {
        check_changes(policy, &facts(), changes)
            .into_iter()
            .map(|d| (d.path.display().to_string(), d.rule.id(), d.severity))
            .collect()
    }

    #[test]
    fn link_targets_from_the_commit() {
        use LinkTarget::*;
        let roots = ["/src/shop", "/src/shop/.squad/worktrees/s/t"];
        let cases = [
            ("src/link", "/etc", Outside("/etc".into())),
            (
                "src/link",
                "/src/shopping/x",
                Outside("/src/shopping/x".into()),
            ),
            ("src/link", "/src/shop", Outside("/src/shop".into())),
            ("src/link", "/src/shop/own-0/x", Inside("own-0/x".into())),
            (
                "src/link",
                "/src/shop/.squad/worktrees/s/t/a/../b",
                Inside("b".into()),
            ),
            ("src/link", "../own-0/x", Inside("own-0/x".into())),
            ("src/link", "x", Inside("src/x".into())),
            ("src/link", "../../x", Outside("../../x".into())),
            ("link", "..", Outside("..".into())),
            (
                "src/a/link",
                "./../../.git/hooks",
                Inside(".git/hooks".into()),
            ),
        ];
        for (link, target, want) in cases {
            assert_eq!(
                link_target(link, target, &roots),
                want,
                "{link} -> {target}"
            );
        }
    }

    #[test]
    fn table() {
        let p = Policy::defaults();
        use Severity::*;
        type Expected<'a> = &'a [(&'a str, &'a str, Severity)];
        let cases: &[(Change, Expected<'_>)] = &[
            (change("backend/api.rs", &["task_1"]), &[]),
            (
                change("backend/secrets/key", &["task_1"]),
                &[("backend/secrets/key", "boundary-violation", Error)],
            ),
            (
                change("frontend/x.ts", &["task_1"]),
                &[("frontend/x.ts", "boundary-violation", Error)],
            ),
            (change("frontend/app.ts", &[]), &[]),
            (
                change("README.md", &[]),
                &[("README.md", "unattributed-change", Warning)],
            ),
            (
                change(".env", &["task_1"]),
                &[(".env", "boundary-violation", Error)],
            ),
            (
                change(".env", &[]),
                &[(".env", "boundary-violation", Error)],
            ),
            (
                change("backend/a.rs", &["task_9"]),
                &[
                    ("backend/a.rs", "unknown-trailer-task", Error),
                    ("backend/a.rs", "unattributed-change", Warning),
                ],
            ),
            (
                change(
                    ".squad/sessions/s1/role-comm-backend-task_1.md",
                    &["task_1"],
                ),
                &[],
            ),
            (
                change(
                    ".squad/sessions/s1/role-comm-backend-task_1.md",
                    &["task_2"],
                ),
                &[(
                    ".squad/sessions/s1/role-comm-backend-task_1.md",
                    "ownership-violation",
                    Error,
                )],
            ),
            (
                change(".squad/sessions/s1/session-status.md", &["task_1"]),
                &[(
                    ".squad/sessions/s1/session-status.md",
                    "ownership-violation",
                    Error,
                )],
            ),
            (
                change(".squad/sessions/s1/inbox/backend/new/x.md", &["task_2"]),
                &[(
                    ".squad/sessions/s1/inbox/backend/new/x.md",
                    "ownership-violation",
                    Error,
                )],
            ),
            (
                change(
                    ".squad/sessions/s1/role-plan-backend-task_1.md",
                    &["task_2"],
                ),
                // Issue 24: a plan changed by an agent (no lead named here).
                &[(
                    ".squad/sessions/s1/role-plan-backend-task_1.md",
                    "plan-changed-by-agent",
                    Error,
                )],
            ),
            (
                change(".squad/sessions/s1/artifacts/diagram.png", &["task_1"]),
                &[],
            ),
            (
                change(".squad/sessions/s2/artifacts/diagram.png", &["task_1"]),
                &[(
                    ".squad/sessions/s2/artifacts/diagram.png",
                    "ownership-violation",
                    Error,
                )],
            ),
            (
                change(
                    ".squad/sessions/s1/error-frontend-20240101T000000Z.md",
                    &["task_1"],
                ),
                &[(
                    ".squad/sessions/s1/error-frontend-20240101T000000Z.md",
                    "ownership-violation",
                    Error,
                )],
            ),
        ];
        for (c, want) in cases {
            let got = rules(&p, std::slice::from_ref(c));
            let want: Vec<(String, &str, Severity)> = want
                .iter()
                .map(|(a, b, s)| (a.to_string(), *b, *s))
                .collect();
            assert_eq!(got, want, "{}", c.path);
        }
    }

    #[test]
    fn unattributed_follows_policy() {
        let c = [change("README.md", &[])];
        let error = Policy::parse(Some("check:\n  unattributed: error\n")).unwrap();
        assert_eq!(rules(&error, &c)[0].2, Severity::Error);
        let ignore = Policy::parse(Some("check:\n  unattributed: ignore\n")).unwrap();
        assert!(rules(&ignore, &c).is_empty());
    }

    #[test]
    fn messages_name_task_rule_and_commit() {
        let d = &check_changes(
            &Policy::defaults(),
            &facts(),
            &[change("frontend/x.ts", &["task_1"])],
        )[0];
        assert_eq!(
            d.message,
            "`frontend/x.ts` changed by backend for task_1 (attributed by Squad-Task trailer) (commit 0123456789): not allowed: none of the task's 1 boundaries.allowed globs matches"
        );
    }

    #[test]
    fn changes_without_a_commit_name_task_not_a_trailer() {
        let listed = |path: &str, tasks: &[&str]| Change {
            commit: None,
            ..change(path, tasks)
        };
        let all = check_changes(
            &Policy::parse(Some("check:\n  unattributed: error\n")).unwrap(),
            &facts(),
            &[
                listed("frontend/x.ts", &["task_1"]),
                listed("backend/y.rs", &["task_nope"]),
                listed("README.md", &[]),
            ],
        );
        assert!(!all.is_empty());
        for d in &all {
            let text = format!("{} {}", d.message, d.hint);
            assert!(!text.contains("trailer"), "{text}");
            assert!(!text.contains("commit "), "{text}");
        }
        assert!(
            all[0].message.contains("(attributed by --task)"),
            "{}",
            all[0].message
        );
        assert!(all.iter().any(|d| d.message.contains("`--task task_nope`")));
    }

    #[test]
    fn owners_from_names() {
        assert_eq!(
            owner_from_name("role-comm-backend-dev-task_1.md").as_deref(),
            Some("backend-dev")
        );
        assert_eq!(
            owner_from_name("role-comm-a-b-to-c-msg_1.md").as_deref(),
            Some("a-b")
        );
        assert_eq!(
            owner_from_name("role-comm-go-to-market-to-b-msg_1.md"),
            None
        );
        assert_eq!(
            owner_from_name("error-qa-bot-20240101T000000Z.md").as_deref(),
            Some("qa-bot")
        );
    }

    #[test]
    fn plans_changed_by_agents_and_trailers_naming_others_tasks() {
        let mut f = facts();
        f.leads = vec!["lead".into()];
        let plan = ".squad/sessions/s1/role-plan-backend-task_1.md";
        let before = task(
            "task_1",
            "backend",
            "s1",
            &["backend/**"],
            &["backend/secrets/**"],
        );
        let after = task("task_1", "backend", "s1", &["backend/**", "**"], &[]);
        f.plan_edits.insert(
            ("0123456789abcdef".into(), plan.into()),
            PlanEdit {
                task_id: "task_1".into(),
                widened: widening(Some(&before), Some(&after)),
            },
        );
        let p = Policy::defaults();
        let by = |agent: Option<&str>, tasks: &[&str], path: &str| Change {
            agent: agent.map(str::to_string),
            ..change(path, tasks)
        };
        let d = check_changes(&p, &f, &[by(None, &["task_1"], plan)]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].rule.id(), "plan-changed-by-agent");
        assert!(
            d[0].message.contains("task_1 was changed by backend")
                && d[0].message.contains("boundaries.allowed + `**`")
                && d[0]
                    .message
                    .contains("boundaries.forbidden − `backend/secrets/**`"),
            "{}",
            d[0].message
        );
        // The lead, or a commit nobody claims (a human's), may.
        assert!(check_changes(&p, &f, &[by(Some("lead"), &[], plan)]).is_empty());
        assert!(check_changes(&p, &f, &[by(None, &[], plan)]).is_empty());
        // A trailer naming another agent's task attributes nothing.
        let d = check_changes(&p, &f, &[by(Some("backend"), &["task_2"], "frontend/a.ts")]);
        let ids: Vec<_> = d.iter().map(|d| d.rule.id()).collect();
        assert_eq!(
            ids,
            ["foreign-task-trailer", "unattributed-change"],
            "{d:?}"
        );
        assert!(
            d[0].message
                .contains("names frontend's task, but the commit was made by backend")
        );
        assert_eq!(widening(None, None), Vec::<String>::new());
        assert_eq!(widening(Some(&before), Some(&before)), Vec::<String>::new());
    }
}
