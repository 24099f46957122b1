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

pub mod discover;
pub mod frontmatter;
pub mod prompt;

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

/// Checks the text of a SKILL.md at `path` (its folder is the name the skill
/// must have). `strict` makes every diagnostic an error.
pub fn check_text(path: &Path, text: &str, strict: bool) -> SkillReport {
    let mut report = SkillReport {
        path: path.to_path_buf(),
        skill: None,
        diagnostics: Vec::new(),
    };
    let fm = match frontmatter::split(text) {
        Ok(fm) => fm,
        Err(e) => {
            let (rule, message, hint) = match e {
                FrontMatterError::Missing if text.trim().is_empty() => (
                    Rule::SkillNoFrontMatter,
                    "the file is empty".to_string(),
                    "start the file with `---`, `name: …`, `description: …`, `---`",
                ),
                FrontMatterError::Missing => {
                    // Squad loads such a skill under its folder's name; so
                    // does lenient loading, described by its first paragraph.
                    if let (Some(folder), Some(description)) =
                        (folder_name(path), description_from_body(text))
                    {
                        let mut d = Diagnostic::new(
                            path,
                            Rule::SkillNoFrontMatter,
                            format!("the file has no `---` front matter; loaded as Squad loads it: named `{folder}` after its folder, described by its first paragraph"),
                            format!("add front matter (`---`, `name: {folder}`, `description: …`, `---`): other Agent Skills clients skip this skill"),
                        )
                        .at(Some(Location { line: 1, column: 1 }));
                        d.severity = if strict {
                            Severity::Error
                        } else {
                            Severity::Warning
                        };
                        report.diagnostics.push(d);
                        report
                            .diagnostics
                            .extend(invisible_text(path, &description, None, strict));
                        if !strict {
                            report.skill = Some(Skill {
                                name: folder,
                                description,
                                path: path.to_path_buf(),
                                license: None,
                                compatibility: None,
                                allowed_tools: None,
                                metadata: BTreeMap::new(),
                                mcp_servers: Vec::new(),
                            });
                        }
                        return report;
                    }
                    (
                        Rule::SkillNoFrontMatter,
                        "the file does not start with a `---` front matter block and has no text to describe it; agents never see this skill".to_string(),
                        "add front matter: `---`, `name: <folder name>`, `description: <what it does and when to use it>`, `---`",
                    )
                }
                FrontMatterError::Unclosed => (
                    Rule::SkillUnclosedFrontMatter,
                    "the front matter opened on line 1 has no closing `---` line".to_string(),
                    "end the front matter with a line holding only `---`",
                ),
            };
            let mut d = Diagnostic::new(path, rule, message, hint)
                .at(Some(Location { line: 1, column: 1 }));
            if strict {
                d.severity = Severity::Error;
            }
            report.diagnostics.push(d);
            return report;
        }
    };
    let mut c = Checker {
        path,
        yaml: fm.yaml,
        first_line: fm.first_line,
        strict,
        diagnostics: Vec::new(),
    };
    let value: Value = match crate::depth::from_str(fm.yaml) {
        Ok(v) => v,
        // Refused unparsed: the parser's cost is quadratic in the depth.
        Err(crate::depth::YamlError::TooDeep { line, column }) => {
            c.push(
                Rule::SkillYamlSyntax,
                Some(Location {
                    line: u32::try_from(line)
                        .unwrap_or(u32::MAX)
                        .saturating_add(fm.first_line - 1),
                    column: u32::try_from(column).unwrap_or(u32::MAX),
                }),
                format!(
                    "the front matter nests deeper than {} levels (not parsed)",
                    crate::depth::MAX_DEPTH
                ),
                "flatten the front matter; its fields nest a level or two",
            );
            report.diagnostics = c.diagnostics;
            return report;
        }
        Err(crate::depth::YamlError::Syntax(e)) => {
            let loc = e.location().map(|l| Location {
                line: u32::try_from(l.line())
                    .unwrap_or(u32::MAX)
                    .saturating_add(fm.first_line - 1),
                column: u32::try_from(l.column()).unwrap_or(u32::MAX),
            });
            let message = e.to_string();
            let message = message.split(" at line ").next().unwrap_or(&message);
            c.push(
                Rule::SkillYamlSyntax,
                loc,
                format!("the front matter is not valid YAML: {message}"),
                "quote values holding `: ` or starting with a special character (`description: \"Use when: …\"`)",
            );
            report.diagnostics = c.diagnostics;
            return report;
        }
    };
    let Value::Mapping(front) = value else {
        c.push(
            Rule::SkillNotAMapping,
            Some(Location {
                line: fm.first_line,
                column: 1,
            }),
            format!(
                "the front matter is {}, not a mapping of fields",
                describe(&value)
            ),
            "write one `field: value` per line",
        );
        report.diagnostics = c.diagnostics;
        return report;
    };

    // Fields in file order: unknown ones first so the report reads top-down
    // per field (diagnostics are sorted by position at the end).
    for (k, _) in &front {
        let name = key_text(k);
        // Squad's own fields are known (its CLI ships skills with them).
        if !STANDARD_FIELDS.contains(&name.as_str()) && !SQUAD_FIELDS.contains(&name.as_str()) {
            c.field(
                &name,
                Rule::SkillUnknownField,
                format!("`{name}` is not a field of the Agent Skills standard"),
                &format!("move it under `metadata:` as a string (`metadata: {{{name}: \"…\"}}`) or remove it; strict clients refuse the skill"),
            );
        }
    }

    let folder = folder_name(path);
    let name = match front.get(key("name")) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(other) => {
            c.field(
                "name",
                Rule::SkillMissingName,
                format!("`name` is {}, not a non-empty string", describe(other)),
                "set `name` to the folder name",
            );
            None
        }
        None => {
            c.push(
                Rule::SkillMissingName,
                Some(Location {
                    line: fm.first_line,
                    column: 1,
                }),
                "`name` is missing".into(),
                &format!(
                    "add `name: {}`",
                    folder
                        .as_deref()
                        .map(suggest_name)
                        .unwrap_or_else(|| "<folder name>".into())
                ),
            );
            None
        }
    };
    if let Some(n) = &name {
        if let Some(problem) = name_problem(n) {
            let hint = format!(
                "use lowercase letters, digits and single hyphens, e.g. `{}` (and name the folder the same)",
                suggest_name(n)
            );
            c.value(
                &[PathSeg::Key("name".into())],
                Rule::SkillNameFormat,
                format!("`name` `{n}` {problem}"),
                &hint,
            );
        }
        if let Some(f) = &folder
            && f != n
        {
            c.value(
                &[PathSeg::Key("name".into())],
                Rule::SkillNameMismatch,
                format!("`name` is `{n}` but the folder is `{f}`"),
                "rename the folder or the skill so they are equal; clients look skills up by folder",
            );
        }
    }

    let description = match front.get(key("description")) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(other) => {
            let what = match other {
                Value::String(_) => "empty".to_string(),
                v => format!("{}, not a string", describe(v)),
            };
            c.field(
                "description",
                Rule::SkillMissingDescription,
                format!("`description` is {what}; the skill is skipped"),
                "describe what the skill does and when to use it, in one string",
            );
            None
        }
        None => {
            c.push(
                Rule::SkillMissingDescription,
                Some(Location {
                    line: fm.first_line,
                    column: 1,
                }),
                "`description` is missing; the skill is skipped".into(),
                "add `description: <what the skill does and when to use it>`",
            );
            None
        }
    };
    if let Some(d) = &description {
        let len = d.chars().count();
        if len > MAX_DESCRIPTION_CHARS {
            c.value(
                &[PathSeg::Key("description".into())],
                Rule::SkillDescriptionTooLong,
                format!("`description` is {len} characters (at most {MAX_DESCRIPTION_CHARS})"),
                "shorten it to what the skill does and when to use it; move detail into the body",
            );
        }
        c.diagnostics.extend(invisible_text(
            path,
            d,
            c.at(&[PathSeg::Key("description".into())], Target::Value),
            strict,
        ));
        if d.contains(['<', '>']) {
            c.value(
                &[PathSeg::Key("description".into())],
                Rule::SkillDescriptionAngle,
                "`description` contains `<` or `>`".into(),
                "write it without angle brackets: it is placed inside an XML block of the prompt",
            );
        }
    }

    let string_field = |c: &mut Checker, field: &str| -> Option<String> {
        match front.get(key(field)) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                c.value(
                    &[PathSeg::Key(field.into())],
                    Rule::SkillFieldType,
                    format!("`{field}` is {}, not a string", describe(other)),
                    "write it as one string (quote it)",
                );
                None
            }
        }
    };
    let license = string_field(&mut c, "license");
    let compatibility = string_field(&mut c, "compatibility");
    if let Some(comp) = &compatibility {
        let len = comp.chars().count();
        if len > MAX_COMPATIBILITY_CHARS {
            c.value(
                &[PathSeg::Key("compatibility".into())],
                Rule::SkillCompatibilityTooLong,
                format!("`compatibility` is {len} characters (at most {MAX_COMPATIBILITY_CHARS})"),
                "state only the environment the skill needs (product, packages, network)",
            );
        }
    }

    let mut metadata = BTreeMap::new();
    match front.get(key("metadata")) {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(m)) => {
            for (k, v) in m {
                let kt = key_text(k);
                match (k, v) {
                    (Value::String(_), Value::String(s)) => {
                        metadata.insert(kt, s.clone());
                    }
                    _ => {
                        let what = if matches!(k, Value::String(_)) {
                            format!("`metadata.{kt}` is {}, not a string", describe(v))
                        } else {
                            format!("the `metadata` key `{kt}` is not a string")
                        };
                        c.value(
                            &[PathSeg::Key("metadata".into()), PathSeg::Key(kt.clone())],
                            Rule::SkillMetadataValue,
                            what,
                            "metadata maps strings to strings: quote the value (`version: \"1.0\"`) or write a list as one string",
                        );
                    }
                }
            }
        }
        Some(other) => {
            c.value(
                &[PathSeg::Key("metadata".into())],
                Rule::SkillFieldType,
                format!("`metadata` is {}, not a mapping", describe(other)),
                "write `metadata:` followed by indented `key: \"value\"` lines",
            );
        }
    }

    let allowed_tools = match front.get(key("allowed-tools")) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Sequence(items)) if items.iter().all(|i| matches!(i, Value::String(_))) => {
            c.value(
                &[PathSeg::Key("allowed-tools".into())],
                Rule::SkillAllowedTools,
                "`allowed-tools` is a list, not a space-separated string".into(),
                "write the tools as one string: `allowed-tools: Read Bash(git:*)`",
            );
            Some(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        }
        Some(other) => {
            c.value(
                &[PathSeg::Key("allowed-tools".into())],
                Rule::SkillAllowedTools,
                format!(
                    "`allowed-tools` is {}, not a space-separated string",
                    describe(other)
                ),
                "write the tools as one string: `allowed-tools: Read Bash(git:*)`",
            );
            None
        }
    };

    let mcp = mcp_servers(&front);
    c.diagnostics.sort_by_key(|d| d.location);
    report.diagnostics = c.diagnostics;
    let name = name.or(folder);
    if let (Some(name), Some(description)) = (name, description) {
        report.skill = Some(Skill {
            name,
            description,
            path: path.to_path_buf(),
            license,
            compatibility,
            allowed_tools,
            metadata,
            mcp_servers: mcp,
        });
    }
    report
}

#[cfg(test)]
mod tests;
