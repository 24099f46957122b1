//! Session-wide rules: the files of one session directory checked together.
//!
//! Pure: works on the [`FileReport`]s of the session's files, so the same code
//! serves `squadctl validate`, CI and the daemon's in-memory index.

use crate::diagnostic::Rule;
use crate::ids::is_session_dir_name;
use crate::kind::{FileKind, SESSION_STATUS_FILE};
use crate::locate::{PathSeg, Target};
use crate::validate::{FileReport, Finding, task_ref_field};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A finding about a session: on one of its files (with a field to point at)
/// or on the directory itself (empty field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFinding {
    /// The file, or the session directory.
    pub path: PathBuf,
    /// Whether `path` is the directory (no position to place).
    pub on_directory: bool,
    /// The finding.
    pub finding: Finding,
}

fn keys(path: &[&str]) -> Vec<PathSeg> {
    path.iter()
        .map(|k| PathSeg::Key((*k).to_string()))
        .collect()
}

fn dep_field(list: &str, index: usize) -> Vec<PathSeg> {
    vec![
        PathSeg::Key("dependencies".into()),
        PathSeg::Key(list.into()),
        PathSeg::Index(index),
    ]
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// One declared ordering edge: `before` must complete before `after` starts.
#[derive(Debug, Clone)]
struct Edge<'a> {
    before: &'a str,
    after: &'a str,
    /// The plan file that declared it and where.
    file: &'a Path,
    field: Vec<PathSeg>,
    /// `task_a requires task_b` / `task_a blocks task_b`, as written.
    said: String,
}

/// What session rules need to know about one file of the session: its
/// identity facts (see [`Facts`](crate::validate::Facts)), field by field, so that a member may
/// keep them in whatever form (a daemon's index reads most of them from the
/// parsed entry rather than keep a second copy).
pub trait SessionMember {
    /// The file.
    fn path(&self) -> &Path;
    /// Its kind.
    fn kind(&self) -> FileKind;
    /// [`Facts::task_id`](crate::validate::Facts::task_id).
    fn task_id(&self) -> Option<&str>;
    /// [`Facts::agent`](crate::validate::Facts::agent).
    fn agent(&self) -> Option<&str>;
    /// [`Facts::message_id`](crate::validate::Facts::message_id).
    fn message_id(&self) -> Option<&str>;
    /// [`Facts::requires`](crate::validate::Facts::requires).
    fn requires(&self) -> &[(usize, String)];
    /// [`Facts::blocks`](crate::validate::Facts::blocks).
    fn blocks(&self) -> &[(usize, String)];
}

impl<T: SessionMember> SessionMember for &T {
    fn path(&self) -> &Path {
        (*self).path()
    }
    fn kind(&self) -> FileKind {
        (*self).kind()
    }
    fn task_id(&self) -> Option<&str> {
        (*self).task_id()
    }
    fn agent(&self) -> Option<&str> {
        (*self).agent()
    }
    fn message_id(&self) -> Option<&str> {
        (*self).message_id()
    }
    fn requires(&self) -> &[(usize, String)] {
        (*self).requires()
    }
    fn blocks(&self) -> &[(usize, String)] {
        (*self).blocks()
    }
}

impl SessionMember for FileReport {
    fn path(&self) -> &Path {
        &self.path
    }
    fn kind(&self) -> FileKind {
        self.kind
    }
    fn task_id(&self) -> Option<&str> {
        self.facts.task_id.as_deref()
    }
    fn agent(&self) -> Option<&str> {
        self.facts.agent.as_deref()
    }
    fn message_id(&self) -> Option<&str> {
        self.facts.message_id.as_deref()
    }
    fn requires(&self) -> &[(usize, String)] {
        &self.facts.requires
    }
    fn blocks(&self) -> &[(usize, String)] {
        &self.facts.blocks
    }
}

fn unknown(task: &str, what: &str) -> Finding {
    Finding {
        rule: Rule::UnknownTask,
        field: Vec::new(),
        target: Target::Value,
        message: format!("{what} `{task}`, which has no task assignment in this session"),
        hint: format!("add `role-plan-<agent>-{task}.md`, or fix the task id"),
    }
}

/// The session-rule finding about one file that is not a plan or a status
/// file (it names a task without a plan, or reports progress on another
/// agent's task), given the session's plans by task (the first plan file
/// by path for each task). It depends on nothing else, so a daemon can keep
/// it per file and recompute it only when that file or the plans change.
pub fn member_finding<F: SessionMember>(
    plans: &BTreeMap<&str, &F>,
    f: &F,
) -> Option<SessionFinding> {
    let on_file = |path: &Path, finding: Finding| SessionFinding {
        path: path.to_path_buf(),
        on_directory: false,
        finding,
    };
    let task = f.task_id()?;
    let what = match f.kind() {
        FileKind::ProgressUpdate => "this progress update is about task",
        FileKind::Message => "this message is about task",
        FileKind::ErrorReport => "this error report is about task",
        FileKind::TaskAssignment | FileKind::SessionStatus => return None,
    };
    match plans.get(task) {
        None => Some(on_file(
            f.path(),
            Finding {
                field: keys(task_ref_field(f.kind())),
                ..unknown(task, what)
            },
        )),
        Some(plan) if f.kind() == FileKind::ProgressUpdate => {
            let (writer, assignee) = (f.agent()?, plan.agent()?);
            (writer != assignee).then(|| {
                on_file(
                    f.path(),
                    Finding {
                        rule: Rule::AgentMismatch,
                        field: keys(&["meta", "agent"]),
                        target: Target::Value,
                        message: format!(
                            "`{writer}` reports on `{task}`, which is assigned to `{assignee}`"
                        ),
                        hint: format!(
                            "only `{assignee}` writes progress on `{task}`; other agents send a message"
                        ),
                    },
                )
            })
        }
        Some(_) => None,
    }
}

/// The `duplicate-message-id` findings of a session's files: each message id
/// is used once, because a message is delivered under a name built from its
/// id and a second one would never reach its inbox. Only message files are
/// looked at, so a caller may pass just those.
pub fn duplicate_message_ids<F: SessionMember>(files: &[F]) -> Vec<SessionFinding> {
    let mut out = Vec::new();
    let on_file = |path: &Path, finding: Finding| SessionFinding {
        path: path.to_path_buf(),
        on_directory: false,
        finding,
    };
    let mut messages: BTreeMap<&str, &F> = BTreeMap::new();
    let mut message_files: Vec<&F> = files
        .iter()
        .filter(|f| f.kind() == FileKind::Message)
        .collect();
    message_files.sort_by(|a, b| a.path().cmp(b.path()));
    for f in &message_files {
        let Some(id) = f.message_id() else {
            continue;
        };
        if let Some(first) = messages.get(id) {
            out.push(on_file(
                f.path(),
                Finding {
                    rule: Rule::DuplicateMessageId,
                    field: keys(&["meta", "message_id"]),
                    target: Target::Value,
                    message: format!(
                        "message id `{id}` is already used by `{}`",
                        file_name(first.path())
                    ),
                    hint: "give each message its own message id (and rename the file to match)"
                        .into(),
                },
            ));
        } else {
            messages.insert(id, f);
        }
    }

    out
}

/// Checks the files of one session directory together.
///
/// `dir` is the session directory and `files` its protocol files (top-level
/// `*.md` files whose names classify as a kind): validation reports, or the
/// daemon's index entries.
pub fn check_session<F: SessionMember>(dir: &Path, files: &[F]) -> Vec<SessionFinding> {
    let mut out = status_findings(dir, files);
    let plans = plans_by_task(files, &mut out);
    out.extend(duplicate_message_ids(files));
    // References to tasks that have no plan; progress from another agent.
    for f in files {
        out.extend(member_finding(&plans, f));
    }

    let edges = dependency_edges(&plans, &mut out);
    let contradicted = contradictions(&edges, &mut out);
    cycle_findings(&edges, &plans, &contradicted, &mut out);
    out
}

/// A finding on one file of the session.
fn on_file(path: &Path, finding: Finding) -> SessionFinding {
    SessionFinding {
        path: path.to_path_buf(),
        on_directory: false,
        finding,
    }
}

/// A finding on the session directory itself.
fn on_dir(dir: &Path, finding: Finding) -> SessionFinding {
    SessionFinding {
        path: dir.to_path_buf(),
        on_directory: true,
        finding,
    }
}

/// The directory's name, and its one session status file.
fn status_findings<F: SessionMember>(dir: &Path, files: &[F]) -> Vec<SessionFinding> {
    let mut out = Vec::new();
    let dir_name = file_name(dir);
    if !is_session_dir_name(&dir_name) {
        out.push(on_dir(
            dir,
            Finding {
                rule: Rule::BadSessionName,
                field: Vec::new(),
                target: Target::Value,
                message: format!(
                    "session directory `{dir_name}` is not named YYYYMMDDTHHMMSSZ[-slug]"
                ),
                hint: "create sessions with `squadctl session new [--slug S]`".into(),
            },
        ));
    }

    // Exactly one session status file.
    let mut status_files: Vec<&F> = files
        .iter()
        .filter(|f| f.kind() == FileKind::SessionStatus)
        .collect();
    status_files.sort_by_key(|f| {
        (
            file_name(f.path()) != SESSION_STATUS_FILE,
            f.path().to_path_buf(),
        )
    });
    match status_files.split_first() {
        None => out.push(on_dir(
            dir,
            Finding {
                rule: Rule::MissingSessionStatus,
                field: Vec::new(),
                target: Target::Value,
                message: "the session has no session-status.md".into(),
                hint: "the supervisor writes it; `squadctl session new` creates sessions with one"
                    .into(),
            },
        )),
        Some((first, extra)) => {
            for f in extra {
                out.push(on_file(
                    f.path(),
                    Finding {
                        rule: Rule::DuplicateSessionStatus,
                        field: Vec::new(),
                        target: Target::Value,
                        message: format!(
                            "a second session status file; `{}` is the session's status",
                            file_name(first.path())
                        ),
                        hint: "remove or rename this copy; only session-status.md counts".into(),
                    },
                ));
            }
        }
    }
    out
}

/// The task assignments by task id, each assigned once (a second one is
/// reported).
fn plans_by_task<'f, F: SessionMember>(
    files: &'f [F],
    out: &mut Vec<SessionFinding>,
) -> BTreeMap<&'f str, &'f F> {
    let mut plans: BTreeMap<&str, &F> = BTreeMap::new();
    let mut plan_files: Vec<&F> = files
        .iter()
        .filter(|f| f.kind() == FileKind::TaskAssignment)
        .collect();
    plan_files.sort_by(|a, b| a.path().cmp(b.path()));
    for f in plan_files {
        let Some(task) = f.task_id() else {
            continue;
        };
        if let Some(first) = plans.get(task) {
            out.push(on_file(
                f.path(),
                Finding {
                    rule: Rule::DuplicateTask,
                    field: keys(&["meta", "task_id"]),
                    target: Target::Value,
                    message: format!(
                        "task `{task}` is already assigned in `{}`",
                        file_name(first.path())
                    ),
                    hint: "give each task assignment its own task id".into(),
                },
            ));
        } else {
            plans.insert(task, f);
        }
    }
    plans
}

/// The dependency graph's edges; a dependency on a task with no plan is
/// reported.
fn dependency_edges<'f, F: SessionMember>(
    plans: &BTreeMap<&'f str, &'f F>,
    out: &mut Vec<SessionFinding>,
) -> Vec<Edge<'f>> {
    let unknown = |task: &str, what: &str| Finding {
        rule: Rule::UnknownTask,
        field: Vec::new(),
        target: Target::Value,
        message: format!("{what} `{task}`, which has no task assignment in this session"),
        hint: format!("add `role-plan-<agent>-{task}.md`, or fix the task id"),
    };
    let mut edges: Vec<Edge<'_>> = Vec::new();
    for &f in plans.values() {
        let Some(task) = f.task_id() else {
            continue;
        };
        for (list, entries) in [("requires", f.requires()), ("blocks", f.blocks())] {
            for (index, other) in entries {
                if !plans.contains_key(other.as_str()) {
                    out.push(on_file(
                        f.path(),
                        Finding {
                            field: dep_field(list, *index),
                            ..unknown(other, &format!("`dependencies.{list}` names task"))
                        },
                    ));
                    continue;
                }
                let (before, after) = if list == "requires" {
                    (other.as_str(), task)
                } else {
                    (task, other.as_str())
                };
                edges.push(Edge {
                    before,
                    after,
                    file: f.path(),
                    field: dep_field(list, *index),
                    said: format!("`{task}` {list} `{other}`"),
                });
            }
        }
    }
    edges
}

/// Contradictions: one pair of tasks ordered both ways. Returns the pairs.
fn contradictions<'f>(
    edges: &[Edge<'f>],
    out: &mut Vec<SessionFinding>,
) -> BTreeSet<(&'f str, &'f str)> {
    let mut contradicted: BTreeSet<(&str, &str)> = BTreeSet::new();
    for (i, e) in edges.iter().enumerate() {
        if e.before == e.after {
            continue;
        }
        let pair = if e.before < e.after {
            (e.before, e.after)
        } else {
            (e.after, e.before)
        };
        if contradicted.contains(&pair) {
            continue;
        }
        if let Some(other) = edges[i + 1..]
            .iter()
            .find(|o| o.before == e.after && o.after == e.before)
        {
            contradicted.insert(pair);
            out.push(on_file(
                e.file,
                Finding {
                    rule: Rule::DependencyContradiction,
                    field: e.field.clone(),
                    target: Target::Value,
                    message: format!(
                        "{} here, but {} in `{}`: each would wait for the other",
                        e.said,
                        other.said,
                        file_name(other.file)
                    ),
                    hint: "decide which task goes first and keep only that ordering".into(),
                },
            ));
        }
    }
    contradicted
}

/// Cycles, beyond the contradicted pairs.
fn cycle_findings<F: SessionMember>(
    edges: &[Edge<'_>],
    plans: &BTreeMap<&str, &F>,
    contradicted: &BTreeSet<(&str, &str)>,
    out: &mut Vec<SessionFinding>,
) {
    let mut successors: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges {
        successors.entry(e.before).or_default().insert(e.after);
    }
    for cycle in cycles(&successors) {
        if cycle.len() == 2 {
            let pair = if cycle[0] < cycle[1] {
                (cycle[0], cycle[1])
            } else {
                (cycle[1], cycle[0])
            };
            if contradicted.contains(&pair) {
                continue;
            }
        }
        let start = cycle[0];
        let Some(plan) = plans.get(start) else {
            continue;
        };
        let mut named: Vec<&str> = cycle.clone();
        named.push(start);
        let edge = edges
            .iter()
            .find(|e| (e.before == start || e.after == start) && e.file == plan.path());
        out.push(on_file(
            plan.path(),
            Finding {
                rule: Rule::DependencyCycle,
                field: edge.map_or_else(|| keys(&["dependencies"]), |e| e.field.clone()),
                target: Target::Value,
                message: format!("dependency cycle: {}", named.join(" → ")),
                hint: "every task in a cycle waits for itself; remove one of these orderings"
                    .into(),
            },
        ));
    }
}

/// One shortest cycle per strongly connected component that has one, each
/// starting at its smallest task id, so reports are stable.
fn cycles<'a>(successors: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    let nodes: BTreeSet<&str> = successors
        .iter()
        .flat_map(|(k, vs)| std::iter::once(*k).chain(vs.iter().copied()))
        .collect();
    for &start in &nodes {
        if seen.contains(start) {
            continue;
        }
        if let Some(cycle) = shortest_cycle_through(start, successors) {
            seen.extend(cycle.iter().copied());
            // Other members of the component would only repeat this report.
            seen.extend(reachable_both_ways(start, successors));
            out.push(cycle);
        }
    }
    out
}

/// Breadth-first search for the shortest path from `start` back to `start`.
fn shortest_cycle_through<'a>(
    start: &'a str,
    successors: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> Option<Vec<&'a str>> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for &next in successors.get(node).into_iter().flatten() {
            if next == start {
                let mut path = vec![node];
                let mut at = node;
                while at != start {
                    at = parent.get(at).copied()?;
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            if next != start && !parent.contains_key(next) {
                parent.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

fn reachable<'a>(
    start: &'a str,
    successors: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::from([start]);
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        for &next in successors.get(node).into_iter().flatten() {
            if seen.insert(next) {
                stack.push(next);
            }
        }
    }
    seen
}

fn reachable_both_ways<'a>(
    start: &'a str,
    successors: &BTreeMap<&'a str, BTreeSet<&'a str>>,
) -> BTreeSet<&'a str> {
    let forward = reachable(start, successors);
    forward
        .iter()
        .copied()
        .filter(|&n| reachable(n, successors).contains(start))
        .collect()
}
