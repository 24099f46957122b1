// Over 800 lines: the runner policy, its parsing and the command-line
// building (expand, resume); resume_command and its Codex option table
// should move to a runners/resume.rs of their own.
//! `runners:` of the policy, and the dispatch decisions made from it: which
//! ready tasks start now, what happens after a run exits, how a runner's
//! argv is filled in. Pure functions of (policy, facts, now): squadd gathers
//! the facts and carries the decisions out (docs/runners.md).

use crate::duration::parse_duration;
use crate::policy::PolicyError;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use squad_protocol::model::Priority;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How one agent (or `"*"`, every agent without its own entry) is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerSpec {
    /// argv (never a shell string); placeholders `{prompt_file}`, `{task}`,
    /// `{agent}`, `{session}`, `{model}`, `{root}` are replaced.
    pub command: Vec<String>,
    /// Extra environment (values take the same placeholders).
    pub env: BTreeMap<String, String>,
    /// Working directory, relative to the project root (default: the root).
    pub cwd: Option<String>,
    /// Run time limit; `None`: the task's `meta.timeout`, else
    /// `sessions.defaultTimeoutMs` of config.json.
    pub timeout: Option<Duration>,
    /// Retries after a run that exits without completing its task.
    pub max_retries: u32,
    /// `guard: off`: squadd dispatches to this runner even when its CLI
    /// would run without the guard (docs/runners.md).
    pub guard_off: bool,
    /// `worktree:` of this entry: run in its own git worktree (`None`: the
    /// global `runners.worktree`; docs/worktrees.md).
    pub worktree: Option<bool>,
    /// `merge:` of this entry (`None`: the global `runners.merge`;
    /// docs/review.md).
    pub merge: Option<Merge>,
    /// `mcp: true`: the run's agent CLI (Claude Code, Codex, Copilot CLI)
    /// is started with `squadctl mcp` for its agent configured as the MCP
    /// server `squad` (docs/runners.md).
    pub mcp: bool,
    /// With `cluster:`, the host (its id, `SQUAD_HOST`) whose squadd starts
    /// this agent's runs; `None`: the leader's host (docs/cluster.md).
    pub host: Option<String>,
}

/// `runners:` of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnersPolicy {
    /// Whether squadd starts runners at all (default false).
    pub dispatch: bool,
    /// Runner per agent name, or `"*"`.
    pub agents: BTreeMap<String, RunnerSpec>,
    /// Between SIGTERM and SIGKILL of a run's process group.
    pub grace: Duration,
    /// A run that writes no file this long is reported `agent-idle`
    /// (`None`: never).
    pub idle_after: Option<Duration>,
    /// The first retry's delay; each further retry doubles it.
    pub retry_backoff: Duration,
    /// Who is told (high priority) when a run fails: the session's lead.
    pub lead: Option<String>,
    /// run.log is kept under this size (its tail is kept).
    pub log_max_bytes: u64,
    /// `runners.worktree`: every run in its own git worktree on branch
    /// `squad/<task>`, merged when its task completes (docs/worktrees.md);
    /// an entry's own `worktree:` wins.
    pub worktree: bool,
    /// Names of squadd's environment variables passed to every run beside
    /// the allow-list (API keys the agent CLI needs); nothing else of
    /// squadd's environment reaches a run.
    pub pass_env: Vec<String>,
    /// `runners.budget`: tokens and money per run and per session
    /// (docs/runners.md, "Budgets").
    pub budget: crate::budget::Budgets,
    /// `runners.worktree_setup`: shell lines run one by one (`sh -c`) in a
    /// run's new worktree before its agent starts (docs/worktrees.md).
    pub worktree_setup: Vec<String>,
    /// `runners.worktree_cleanup`: shell lines run in a run's worktree
    /// before squadd removes it after the merge.
    pub worktree_cleanup: Vec<String>,
    /// `runners.worktree_setup_timeout`: how long the setup (or the
    /// cleanup) lines of one worktree may take together.
    pub worktree_setup_timeout: Duration,
    /// `runners.merge`: what becomes of a worktree run's branch when its
    /// task completes: merged at once (`auto`) or kept waiting for the
    /// lead's review (`review`, docs/review.md); an entry's own `merge:`
    /// wins, and a task's plan may ask for `review`.
    pub merge: Merge,
}

/// What becomes of a completed worktree run's branch (docs/review.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Merge {
    /// Judged and merged into the session's branch at once.
    #[default]
    Auto,
    /// Its leftovers committed, the branch waits for the lead's
    /// `squadctl review approve|changes|reject`.
    Review,
}

impl Merge {
    /// `auto` or `review`, as written in the policy.
    pub fn parse(word: &str) -> Option<Merge> {
        match word.trim() {
            "auto" => Some(Merge::Auto),
            "review" => Some(Merge::Review),
            _ => None,
        }
    }
}

impl Default for RunnersPolicy {
    fn default() -> Self {
        RunnersPolicy {
            dispatch: false,
            agents: BTreeMap::new(),
            grace: Duration::from_secs(10),
            idle_after: Some(Duration::from_secs(600)),
            retry_backoff: Duration::from_secs(30),
            lead: Some("lead".into()),
            log_max_bytes: 1 << 20,
            worktree: false,
            pass_env: Vec::new(),
            budget: crate::budget::Budgets::default(),
            worktree_setup: Vec::new(),
            worktree_cleanup: Vec::new(),
            worktree_setup_timeout: Duration::from_secs(600),
            merge: Merge::Auto,
        }
    }
}

impl RunnersPolicy {
    /// The runner of `agent`: its own entry, else `"*"`.
    pub fn runner_for(&self, agent: &str) -> Option<&RunnerSpec> {
        self.agents.get(agent).or_else(|| self.agents.get("*"))
    }

    /// Whether the squadd of host `here` starts `agent`'s runs in a
    /// cluster: its runner's `host:`, else the leader's host (`leads`).
    pub fn dispatches_here(&self, agent: &str, here: &str, leads: bool) -> bool {
        match self.runner_for(agent).and_then(|r| r.host.as_deref()) {
            Some(owner) => owner == here,
            None => leads,
        }
    }

    /// Whether `agent`'s runs start in their own git worktree: its entry's
    /// `worktree:`, else the global `runners.worktree`.
    pub fn worktree_for(&self, agent: &str) -> bool {
        self.runner_for(agent)
            .and_then(|r| r.worktree)
            .unwrap_or(self.worktree)
    }

    /// What becomes of a completed worktree run of `agent` whose plan
    /// asks for review (`task_review`, the plan's `meta.merge: review`) or
    /// not: review when the plan, the agent's entry or `runners.merge`
    /// says so (a plan asks for review, it never waives the policy's).
    pub fn merge_for(&self, agent: &str, task_review: bool) -> Merge {
        if task_review {
            return Merge::Review;
        }
        self.runner_for(agent)
            .and_then(|r| r.merge)
            .unwrap_or(self.merge)
    }
}

/// `runners:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRunners {
    #[serde(default)]
    dispatch: bool,
    #[serde(default)]
    agents: BTreeMap<String, RawRunner>,
    #[serde(default)]
    grace: Option<String>,
    #[serde(default)]
    idle_after: Option<String>,
    #[serde(default)]
    retry_backoff: Option<String>,
    #[serde(default)]
    lead: Option<String>,
    #[serde(default)]
    log_max_size: Option<String>,
    #[serde(default)]
    worktree: bool,
    #[serde(default)]
    pass_env: Vec<String>,
    #[serde(default)]
    budget: crate::budget::RawBudgets,
    #[serde(default)]
    worktree_setup: Vec<String>,
    #[serde(default)]
    worktree_cleanup: Vec<String>,
    #[serde(default)]
    worktree_setup_timeout: Option<String>,
    #[serde(default)]
    merge: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRunner {
    command: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    guard: Option<String>,
    #[serde(default)]
    worktree: Option<bool>,
    #[serde(default)]
    merge: Option<String>,
    #[serde(default)]
    mcp: bool,
    #[serde(default)]
    host: Option<String>,
}

/// The placeholders a runner's argv, env and cwd may use.
pub const PLACEHOLDERS: &[&str] = &["prompt_file", "task", "agent", "session", "model", "root"];

fn err(field: impl Into<String>, message: impl Into<String>) -> PolicyError {
    PolicyError {
        field: field.into(),
        message: message.into(),
    }
}

fn none(t: &str) -> bool {
    t.trim() == "none"
}

pub(crate) fn runners_policy(raw: RawRunners) -> Result<RunnersPolicy, PolicyError> {
    let d = RunnersPolicy::default();
    let dur = |field: &str, text: &Option<String>, default: Duration| match text {
        Some(t) => parse_duration(t).map_err(|m| err(field, m)),
        None => Ok(default),
    };
    let mut agents = BTreeMap::new();
    for (agent, r) in raw.agents {
        let field = format!("runners.agents.{agent}");
        if agent != "*" && !squad_protocol::IdKind::Agent.matches(&agent) {
            return Err(err(
                field,
                format!("`{agent}` is not an agent name (or `*`)"),
            ));
        }
        if r.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(err(
                format!("{field}.command"),
                "an argv list with the program first, e.g. [\"claude\", \"-p\", \"Work on {task}\"]",
            ));
        }
        for (i, a) in r.command.iter().enumerate() {
            check_placeholders(a).map_err(|m| err(format!("{field}.command[{i}]"), m))?;
        }
        for (k, v) in &r.env {
            check_placeholders(v).map_err(|m| err(format!("{field}.env.{k}"), m))?;
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(err(
                    format!("{field}.env"),
                    format!("`{k}` is not an environment variable name"),
                ));
            }
        }
        if let Some(c) = &r.cwd {
            check_placeholders(c).map_err(|m| err(format!("{field}.cwd"), m))?;
        }
        let timeout = match &r.timeout {
            Some(t) => Some(parse_duration(t).map_err(|m| err(format!("{field}.timeout"), m))?),
            None => None,
        };
        let guard_off = match r.guard.as_deref().map(str::trim) {
            None | Some("on") => false,
            Some("off") => true,
            Some(other) => {
                return Err(err(
                    format!("{field}.guard"),
                    format!("`{other}` is not `on` or `off`"),
                ));
            }
        };
        // Only the CLIs whose MCP flags squadd knows: for another program
        // the option would silently do nothing.
        let cli =
            crate::guard_doctor::Cli::of_program(r.command.first().map_or("", String::as_str));
        if r.mcp && cli == Some(crate::guard_doctor::Cli::Gemini) {
            return Err(err(
                format!("{field}.mcp"),
                "Gemini CLI takes MCP servers from its settings only, not from its command line: run `squadctl mcp install --gemini` (the server takes the run's agent from SQUAD_AGENT) and remove `mcp`",
            ));
        }
        if r.mcp && cli.is_none() {
            return Err(err(
                format!("{field}.mcp"),
                format!(
                    "`mcp: true` configures claude, codex or copilot only, not `{}`; configure `squadctl mcp` in that program yourself, or remove `mcp`",
                    r.command.first().map_or("", String::as_str)
                ),
            ));
        }
        let merge = r
            .merge
            .as_deref()
            .map(|m| merge_word(&format!("{field}.merge"), m))
            .transpose()?;
        agents.insert(
            agent,
            RunnerSpec {
                command: r.command,
                env: r.env,
                cwd: r.cwd,
                timeout,
                max_retries: r.max_retries.unwrap_or(2),
                guard_off,
                worktree: r.worktree,
                merge,
                mcp: r.mcp,
                host: r
                    .host
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty()),
            },
        );
    }
    let idle_after = match &raw.idle_after {
        Some(t) if none(t) => None,
        Some(t) => Some(parse_duration(t).map_err(|m| err("runners.idle_after", m))?),
        None => d.idle_after,
    };
    let lead = match raw.lead {
        Some(l) if none(&l) => None,
        Some(l) if squad_protocol::IdKind::Agent.matches(&l) => Some(l),
        Some(l) => {
            return Err(err(
                "runners.lead",
                format!("`{l}` is not an agent name (or `none`)"),
            ));
        }
        None => d.lead,
    };
    let log_max_bytes = match &raw.log_max_size {
        Some(s) => crate::memory::parse_size(s).map_err(|m| err("runners.log_max_size", m))?,
        None => d.log_max_bytes,
    };
    for (i, name) in raw.pass_env.iter().enumerate() {
        if !is_env_name(name) {
            return Err(err(
                format!("runners.pass_env[{i}]"),
                format!(
                    "`{name}` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
                ),
            ));
        }
    }
    let budget = crate::budget::budgets(raw.budget).map_err(|(f, m)| err(f, m))?;
    for (key, lines) in [
        ("worktree_setup", &raw.worktree_setup),
        ("worktree_cleanup", &raw.worktree_cleanup),
    ] {
        for (i, line) in lines.iter().enumerate() {
            check_shell_line(line).map_err(|m| err(format!("runners.{key}[{i}]"), m))?;
        }
    }
    let worktree_setup_timeout = dur(
        "runners.worktree_setup_timeout",
        &raw.worktree_setup_timeout,
        d.worktree_setup_timeout,
    )?;
    if worktree_setup_timeout.is_zero() {
        return Err(err(
            "runners.worktree_setup_timeout",
            "must be longer than 0s",
        ));
    }
    let merge = match raw.merge.as_deref() {
        Some(m) => merge_word("runners.merge", m)?,
        None => d.merge,
    };
    Ok(RunnersPolicy {
        merge,
        worktree_setup: raw.worktree_setup,
        worktree_cleanup: raw.worktree_cleanup,
        worktree_setup_timeout,
        budget,
        dispatch: raw.dispatch,
        agents,
        grace: dur("runners.grace", &raw.grace, d.grace)?,
        idle_after,
        retry_backoff: dur("runners.retry_backoff", &raw.retry_backoff, d.retry_backoff)?,
        lead,
        log_max_bytes,
        worktree: raw.worktree,
        pass_env: raw.pass_env,
    })
}

/// `merge:` as written: `auto` or `review`.
fn merge_word(field: &str, word: &str) -> Result<Merge, PolicyError> {
    Merge::parse(word).ok_or_else(|| {
        err(
            field,
            format!(
                "`{word}` is not `auto` (merge a completed worktree run's branch at once) or `review` (wait for the lead's `squadctl review`, docs/review.md)"
            ),
        )
    })
}

/// A worktree setup or cleanup line: a shell command (`sh -c`), not empty,
/// without the runner command's `{placeholders}` (the shell would get them
/// verbatim: the run's values are in its environment instead).
fn check_shell_line(line: &str) -> Result<(), String> {
    if line.trim().is_empty() || line.contains('\0') {
        return Err("a shell command line, e.g. `npm ci` or `cp \"$SQUAD_ROOT/.env\" .`".into());
    }
    if let Some(p) = PLACEHOLDERS
        .iter()
        .find(|p| line.contains(&format!("{{{p}}}")))
    {
        return Err(format!(
            "`{{{p}}}` is a runner placeholder, not replaced in a shell line: use the run's environment (`$SQUAD_ROOT`, `$SQUAD_TASK`, `$SQUAD_AGENT`, `$SQUAD_SESSION`)"
        ));
    }
    Ok(())
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Refuses unknown `{names}` (a typo would reach the agent verbatim).
fn check_placeholders(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            break;
        };
        let name = &after[..close];
        // Only `{word}` is a placeholder: JSON or shell braces pass as text.
        let word = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
        if word && !PLACEHOLDERS.contains(&name) {
            return Err(format!(
                "unknown placeholder `{{{name}}}`; known: {}",
                PLACEHOLDERS
                    .iter()
                    .map(|p| format!("{{{p}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// The values of the placeholders for one run.
#[derive(Debug, Clone, Default)]
pub struct Vars<'a> {
    /// `{prompt_file}`: the absolute path of the run's prompt.md.
    pub prompt_file: &'a str,
    /// `{task}`.
    pub task: &'a str,
    /// `{agent}`.
    pub agent: &'a str,
    /// `{session}`: the session directory name.
    pub session: &'a str,
    /// `{model}`: the agent's model from config.json; `None` when it names
    /// none (see [`expand_command`]).
    pub model: Option<&'a str>,
    /// `{root}`: the project root.
    pub root: &'a str,
}

/// Replaces the placeholders of one argument (unknown `{…}` are kept as
/// written; the policy refuses them on load).
pub fn expand(text: &str, vars: &Vars<'_>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let value = after.find('}').and_then(|close| {
            let v = match &after[..close] {
                "prompt_file" => vars.prompt_file,
                "task" => vars.task,
                "agent" => vars.agent,
                "session" => vars.session,
                "model" => vars.model.unwrap_or(""),
                "root" => vars.root,
                _ => return None,
            };
            Some((v, close))
        });
        match value {
            Some((v, close)) => {
                out.push_str(v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Expands a runner's command line. With no model configured, an argument
/// holding `{model}` is left out, and so is the option right before a bare
/// `{model}` (`--model {model}`, `-m {model}`): the agent CLI then runs
/// with its own default model instead of an empty or stale name.
pub fn expand_command(command: &[String], vars: &Vars<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(command.len());
    let mut previous: Option<&str> = None;
    for arg in command {
        if vars.model.is_none() && arg.contains("{model}") {
            let flag_before =
                previous.is_some_and(|p| p.starts_with('-') && !p.contains('=') && p != "--");
            if arg == "{model}" && flag_before {
                out.pop();
            }
            previous = None;
            continue;
        }
        out.push(expand(arg, vars));
        previous = Some(arg);
    }
    out
}

/// The options of `codex exec` that take a value as the next argument
/// (codex-cli 0.169/0.171 `codex exec --help`): what [`resume_command`]
/// skips to find the prompt.
const CODEX_EXEC_VALUED: &[&str] = &[
    "-c",
    "--config",
    "-m",
    "--model",
    "-s",
    "--sandbox",
    "-p",
    "--profile",
    "-i",
    "--image",
    "-C",
    "--cd",
    "--color",
    "-o",
    "--output-last-message",
    "--output-schema",
    "--add-dir",
    "--enable",
    "--disable",
    "--local-provider",
    "--thread-source",
    "--cyber-access-program",
];

/// A run's command line (`argv`, as [`expand_command`] made it) turned into
/// one that resumes the agent CLI's own conversation `id` (the run's
/// `conversation`, docs/runners.md "Resuming the agent's conversation"),
/// with the same options and prompt: Claude Code gets `--resume ID` right
/// after the program (never among a variadic option's values); Codex
/// `codex exec [its options] resume ID PROMPT [the rest]` (`exec resume`
/// takes fewer options than `exec`: those before the prompt stay `exec`'s).
/// `None` for a CLI squadd cannot resume (Copilot CLI, Gemini CLI, any
/// other program), for an id of another shape
/// ([`crate::usage::conversation_id`]), or a Codex line without `exec`
/// and a prompt.
pub fn resume_command(argv: &[String], id: &str) -> Option<Vec<String>> {
    use crate::guard_doctor::Cli;
    let id = crate::usage::conversation_id(id)?;
    let program = argv.first()?;
    match Cli::of_program(program)? {
        Cli::Claude => {
            let mut out = vec![program.clone(), "--resume".into(), id.into()];
            out.extend(argv[1..].iter().cloned());
            Some(out)
        }
        Cli::Codex => {
            let exec = argv.iter().position(|a| a == "exec")?;
            let resumed = |at: usize, dash: bool| {
                let mut out = argv[..at].to_vec();
                out.extend(["resume".to_string(), id.to_string()]);
                if dash {
                    out.push("--".into());
                }
                out.extend(argv[at + usize::from(dash)..].iter().cloned());
                out
            };
            let mut i = exec + 1;
            loop {
                let a = argv.get(i)?;
                if a == "--" {
                    // Everything after it is the prompt.
                    argv.get(i + 1)?;
                    return Some(resumed(i, true));
                }
                if a.starts_with('-') && a != "-" {
                    i += if CODEX_EXEC_VALUED.contains(&a.as_str()) {
                        2
                    } else {
                        1
                    };
                    continue;
                }
                // Already a resume (or another subcommand): not ours to change.
                if ["resume", "review", "help"].contains(&a.as_str()) {
                    return None;
                }
                return Some(resumed(i, false));
            }
        }
        Cli::Copilot | Cli::Gemini => None,
    }
}

/// A task that could start: ready (pending, every prerequisite completed),
/// or a failed run's task whose retry is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Session directory name.
    pub session: String,
    /// Task id.
    pub task: String,
    /// Assignee.
    pub agent: String,
    /// The task's priority.
    pub priority: Priority,
    /// Runs of this task so far (0: never started).
    pub attempts: u32,
    /// When the retry after the last failed run is due (`None`: no run yet).
    pub retry_at: Option<DateTime<Utc>>,
    /// The last run was lost, stopped by hand or gave up: only a human
    /// (`squadctl run`) starts it again.
    pub held: bool,
}

/// What is running now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool {
    /// Runs in progress (the pool's size).
    pub running: usize,
    /// `sessions.maxConcurrent`.
    pub max_concurrent: usize,
    /// Agents with a run in progress.
    pub busy_agents: BTreeSet<String>,
    /// (session, task) with a run in progress.
    pub busy_tasks: BTreeSet<(String, String)>,
}

/// Why a candidate does not start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Dispatch is off.
    DispatchOff,
    /// No runner names the agent (nor `"*"`).
    NoRunner,
    /// The task has a run in progress.
    TaskRunning,
    /// The agent has a run in progress.
    AgentBusy,
    /// The pool is full.
    PoolFull,
    /// The retry backoff has not passed.
    Backoff,
    /// Every retry was used.
    RetriesExhausted,
    /// Held for a human (lost run, stopped by hand).
    Held,
}

impl Wait {
    /// A short human reason.
    pub fn reason(self) -> &'static str {
        match self {
            Wait::DispatchOff => "dispatch is off (runners.dispatch: false)",
            Wait::NoRunner => "no runner in the policy names this agent (nor \"*\")",
            Wait::TaskRunning => "the task already has a run in progress",
            Wait::AgentBusy => "the agent already has a run in progress",
            Wait::PoolFull => "the pool is full (sessions.maxConcurrent)",
            Wait::Backoff => "waiting for the retry backoff",
            Wait::RetriesExhausted => "every retry was used (max_retries)",
            Wait::Held => "its last run was lost or stopped; start it with `squadctl run`",
        }
    }
}

/// Whether `c` may start now, ignoring the pool's size (`manual`: a human
/// asked, so held tasks and used-up retries do not stop it).
pub fn may_start(
    policy: &RunnersPolicy,
    c: &Candidate,
    pool: &Pool,
    now: DateTime<Utc>,
    manual: bool,
) -> Result<(), Wait> {
    if !manual && !policy.dispatch {
        return Err(Wait::DispatchOff);
    }
    let Some(spec) = policy.runner_for(&c.agent) else {
        return Err(Wait::NoRunner);
    };
    if pool
        .busy_tasks
        .contains(&(c.session.clone(), c.task.clone()))
    {
        return Err(Wait::TaskRunning);
    }
    if pool.busy_agents.contains(&c.agent) {
        return Err(Wait::AgentBusy);
    }
    if !manual {
        if c.held {
            return Err(Wait::Held);
        }
        if c.attempts > spec.max_retries {
            return Err(Wait::RetriesExhausted);
        }
        if c.retry_at.is_some_and(|at| at > now) {
            return Err(Wait::Backoff);
        }
    }
    Ok(())
}

fn rank(p: Priority) -> u8 {
    match p {
        Priority::Critical => 0,
        Priority::High => 1,
        Priority::Medium => 2,
        Priority::Low => 3,
    }
}

/// The candidates to start now, in start order: higher priority first
/// (then session, then task id), one run per agent and per task, while the
/// pool has room.
pub fn dispatch(
    policy: &RunnersPolicy,
    candidates: &[Candidate],
    pool: &Pool,
    now: DateTime<Utc>,
) -> Vec<Candidate> {
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by(|a, b| {
        (rank(a.priority), &a.session, &a.task).cmp(&(rank(b.priority), &b.session, &b.task))
    });
    let mut pool = pool.clone();
    let mut out = Vec::new();
    for c in order {
        if pool.running >= pool.max_concurrent {
            break;
        }
        if may_start(policy, c, &pool, now, false).is_ok() {
            pool.running += 1;
            pool.busy_agents.insert(c.agent.clone());
            pool.busy_tasks.insert((c.session.clone(), c.task.clone()));
            out.push(c.clone());
        }
    }
    out
}

/// What follows a run's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterExit {
    /// The task completed: nothing to do.
    Done,
    /// Retry at this time (attempt number `attempt`, counting from 2).
    Retry {
        /// When the retry is due.
        at: DateTime<Utc>,
        /// The number the next run will have.
        attempt: u32,
    },
    /// No retry left: the lead is told, the task waits for a human.
    GiveUp,
}

/// The delay before retry number `retry` (1 for the first): the backoff,
/// doubled each time, at most an hour.
pub fn backoff(base: Duration, retry: u32) -> Duration {
    let factor = 1u32 << retry.saturating_sub(1).min(16);
    base.saturating_mul(factor).min(Duration::from_secs(3600))
}

/// What to do after run number `attempts` of a task exited; `completed`:
/// the task's own status is `completed`.
pub fn after_exit(
    spec: Option<&RunnerSpec>,
    policy: &RunnersPolicy,
    attempts: u32,
    completed: bool,
    now: DateTime<Utc>,
) -> AfterExit {
    if completed {
        return AfterExit::Done;
    }
    let max = spec.map_or(0, |s| s.max_retries);
    if attempts > max {
        return AfterExit::GiveUp;
    }
    let delay = backoff(policy.retry_backoff, attempts);
    // Checked: `now` may be anywhere a clock says (issue 26 item 8).
    let at = chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    AfterExit::Retry {
        at,
        attempt: attempts + 1,
    }
}

/// The time limit of a run: the runner's own `timeout`, else the task's
/// `meta.timeout` (seconds), else config.json's `sessions.defaultTimeoutMs`.
pub fn run_timeout(
    spec: Option<&RunnerSpec>,
    task_timeout_secs: Option<u64>,
    default: Duration,
) -> Duration {
    spec.and_then(|s| s.timeout)
        .or(task_timeout_secs.map(Duration::from_secs))
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    #[test]
    fn resume_lines_for_claude_and_codex_none_for_the_others() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let id = "0199a213-81c0-7800-8aa1-bbab2a035a53";
        // The documented runner lines (docs/runners.md), expanded.
        let claude = v(&[
            "claude",
            "-p",
            "Read p.md",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Read",
            "Edit",
        ]);
        assert_eq!(
            super::resume_command(&claude, id).unwrap(),
            v(&[
                "claude",
                "--resume",
                id,
                "-p",
                "Read p.md",
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "Read",
                "Edit"
            ])
        );
        let codex = v(&[
            "codex",
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "-m",
            "gpt-5",
            "Read p.md",
            "-c",
            "x=1",
        ]);
        assert_eq!(
            super::resume_command(&codex, id).unwrap(),
            v(&[
                "codex",
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "-m",
                "gpt-5",
                "resume",
                id,
                "Read p.md",
                "-c",
                "x=1"
            ])
        );
        let dashed = v(&[
            "/opt/bin/codex",
            "exec",
            "--json",
            "--",
            "-starts with a dash",
        ]);
        assert_eq!(
            super::resume_command(&dashed, id).unwrap(),
            v(&[
                "/opt/bin/codex",
                "exec",
                "--json",
                "resume",
                id,
                "--",
                "-starts with a dash"
            ])
        );
        // No prompt, already resuming, other CLIs, a hostile id: none.
        assert_eq!(
            super::resume_command(&v(&["codex", "exec", "--json"]), id),
            None
        );
        assert_eq!(
            super::resume_command(&v(&["codex", "exec", "resume", "--last"]), id),
            None
        );
        assert_eq!(super::resume_command(&v(&["copilot", "-p", "x"]), id), None);
        assert_eq!(super::resume_command(&v(&["gemini", "-p", "x"]), id), None);
        assert_eq!(super::resume_command(&v(&["sh", "-c", "x"]), id), None);
        assert_eq!(
            super::resume_command(&claude, "--dangerously-skip-permissions"),
            None
        );
        assert_eq!(super::resume_command(&claude, "a b"), None);
    }

    use super::*;
    use crate::policy::Policy;

    #[test]
    fn a_runner_with_a_host_dispatches_there_else_on_the_leader() {
        let p = policy(
            "runners:\n  agents:\n    \"*\": {command: [x]}\n    web: {command: [y], host: \" b:/srv \"}\n",
        );
        let r = &p;
        assert_eq!(r.agents["web"].host.as_deref(), Some("b:/srv"));
        assert!(r.dispatches_here("web", "b:/srv", false));
        assert!(!r.dispatches_here("web", "a:/srv", true));
        assert!(r.dispatches_here("api", "a:/srv", true));
        assert!(!r.dispatches_here("api", "b:/srv", false));
    }

    #[test]
    fn merge_is_auto_or_review_globally_per_entry_and_per_task() {
        let p = policy(
            "runners:\n  merge: review\n  agents:\n    \"*\": {command: [x]}\n    docs: {command: [y], merge: auto}\n",
        );
        assert_eq!(p.merge_for("backend", false), Merge::Review);
        assert_eq!(p.merge_for("docs", false), Merge::Auto);
        assert_eq!(p.merge_for("docs", true), Merge::Review, "a plan asks");
        let d = on();
        assert_eq!(
            d.merge_for("backend", false),
            Merge::Auto,
            "auto by default"
        );
        for (yaml, field) in [
            ("runners:\n  merge: later\n", "runners.merge"),
            (
                "runners:\n  agents:\n    docs: {command: [y], merge: manual}\n",
                "runners.agents.docs.merge",
            ),
        ] {
            let e = Policy::parse(Some(yaml)).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(field), "{text}");
            assert!(
                text.contains("`auto`") && text.contains("`review`"),
                "{text}"
            );
        }
    }

    #[test]
    fn worktree_is_global_or_per_entry_and_must_be_a_boolean() {
        let p = policy(
            "runners:\n  worktree: true\n  agents:\n    \"*\": {command: [x]}\n    docs: {command: [y], worktree: false}\n",
        );
        assert!(p.worktree_for("backend"));
        assert!(!p.worktree_for("docs"));
        assert!(!on().worktree_for("backend"), "off by default");
        let e = Policy::parse(Some("runners:\n  worktree: sometimes\n")).unwrap_err();
        assert!(e.to_string().contains("worktree"), "{e}");
    }

    fn policy(yaml: &str) -> RunnersPolicy {
        Policy::parse(Some(yaml)).unwrap().runners
    }

    fn on() -> RunnersPolicy {
        policy(
            "runners:\n  dispatch: true\n  agents:\n    \"*\":\n      command: [\"agent\", \"{task}\"]\n",
        )
    }

    fn cand(task: &str, agent: &str, p: Priority) -> Candidate {
        Candidate {
            session: "s".into(),
            task: task.into(),
            agent: agent.into(),
            priority: p,
            attempts: 0,
            retry_at: None,
            held: false,
        }
    }

    fn pool(max: usize) -> Pool {
        Pool {
            max_concurrent: max,
            ..Pool::default()
        }
    }

    fn names(v: &[Candidate]) -> Vec<&str> {
        v.iter().map(|c| c.task.as_str()).collect()
    }

    #[test]
    fn budgets_are_read_and_bad_ones_refused() {
        let p = policy(
            "runners:\n  budget:\n    run: {tokens: 50000, usd: 2.5}\n    session: {usd: 40}\n",
        );
        assert_eq!(p.budget.run.tokens, Some(50_000));
        assert_eq!(p.budget.run.usd, Some(crate::usage::Usd(2_500_000)));
        assert_eq!(p.budget.session.tokens, None);
        assert!(!Policy::defaults().runners.budget.run.is_set());
        for (yaml, field) in [
            (
                "runners:\n  budget:\n    run: {usd: -1}\n",
                "runners.budget.run.usd",
            ),
            (
                "runners:\n  budget:\n    session: {tokens: 0}\n",
                "runners.budget.session.tokens",
            ),
        ] {
            let e = Policy::parse(Some(yaml)).unwrap_err();
            assert_eq!(e.field, field, "{yaml}");
        }
        assert!(Policy::parse(Some("runners:\n  budget:\n    run: {dollars: 1}\n")).is_err());
    }

    #[test]
    fn worktree_setup_and_cleanup_are_shell_lines_with_a_timeout() {
        let p = policy(
            "runners:\n  worktree_setup: [\"cp \\\"$SQUAD_ROOT/.env\\\" .\", \"npm ci\"]\n  worktree_cleanup: [\"rm -rf node_modules\"]\n  worktree_setup_timeout: 2m\n",
        );
        assert_eq!(p.worktree_setup, ["cp \"$SQUAD_ROOT/.env\" .", "npm ci"]);
        assert_eq!(p.worktree_cleanup, ["rm -rf node_modules"]);
        assert_eq!(p.worktree_setup_timeout, Duration::from_secs(120));
        let d = Policy::defaults().runners;
        assert!(d.worktree_setup.is_empty() && d.worktree_cleanup.is_empty());
        assert_eq!(d.worktree_setup_timeout, Duration::from_secs(600));
    }

    #[test]
    fn pass_env_lists_names() {
        let p = policy("runners:\n  pass_env: [ANTHROPIC_API_KEY, OPENAI_BASE_URL]\n");
        assert_eq!(p.pass_env, ["ANTHROPIC_API_KEY", "OPENAI_BASE_URL"]);
        assert!(Policy::defaults().runners.pass_env.is_empty());
    }

    #[test]
    fn the_default_policy_dispatches_nothing() {
        let p = Policy::defaults().runners;
        assert!(!p.dispatch);
        assert!(p.agents.is_empty());
        let c = [cand("task_a", "a", Priority::High)];
        assert!(dispatch(&p, &c, &pool(8), Utc::now()).is_empty());
    }

    #[test]
    fn the_issue_shape_parses() {
        let p = policy(
            "runners:\n  dispatch: true\n  agents:\n    \"*\":\n      command: [\"claude\", \"-p\", \"--append-system-prompt-file\", \"{prompt_file}\", \"Work on {task}\"]\n    backend:\n      command: [\"codex\", \"exec\", \"{task}\"]\n      env: {MODEL: \"{model}\"}\n      cwd: \"src\"\n      timeout: 20m\n      max_retries: 1\n",
        );
        assert!(p.dispatch);
        assert_eq!(p.runner_for("frontend").unwrap().command[0], "claude");
        let b = p.runner_for("backend").unwrap();
        assert_eq!(b.command[0], "codex");
        assert_eq!(b.timeout, Some(Duration::from_secs(1200)));
        assert_eq!(b.max_retries, 1);
        assert_eq!(b.env["MODEL"], "{model}");
        assert!(!b.mcp);
        let p = policy(
            "runners:\n  agents:\n    a:\n      command: [\"/opt/bin/claude\", \"-p\", \"x\"]\n      mcp: true\n",
        );
        assert!(p.runner_for("a").unwrap().mcp);
    }

    #[test]
    fn bad_entries_are_refused_naming_the_field() {
        for (yaml, field) in [
            (
                "runners:\n  agents:\n    a:\n      command: []\n",
                "runners.agents.a.command",
            ),
            (
                "runners:\n  agents:\n    a:\n      command: [\"x\", \"{taks}\"]\n",
                "runners.agents.a.command[1]",
            ),
            (
                "runners:\n  agents:\n    Bad_Name:\n      command: [\"x\"]\n",
                "runners.agents.Bad_Name",
            ),
            (
                "runners:\n  agents:\n    a:\n      command: [\"x\"]\n      timeout: soon\n",
                "runners.agents.a.timeout",
            ),
            ("runners:\n  grace: forever\n", "runners.grace"),
            ("runners:\n  lead: \"Not An Agent\"\n", "runners.lead"),
            (
                "runners:\n  agents:\n    a:\n      command: [\"./agent.sh\"]\n      mcp: true\n",
                "runners.agents.a.mcp",
            ),
            // Gemini CLI: no flag configures an MCP server (issue 38).
            (
                "runners:\n  agents:\n    a:\n      command: [\"gemini\", \"-p\", \"x\"]\n      mcp: true\n",
                "runners.agents.a.mcp",
            ),
            (
                "runners:\n  pass_env: [ANTHROPIC_API_KEY, \"BAD=NAME\"]\n",
                "runners.pass_env[1]",
            ),
            ("runners:\n  pass_env: [\"1X\"]\n", "runners.pass_env[0]"),
            (
                "runners:\n  worktree_setup: [\"npm ci\", \"  \"]\n",
                "runners.worktree_setup[1]",
            ),
            (
                "runners:\n  worktree_cleanup: [\"rm -rf {root}/x\"]\n",
                "runners.worktree_cleanup[0]",
            ),
            (
                "runners:\n  worktree_setup_timeout: soon\n",
                "runners.worktree_setup_timeout",
            ),
            (
                "runners:\n  worktree_setup_timeout: 0s\n",
                "runners.worktree_setup_timeout",
            ),
        ] {
            let e = Policy::parse(Some(yaml)).unwrap_err();
            assert_eq!(e.field, field, "{yaml}: {e}");
        }
        let e = Policy::parse(Some("runners:\n  dispatch: true\n  shell: bash\n")).unwrap_err();
        assert!(e.to_string().contains("shell"), "{e}");
    }

    #[test]
    fn higher_priority_starts_first_while_the_pool_has_room() {
        let c = [
            cand("task_low", "a", Priority::Low),
            cand("task_crit", "b", Priority::Critical),
            cand("task_med", "c", Priority::Medium),
            cand("task_high", "d", Priority::High),
        ];
        let started = dispatch(&on(), &c, &pool(2), Utc::now());
        assert_eq!(names(&started), ["task_crit", "task_high"]);
        let started = dispatch(&on(), &c, &pool(8), Utc::now());
        assert_eq!(
            names(&started),
            ["task_crit", "task_high", "task_med", "task_low"]
        );
    }

    #[test]
    fn one_run_per_agent_and_never_a_second_run_of_a_task() {
        let c = [
            cand("task_a", "alice", Priority::High),
            cand("task_b", "alice", Priority::High),
            cand("task_c", "bob", Priority::Low),
            cand("task_d", "carol", Priority::Low),
        ];
        let mut p = pool(8);
        p.running = 1;
        p.busy_tasks.insert(("s".into(), "task_c".into()));
        let started = dispatch(&on(), &c, &p, Utc::now());
        // alice once; task_c already runs (bob is free, but the task is not).
        assert_eq!(names(&started), ["task_a", "task_d"]);
        p.busy_agents.insert("alice".into());
        let started = dispatch(&on(), &c, &p, Utc::now());
        assert_eq!(names(&started), ["task_d"]);
    }

    #[test]
    fn a_full_pool_starts_nothing() {
        let c = [cand("task_a", "alice", Priority::Critical)];
        let mut p = pool(2);
        p.running = 2;
        assert!(dispatch(&on(), &c, &p, Utc::now()).is_empty());
        p.max_concurrent = 0;
        p.running = 0;
        assert!(dispatch(&on(), &c, &p, Utc::now()).is_empty());
    }

    #[test]
    fn an_agent_without_a_runner_is_left_to_humans() {
        let p =
            policy("runners:\n  dispatch: true\n  agents:\n    alice:\n      command: [\"x\"]\n");
        let c = [
            cand("task_a", "alice", Priority::Low),
            cand("task_b", "bob", Priority::Critical),
        ];
        assert_eq!(names(&dispatch(&p, &c, &pool(8), Utc::now())), ["task_a"]);
        assert_eq!(
            may_start(&p, &c[1], &pool(8), Utc::now(), true),
            Err(Wait::NoRunner)
        );
    }

    #[test]
    fn retries_wait_for_the_backoff_and_stop_at_max_retries() {
        let now = Utc::now();
        let p = on();
        let spec = p.runner_for("a");
        // Default max_retries 2: runs 1, 2, 3, then give up.
        let AfterExit::Retry { at, attempt } = after_exit(spec, &p, 1, false, now) else {
            panic!("retry expected");
        };
        assert_eq!(attempt, 2);
        assert_eq!((at - now).num_seconds(), 30);
        let AfterExit::Retry { at, .. } = after_exit(spec, &p, 2, false, now) else {
            panic!("retry expected");
        };
        assert_eq!((at - now).num_seconds(), 60);
        assert_eq!(after_exit(spec, &p, 3, false, now), AfterExit::GiveUp);
        assert_eq!(after_exit(spec, &p, 1, true, now), AfterExit::Done);

        let mut c = cand("task_a", "a", Priority::High);
        c.attempts = 1;
        c.retry_at = Some(now + chrono::Duration::seconds(30));
        assert!(dispatch(&p, std::slice::from_ref(&c), &pool(8), now).is_empty());
        let later = now + chrono::Duration::seconds(31);
        assert_eq!(
            names(&dispatch(&p, std::slice::from_ref(&c), &pool(8), later)),
            ["task_a"]
        );
        c.attempts = 3;
        assert!(dispatch(&p, std::slice::from_ref(&c), &pool(8), later).is_empty());
        // A human may still start it.
        assert_eq!(may_start(&p, &c, &pool(8), later, true), Ok(()));
        c.attempts = 0;
        c.held = true;
        assert_eq!(may_start(&p, &c, &pool(8), later, false), Err(Wait::Held));
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let b = Duration::from_secs(10);
        assert_eq!(backoff(b, 1), Duration::from_secs(10));
        assert_eq!(backoff(b, 2), Duration::from_secs(20));
        assert_eq!(backoff(b, 3), Duration::from_secs(40));
        assert_eq!(backoff(b, 40), Duration::from_secs(3600));
    }

    #[test]
    fn placeholders_are_filled_and_unknown_braces_kept() {
        let v = Vars {
            prompt_file: "/p/prompt.md",
            task: "task_1",
            agent: "alice",
            session: "s1",
            model: Some("m"),
            root: "/p",
        };
        assert_eq!(
            expand(
                "--file={prompt_file} {task}/{agent}@{session}:{model} in {root}",
                &v
            ),
            "--file=/p/prompt.md task_1/alice@s1:m in /p"
        );
        assert_eq!(expand("{\"json\": 1} {x", &v), "{\"json\": 1} {x");
        assert_eq!(expand("{{task}}", &v), "{task_1}");
    }

    #[test]
    fn with_no_model_configured_the_model_arguments_are_left_out() {
        let argv = |words: &[&str]| words.iter().map(|w| (*w).to_string()).collect::<Vec<_>>();
        let command = argv(&[
            "claude",
            "-p",
            "--model",
            "{model}",
            "-m",
            "{model}",
            "--model={model}",
            "--",
            "{model}",
            "Work on {task}",
        ]);
        let mut v = Vars {
            task: "task_1",
            ..Vars::default()
        };
        assert_eq!(
            expand_command(&command, &v),
            argv(&["claude", "-p", "--", "Work on task_1"])
        );
        v.model = Some("claude-x");
        assert_eq!(
            expand_command(&command, &v),
            argv(&[
                "claude",
                "-p",
                "--model",
                "claude-x",
                "-m",
                "claude-x",
                "--model=claude-x",
                "--",
                "claude-x",
                "Work on task_1"
            ])
        );
    }

    #[test]
    fn the_time_limit_comes_from_the_runner_then_the_task_then_config() {
        let d = Duration::from_secs(300);
        let mut spec = on().runner_for("a").cloned().unwrap();
        assert_eq!(run_timeout(Some(&spec), None, d), d);
        assert_eq!(
            run_timeout(Some(&spec), Some(60), d),
            Duration::from_secs(60)
        );
        spec.timeout = Some(Duration::from_secs(5));
        assert_eq!(
            run_timeout(Some(&spec), Some(60), d),
            Duration::from_secs(5)
        );
    }
}
