//! `squadctl runs`, `run TASK`, `stop TASK`, `config show|validate|schema`
//! (docs/runners.md).

use crate::control::{Client, ClientError, Method};
use crate::exit;
use crate::runners::{self, RunRecord, RunState};
use chrono::Utc;
use serde_json::{Value, json};
use squad_protocol::config::{CONFIG_FILE, FIELDS};
use squad_protocol::report::Totals;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agent runs squadd supervises: task, agent, pid, uptime, CPU %, RSS,
/// last file written, log tail, and for a run in its own git worktree the
/// worktree, branch and merge state (docs/worktrees.md). Works with squadd
/// down (from run.json).
#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Every recorded run, ended ones too.
    #[arg(long)]
    pub all: bool,
    /// Lines of each run's log to show.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub tail: usize,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Start TASK's runner now, by hand (squadd must be running). The same checks
/// as dispatch (a runner for the agent, no run of the task or the agent in
/// progress, room in the pool, prerequisites completed), except that a task
/// held after a lost or stopped run, or out of retries, may start.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Task id.
    pub task: String,
    /// The session, when several plan the task.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// Stop TASK's run: SIGTERM to its process group, SIGKILL after
/// `runners.grace`. The task is then held: dispatch does not restart it.
#[derive(Debug, clap::Args)]
pub struct StopArgs {
    /// Task id.
    pub task: String,
    /// The session, when several run the task.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

/// The runtime configuration (`.squad/config.json`).
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Effective values and where each came from (default or a key of the file).
    Show {
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Check config.json: diagnostics with line:column and rule id.
    Validate {
        /// The file (default: the project's `.squad/config.json`).
        file: Option<PathBuf>,
        // No doc comment: clap would print it as help of a flattened group.
        #[allow(missing_docs)]
        #[command(flatten)]
        output: super::validate::OutputArgs,
    },
    /// Print config.json's JSON Schema (draft-07), for editors.
    Schema,
}

fn root(root_arg: Option<&Path>) -> Result<PathBuf, u8> {
    crate::root::resolve(root_arg)
        .map(|r| crate::root::fs_path(&r).to_path_buf())
        .map_err(super::fail)
}

fn call(root: &Path, method: Method) -> Result<Value, ClientError> {
    Client::connect(root, Duration::from_secs(10))?.call(method)
}

/// Live facts of a process: (cpu % averaged over its life, rss bytes).
pub(crate) fn usage(pid: u32) -> Option<(f64, u64)> {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing().with_cpu().with_memory(),
    );
    let p = system.process(pid)?;
    let run = p.run_time().max(1) as f64;
    let cpu = p.accumulated_cpu_time() as f64 / 1000.0 / run * 100.0;
    Some((cpu, p.memory()))
}

fn run_json(session_dir: &Path, r: &RunRecord, tail: usize) -> Value {
    let dir = runners::run_dir(session_dir, &r.task);
    let live = r.state == RunState::Running && runners::alive(r.pid, r.process_start);
    let (cpu, rss) = if live {
        usage(r.pid).map_or((None, None), |(c, m)| (Some(c), Some(m)))
    } else {
        (None, None)
    };
    let last = runners::last_write(session_dir, &r.agent);
    // A run in its own git worktree (docs/worktrees.md).
    let tree = crate::worktree::load(&dir);
    json!({
        "session": r.session,
        "task": r.task,
        "agent": r.agent,
        "attempt": r.attempt,
        "state": if r.state == RunState::Running && !live { "gone" } else { r.state.as_str() },
        "pid": r.pid,
        "started_at": r.started_at,
        "uptime_secs": live.then(|| (Utc::now() - r.started_at).num_seconds().max(0)),
        "deadline": r.deadline,
        "command": r.command,
        "cpu_percent": cpu.map(|c| (c * 10.0).round() / 10.0),
        "rss_bytes": rss,
        "last_write": last,
        "exit": r.exit,
        "completed": r.completed,
        "retry_at": r.retry_at,
        "held": r.held,
        "model": r.model,
        "usage": r.usage,
        "task_usage": r.earlier_usage.is_some().then(|| r.task_usage()).flatten(),
        "model_warning": r.model_warning,
        "over_budget": r.over_budget,
        "conversation": r.conversation,
        "overlaps": (!r.overlaps.is_empty()).then_some(&r.overlaps),
        "dir": dir.display().to_string(),
        "log_tail": runners::log_tail(&dir, tail),
        "worktree": tree.as_ref().map(|t| t.path.display().to_string()),
        "branch": tree.as_ref().map(|t| t.branch.clone()),
        "merge": tree.as_ref().map(|t| json!({
            "state": t.state,
            "into": t.target,
            "base": t.base,
            "reason": t.reason,
            "merged_as": t.merged_as,
        })),
    })
}

/// The runs of a project as JSON values (for `runs` and `status`).
pub(crate) fn runs_report(
    root: &Path,
    session: Option<&str>,
    all: bool,
    tail: usize,
) -> Vec<Value> {
    runners::all_records(root)
        .into_iter()
        .filter(|(_, r)| session.is_none_or(|s| s == r.session))
        .filter(|(_, r)| all || r.state == RunState::Running)
        .map(|(dir, r)| run_json(&dir, &r, tail))
        .collect()
}

pub(crate) fn secs(v: &Value) -> String {
    v.as_i64().map_or("-".into(), |s| {
        if s >= 3600 {
            format!("{}h{:02}m", s / 3600, s % 3600 / 60)
        } else if s >= 60 {
            format!("{}m{:02}s", s / 60, s % 60)
        } else {
            format!("{s}s")
        }
    })
}

/// Human lines of a runs report.
pub(crate) fn runs_human(runs: &[Value]) -> String {
    if runs.is_empty() {
        return "no agent runs\n".into();
    }
    let mut out = String::new();
    for r in runs {
        let rss = r["rss_bytes"]
            .as_u64()
            .map_or("-".into(), |b| format!("{} MiB", b / (1 << 20)));
        let cpu = r["cpu_percent"]
            .as_f64()
            .map_or("-".into(), |c| format!("{c}%"));
        // run.json sits in a session directory agents write to: escape.
        let text = |k: &str| crate::text::escape(r[k].as_str().unwrap_or("-")).into_owned();
        out.push_str(&format!(
            "{} {} ({}) {} run {} pid {} up {} cpu {cpu} rss {rss} last write {}\n",
            text("session"),
            text("task"),
            text("agent"),
            text("state"),
            r["attempt"],
            r["pid"],
            secs(&r["uptime_secs"]),
            text("last_write"),
        ));
        if let Ok(u) = serde_json::from_value::<squad_policies::usage::Usage>(r["usage"].clone()) {
            out.push_str(&format!(
                "    tokens {}{}\n",
                u.summary(),
                u.model
                    .as_deref()
                    .map_or_else(String::new, |m| format!(" ({})", crate::text::escape(m)))
            ));
        }
        for (k, what) in [
            ("over_budget", "over budget"),
            ("model_warning", "the CLI warns"),
        ] {
            if r[k].is_string() {
                out.push_str(&format!("    {what}: {}\n", text(k)));
            }
        }
        if r["worktree"].is_string() {
            out.push_str(&format!(
                "    worktree {} branch {} ({} into {})\n",
                text("worktree"),
                text("branch"),
                crate::text::escape(r["merge"]["state"].as_str().unwrap_or("-")),
                crate::text::escape(r["merge"]["into"].as_str().unwrap_or("-")),
            ));
        }
        for l in r["log_tail"].as_array().into_iter().flatten() {
            out.push_str(&format!("    | {}\n", l.as_str().unwrap_or("")));
        }
    }
    out
}

/// `squadctl runs`.
pub(crate) fn runs(root_arg: Option<&Path>, args: RunsArgs) -> u8 {
    let root = match root(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let report = runs_report(&root, args.session.as_deref(), args.all, args.tail);
    if args.json {
        super::print(&format!("{:#}\n", Value::Array(report)))
    } else {
        super::print(&runs_human(&report))
    }
}

/// `squadctl run TASK`.
pub(crate) fn run(root_arg: Option<&Path>, args: RunArgs) -> u8 {
    let root = match root(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    match start_run(&root, &args.task, args.session.as_deref()) {
        Ok(v) if args.json => super::print(&format!("{v:#}\n")),
        Ok(v) => super::print(&format!(
            "started {} in {} (pid {})\n",
            args.task,
            v["session"].as_str().unwrap_or(""),
            v["pid"]
        )),
        Err(e) => super::fail(e),
    }
}

/// Starts TASK's run through squadd (`squadctl run` and `top`'s `r` key);
/// `Err` says why not, and that squadd must run when it does not.
pub(crate) fn start_run(root: &Path, task: &str, session: Option<&str>) -> Result<Value, String> {
    let method = Method::Runs {
        action: "run".into(),
        session: session.map(str::to_string),
        task: Some(task.to_string()),
        text: None,
    };
    call(root, method).map_err(|e| match e {
        ClientError::NotRunning(_) => "squadd is not running for this project: runs are started and supervised by squadd (start it with `squadd --root …`)".to_string(),
        e => format!("cannot start {task}: {e}"),
    })
}

/// `squadctl stop TASK`; without squadd, signals the recorded process group.
pub(crate) fn stop(root_arg: Option<&Path>, args: StopArgs) -> u8 {
    let root = match root(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    match stop_run(&root, &args.task, args.session.as_deref()) {
        Ok(v) if args.json => super::print(&format!("{v:#}\n")),
        Ok(v) => super::print(&format!(
            "stopping {} in {} (pid {})\n",
            args.task,
            v["session"].as_str().unwrap_or(""),
            v["pid"]
        )),
        Err(e) => super::fail(format!("cannot stop {}: {e}", args.task)),
    }
}

/// Stops TASK's run through squadd, or by itself when squadd is down
/// (`squadctl stop` and `top`'s `s` key).
pub(crate) fn stop_run(root: &Path, task: &str, session: Option<&str>) -> Result<Value, String> {
    let method = Method::Runs {
        action: "stop".into(),
        session: session.map(str::to_string),
        task: Some(task.to_string()),
        text: None,
    };
    match call(root, method) {
        Err(ClientError::NotRunning(_)) => stop_without_daemon(
            root,
            &StopArgs {
                task: task.to_string(),
                session: session.map(str::to_string),
                json: false,
            },
        ),
        other => other.map_err(|e| e.to_string()),
    }
}

fn stop_without_daemon(root: &Path, args: &StopArgs) -> Result<Value, String> {
    let (dir, mut rec) = runners::all_records(root)
        .into_iter()
        .find(|(_, r)| {
            r.task == args.task
                && r.state == RunState::Running
                && args.session.as_deref().is_none_or(|s| s == r.session)
        })
        .ok_or_else(|| format!("`{}` has no run in progress", args.task))?;
    if !runners::is_run_process(&rec) {
        return Err(format!("the run's process (pid {}) is gone", rec.pid));
    }
    runners::signal_group(rec.pid, libc::SIGTERM).map_err(|e| e.to_string())?;
    rec.state = RunState::Stopped;
    rec.held = true;
    runners::write_record(&runners::run_dir(&dir, &rec.task), &rec).map_err(|e| e.to_string())?;
    Ok(json!({"session": rec.session, "pid": rec.pid}))
}

/// `squadctl config …`.
pub(crate) fn config(root_arg: Option<&Path>, cmd: ConfigCommand) -> u8 {
    if let ConfigCommand::Schema = cmd {
        return super::print(&format!("{:#}\n", squad_protocol::config::schema()));
    }
    let root = match root(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let default_path = squad_protocol::teamdir::locate(&root)
        .map(|t| t.path)
        .unwrap_or_else(|| root.join(squad_protocol::tree::SQUAD_DIR))
        .join(CONFIG_FILE);
    match cmd {
        ConfigCommand::Schema => exit::OK,
        ConfigCommand::Show { json } => {
            let (config, error) = crate::daemon::runs::load_config(&root);
            if let Some(e) = &error {
                super::warn(format!("{e} (showing the defaults for what is invalid)"));
            }
            if json {
                let mut v = config.to_json();
                v["provenance"] = json!(config.provenance);
                v["file"] = json!(default_path.display().to_string());
                return super::print(&format!("{v:#}\n"));
            }
            let values = config.to_json();
            let mut out = format!("{}\n", default_path.display());
            for f in FIELDS {
                let mut v = &values;
                for part in f.split('.') {
                    v = &v[part];
                }
                // An unset model is the agent CLI's own choice, not "null".
                let v = if v.is_null() {
                    "unset (the agent CLI's own default)".to_string()
                } else {
                    v.to_string()
                };
                out.push_str(&format!(
                    "{f} = {v}  ({})\n",
                    config.provenance.get(*f).map_or("default", String::as_str)
                ));
            }
            super::print(&out)
        }
        ConfigCommand::Validate { file, output } => {
            let path = file.unwrap_or(default_path);
            let text = match squad_protocol::fsx::read_regular_to_string(&path, 1 << 20) {
                Ok(t) => t,
                Err(e) => return super::fail(format!("{}: {e}", path.display())),
            };
            let (_, diags) = squad_protocol::config::parse(&path, &text);
            let text = squad_protocol::report::render(
                output.format(),
                &diags,
                Totals {
                    files: 1,
                    sessions: 0,
                },
                env!("CARGO_PKG_VERSION"),
                output.color(),
            );
            if super::print(&text) != exit::OK {
                return exit::FAILURE;
            }
            if diags.iter().any(|d| d.is_error()) {
                exit::PROBLEMS
            } else {
                exit::OK
            }
        }
    }
}
