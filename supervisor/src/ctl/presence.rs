//! `squadctl presence`: the lifecycle hook of interactive agent CLIs that
//! records whether the agent works, waits for its person or is idle
//! (`crate::agent_presence`; installed by `guard install`).

use crate::agent_presence::{self, Record};
use squad_protocol::hook::Format;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The hook formats, for `--format`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// Claude Code `PreToolUse`.
    Claude,
    /// OpenAI Codex CLI `PreToolUse`.
    Codex,
    /// GitHub Copilot CLI `preToolUse`.
    Copilot,
    /// Gemini CLI `BeforeTool`.
    Gemini,
}

impl FormatArg {
    /// The hook contract.
    pub(crate) fn format(self) -> Format {
        match self {
            FormatArg::Claude => Format::Claude,
            FormatArg::Codex => Format::Codex,
            FormatArg::Copilot => Format::Copilot,
            FormatArg::Gemini => Format::Gemini,
        }
    }
}

/// Record an agent CLI's state from its lifecycle hook (working, waiting
/// for you, idle).
///
/// Reads one hook event as JSON on stdin (Claude Code `UserPromptSubmit`,
/// `PermissionRequest`, `Notification`, `PostToolUse`, `Stop`,
/// `SessionEnd`; Gemini CLI `BeforeAgent`, `Notification`, `AfterTool`,
/// `AfterAgent`, `SessionEnd`) and writes the agent's record in
/// `.squad/run/presence/`, which `status` and `top` show ("waiting for
/// you"). `guard install --claude|--gemini` installs it. It never blocks the
/// CLI: it prints nothing and exits 0, whatever happens.
#[derive(Debug, clap::Args)]
pub struct PresenceArgs {
    /// The hook contract.
    #[arg(long, value_enum)]
    pub format: FormatArg,
}

/// The process of the agent CLI that ran this hook: the nearest ancestor
/// that is not a shell (hooks run through `sh -c`).
fn cli_process() -> (u32, u64) {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..4 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !matches!(comm.trim(), "sh" | "bash" | "dash" | "zsh") {
            break;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent pid is the 2nd field after the `(comm)`.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
        else {
            break;
        };
        pid = ppid;
    }
    (pid, crate::locks::process_start(pid).unwrap_or(0))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The project root: `--root`/`SQUAD_ROOT`, else the nearest `.squad/` at
/// or above the hook's `cwd`.
fn root_of(root_arg: Option<&Path>, cwd: Option<&str>) -> Option<PathBuf> {
    if let Some(r) = root_arg {
        return Some(r.to_path_buf());
    }
    let start = cwd.map(PathBuf::from)?;
    squad_protocol::teamdir::find_squad_root(&start).map(|f| f.root)
}

/// Runs `squadctl presence`: always exit 0.
pub(crate) fn run(root_arg: Option<&Path>, args: &PresenceArgs) -> u8 {
    if let Err(e) = record(root_arg, args) {
        tracing::debug!(error = %e, "presence not recorded");
    }
    crate::exit::OK
}

fn record(root_arg: Option<&Path>, args: &PresenceArgs) -> Result<(), String> {
    let format = args.format.format();
    let mut input = Vec::new();
    std::io::stdin()
        .lock()
        .take(1 << 20)
        .read_to_end(&mut input)
        .map_err(|e| e.to_string())?;
    let event: serde_json::Value = serde_json::from_slice(&input).map_err(|e| e.to_string())?;
    let Some(change) = agent_presence::state_of(format, &event) else {
        return Ok(());
    };
    let cwd = event["cwd"].as_str().map(str::to_string);
    let root = root_of(root_arg, cwd.as_deref()).ok_or("no project")?;
    let agent = match env("SQUAD_AGENT") {
        Some(a) if squad_protocol::IdKind::Agent.matches(&a) => a,
        Some(a) => return Err(format!("`{a}` is not an agent name")),
        None => {
            let id: String = event["session_id"]
                .as_str()
                .unwrap_or("session")
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .take(8)
                .collect::<String>()
                .to_lowercase();
            format!("{}-{id}", format.as_str())
        }
    };
    let path = agent_presence::path(&root, &agent);
    let Some((state, detail)) = change else {
        return crate::safefs::remove_project_file(&path).map_err(|e| e.to_string());
    };
    let now = chrono::Utc::now();
    // A wait already recorded goes on: it keeps its start, and a
    // notification about it (Claude Code sends one a few seconds after its
    // PermissionRequest) keeps the more precise detail: the command or
    // file asked about.
    let (detail, since) = match agent_presence::read_one(&path) {
        _ if state != agent_presence::State::Waiting => (detail, None),
        Some(old) if old.state == state => {
            let since = old.since.unwrap_or(old.at);
            if event["hook_event_name"] == "Notification" {
                (old.detail.or(detail), Some(since))
            } else {
                (detail, Some(since))
            }
        }
        _ => (detail, Some(now)),
    };
    let (pid, process_start) = cli_process();
    let rec = Record {
        agent,
        state,
        detail,
        cli: format.as_str().to_string(),
        session: env("SQUAD_SESSION"),
        task: env("SQUAD_TASK"),
        cwd,
        pid,
        process_start,
        at: now,
        since,
    };
    let mut bytes = serde_json::to_vec_pretty(&rec).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    crate::safefs::write_project_file(&path, &bytes, Some(0o777)).map_err(|e| e.to_string())
}

/// The lifecycle events whose hook records the agent's state
/// (`squadctl presence`, docs/guards.md "Which agent needs you"): Claude
/// Code and Gemini CLI. (Codex's and Copilot's hooks say nothing of a
/// person being waited for; a Codex hook would also need its own review.)
fn events(format: Format) -> &'static [&'static str] {
    match format {
        Format::Claude => &[
            "UserPromptSubmit",
            "PermissionRequest",
            "Notification",
            "PostToolUse",
            "Stop",
            "SessionEnd",
        ],
        Format::Gemini => &[
            "BeforeAgent",
            "Notification",
            "AfterTool",
            "AfterAgent",
            "SessionEnd",
        ],
        Format::Codex | Format::Copilot => &[],
    }
}

/// Our `squadctl presence` handlers in a settings file's `hooks` added (or
/// refreshed) or removed, the other entries kept (`guard install`):
/// `program` is the squadctl to run, quoted for the shell.
pub(crate) fn merge_hooks(
    hooks: &mut serde_json::Map<String, serde_json::Value>,
    format: Format,
    program: &str,
    add: bool,
) -> Result<(), String> {
    use serde_json::{Value, json};
    let command = format!("{program} presence --format {format}");
    let suffix = format!(" presence --format {format}");
    let timeout = if format == Format::Gemini { 10_000 } else { 10 };
    for event in events(format) {
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        let Value::Array(list) = list else {
            return Err(format!(
                "`hooks.{event}` is not a JSON array; fix it first (nothing was changed)"
            ));
        };
        for group in list.iter_mut() {
            if let Some(Value::Array(handlers)) = group.get_mut("hooks") {
                let had = handlers.len();
                handlers.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| c.ends_with(&suffix))
                });
                if had > 0 && handlers.is_empty() {
                    *group = Value::Null;
                }
            }
        }
        list.retain(|g| !g.is_null());
        if add {
            list.push(
                json!({"hooks": [{"type": "command", "command": command, "timeout": timeout}]}),
            );
        } else if list.is_empty() {
            hooks.remove(*event);
        }
    }
    Ok(())
}
