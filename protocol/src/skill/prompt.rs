//! What an agent is told about its skills: the standard's
//! `<available_skills>` block (names, descriptions, locations; the agent
//! reads a SKILL.md in full only when a task calls for it) and the MCP
//! servers those skills need.
//!
//! Plain functions of the loaded skills, so `squadctl skills prompt` and the
//! agent runner's spawn prompts give the same text.

use super::Skill;
use serde::Serialize;
use std::fmt::Write as _;

/// A skill as the prompt shows it.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The skill.
    pub skill: &'a Skill,
    /// Where the agent reads it, as it should be written in the prompt
    /// (usually relative to the project: `.squad/skills/x/SKILL.md`).
    pub location: &'a str,
}

/// One row of the MCP servers table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpRow {
    /// The skill that needs the server.
    pub skill: String,
    /// The server.
    pub server: String,
    /// Whether the skill cannot work without it.
    pub required: bool,
    /// What for.
    pub purpose: Option<String>,
    /// What to do without it (optional servers).
    pub fallback: Option<String>,
}

/// The skills part of an agent's prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillsPrompt {
    /// The `<available_skills>` block (empty when there is no skill).
    pub available_skills: String,
    /// The MCP requirements section with its table (empty when no skill
    /// declares a server).
    pub mcp_table: String,
    /// The servers, one row per (skill, server).
    pub mcp_servers: Vec<McpRow>,
    /// Estimated tokens of both texts together.
    pub tokens: usize,
}

impl SkillsPrompt {
    /// Both parts, ready to paste into a prompt.
    pub fn text(&self) -> String {
        match (self.available_skills.is_empty(), self.mcp_table.is_empty()) {
            (_, true) => self.available_skills.clone(),
            (true, false) => self.mcp_table.clone(),
            (false, false) => format!("{}\n{}", self.available_skills, self.mcp_table),
        }
    }
}

/// Escapes text for XML element content and attributes.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab and line breaks are not
            // allowed in XML 1.0 at all, escaped or not.
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            // Invisible and reordering characters (tag characters can spell
            // hidden instructions) are shown as character references: the
            // agent sees that something is there, never the hidden text.
            c if super::is_invisible(c) => {
                let _ = write!(out, "&#x{:X};", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// A rough token count: about four characters per token for English and
/// markup, rounded up. Good enough to warn before a prompt grows large.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The `<available_skills>` block of the standard, in the order given.
pub fn available_skills(entries: &[Entry<'_>]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut out = String::from("<available_skills>\n");
    for e in entries {
        let _ = write!(
            out,
            "  <skill>\n    <name>{}</name>\n    <description>{}</description>\n    <location>{}</location>\n  </skill>\n",
            xml_escape(&e.skill.name),
            xml_escape(&e.skill.description),
            xml_escape(e.location),
        );
    }
    out.push_str("</available_skills>\n");
    out
}

/// One row per (skill, server), in skill order.
pub fn mcp_rows(entries: &[Entry<'_>]) -> Vec<McpRow> {
    entries
        .iter()
        .flat_map(|e| {
            e.skill.mcp_servers.iter().map(|s| McpRow {
                skill: e.skill.name.clone(),
                server: s.name.clone(),
                required: s.required,
                purpose: s.purpose.clone(),
                fallback: s.fallback.clone(),
            })
        })
        .collect()
}

/// A table cell: one line, `|` escaped, control characters escaped.
fn cell(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::text::escape(&flat).replace('|', "\\|")
}

/// The MCP requirements section: what to do when a server is missing, then a
/// markdown table. Empty when no row.
pub fn mcp_table(rows: &[McpRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "MCP TOOL REQUIREMENTS:\n\
         Skills you may activate declare the following MCP server dependencies.\n\
         Use the listed MCP tools when the skill's instructions call for them.\n\
         If a required server is unavailable, STOP and tell the coordinator.\n\
         If an optional server is unavailable, proceed without it, follow its fallback and note the limitation.\n\n\
         | Skill | MCP Server | Required? | Purpose | Fallback if unavailable |\n\
         |-------|------------|-----------|---------|-------------------------|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&r.skill),
            cell(&r.server),
            if r.required { "Yes" } else { "No (optional)" },
            r.purpose.as_deref().map(cell).unwrap_or_else(|| "-".into()),
            match (&r.fallback, r.required) {
                (Some(f), _) => cell(f),
                (None, true) => "-".into(),
                (None, false) => "proceed without it and note the limitation".into(),
            },
        );
    }
    out
}

/// The whole skills part of a prompt for these skills.
pub fn render(entries: &[Entry<'_>]) -> SkillsPrompt {
    let available_skills = available_skills(entries);
    let mcp_servers = mcp_rows(entries);
    let mcp_table = mcp_table(&mcp_servers);
    let tokens = estimate_tokens(&available_skills) + estimate_tokens(&mcp_table);
    SkillsPrompt {
        available_skills,
        mcp_table,
        mcp_servers,
        tokens,
    }
}
