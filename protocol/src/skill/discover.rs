//! Finding a project's skills.
//!
//! Team skills live in five places, in this order of precedence (the first
//! skill of a name wins; a later one of the same name is *shadowed* and
//! reported):
//!
//! 1. `<team>/skills/` (the team directory `.squad/`, or legacy `.ai-team/`,
//!    as [`crate::teamdir::locate`] finds it);
//! 2. `.github/skills/`;
//! 3. `.copilot/skills/`;
//! 4. `.claude/skills/`;
//! 5. `.agents/skills/`.
//!
//! An agent's own skills, `<team>/agents/<name>/skills/`, come before all of
//! them for that agent: what an agent learned overrides the team's skill of
//! the same name (also reported as shadowing).
//!
//! Only front matter is read. Every read goes through [`crate::fsx`]:
//! symlinked skill folders and SKILL.md files are reported, never followed.

use super::{SKILL_FILE, Skill, check_file};
use crate::diagnostic::{Diagnostic, Rule, Severity};
use crate::teamdir::{self, TeamDir};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The project-level skill directories after the team directory's own, in
/// order of precedence.
pub const PROJECT_SKILL_DIRS: &[&str] = &[
    ".github/skills",
    ".copilot/skills",
    ".claude/skills",
    ".agents/skills",
];

/// One directory skills are looked for in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    /// As shown to people: `.squad/skills`, `.github/skills`,
    /// `.squad/agents/ana/skills`.
    pub label: String,
    /// The directory.
    pub dir: PathBuf,
    /// The agent whose own skills these are, for an agent's directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// A skill found in a place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// The skill.
    pub skill: Skill,
    /// Where it was found (label of its [`Place`]).
    pub place: String,
    /// The agent it belongs to (agent skills only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The SKILL.md relative to the project (what prompts show).
    pub location: String,
}

/// A skill hidden by one of the same name found earlier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    /// The hidden skill.
    pub skill: Found,
    /// The SKILL.md that wins (relative to the project).
    pub by: String,
    /// The agent for whom it is hidden (when an agent's skill hides a team skill).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub for_agent: Option<String>,
}

/// Everything discovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Discovery {
    /// The skills in effect, in order of precedence.
    pub skills: Vec<Found>,
    /// Skills hidden by an earlier one of the same name.
    pub shadowed: Vec<Shadowed>,
    /// Findings about every SKILL.md read and every place looked in.
    pub diagnostics: Vec<Diagnostic>,
    /// SKILL.md files read.
    pub files: usize,
    /// The places that exist (what a watcher watches).
    pub places: Vec<Place>,
}

impl Discovery {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

fn label_of(project: &Path, dir: &Path) -> String {
    dir.strip_prefix(project)
        .unwrap_or(dir)
        .display()
        .to_string()
}

/// The team skill places of a project, in order of precedence, whether they
/// exist or not.
pub fn team_places(project: &Path) -> Vec<Place> {
    let team = teamdir::locate(project);
    let mut out = Vec::new();
    let team_skills = team
        .as_ref()
        .map(|t| t.path.join("skills"))
        .unwrap_or_else(|| project.join(teamdir::TEAM_DIR).join("skills"));
    out.push(Place {
        label: label_of(project, &team_skills),
        dir: team_skills,
        agent: None,
    });
    for d in PROJECT_SKILL_DIRS {
        out.push(Place {
            label: (*d).to_string(),
            dir: project.join(d),
            agent: None,
        });
    }
    out
}

/// An agent's own skill place.
pub fn agent_place(project: &Path, team: &TeamDir, agent: &str) -> Place {
    let dir = team.path.join("agents").join(agent).join("skills");
    Place {
        label: label_of(project, &dir),
        dir,
        agent: Some(agent.to_string()),
    }
}

/// The agents that have a directory under `<team>/agents/`, sorted.
pub fn agents(team: &TeamDir) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(team.path.join("agents"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    out.sort();
    out
}

fn not_regular(path: &Path, what: &str, strict: bool) -> Diagnostic {
    let mut d = Diagnostic::new(
        path,
        Rule::SkillNotRegular,
        format!(
            "{what} is a symbolic link or special file; it is not followed and its skills are not loaded"
        ),
        "put the skill's files in a real directory (copy rather than link)",
    );
    if strict {
        d.severity = Severity::Error;
    }
    d
}

/// How discovery checks one SKILL.md: [`check_file`], or a caller's cache
/// of its results (squadd re-reads only the skills that changed).
pub type CheckSkill<'a> = &'a mut dyn FnMut(&Path, bool) -> crate::skill::SkillReport;

/// Reads the front matter of every skill in one place.
fn scan(project: &Path, place: &Place, strict: bool, out: &mut Discovery) -> Vec<Found> {
    scan_with(project, place, strict, out, &mut check_file)
}

/// [`scan`], checking each SKILL.md with `check`.
fn scan_with(
    project: &Path,
    place: &Place,
    strict: bool,
    out: &mut Discovery,
    check: CheckSkill<'_>,
) -> Vec<Found> {
    let meta = match std::fs::symlink_metadata(&place.dir) {
        Ok(m) => m,
        Err(_) => return Vec::new(),
    };
    if !meta.is_dir() {
        out.diagnostics.push(not_regular(
            &place.dir,
            &format!("`{}`", place.label),
            strict,
        ));
        return Vec::new();
    }
    out.places.push(place.clone());
    let mut entries: Vec<_> = match std::fs::read_dir(&place.dir) {
        Ok(rd) => rd.flatten().collect(),
        Err(e) => {
            out.diagnostics.push(Diagnostic::new(
                &place.dir,
                Rule::Unreadable,
                format!("cannot list `{}`: {e}", place.label),
                "check the directory's permissions",
            ));
            return Vec::new();
        }
    };
    entries.sort_by_key(|e| e.file_name());
    let mut found = Vec::new();
    for entry in entries {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            out.diagnostics.push(not_regular(
                &path,
                &format!("the skill folder `{}`", name.to_string_lossy()),
                strict,
            ));
            continue;
        }
        if !kind.is_dir() {
            // READMEs and the like beside the skill folders.
            continue;
        }
        let upper = path.join(SKILL_FILE);
        let lower = path.join("skill.md");
        let file = if std::fs::symlink_metadata(&upper).is_ok() {
            upper
        } else if std::fs::symlink_metadata(&lower).is_ok() {
            lower
        } else {
            let mut d = Diagnostic::new(
                &path,
                Rule::SkillMissingFile,
                format!(
                    "the folder `{}` in `{}` has no {SKILL_FILE}; it is not a skill",
                    name.to_string_lossy(),
                    place.label
                ),
                "add a SKILL.md (`squadctl skills new NAME` writes one) or move the folder out",
            );
            if strict {
                d.severity = Severity::Error;
            }
            out.diagnostics.push(d);
            continue;
        };
        out.files += 1;
        let report = check(&file, strict);
        out.diagnostics.extend(report.diagnostics);
        if let Some(skill) = report.skill {
            found.push(Found {
                location: label_of(project, &file),
                skill,
                place: place.label.clone(),
                agent: place.agent.clone(),
            });
        }
    }
    found
}

/// Keeps the first skill of each name; reports the others as shadowed.
fn resolve(
    candidates: Vec<Found>,
    for_agent: Option<&str>,
    strict: bool,
    out: &mut Discovery,
) -> Vec<Found> {
    let mut winners: Vec<Found> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for f in candidates {
        match index.get(&f.skill.name) {
            Some(&i) => {
                let by = winners[i].location.clone();
                // Only an agent's own skill hides a skill for that agent alone.
                let for_agent = for_agent.filter(|_| winners[i].agent.is_some());
                let whom = for_agent.map_or_else(String::new, |a| format!(" for agent `{a}`"));
                let mut d = Diagnostic::new(
                    &f.skill.path,
                    Rule::SkillShadowed,
                    format!(
                        "the skill `{}` is shadowed{whom} by `{by}`, which comes first; this one is never used",
                        f.skill.name
                    ),
                    "rename one of them or remove the duplicate (precedence: agent skills, then .squad/skills, .github/skills, .copilot/skills, .claude/skills, .agents/skills)",
                );
                if strict {
                    d.severity = Severity::Error;
                }
                out.diagnostics.push(d);
                out.shadowed.push(Shadowed {
                    skill: f,
                    by,
                    for_agent: for_agent.map(str::to_string),
                });
            }
            None => {
                index.insert(f.skill.name.clone(), winners.len());
                winners.push(f);
            }
        }
    }
    winners
}

/// The skills one agent may use (its own, then the team's), or the team's
/// alone when `agent` is `None`.
pub fn discover(project: &Path, agent: Option<&str>, strict: bool) -> Discovery {
    let mut out = Discovery::default();
    let mut candidates = Vec::new();
    if let (Some(agent), Some(team)) = (agent, teamdir::locate(project)) {
        candidates.extend(scan(
            project,
            &agent_place(project, &team, agent),
            strict,
            &mut out,
        ));
    }
    for place in team_places(project) {
        candidates.extend(scan(project, &place, strict, &mut out));
    }
    out.skills = resolve(candidates, agent, strict, &mut out);
    out
}

/// Every skill of the project: the team's, then each agent's own (an agent
/// skill that hides a team skill for that agent is reported). What
/// `squadctl validate` and `skills list` without `--agent` use.
pub fn discover_all(project: &Path, strict: bool) -> Discovery {
    discover_all_with(project, strict, &mut check_file)
}

/// [`discover_all`], checking each SKILL.md with `check`.
pub fn discover_all_with(project: &Path, strict: bool, check: CheckSkill<'_>) -> Discovery {
    let mut out = Discovery::default();
    let mut team_candidates = Vec::new();
    for place in team_places(project) {
        team_candidates.extend(scan_with(project, &place, strict, &mut out, check));
    }
    let team_skills = resolve(team_candidates, None, strict, &mut out);
    let mut all = team_skills.clone();
    if let Some(team) = teamdir::locate(project) {
        for agent in agents(&team) {
            let own = scan_with(
                project,
                &agent_place(project, &team, &agent),
                strict,
                &mut out,
                check,
            );
            if own.is_empty() {
                continue;
            }
            let own_count = own.len();
            let mut view = own;
            view.extend(team_skills.iter().cloned());
            let kept = resolve(view, Some(&agent), strict, &mut out);
            // Shadowing within the agent's view is reported above; keep the
            // agent's own skills for the listing.
            all.extend(
                kept.into_iter()
                    .filter(|f| f.agent.is_some())
                    .take(own_count),
            );
        }
    }
    out.skills = all;
    out
}

/// The skills of one directory of skill folders (`squadctl skills validate
/// DIR` on a directory that is neither a skill nor a project).
pub fn scan_dir(project: &Path, dir: &Path, strict: bool) -> Discovery {
    let mut out = Discovery::default();
    let label = match label_of(project, dir) {
        l if l.is_empty() => dir.display().to_string(),
        l => l,
    };
    let place = Place {
        label,
        dir: dir.to_path_buf(),
        agent: None,
    };
    let found = scan(project, &place, strict, &mut out);
    out.skills = resolve(found, None, strict, &mut out);
    out
}
