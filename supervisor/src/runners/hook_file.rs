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
