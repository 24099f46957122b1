//! Which agent needs a person (issue 38, item 7): the state of agents a
//! person runs interactively, as their CLI's own lifecycle hooks report it
//! (`squadctl presence`, installed by `guard install`): working, waiting
//! for the person (a permission, a question), or idle. One record per
//! agent in `.squad/run/presence/<agent>.json`, written atomically by the
//! hook; `status` and `top` read them, and squadd watches them to tell the
//! session's lead when an agent starts waiting (`daemon/core/waiting.rs`;
//! docs/guards.md, "Which agent needs you").

use serde::{Deserialize, Serialize};
use serde_json::Value;
use squad_protocol::hook::Format;
use std::path::{Path, PathBuf};

/// Where the records are, under `.squad/`.
pub(crate) const DIR: &str = "run/presence";

/// What an agent is doing, as its CLI said last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum State {
    /// A prompt is being worked on.
    Working,
    /// The CLI waits for the person: a permission or an answer.
    Waiting,
    /// The turn ended; the CLI waits for a new prompt.
    Idle,
}

impl State {
    /// The kebab-case word.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            State::Working => "working",
            State::Waiting => "waiting",
            State::Idle => "idle",
        }
    }
}

/// One agent's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The agent (`SQUAD_AGENT`, else `<cli>-<its session id's start>`).
    pub agent: String,
    /// Its state.
    pub state: State,
    /// What it waits for (`permission to use Bash: …`), or did last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The CLI (`claude`, `gemini`, …).
    pub cli: String,
    /// The squad session (`SQUAD_SESSION`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Its task (`SQUAD_TASK`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The CLI's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The CLI's process (pid, start time): a record whose process is gone
    /// is stale.
    #[serde(default)]
    pub pid: u32,
    /// Its start time as the kernel reports it.
    #[serde(default)]
    pub process_start: u64,
    /// When its event happened: the CLI's own `timestamp` when the input
    /// has one (Copilot CLI), else when the hook wrote it.
    pub at: chrono::DateTime<chrono::Utc>,
    /// While waiting: when the wait began (kept by the hooks that follow
    /// while it lasts), so that one wait is told once however often its
    /// record is written, and a new wait is new even when squadd saw no
    /// record between the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<chrono::DateTime<chrono::Utc>>,
}

/// What one hook event says: the new state and its detail; `None` for an
/// event that changes nothing, `Some(None)` for the end of the CLI's
/// session (the record goes). The event is named by the input's
/// `hook_event_name`.
#[cfg(test)]
pub(crate) fn state_of(format: Format, event: &Value) -> Option<Option<(State, Option<String>)>> {
    let name = event["hook_event_name"].as_str().unwrap_or("");
    state_of_named(format, name, event)
}

/// [`state_of`] for the event `name` (Copilot CLI's camelCase inputs do
/// not name their event: its hook line says it, `--event`).
pub(crate) fn state_of_named(
    format: Format,
    name: &str,
    event: &Value,
) -> Option<Option<(State, Option<String>)>> {
    let text = |k: &str| {
        event[k]
            .as_str()
            .map(|s| s.chars().take(300).collect::<String>())
    };
    let tool = || {
        let input = &event["tool_input"];
        let what = input["command"]
            .as_str()
            .or(input["file_path"].as_str())
            .map(|s| s.chars().take(200).collect::<String>());
        let tool = event["tool_name"].as_str().unwrap_or("a tool");
        Some(match what {
            Some(w) => format!("permission to use {tool}: {w}"),
            None => format!("permission to use {tool}"),
        })
    };
    let working = Some(Some((State::Working, None)));
    match (format, name) {
        (_, "SessionEnd") | (Format::Copilot, "sessionEnd") => Some(None),
        // Copilot CLI: only a prompt shown to the person is a wait (its
        // `permissionRequest` runs before its rules, for every call).
        (Format::Copilot, "notification" | "Notification") => {
            let kind = event["notification_type"].as_str().unwrap_or("");
            matches!(kind, "permission_prompt" | "elicitation_dialog")
                .then(|| Some((State::Waiting, text("message"))))
        }
        (Format::Copilot, "userPromptSubmitted" | "postToolUse") => working,
        (Format::Copilot, "agentStop") => Some(Some((State::Idle, None))),
        (Format::Copilot, _) => None,
        // Codex runs it in its approval path, before the approval is shown
        // (guardian review aside).
        (Format::Claude | Format::Codex, "PermissionRequest") => {
            Some(Some((State::Waiting, tool())))
        }
        (Format::Claude | Format::Gemini, "Notification") => {
            let kind = event["notification_type"].as_str().unwrap_or("");
            if kind == "idle_prompt" {
                Some(Some((State::Idle, text("message"))))
            } else {
                Some(Some((State::Waiting, text("message"))))
            }
        }
        (_, "UserPromptSubmit" | "BeforeAgent" | "PostToolUse" | "AfterTool") => working,
        (_, "Stop" | "AfterAgent") => Some(Some((State::Idle, None))),
        _ => None,
    }
}

/// The largest record read.
pub(crate) const MAX_BYTES: u64 = 64 * 1024;

/// One record, when it is there, valid and its CLI's process alive.
pub(crate) fn read_one(path: &Path) -> Option<Record> {
    read_checked(path).ok().flatten()
}

/// One record: `Ok(None)` when there is none or its CLI's process is
/// gone; `Err` with why one is refused: not a regular file (a FIFO, a
/// link: never followed, never blocking), over [`MAX_BYTES`], not a
/// record, or naming another agent than its file's name.
pub(crate) fn read_checked(path: &Path) -> Result<Option<Record>, String> {
    use squad_protocol::fsx::ReadError;
    let bytes = match squad_protocol::fsx::read_regular(path, MAX_BYTES) {
        Ok(b) => b,
        Err(ReadError::NotFound) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let r = serde_json::from_slice::<Record>(&bytes)
        .map_err(|e| format!("not a presence record: {e}"))?;
    let name = path.file_stem().map(|s| s.to_string_lossy());
    if name.as_deref() != Some(r.agent.as_str()) {
        return Err(format!(
            "names agent `{}`, not its file's name",
            r.agent.chars().take(64).collect::<String>()
        ));
    }
    Ok(Some(r).filter(|r| r.pid == 0 || crate::runners::alive(r.pid, r.process_start)))
}

/// The records of a project, newest state per agent; those whose CLI
/// process is gone are left out.
pub(crate) fn read_all(root: &Path) -> Vec<Record> {
    let dir = root.join(squad_protocol::tree::SQUAD_DIR).join(DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<Record> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| read_one(&e.path()))
        .collect();
    out.sort_by(|a, b| a.agent.cmp(&b.agent));
    out
}

/// The record's file.
pub(crate) fn path(root: &Path, agent: &str) -> PathBuf {
    root.join(squad_protocol::tree::SQUAD_DIR)
        .join(DIR)
        .join(format!("{agent}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_events_map_to_states() {
        let permission = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "echo hi > out.txt"}});
        assert_eq!(
            state_of(Format::Claude, &permission),
            Some(Some((
                State::Waiting,
                Some("permission to use Bash: echo hi > out.txt".into())
            )))
        );
        // Claude Code 2.1.197's own words, a few seconds later.
        let note = json!({"hook_event_name": "Notification", "message": "Claude needs your permission", "notification_type": "permission_prompt"});
        assert_eq!(
            state_of(Format::Claude, &note),
            Some(Some((
                State::Waiting,
                Some("Claude needs your permission".into())
            )))
        );
        let idle = json!({"hook_event_name": "Notification", "message": "Claude is waiting for your input", "notification_type": "idle_prompt"});
        assert_eq!(
            state_of(Format::Claude, &idle).unwrap().unwrap().0,
            State::Idle
        );
        for (event, state) in [
            ("UserPromptSubmit", State::Working),
            ("PostToolUse", State::Working),
            ("Stop", State::Idle),
        ] {
            let e = json!({"hook_event_name": event});
            assert_eq!(
                state_of(Format::Claude, &e).unwrap().unwrap().0,
                state,
                "{event}"
            );
        }
        assert_eq!(
            state_of(Format::Claude, &json!({"hook_event_name": "SessionEnd"})),
            Some(None)
        );
        assert_eq!(
            state_of(Format::Claude, &json!({"hook_event_name": "PreCompact"})),
            None
        );
    }

    #[test]
    fn copilot_events_named_by_the_hook_line_map_to_states() {
        let ask = json!({"sessionId": "s", "cwd": "/p", "hook_event_name": "Notification", "message": "Copilot needs permission to run bash", "notification_type": "permission_prompt"});
        assert_eq!(
            state_of_named(Format::Copilot, "notification", &ask),
            Some(Some((
                State::Waiting,
                Some("Copilot needs permission to run bash".into())
            )))
        );
        let question =
            json!({"message": "Which database?", "notification_type": "elicitation_dialog"});
        assert_eq!(
            state_of_named(Format::Copilot, "notification", &question)
                .unwrap()
                .unwrap()
                .0,
            State::Waiting
        );
        // Other notifications are no wait for the person.
        for kind in ["shell_completed", "agent_completed", "agent_idle"] {
            let e = json!({"message": "m", "notification_type": kind});
            assert_eq!(state_of_named(Format::Copilot, "notification", &e), None);
        }
        let e = json!({"sessionId": "s", "cwd": "/p"});
        for (event, state) in [
            ("userPromptSubmitted", Some(Some(State::Working))),
            ("postToolUse", Some(Some(State::Working))),
            ("agentStop", Some(Some(State::Idle))),
            ("sessionEnd", Some(None)),
            ("preToolUse", None),
            // Runs before Copilot's own rules: no sign of a prompt shown.
            ("permissionRequest", None),
        ] {
            let got = state_of_named(Format::Copilot, event, &e).map(|c| c.map(|(s, _)| s));
            assert_eq!(got, state, "{event}");
        }
    }

    #[test]
    fn codex_events_map_to_states() {
        // Codex 0.169's PermissionRequest input (exec_command as Bash).
        let ask = json!({"hook_event_name": "PermissionRequest", "session_id": "019a", "turn_id": "t", "cwd": "/p", "model": "gpt-5.1-codex", "permission_mode": "default", "tool_name": "Bash", "tool_input": {"command": "echo hi > ok.txt", "description": "Write it."}});
        assert_eq!(
            state_of(Format::Codex, &ask),
            Some(Some((
                State::Waiting,
                Some("permission to use Bash: echo hi > ok.txt".into())
            )))
        );
        for (event, state) in [
            ("UserPromptSubmit", Some(Some(State::Working))),
            ("PostToolUse", Some(Some(State::Working))),
            ("Stop", Some(Some(State::Idle))),
            ("SessionEnd", Some(None)),
            ("PreToolUse", None),
            ("SessionStart", None),
        ] {
            let e = json!({"hook_event_name": event});
            let got = state_of(Format::Codex, &e).map(|c| c.map(|(s, _)| s));
            assert_eq!(got, state, "{event}");
        }
    }

    #[test]
    fn gemini_events_map_to_states() {
        for (event, state) in [
            ("BeforeAgent", State::Working),
            ("AfterTool", State::Working),
            ("AfterAgent", State::Idle),
            ("Notification", State::Waiting),
        ] {
            let e = json!({"hook_event_name": event, "message": "m"});
            assert_eq!(
                state_of(Format::Gemini, &e).unwrap().unwrap().0,
                state,
                "{event}"
            );
        }
    }
}
