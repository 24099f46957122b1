//! Where each agent CLI keeps its hook file, and whether a hook file holds
//! the guard's entry: shared by `guard install` and `guard doctor`.

use squad_protocol::hook::Format;
use std::path::{Path, PathBuf};

/// The hook file of `format` for `project` (`user`: the user's), with
/// `HOME`, `CODEX_HOME`, `COPILOT_HOME` read through `var` (the process's
/// environment for `guard install`, a runner's for `guard doctor`).
pub(crate) fn hook_file_path(
    project: &Path,
    format: Format,
    user: bool,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let home = || {
        var("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| "HOME is not set; cannot find the user's settings".to_string())
    };
    let dir = |name: &str, default: &str| {
        var(name)
            .map(PathBuf::from)
            .map_or_else(|| home().map(|h| h.join(default)), Ok)
    };
    Ok(match (format, user) {
        (Format::Claude, true) => home()?.join(".claude/settings.json"),
        (Format::Claude, false) => project.join(".claude/settings.json"),
        (Format::Codex, true) => dir("CODEX_HOME", ".codex")?.join("hooks.json"),
        (Format::Codex, false) => project.join(".codex/hooks.json"),
        // `copilot -p` loads the repository's .github/hooks/ only in a
        // trusted folder; the user's hooks directory is loaded always.
        (Format::Copilot, true) => dir("COPILOT_HOME", ".copilot")?.join("hooks/squad.json"),
        (Format::Copilot, false) => project.join(".github/hooks/squad.json"),
        // `gemini -p` loads the project's settings only in a trusted
        // workspace; the user's always.
        (Format::Gemini, true) => home()?.join(".gemini/settings.json"),
        (Format::Gemini, false) => project.join(".gemini/settings.json"),
    })
}

/// The hook event the guard answers in `format`'s settings.
pub(crate) fn event_of(format: Format) -> &'static str {
    match format {
        Format::Copilot => "preToolUse",
        Format::Gemini => "BeforeTool",
        Format::Claude | Format::Codex => "PreToolUse",
    }
}

/// Whether a hook handler object is ours.
pub(crate) fn is_ours(handler: &serde_json::Value, format: Format) -> bool {
    let key = if format == Format::Copilot {
        "bash"
    } else {
        "command"
    };
    handler
        .get(key)
        .and_then(serde_json::Value::as_str)
        .is_some_and(|c| c.ends_with(&format!(" guard --format {format}")))
}

/// Whether a hook file's text holds the guard's entry for `format`
/// (`guard doctor`); `Err` when it is not a JSON object.
pub(crate) fn installed(text: &str, format: Format) -> Result<bool, String> {
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("not valid JSON at {}:{}: {e}", e.line(), e.column()))?;
    if !doc.is_object() {
        return Err("not a JSON object".into());
    }
    let event = event_of(format);
    let list = doc["hooks"][event].as_array().cloned().unwrap_or_default();
    Ok(if format == Format::Copilot {
        list.iter().any(|h| is_ours(h, format))
    } else {
        list.iter().any(|g| {
            g["hooks"]
                .as_array()
                .is_some_and(|hs| hs.iter().any(|h| is_ours(h, format)))
        })
    })
}

/// The entries of a hook file's text that hold the guard's handler (for
/// Copilot the handlers themselves, for the others their groups, matcher
/// included), in order; none when the text is not JSON.
pub(crate) fn guard_entries(text: &str, format: Format) -> Vec<serde_json::Value> {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    doc["hooks"][event_of(format)]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| {
            if format == Format::Copilot {
                is_ours(g, format)
            } else {
                g["hooks"]
                    .as_array()
                    .is_some_and(|hs| hs.iter().any(|h| is_ours(h, format)))
            }
        })
        .cloned()
        .collect()
}

/// The guard's entries of `from` (a hook file's text: the main checkout's)
/// added to `into` (the same file in a run's worktree, if it has one), as
/// the text to write there; `Ok(None)` when `into` already holds the
/// guard's entry or `from` holds none. Only the guard's own entries are
/// carried: the rest of `into` (what the branch committed) stays as it is.
pub(crate) fn carry_guard(
    from: &str,
    into: Option<&str>,
    format: Format,
) -> Result<Option<String>, String> {
    use serde_json::{Value, json};
    if !installed(from, format)? {
        return Ok(None);
    }
    if let Some(text) = into
        && installed(text, format)?
    {
        return Ok(None);
    }
    let event = event_of(format);
    let ours = guard_entries(from, format);
    let mut doc: Value = match into {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        }
        _ => json!({}),
    };
    let Value::Object(top) = &mut doc else {
        return Err("not a JSON object".into());
    };
    if format == Format::Copilot {
        top.entry("version").or_insert(json!(1));
    }
    let Value::Object(hooks) = top.entry("hooks").or_insert_with(|| json!({})) else {
        return Err("`hooks` is not a JSON object".into());
    };
    let Value::Array(list) = hooks.entry(event).or_insert_with(|| json!([])) else {
        return Err(format!("`hooks.{event}` is not a JSON array"));
    };
    list.extend(ours);
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLAUDE: &str = r#"{"hooks": {"PreToolUse": [
        {"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks": [{"type": "command", "command": "/bin/squadctl guard --format claude", "timeout": 10}]},
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    ]}}"#;

    #[test]
    fn the_guard_is_carried_into_a_worktree_copy_that_lacks_it() {
        // No copy in the worktree: the guard's group alone.
        let text = carry_guard(CLAUDE, None, Format::Claude).unwrap().unwrap();
        assert!(installed(&text, Format::Claude).unwrap());
        assert!(!text.contains("lint.sh"), "{text}");
        // A committed copy keeps what it holds, and gets the guard.
        let committed = r#"{"model": "x", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./own.sh"}]}]}}"#;
        let text = carry_guard(CLAUDE, Some(committed), Format::Claude)
            .unwrap()
            .unwrap();
        assert!(installed(&text, Format::Claude).unwrap());
        assert!(
            text.contains("own.sh") && text.contains("\"model\""),
            "{text}"
        );
        // Already there, or nothing to carry: nothing to write.
        assert_eq!(
            carry_guard(CLAUDE, Some(CLAUDE), Format::Claude).unwrap(),
            None
        );
        assert_eq!(carry_guard("{}", None, Format::Claude).unwrap(), None);
        // A worktree copy that is not JSON is not overwritten.
        assert!(carry_guard(CLAUDE, Some("{"), Format::Claude).is_err());
    }

    #[test]
    fn copilot_handlers_are_carried_with_the_version() {
        let from = r#"{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "/bin/squadctl guard --format copilot", "timeoutSec": 10}]}}"#;
        let text = carry_guard(from, None, Format::Copilot).unwrap().unwrap();
        assert!(installed(&text, Format::Copilot).unwrap());
        assert!(text.contains("\"version\": 1"), "{text}");
    }
}
