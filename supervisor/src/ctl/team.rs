//! `squadctl team show|validate`, `squadctl export`, `squadctl import`
//! (docs/team.md).

use super::validate::OutputArgs;
use crate::exit;
use crate::root;
use serde_json::json;
use squad_protocol::report::{self, Totals};
use squad_protocol::team::bundle::{self, ExportOptions, Shape};
use squad_protocol::team::{MAX_BUNDLE_BYTES, Team, markdown, read_team};
use squad_protocol::teamdir::{self, TeamDir};
use squad_protocol::{fsx, write_atomic};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The team directory: roster, charters, histories, casting (docs/team.md).
#[derive(Debug, clap::Subcommand)]
pub enum TeamCommand {
    /// Show the team: members, roles, charters, skills, history sizes.
    Show(ShowArgs),
    /// Validate the team files (team.md, routing.md, charters, casting JSON).
    Validate(ValidateArgs),
    /// Create a minimal valid team: roster (team.md with a Project Context),
    /// routing.md, a charter and history per member, casting files.
    ///
    /// For a project without a team (after `squadctl init`), so that
    /// `export` works and agents have charters. Refuses to overwrite any
    /// team file; writes nothing then. Edit the files afterwards: they hold
    /// placeholders where only you know the answer.
    New(NewArgs),
}

/// `team new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// A member, NAME=ROLE (repeatable; NAME in lowercase letters, digits
    /// and dashes). Default: `lead=Lead`.
    #[arg(long, value_name = "NAME=ROLE")]
    pub member: Vec<String>,
    /// The project's owner, for team.md's Project Context.
    #[arg(long, value_name = "NAME")]
    pub owner: Option<String>,
    /// The project's stack (languages, frameworks, tools).
    #[arg(long, value_name = "TEXT")]
    pub stack: Option<String>,
    /// What the project does, in one sentence.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// JSON: the team directory and the files written.
    #[arg(long)]
    pub json: bool,
}

/// `team show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// JSON: the roster, agents, alumni, casting keys, skills and diagnostics.
    #[arg(long)]
    pub json: bool,
}

/// Validate the team directory. Exit status: 0 no errors (warnings
/// allowed), 1 errors, 2 usage or I/O failure. Rules `team-…` are
/// documented in docs/team.md.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    #[allow(missing_docs)]
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The Squad CLI's `squad-export.json` shape (`version: "1.0"`), which
    /// `squad import` (@bradygaster/squad-cli 0.10.0) reads; our extra keys
    /// (ceremonies, alumni, whole skill folders) ride along for squadctl.
    SquadCli,
    /// Seed 000's portable `.squad` file (`squad_format_version`), which the
    /// Squad CLI refuses.
    Squad,
}

/// Export the team to one portable JSON file.
///
/// What travels: casting, charters, histories (project-specific sections
/// marked for review), team.md without its Project Context, routing,
/// ceremonies, retired agents, skills. What stays: decisions, logs, the
/// Project Context, Scribe's history. Review the file before sharing it
/// (`--review` shows what would leave the project). See docs/team.md.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Where to write (`-`: stdout). Default: squad-export.json in the
    /// project (squad-export-<timestamp>.squad for --format squad).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Only these agents (folder or roster names, comma-separated).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    pub agents: Option<Vec<String>>,
    /// The file's shape. squad-cli (default) is what the Squad CLI imports;
    /// export then says what the Squad CLI's import leaves out.
    #[arg(long, value_enum, default_value_t = ExportFormat::SquadCli)]
    pub format: ExportFormat,
    /// Print what would leave the project (agents, history sections marked
    /// project-specific, casting, skills) and write nothing.
    #[arg(long)]
    pub review: bool,
}

/// Import a team from an export file (either shape, told apart by its keys).
///
/// The team is written into the project at --root, or the current
/// directory (as `init` does): its .squad/ (or existing .ai-team/). Refuses a project that already has a team directory unless --force,
/// which moves the old one to <dir>-backup-<timestamp>/ (never deleted).
/// All or nothing: the new team is built beside and renamed into place.
/// Every name that becomes a path is checked; the file is at most 16 MiB.
/// An import killed half-way (--force) is finished or undone by the next
/// squadctl command, import or squadd start (a journal of its renames).
/// Exit status: 0 imported, 1 refused (bad file, existing team), 2 I/O
/// failure.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The export file.
    pub file: PathBuf,
    /// Replace an existing team (moved aside to <dir>-backup-<timestamp>/).
    #[arg(long)]
    pub force: bool,
    /// Check the file and print what would be written; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// JSON: what was (or would be) written.
    #[arg(long)]
    pub json: bool,
}

/// The project of a team command (the one team-directory lookup).
fn project(root_arg: Option<&Path>) -> Result<PathBuf, String> {
    root::team_project(root_arg).map_err(String::from)
}

fn locate(project: &Path) -> Result<TeamDir, String> {
    // The project as given (empty: here), so paths print relative.
    teamdir::locate(project).ok_or_else(|| {
        format!(
            "{}: no team directory (.squad/ or .ai-team/)",
            root::fs_path(project).display()
        )
    })
}

/// Runs `squadctl team …`.
pub(crate) fn run(root_arg: Option<&Path>, cmd: TeamCommand) -> u8 {
    let cmd = match cmd {
        TeamCommand::New(args) => return new_team(root_arg, &args),
        other => other,
    };
    let dir = match project(root_arg).and_then(|p| locate(&p)) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let team = read_team(&dir);
    match cmd {
        TeamCommand::Show(args) => show(&team, args.json),
        TeamCommand::Validate(args) => {
            let text = report::render(
                args.output.format(),
                &team.diagnostics,
                Totals {
                    files: team.files,
                    sessions: 0,
                },
                env!("CARGO_PKG_VERSION"),
                args.output.color(),
            );
            if super::print(&text) != exit::OK {
                return exit::FAILURE;
            }
            if team.diagnostics.iter().any(|d| d.is_error()) {
                exit::PROBLEMS
            } else {
                exit::OK
            }
        }
        TeamCommand::New(_) => exit::OK,
    }
}

/// One cell of a markdown table or one line of a list: no `|`, no line
/// break, not empty.
fn cell(flag: &str, text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() || t.contains(['|', '\n', '\r']) || t.chars().any(char::is_control) {
        return Err(format!(
            "{flag} `{}`: give one line of text without `|`",
            crate::text::escape(text)
        ));
    }
    Ok(t.to_string())
}

/// The files of a new team, relative to the team directory.
fn team_files(args: &NewArgs, now: &str) -> Result<Vec<(PathBuf, String)>, String> {
    let specs = if args.member.is_empty() {
        vec!["lead=Lead".to_string()]
    } else {
        args.member.clone()
    };
    let mut members: Vec<(String, String)> = Vec::new();
    for m in &specs {
        let (name, role) = m
            .split_once('=')
            .ok_or_else(|| format!("--member `{}`: write NAME=ROLE", crate::text::escape(m)))?;
        if !squad_protocol::IdKind::Agent.matches(name) {
            return Err(format!(
                "--member `{}`: the name must be lowercase letters, digits and single dashes (it names the agent's folder and is the agent's name in tasks)",
                crate::text::escape(name)
            ));
        }
        if members.iter().any(|(n, _)| n == name) {
            return Err(format!("--member `{name}` is given twice"));
        }
        members.push((name.to_string(), cell("--member", role)?));
    }
    let placeholder = |v: &Option<String>, flag: &str, what: &str| -> Result<String, String> {
        v.as_deref()
            .map_or_else(|| Ok(format!("({what}: fill in)")), |t| cell(flag, t))
    };
    let owner = placeholder(&args.owner, "--owner", "who owns the project")?;
    let stack = placeholder(&args.stack, "--stack", "languages, frameworks, tools")?;
    let description = placeholder(&args.description, "--description", "what the project does")?;
    let mut team = format!(
        "# Team Roster\n\n> {description}\n\n## Members\n\n| Name | Role | Charter | Status |\n|------|------|---------|--------|\n"
    );
    let mut routing = String::from(
        "# Work Routing\n\nHow to decide who handles what.\n\n## Routing Table\n\n| Work Type | Route To | Examples |\n|-----------|----------|----------|\n",
    );
    let mut files = Vec::new();
    let mut registry = serde_json::Map::new();
    for (name, role) in &members {
        let _ = writeln!(
            team,
            "| {name} | {role} | `.squad/agents/{name}/charter.md` | ✅ Active |"
        );
        let _ = writeln!(routing, "| {role} | {name} | (the work {name} takes) |");
        files.push((
            PathBuf::from(format!("agents/{name}/charter.md")),
            format!(
                "# {name} — {role}\n\n## Identity\n\n- **Name:** {name}\n- **Role:** {role}\n- **Expertise:** (fill in)\n\n## What I Own\n\n- (fill in)\n\n## Boundaries\n\n**I handle:** (fill in)\n\n**I don't handle:** (fill in)\n"
            ),
        ));
        files.push((
            PathBuf::from(format!("agents/{name}/history.md")),
            format!(
                "# Project Context\n\n- **Owner:** {owner}\n- **Stack:** {stack}\n- **Created:** {now}\n\n## Learnings\n\n<!-- Append new learnings below. Each entry is something lasting about the project. -->\n"
            ),
        ));
        registry.insert(
            name.clone(),
            json!({"persistent_name": name, "universe": "custom", "created_at": now, "legacy_named": false, "status": "active"}),
        );
    }
    let _ = write!(
        team,
        "\n## Project Context\n\n- **Owner:** {owner}\n- **Stack:** {stack}\n- **Description:** {description}\n- **Created:** {now}\n"
    );
    files.push((PathBuf::from("team.md"), team));
    files.push((PathBuf::from("routing.md"), routing));
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    files.push((
        PathBuf::from("casting/registry.json"),
        pretty(json!({ "agents": registry })),
    ));
    files.push((
        PathBuf::from("casting/history.json"),
        pretty(json!({"universe_usage_history": [], "assignment_cast_snapshots": {}})),
    ));
    files.push((
        PathBuf::from("casting/policy.json"),
        pretty(
            json!({"casting_policy_version": "1.1", "allowlist_universes": [], "universe_capacity": {}}),
        ),
    ));
    Ok(files)
}

/// Runs `squadctl team new`.
fn new_team(root_arg: Option<&Path>, args: &NewArgs) -> u8 {
    let project = match root_arg {
        Some(r) => r.to_path_buf(),
        None => match root::team_project(None) {
            Ok(p) => p,
            Err(_) => root::here(None),
        },
    };
    let dir = teamdir::locate(&project).map_or_else(
        || root::fs_path(&project).join(squad_protocol::tree::SQUAD_DIR),
        |d| d.path,
    );
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let files = match team_files(args, &now) {
        Ok(f) => f,
        Err(e) => return super::fail(e),
    };
    // Nothing is overwritten, and nothing is written when anything would be.
    let existing: Vec<String> = files
        .iter()
        .map(|(rel, _)| dir.join(rel))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .map(|p| p.display().to_string())
        .collect();
    if !existing.is_empty() {
        super::fail(format!(
            "the team files exist already: {}; nothing was written (`squadctl team show` shows the team)",
            crate::text::escape(&existing.join(", "))
        ));
        return exit::PROBLEMS;
    }
    let mut written = Vec::new();
    for (rel, text) in &files {
        let path = dir.join(rel);
        if let Err(e) = crate::safefs::write_project_file(&path, text.as_bytes(), Some(0o755)) {
            return super::fail(format!("{}: {e}", path.display()));
        }
        written.push(path);
    }
    if args.json {
        return super::print(&format!(
            "{:#}\n",
            json!({"team_dir": dir, "written": written})
        ));
    }
    let mut out = String::new();
    for p in &written {
        let _ = writeln!(out, "created {}", p.display());
    }
    out.push_str("next: fill in the placeholders (team.md's Project Context, each charter), then `squadctl team validate`; `squadctl export` carries the team to another project\n");
    super::print_human(&out)
}

fn agent_skill_names(team: &Team, folder: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(team.dir.join("agents").join(folder).join("skills")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

fn team_skill_names(team: &Team) -> Vec<String> {
    let d = squad_protocol::skill::discover::discover_all(&team.project, false);
    let mut names: Vec<String> = d
        .skills
        .iter()
        .filter(|f| f.agent.is_none())
        .map(|f| f.skill.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn show(team: &Team, as_json: bool) -> u8 {
    let members: Vec<serde_json::Value> = team
        .roster
        .members
        .iter()
        .map(|m| {
            let agent = team
                .agents
                .iter()
                .find(|(f, _)| f.eq_ignore_ascii_case(&m.folder))
                .map(|(_, a)| a);
            json!({
                "name": m.name,
                "role": m.role,
                "status": m.status,
                "folder": m.folder,
                "has_folder": agent.is_some(),
                "charter_role": agent.and_then(|a| a.role.clone()),
                "charter_bytes": agent.and_then(|a| a.charter.as_ref().map(String::len)),
                "history_bytes": agent.and_then(|a| a.history.as_ref().map(String::len)),
                "skills": agent.map(|a| agent_skill_names(team, &a.folder)).unwrap_or_default(),
            })
        })
        .collect();
    let unlisted: Vec<&String> = team
        .agents
        .keys()
        .filter(|f| team.member_of(f).is_none())
        .collect();
    let skills = team_skill_names(team);
    let errors = team.diagnostics.iter().filter(|d| d.is_error()).count();
    if as_json {
        let v = json!({
            "team_dir": team.dir,
            "legacy": team.legacy,
            "members": members,
            "agents_not_in_roster": unlisted,
            "alumni": team.alumni.keys().collect::<Vec<_>>(),
            "casting": team.casting.keys().collect::<Vec<_>>(),
            "skills": skills,
            "has_project_context": team.roster.project_context.is_some(),
            "errors": errors,
            "warnings": team.diagnostics.len() - errors,
            "diagnostics": team.diagnostics,
        });
        return super::print(&(serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "team: {}{} ({} members, {} agent folders, {} alumni)",
        team.dir.display(),
        if team.legacy { " (legacy name)" } else { "" },
        team.roster.members.len(),
        team.agents.len(),
        team.alumni.len()
    );
    let width = team
        .roster
        .members
        .iter()
        .map(|m| m.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    for (m, v) in team.roster.members.iter().zip(&members) {
        let charter = match v["charter_bytes"].as_u64() {
            Some(n) => format!("charter {n} B"),
            None if m.has_no_charter() => "no charter".into(),
            None => "charter missing".into(),
        };
        let history = v["history_bytes"]
            .as_u64()
            .map_or(String::new(), |n| format!(", history {n} B"));
        let skills = v["skills"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map_or(String::new(), |a| {
                let names: Vec<&str> = a.iter().filter_map(|s| s.as_str()).collect();
                format!(", skills: {}", names.join(" "))
            });
        let _ = writeln!(
            out,
            "  {:width$}  {} ({charter}{history}{skills})",
            m.name, m.role
        );
    }
    for f in &unlisted {
        let _ = writeln!(out, "  agents/{f}/ is not in the roster");
    }
    if !team.alumni.is_empty() {
        let names: Vec<&str> = team.alumni.keys().map(String::as_str).collect();
        let _ = writeln!(out, "alumni: {}", names.join(", "));
    }
    if !team.casting.is_empty() {
        let keys: Vec<&str> = team.casting.keys().map(String::as_str).collect();
        let _ = writeln!(out, "casting: {}", keys.join(", "));
    }
    if !skills.is_empty() {
        let _ = writeln!(out, "team skills: {}", skills.join(", "));
    }
    let _ = writeln!(
        out,
        "{} errors, {} warnings (squadctl team validate)",
        errors,
        team.diagnostics.len() - errors
    );
    super::print_human(&out)
}

/// Runs `squadctl export`.
pub(crate) fn export(root_arg: Option<&Path>, args: ExportArgs) -> u8 {
    let project = match project(root_arg) {
        Ok(p) => p,
        Err(e) => return super::fail(e),
    };
    let dir = match locate(&project) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let team = read_team(&dir);
    if team.team_md.is_none() {
        return super::fail(format!(
            "{}: no team.md, so no team to export",
            dir.path.display()
        ));
    }
    let errors: Vec<String> = team
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| d.to_string())
        .collect();
    if !errors.is_empty() {
        eprintln!(
            "squadctl: the team has errors; an export would lose what cannot be read. Nothing was written.\n{}",
            crate::text::escape_lines(&errors.join("\n"))
        );
        return exit::PROBLEMS;
    }
    let (skills, agent_skills, mut notes) = crate::team::gather_skills(&dir);
    let (agent_files, more) = crate::team::gather_agent_files(&dir);
    notes.extend(more);
    let shape = match args.format {
        ExportFormat::Squad => Shape::Squad,
        ExportFormat::SquadCli => Shape::SquadCli,
    };
    let project_name = std::fs::canonicalize(root::fs_path(&dir.project))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let now = chrono::Utc::now();
    let b = match bundle::from_team(
        &team,
        ExportOptions {
            shape: Some(shape),
            exported_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            project: project_name,
            owner: crate::team::owner(&team),
            version: bundle::SQUAD_CLI_VERSION.into(),
            agents: args.agents.clone(),
            skills,
            agent_skills,
            agent_files,
        },
    ) {
        Ok(b) => b,
        Err(e) => return super::fail(e),
    };
    for n in &notes {
        super::warn(n);
    }
    if shape == Shape::SquadCli {
        // What `squad import` will not bring in: said now, while the
        // source team is still at hand.
        for d in bundle::squad_cli_drops(&b) {
            super::warn(format!("the Squad CLI's import leaves out {d}"));
        }
    }
    if args.review {
        return super::print_human(&review(&team, &b));
    }
    let text = bundle::to_json(&b);
    if text.len() as u64 > MAX_BUNDLE_BYTES {
        return super::fail(format!(
            "the export is {} bytes, over the {MAX_BUNDLE_BYTES}-byte limit an import accepts; export fewer agents (--agents) or trim histories",
            text.len()
        ));
    }
    if args.out.as_deref() == Some(Path::new("-")) {
        return super::print(&text);
    }
    let out = args.out.unwrap_or_else(|| {
        root::fs_path(&project).join(match shape {
            Shape::Squad => format!("squad-export-{}.squad", now.format("%Y%m%dT%H%M%SZ")),
            Shape::SquadCli => "squad-export.json".into(),
        })
    });
    if let Err(e) = write_atomic(&out, text.as_bytes()) {
        return super::fail(format!("{}: {e}", out.display()));
    }
    let marked: usize = b
        .agents
        .values()
        .filter_map(|a| a.history.as_deref())
        .map(|h| h.matches(markdown::PROJECT_SPECIFIC_MARK).count())
        .sum();
    super::print_human(&format!(
        "exported {} agents, {} skills ({} format) to {}\nreview it before sharing: histories may hold project facts ({marked} sections marked project-specific; `squadctl export --review` lists them)\n",
        b.agents.len(),
        b.skills.len(),
        shape.as_str(),
        out.display()
    ))
}

/// What would leave the project, for `export --review`.
fn review(team: &Team, b: &bundle::Bundle) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "would export ({} format), from project {:?}:",
        b.shape.as_str(),
        b.project
    );
    for (name, a) in &b.agents {
        let _ = writeln!(
            out,
            "  agent {name}: charter {} B, history {}",
            a.charter.as_ref().map_or(0, String::len),
            a.history
                .as_ref()
                .map_or("stays home".to_string(), |h| format!("{} B", h.len()))
        );
        if let Some(h) = &a.history {
            for (line, title, lines) in markdown::project_sections(h) {
                let _ = writeln!(
                    out,
                    "    line {line}: \"{title}\" ({lines} lines) is marked project-specific"
                );
            }
        }
        for s in a.skills.keys() {
            let _ = writeln!(out, "    own skill {s}");
        }
        for (f, text) in &a.files {
            let _ = writeln!(out, "    {f} ({} B)", text.len());
        }
    }
    if !b.alumni.is_empty() {
        let names: Vec<&str> = b.alumni.keys().map(String::as_str).collect();
        let _ = writeln!(out, "  alumni: {}", names.join(", "));
    }
    let keys: Vec<&str> = b.casting.keys().map(String::as_str).collect();
    let _ = writeln!(out, "  casting: {}", keys.join(", "));
    for (name, files) in &b.skills {
        let _ = writeln!(out, "  skill {name}: {} files", files.len());
    }
    let _ = writeln!(
        out,
        "  team.md ({} B, Project Context removed), routing.md: {}, ceremonies.md: {}",
        b.team.as_ref().map_or(0, String::len),
        if b.routing.is_some() { "yes" } else { "no" },
        if b.ceremonies.is_some() { "yes" } else { "no" }
    );
    let _ = writeln!(
        out,
        "stays home: decisions.md{}, decisions/inbox/, orchestration-log/, log/, the Project Context",
        if team.decisions.is_some() {
            " (present)"
        } else {
            ""
        }
    );
    out.push_str("nothing was written\n");
    out
}

/// Runs `squadctl import`.
pub(crate) fn import(root_arg: Option<&Path>, args: ImportArgs) -> u8 {
    let project = root::here(root_arg);
    let bytes = match fsx::read_regular(&args.file, MAX_BUNDLE_BYTES) {
        Ok(b) => b,
        Err(e) => {
            let code = if matches!(e, fsx::ReadError::Io(ref io) if io.kind() != std::io::ErrorKind::InvalidData)
            {
                exit::FAILURE
            } else {
                exit::PROBLEMS
            };
            super::fail(format!("{}: {e}; nothing was written", args.file.display()));
            return code;
        }
    };
    let mut b = match bundle::parse(&bytes) {
        Ok(b) => b,
        Err(e) => {
            let pos = e
                .position
                .map_or(String::new(), |(l, c)| format!(":{l}:{c}"));
            super::fail(format!(
                "{}{pos}: {}: {}; nothing was written",
                args.file.display(),
                e.json_path,
                e.message
            ));
            return exit::PROBLEMS;
        }
    };
    if b.project.is_empty() {
        // A Squad CLI file names no project: its file name does (as the CLI
        // itself takes it).
        b.project = args
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    let report = match crate::team::import(&project, &b, args.force, args.dry_run) {
        Ok(r) => r,
        Err(e @ crate::team::ImportError::Refused(_)) => {
            super::fail(e);
            return exit::PROBLEMS;
        }
        Err(e) => return super::fail(e),
    };
    if args.json {
        return super::print(&(serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"));
    }
    let mut out = String::new();
    let verb = if report.dry_run {
        "would import"
    } else {
        "imported"
    };
    let _ = writeln!(
        out,
        "{verb} {} agents ({}), {} skills from a {} file into {}",
        report.agents.len(),
        report.agents.join(", "),
        report.skills.len(),
        report.shape,
        report.target.display()
    );
    if let Some(b) = &report.backup {
        let _ = writeln!(
            out,
            "{} the old team to {}",
            if report.dry_run {
                "would move"
            } else {
                "moved"
            },
            b.display()
        );
    }
    if report.dry_run {
        for f in &report.files {
            let _ = writeln!(out, "  {}", f.display());
        }
        out.push_str("nothing was written (--dry-run)\n");
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    if !report.dry_run {
        out.push_str(
            "next: tell the team about this project (team.md's Project Context is a placeholder)\n",
        );
    }
    super::print_human(&out)
}
