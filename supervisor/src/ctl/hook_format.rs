//! The agent CLIs' hook contracts as a `--format` value, shared by the
//! guard and the presence hook (both installed in the same hook files).

use squad_protocol::hook::Format;

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
