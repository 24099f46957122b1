//! `squadctl`: the command line for agents, humans and CI.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) use crate::canon;
pub(crate) mod check;
pub(crate) mod cluster;
pub(crate) use crate::runners::codex_trust;
pub(crate) mod example;
pub(crate) mod gc;
pub(crate) mod guard;
pub(crate) mod guard_doctor;
mod guard_links;
mod handover;
pub(crate) use crate::runners::hook_file;
pub(crate) mod hook_run;
pub(crate) mod hooks;
pub(crate) mod init;
pub(crate) mod lock;
pub(crate) mod mcp;
mod mcp_http;
mod mcp_stdio;
pub(crate) mod memory;
pub(crate) mod merge;
pub(crate) mod message;
mod migrate;
mod plan_cache;
pub(crate) mod presence;
mod program;
pub(crate) mod read;
mod recipients;
pub(crate) mod review;
pub(crate) mod runs;
pub(crate) mod schema;
pub(crate) mod service;
mod session_dir;
pub(crate) mod shell;
pub(crate) mod skills;
pub(crate) mod status;
pub(crate) mod target;
pub(crate) mod team;
pub(crate) mod top;
mod undelivered;
pub(crate) mod usage;
pub(crate) mod validate;
pub(crate) mod wait;
pub(crate) mod write;

/// squadctl: validate, inspect and drive a squad project's coordination files.
///
/// Agents, humans and CI use it. Every command that reads state works straight
/// from the files, with or without the squadd daemon running.
///
/// Exit codes: 0 success, 1 problems found (validation errors, violations,
/// conflicts), 2 usage or I/O failure.
#[derive(Debug, Parser)]
#[command(name = "squadctl", version, propagate_version = true)]
pub struct Cli {
    /// Project root: the directory that holds `.squad/`. Default: the nearest
    /// such directory at or above the current one. In a linked git worktree
    /// whose main checkout holds `.squad/`, the main checkout (a note on
    /// stderr says so; docs/worktrees.md).
    #[arg(long, global = true, env = "SQUAD_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Quiet: no human-readable output on success and no warnings; errors,
    /// JSON and the exit code still tell the result.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Verbose: also say which project root and files a command works on
    /// (on stderr).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Print paths absolute. Default: relative to the project root (the
    /// same whether or not squadd runs and however the root was given).
    #[arg(long, global = true)]
    pub absolute: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    // Each command's help is the doc comment of its Args struct.
    #[allow(missing_docs)]
    Validate(validate::Args),
    #[allow(missing_docs)]
    Schema(schema::Args),
    #[allow(missing_docs)]
    Init(init::InitArgs),
    /// Manage sessions.
    ///
    /// The edits (complete, fail, phase, gate) are applied by squadd when it
    /// runs, else to the file under the session's lock. With `cluster:`, an
    /// edit made on a follower's checkout is applied by the project's leader
    /// (forwarded over NATS; the answer names the leader); with no leader it
    /// is refused and applied nowhere (docs/cluster.md, "Session edits on a
    /// follower").
    #[command(subcommand)]
    Session(init::SessionCommand),
    #[allow(missing_docs)]
    Check(check::Args),
    #[allow(missing_docs)]
    Gc(gc::Args),
    #[allow(missing_docs)]
    Send(message::SendArgs),
    #[allow(missing_docs)]
    Reply(message::ReplyArgs),
    /// An agent's delivered messages (list, next, ack).
    #[command(subcommand)]
    Inbox(message::InboxCommand),
    /// Advisory locks on paths and globs (acquire, release, renew, list).
    #[command(subcommand)]
    Lock(lock::LockCommand),
    /// The cluster of checkouts on NATS JetStream (status; docs/cluster.md).
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Install squadd as a systemd or launchd service.
    #[command(subcommand)]
    Service(service::ServiceCommand),
    #[allow(missing_docs)]
    Guard(guard::Args),
    /// Git hooks (pre-commit, commit-msg, pre-push) enforcing boundaries.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
    /// Team memory: SEM entries in decisions and histories.
    #[command(subcommand)]
    Memory(memory::MemoryCommand),
    #[allow(missing_docs)]
    Status(status::StatusArgs),
    #[allow(missing_docs)]
    Top(top::TopArgs),
    #[allow(missing_docs)]
    Events(status::EventsArgs),
    #[allow(missing_docs)]
    Health(status::HealthArgs),
    /// Agent Skills: list, show, validate, prompt, upgrade, new.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// Tasks: assign (new), list, show.
    #[command(subcommand)]
    Task(write::TaskCommand),
    #[allow(missing_docs)]
    Progress(write::ProgressArgs),
    #[allow(missing_docs)]
    ReportError(write::ReportErrorArgs),
    #[allow(missing_docs)]
    Next(read::NextArgs),
    #[allow(missing_docs)]
    Graph(read::GraphArgs),
    #[allow(missing_docs)]
    Runs(runs::RunsArgs),
    #[allow(missing_docs)]
    Usage(usage::UsageArgs),
    #[allow(missing_docs)]
    Presence(presence::PresenceArgs),
    #[allow(missing_docs)]
    Run(runs::RunArgs),
    #[allow(missing_docs)]
    Stop(runs::StopArgs),
    #[allow(missing_docs)]
    Merge(merge::MergeArgs),
    #[allow(missing_docs)]
    Review(review::ReviewArgs),
    /// The runtime configuration, .squad/config.json (show, validate, schema).
    #[command(subcommand)]
    Config(runs::ConfigCommand),
    #[allow(missing_docs)]
    Completions(shell::CompletionsArgs),
    #[allow(missing_docs)]
    Man(shell::ManArgs),
    /// The team directory: show, validate (docs/team.md).
    #[command(subcommand)]
    Team(team::TeamCommand),
    #[allow(missing_docs)]
    Export(team::ExportArgs),
    #[allow(missing_docs)]
    Import(team::ImportArgs),
    #[allow(missing_docs)]
    Mcp(mcp::McpArgs),
}

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match guard_hook_line(&args, std::env::var_os("SQUAD_ROOT")) {
        Some(cli) => cli,
        None => {
            // `events --help` lists the event kinds from the enum itself
            // (built only when help is asked for: every command pays for
            // what main does).
            let mut command = <Cli as clap::CommandFactory>::command();
            if args
                .iter()
                .any(|a| a == "-h" || a == "--help" || a == "help")
            {
                command =
                    command.mut_subcommand("events", |c| c.after_help(status::event_kinds_help()));
            }
            match <Cli as clap::FromArgMatches>::from_arg_matches(&command.get_matches_from(args)) {
                Ok(cli) => cli,
                Err(e) => e.exit(),
            }
        }
    };
    crate::verbosity::set(cli.quiet, cli.verbose);
    // An import killed while swapping teams is finished or undone before
    // any command looks at the project (docs/team.md).
    for note in crate::team::recover_for_command(cli.root.as_deref()) {
        warn(note);
    }
    // Where paths are shown from: resolved when a command first prints
    // one (the guard, which prints none, pays nothing).
    let _ = ROOT_ARG.set(cli.root.clone());
    ABSOLUTE.store(cli.absolute, std::sync::atomic::Ordering::Relaxed);
    if verbose()
        && let Ok(root) = crate::root::resolve(cli.root.as_deref())
    {
        // The resolved root is empty when it is the current directory:
        // named in full, never as an empty word.
        let fs = crate::root::fs_path(&root);
        let shown = std::fs::canonicalize(fs).unwrap_or_else(|_| fs.to_path_buf());
        eprintln!(
            "squadctl: project root {}",
            crate::text::escape(&shown.display().to_string())
        );
    }
    ExitCode::from(dispatch(cli))
}

/// `--root` as given, for [`shown`].
static ROOT_ARG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
/// The project root paths are shown relative to (canonical), once asked.
static SHOWN_ROOT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
/// `--absolute`.
static ABSOLUTE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A path as commands print it (issue 40 item 6): relative to the project
/// root (`.squad/sessions/S`, the root itself `.`), whether it was built
/// from `--root /abs`, `.` or the current directory; absolute with
/// `--absolute`; a path outside the project as it is.
pub(crate) fn shown(path: &Path) -> String {
    let root = SHOWN_ROOT.get_or_init(|| {
        let arg = ROOT_ARG.get().cloned().flatten();
        let root = crate::root::resolve(arg.as_deref()).ok()?;
        let fs = crate::root::fs_path(&root);
        Some(std::fs::canonicalize(fs).unwrap_or_else(|_| fs.to_path_buf()))
    });
    shown_with(
        path,
        root.as_deref(),
        ABSOLUTE.load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// A path in full (the current directory joined to a relative one, `.`
/// components dropped), whatever `--absolute` says.
pub(crate) fn absolute(path: &Path) -> String {
    shown_with(path, None, true)
}

/// [`shown`] given the root and the style.
fn shown_with(path: &Path, root: Option<&Path>, absolute: bool) -> String {
    let joined;
    let abs = if path.is_absolute() {
        path
    } else {
        match std::env::current_dir() {
            Ok(cwd) => {
                joined = cwd.join(path);
                &joined
            }
            Err(_) => return path.display().to_string(),
        }
    };
    // `a/./b` is `a/b`: the components say so without touching the disk.
    let abs: PathBuf = abs
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    if absolute {
        return abs.display().to_string();
    }
    // The root is canonical; a path reached through a link is made so
    // before it is compared.
    let canonical = root
        .filter(|r| !abs.starts_with(r))
        .and_then(|_| std::fs::canonicalize(&abs).ok());
    let abs = canonical.unwrap_or(abs);
    match root.and_then(|r| abs.strip_prefix(r).ok()) {
        Some(rel) if rel.as_os_str().is_empty() => ".".into(),
        Some(rel) => rel.display().to_string(),
        None => path.display().to_string(),
    }
}

/// The command lines `guard install` writes into the agent CLIs' hooks
/// (`guard`, `guard --format F`), read without clap: an agent CLI starts the
/// guard at every tool call, and building and dropping clap's tree of every
/// subcommand costs ~1.1M instructions, more than the guard's own work
/// (issue 23: no eager init of what a command does not use). Exactly what
/// clap would make of the same line (tested against it); `None` for
/// anything else, which clap reads as always. `squad_root`: the
/// environment's SQUAD_ROOT (an empty one is left to clap).
fn guard_hook_line(
    args: &[std::ffi::OsString],
    squad_root: Option<std::ffi::OsString>,
) -> Option<Cli> {
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(|a| a.to_str())
        .collect::<Option<_>>()?;
    let format = match words.as_slice() {
        ["guard"] => None,
        ["guard", "--format", f] => Some(*f),
        ["guard", f] => Some(f.strip_prefix("--format=")?),
        _ => return None,
    };
    let format = match format {
        Some(f) => Some(<guard::FormatArg as clap::ValueEnum>::from_str(f, false).ok()?),
        None => None,
    };
    let root = match squad_root {
        Some(r) if r.is_empty() => return None,
        r => r.map(PathBuf::from),
    };
    Some(Cli {
        root,
        quiet: false,
        verbose: 0,
        absolute: false,
        command: Command::Guard(guard::Args {
            format,
            action: None,
        }),
    })
}

/// Runs one parsed command: the one code path of the command line and of
/// `squadctl mcp`, whose tools run the same commands with their output
/// captured (see [`run_captured`]).
fn dispatch(cli: Cli) -> u8 {
    // Cluster call site: the commands an agent runs say where it works, so
    // its messages are delivered on this host (docs/cluster.md).
    if matches!(
        cli.command,
        Command::Send(_)
            | Command::Reply(_)
            | Command::Inbox(_)
            | Command::Progress(_)
            | Command::Next(_)
            | Command::Lock(_)
            | Command::ReportError(_)
    ) {
        crate::cluster::client::register_presence(cli.root.as_deref());
    }
    match cli.command {
        Command::Validate(args) => validate::run(cli.root.as_deref(), args),
        Command::Schema(args) => schema::run(args),
        Command::Init(args) => init::init(cli.root.as_deref(), args),
        Command::Session(cmd) => init::session(cli.root.as_deref(), cmd),
        Command::Check(args) => check::run(cli.root.as_deref(), args),
        Command::Gc(args) => gc::run(cli.root.as_deref(), args),
        Command::Lock(cmd) => lock::run(cli.root.as_deref(), cmd),
        Command::Cluster(cmd) => cluster::run(cli.root.as_deref(), cmd),
        Command::Send(args) => message::send(cli.root.as_deref(), args),
        Command::Reply(args) => message::reply(cli.root.as_deref(), args),
        Command::Inbox(cmd) => message::inbox_cmd(cli.root.as_deref(), cmd),
        Command::Service(cmd) => service::run(cli.root.as_deref(), cmd),
        Command::Guard(args) => guard::run(cli.root.as_deref(), args),
        Command::Hooks(cmd) => hooks::run(cli.root.as_deref(), cmd),
        Command::Memory(cmd) => memory::run(cli.root.as_deref(), cmd),
        Command::Status(args) => status::status(cli.root.as_deref(), args),
        Command::Top(args) => top::top(cli.root.as_deref(), args),
        Command::Events(args) => status::events(cli.root.as_deref(), args),
        Command::Health(args) => status::health(cli.root.as_deref(), args),
        Command::Skills(cmd) => skills::run(cli.root.as_deref(), cmd),
        Command::Task(cmd) => write::task(cli.root.as_deref(), cmd),
        Command::Progress(args) => write::progress(cli.root.as_deref(), args),
        Command::ReportError(args) => write::report_error(cli.root.as_deref(), args),
        Command::Next(args) => read::next(cli.root.as_deref(), args),
        Command::Graph(args) => read::graph(cli.root.as_deref(), args),
        Command::Runs(args) => runs::runs(cli.root.as_deref(), args),
        Command::Usage(args) => usage::run(cli.root.as_deref(), args),
        Command::Presence(args) => presence::run(cli.root.as_deref(), &args),
        Command::Run(args) => runs::run(cli.root.as_deref(), args),
        Command::Stop(args) => runs::stop(cli.root.as_deref(), args),
        Command::Merge(args) => merge::merge(cli.root.as_deref(), args),
        Command::Review(args) => review::run(cli.root.as_deref(), args),
        Command::Config(cmd) => runs::config(cli.root.as_deref(), cmd),
        Command::Completions(args) => shell::completions(args),
        Command::Man(args) => shell::man(args),
        Command::Team(cmd) => team::run(cli.root.as_deref(), cmd),
        Command::Export(args) => team::export(cli.root.as_deref(), args),
        Command::Import(args) => team::import(cli.root.as_deref(), args),
        Command::Mcp(args) => mcp::run(cli.root.as_deref(), args),
    }
}

/// Writes command output to stdout; a closed pipe (`squadctl … | head`) is
/// not an error.
pub(crate) fn print(text: &str) -> u8 {
    use std::io::Write;
    if capture(|c| c.0.push_str(text)) {
        return crate::exit::OK;
    }
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => fail(e),
        _ => crate::exit::OK,
    }
}

/// Writes human output to stdout with control characters escaped (names
/// come from the file system and from agents), line breaks kept. Nothing
/// under `-q`.
pub(crate) fn print_human(text: &str) -> u8 {
    if quiet() {
        return crate::exit::OK;
    }
    print(&crate::text::escape_lines(text))
}

pub(crate) use crate::verbosity::{quiet, verbose};

/// Prints a warning on stderr (not under `-q`).
pub(crate) fn warn(message: impl std::fmt::Display) {
    if !quiet() {
        eprint_text(&format!(
            "squadctl: warning: {}\n",
            crate::text::escape_lines(&message.to_string())
        ));
    }
}

/// The project root (as a file system path) and its effective policy, or the
/// exit code after saying what is wrong.
pub(crate) fn root_and_policy(
    root_arg: Option<&std::path::Path>,
) -> Result<(std::path::PathBuf, squad_policies::Policy), u8> {
    let root = crate::root::resolve(root_arg)
        .map(|r| crate::root::fs_path(&r).to_path_buf())
        .map_err(fail)?;
    let policy = crate::locks::load_policy(&root).map_err(fail)?;
    Ok((root, policy))
}

/// Prints an error in the common `squadctl: error: …` form and returns the
/// failure exit code.
pub(crate) fn fail(message: impl std::fmt::Display) -> u8 {
    // Errors quote paths and names: escaped like every human output.
    eprint_text(&format!(
        "squadctl: error: {}\n",
        crate::text::escape_lines(&message.to_string())
    ));
    crate::exit::FAILURE
}

/// Writes text to stderr, or to the captured stderr while a tool call of
/// `squadctl mcp` runs the command (stdout is the MCP transport there).
pub(crate) fn eprint_text(text: &str) {
    if !capture(|c| c.1.push_str(text)) {
        eprint!("{text}");
    }
}

std::thread_local! {
    /// Set while [`run_captured`] runs a command on this thread: (stdout, stderr).
    static CAPTURED: std::cell::RefCell<Option<(String, String)>> =
        const { std::cell::RefCell::new(None) };
}

/// Applies `f` to the capture buffers if a capture is active; whether it was.
fn capture(f: impl FnOnce(&mut (String, String))) -> bool {
    CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(buffers) => {
            f(buffers);
            true
        }
        None => false,
    })
}

/// What a command run by [`run_captured`] did: its exit code and what it
/// would have printed.
#[derive(Debug)]
pub struct Captured {
    /// The exit code (`crate::exit`).
    pub code: u8,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr (errors, refusals, warnings).
    pub stderr: String,
}

std::thread_local! {
    /// The agent a command run by [`run_captured`] acts for (the MCP
    /// server's), standing in for `SQUAD_AGENT` in who-may checks.
    static ACTING_AGENT: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };
}

/// The agent the running command acts for: the MCP server's agent while a
/// tool call runs it, else `SQUAD_AGENT` (None, or empty: a human).
pub(crate) fn acting_agent() -> Option<String> {
    ACTING_AGENT
        .with(|a| a.borrow().clone())
        .or_else(|| std::env::var("SQUAD_AGENT").ok())
        .filter(|a| !a.trim().is_empty())
}

/// Parses `argv` (without the program name) as a `squadctl` command line and
/// runs it on this thread with its output captured instead of printed, as
/// `agent` (for the lead's commands: see [`acting_agent`]). The MCP tools
/// call the commands through this, so a tool and its command share one code
/// path: the same rules, the same refusals, the same text.
pub fn run_captured(agent: &str, argv: &[String]) -> Captured {
    ACTING_AGENT.with(|a| *a.borrow_mut() = Some(agent.to_string()));
    let captured = run_captured_inner(argv);
    ACTING_AGENT.with(|a| *a.borrow_mut() = None);
    captured
}

fn run_captured_inner(argv: &[String]) -> Captured {
    let cli = match Cli::try_parse_from(
        std::iter::once("squadctl".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(cli) => cli,
        Err(e) => {
            return Captured {
                code: crate::exit::FAILURE,
                stdout: String::new(),
                stderr: e.render().to_string(),
            };
        }
    };
    CAPTURED.with(|c| *c.borrow_mut() = Some((String::new(), String::new())));
    let code = dispatch(cli);
    let (stdout, stderr) = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    Captured {
        code,
        stdout,
        stderr,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed test

    use super::*;

    #[test]
    fn paths_are_shown_relative_to_the_root_or_absolute() {
        let root = Path::new("/p/proj");
        let s = Path::new("/p/proj/.squad/sessions/s1");
        assert_eq!(
            super::shown_with(s, Some(root), false),
            ".squad/sessions/s1"
        );
        assert_eq!(super::shown_with(root, Some(root), false), ".");
        assert_eq!(
            super::shown_with(s, Some(root), true),
            "/p/proj/.squad/sessions/s1"
        );
        assert_eq!(
            super::shown_with(Path::new("/p/proj/./.squad/x"), Some(root), false),
            ".squad/x"
        );
        assert_eq!(
            super::shown_with(Path::new("/elsewhere/f"), Some(root), false),
            "/elsewhere/f"
        );
    }

    use proptest::prelude::*;
    use std::ffi::OsString;

    fn os(words: &[&str]) -> Vec<OsString> {
        std::iter::once("squadctl")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    /// What clap makes of the line (SQUAD_ROOT given as `--root`, which
    /// clap reads the same).
    fn by_clap(words: &[&str], root: Option<&str>) -> Option<String> {
        let mut line = os(words);
        if let Some(r) = root {
            line.extend(["--root".into(), r.into()]);
        }
        Cli::try_parse_from(line).ok().map(|c| format!("{c:?}"))
    }

    /// The hook lines `guard install` writes are read without clap, into
    /// exactly what clap reads.
    #[test]
    fn the_hook_lines_are_read_as_clap_reads_them() {
        for words in [
            &["guard"][..],
            &["guard", "--format", "claude"],
            &["guard", "--format", "codex"],
            &["guard", "--format=copilot"],
        ] {
            for root in [None, Some("/some/project")] {
                let fast =
                    guard_hook_line(&os(words), root.map(OsString::from)).map(|c| format!("{c:?}"));
                assert!(fast.is_some(), "{words:?} not read by the fast path");
                assert_eq!(fast, by_clap(words, root), "{words:?} {root:?}");
            }
        }
        // The lines `guard install` writes take the fast path.
        for format in [
            squad_protocol::hook::Format::Claude,
            squad_protocol::hook::Format::Codex,
            squad_protocol::hook::Format::Copilot,
            squad_protocol::hook::Format::Gemini,
        ] {
            let line = guard::command_line("squadctl", format);
            let words: Vec<&str> = line.split(' ').skip(1).collect();
            assert!(guard_hook_line(&os(&words), None).is_some(), "{line}");
        }
    }

    /// Anything else is left to clap: help, other options, subcommands,
    /// a bad or missing format, an empty SQUAD_ROOT.
    #[test]
    fn every_other_line_is_left_to_clap() {
        for words in [
            &["guard", "--help"][..],
            &["guard", "-q"],
            &["guard", "--format"],
            &["guard", "--format", "Claude"],
            &["guard", "--format", "bogus"],
            &["guard", "--format=claude", "extra"],
            &["guard", "install", "--claude"],
            &["--root", "/x", "guard"],
            &["-v", "guard"],
            &["lock", "list"],
            &[],
        ] {
            assert!(guard_hook_line(&os(words), None).is_none(), "{words:?}");
        }
        assert!(guard_hook_line(&os(&["guard"]), Some(OsString::new())).is_none());
    }

    proptest! {
        /// Any line of these words: the fast path declines it or reads it
        /// exactly as clap does.
        #[test]
        fn a_line_is_declined_or_read_as_clap_reads_it(
            words in proptest::collection::vec(
                prop::sample::select(vec![
                    "guard", "--format", "--format=claude", "claude", "codex", "copilot",
                    "bogus", "-q", "-v", "--root", "/r", "install", "--claude", "--", "",
                ]),
                0..5,
            ),
            root in proptest::option::of(prop::sample::select(vec!["/p", "rel", " "])),
        ) {
            if let Some(fast) = guard_hook_line(&os(&words), root.map(OsString::from)) {
                prop_assert_eq!(Some(format!("{fast:?}")), by_clap(&words, root));
            }
        }
    }
}
