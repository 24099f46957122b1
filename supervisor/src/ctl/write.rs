//! Writers for the protocol files agents produce: `squadctl task new`,
//! `squadctl progress` and `squadctl report-error`.
//!
//! Each builds the document, names it canonically, stamps its times, and
//! checks it with the session it joins (file rules and session rules: unknown
//! tasks, cycles, duplicate ids) before one atomic write. A refused write
//! changes nothing on disk and prints the diagnostics.

use super::target::{self, Defines};
use crate::index::{SessionIndex, index_bytes};
use crate::safefs::write_atomic;
use chrono::{SubsecRound, Utc};
use clap::Subcommand;
use serde_json::json;
use squad_protocol::model::{
    Artifact, Blocker, Boundaries, Decision, Dependencies, Document, ErrorDetail, ErrorReport,
    ErrorSeverity, Priority, ProgressMeta, ProgressUpdate, TaskAssignment, TaskMeta, TaskStatus,
    ValidationResult, ValidationStatus,
};
use squad_protocol::{Diagnostic, FileKind, IdKind, check_bytes};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};

/// `squadctl task …`.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Assign a task: write a valid, canonically named task assignment.
    ///
    /// Refuses a task id already used in the session, `--requires`/`--blocks`
    /// naming tasks the session does not plan, and dependency cycles; a
    /// refused task writes nothing. `--file -` reads a whole task assignment
    /// (YAML) from stdin instead of the flags. Task assignments are the
    /// lead's: refused when SQUAD_AGENT names an agent the policy does not
    /// name as a lead (runners.lead, notices.lead).
    New(Box<TaskNewArgs>),
    /// The tasks of a session with their derived state.
    List(super::read::TaskListArgs),
    /// One task: plan, latest progress, readiness, what it waits for and
    /// what waits for it, locks, overdue.
    Show(super::read::TaskShowArgs),
}

/// Arguments of `task new`.
#[derive(Debug, clap::Args)]
pub struct TaskNewArgs {
    /// The session (default: the one active session).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// The assignee.
    #[arg(long, required_unless_present = "file", value_name = "A")]
    pub agent: Option<String>,
    /// The task id (default: the next free `task_NNN`).
    #[arg(long, value_name = "task_…")]
    pub id: Option<String>,
    /// What to do.
    #[arg(long, value_name = "TEXT", conflicts_with = "instruction_file")]
    pub instruction: Option<String>,
    /// Read the instruction from a file (`-` for stdin).
    #[arg(long, value_name = "F")]
    pub instruction_file: Option<PathBuf>,
    /// Tasks that must complete first.
    #[arg(long, num_args = 1.., value_name = "T")]
    pub requires: Vec<String>,
    /// Tasks that wait for this one.
    #[arg(long, num_args = 1.., value_name = "T")]
    pub blocks: Vec<String>,
    /// Globs the task may change.
    #[arg(long, value_name = "GLOB")]
    pub allow: Vec<String>,
    /// Globs the task must not change.
    #[arg(long, value_name = "GLOB")]
    pub forbid: Vec<String>,
    /// Priority: critical, high, medium or low.
    #[arg(long, default_value = "medium", value_parser = parse_priority)]
    pub priority: Priority,
    /// Overdue this long after the first `in_progress` report (e.g. `30m`).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// In worktree mode, the task's branch waits for the lead's review
    /// (`squadctl review`) when it completes (`meta.merge: review`).
    #[arg(long)]
    pub review: bool,
    /// A named output path, KEY=PATH.
    #[arg(long, value_name = "KEY=PATH")]
    pub output: Vec<String>,
    /// A success criterion.
    #[arg(long, value_name = "TEXT")]
    pub criterion: Vec<String>,
    /// A whole task assignment document (YAML) from a file (`-` for stdin).
    #[arg(long, value_name = "F", conflicts_with_all = ["agent", "id", "instruction", "instruction_file"])]
    pub file: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Report progress on a task.
///
/// Writes the agent's progress update for the task
/// (`role-comm-<agent>-<task>.md`), keeping what the previous update said
/// unless told otherwise: `--done` and `--artifact` add to the lists,
/// `--todo` replaces the remaining steps, `--check` sets one check.
#[derive(Debug, clap::Args)]
pub struct ProgressArgs {
    /// The task.
    #[arg(long, env = "SQUAD_TASK", value_name = "T")]
    pub task: String,
    /// The reporting agent (default: the task's assignee).
    #[arg(long, env = "SQUAD_AGENT", value_name = "A")]
    pub agent: Option<String>,
    /// The session (default: the one active session that plans the task).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// pending, in_progress, completed or blocked (default: as before).
    #[arg(long, value_parser = parse_status)]
    pub status: Option<TaskStatus>,
    /// 0 to 100 (default: as before; 100 on completion).
    #[arg(long, value_name = "N")]
    pub percent: Option<u8>,
    /// What you are doing now.
    #[arg(long, value_name = "TEXT")]
    pub action: Option<String>,
    /// A step done (added).
    #[arg(long, value_name = "TEXT")]
    pub done: Vec<String>,
    /// A step left (replaces the remaining steps).
    #[arg(long, value_name = "TEXT")]
    pub todo: Vec<String>,
    /// A file created or changed (added).
    #[arg(long, value_name = "PATH")]
    pub artifact: Vec<String>,
    /// What blocks you (use with `--status blocked`).
    #[arg(long, value_name = "TEXT")]
    pub blocker: Option<String>,
    /// Who can unblock you.
    #[arg(long, value_name = "AGENT", requires = "blocker")]
    pub needs: Option<String>,
    /// A decision, TYPE:TEXT (added).
    #[arg(long, value_name = "TYPE:TEXT")]
    pub decision: Vec<String>,
    /// A check result, NAME=passing|failing|not_run.
    #[arg(long, value_name = "NAME=STATUS")]
    pub check: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Report an error you hit.
///
/// Writes an error report (`error-<agent>-<stamp>.md`) into the session.
#[derive(Debug, clap::Args)]
pub struct ReportErrorArgs {
    /// The task that failed.
    #[arg(long, env = "SQUAD_TASK", value_name = "T")]
    pub task: Option<String>,
    /// The reporting agent.
    #[arg(long, env = "SQUAD_AGENT", value_name = "A")]
    pub agent: String,
    /// The session (default: the one active session that plans the task).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// critical, error or warning.
    #[arg(long, value_parser = parse_severity)]
    pub severity: ErrorSeverity,
    /// Error class (e.g. `build`, `test`, `dependency`).
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: String,
    /// The error.
    #[arg(long, value_name = "TEXT")]
    pub message: String,
    /// Project-relative path where it happened.
    #[arg(long, value_name = "F")]
    pub file: Option<String>,
    /// 1-based line.
    #[arg(long, value_name = "N", requires = "file")]
    pub line: Option<u64>,
    /// 1-based column.
    #[arg(long, value_name = "N", requires = "line")]
    pub column: Option<u64>,
    /// What you tried.
    #[arg(long, value_name = "TEXT")]
    pub tried: Vec<String>,
    /// Who should step in (sets `requires_intervention`).
    #[arg(long, value_name = "AGENT")]
    pub needs: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_priority(s: &str) -> Result<Priority, String> {
    Priority::parse(s).ok_or_else(|| format!("`{s}`: use critical, high, medium or low"))
}

fn parse_status(s: &str) -> Result<TaskStatus, String> {
    TaskStatus::parse(s)
        .ok_or_else(|| format!("`{s}`: use pending, in_progress, completed or blocked"))
}

fn parse_severity(s: &str) -> Result<ErrorSeverity, String> {
    ErrorSeverity::parse(s).ok_or_else(|| format!("`{s}`: use critical, error or warning"))
}

/// Why a write was refused.
enum Refused {
    /// A plain reason.
    Reason(String),
    /// The document's diagnostics.
    Diagnostics(Vec<Diagnostic>),
}

impl From<String> for Refused {
    fn from(s: String) -> Self {
        Refused::Reason(s)
    }
}

/// Says why a write was refused: on stderr, and with `--json` also as
/// `{"refused": true, "error": …, "diagnostics": […]}` on stdout.
fn refuse(r: Refused, json: bool) -> u8 {
    if json {
        let (error, diagnostics) = match &r {
            Refused::Reason(s) => (s.clone(), Vec::new()),
            Refused::Diagnostics(ds) => ("the file would not be valid".to_string(), ds.clone()),
        };
        super::print(&format!(
            "{:#}\n",
            json!({"refused": true, "error": error, "diagnostics": diagnostics})
        ));
    }
    match r {
        Refused::Reason(s) => super::fail(s),
        Refused::Diagnostics(ds) => {
            let mut out = String::new();
            for d in &ds {
                out.push_str(&format!("{d}\n  hint: {}\n", d.hint));
            }
            super::eprint_text(&crate::text::escape_lines(&out));
            super::fail(format!(
                "refused: the file would not be valid ({} error{}); nothing was written",
                ds.len(),
                if ds.len() == 1 { "" } else { "s" }
            ));
            crate::exit::PROBLEMS
        }
    }
}

fn diagnostic_key(d: &Diagnostic) -> (PathBuf, &'static str, String) {
    (d.path.clone(), d.rule.id(), d.message.clone())
}

/// Checks `doc` as a file of `session` (file rules, then session rules with
/// it in place) and writes it atomically under its canonical name. Errors
/// the session already had are not the new file's fault and do not refuse it.
fn write_doc(session: &SessionIndex, doc: &Document) -> Result<PathBuf, Refused> {
    let text = doc
        .to_file_text()
        .map_err(|e| Refused::Reason(e.to_string()))?;
    let name = doc.file_name();
    let path = session.dir.join(&name);
    let file = index_bytes(&path, doc.kind(), text.as_bytes());
    let own: Vec<Diagnostic> = file
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .cloned()
        .collect();
    if !own.is_empty() {
        return Err(Refused::Diagnostics(own));
    }
    let before: BTreeSet<_> = session
        .diagnostics()
        .filter(|d| d.is_error())
        .map(diagnostic_key)
        .collect();
    let mut with = session.clone();
    with.insert(name, file);
    with.recheck();
    let new: Vec<Diagnostic> = with
        .session_diagnostics
        .iter()
        .filter(|d| d.is_error() && !before.contains(&diagnostic_key(d)))
        .cloned()
        .collect();
    if !new.is_empty() {
        return Err(Refused::Diagnostics(new));
    }
    write_atomic(&path, text.as_bytes())
        .map_err(|e| Refused::Reason(format!("{}: {e}", path.display())))?;
    Ok(path)
}

fn read_input(path: &Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| format!("stdin: {e}"))?;
        return Ok(s);
    }
    squad_protocol::fsx::read_regular_to_string(path, 1 << 20)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn check_agent(flag: &str, name: &str) -> Result<(), String> {
    if IdKind::Agent.matches(name) {
        Ok(())
    } else {
        Err(format!(
            "{flag} `{}` is not a valid agent name (e.g. `backend-dev`)",
            crate::text::escape(name)
        ))
    }
}

fn now() -> squad_protocol::model::Timestamp {
    Utc::now().trunc_subsecs(0).fixed_offset()
}

fn printed(json: bool, value: serde_json::Value, human: String) -> u8 {
    if json {
        super::print(&format!("{value:#}\n"))
    } else {
        super::print_human(&human)
    }
}

/// Runs a `squadctl task` subcommand.
pub(crate) fn task(root_arg: Option<&Path>, cmd: TaskCommand) -> u8 {
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    match cmd {
        // Task assignments are the lead's (docs/guards.md, the trust model):
        // an agent that could assign itself a task could widen its reach.
        TaskCommand::New(args) => {
            match not_a_lead(&root).map_or_else(|| task_new(&root, &args), |r| Err(r.into())) {
                Ok((id, path)) => printed(
                    args.json,
                    json!({"task_id": id, "path": path.display().to_string()}),
                    format!("{id}\n"),
                ),
                Err(r) => refuse(r, args.json),
            }
        }
        TaskCommand::List(args) => super::read::task_list(&root, args),
        TaskCommand::Show(args) => super::read::task_show(&root, args),
    }
}

/// Why the caller may not assign tasks: SQUAD_AGENT names an agent the
/// policy does not name as a lead (`None`: a human, or a lead).
fn not_a_lead(root: &Path) -> Option<String> {
    lead_refusal(
        root,
        "task assignments are the lead's to write",
        "assign the task",
    )
}

/// Why the caller may not run a lead's command: the acting agent
/// ([`super::acting_agent`]: SQUAD_AGENT, or the MCP server's agent) is one
/// the policy does not name as a lead (`None`: a human, or a lead). `what`
/// says whose the command is, `ask` what to ask the lead for.
pub(crate) fn lead_refusal(root: &Path, what: &str, ask: &str) -> Option<String> {
    let agent = super::acting_agent()?;
    let leads = match crate::locks::load_policy(root) {
        Ok(p) => p.leads(),
        Err(e) => return Some(format!("cannot use the project policy ({e})")),
    };
    (!leads.contains(&agent)).then(|| {
        format!(
            "SQUAD_AGENT={agent} is not a lead: {what} ({}). Ask the lead to {ask} (`squadctl send --to {} --type request …`)",
            if leads.is_empty() {
                "a human's: the policy names no lead agent".to_string()
            } else {
                leads.join(", ")
            },
            leads.first().map_or("lead", String::as_str)
        )
    })
}

/// Whether `agent` may run the lead's commands under the project policy
/// (the MCP server lists the lead's tools only then).
pub(crate) fn is_lead(root: &Path, agent: &str) -> bool {
    crate::locks::load_policy(root).is_ok_and(|p| p.leads().iter().any(|l| l == agent))
}

fn next_task_id(session: &SessionIndex) -> String {
    let used: BTreeSet<&str> = session.plans().map(|p| p.task_id.as_str()).collect();
    let n = used
        .iter()
        .filter_map(|t| t.strip_prefix("task_")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0);
    (n + 1..)
        .map(|i| format!("task_{i:03}"))
        .find(|id| !used.contains(id.as_str()))
        .unwrap_or_else(|| "task_1".into())
}

/// Writes a task assignment (the work of `task new`); `Err` says why it
/// was refused, the diagnostics one per line.
pub(super) fn assign(root: &Path, args: &TaskNewArgs) -> Result<(String, PathBuf), String> {
    task_new(root, args).map_err(|r| match r {
        Refused::Reason(s) => s,
        Refused::Diagnostics(ds) => ds
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

fn task_new(root: &Path, args: &TaskNewArgs) -> Result<(String, PathBuf), Refused> {
    let doc = if let Some(file) = &args.file {
        let text = read_input(file)?;
        // The name is ours to choose (the canonical one): check the content
        // under the name its own facts give it.
        let first = check_bytes(file, FileKind::TaskAssignment, text.as_bytes());
        let name = squad_protocol::model::canonical_file_name(
            FileKind::TaskAssignment,
            first.facts.agent.as_deref().unwrap_or("agent"),
            first.facts.task_id.as_deref().unwrap_or("task"),
            "",
        );
        let report = check_bytes(Path::new(&name), FileKind::TaskAssignment, text.as_bytes());
        let errors: Vec<Diagnostic> = report
            .diagnostics
            .into_iter()
            .filter(|d| d.is_error() && d.rule != squad_protocol::Rule::FilenameMismatch)
            .collect();
        match report.document {
            Some(Document::TaskAssignment(t)) if errors.is_empty() => t,
            _ => return Err(Refused::Diagnostics(errors)),
        }
    } else {
        let agent = args.agent.clone().unwrap_or_default();
        check_agent("--agent", &agent)?;
        let instruction = match (&args.instruction, &args.instruction_file) {
            (Some(s), _) => s.clone(),
            (None, Some(f)) => read_input(f)?,
            (None, None) => {
                return Err(
                    "pass --instruction TEXT or --instruction-file F (`-` for stdin)"
                        .to_string()
                        .into(),
                );
            }
        };
        let timeout = match &args.timeout {
            Some(t) => Some(
                squad_policies::duration::parse_duration(t)
                    .map_err(|e| format!("--timeout: {e}"))?
                    .as_secs(),
            ),
            None => None,
        };
        let mut outputs = BTreeMap::new();
        for o in &args.output {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| format!("--output `{o}`: write KEY=PATH"))?;
            outputs.insert(k.to_string(), v.to_string());
        }
        let some = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        TaskAssignment {
            meta: TaskMeta {
                task_id: args.id.clone().unwrap_or_default(),
                agent,
                created_at: now(),
                priority: args.priority,
                timeout,
                merge: args.review.then(|| "review".to_string()),
            },
            dependencies: (!args.requires.is_empty() || !args.blocks.is_empty()).then(|| {
                Dependencies {
                    requires: some(&args.requires),
                    blocks: some(&args.blocks),
                }
            }),
            instruction,
            boundaries: (!args.allow.is_empty() || !args.forbid.is_empty()).then(|| Boundaries {
                allowed: some(&args.allow),
                forbidden: some(&args.forbid),
            }),
            outputs: (!outputs.is_empty()).then_some(outputs),
            success_criteria: some(&args.criterion),
        }
    };
    let mut doc = doc;
    let session = target::resolve(
        root,
        args.session.as_deref(),
        Defines::Agent(&doc.meta.agent),
    )?;
    if let Some(st) = session.status()
        && st.status != squad_protocol::model::SessionState::Active
    {
        return Err(format!(
            "session `{}` is {}: it takes no new tasks; plan into an active session (`squadctl session new`)",
            session.name, st.status
        )
        .into());
    }
    if doc.meta.task_id.is_empty() {
        doc.meta.task_id = next_task_id(&session);
    }
    let id = doc.meta.task_id.clone();
    if !IdKind::Task.matches(&id) {
        return Err(format!(
            "task id `{}` is not valid (e.g. `task_001`)",
            crate::text::escape(&id)
        )
        .into());
    }
    if let Some(p) = session.plans().find(|p| p.task_id == id) {
        return Err(format!(
            "task `{id}` is already planned in session `{}` (assigned to {}); pick another --id or leave it out",
            session.name, p.agent
        )
        .into());
    }
    let path = write_doc(&session, &Document::TaskAssignment(doc))?;
    Ok((id, path))
}

/// Runs `squadctl progress`.
pub(crate) fn progress(root_arg: Option<&Path>, args: ProgressArgs) -> u8 {
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    match write_progress(&root, &args) {
        Ok((doc, path)) => printed(
            args.json,
            json!({"task_id": doc.meta.task_id, "status": doc.status.as_str(), "path": path.display().to_string()}),
            format!("{} {}\n", doc.meta.task_id, doc.status),
        ),
        Err(r) => refuse(r, args.json),
    }
}

fn previous_progress(path: &Path) -> Option<ProgressUpdate> {
    let bytes = squad_protocol::validate::read_limited(path).ok()?;
    match check_bytes(path, FileKind::ProgressUpdate, &bytes).document {
        Some(Document::ProgressUpdate(p)) => Some(p),
        _ => None,
    }
}

fn write_progress(root: &Path, args: &ProgressArgs) -> Result<(ProgressUpdate, PathBuf), Refused> {
    let session = target::resolve(root, args.session.as_deref(), Defines::Task(&args.task))?;
    let assignee = session
        .plans()
        .find(|p| p.task_id == args.task)
        .map(|p| p.agent.clone())
        .ok_or_else(|| {
            format!(
                "task `{}` has no valid task assignment in session `{}`",
                crate::text::escape(&args.task),
                session.name
            )
        })?;
    let agent = args.agent.clone().unwrap_or(assignee);
    check_agent("--agent", &agent)?;
    let name = squad_protocol::model::canonical_file_name(
        FileKind::ProgressUpdate,
        &agent,
        &args.task,
        "",
    );
    let prev = previous_progress(&session.dir.join(&name));
    let stamp = now();
    let status = match (args.status, &prev) {
        (Some(s), _) => s,
        (None, Some(p)) => p.status,
        (None, None) => {
            return Err("--status is needed for the first update of a task"
                .to_string()
                .into());
        }
    };
    let mut p = prev.unwrap_or(ProgressUpdate {
        meta: ProgressMeta {
            task_id: args.task.clone(),
            agent: agent.clone(),
            updated_at: stamp,
        },
        status,
        progress_percentage: None,
        current_action: None,
        completed_steps: None,
        remaining_steps: None,
        artifacts_created: None,
        validation_results: None,
        blockers: None,
        time_spent: None,
        decisions: None,
        completed_at: None,
    });
    let was = p.status;
    p.meta.updated_at = stamp;
    p.status = status;
    if let Some(n) = args.percent {
        p.progress_percentage = Some(n);
    } else if status == TaskStatus::Completed {
        p.progress_percentage = Some(100);
    }
    if let Some(a) = &args.action {
        p.current_action = Some(a.clone());
    }
    if !args.done.is_empty() {
        let steps = p.completed_steps.get_or_insert_with(Vec::new);
        for d in &args.done {
            if !steps.contains(d) {
                steps.push(d.clone());
            }
        }
        if let Some(left) = &mut p.remaining_steps {
            left.retain(|s| !args.done.contains(s));
        }
    }
    if !args.todo.is_empty() {
        p.remaining_steps = Some(args.todo.clone());
    }
    if status == TaskStatus::Completed
        && let Some(left) = &p.remaining_steps
        && left.is_empty()
    {
        p.remaining_steps = None;
    }
    for a in &args.artifact {
        let list = p.artifacts_created.get_or_insert_with(Vec::new);
        if !list.iter().any(|x| &x.path == a) {
            list.push(Artifact {
                path: a.clone(),
                lines: None,
                status: None,
            });
        }
    }
    if let Some(b) = &args.blocker {
        if let Some(n) = &args.needs {
            check_agent("--needs", n)?;
        }
        p.blockers = Some(vec![Blocker {
            description: b.clone(),
            blocking_since: Some(stamp),
            requires_agent: args.needs.clone(),
        }]);
    } else if status != TaskStatus::Blocked {
        // Unblocked: a blocker of the past no longer holds.
        p.blockers = None;
    }
    for d in &args.decision {
        let (kind, text) = d
            .split_once(':')
            .ok_or_else(|| format!("--decision `{d}`: write TYPE:TEXT"))?;
        p.decisions.get_or_insert_with(Vec::new).push(Decision {
            kind: kind.trim().to_string(),
            description: text.trim().to_string(),
            data: None,
        });
    }
    for c in &args.check {
        let (k, v) = c
            .split_once('=')
            .ok_or_else(|| format!("--check `{c}`: write NAME=passing|failing|not_run"))?;
        let s = ValidationStatus::parse(v)
            .ok_or_else(|| format!("--check `{c}`: the status is passing, failing or not_run"))?;
        p.validation_results
            .get_or_insert_with(BTreeMap::new)
            .insert(
                k.to_string(),
                ValidationResult {
                    status: s,
                    errors: None,
                    warnings: None,
                    coverage: None,
                },
            );
    }
    match status {
        // Completing again keeps the first completion time.
        TaskStatus::Completed if was != TaskStatus::Completed || p.completed_at.is_none() => {
            p.completed_at = Some(stamp);
        }
        TaskStatus::Completed => {}
        _ => p.completed_at = None,
    }
    let path = write_doc(&session, &Document::ProgressUpdate(p.clone()))?;
    Ok((p, path))
}

/// Runs `squadctl report-error`.
pub(crate) fn report_error(root_arg: Option<&Path>, args: ReportErrorArgs) -> u8 {
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    match write_error(&root, &args) {
        Ok((id, path)) => printed(
            args.json,
            json!({"error_id": id, "path": path.display().to_string()}),
            format!("{id}\n"),
        ),
        Err(r) => refuse(r, args.json),
    }
}

fn write_error(root: &Path, args: &ReportErrorArgs) -> Result<(String, PathBuf), Refused> {
    check_agent("--agent", &args.agent)?;
    if let Some(n) = &args.needs {
        check_agent("--needs", n)?;
    }
    let what = match &args.task {
        Some(t) => Defines::Task(t),
        None => Defines::Agent(&args.agent),
    };
    let session = target::resolve(root, args.session.as_deref(), what)?;
    let t = Utc::now();
    let hash = RandomState::new().hash_one((std::process::id(), t.timestamp_nanos_opt())) & 0xffff;
    // Milliseconds in the stamp: two reports in one second get two files.
    let error_id = format!("err_{}_{hash:04x}", t.format("%Y%m%dT%H%M%S%3fZ"));
    let report = ErrorReport {
        error_id: error_id.clone(),
        agent: args.agent.clone(),
        task_id: args.task.clone(),
        severity: args.severity,
        occurred_at: now(),
        error: ErrorDetail {
            kind: args.kind.clone(),
            message: args.message.clone(),
            file: args.file.clone(),
            line: args.line,
            column: args.column,
        },
        attempted_fixes: (!args.tried.is_empty()).then(|| {
            args.tried
                .iter()
                .map(|s| serde_yaml::Value::String(s.clone()))
                .collect()
        }),
        requires_intervention: args.needs.as_ref().map(|_| true),
        suggested_agent: args.needs.clone(),
    };
    let doc = Document::ErrorReport(report);
    if session.dir.join(doc.file_name()).exists() {
        return Err(
            "an error report with this stamp exists already; run the command again"
                .to_string()
                .into(),
        );
    }
    let path = write_doc(&session, &doc)?;
    Ok((error_id, path))
}
