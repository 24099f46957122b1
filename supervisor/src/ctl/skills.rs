//! `squadctl skills`: list, show, validate, prompt, upgrade, new.

use super::validate::OutputArgs;
use crate::exit;
use crate::root;
use crate::skills::install_builtin;
use serde_json::json;
use squad_protocol::report::{self, Totals};
use squad_protocol::skill::discover::{self, Discovery, Found};
use squad_protocol::skill::{self, SKILL_FILE};
use squad_protocol::{Diagnostic, fsx, teamdir};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Agent Skills (SKILL.md folders): find, check, present and install them.
///
/// Team skills are read from, in this order of precedence: .squad/skills
/// (or legacy .ai-team/skills), .github/skills, .copilot/skills,
/// .claude/skills, .agents/skills; an agent's own skills
/// (.squad/agents/NAME/skills) come first for that agent. A skill of a name
/// already found is shadowed and reported. See docs/skills.md.
#[derive(Debug, clap::Subcommand)]
pub enum SkillsCommand {
    /// List the skills in effect (name, place, description).
    List(ListArgs),
    /// Show one skill: its fields, where it lives, and its SKILL.md.
    Show(ShowArgs),
    /// Check SKILL.md files against the Agent Skills standard.
    Validate(ValidateArgs),
    /// Print the <available_skills> block and MCP servers table for an agent.
    Prompt(PromptArgs),
    /// Install missing built-in skills and replace older ones.
    Upgrade(UpgradeArgs),
    /// Create a new skill folder with a valid SKILL.md.
    New(NewArgs),
}

/// `skills list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// The skills this agent sees (its own, then the team's). Without it:
    /// the team's skills and every agent's own.
    #[arg(long, value_name = "A")]
    pub agent: Option<String>,
    /// JSON: skills, shadowed skills and diagnostics.
    #[arg(long)]
    pub json: bool,
}

/// `skills show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The skill's name.
    pub name: String,
    /// Look in this agent's view (its own skills first).
    #[arg(long, value_name = "A")]
    pub agent: Option<String>,
    /// JSON: the skill's fields and text.
    #[arg(long)]
    pub json: bool,
}

/// Check SKILL.md files. Each PATH may be a SKILL.md, a skill folder, a
/// directory of skill folders, or a project; without PATH, every skill of
/// the project. Lenient by default (only what makes a skill unusable is an
/// error); --strict makes every rule an error, the standard's verdict.
///
/// Exit status: 0 no errors, 1 errors, 2 usage or I/O failure.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// SKILL.md files, skill folders, skills directories or projects.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Every rule is an error (as the standard's reference validator).
    #[arg(long)]
    pub strict: bool,
    #[allow(missing_docs)]
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `skills prompt`.
#[derive(Debug, clap::Args)]
pub struct PromptArgs {
    /// The agent the prompt is for.
    #[arg(long, value_name = "A")]
    pub agent: String,
    /// JSON: the block, the table, the servers, the token estimate and budget.
    #[arg(long)]
    pub json: bool,
}

/// `skills upgrade`.
#[derive(Debug, clap::Args)]
pub struct UpgradeArgs {
    /// Say what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// JSON: one object per built-in skill.
    #[arg(long)]
    pub json: bool,
}

/// `skills new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The skill's name: lowercase letters, digits and single hyphens.
    pub name: String,
    /// Create it among this agent's own skills instead of the team's.
    #[arg(long, value_name = "A")]
    pub agent: Option<String>,
    /// The description (what the skill does and when to use it).
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
}

/// Runs `squadctl skills …`.
pub(crate) fn run(root_arg: Option<&Path>, cmd: SkillsCommand) -> u8 {
    match cmd {
        SkillsCommand::List(a) => list(root_arg, a),
        SkillsCommand::Show(a) => show(root_arg, a),
        SkillsCommand::Validate(a) => validate(root_arg, a),
        SkillsCommand::Prompt(a) => prompt_cmd(root_arg, a),
        SkillsCommand::Upgrade(a) => upgrade(root_arg, a),
        SkillsCommand::New(a) => new(root_arg, a),
    }
}

/// The project: the one team-directory lookup, so a legacy `.ai-team/`
/// project has skills as it has a team and memory.
fn project(root_arg: Option<&Path>) -> Result<PathBuf, u8> {
    root::team_project(root_arg).map_err(super::fail)
}

/// Agent names become path components: refuse anything that would leave
/// `<team>/agents/`.
fn check_agent(agent: &str) -> Result<(), u8> {
    if agent.is_empty() || agent.starts_with('.') || agent.contains(['/', '\\', '\0']) {
        return Err(super::fail(format!(
            "`{agent}` is not an agent name (a folder name under .squad/agents/)"
        )));
    }
    Ok(())
}

/// The skills one agent sees (its own, the team's, the built-in ones), or
/// every skill of the project when no agent is named.
fn discover_for(project: &Path, agent: Option<&str>) -> Result<Discovery, u8> {
    match agent {
        Some(a) => {
            check_agent(a)?;
            Ok(discover::discover(project, Some(a), false))
        }
        None => Ok(discover::discover_all(project, false)),
    }
}

/// Notes on stderr for skills that lenient loading skipped, so no skill goes
/// missing silently.
fn note_skipped(d: &Discovery) {
    for diag in d.diagnostics.iter().filter(|d| d.is_error()) {
        eprintln!(
            "squadctl: warning: skipped: {}",
            crate::text::escape(&diag.to_string())
        );
    }
}

fn warn_unknown_agent(project: &Path, agent: &str) {
    if let Some(team) = teamdir::locate(project)
        && !team.path.join("agents").join(agent).is_dir()
    {
        eprintln!(
            "squadctl: note: no agent `{agent}` in {}/agents/: showing the team's skills only",
            team.path.display()
        );
    }
}

fn list(root_arg: Option<&Path>, args: ListArgs) -> u8 {
    let project = match project(root_arg) {
        Ok(p) => p,
        Err(c) => return c,
    };
    let d = match discover_for(&project, args.agent.as_deref()) {
        Ok(d) => d,
        Err(c) => return c,
    };
    if let Some(a) = &args.agent {
        warn_unknown_agent(&project, a);
    }
    if args.json {
        let v = json!({
            "skills": d.skills,
            "shadowed": d.shadowed,
            "diagnostics": d.diagnostics,
        });
        return super::print(&format!("{v:#}\n"));
    }
    let mut out = String::new();
    if d.skills.is_empty() {
        out.push_str("no skills found\n");
    }
    let width = d
        .skills
        .iter()
        .map(|f| f.skill.name.chars().count())
        .max()
        .unwrap_or(0);
    for f in &d.skills {
        let owner = f
            .agent
            .as_deref()
            .map_or_else(String::new, |a| format!(" (agent {a})"));
        let _ = writeln!(
            out,
            "{:width$}  {}{owner}\n{:width$}  {}",
            f.skill.name,
            f.location,
            "",
            one_line(&f.skill.description, 100),
        );
    }
    for s in &d.shadowed {
        let whom = s
            .for_agent
            .as_deref()
            .map_or_else(String::new, |a| format!(" for agent {a}"));
        let _ = writeln!(
            out,
            "shadowed: {} at {} (hidden{whom} by {})",
            s.skill.skill.name, s.skill.location, s.by
        );
    }
    let (errors, warnings) = counts(&d.diagnostics);
    if errors + warnings > 0 {
        let _ = writeln!(
            out,
            "{errors} skipped, {}: run `squadctl skills validate` for details",
            crate::text::count(warnings, "warning", "warnings")
        );
    }
    // Names, places and descriptions come from the files.
    super::print(&crate::text::escape_lines(&out))
}

fn counts(d: &[Diagnostic]) -> (usize, usize) {
    let errors = d.iter().filter(|d| d.is_error()).count();
    (errors, d.len() - errors)
}

/// One line of terminal text: whitespace collapsed, control characters
/// (escape sequences a file could carry) escaped, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = crate::text::escape(&flat).into_owned();
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max - 1).collect::<String>() + "…"
    }
}

fn show(root_arg: Option<&Path>, args: ShowArgs) -> u8 {
    let project = match project(root_arg) {
        Ok(p) => p,
        Err(c) => return c,
    };
    let d = match discover_for(&project, args.agent.as_deref()) {
        Ok(d) => d,
        Err(c) => return c,
    };
    let Some(found) = d.skills.iter().find(|f| f.skill.name == args.name) else {
        let known: Vec<&str> = d.skills.iter().map(|f| f.skill.name.as_str()).collect();
        return super::fail(format!(
            "no skill `{}`{}; skills found: {}",
            args.name,
            args.agent
                .as_deref()
                .map_or_else(String::new, |a| format!(" for agent `{a}`")),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    let text =
        match fsx::read_regular_to_string(&found.skill.path, skill::frontmatter::MAX_SKILL_BYTES) {
            Ok(t) => t,
            Err(e) => return super::fail(format!("{}: {e}", found.skill.path.display())),
        };
    let diagnostics: Vec<&Diagnostic> = d
        .diagnostics
        .iter()
        .filter(|x| x.path == found.skill.path)
        .collect();
    let shadowed: Vec<&str> = d
        .shadowed
        .iter()
        .filter(|s| s.skill.skill.name == found.skill.name)
        .map(|s| s.skill.location.as_str())
        .collect();
    if args.json {
        let v = json!({
            "skill": found,
            "shadows": shadowed,
            "diagnostics": diagnostics,
            "text": text,
        });
        return super::print(&format!("{v:#}\n"));
    }
    let mut out = show_header(found);
    for s in &shadowed {
        let _ = writeln!(out, "shadows:       {s}");
    }
    for diag in &diagnostics {
        let _ = writeln!(out, "problem:       {diag}");
    }
    out.push('\n');
    out.push_str(&text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
    super::print(&crate::text::escape_lines(&out))
}

fn show_header(f: &Found) -> String {
    let s = &f.skill;
    let mut out = String::new();
    let _ = writeln!(out, "name:          {}", s.name);
    let _ = writeln!(out, "location:      {}", f.location);
    let _ = writeln!(out, "place:         {}", f.place);
    if let Some(a) = &f.agent {
        let _ = writeln!(out, "agent:         {a}");
    }
    let _ = writeln!(
        out,
        "description:   {}",
        one_line(&s.description, usize::MAX)
    );
    if let Some(v) = s.version() {
        let _ = writeln!(out, "version:       {v}");
    }
    if let Some(l) = &s.license {
        let _ = writeln!(out, "license:       {l}");
    }
    if let Some(c) = &s.compatibility {
        let _ = writeln!(out, "compatibility: {c}");
    }
    if let Some(t) = &s.allowed_tools {
        let _ = writeln!(out, "allowed-tools: {t}");
    }
    for m in &s.mcp_servers {
        let _ = writeln!(
            out,
            "mcp server:    {}{}{}",
            m.name,
            if m.required { "" } else { " (optional)" },
            m.purpose
                .as_deref()
                .map_or_else(String::new, |p| format!(": {p}"))
        );
    }
    out
}

/// What one PATH of `skills validate` names.
fn validate_path(path: &Path, strict: bool) -> Result<Discovery, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(d) = crate::skills::check_target(path, strict) {
        return Ok(d);
    }
    if meta.is_file() || meta.file_type().is_symlink() {
        // Any other file is checked as a SKILL.md.
        let r = skill::check_file(path, strict);
        return Ok(Discovery {
            files: 1,
            diagnostics: r.diagnostics,
            ..Default::default()
        });
    }
    if !meta.is_dir() {
        return Err(format!("{}: not a file or directory", path.display()));
    }
    let is_project = teamdir::locate(path).is_some()
        || discover::PROJECT_SKILL_DIRS
            .iter()
            .any(|p| path.join(p).is_dir());
    if is_project {
        return Ok(discover::discover_all(path, strict));
    }
    // A directory of skill folders, checked as one place.
    Ok(discover::scan_dir(path, path, strict))
}

fn validate(root_arg: Option<&Path>, args: ValidateArgs) -> u8 {
    let mut all = Discovery::default();
    if args.paths.is_empty() {
        let project = match project(root_arg) {
            Ok(p) => p,
            Err(c) => return c,
        };
        all = discover::discover_all(&project, args.strict);
    } else {
        for p in &args.paths {
            match validate_path(p, args.strict) {
                Ok(d) => {
                    all.files += d.files;
                    all.diagnostics.extend(d.diagnostics);
                }
                Err(e) => return super::fail(e),
            }
        }
    }
    let (format, color) = (args.output.format(), args.output.color());
    let text = report::render(
        format,
        &all.diagnostics,
        Totals {
            files: all.files,
            sessions: 0,
        },
        env!("CARGO_PKG_VERSION"),
        color,
    );
    if super::print(&text) != exit::OK {
        return exit::FAILURE;
    }
    if all.has_errors() {
        exit::PROBLEMS
    } else {
        exit::OK
    }
}

fn prompt_cmd(root_arg: Option<&Path>, args: PromptArgs) -> u8 {
    if let Err(c) = check_agent(&args.agent) {
        return c;
    }
    // The team-directory lookup (a legacy `.ai-team/` project has skills);
    // the policy's skill budget from `.squad/policies.yaml` when there is one.
    let project = match project(root_arg) {
        Ok(p) => root::fs_path(&p).to_path_buf(),
        Err(c) => return c,
    };
    let policy = match crate::locks::load_policy(&project) {
        Ok(p) => p,
        Err(e) => return super::fail(e),
    };
    warn_unknown_agent(&project, &args.agent);
    let (p, d) = crate::skills::agent_prompt(&project, &args.agent);
    note_skipped(&d);
    let warning = squad_policies::skills::budget_warning(&policy.skills, p.tokens, d.skills.len());
    if args.json {
        let v = json!({
            "agent": args.agent,
            "available_skills": p.available_skills,
            "mcp_table": p.mcp_table,
            "mcp_servers": p.mcp_servers,
            "tokens": p.tokens,
            "budget_tokens": policy.skills.prompt_budget_tokens,
            "warning": warning,
        });
        return super::print(&format!("{v:#}\n"));
    }
    if d.skills.is_empty() {
        eprintln!("squadctl: note: no skills for agent `{}`", args.agent);
    }
    let code = super::print(&p.text());
    eprintln!(
        "squadctl: about {} tokens for {} skills (budget {})",
        p.tokens,
        d.skills.len(),
        policy.skills.prompt_budget_tokens
    );
    if let Some(w) = warning {
        eprintln!("squadctl: warning: {w}");
    }
    code
}

fn team_dir(project: &Path) -> Result<teamdir::TeamDir, u8> {
    teamdir::locate(project).ok_or_else(|| {
        super::fail(format!(
            "no team directory (.squad/) in {}; run `squadctl init` first",
            root::fs_path(project).display()
        ))
    })
}

fn upgrade(root_arg: Option<&Path>, args: UpgradeArgs) -> u8 {
    let project = match project(root_arg) {
        Ok(p) => p,
        Err(c) => return c,
    };
    let team = match team_dir(&project) {
        Ok(t) => t,
        Err(c) => return c,
    };
    let outcomes = match install_builtin(&team.path, args.dry_run) {
        Ok(o) => o,
        Err(e) => return super::fail(e),
    };
    if args.json {
        let v = json!({ "dry_run": args.dry_run, "skills": outcomes });
        return super::print(&format!("{v:#}\n"));
    }
    let mut out = String::new();
    let would = if args.dry_run { "would be " } else { "" };
    for o in &outcomes {
        let message = if args.dry_run {
            match o.action {
                "installed" => format!("would install version {}", o.version),
                "replaced" => format!("would {}", o.message.replacen("replaced", "replace", 1)),
                _ => o.message.clone(),
            }
        } else {
            o.message.clone()
        };
        let _ = writeln!(
            out,
            "{}: {} ({})",
            o.skill,
            message,
            crate::text::escape(&o.path.display().to_string())
        );
    }
    let changed = outcomes
        .iter()
        .filter(|o| matches!(o.action, "installed" | "replaced"))
        .count();
    let _ = writeln!(
        out,
        "{changed} built-in skills {would}installed or replaced{}",
        if args.dry_run {
            " (dry run: nothing written)"
        } else {
            ""
        }
    );
    super::print(&out)
}

fn new(root_arg: Option<&Path>, args: NewArgs) -> u8 {
    if let Some(problem) = skill::name_problem(&args.name) {
        return super::fail(format!(
            "`{}` {problem}: a skill name is 1-64 lowercase letters, digits and single hyphens",
            args.name
        ));
    }
    let project = match project(root_arg) {
        Ok(p) => p,
        Err(c) => return c,
    };
    let team = match team_dir(&project) {
        Ok(t) => t,
        Err(c) => return c,
    };
    let base = match &args.agent {
        Some(a) => {
            if let Err(c) = check_agent(a) {
                return c;
            }
            team.path.join("agents").join(a).join("skills")
        }
        None => team.path.join("skills"),
    };
    let dir = base.join(&args.name);
    if std::fs::symlink_metadata(&dir).is_ok() {
        return super::fail(format!("{} already exists", dir.display()));
    }
    // A skill of this name elsewhere would shadow, or be shadowed by, the new one.
    let existing = match discover_for(&project, args.agent.as_deref()) {
        Ok(d) => d,
        Err(c) => return c,
    };
    if let Some(f) = existing.skills.iter().find(|f| f.skill.name == args.name) {
        return super::fail(format!(
            "a skill `{}` already exists at {}; pick another name",
            args.name, f.location
        ));
    }
    let description = args.description.clone().unwrap_or_else(|| {
        format!(
            "TODO: what {} does and when to use it (one or two sentences; agents choose skills by this text).",
            args.name
        )
    });
    let text = scaffold(&args.name, &description);
    let report = skill::check_text(&dir.join(SKILL_FILE), &text, true);
    if let Some(d) = report.diagnostics.first() {
        return super::fail(format!("the description is not valid: {}", d.message));
    }
    let file = dir.join(SKILL_FILE);
    // The folder is made, and SKILL.md written, without following a link
    // below the project root.
    if let Err(e) = crate::safefs::write_project_file(&file, text.as_bytes(), Some(0o777)) {
        return super::fail(format!("{}: {e}", file.display()));
    }
    super::print(&format!(
        "created {}\nedit its description and instructions; `squadctl skills validate {}` checks it\n",
        file.display(),
        dir.display()
    ))
}

/// A new skill's SKILL.md: valid under the strict rules.
pub(crate) fn scaffold(name: &str, description: &str) -> String {
    let quoted = serde_json::to_string(description).unwrap_or_else(|_| "\"\"".into());
    format!(
        "---\nname: {name}\ndescription: {quoted}\nmetadata:\n  version: \"0.1.0\"\n---\n\n# {name}\n\n## When to use\n\nThe situations this skill is for.\n\n## Instructions\n\nConcrete, actionable steps and patterns. Keep this file under 500 lines;\nput long references in `references/`, scripts in `scripts/`, templates in\n`assets/`.\n"
    )
}
