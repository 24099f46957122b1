// Over 800 lines: the export file in its two shapes, each parsed and
// rendered field by field with its error texts. The split waiting is one
// file per shape (issue 42), after issue 41's changes here land.
//! The portable export file (docs/team.md), in its two shapes:
//!
//! - [`Shape::Squad`], seed 000's `.squad` file: `squad_format_version`,
//!   `exported_at`, `exported_from {project, owner}`, `casting`, `agents
//!   {name: {charter, history}}`, `team`, `routing`, `ceremonies`; our
//!   optional additions `skills {name: {files: {path: text}}}`, `agents.*.skills`
//!   and `alumni`;
//! - [`Shape::SquadCli`], what the Squad CLI exports and imports today
//!   (`squad-export.json`): `version: "1.0"`, `exported_at`, `squad_version`,
//!   `team_md`/`team`, `routing_md`, `casting`, `agents`, `skills: [SKILL.md
//!   text]`; we add `exported_from`, `ceremonies`, `alumni`,
//!   `agents.*.skills` and `skill_folders` (the CLI ignores unknown keys),
//!   so squadctl → squadctl loses nothing in this shape either.
//!
//! Parsing ([`parse`]) checks the whole file before anything is written:
//! every name that becomes a path goes through [`check_name`] (skill file
//! paths through [`check_rel_path`]), every value's type is checked and an
//! error names its JSON path. [`plan`] turns a bundle into the files of a
//! new team directory (pure); the supervisor writes them.

use super::json::{JsonError, parse_strict, type_name};
use super::markdown;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// The longest name that becomes a path component.
pub const MAX_NAME_BYTES: usize = 100;
/// The deepest file path inside a skill folder.
pub const MAX_SKILL_PATH_DEPTH: usize = 8;
/// The Squad CLI release whose export/import this crate's squad-cli shape
/// matches (`@bradygaster/squad-cli` on npm), written as `squad_version`:
/// the field names the CLI version of the format, not squadctl's.
pub const SQUAD_CLI_VERSION: &str = "0.10.0";

/// The two export shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Seed 000's `.squad` file.
    Squad,
    /// The Squad CLI's `squad-export.json`.
    SquadCli,
}

impl Shape {
    /// `squad` or `squad-cli`.
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Squad => "squad",
            Shape::SquadCli => "squad-cli",
        }
    }
}

/// A skill folder: file paths (relative, `/`-separated) to text.
pub type SkillFiles = BTreeMap<String, String>;

/// One agent of a bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleAgent {
    /// `charter.md`.
    pub charter: Option<String>,
    /// `history.md`.
    pub history: Option<String>,
    /// The agent's own skills (`agents/<name>/skills/<skill>/…`).
    pub skills: BTreeMap<String, SkillFiles>,
    /// Every other file of the agent's folder (`history-archive.md`, notes),
    /// by path relative to it.
    pub files: SkillFiles,
}

/// A team, as an export file carries it (either shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// The shape it was read from or is written in.
    pub shape: Shape,
    /// When it was exported (RFC 3339), as the file says.
    pub exported_at: String,
    /// The project it was exported from.
    pub project: String,
    /// The project's owner, when known.
    pub owner: String,
    /// The Squad CLI's version field (squad-cli shape).
    pub squad_version: Option<String>,
    /// Casting files by key (`registry`, `history`, `policy`, …).
    pub casting: BTreeMap<String, Value>,
    /// Agents by folder name.
    pub agents: BTreeMap<String, BundleAgent>,
    /// Retired agents (`agents/_alumni/<name>/`).
    pub alumni: BTreeMap<String, BundleAgent>,
    /// `team.md` without its Project Context.
    pub team: Option<String>,
    /// `routing.md`.
    pub routing: Option<String>,
    /// `ceremonies.md`.
    pub ceremonies: Option<String>,
    /// Team skills by name.
    pub skills: BTreeMap<String, SkillFiles>,
    /// Things of the file that are not imported (decisions, unknown keys).
    pub ignored: Vec<String>,
}

/// Why an export file is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleError {
    /// The JSON path of the offending value (`$.agents["x"].charter`).
    pub json_path: String,
    /// Line and column, for syntax errors.
    pub position: Option<(u32, u32)>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((l, c)) = self.position {
            write!(f, "{l}:{c}: ")?;
        }
        write!(f, "{}: {}", self.json_path, self.message)
    }
}

fn err(json_path: impl Into<String>, message: impl Into<String>) -> BundleError {
    BundleError {
        json_path: json_path.into(),
        position: None,
        message: message.into(),
    }
}

/// Why a name cannot become a path component, or `None` when it can: not
/// empty, at most [`MAX_NAME_BYTES`] bytes, no `/` or `\`, not `.` or
/// `..`, no leading dot, no control characters, no `:` (a drive or stream
/// separator elsewhere).
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Some(format!(
            "is {} bytes long, over the limit of {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    if name.contains(['/', '\\']) {
        return Some("contains a path separator".into());
    }
    if name == "." || name == ".." {
        return Some("is a relative path component".into());
    }
    if name.starts_with('.') {
        return Some("starts with a dot".into());
    }
    if name.chars().any(|c| c.is_control() || c == ':') {
        return Some("contains a control character or `:`".into());
    }
    None
}

/// Checks a name that becomes a path component (an agent, a skill, a
/// casting key); `what` names it in the error.
pub fn check_name(json_path: &str, what: &str, name: &str) -> Result<(), BundleError> {
    match name_problem(name) {
        None => Ok(()),
        Some(p) => Err(err(
            json_path,
            format!(
                "{what} {} {p}; names that become paths have no separators, no `..`, no leading dot and at most {MAX_NAME_BYTES} bytes",
                Value::String(name.to_string())
            ),
        )),
    }
}

/// Checks a file path inside a skill folder: relative, `/`-separated, each
/// component a valid name, at most [`MAX_SKILL_PATH_DEPTH`] deep.
pub fn check_rel_path(json_path: &str, path: &str) -> Result<PathBuf, BundleError> {
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > MAX_SKILL_PATH_DEPTH {
        return Err(err(
            json_path,
            format!("file path {path:?} is deeper than {MAX_SKILL_PATH_DEPTH} levels"),
        ));
    }
    for p in &parts {
        if let Some(problem) = name_problem(p) {
            return Err(err(
                json_path,
                format!(
                    "file path {} escapes or hides in its skill folder: component {:?} {problem}",
                    Value::String(path.to_string()),
                    p
                ),
            ));
        }
    }
    Ok(parts.iter().collect())
}

/// Proves that `rel` stays inside the directory it is joined to: only
/// normal components, never `..`, a root or a prefix.
pub fn stays_inside(rel: &Path) -> bool {
    !rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_)))
}

fn key_path(parent: &str, key: &str) -> String {
    format!("{parent}[{}]", Value::String(key.to_string()))
}

fn opt_string(v: Option<&Value>, path: &str) -> Result<Option<String>, BundleError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(err(
            path,
            format!("expected a string, found {}", type_name(other)),
        )),
    }
}

fn object<'a>(v: &'a Value, path: &str) -> Result<&'a Map<String, Value>, BundleError> {
    v.as_object()
        .ok_or_else(|| err(path, format!("expected an object, found {}", type_name(v))))
}

fn skill_files(v: &Value, path: &str) -> Result<SkillFiles, BundleError> {
    let o = object(v, path)?;
    let files_path = format!("{path}.files");
    let out = folder_files(
        o.get("files")
            .ok_or_else(|| err(path, "a skill has `files`"))?,
        &files_path,
    )?;
    if !out.contains_key(crate::skill::SKILL_FILE) {
        return Err(err(&files_path, "a skill folder holds a SKILL.md"));
    }
    Ok(out)
}

/// A folder's files: relative paths (checked) to text.
fn folder_files(v: &Value, path: &str) -> Result<SkillFiles, BundleError> {
    let mut out = SkillFiles::new();
    for (rel, text) in object(v, path)? {
        let p = key_path(path, rel);
        check_rel_path(&p, rel)?;
        let Value::String(text) = text else {
            return Err(err(
                &p,
                format!("expected a string, found {}", type_name(text)),
            ));
        };
        out.insert(rel.clone(), text.clone());
    }
    Ok(out)
}

fn skills_map(v: &Value, path: &str) -> Result<BTreeMap<String, SkillFiles>, BundleError> {
    let mut out = BTreeMap::new();
    let mut lower: Vec<String> = Vec::new();
    for (name, s) in object(v, path)? {
        let p = key_path(path, name);
        check_name(&p, "skill name", name)?;
        unique(&mut lower, name, &p, "skill")?;
        out.insert(name.clone(), skill_files(s, &p)?);
    }
    Ok(out)
}

/// Names that differ only in case collide on case-insensitive file systems.
fn unique(seen: &mut Vec<String>, name: &str, path: &str, what: &str) -> Result<(), BundleError> {
    let l = crate::ids::name_key(name);
    if seen.contains(&l) {
        return Err(err(
            path,
            format!(
                "two {what}s named {name:?} (names differing only in case or in Unicode normalization are one name)"
            ),
        ));
    }
    seen.push(l);
    Ok(())
}

fn agents_map(
    v: &Value,
    path: &str,
    with_skills: bool,
    ignored: &mut Vec<String>,
) -> Result<BTreeMap<String, BundleAgent>, BundleError> {
    let mut out = BTreeMap::new();
    let mut lower = Vec::new();
    for (name, a) in object(v, path)? {
        let p = key_path(path, name);
        check_name(&p, "agent name", name)?;
        if name == super::read::ALUMNI_DIR {
            // The Squad CLI exports the `_alumni` folder as an agent with
            // neither charter nor history: nothing to import.
            let empty = a.as_object().is_some_and(|o| {
                ["charter", "history"]
                    .iter()
                    .all(|k| o.get(*k).is_none_or(Value::is_null))
            });
            if empty {
                ignored.push(format!(
                    "`{p}`: the retired agents' folder exported as an agent, with nothing in it"
                ));
                continue;
            }
            return Err(err(
                &p,
                "`_alumni` is the folder of retired agents, not an agent (retired agents go in `alumni`)",
            ));
        }
        unique(&mut lower, name, &p, "agent")?;
        let o = object(a, &p)?;
        let charter = opt_string(o.get("charter"), &format!("{p}.charter"))?;
        let history = opt_string(o.get("history"), &format!("{p}.history"))?;
        let skills = match o.get("skills") {
            Some(s) if with_skills && !s.is_null() => skills_map(s, &format!("{p}.skills"))?,
            _ => BTreeMap::new(),
        };
        let files = match o.get("files") {
            Some(f) if !f.is_null() => folder_files(f, &format!("{p}.files"))?,
            _ => SkillFiles::new(),
        };
        out.insert(
            name.clone(),
            BundleAgent {
                charter,
                history,
                skills,
                files,
            },
        );
    }
    Ok(out)
}

fn casting_map(v: &Value, path: &str) -> Result<BTreeMap<String, Value>, BundleError> {
    let mut out = BTreeMap::new();
    let mut lower = Vec::new();
    for (key, c) in object(v, path)? {
        let p = key_path(path, key);
        check_name(&p, "casting key", key)?;
        unique(&mut lower, key, &p, "casting file")?;
        object(c, &p)?;
        out.insert(key.clone(), c.clone());
    }
    Ok(out)
}

/// The `name:` of a SKILL.md's front matter, for the squad-cli shape's
/// skill list (which carries no folder names).
fn front_matter_name(text: &str) -> Option<String> {
    let rest = text.strip_prefix("---")?;
    for line in rest.lines().skip(1) {
        if line.trim() == "---" {
            break;
        }
        if let Some(v) = line.strip_prefix("name:") {
            let v = v.trim().trim_matches(['"', '\'']).trim();
            return (!v.is_empty()).then(|| v.to_string());
        }
    }
    None
}

/// The folder name the Squad CLI's import gives a skill called `name`:
/// lower case, white space to `-`, anything but `a-z0-9._-` to `-`, no
/// leading `.` or `-`. `None` when nothing usable is left (the CLI then
/// names it `skill-<index>`).
pub fn skill_slug(name: &str) -> Option<String> {
    let lower = name.trim().to_lowercase();
    let mut out = String::with_capacity(lower.len());
    let mut in_space = false;
    for c in lower.chars() {
        if c.is_whitespace() {
            // The CLI replaces a run of white space by one `-`.
            if !in_space {
                out.push('-');
            }
            in_space = true;
            continue;
        }
        in_space = false;
        out.push(
            if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            },
        );
    }
    let out = out.trim_start_matches(['.', '-']).to_string();
    (!out.is_empty() && name_problem(&out).is_none()).then_some(out)
}

/// The folder the Squad CLI's import gives the `i`th SKILL.md of an export's
/// `skills` list: the slug of its front-matter name, else `skill-<i>`.
fn listed_skill_name(text: &str, i: usize) -> String {
    front_matter_name(text)
        .and_then(|n| skill_slug(&n))
        .unwrap_or_else(|| format!("skill-{i}"))
}

/// Whether the Squad CLI's import accepts `name` as an agent folder
/// (its `isSafeSlug`: ASCII letters, digits, `.`, `_`, `-`, starting with
/// a letter or digit, no `..`).
pub fn squad_cli_accepts_agent(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.contains("..")
}

/// What the Squad CLI's import (the version of [`SQUAD_CLI_VERSION`]) does
/// not bring into a project from `bundle`, one line each, for `export` to
/// say when it writes the squad-cli shape. squadctl's import keeps all of it.
pub fn squad_cli_drops(bundle: &Bundle) -> Vec<String> {
    let mut out = vec![
        "team.md's `## Project Context` (never exported; `squadctl import` puts a placeholder in its place, the Squad CLI's import leaves the section out)".to_string(),
    ];
    if bundle.ceremonies.is_some() {
        out.push("ceremonies.md (carried in `ceremonies`, which the Squad CLI ignores)".into());
    }
    if !bundle.alumni.is_empty() {
        let names: Vec<&str> = bundle.alumni.keys().map(String::as_str).collect();
        out.push(format!(
            "retired agents {} (carried in `alumni`, which the Squad CLI ignores)",
            names.join(", ")
        ));
    }
    for (name, files) in &bundle.skills {
        let others: Vec<&str> = files
            .keys()
            .map(String::as_str)
            .filter(|f| *f != crate::skill::SKILL_FILE)
            .collect();
        if !others.is_empty() {
            out.push(format!(
                "skill {name}: its files besides SKILL.md ({}; carried in `skill_folders`, which the Squad CLI ignores)",
                others.join(", ")
            ));
        }
    }
    for (agent, a) in &bundle.agents {
        if !a.files.is_empty() {
            let names: Vec<&str> = a.files.keys().map(String::as_str).collect();
            out.push(format!(
                "agent {agent}: {} (carried in `agents.{agent}.files`, which the Squad CLI ignores)",
                names.join(", ")
            ));
        }
        if !a.skills.is_empty() {
            let names: Vec<&str> = a.skills.keys().map(String::as_str).collect();
            out.push(format!(
                "agent {agent}'s own skills {} (carried in `agents.{agent}.skills`, which the Squad CLI ignores)",
                names.join(", ")
            ));
        }
        if !squad_cli_accepts_agent(agent) {
            out.push(format!(
                "agent {agent}: the Squad CLI's import refuses this folder name (it takes ASCII letters, digits, `.`, `_`, `-`) and stops"
            ));
        }
    }
    out
}

/// Parses an export file of either shape (detected from its keys),
/// checking everything an import relies on.
pub fn parse(bytes: &[u8]) -> Result<Bundle, BundleError> {
    // A UTF-8 byte order mark (Windows editors save one) is not JSON's.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let value = parse_strict(bytes).map_err(
        |JsonError {
             line,
             column,
             message,
         }| BundleError {
            json_path: "$".into(),
            position: Some((line, column)),
            message: format!("not valid JSON: {message}"),
        },
    )?;
    let top = object(&value, "$")?;
    let shape = if top.contains_key("squad_format_version") {
        Shape::Squad
    } else if top.contains_key("version") {
        Shape::SquadCli
    } else {
        return Err(err(
            "$",
            "neither export shape: a squad file has `squad_format_version`, a Squad CLI export `version`",
        ));
    };
    let mut ignored = Vec::new();
    match shape {
        Shape::Squad => {
            let v = opt_string(top.get("squad_format_version"), "$.squad_format_version")?
                .unwrap_or_default();
            if v.split('.').next() != Some("1") {
                return Err(err(
                    "$.squad_format_version",
                    format!("version {v:?} is not supported (this squadctl reads 1.x)"),
                ));
            }
        }
        Shape::SquadCli => {
            let v = opt_string(top.get("version"), "$.version")?.unwrap_or_default();
            if v != "1.0" {
                return Err(err(
                    "$.version",
                    format!("Squad CLI export version {v:?} is not supported (expected \"1.0\")"),
                ));
            }
        }
    }
    let exported_at = opt_string(top.get("exported_at"), "$.exported_at")?.unwrap_or_default();
    let (mut project, mut owner) = (String::new(), String::new());
    if let Some(from) = top.get("exported_from").filter(|v| !v.is_null()) {
        let o = object(from, "$.exported_from")?;
        project = opt_string(o.get("project"), "$.exported_from.project")?.unwrap_or_default();
        owner = opt_string(o.get("owner"), "$.exported_from.owner")?.unwrap_or_default();
    }
    let casting = match top.get("casting") {
        Some(c) => casting_map(c, "$.casting")?,
        None => return Err(err("$", "the file has no `casting`")),
    };
    let agents = match top.get("agents") {
        Some(a) => agents_map(a, "$.agents", true, &mut ignored)?,
        None => return Err(err("$", "the file has no `agents`")),
    };
    let alumni = match top.get("alumni") {
        Some(a) if !a.is_null() => agents_map(a, "$.alumni", false, &mut ignored)?,
        _ => BTreeMap::new(),
    };
    let field = |a: &str, b: &str| -> Result<Option<String>, BundleError> {
        match opt_string(top.get(a), &format!("$.{a}"))? {
            Some(s) => Ok(Some(s)),
            None => opt_string(top.get(b), &format!("$.{b}")),
        }
    };
    let (team, routing) = match shape {
        Shape::Squad => (field("team", "team")?, field("routing", "routing")?),
        Shape::SquadCli => (field("team_md", "team")?, field("routing_md", "routing")?),
    };
    let ceremonies = field("ceremonies", "ceremonies_md")?;
    let skills = match (shape, top.get("skills")) {
        (_, None | Some(Value::Null)) => BTreeMap::new(),
        (Shape::Squad, Some(s)) => skills_map(s, "$.skills")?,
        (Shape::SquadCli, Some(s)) => {
            let Value::Array(list) = s else {
                return Err(err(
                    "$.skills",
                    format!(
                        "expected an array of SKILL.md texts, found {}",
                        type_name(s)
                    ),
                ));
            };
            // Our whole skill folders (the CLI ignores the key); a listed
            // SKILL.md that one of them holds is that skill, not another.
            let mut out = match top.get("skill_folders") {
                Some(f) if !f.is_null() => skills_map(f, "$.skill_folders")?,
                _ => BTreeMap::new(),
            };
            let mut lower: Vec<String> = out.keys().map(|k| crate::ids::name_key(k)).collect();
            for (i, t) in list.iter().enumerate() {
                let p = format!("$.skills[{i}]");
                let Value::String(text) = t else {
                    return Err(err(
                        &p,
                        format!("expected a string, found {}", type_name(t)),
                    ));
                };
                if out
                    .values()
                    .any(|f| f.get(crate::skill::SKILL_FILE) == Some(text))
                {
                    continue;
                }
                // Named as the Squad CLI's import names the folder.
                let name = listed_skill_name(text, i);
                check_name(&p, "skill name", &name)?;
                unique(&mut lower, &name, &p, "skill")?;
                out.insert(
                    name,
                    SkillFiles::from([(crate::skill::SKILL_FILE.to_string(), text.clone())]),
                );
            }
            out
        }
    };
    let squad_version = opt_string(top.get("squad_version"), "$.squad_version")?;
    for key in ["decisions", "decisions_md"] {
        if top.get(key).is_some_and(|v| !v.is_null()) {
            ignored.push(format!(
                "`{key}`: decisions are the old project's and are not imported"
            ));
        }
    }
    Ok(Bundle {
        shape,
        exported_at,
        project,
        owner,
        squad_version,
        casting,
        agents,
        alumni,
        team,
        routing,
        ceremonies,
        skills,
        ignored,
    })
}

fn agent_json(a: &BundleAgent, with_skills: bool) -> Value {
    let mut o = Map::new();
    if let Some(c) = &a.charter {
        o.insert("charter".into(), json!(c));
    }
    if let Some(h) = &a.history {
        o.insert("history".into(), json!(h));
    }
    if with_skills && !a.skills.is_empty() {
        o.insert("skills".into(), skills_json(&a.skills));
    }
    if !a.files.is_empty() {
        o.insert("files".into(), json!(a.files));
    }
    Value::Object(o)
}

fn skills_json(skills: &BTreeMap<String, SkillFiles>) -> Value {
    Value::Object(
        skills
            .iter()
            .map(|(n, f)| (n.clone(), json!({ "files": f })))
            .collect(),
    )
}

/// The export file's text, in `bundle.shape` (pretty JSON, one trailing
/// line break).
pub fn to_json(bundle: &Bundle) -> String {
    let mut o = Map::new();
    let casting: Map<String, Value> = bundle
        .casting
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let squad = bundle.shape == Shape::Squad;
    let agents: Map<String, Value> = bundle
        .agents
        .iter()
        .map(|(k, a)| (k.clone(), agent_json(a, true)))
        .collect();
    let alumni: Map<String, Value> = bundle
        .alumni
        .iter()
        .map(|(k, a)| (k.clone(), agent_json(a, false)))
        .collect();
    if squad {
        o.insert("squad_format_version".into(), json!("1.0"));
        o.insert("exported_at".into(), json!(bundle.exported_at));
        o.insert(
            "exported_from".into(),
            json!({ "project": bundle.project, "owner": bundle.owner }),
        );
        o.insert("casting".into(), Value::Object(casting));
        o.insert("agents".into(), Value::Object(agents));
        o.insert("team".into(), json!(bundle.team));
        o.insert("routing".into(), json!(bundle.routing));
        o.insert("ceremonies".into(), json!(bundle.ceremonies));
        if !bundle.skills.is_empty() {
            o.insert("skills".into(), skills_json(&bundle.skills));
        }
    } else {
        o.insert("version".into(), json!("1.0"));
        o.insert("exported_at".into(), json!(bundle.exported_at));
        o.insert(
            "squad_version".into(),
            json!(bundle.squad_version.clone().unwrap_or_default()),
        );
        if let Some(t) = &bundle.team {
            o.insert("team_md".into(), json!(t));
            o.insert("team".into(), json!(t));
        }
        if let Some(r) = &bundle.routing {
            o.insert("routing_md".into(), json!(r));
        }
        if let Some(c) = &bundle.ceremonies {
            o.insert("ceremonies".into(), json!(c));
        }
        o.insert("casting".into(), Value::Object(casting));
        o.insert("agents".into(), Value::Object(agents));
        let listed: Vec<(&String, &String)> = bundle
            .skills
            .iter()
            .filter_map(|(n, f)| Some((n, f.get(crate::skill::SKILL_FILE)?)))
            .collect();
        let skills: Vec<&String> = listed.iter().map(|(_, t)| *t).collect();
        o.insert("skills".into(), json!(skills));
        // A folder travels whole in `skill_folders` when the list alone
        // would not bring it back as it is: other files, or a folder name
        // the CLI's reading of the list would not give (a skill without
        // front matter would come back as `skill-<index>`).
        let renamed: Vec<&String> = listed
            .iter()
            .enumerate()
            .filter(|(i, (n, t))| listed_skill_name(t, *i) != **n)
            .map(|(_, (n, _))| *n)
            .collect();
        let folders: BTreeMap<String, SkillFiles> = bundle
            .skills
            .iter()
            .filter(|(n, f)| f.len() > 1 || renamed.contains(n))
            .map(|(n, f)| (n.clone(), f.clone()))
            .collect();
        if !folders.is_empty() {
            o.insert("skill_folders".into(), skills_json(&folders));
        }
        o.insert(
            "exported_from".into(),
            json!({ "project": bundle.project, "owner": bundle.owner }),
        );
    }
    if !bundle.alumni.is_empty() {
        o.insert("alumni".into(), Value::Object(alumni));
    }
    let mut s = serde_json::to_string_pretty(&Value::Object(o)).unwrap_or_default();
    s.push('\n');
    s
}

/// What an import needs besides the bundle.
#[derive(Debug, Clone)]
pub struct ImportOptions<'a> {
    /// Now, RFC 3339 (the `imported_at` of the registry and the banners).
    pub imported_at: String,
    /// Today, `YYYY-MM-DD` (the placeholder's `Created`).
    pub date: String,
    /// The built-in skills' names: a learned skill of such a name is
    /// imported as `<name>-imported` (seed 001, section 8).
    pub builtin_skills: &'a [&'a str],
}

/// The content of a new team directory: directories and files, paths
/// relative to it (each proven to stay inside by [`stays_inside`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Directories to create, parents first.
    pub dirs: Vec<PathBuf>,
    /// Files to write.
    pub files: Vec<(PathBuf, String)>,
    /// What people should know (renamed skills, ignored parts).
    pub notes: Vec<String>,
}

impl Plan {
    fn dir(&mut self, rel: PathBuf) {
        let mut acc = PathBuf::new();
        for c in rel.components() {
            acc.push(c);
            if !self.dirs.contains(&acc) {
                self.dirs.push(acc.clone());
            }
        }
    }

    fn file(&mut self, rel: PathBuf, text: String) {
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.dir(parent.to_path_buf());
        }
        self.files.push((rel, text));
    }

    fn skill(&mut self, base: PathBuf, files: &SkillFiles) {
        for (rel, text) in files {
            let parts: PathBuf = rel.split('/').collect();
            self.file(base.join(parts), text.clone());
        }
    }

    /// What makes the plan impossible to write, checked before anything is
    /// written: two files at one path (a skill renamed `<name>-imported`
    /// meeting one of that name), a file where a directory must be (`a`
    /// beside `a/b`), paths differing only in case (they collide on
    /// case-insensitive file systems). Empty when it can be written.
    pub fn conflicts(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut files: BTreeMap<String, &PathBuf> = BTreeMap::new();
        for (f, _) in &self.files {
            let key = crate::ids::name_key(&f.to_string_lossy());
            if let Some(other) = files.insert(key, f) {
                out.push(if other == f {
                    format!("two files would be written at {}", f.display())
                } else {
                    format!(
                        "{} and {} differ only in case or Unicode normalization (one name on disk for many file systems)",
                        other.display(),
                        f.display()
                    )
                });
            }
        }
        let dirs: BTreeMap<String, &PathBuf> = self
            .dirs
            .iter()
            .map(|d| (crate::ids::name_key(&d.to_string_lossy()), d))
            .collect();
        for (key, f) in &files {
            if let Some(d) = dirs.get(key) {
                out.push(format!(
                    "{} would be a file and a directory ({})",
                    f.display(),
                    d.display()
                ));
            }
        }
        out
    }

    /// Whether every path stays inside the team directory.
    pub fn is_contained(&self) -> bool {
        self.dirs.iter().all(|d| stays_inside(d)) && self.files.iter().all(|(f, _)| stays_inside(f))
    }
}

/// The files of the team directory an import of `bundle` creates (pure):
/// the roster with an empty Project Context, routing, ceremonies, casting
/// (the registry gains `imported_from`), agents with bannered histories,
/// alumni, skills, an empty decisions.md and the empty `decisions/inbox/`,
/// `orchestration-log/` and `log/`.
pub fn plan(bundle: &Bundle, opts: &ImportOptions<'_>) -> Plan {
    let mut p = Plan::default();
    let team = bundle.team.as_deref().unwrap_or("# Team\n\n## Members\n\n| Name | Role | Charter | Status |\n|------|------|---------|--------|\n");
    p.file(
        "team.md".into(),
        markdown::with_project_context_placeholder(team, &opts.date),
    );
    if let Some(r) = &bundle.routing {
        p.file("routing.md".into(), r.clone());
    }
    if let Some(c) = &bundle.ceremonies {
        p.file("ceremonies.md".into(), c.clone());
    }
    p.file("decisions.md".into(), String::new());
    p.dir(PathBuf::from("decisions").join("inbox"));
    p.dir("orchestration-log".into());
    p.dir("log".into());
    p.dir("casting".into());
    let mut casting = bundle.casting.clone();
    let registry = casting
        .entry("registry".into())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(r) = registry {
        r.insert(
            "imported_from".into(),
            json!({
                "project": bundle.project,
                "exported_at": bundle.exported_at,
                "imported_at": opts.imported_at,
            }),
        );
    }
    for (key, v) in &casting {
        let text = serde_json::to_string_pretty(v).unwrap_or_default() + "\n";
        p.file(PathBuf::from("casting").join(format!("{key}.json")), text);
    }
    let banner = markdown::import_banner(&bundle.project, &bundle.exported_at, &opts.imported_at);
    for (name, a) in &bundle.agents {
        let dir = PathBuf::from("agents").join(name);
        p.dir(dir.clone());
        if let Some(c) = &a.charter {
            p.file(dir.join("charter.md"), c.clone());
        }
        if let Some(h) = &a.history {
            p.file(
                dir.join("history.md"),
                format!("{banner}{}", markdown::strip_import_banner(h)),
            );
        }
        for (skill, files) in &a.skills {
            p.skill(dir.join("skills").join(skill), files);
        }
        p.skill(dir, &a.files);
    }
    for (name, a) in &bundle.alumni {
        let dir = PathBuf::from("agents")
            .join(super::read::ALUMNI_DIR)
            .join(name);
        p.dir(dir.clone());
        if let Some(c) = &a.charter {
            p.file(dir.join("charter.md"), c.clone());
        }
        if let Some(h) = &a.history {
            p.file(dir.join("history.md"), h.clone());
        }
        p.skill(dir, &a.files);
    }
    for (name, files) in &bundle.skills {
        let target = if opts.builtin_skills.contains(&name.as_str()) {
            let renamed = format!("{name}-imported");
            p.notes.push(format!(
                "skill `{name}` has the name of a built-in skill; imported as `{renamed}`"
            ));
            renamed
        } else {
            name.clone()
        };
        p.skill(PathBuf::from("skills").join(target), files);
    }
    p.notes.extend(bundle.ignored.iter().cloned());
    p
}

/// What an export needs besides the team directory.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// The shape to write.
    pub shape: Option<Shape>,
    /// Now, RFC 3339.
    pub exported_at: String,
    /// The project's name.
    pub project: String,
    /// Its owner, when known.
    pub owner: String,
    /// The CLI version written as `squad_version` (squad-cli shape).
    pub version: String,
    /// Only these agents (folder or roster names, any case); all when `None`.
    pub agents: Option<Vec<String>>,
    /// Team skills to carry, by name.
    pub skills: BTreeMap<String, SkillFiles>,
    /// Agents' own skills, by agent folder then skill name.
    pub agent_skills: BTreeMap<String, BTreeMap<String, SkillFiles>>,
    /// The other files of each agent's folder (`history-archive.md`, …), by
    /// folder; retired agents' by `_alumni/<folder>`.
    pub agent_files: BTreeMap<String, SkillFiles>,
}

/// Whether an agent's history stays home: Scribe's history is the
/// project's session log (seed 000, open question 3).
pub fn history_stays_home(folder: &str, role: Option<&str>) -> bool {
    folder.eq_ignore_ascii_case("scribe")
        || role.is_some_and(|r| r.to_ascii_lowercase().starts_with("session logger"))
}

/// Builds the bundle of `team` (pure): roster without Project Context,
/// histories with their import banner removed and project-specific
/// sections marked, the registry without an earlier `imported_from`.
/// Unknown names in `opts.agents` are an error naming them.
pub fn from_team(team: &super::Team, opts: ExportOptions) -> Result<Bundle, String> {
    let wanted = |folder: &str| -> bool {
        opts.agents.as_ref().is_none_or(|list| {
            list.iter().any(|w| {
                crate::ids::same_name(w, folder)
                    || team
                        .member_of(folder)
                        .is_some_and(|m| crate::ids::same_name(&m.name, w))
            })
        })
    };
    if let Some(list) = &opts.agents {
        let unknown: Vec<&String> = list
            .iter()
            .filter(|w| {
                !team.agents.keys().any(|f| {
                    crate::ids::same_name(f, w)
                        || team
                            .member_of(f)
                            .is_some_and(|m| crate::ids::same_name(&m.name, w))
                })
            })
            .collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
            return Err(format!(
                "no agent folder for {} (agents: {})",
                names.join(", "),
                team.agents.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let mut casting = team.casting.clone();
    if let Some(Value::Object(r)) = casting.get_mut("registry")
        && r.remove("imported_from").is_some()
        && r.is_empty()
    {
        // The registry an import created only to hold `imported_from`.
        casting.remove("registry");
    }
    let mut agents = BTreeMap::new();
    for (folder, a) in &team.agents {
        if !wanted(folder) {
            continue;
        }
        let history = a
            .history
            .as_deref()
            .filter(|_| !history_stays_home(folder, a.role.as_deref()))
            .map(|h| markdown::mark_project_sections(markdown::strip_import_banner(h)))
            .filter(|h| !h.trim().is_empty());
        let mut files = opts.agent_files.get(folder).cloned().unwrap_or_default();
        if history_stays_home(folder, a.role.as_deref()) {
            // The session log's archive stays home with it.
            files.remove("history-archive.md");
        }
        agents.insert(
            folder.clone(),
            BundleAgent {
                charter: a.charter.clone(),
                history,
                skills: opts.agent_skills.get(folder).cloned().unwrap_or_default(),
                files,
            },
        );
    }
    let alumni = team
        .alumni
        .iter()
        .map(|(f, a)| {
            (
                f.clone(),
                BundleAgent {
                    charter: a.charter.clone(),
                    history: a.history.clone(),
                    skills: BTreeMap::new(),
                    files: opts
                        .agent_files
                        .get(&format!("{}/{f}", super::read::ALUMNI_DIR))
                        .cloned()
                        .unwrap_or_default(),
                },
            )
        })
        .collect();
    Ok(Bundle {
        shape: opts.shape.unwrap_or(Shape::SquadCli),
        exported_at: opts.exported_at,
        project: opts.project,
        owner: opts.owner,
        squad_version: Some(opts.version),
        casting,
        agents,
        alumni,
        team: team.team_md.as_deref().map(markdown::strip_project_context),
        routing: team.routing.clone(),
        ceremonies: team.ceremonies.clone(),
        skills: opts.skills,
        ignored: Vec::new(),
    })
}
