//! `squadd`: the squad supervisor daemon. See `squadd --help`.

use clap::{Parser, ValueEnum};
use squad_supervisor::daemon::{self, Options};
use std::path::PathBuf;
use std::process::ExitCode;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One human-readable line per record.
    Text,
    /// One JSON object per record (for journald/log shippers).
    Json,
}

/// squadd: the squad supervisor daemon.
///
/// Watches each root's `.squad/sessions/`, validates every protocol file,
/// keeps session-status.md and `.claude/context/shared-context.json` in step,
/// records every action in `.squad/audit.jsonl`, and answers `squadctl` on
/// `.squad/run/squadd.sock`. Runs in the foreground and logs to stderr; under
/// systemd (Type=notify) it reports readiness after the start-up scan.
/// Started in the background of a terminal (`squadd --root . &`), it logs
/// to `.squad/run/squadd.log` instead, so that its lines never land on the
/// screen of `squadctl top` (which shows its last warnings).
///
/// One daemon per root: a second one on the same root exits with status 1,
/// naming the pid that holds it. SIGTERM or SIGINT stop it cleanly.
#[derive(Debug, Parser)]
#[command(name = "squadd", version)]
struct Args {
    /// A project root (the directory holding, or to hold, `.squad/`). Repeat
    /// for several roots. Default: the nearest directory at or above the
    /// current one holding `.squad/`. A linked git worktree (given, or
    /// holding the current directory) whose main checkout holds `.squad/`
    /// stands for the main checkout: one squadd per team (docs/worktrees.md).
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<PathBuf>,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    /// Log filter (tracing env-filter syntax, e.g. `info` or
    /// `squad_supervisor=debug`). Default: `$RUST_LOG`, else `info`.
    #[arg(long, value_name = "FILTER")]
    log: Option<String>,

    /// Append the log to FILE (`-`: stderr). Default: stderr, or
    /// `.squad/run/squadd.log` of the first root when started in the
    /// background of a terminal.
    #[arg(long, value_name = "FILE")]
    log_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = args
        .log
        .clone()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info".into());
    let filter = match tracing_subscriber::EnvFilter::try_new(&filter) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("squadd: error: invalid --log filter `{filter}`: {e}");
            return ExitCode::from(2);
        }
    };
    let roots = if args.roots.is_empty() {
        match squad_supervisor::root::resolve(None) {
            Ok(r) if r.as_os_str().is_empty() => vec![PathBuf::from(".")],
            Ok(r) => vec![r],
            Err(e) => {
                eprintln!("squadd: error: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        // A worktree's root is its main checkout's, as for squadctl.
        args.roots
            .iter()
            .map(|r| match squad_supervisor::root::resolve(Some(r)) {
                Ok(resolved) => resolved,
                Err(_) => r.clone(),
            })
            .collect()
    };

    // The log goes where it cannot write over a terminal UI (docs/daemon.md,
    // "Running it").
    let first = roots.first().cloned().unwrap_or_else(|| PathBuf::from("."));
    let target = daemon::logging::choose(args.log_file.as_deref(), &first);
    let json = args.log_format == LogFormat::Json;
    if let Err(e) = daemon::logging::install(filter.clone(), json, &target, &first) {
        if args.log_file.is_some() {
            eprintln!("squadd: error: cannot open the log: {e}");
            return ExitCode::from(2);
        }
        // The background log's root cannot hold it (it is missing, say):
        // stderr, and the start-up says what is wrong with the root.
        let _ = daemon::logging::install(filter, json, &daemon::logging::LogTarget::Stderr, &first);
    }
    // Nothing is printed about it: a line now could land on the screen of
    // the command typed next (`squadctl top`). Fatal errors still reach
    // stderr (below).

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("squadd: error: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(daemon::run(Options { roots })) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "cannot start");
            eprintln!("squadd: error: {e}");
            ExitCode::from(1)
        }
    }
}
