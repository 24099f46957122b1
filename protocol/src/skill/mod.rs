//! SKILL.md files of the [Agent Skills standard](https://agentskills.io):
//! reading the front matter, checking it against the standard's rules, and
//! finding the skills of a project ([`discover`]) and presenting them to an
//! agent ([`prompt`]).
//!
//! Loading is lenient, as the standard's client guide recommends: a skill is
//! skipped only when its front matter is missing or does not parse as a YAML
//! mapping, or when it has no `description`; every other rule (an extra
//! field, a name that differs from its folder, a description over 1,024
//! characters, …) is a warning and the skill is still used. Strict checking
//! (`squadctl skills validate --strict`) makes every rule an error: that is
//! the standard's reference verdict.
//!
//! ```
//! use squad_protocol::skill::check_text;
//! use std::path::Path;
//!
//! let text = "---\nname: pdf\ndescription: Fill PDF forms.\nextra: 1\n---\n# PDF\n";
//! let lenient = check_text(Path::new("skills/pdf/SKILL.md"), text, false);
//! assert!(lenient.skill.is_some() && !lenient.has_errors());
//! let strict = check_text(Path::new("skills/pdf/SKILL.md"), text, true);
//! assert_eq!(strict.diagnostics[0].rule.id(), "skill-unknown-field");
//! assert!(strict.has_errors());
//! ```

mod check;
pub mod discover;
pub mod frontmatter;
pub mod prompt;

pub use check::check_text;

use crate::diagnostic::{Diagnostic, Location, Rule, Severity};
use crate::fsx::ReadError;
use crate::locate::{PathSeg, Target, locate};
use frontmatter::{FrontMatterError, Head};
use serde::Serialize;
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The front matter fields the standard defines.
pub const STANDARD_FIELDS: &[&str] = &[
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// Front matter fields of Squad's own skills (the Squad CLI's skill
/// template and loader, docs/skills.md): known, kept, not the standard's.
/// `tools` also declares MCP servers (see [`McpServer`]).
pub const SQUAD_FIELDS: &[&str] = &[
    "domain",
    "confidence",
    "source",
    "tools",
    "triggers",
    "roles",
];

/// Longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// The file name of a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// An MCP server a skill declares it needs (docs/skills.md, "MCP servers").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpServer {
    /// The server's name, as the user's MCP configuration names it.
    pub name: String,
    /// Whether the skill cannot work without it.
    pub required: bool,
    /// What the skill uses it for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// What to do when an optional server is unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// A skill as loaded from its front matter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// `name`, or the folder name when `name` is missing.
    pub name: String,
    /// `description`, trimmed.
    pub description: String,
    /// The SKILL.md file.
    pub path: PathBuf,
    /// `license`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// `compatibility`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// `allowed-tools` (a list is joined with spaces).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<String>,
    /// The string values of `metadata`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// MCP servers from `metadata` and from Squad's `tools:` list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServer>,
}

impl Skill {
    /// `metadata.version`, when given.
    pub fn version(&self) -> Option<&str> {
        self.metadata.get("version").map(String::as_str)
    }
}

/// What checking one SKILL.md found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillReport {
    /// The SKILL.md file.
    pub path: PathBuf,
    /// The skill, unless lenient loading skips it.
    pub skill: Option<Skill>,
    /// Findings, in file order.
    pub diagnostics: Vec<Diagnostic>,
}

impl SkillReport {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// The folder a SKILL.md lies in: the name the skill's `name` must equal.
pub fn folder_name(path: &Path) -> Option<String> {
    path.parent()?
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
}

/// Checks a SKILL.md file, reading only its front matter (through `fsx`).
pub fn check_file(path: &Path, strict: bool) -> SkillReport {
    let failed = |rule: Rule, message: String, hint: &str| {
        let mut d = Diagnostic::new(path, rule, message, hint);
        if strict {
            d.severity = Severity::Error;
        }
        SkillReport {
            path: path.to_path_buf(),
            skill: None,
            diagnostics: vec![d],
        }
    };
    match frontmatter::read_head(path) {
        Ok(Head::Text(text)) => check_text(path, &text, strict),
        Ok(Head::NotUtf8) => failed(
            Rule::InvalidUtf8,
            "the front matter is not UTF-8".into(),
            "save the file as UTF-8",
        ),
        Ok(Head::TooLarge) => failed(
            Rule::FileTooLarge,
            format!(
                "the front matter is over {} KiB",
                frontmatter::MAX_FRONT_MATTER_BYTES / 1024
            ),
            "keep the front matter to the standard's few fields; move detail to the body or references/",
        ),
        Err(e @ (ReadError::Symlink | ReadError::NotRegular(_))) => failed(
            Rule::SkillNotRegular,
            format!("{SKILL_FILE} {e}"),
            "replace it with a regular file; symlinks are never followed",
        ),
        Err(e) => failed(
            Rule::Unreadable,
            format!("cannot read {SKILL_FILE}: {e}"),
            "check the file's permissions",
        ),
    }
}

struct Checker<'a> {
    path: &'a Path,
    yaml: &'a str,
    first_line: u32,
    strict: bool,
    diagnostics: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn at(&self, path: &[PathSeg], target: Target) -> Option<Location> {
        let (line, column) = locate(self.yaml, path, target)?;
        Some(Location {
            line: u32::try_from(line)
                .unwrap_or(u32::MAX)
                .saturating_add(self.first_line - 1),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        })
    }

    fn push(&mut self, rule: Rule, location: Option<Location>, message: String, hint: &str) {
        let mut d = Diagnostic::new(self.path, rule, message, hint).at(location);
        if self.strict {
            d.severity = Severity::Error;
        }
        self.diagnostics.push(d);
    }

    fn field(&mut self, key: &str, rule: Rule, message: String, hint: &str) {
        let loc = self.at(&[PathSeg::Key(key.to_string())], Target::Key);
        self.push(rule, loc, message, hint);
    }

    fn value(&mut self, path: &[PathSeg], rule: Rule, message: String, hint: &str) {
        let loc = self.at(path, Target::Value);
        self.push(rule, loc, message, hint);
    }
}

fn key(s: &str) -> Value {
    Value::String(s.to_string())
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into()),
    }
}

/// The description of a skill without front matter: its first paragraph
/// that is not a heading (joined into one line), else its first heading's
/// text without `#` and a `Skill:` prefix; `None` when it has no text.
pub fn description_from_body(text: &str) -> Option<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut heading = None;
    let mut para: Vec<&str> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            if !para.is_empty() {
                break;
            }
            continue;
        }
        if in_fence {
            continue;
        }
        if t.is_empty() {
            if !para.is_empty() {
                break;
            }
            continue;
        }
        if t.starts_with('#') {
            if !para.is_empty() {
                break;
            }
            if heading.is_none() {
                let h = t.trim_start_matches('#').trim();
                let h = h.strip_prefix("Skill:").unwrap_or(h).trim();
                if !h.is_empty() {
                    heading = Some(h.to_string());
                }
            }
            continue;
        }
        para.push(t);
    }
    let d = if para.is_empty() {
        heading?
    } else {
        para.join(" ")
    };
    Some(d.chars().take(MAX_DESCRIPTION_CHARS).collect())
}

/// Whether `c` is invisible or reorders text when shown: Unicode tag
/// characters (U+E0000–E007F, which can spell hidden ASCII), bidirectional
/// embeddings, overrides and isolates, and zero-width characters.
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{E0000}'..='\u{E007F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200B}'..='\u{200F}'
        | '\u{061C}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{180E}'
    )
}

/// A `skill-invisible-text` finding when `description` holds characters
/// people cannot see (see [`is_invisible`]); error under `strict`.
fn invisible_text(
    path: &Path,
    description: &str,
    at: Option<Location>,
    strict: bool,
) -> Option<Diagnostic> {
    let found: Vec<char> = description.chars().filter(|c| is_invisible(*c)).collect();
    let first = *found.first()?;
    let mut d = Diagnostic::new(
        path,
        Rule::SkillInvisibleText,
        format!(
            "`description` holds {} invisible character{} (the first U+{:04X}): text an agent reads but a reviewer cannot see",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            u32::from(first)
        ),
        "remove them; the prompt shows them escaped (`&#x…;`)",
    )
    .at(at.or(Some(Location { line: 1, column: 1 })));
    if strict {
        d.severity = Severity::Error;
    }
    Some(d)
}

/// What is wrong with a skill name, or `None` when it follows the standard:
/// 1–64 characters, lowercase letters (any script), digits and single
/// hyphens, not starting or ending with a hyphen.
pub fn name_problem(name: &str) -> Option<String> {
    let mut problems = Vec::new();
    let len = name.chars().count();
    if len == 0 {
        return Some("is empty".into());
    }
    if len > MAX_NAME_CHARS {
        problems.push(format!("is {len} characters (at most {MAX_NAME_CHARS})"));
    }
    if name.chars().any(char::is_uppercase) {
        problems.push("has uppercase letters".to_string());
    }
    if name.chars().any(|c| c != '-' && !c.is_alphanumeric()) {
        problems.push("has characters other than letters, digits and hyphens".to_string());
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push("starts or ends with a hyphen".to_string());
    }
    if name.contains("--") {
        problems.push("has consecutive hyphens".to_string());
    }
    (!problems.is_empty()).then(|| problems.join(", "))
}

/// A lowercase-hyphen form of `name`, offered in hints.
fn suggest_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(MAX_NAME_CHARS).collect()
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(s.trim(), "true" | "yes" | "True" | "Yes"),
        _ => false,
    }
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    }
}

/// One server from an entry of a `mcp-servers` or `tools` list: a string
/// (`postgres`, `postgres?` for optional) or a mapping with `name`, a purpose
/// (`reason`, `purpose` or `description`, plus `when`), `optional`, `fallback`.
fn server_entry(v: &Value) -> Option<McpServer> {
    match v {
        Value::String(s) => server_word(s, None, None),
        Value::Mapping(m) => {
            let name = text_of(m.get(key("name")))?;
            let purpose = ["reason", "purpose", "description"]
                .iter()
                .find_map(|k| text_of(m.get(key(k))));
            let purpose = match (purpose, text_of(m.get(key("when")))) {
                (Some(p), Some(w)) => Some(format!("{p} (when: {w})")),
                (Some(p), None) => Some(p),
                (None, Some(w)) => Some(format!("when: {w}")),
                (None, None) => None,
            };
            let mut server = server_word(&name, purpose, text_of(m.get(key("fallback"))))?;
            if truthy(m.get(key("optional"))) {
                server.required = false;
            }
            Some(server)
        }
        _ => None,
    }
}

fn server_word(word: &str, purpose: Option<String>, fallback: Option<String>) -> Option<McpServer> {
    let word = word.trim();
    let (name, optional) = match word.strip_suffix('?') {
        Some(n) => (n.trim(), true),
        None => (word, false),
    };
    (!name.is_empty()).then(|| McpServer {
        name: name.to_string(),
        required: !optional,
        purpose,
        fallback,
    })
}

/// MCP servers a skill declares: `metadata.mcp-servers` (a string of names,
/// `name?` optional, with `metadata.mcp-<name>-purpose` and
/// `metadata.mcp-<name>-fallback`; or the structured list of Squad's
/// proposal 012), and the entries of Squad's top-level `tools:` list.
fn mcp_servers(front: &Mapping) -> Vec<McpServer> {
    let mut out: Vec<McpServer> = Vec::new();
    let meta = match front.get(key("metadata")) {
        Some(Value::Mapping(m)) => Some(m),
        _ => None,
    };
    let add = |s: McpServer, out: &mut Vec<McpServer>| {
        if !out.iter().any(|o| o.name == s.name) {
            out.push(s);
        }
    };
    if let Some(meta) = meta {
        match meta.get(key("mcp-servers")) {
            Some(Value::String(list)) => {
                for word in list.split([' ', ',', '\t', '\n']).filter(|w| !w.is_empty()) {
                    if let Some(mut s) = server_word(word, None, None) {
                        s.purpose = text_of(meta.get(key(&format!("mcp-{}-purpose", s.name))));
                        s.fallback = text_of(meta.get(key(&format!("mcp-{}-fallback", s.name))));
                        add(s, &mut out);
                    }
                }
            }
            Some(Value::Sequence(items)) => {
                for s in items.iter().filter_map(server_entry) {
                    add(s, &mut out);
                }
            }
            _ => {}
        }
    }
    if let Some(Value::Sequence(items)) = front.get(key("tools")) {
        for s in items.iter().filter_map(server_entry) {
            add(s, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests;
