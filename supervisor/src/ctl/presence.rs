//! `squadctl presence`: the lifecycle hook of interactive agent CLIs that
//! records whether the agent works, waits for its person or is idle
//! (`crate::agent_presence`; installed by `guard install`).

use crate::agent_presence::{self, Record};
use std::io::Read;
use std::path::{Path, PathBuf};

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
    pub format: super::guard::FormatArg,
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
        at: chrono::Utc::now(),
    };
    let mut bytes = serde_json::to_vec_pretty(&rec).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    crate::safefs::write_project_file(&path, &bytes, Some(0o777)).map_err(|e| e.to_string())
}
