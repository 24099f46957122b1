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
/// `SessionEnd`; Codex `UserPromptSubmit`, `PermissionRequest`,
/// `PostToolUse`, `Stop`, `SessionEnd`; Gemini CLI `BeforeAgent`,
/// `Notification`, `AfterTool`, `AfterAgent`, `SessionEnd`; Copilot CLI
/// `userPromptSubmitted`, `notification`, `postToolUse`, `agentStop`,
/// `sessionEnd`, named by `--event`) and writes the agent's record in
/// `.squad/run/presence/`, which `status` and `top` show ("waiting for
/// you") and squadd tells the session's lead. `guard install
/// --claude|--codex|--gemini|--copilot` installs it.
/// It never blocks the CLI: it prints nothing and exits 0, whatever
/// happens.
#[derive(Debug, clap::Args)]
pub struct PresenceArgs {
    /// The hook contract.
    #[arg(long, value_enum)]
    pub format: FormatArg,
    /// The hook event, for a CLI whose input does not name it (Copilot
    /// CLI's camelCase hooks: `guard install --copilot` writes it into each
    /// hook line); else the input's `hook_event_name`.
    #[arg(long, value_name = "NAME")]
    pub event: Option<String>,
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

/// When the CLI says the event happened (Copilot CLI's `timestamp`: epoch
/// milliseconds, or RFC 3339 in its PascalCase format); Claude Code and
/// Gemini CLI say nothing.
fn event_time(event: &serde_json::Value) -> Option<chrono::DateTime<chrono::Utc>> {
    use serde_json::Value;
    match &event["timestamp"] {
        Value::Number(n) => n.as_i64().and_then(chrono::DateTime::from_timestamp_millis),
        Value::String(s) => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc)),
        _ => None,
    }
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
    let name = match &args.event {
        Some(n) => n.as_str(),
        None => event["hook_event_name"].as_str().unwrap_or(""),
    };
    let Some(change) = agent_presence::state_of_named(format, name, &event) else {
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
                .or(event["sessionId"].as_str())
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
    let happened = event_time(&event);
    let old = agent_presence::read_one(&path);
    // An event older than the record's is news no more: Copilot CLI runs
    // its notification hooks in the background, so one may finish after
    // the hook of the event that followed it. (Event times are compared,
    // not when hooks wrote: a slow hook must not hide the next event.)
    if let (Some(t), Some(o)) = (happened, &old)
        && o.at > t
    {
        return Ok(());
    }
    // A wait already recorded goes on: it keeps its start, and a
    // notification about it (Claude Code sends one a few seconds after its
    // PermissionRequest) keeps the more precise detail: the command or
    // file asked about.
    let (detail, since) = match old {
        _ if state != agent_presence::State::Waiting => (detail, None),
        Some(old) if old.state == state => {
            let since = old.since.unwrap_or(old.at);
            if name.eq_ignore_ascii_case("notification") {
                (old.detail.or(detail), Some(since))
            } else {
                (detail, Some(since))
            }
        }
        _ => (detail, Some(happened.unwrap_or(now))),
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
        at: happened.unwrap_or(now),
        since,
    };
    let mut bytes = serde_json::to_vec_pretty(&rec).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    crate::safefs::write_project_file(&path, &bytes, Some(0o777)).map_err(|e| e.to_string())
}

/// The lifecycle events whose hook records the agent's state
/// (`squadctl presence`, docs/guards.md "Which agent needs you"). Codex's
/// `PermissionRequest` runs in its approval path before the approval is
/// shown; Codex has no hook for its other questions to the person
/// (`request_user_input`), and each of its hooks needs its own review
/// (`guard install --codex --trust` reviews ours).
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
        Format::Copilot => &[
            "userPromptSubmitted",
            "notification",
            "postToolUse",
            "agentStop",
            "sessionEnd",
        ],
        Format::Codex => &[
            "UserPromptSubmit",
            "PermissionRequest",
            "PostToolUse",
            "Stop",
            "SessionEnd",
        ],
    }
}

/// Whether a handler is one of our `squadctl presence` lines.
fn is_ours(handler: &serde_json::Value, format: Format) -> bool {
    let marker = format!(" presence --format {format}");
    ["command", "bash"].iter().any(|k| {
        handler
            .get(*k)
            .and_then(serde_json::Value::as_str)
            .is_some_and(|c| c.contains(&marker))
    })
}

/// Our handler for `event`: Claude Code and Gemini CLI group handlers
/// (Gemini's timeout is in milliseconds); Copilot CLI lists them flat, its
/// camelCase input does not name the event (the line does), and only the
/// notifications of a prompt shown to the person are asked for.
fn handler(format: Format, program: &str, event: &str) -> serde_json::Value {
    use serde_json::json;
    let command = format!("{program} presence --format {format}");
    match format {
        Format::Copilot => {
            let mut h = json!({"type": "command", "bash": format!("{command} --event {event}"), "timeoutSec": 10});
            if event == "notification" {
                h["matcher"] = json!("permission_prompt|elicitation_dialog");
            }
            h
        }
        Format::Gemini => {
            json!({"hooks": [{"type": "command", "command": command, "timeout": 10_000}]})
        }
        _ => json!({"hooks": [{"type": "command", "command": command, "timeout": 10}]}),
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
    for event in events(format) {
        let list = hooks.entry(*event).or_insert_with(|| json!([]));
        let Value::Array(list) = list else {
            return Err(format!(
                "`hooks.{event}` is not a JSON array; fix it first (nothing was changed)"
            ));
        };
        // Copilot's handlers are the list's items; the others' are grouped.
        list.retain(|h| !is_ours(h, format));
        for group in list.iter_mut() {
            if let Some(Value::Array(handlers)) = group.get_mut("hooks") {
                let had = handlers.len();
                handlers.retain(|h| !is_ours(h, format));
                if had > 0 && handlers.is_empty() {
                    *group = Value::Null;
                }
            }
        }
        list.retain(|g| !g.is_null());
        if add {
            list.push(handler(format, program, event));
        } else if list.is_empty() {
            hooks.remove(*event);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn copilot_handlers_are_flat_name_their_event_and_go_on_uninstall() {
        let mut hooks = serde_json::Map::new();
        hooks.insert(
            "agentStop".into(),
            json!([{"type": "command", "bash": "notify.sh"}]),
        );
        merge_hooks(&mut hooks, Format::Copilot, "'/bin/squadctl'", true).unwrap();
        assert_eq!(
            hooks["notification"],
            json!([{"type": "command", "bash": "'/bin/squadctl' presence --format copilot --event notification", "timeoutSec": 10, "matcher": "permission_prompt|elicitation_dialog"}])
        );
        assert_eq!(hooks["agentStop"].as_array().unwrap().len(), 2);
        // Installed again: refreshed, not doubled.
        merge_hooks(&mut hooks, Format::Copilot, "squadctl", true).unwrap();
        assert_eq!(hooks["sessionEnd"].as_array().unwrap().len(), 1);
        assert_eq!(
            hooks["sessionEnd"][0]["bash"],
            "squadctl presence --format copilot --event sessionEnd"
        );
        merge_hooks(&mut hooks, Format::Copilot, "squadctl", false).unwrap();
        assert_eq!(
            serde_json::Value::Object(hooks),
            json!({"agentStop": [{"type": "command", "bash": "notify.sh"}]})
        );
    }

    #[test]
    fn codex_handlers_are_grouped_one_per_lifecycle_event() {
        let mut hooks = serde_json::Map::new();
        merge_hooks(&mut hooks, Format::Codex, "'/bin/squadctl'", true).unwrap();
        let events: Vec<&String> = hooks.keys().collect();
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PermissionRequest",
                "PostToolUse",
                "Stop",
                "SessionEnd"
            ]
        );
        assert_eq!(
            hooks["PermissionRequest"],
            json!([{"hooks": [{"type": "command", "command": "'/bin/squadctl' presence --format codex", "timeout": 10}]}])
        );
        merge_hooks(&mut hooks, Format::Codex, "squadctl", false).unwrap();
        assert!(hooks.is_empty(), "{hooks:?}");
    }
}
