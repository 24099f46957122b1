//! `squadctl validate`.

use crate::exit;
use crate::root;
use clap::ValueEnum;
use squad_protocol::report::{self, Format, Totals};
use squad_protocol::tree::{Scope, classify, default_threads, validate_scopes};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// `path:line:col: error[rule-id]: message` and a hint; coloured on a terminal.
    Human,
    /// One JSON object: counts and every diagnostic.
    Json,
    /// GitHub Actions annotations (`::error file=…,line=…,col=…::…`).
    Github,
    /// SARIF 2.1.0, one rule per rule id, for code scanning upload.
    Sarif,
}

impl From<OutputFormat> for Format {
    fn from(f: OutputFormat) -> Format {
        match f {
            OutputFormat::Human => Format::Human,
            OutputFormat::Json => Format::Json,
            OutputFormat::Github => Format::Github,
            OutputFormat::Sarif => Format::Sarif,
        }
    }
}

/// When to colour human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// When stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// How results are printed: shared by `validate` and `check`.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,

    /// Shorthand for `--format json`.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,

    /// Colour for the human format.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

impl OutputArgs {
    /// The format to render.
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else {
            self.format.into()
        }
    }

    /// Whether to colour: `auto` means stdout is a terminal and NO_COLOR is unset.
    pub fn color(&self) -> bool {
        match self.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        }
    }
}

/// Validate protocol files, session directories or a whole project.
///
/// Each PATH may be a protocol file (file rules only), a session directory
/// (file and session rules), a project root, its `.squad/` or its
/// `.squad/sessions/`. Without PATH, the project root is validated.
///
/// Exit status: 0 when no errors (warnings allowed), 1 when any error, 2 on
/// usage or I/O failure. Rule ids are documented in docs/protocol.md; a
/// project's skills are checked too (docs/skills.md), and its team files
/// (docs/team.md; a team file may be given as PATH).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files, session directories or project roots.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    #[allow(missing_docs)]
    #[command(flatten)]
    pub output: OutputArgs,

    /// Worker threads for parsing (default: every core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

/// `squadctl validate` of a project without `.squad/` whose team is in the
/// legacy `.ai-team/`: the project's files, no sessions.
fn run_team_only(project: PathBuf, args: Args) -> u8 {
    let mut diagnostics = Vec::new();
    let mut files = 0;
    for (d, n) in [
        crate::skills::project_diagnostics(&project),
        crate::memory::project_diagnostics(&project),
        crate::team::project_diagnostics(&project),
    ] {
        diagnostics.extend(d);
        files += n;
    }
    report(&args, &diagnostics, Totals { files, sessions: 0 })
}

/// Prints the report of a validation and says its exit status.
fn report(args: &Args, diagnostics: &[squad_protocol::Diagnostic], totals: Totals) -> u8 {
    let (format, color) = (args.output.format(), args.output.color());
    let text = report::render(
        format,
        diagnostics,
        totals,
        env!("CARGO_PKG_VERSION"),
        color,
    );
    if super::print(&text) != exit::OK {
        return exit::FAILURE;
    }
    if diagnostics.iter().any(|d| d.is_error()) {
        exit::PROBLEMS
    } else {
        exit::OK
    }
}

/// Runs `squadctl validate`.
pub(crate) fn run(root_arg: Option<&Path>, args: Args) -> u8 {
    let explicit = !args.paths.is_empty();
    let paths = if args.paths.is_empty() {
        match root::resolve(root_arg) {
            Ok(root) => vec![root],
            // A legacy project (its team in `.ai-team/`, no `.squad/` yet):
            // its team, memory and skills are checked where the Squad CLI
            // finds them; it has no sessions.
            Err(e) => match root::team_project(root_arg) {
                Ok(project) => return run_team_only(project, args),
                Err(_) => return super::fail(e),
            },
        }
    } else {
        args.paths.clone()
    };
    let mut scopes = Vec::new();
    // SKILL.md files and skill directories are checked as skills.
    let mut skill_checks = squad_protocol::skill::discover::Discovery::default();
    for p in &paths {
        if explicit && let Some(d) = crate::skills::check_target(root::fs_path(p), false) {
            skill_checks.files += d.files;
            skill_checks.diagnostics.extend(d.diagnostics);
            continue;
        }
        // Team files are checked as their team's (docs/team.md).
        if explicit && let Some((d, n)) = crate::team::check_target(root::fs_path(p)) {
            skill_checks.files += n;
            skill_checks.diagnostics.extend(d);
            continue;
        }
        match classify(root::fs_path(p)) {
            // Keep printed paths relative to the current directory.
            Ok(Scope::Root(_)) if p.as_os_str().is_empty() => {
                scopes.push(Scope::Root(PathBuf::new()))
            }
            Ok(scope) => scopes.push(scope),
            Err(e) => return super::fail(format!("{}: {e}", root::fs_path(p).display())),
        }
    }
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    let validation = match validate_scopes(&scopes, threads) {
        Ok(v) => v,
        Err(e) => return super::fail(e),
    };
    // A project's skills are part of it (docs/skills.md).
    let mut diagnostics = validation.diagnostics;
    diagnostics.extend(skill_checks.diagnostics);
    let mut files = validation.files_checked + skill_checks.files;
    for scope in &scopes {
        if let Scope::Root(project) = scope {
            let (skill_diagnostics, skill_files) = crate::skills::project_diagnostics(project);
            diagnostics.extend(skill_diagnostics);
            files += skill_files;
            let (memory_diagnostics, memory_files) = crate::memory::project_diagnostics(project);
            diagnostics.extend(memory_diagnostics);
            files += memory_files;
            let (team_diagnostics, team_files) = crate::team::project_diagnostics(project);
            diagnostics.extend(team_diagnostics);
            files += team_files;
            let (policy_diagnostics, policy_files) = crate::locks::policy_diagnostics(project);
            diagnostics.extend(policy_diagnostics);
            files += policy_files;
            let (config_diagnostics, config_files) = crate::runners::config_diagnostics(project);
            diagnostics.extend(config_diagnostics);
            files += config_files;
        }
    }
    report(
        &args,
        &diagnostics,
        Totals {
            files,
            sessions: validation.sessions_checked,
        },
    )
}
