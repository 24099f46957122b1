//! Reading and validating a team directory.
//!
//! [`read_team`] reads everything the other features need (roster,
//! charters, histories, decisions, routing, ceremonies, casting, alumni) in
//! one pass and reports what is wrong as diagnostics (rules `team-…`,
//! docs/team.md). Every read goes through [`crate::fsx`]: no symlink is
//! followed, FIFOs never block, sizes are bounded.

use super::MAX_TEAM_FILE_BYTES;
use super::json::{parse_strict, type_name};
use super::markdown::{self, Roster, RosterProblemKind};
use crate::diagnostic::{Diagnostic, Location, Rule};
use crate::fsx::{self, ReadError};
use crate::teamdir::TeamDir;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The folder of retired agents, under `agents/`.
pub const ALUMNI_DIR: &str = "_alumni";

/// The casting files, in `casting/`.
pub const CASTING_KEYS: &[&str] = &["registry", "history", "policy"];

/// One agent's folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// The folder name under `agents/`.
    pub folder: String,
    /// `charter.md`, when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charter: Option<String>,
    /// `history.md`, when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// The charter's `- **Role:**`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// A team directory as read, with what is wrong with it.
#[derive(Debug, Clone, Default)]
pub struct Team {
    /// The team directory (`…/.squad` or `…/.ai-team`).
    pub dir: PathBuf,
    /// Its project.
    pub project: PathBuf,
    /// Found under the legacy name `.ai-team/`.
    pub legacy: bool,
    /// `team.md`, when readable.
    pub team_md: Option<String>,
    /// The roster parsed from `team.md`.
    pub roster: Roster,
    /// `routing.md`.
    pub routing: Option<String>,
    /// `ceremonies.md`.
    pub ceremonies: Option<String>,
    /// `decisions.md` (project-specific: never exported).
    pub decisions: Option<String>,
    /// The casting files that are valid JSON objects, by key (`registry`,
    /// `history`, `policy`, and any other `casting/<key>.json`).
    pub casting: BTreeMap<String, Value>,
    /// Agent folders under `agents/` (but `_alumni`), by folder name.
    pub agents: BTreeMap<String, Agent>,
    /// Retired agents under `agents/_alumni/`, by folder name.
    pub alumni: BTreeMap<String, Agent>,
    /// What is wrong.
    pub diagnostics: Vec<Diagnostic>,
    /// Files read.
    pub files: usize,
}

impl Team {
    /// The roster member an agent folder belongs to.
    pub fn member_of(&self, folder: &str) -> Option<&markdown::Member> {
        self.roster
            .members
            .iter()
            .find(|m| crate::ids::same_name(&m.folder, folder))
    }
}

/// Whether `path` is a directory and not a symlink to one: listing a
/// symlinked directory would follow it.
pub fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Which texts [`read_team_with`] reads whole. The others (decisions.md,
/// the histories) are only probed: opened and sized as a read would, so
/// that one that cannot be read is still reported, but not read (a team's
/// history grows without bound; its roster does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Texts<'a> {
    /// Every file ([`read_team`]).
    #[default]
    All,
    /// Team files but decisions.md and the histories (squadd's status, the
    /// team health). Invalid UTF-8 in those two goes unseen here (`memory
    /// validate` and `squadctl validate` read them).
    Roster,
    /// As `Roster`, plus decisions.md and this agent folder's history (a
    /// runner's prompt).
    Agent(&'a str),
}

/// What reading one file gave.
fn read_text(team: &mut Team, path: &Path) -> Option<String> {
    read_or_probe(team, path, true)
}

/// [`read_text`], or with `read` false only a probe ([`Texts`]).
fn read_or_probe(team: &mut Team, path: &Path, read: bool) -> Option<String> {
    let got = if read {
        fsx::read_regular_to_string(path, MAX_TEAM_FILE_BYTES).map(Some)
    } else {
        fsx::probe_regular(path, MAX_TEAM_FILE_BYTES).map(|_| None)
    };
    match got {
        Ok(t) => {
            team.files += 1;
            t
        }
        Err(ReadError::NotFound) => None,
        Err(e) => {
            team.files += 1;
            team.diagnostics.push(Diagnostic::new(
                path,
                Rule::TeamUnreadable,
                format!("cannot be read: {e}"),
                "make it a regular UTF-8 file of at most 16 MiB (symlinks are never followed)",
            ));
            None
        }
    }
}

/// The real subdirectories of `dir` (no symlinks, no dot names), sorted;
/// symlinked entries are reported.
fn subdirs(team: &mut Team, dir: &Path) -> Vec<String> {
    if !is_real_dir(dir) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        match std::fs::symlink_metadata(e.path()) {
            Ok(m) if m.is_dir() => out.push(name),
            Ok(m) if m.file_type().is_symlink() => team.diagnostics.push(Diagnostic::new(
                e.path(),
                Rule::TeamUnreadable,
                "is a symbolic link (never followed)",
                "make the agent folder a real directory",
            )),
            _ => {}
        }
    }
    out.sort();
    out
}

fn read_agent(team: &mut Team, dir: &Path, folder: &str, alumni: bool, texts: Texts<'_>) -> Agent {
    let charter_path = dir.join("charter.md");
    let charter = read_text(team, &charter_path);
    let wanted = match texts {
        Texts::All => true,
        Texts::Roster => false,
        Texts::Agent(a) => a == folder,
    };
    let history = read_or_probe(team, &dir.join("history.md"), wanted);
    let role = charter
        .as_deref()
        .and_then(markdown::charter_role)
        .map(|r| r.0);
    if !alumni {
        match &charter {
            None if !charter_path.exists() => team.diagnostics.push(Diagnostic::new(
                &charter_path,
                Rule::TeamMissingFile,
                format!("agent `{folder}` has no charter.md"),
                "write the agent's charter (who it is, its `- **Role:**`, what it owns)",
            )),
            Some(text) if role.is_none() => team.diagnostics.push(
                Diagnostic::new(
                    &charter_path,
                    Rule::TeamCharterNoRole,
                    "the charter has no `- **Role:**` line",
                    "add `- **Role:** <role>` under `## Identity`",
                )
                .at(Some(Location {
                    line: text.lines().count().max(1) as u32,
                    column: 1,
                })),
            ),
            _ => {}
        }
    }
    Agent {
        folder: folder.to_string(),
        charter,
        history,
        role,
    }
}

fn read_casting(team: &mut Team, key: &str, path: &Path) {
    let Some(text) = read_text(team, path) else {
        return;
    };
    match parse_strict(text.as_bytes()) {
        Ok(Value::Object(m)) => {
            team.casting.insert(key.to_string(), Value::Object(m));
        }
        Ok(other) => team.diagnostics.push(
            Diagnostic::new(
                path,
                Rule::TeamJsonType,
                format!("the file holds {}, not a JSON object", type_name(&other)),
                "a casting file is one JSON object (`{ … }`)",
            )
            .at(Some(Location { line: 1, column: 1 })),
        ),
        Err(e) => team.diagnostics.push(
            Diagnostic::new(
                path,
                Rule::TeamInvalidJson,
                format!("invalid JSON: {}", e.message),
                "fix the JSON at this position (keys quoted, no trailing commas, no duplicate keys)",
            )
            .at((e.line > 0).then_some(Location {
                line: e.line,
                column: e.column.max(1),
            })),
        ),
    }
}

/// Reads and validates the team directory `team` (as
/// [`crate::teamdir::locate`] found it). Never fails: what cannot be read
/// is a diagnostic.
pub fn read_team(team: &TeamDir) -> Team {
    read_team_with(team, Texts::All)
}

/// [`read_team`] reading whole only the texts `texts` names; the
/// diagnostics are the same but for invalid UTF-8 in a file only probed.
pub fn read_team_with(team: &TeamDir, texts: Texts<'_>) -> Team {
    let dir = &team.path;
    let mut t = Team {
        dir: dir.clone(),
        project: team.project.clone(),
        legacy: team.legacy,
        ..Team::default()
    };
    let team_md_path = dir.join("team.md");
    t.team_md = read_text(&mut t, &team_md_path);
    match &t.team_md {
        Some(text) => t.roster = markdown::parse_roster(text),
        None if !team_md_path.exists() => t.diagnostics.push(Diagnostic::new(
            &team_md_path,
            Rule::TeamNoTeamMd,
            "the team directory has no team.md",
            "write team.md with a `## Members` table (`| Name | Role | Charter | Status |`), or run `squadctl import` with an exported team",
        )),
        None => {}
    }
    for p in std::mem::take(&mut t.roster.problems) {
        let rule = match p.kind {
            RosterProblemKind::NoMembers => Rule::TeamNoMembers,
            RosterProblemKind::Incomplete => Rule::TeamMemberIncomplete,
            RosterProblemKind::Duplicate => Rule::TeamDuplicateMember,
        };
        let hint = match p.kind {
            RosterProblemKind::NoMembers => {
                "add a `## Members` section with a `| Name | Role | Charter | Status |` table"
            }
            RosterProblemKind::Incomplete => "give every member a name and a role",
            RosterProblemKind::Duplicate => "remove the second row or rename the member",
        };
        t.diagnostics.push(
            Diagnostic::new(&team_md_path, rule, p.message.clone(), hint).at(Some(Location {
                line: p.line,
                column: p.column,
            })),
        );
        t.roster.problems.push(p);
    }
    if t.team_md.is_some() && t.roster.project_context.is_none() {
        t.diagnostics.push(Diagnostic::new(
            &team_md_path,
            Rule::TeamNoProjectContext,
            "team.md has no `## Project Context` section",
            "add `## Project Context` with the owner, stack and description of this project",
        ));
    }
    t.routing = read_text(&mut t, &dir.join("routing.md"));
    if t.routing.is_none() && !dir.join("routing.md").exists() {
        t.diagnostics.push(Diagnostic::new(
            dir.join("routing.md"),
            Rule::TeamMissingFile,
            "the team has no routing.md",
            "write routing.md: which agent takes which kind of work",
        ));
    }
    if let (Some(routing), false) = (&t.routing, t.roster.members.is_empty()) {
        let known = |n: &str| {
            t.roster.members.iter().any(|m| {
                crate::ids::same_name(&m.name, n)
                    || crate::ids::same_name(&m.folder, n)
                    || m.name
                        .split_whitespace()
                        .next()
                        .is_some_and(|f| crate::ids::same_name(f, n))
            }) || ["squad", "coordinator"]
                .iter()
                .any(|c| c.eq_ignore_ascii_case(n))
        };
        let unknown: Vec<(String, u32, u32)> = markdown::routing_agents(routing)
            .into_iter()
            .filter(|(n, _, _)| !known(n))
            .collect();
        for (name, line, column) in unknown {
            t.diagnostics.push(
                Diagnostic::new(
                    dir.join("routing.md"),
                    Rule::TeamRoutingUnknownAgent,
                    format!("routing sends work to `{name}`, who is not in the roster"),
                    "add the agent to team.md's `## Members`, or route the work to a member",
                )
                .at(Some(Location { line, column })),
            );
        }
    }
    t.ceremonies = read_text(&mut t, &dir.join("ceremonies.md"));
    t.decisions = read_or_probe(&mut t, &dir.join("decisions.md"), texts != Texts::Roster);

    // Casting: casting/<key>.json, and the legacy top-level casting-<key>.json.
    let casting = dir.join("casting");
    let mut keys: Vec<(String, PathBuf)> = Vec::new();
    if is_real_dir(&casting)
        && let Ok(entries) = std::fs::read_dir(&casting)
    {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(key) = name.strip_suffix(".json")
                && !name.starts_with('.')
            {
                keys.push((key.to_string(), e.path()));
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(key) = name
                .strip_prefix("casting-")
                .and_then(|n| n.strip_suffix(".json"))
                && !keys.iter().any(|(k, _)| k == key)
            {
                keys.push((key.to_string(), e.path()));
            }
        }
    }
    keys.sort();
    for (key, path) in keys {
        read_casting(&mut t, &key, &path);
    }

    // Agents and alumni.
    let agents_dir = dir.join("agents");
    for folder in subdirs(&mut t, &agents_dir) {
        if folder == ALUMNI_DIR {
            let alumni_dir = agents_dir.join(ALUMNI_DIR);
            for a in subdirs(&mut t, &alumni_dir) {
                let agent = read_agent(&mut t, &alumni_dir.join(&a), &a, true, texts);
                t.alumni.insert(a, agent);
            }
            continue;
        }
        let agent = read_agent(&mut t, &agents_dir.join(&folder), &folder, false, texts);
        if t.member_of(&folder).is_none() && t.team_md.is_some() {
            t.diagnostics.push(Diagnostic::new(
                agents_dir.join(&folder),
                Rule::TeamAgentNotInRoster,
                format!("agent folder `{folder}` belongs to no roster member"),
                "add the agent to the `## Members` table, or move the folder to agents/_alumni/",
            ));
        }
        t.agents.insert(folder, agent);
    }
    let missing: Vec<(String, u32)> = t
        .roster
        .members
        .iter()
        .filter(|m| !m.has_no_charter())
        .filter(|m| !t.agents.keys().any(|f| f.eq_ignore_ascii_case(&m.folder)))
        .map(|m| {
            (
                format!(
                    "`{}` ({}) has no folder agents/{}/",
                    m.name, m.role, m.folder
                ),
                m.line,
            )
        })
        .collect();
    for (message, line) in missing {
        t.diagnostics.push(
            Diagnostic::new(
                &team_md_path,
                Rule::TeamMemberWithoutAgent,
                message,
                "create the agent's folder with its charter.md, or mark the Charter cell `—`",
            )
            .at(Some(Location { line, column: 1 })),
        );
    }
    t
}
