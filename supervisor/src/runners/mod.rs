//! Agent runners (docs/runners.md): the effects of starting, watching and
//! stopping one agent process per ready task. The decisions (which task
//! starts, retries, time limits) are in `squad_policies::runners` and the
//! daemon's core (`daemon/core/runs.rs`), carried out by
//! `daemon/processes.rs`; `squadctl runs|run|stop` read the same records.
//!
//! Each run lives in `<session>/runs/<task>/`: `prompt.md` (what the agent
//! was told), `run.log` (its stdout and stderr, size-capped, the tail kept)
//! and `run.json` (pid, process start time, start, exit; written
//! atomically), which is how a restarted squadd re-adopts live runs.

pub(crate) mod check;
pub(crate) mod codex_trust;
pub(crate) mod contain;
pub(crate) mod hook_file;
pub(crate) mod process;
pub(crate) mod prompt;
pub(crate) mod setup;

pub(crate) use process::{Ended, OsProcesses, OutputSeen, Processes, Signal, SpawnRequest};

use crate::safefs::Dir;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use squad_policies::runners::{RunnerSpec, Vars, expand};
use squad_policies::usage::Usage;
use squad_protocol::fsx::read_regular;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

/// The folder of a session that holds its runs.
pub(crate) const RUNS_DIR: &str = "runs";
/// A run's record.
pub(crate) const RUN_JSON: &str = "run.json";
/// A run's output.
pub(crate) const RUN_LOG: &str = "run.log";
/// A run's prompt.
pub(crate) const PROMPT_FILE: &str = "prompt.md";

/// Where a run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RunState {
    /// The process runs.
    Running,
    /// It exited (see `completed`).
    Exited,
    /// It passed its time limit and was stopped.
    TimedOut,
    /// Stopped by `squadctl stop`.
    Stopped,
    /// squadd restarted and the process was gone.
    Lost,
    /// It could not be started.
    Failed,
    /// It passed its token or money budget and was stopped (held).
    OverBudget,
    /// Its task completed, and the lead rejected its work in review
    /// (`squadctl review reject`, docs/review.md): the task failed, the
    /// branch is kept; nothing starts it again by itself.
    Rejected,
}

impl RunState {
    /// The kebab-case word.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Exited => "exited",
            RunState::TimedOut => "timed-out",
            RunState::Stopped => "stopped",
            RunState::Lost => "lost",
            RunState::Failed => "failed",
            RunState::OverBudget => "over-budget",
            RunState::Rejected => "rejected",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Exit {
    /// When squadd saw it end.
    pub at: DateTime<Utc>,
    /// Exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// Signal, when one killed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    /// Task id.
    pub task: String,
    /// Agent.
    pub agent: String,
    /// Session directory name.
    pub session: String,
    /// Run number of this task, from 1.
    pub attempt: u32,
    /// State.
    pub state: RunState,
    /// Process id (the process group's id too).
    pub pid: u32,
    /// The process's start time (seconds since the epoch, as the kernel
    /// reports it): a pid reused by another process has another.
    pub process_start: u64,
    /// When squadd started it.
    pub started_at: DateTime<Utc>,
    /// When its time limit passes.
    pub deadline: DateTime<Utc>,
    /// The argv it was started with.
    pub command: Vec<String>,
    /// How it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<Exit>,
    /// Whether the task was completed when it ended.
    #[serde(default)]
    pub completed: bool,
    /// When the next run of the task is due (after a failed run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
    /// Only a human starts the task again (lost, stopped, retries used).
    #[serde(default)]
    pub held: bool,
    /// The model config.json named for the run (`None`: the agent CLI's
    /// own default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens and cost as the CLI's output reported them
    /// (docs/runners.md, "Tokens and cost").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The CLI's own warning, seen in the run's output, that its model is
    /// deprecated or retiring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_warning: Option<String>,
    /// Why squadd stopped it over budget: the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_budget: Option<String>,
    /// Tokens and cost of the task's earlier runs (its retries), so the
    /// task's and the session's totals survive the record's replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_usage: Option<Usage>,
    /// What this run's unmerged branch shares with other runs of its
    /// session, or would conflict on with the session's branch, as squadd
    /// last looked (docs/worktrees.md, "Overlap told before merge").
    #[serde(default, skip_serializing_if = "Overlaps::is_empty")]
    pub overlaps: Overlaps,
    /// The agent CLI's own session (conversation) id, as its output said
    /// it (Claude Code `session_id`, Codex `thread_id`): what a later run
    /// resumes (docs/runners.md, "Resuming the agent's conversation").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

/// A worktree run's branch against its session's other unmerged runs and
/// its session's branch (issue 44 item 4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Overlaps {
    /// Each other unmerged run of the session changing some of the same
    /// files: its task and those files.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub with: std::collections::BTreeMap<String, Vec<String>>,
    /// The files on which the branch would conflict with the session's
    /// branch if merged now (`git merge-tree`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// The session's branch, when it conflicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Overlaps {
    /// Nothing shared, nothing in conflict.
    pub(crate) fn is_empty(&self) -> bool {
        self.with.is_empty() && self.conflicts.is_empty()
    }
}

impl RunRecord {
    /// Tokens and cost of the task over all its runs so far.
    pub(crate) fn task_usage(&self) -> Option<Usage> {
        squad_policies::usage::sum(self.earlier_usage.iter().chain(self.usage.iter()))
    }
}

/// `<session_dir>/runs/<task>`.
pub(crate) fn run_dir(session_dir: &Path, task: &str) -> PathBuf {
    session_dir.join(RUNS_DIR).join(task)
}

/// Opens `<session_dir>/runs/<task>/` through directory descriptors (see
/// `safefs`): agents write in the session directory, and squadd must not be
/// led to write a prompt, a record or a log elsewhere, so no component is
/// followed if it is a link, and nothing is checked by path then reopened.
/// With `create`, `runs/` and `<task>/` are made when missing (the session
/// directory itself never is: one that vanished stays gone).
fn open_run_dir(session_dir: &Path, task: &str, create: bool) -> io::Result<Dir> {
    let (sessions, name) = crate::safefs::project_parent(session_dir, None)?;
    let session = sessions.open_dir(OsStr::new(&name))?;
    if create {
        session
            .create_dir(OsStr::new(RUNS_DIR), 0o777)?
            .create_dir(OsStr::new(task), 0o777)
    } else {
        session
            .open_dir(OsStr::new(RUNS_DIR))?
            .open_dir(OsStr::new(task))
    }
}

/// The folder `run_dir`, opened from its project root without following a
/// link (see `safefs::project_parent`).
fn open_existing(run_dir: &Path) -> io::Result<Dir> {
    let (parent, name) = crate::safefs::project_parent(run_dir, None)?;
    parent.open_dir(OsStr::new(&name))
}

/// Creates `<session_dir>/runs/<task>/` (neither folder may be a link; see
/// [`open_run_dir`]) and returns its path.
pub(crate) fn ensure_run_dir(session_dir: &Path, task: &str) -> io::Result<PathBuf> {
    open_run_dir(session_dir, task, true)?;
    Ok(run_dir(session_dir, task))
}

/// Writes a run's prompt.md atomically, never through a link.
pub(crate) fn write_prompt(run_dir: &Path, text: &str) -> io::Result<()> {
    open_existing(run_dir)?.write_atomic(PROMPT_FILE, text.as_bytes(), 0o666)
}

/// Reads a run.json (through fsx: an agent could put anything there).
pub(crate) fn read_record(run_dir: &Path) -> Option<RunRecord> {
    let bytes = read_regular(&run_dir.join(RUN_JSON), 1 << 20).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes a run.json atomically, never through a link.
pub(crate) fn write_record(run_dir: &Path, record: &RunRecord) -> io::Result<()> {
    let mut text = serde_json::to_vec_pretty(record).map_err(io::Error::other)?;
    text.push(b'\n');
    open_existing(run_dir)?.write_atomic(RUN_JSON, &text, 0o666)
}

/// Every run record of a project: (session directory, record).
pub(crate) fn all_records(root: &Path) -> Vec<(PathBuf, RunRecord)> {
    let mut out = Vec::new();
    let Ok(sessions) = squad_protocol::tree::session_dirs(root) else {
        return out;
    };
    for dir in sessions {
        let Ok(entries) = std::fs::read_dir(dir.join(RUNS_DIR)) else {
            continue;
        };
        let mut runs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        runs.sort();
        for run in runs {
            if let Some(r) = read_record(&run) {
                out.push((dir.clone(), r));
            }
        }
    }
    out
}

/// The findings of a project's `config.json` (for `squadctl validate`):
/// (diagnostics, files checked).
pub(crate) fn config_diagnostics(project: &Path) -> (Vec<squad_protocol::Diagnostic>, usize) {
    let team = squad_protocol::teamdir::locate(project)
        .map(|t| t.path)
        .unwrap_or_else(|| project.join(squad_protocol::tree::SQUAD_DIR));
    let path = team.join(squad_protocol::config::CONFIG_FILE);
    match squad_protocol::fsx::read_regular_to_string(&path, 1 << 20) {
        Ok(text) => (squad_protocol::config::parse(&path, &text).1, 1),
        Err(squad_protocol::fsx::ReadError::NotFound) => (Vec::new(), 0),
        Err(e) => (
            vec![squad_protocol::Diagnostic::new(
                &path,
                squad_protocol::Rule::ConfigInvalidJson,
                format!("cannot read config.json: {e}"),
                "config.json is a regular UTF-8 file of at most 1 MiB",
            )],
            1,
        ),
    }
}

/// Whether the recorded process is still the one squadd started.
/// A zombie (ended, not yet reaped by whoever inherited it) is not alive.
pub(crate) fn alive(pid: u32, process_start: u64) -> bool {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System};
    if pid <= 1 {
        return false;
    }
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    system
        .process(pid)
        .is_some_and(|p| p.start_time() == process_start && p.status() != ProcessStatus::Zombie)
}

/// Whether the process of a run record is alive and really that run: its
/// start time matches and its environment names the run's task and
/// session. run.json sits in a directory agents can write to; a forged
/// record must not make squadd adopt (and later signal) a stranger.
pub(crate) fn is_run_process(rec: &RunRecord) -> bool {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};
    if rec.pid <= 1 {
        return false;
    }
    let pid = Pid::from_u32(rec.pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing().with_environ(UpdateKind::Always),
    );
    let Some(p) = system.process(pid) else {
        return false;
    };
    let has = |k: &str, v: &str| {
        let want = format!("{k}={v}");
        p.environ()
            .iter()
            .any(|e| e.as_encoded_bytes() == want.as_bytes())
    };
    p.start_time() == rec.process_start
        && p.status() != ProcessStatus::Zombie
        && has("SQUAD_TASK", &rec.task)
        && has("SQUAD_SESSION", &rec.session)
}

/// The process of a run whose pid was never recorded (squadd was killed
/// between the spawn and the second write of run.json): the process whose
/// environment names the run's root, session and task and whose parent's
/// does not (the runner itself, not one of its children). (pid, start time).
pub(crate) fn find_run_process(root: &Path, session: &str, task: &str) -> Option<(u32, u64)> {
    use sysinfo::{ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_environ(UpdateKind::Always),
    );
    let wanted = [
        format!("SQUAD_TASK={task}"),
        format!("SQUAD_SESSION={session}"),
        format!("SQUAD_ROOT={}", root.display()),
    ];
    let is_run = |p: &sysinfo::Process| {
        p.status() != ProcessStatus::Zombie
            && wanted.iter().all(|w| {
                p.environ()
                    .iter()
                    .any(|e| e.as_encoded_bytes() == w.as_bytes())
            })
    };
    system
        .processes()
        .values()
        .filter(|p| is_run(p))
        .filter(|p| {
            p.parent()
                .and_then(|pp| system.process(pp))
                .is_none_or(|pp| !is_run(pp))
        })
        .map(|p| (p.pid().as_u32(), p.start_time()))
        .min_by_key(|(_, start)| *start)
}

/// Sends `signal` to the process group `pid` leads.
pub(crate) fn signal_group(pid: u32, signal: i32) -> io::Result<()> {
    let Ok(pid) = i32::try_from(pid) else {
        return Err(io::Error::other("pid out of range"));
    };
    if pid <= 1 {
        return Err(io::Error::other("refusing to signal pid <= 1"));
    }
    // SAFETY: kill(2) with a negative pid signals the group; no memory involved.
    if unsafe { libc::kill(-pid, signal) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The environment every run gets, so the guards and the squad-protocol
/// skill inside it know who and where they are.
pub(crate) fn squad_env(
    root: &Path,
    session: &str,
    agent: &str,
    task: &str,
) -> Vec<(String, String)> {
    vec![
        ("SQUAD_AGENT".into(), agent.into()),
        ("SQUAD_TASK".into(), task.into()),
        ("SQUAD_SESSION".into(), session.into()),
        ("SQUAD_ROOT".into(), root.display().to_string()),
    ]
}

/// The environment of a run: from `inherited` (squadd's own) only the
/// allow-list (`child_env::ALLOWED_ENV`), `LC_*` and the names in `pass_env`; `PATH` led by
/// `squadctl_dir` (so an agent always finds the squadctl of this squadd);
/// then the squad variables; then the runner's `env:` (placeholders
/// expanded), which wins. Names or values that are not UTF-8 are dropped.
pub(crate) fn run_env(
    inherited: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    pass_env: &[String],
    squadctl_dir: Option<&Path>,
    spec: &RunnerSpec,
    vars: &Vars<'_>,
    root: &Path,
) -> Vec<(String, String)> {
    let mut env = crate::child_env::cleared(inherited, pass_env);
    if let Some(dir) = squadctl_dir.and_then(Path::to_str) {
        let path = match env.get("PATH") {
            Some(p) if !p.is_empty() => format!("{dir}:{p}"),
            _ => format!("{dir}:/usr/local/bin:/usr/bin:/bin"),
        };
        env.insert("PATH".into(), path);
    }
    env.extend(squad_env(root, vars.session, vars.agent, vars.task));
    env.insert("SQUAD_PROMPT_FILE".into(), vars.prompt_file.into());
    if let Some(model) = vars.model {
        env.insert("SQUAD_MODEL".into(), model.into());
    }
    for (k, v) in &spec.env {
        // A variable naming the model is not set when none is configured.
        if vars.model.is_none() && v.contains("{model}") {
            continue;
        }
        env.insert(k.clone(), expand(v, vars));
    }
    env.into_iter().collect()
}

/// Everything a run is started with: argv expanded, working directory
/// (relative to the root unless absolute), and `env` (see [`run_env`]).
pub(crate) fn spawn_request(
    spec: &RunnerSpec,
    vars: &Vars<'_>,
    root: &Path,
    run_dir: &Path,
    env: Vec<(String, String)>,
    log_max: u64,
    resume: Option<&str>,
) -> io::Result<SpawnRequest> {
    let squadctl = if spec.mcp {
        // The squadctl installed beside this squadd (agent CLIs start MCP
        // servers by absolute path, without the user's shell PATH).
        let squadctl = std::env::current_exe()?.with_file_name("squadctl");
        if !squadctl.is_file() {
            return Err(io::Error::other(format!(
                "`mcp: true` needs squadctl beside squadd, and {} is not there",
                squadctl.display()
            )));
        }
        Some(squadctl)
    } else {
        None
    };
    // `review changes` resumes the agent CLI's conversation where it can;
    // elsewhere the run starts afresh.
    let argv = resume
        .and_then(|id| resume_line(spec, vars, squadctl.as_deref(), id))
        .unwrap_or_else(|| command_line(spec, vars, squadctl.as_deref()));
    let cwd = match &spec.cwd {
        Some(c) => {
            let c = expand(c, vars);
            let p = Path::new(&c);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                root.join(p)
            }
        }
        None => root.to_path_buf(),
    };
    Ok(SpawnRequest {
        argv,
        cwd,
        env,
        run_dir: run_dir.to_path_buf(),
        log_max,
    })
}

/// The argv of a run that resumes the agent CLI's own conversation
/// `conversation` (a run's recorded `conversation`): the run's command line
/// as [`command_line`] makes it, turned into its CLI's resume
/// (`squad_policies::runners::resume_command`: Claude Code `--resume ID`,
/// Codex `exec resume ID`); `None` for a CLI that cannot resume, where
/// the run starts afresh with the prompt alone.
pub(crate) fn resume_line(
    spec: &RunnerSpec,
    vars: &Vars<'_>,
    squadctl: Option<&Path>,
    conversation: &str,
) -> Option<Vec<String>> {
    squad_policies::runners::resume_command(&command_line(spec, vars, squadctl), conversation)
}

/// Our server entry in a JSON configuration (`mcpServers.squad`), as
/// `mcp install` writes it and runners with `mcp: true` pass it.
pub(crate) fn mcp_json_entry(
    host: squad_policies::guard_doctor::Cli,
    program: &str,
    args: &[String],
) -> serde_json::Value {
    let mut entry = serde_json::json!({"command": program, "args": args});
    use squad_policies::guard_doctor::Cli;
    match host {
        // Copilot CLI's local servers name their type and the tools allowed.
        Cli::Copilot => {
            entry["type"] = serde_json::json!("local");
            entry["tools"] = serde_json::json!(["*"]);
        }
        // Gemini CLI infers the transport from `command`; `trust` runs the
        // server's tools without a confirmation (headless runs have no one
        // to confirm).
        Cli::Gemini => entry["trust"] = serde_json::json!(true),
        Cli::Claude | Cli::Codex => entry["type"] = serde_json::json!("stdio"),
    }
    entry
}

/// A run's argv: the runner's command with its placeholders filled in and,
/// with `squadctl` (a runner with `mcp: true`), the flags that give its
/// agent CLI the MCP server `squad`: `squadctl --root R mcp --agent A
/// --session S` (docs/runners.md). The flags go before a `--` the command
/// has, else at its end, so they never land among a variadic option's
/// values or the prompt.
pub(crate) fn command_line(
    spec: &RunnerSpec,
    vars: &Vars<'_>,
    squadctl: Option<&Path>,
) -> Vec<String> {
    use squad_policies::guard_doctor::Cli;
    let mut argv = squad_policies::runners::expand_command(&spec.command, vars);
    let (Some(squadctl), Some(cli)) = (squadctl, argv.first().and_then(|p| Cli::of_program(p)))
    else {
        return argv;
    };
    let program = squadctl.display().to_string();
    let args: Vec<String> = [
        "--root",
        vars.root,
        "mcp",
        "--agent",
        vars.agent,
        "--session",
        vars.session,
    ]
    .map(str::to_string)
    .to_vec();
    let servers = |entry| serde_json::json!({ "mcpServers": { "squad": entry } }).to_string();
    let flags: Vec<String> = match cli {
        // `mcp__squad` pre-approves the server's tools: `claude -p` has no
        // human to ask.
        Cli::Claude => vec![
            "--mcp-config".into(),
            servers(mcp_json_entry(cli, &program, &args)),
            "--allowedTools".into(),
            "mcp__squad".into(),
        ],
        // `-c` values are TOML; a JSON string or array of strings is one.
        // `codex exec` never asks: tools that need approval would fail.
        Cli::Codex => vec![
            "-c".into(),
            format!("mcp_servers.squad.command={}", serde_json::json!(program)),
            "-c".into(),
            format!("mcp_servers.squad.args={}", serde_json::json!(args)),
            "-c".into(),
            "mcp_servers.squad.default_tools_approval_mode=\"approve\"".into(),
        ],
        Cli::Copilot => vec![
            "--additional-mcp-config".into(),
            servers(mcp_json_entry(cli, &program, &args)),
        ],
        // No flag configures a server: refused with `mcp: true` when the
        // policy loads (`squadctl mcp install --gemini` instead).
        Cli::Gemini => return argv,
    };
    let at = argv
        .iter()
        .skip(1)
        .position(|a| a == "--")
        .map_or(argv.len(), |i| i + 1);
    argv.splice(at..at, flags);
    argv
}

/// The last `lines` lines of a run's log.
pub(crate) fn log_tail(run_dir: &Path, lines: usize) -> Vec<String> {
    let Ok(bytes) = read_regular(&run_dir.join(RUN_LOG), 64 << 20) else {
        return Vec::new();
    };
    let start = bytes.len().saturating_sub(16 * 1024);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| crate::text::escape(l).into_owned())
        .collect()
}

/// The newest modification time among the session's files that name the
/// agent (its progress updates, messages, error reports): when it last
/// wrote to the protocol.
pub(crate) fn last_write(session_dir: &Path, agent: &str) -> Option<DateTime<Utc>> {
    last_write_file(session_dir, agent).map(|(_, at)| at)
}

/// [`last_write`] with the file's name (`squadctl top` shows both).
pub(crate) fn last_write_file(session_dir: &Path, agent: &str) -> Option<(String, DateTime<Utc>)> {
    let needle = format!("-{agent}-");
    let mut newest: Option<(String, std::time::SystemTime)> = None;
    for e in std::fs::read_dir(session_dir).ok()?.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.contains(&needle) {
            continue;
        }
        if let Ok(m) = e.metadata().and_then(|m| m.modified())
            && newest.as_ref().is_none_or(|(_, n)| m > *n)
        {
            newest = Some((name.into_owned(), m));
        }
    }
    newest.map(|(n, m)| (n, DateTime::<Utc>::from(m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec(command: &[&str]) -> RunnerSpec {
        let yaml = format!(
            "runners:\n  agents:\n    \"*\":\n      command: {}\n      mcp: true\n",
            serde_json::json!(command)
        );
        squad_policies::policy::Policy::parse(Some(&yaml))
            .unwrap()
            .runners
            .agents["*"]
            .clone()
    }

    #[test]
    fn mcp_runners_get_the_squad_server_for_their_agent() {
        let vars = Vars {
            prompt_file: "/p/prompt.md",
            task: "task_1",
            agent: "backend",
            session: "s1",
            model: Some("m"),
            root: "/proj",
        };
        let ctl = Path::new("/bin/squadctl");
        let server = [
            "--root",
            "/proj",
            "mcp",
            "--agent",
            "backend",
            "--session",
            "s1",
        ];
        // Claude: the flags at the end (after the prompt), never among a
        // variadic option's values.
        let argv = command_line(&spec(&["claude", "-p", "do {task}"]), &vars, Some(ctl));
        assert_eq!(argv[..3], ["claude", "-p", "do task_1"]);
        assert_eq!(argv[3], "--mcp-config");
        let config: serde_json::Value = serde_json::from_str(&argv[4]).unwrap();
        assert_eq!(config["mcpServers"]["squad"]["command"], "/bin/squadctl");
        assert_eq!(
            config["mcpServers"]["squad"]["args"],
            serde_json::json!(server)
        );
        assert_eq!(argv[5..], ["--allowedTools", "mcp__squad"]);
        // Codex: TOML overrides, before a `--`.
        let argv = command_line(
            &spec(&["/usr/bin/codex", "exec", "--", "x"]),
            &vars,
            Some(ctl),
        );
        assert_eq!(
            argv,
            [
                "/usr/bin/codex",
                "exec",
                "-c",
                "mcp_servers.squad.command=\"/bin/squadctl\"",
                "-c",
                &format!("mcp_servers.squad.args={}", serde_json::json!(server)),
                "-c",
                "mcp_servers.squad.default_tools_approval_mode=\"approve\"",
                "--",
                "x"
            ]
        );
        // Copilot: its own entry shape.
        let argv = command_line(&spec(&["copilot", "-p", "x"]), &vars, Some(ctl));
        assert_eq!(argv[3], "--additional-mcp-config");
        let config: serde_json::Value = serde_json::from_str(&argv[4]).unwrap();
        assert_eq!(config["mcpServers"]["squad"]["type"], "local");
        // Without squadctl (mcp off), the command as written.
        let argv = command_line(&spec(&["claude", "-p", "x"]), &vars, None);
        assert_eq!(argv, ["claude", "-p", "x"]);
    }

    #[test]
    fn a_resumed_run_keeps_its_command_line_and_mcp_server() {
        let vars = Vars {
            prompt_file: "/p/prompt.md",
            task: "task_1",
            agent: "backend",
            session: "s1",
            model: None,
            root: "/proj",
        };
        let ctl = Path::new("/bin/squadctl");
        let id = "0199a213-81c0-7800-8aa1-bbab2a035a53";
        let claude = spec(&["claude", "-p", "do {task}", "--model", "{model}"]);
        let argv = resume_line(&claude, &vars, Some(ctl), id).unwrap();
        assert_eq!(argv[..5], ["claude", "--resume", id, "-p", "do task_1"]);
        assert_eq!(argv[5], "--mcp-config", "{argv:?}");
        let codex = spec(&["codex", "exec", "--json", "--", "do {task}"]);
        let argv = resume_line(&codex, &vars, Some(ctl), id).unwrap();
        assert_eq!(argv[..3], ["codex", "exec", "--json"]);
        assert_eq!(argv[argv.len() - 4..], ["resume", id, "--", "do task_1"]);
        assert_eq!(
            resume_line(&spec(&["copilot", "-p", "x"]), &vars, None, id),
            None
        );
    }

    fn record(pid: u32, task: &str, session: &str) -> RunRecord {
        RunRecord {
            task: task.into(),
            agent: "a".into(),
            session: session.into(),
            attempt: 1,
            state: RunState::Running,
            pid,
            process_start: crate::locks::process_start(pid).unwrap_or(0),
            started_at: Utc::now(),
            deadline: Utc::now(),
            command: Vec::new(),
            exit: None,
            completed: false,
            retry_at: None,
            held: false,
            model: None,
            usage: None,
            model_warning: None,
            over_budget: None,
            earlier_usage: None,
            overlaps: Default::default(),
            conversation: None,
        }
    }

    /// Issue 26 item 6: squadd's secrets do not reach a run; the
    /// allow-list, `pass_env`, the squad variables and the runner's `env:` do.
    #[test]
    fn a_run_gets_the_allow_list_and_nothing_else() {
        let spec = RunnerSpec {
            command: vec!["agent".into()],
            env: [("EXTRA".to_string(), "{task}".to_string())].into(),
            cwd: None,
            timeout: None,
            max_retries: 0,
            guard_off: false,
            worktree: None,
            merge: None,
            mcp: false,
            host: None,
        };
        let vars = Vars {
            prompt_file: "/p/prompt.md",
            task: "task_1",
            agent: "alpha",
            session: "s1",
            model: Some("m"),
            root: "/p",
        };
        let inherited = [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("SECRET_TOKEN", "hunter2"),
            ("ANTHROPIC_API_KEY", "sk-1"),
            ("SQUAD_TASK", "forged"),
        ]
        .map(|(k, v)| (k.into(), v.into()));
        let env: BTreeMap<String, String> = run_env(
            inherited,
            &["ANTHROPIC_API_KEY".to_string()],
            Some(Path::new("/opt/squad/bin")),
            &spec,
            &vars,
            Path::new("/p"),
        )
        .into_iter()
        .collect();
        assert_eq!(env["PATH"], "/opt/squad/bin:/usr/bin:/bin");
        assert_eq!(env["HOME"], "/home/u");
        assert_eq!(env["LC_ALL"], "C.UTF-8");
        assert_eq!(env["ANTHROPIC_API_KEY"], "sk-1", "passed by policy");
        assert!(!env.contains_key("SECRET_TOKEN"));
        assert_eq!(env["SQUAD_TASK"], "task_1", "never inherited");
        assert_eq!(env["EXTRA"], "task_1");
        assert_eq!(env["SQUAD_PROMPT_FILE"], "/p/prompt.md");
    }

    #[test]
    fn the_tail_of_run_log_is_its_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..300).map(|i| format!("line {i:04}\n")).collect();
        std::fs::write(dir.path().join(RUN_LOG), &text).unwrap();
        assert_eq!(log_tail(dir.path(), 2), ["line 0298", "line 0299"]);
    }

    #[test]
    fn a_symlink_is_never_a_run_folder() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(RUNS_DIR)).unwrap();
        assert!(ensure_run_dir(dir.path(), "task_1").is_err());
        let other = tempfile::tempdir().unwrap();
        let d = ensure_run_dir(other.path(), "task_1").unwrap();
        assert!(d.is_dir());
        assert!(
            ensure_run_dir(other.path(), "task_1").is_ok(),
            "again: fine"
        );
    }

    /// A run folder swapped for a link after squadd made it: the record,
    /// the prompt and run.log are refused, nothing outside changes
    /// (they were written by path after a check).
    #[test]
    fn a_run_folder_swapped_for_a_link_is_never_written_through() {
        let root = tempfile::tempdir().unwrap();
        let session = root.path().join(".squad/sessions/s1");
        std::fs::create_dir_all(&session).unwrap();
        let dir = ensure_run_dir(&session, "task_1").unwrap();
        write_record(&dir, &record(1, "task_1", "s1")).unwrap();
        write_prompt(&dir, "p").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let big = "x".repeat(5000);
        std::fs::write(elsewhere.path().join(RUN_LOG), &big).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &dir).unwrap();
        assert!(write_record(&dir, &record(1, "task_1", "s1")).is_err());
        assert!(write_prompt(&dir, "p").is_err());
        assert!(contain::CappedLog::open(&dir, 1000).is_err());
        assert_eq!(
            std::fs::read_to_string(elsewhere.path().join(RUN_LOG)).unwrap(),
            big
        );
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 1);
    }

    #[test]
    fn only_the_runs_own_process_is_recognised() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("SQUAD_TASK", "task_1")
            .env("SQUAD_SESSION", "s1")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until its exec the child still has the test's environment.
        let t0 = std::time::Instant::now();
        while !is_run_process(&record(pid, "task_1", "s1")) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // A forged record naming someone else's process, or the wrong task.
        assert!(!is_run_process(&record(pid, "task_2", "s1")));
        assert!(!is_run_process(&record(std::process::id(), "task_1", "s1")));
        let mut stale = record(pid, "task_1", "s1");
        stale.process_start += 1;
        assert!(!is_run_process(&stale));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!is_run_process(&record(pid, "task_1", "s1")));
    }
}
