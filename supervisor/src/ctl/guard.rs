// Over 800 lines: the guard's hot path (hook input to verdict) and its
// install/uninstall for four agent CLIs. The split waiting is install and
// uninstall into ctl/guard_install.rs (issue 42).
//! `squadctl guard`: the pre-tool-use hook of Claude Code, Codex, Copilot
//! CLI and Gemini CLI, and `squadctl guard install|uninstall` to register
//! it.
//!
//! The hot path reads stdin, and only when the call writes something: the
//! policy, the agent's task assignment (and progress updates when the task
//! must be inferred) and the lock records. No daemon round trip.

use super::canon;
use super::hook_file::{hook_file_path, is_ours};
use super::plan_cache::Verdict as PlanVerdict;
use crate::index::{Entry, load_file};
use crate::locks;
use crate::root;
use chrono::Utc;
use squad_policies::Policy;
use squad_policies::boundary::{Refusal, normalize};
use squad_policies::check::Task;
use squad_policies::guard::{Candidate, Facts, Place, Verdict, decide};
use squad_policies::locks::{LockRecord, Mode, entry_staleness};
use squad_protocol::FileKind;
use squad_protocol::fsx::{ReadError, read_regular_to_string};
use squad_protocol::hook::{self, Action, Format, ShellTarget};
use squad_protocol::model::TaskStatus;
use squad_protocol::teamdir;
use squad_protocol::tree::{SQUAD_DIR, session_dirs};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The largest hook input read (a Write call carries the whole file).
const MAX_INPUT: u64 = 16 * 1024 * 1024;

// The formats live with the presence hook, which guard install names
// (ctl/presence.rs never names this module: module_cycles.rs).
pub(crate) use super::presence::FormatArg;

/// Edit-time guard: answer an agent CLI's pre-tool-use hook with allow or deny.
///
/// Reads one hook event as JSON on stdin (Claude Code `PreToolUse`, Codex
/// `PreToolUse`, Copilot CLI `preToolUse`, Gemini CLI `BeforeTool`; the
/// format is detected unless `--format` is given) and refuses a write outside the task's boundaries,
/// into a forbidden glob, into a lock held by another agent, into a
/// supervisor-owned protocol file or outside the project. Reads are always
/// allowed; shell commands are analysed best effort (docs/guards.md).
///
/// The agent and task come from SQUAD_AGENT and SQUAD_TASK (SQUAD_SESSION
/// narrows the lookup), else from the agent's single in-progress task.
/// Without SQUAD_AGENT only project-wide rules and locks apply.
///
/// Allow: exit 0, no output. Deny: exit 0 with the tool's deny JSON on stdout
/// (when the format is unknown: exit 2 with the reason on stderr). Malformed
/// input or an unreadable policy or plan is a deny, never a silent allow.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    /// The hook contract (default: detected from the input).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,

    #[allow(missing_docs)]
    #[command(subcommand)]
    pub action: Option<GuardCommand>,
}

/// `guard install` / `guard uninstall`.
#[derive(Debug, clap::Subcommand)]
pub enum GuardCommand {
    /// Register the guard in an agent CLI's hook settings, keeping every
    /// other entry (.claude/settings.json, .codex/hooks.json,
    /// .github/hooks/squad.json or .gemini/settings.json).
    Install(InstallArgs),
    /// Remove the guard's own hook entry, and nothing else.
    Uninstall(InstallArgs),
    /// Check that each agent CLI's next run in this project calls the guard.
    Doctor(super::guard_doctor::DoctorArgs),
}

/// Arguments of `guard install|uninstall`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("tool").required(true).args(["claude", "codex", "copilot", "gemini"])))]
pub struct InstallArgs {
    /// Claude Code: `.claude/settings.json` (`~/.claude/settings.json` with --user).
    #[arg(long)]
    pub claude: bool,
    /// Codex CLI: `.codex/hooks.json` (`$CODEX_HOME/hooks.json`, default
    /// `~/.codex/hooks.json`, with --user).
    #[arg(long)]
    pub codex: bool,
    /// Copilot CLI: `.github/hooks/squad.json` (`$COPILOT_HOME/hooks/squad.json`,
    /// default `~/.copilot/hooks/squad.json`, with --user: loaded by
    /// `copilot -p` with no folder trust).
    #[arg(long)]
    pub copilot: bool,
    /// Gemini CLI: `.gemini/settings.json` (`~/.gemini/settings.json` with
    /// --user: loaded in every workspace, one trusted by `--skip-trust`
    /// too).
    #[arg(long)]
    pub gemini: bool,
    /// The user's settings instead of the project's.
    #[arg(long)]
    pub user: bool,
    /// Print the change as a diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The squadctl the hook runs. Default: this squadctl's absolute path,
    /// so the hook runs whatever PATH the CLI was started with (a desktop
    /// launcher, an IDE, cron); a bare name is looked up on that PATH.
    #[arg(long, value_name = "PATH")]
    pub program: Option<String>,
    /// Codex only: also trust the project (`[projects."<root>"]` in
    /// `$CODEX_HOME/config.toml`, which loads its whole `.codex/`) and record
    /// the guard's hook as reviewed, through `codex app-server` (the `codex`
    /// on PATH). Without it, the steps left are printed.
    #[arg(long, requires = "codex")]
    pub trust: bool,
}

/// Runs `squadctl guard …`.
pub(crate) fn run(root_arg: Option<&Path>, args: Args) -> u8 {
    match args.action {
        Some(GuardCommand::Install(a)) => install(root_arg, &a, true),
        Some(GuardCommand::Uninstall(a)) => install(root_arg, &a, false),
        Some(GuardCommand::Doctor(a)) => super::guard_doctor::run(root_arg, &a),
        None => guard(root_arg, args.format.map(FormatArg::format)),
    }
}

// ---------------------------------------------------------------------------
// The hook
// ---------------------------------------------------------------------------

/// Prints the answer in the tool's shape; returns the exit code.
fn answer(format: Option<Format>, verdict: &Verdict) -> u8 {
    let Verdict::Deny(reason) = verdict else {
        return crate::exit::OK;
    };
    let reason = refusal(reason);
    let json = match format {
        Some(Format::Claude | Format::Codex) => serde_json::json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }),
        Some(Format::Copilot) => serde_json::json!({
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }),
        // Gemini CLI sends `reason` to the model as the tool's error.
        Some(Format::Gemini) => serde_json::json!({
            "decision": "deny",
            "reason": reason,
        }),
        None => {
            // Exit 2 with the reason on stderr blocks in Claude Code and Codex.
            eprintln!("{reason}");
            return 2;
        }
    };
    println!("{json}");
    crate::exit::OK
}

/// The deny reason as the model reads it. CLIs wrap it in words of their
/// own (Claude Code 2.1.332: `PreToolUse:Write hook error: …`), which a
/// model may take for a broken hook to retry or work around: the text says
/// first that this is a refusal by the project's policy, then why, what is
/// allowed and what to do instead (the reason's own hint).
pub(crate) fn refusal(reason: &str) -> String {
    format!(
        "squad guard REFUSED this tool call. This is a deliberate decision of the project's squad policy, not a hook failure: the same call will be refused again. {reason}"
    )
}

fn guard(root_arg: Option<&Path>, forced: Option<Format>) -> u8 {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        // A person typing `squadctl guard`: the hook reads a pipe, not a tty.
        return super::fail(
            "squadctl guard reads one hook event as JSON on stdin; pipe it in, or install it with `squadctl guard install --claude|--codex|--copilot` (see --help)",
        );
    }
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut input)
    {
        return answer(
            forced,
            &Verdict::Deny(format!("cannot read the hook input: {e}")),
        );
    }
    if input.len() as u64 > MAX_INPUT {
        return answer(
            forced,
            &Verdict::Deny(format!("the hook input is larger than {MAX_INPUT} bytes")),
        );
    }
    let call = match hook::parse(&input, forced) {
        Ok(c) => c,
        Err(e) => {
            // The format may still be guessable for the answer's shape.
            let format = forced.or_else(|| {
                serde_json::from_slice::<serde_json::Value>(&input)
                    .ok()
                    .and_then(|v| v.as_object().and_then(hook::detect))
            });
            return answer(format, &Verdict::Deny(e.to_string()));
        }
    };
    let format = Some(call.format);
    let verdict = match decide_call(root_arg, &call) {
        Ok(v) => v,
        Err(reason) => Verdict::Deny(reason),
    };
    answer(format, &verdict)
}

/// A raw write target before resolution.
enum Raw {
    Path { path: String, recursive: bool },
    Tree(String),
    Unjudged { path: String, reason: String },
}

fn decide_call(root_arg: Option<&Path>, call: &hook::ToolCall) -> Result<Verdict, String> {
    let raw: Vec<Raw> = match &call.action {
        Action::Read | Action::Unknown => return Ok(Verdict::Allow),
        Action::Edit { paths } => paths
            .iter()
            .map(|p| Raw::Path {
                path: p.clone(),
                recursive: false,
            })
            .collect(),
        Action::Patch { patch } => hook::patch_targets(patch)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|path| Raw::Path {
                path,
                recursive: false,
            })
            .collect(),
        Action::Shell { command } => hook::shell_targets(command)
            .into_iter()
            .map(|t| match t {
                ShellTarget::Path { path, recursive } => Raw::Path { path, recursive },
                ShellTarget::WholeTree { command } => Raw::Tree(command),
                ShellTarget::Unjudged { path, reason } => Raw::Unjudged { path, reason },
            })
            .collect(),
    };
    if raw.is_empty() {
        return Ok(Verdict::Allow);
    }
    let cwd = match &call.cwd {
        Some(c) if Path::new(c).is_absolute() => PathBuf::from(c),
        _ => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let agent_env = env("SQUAD_AGENT");
    let task_env = env("SQUAD_TASK");
    // Two directories: the team root (policy, plans, locks) and the checkout
    // whose files the call writes. They differ in a linked git worktree,
    // whose paths are judged relative to its own tree (docs/worktrees.md).
    let (root, checkout) = match root_arg {
        // `--root` is relative to where squadctl runs, not to the agent's cwd.
        Some(r) => {
            let r = absolute(
                &std::env::current_dir()
                    .map_err(|e| format!("cannot read the current directory: {e}"))?,
                r,
            );
            let team = teamdir::worktree_of_team(&r).map_or(r, |f| f.root);
            let checkout = root::checkout_for(&team, &cwd);
            (team, checkout)
        }
        None => match teamdir::find_squad_root(&cwd)
            .map(|f| (f.root, f.checkout))
            .or_else(|| root_of_targets(&raw))
        {
            Some(found) => found,
            // An agent working for a task that left the project (`cd /`)
            // must not take its boundaries with it.
            None if agent_env.is_some() || task_env.is_some() => {
                return Ok(Verdict::Deny(format!(
                    "no squad project found at or above the working directory {} nor above any path this call writes, yet {} is set: an agent with a task writes only where its boundaries can be read. Set SQUAD_ROOT to the project's directory in the agent's environment (or work from inside the project).",
                    cwd.display(),
                    if agent_env.is_some() {
                        "SQUAD_AGENT"
                    } else {
                        "SQUAD_TASK"
                    }
                )));
            }
            // Not a squad project and nobody's task: nothing to enforce.
            None => return Ok(Verdict::Allow),
        },
    };
    let root_abs = absolute(&cwd, &root);
    let tree_abs = absolute(&cwd, &checkout);
    let tree_real = std::fs::canonicalize(&tree_abs).unwrap_or_else(|_| tree_abs.clone());
    let mut candidates: Vec<Candidate> = Vec::new();
    for r in raw {
        match r {
            Raw::Tree(command) => candidates.push(Candidate::WholeTree { command }),
            Raw::Unjudged { path, reason } => candidates.push(Candidate::Path {
                shown: path,
                place: Place::Unjudged(reason),
                recursive: false,
            }),
            Raw::Path { path, recursive } => {
                let (place, physical) = resolve(&cwd, &tree_abs, &tree_real, &path);
                // A file with other names (hard links) is written under
                // them all: each is judged too.
                candidates.extend(super::guard_links::other_names(
                    &tree_real,
                    &cwd.join(&path),
                    &path,
                ));
                // The physical place is judged as well: a link may lead
                // somewhere the spelling does not say.
                let physical = physical.map(|(canon, place)| Candidate::Path {
                    // Read as "`backend/fe/x` → `frontend/x` is …".
                    shown: format!("{path}` → `{canon}"),
                    place,
                    recursive,
                });
                candidates.push(Candidate::Path {
                    shown: path,
                    place,
                    recursive,
                });
                candidates.extend(physical);
            }
        }
    }

    let policy = read_policy(&root_abs)?;
    let leads = policy.leads();
    let task = match find_task(&root_abs, agent_env.as_deref(), task_env.as_deref()) {
        // The lead writes the plans; without a task of its own it is bound,
        // like a human, by the project-wide rules and the locks only.
        Err(_) if task_env.is_none() && agent_env.as_ref().is_some_and(|a| leads.contains(a)) => {
            None
        }
        other => other?,
    };
    // SQUAD_TASK alone: the agent is the one the task is assigned to.
    let agent = agent_env.or_else(|| task.as_ref().map(|t| t.agent.clone()));
    let now = Utc::now();
    let mut locks = live_locks(&root_abs, &policy, now)?;
    // Cluster call site (docs/cluster.md): other hosts' cluster locks,
    // through the local squadd; nothing without `cluster:`.
    locks.extend(crate::cluster::client::remote_locks(
        &root_abs, &policy, now,
    ));
    // The agent's own cluster locks that may have lapsed by this host's
    // clock (squadd stopped, dead or cut off): its writes there refused.
    if let Some(a) = agent.as_deref() {
        let own = crate::cluster::client::lapsed_own_locks(&root_abs, &policy, a, &locks);
        locks.extend(own);
    }
    let facts = Facts {
        agent: agent.as_deref(),
        task: task.as_ref(),
        leads: &leads,
        project_forbidden: &policy.forbidden,
        locks: &locks,
        now,
    };
    Ok(decide(&facts, &candidates))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `path` made absolute against `base`, with `.` and `..` resolved lexically.
fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Where a path named by a tool lies, read two ways: by its spelling
/// (`..` taken lexically) and, when that differs, physically (symlinks
/// followed; see [`canon::canonical`]) with the root-relative path it
/// names. Inside the project a place is root-relative; outside, or through
/// a link that leaves the project, it is refused.
fn resolve(
    cwd: &Path,
    root_abs: &Path,
    root_real: &Path,
    path: &str,
) -> (Place, Option<(String, Place)>) {
    if matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) {
        return (Place::Ignored, None);
    }
    if path.contains('\0') {
        return (Place::Refused(Refusal::Nul), None);
    }
    let joined = cwd.join(path);
    let abs = absolute(cwd, Path::new(path));
    let rel = abs
        .strip_prefix(root_abs)
        .or_else(|_| abs.strip_prefix(root_real));
    let Ok(rel) = rel else {
        return (
            Place::Outside {
                resolved: abs.display().to_string(),
            },
            None,
        );
    };
    let lexical = match inside(&rel.to_string_lossy()) {
        Ok(p) => p,
        Err(refusal) => return (Place::Refused(refusal), None),
    };
    let real = canon::canonical(&joined);
    let Ok(real_rel) = real.strip_prefix(root_real) else {
        return (
            Place::Refused(Refusal::SymlinkOutside {
                target: real.display().to_string(),
            }),
            None,
        );
    };
    match inside(&real_rel.to_string_lossy()) {
        Ok(Place::Inside(p)) if Place::Inside(p.clone()) == lexical => (lexical, None),
        Ok(place) => {
            let shown = match &place {
                Place::Inside(p) => p.clone(),
                _ => real.display().to_string(),
            };
            (lexical, Some((shown, place)))
        }
        Err(refusal) => (
            lexical,
            Some((real.display().to_string(), Place::Refused(refusal))),
        ),
    }
}

/// A root-relative path as a place: the root itself is everything in it.
fn inside(rel: &str) -> Result<Place, Refusal> {
    if rel.is_empty() {
        return Ok(Place::Inside("**".into()));
    }
    normalize(rel).map(Place::Inside)
}

/// The project root above an absolute path a call writes (its spelling,
/// then where it leads), for an agent whose working directory left it.
fn root_of_targets(raw: &[Raw]) -> Option<(PathBuf, PathBuf)> {
    raw.iter().find_map(|r| match r {
        Raw::Path { path, .. } if path.starts_with('/') => {
            let p = Path::new(path);
            teamdir::find_squad_root(&absolute(Path::new("/"), p))
                .or_else(|| teamdir::find_squad_root(&canon::canonical(p)))
                .map(|f| (f.root, f.checkout))
        }
        _ => None,
    })
}

fn read_policy(root: &Path) -> Result<Policy, String> {
    locks::load_policy(root).map_err(|e| {
        format!("cannot use the project policy ({e}); writes are refused until it is fixed (`squadctl validate`)")
    })
}

/// The task whose boundaries apply: SQUAD_TASK's assignment, else the
/// agent's single in-progress task; `None` without an agent or a task.
pub(crate) fn find_task(
    root: &Path,
    agent: Option<&str>,
    task_id: Option<&str>,
) -> Result<Option<Task>, String> {
    if agent.is_none() && task_id.is_none() {
        return Ok(None);
    }
    let mut dirs = session_dirs(root)
        .map_err(|e| format!("cannot list the sessions of {}: {e}", root.display()))?;
    // SQUAD_SESSION is looked at first.
    if let Some(session) = env("SQUAD_SESSION") {
        dirs.sort_by_key(|d| d.file_name().is_none_or(|n| n.to_string_lossy() != session));
    }
    let mut plans = Vec::new();
    // The name tests, built once (a project lists every session's files).
    let wanted = match (agent, task_id) {
        (_, Some(t)) => format!("-{t}"),
        (Some(a), None) => format!("{a}-task_"),
        (None, None) => String::new(),
    };
    for dir in &dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name();
            // Copied only when not UTF-8 (then read lossily, as always).
            let lossy;
            let name = match name.to_str() {
                Some(n) => n,
                None => {
                    lossy = name.to_string_lossy();
                    &lossy
                }
            };
            let Some(stem) = name
                .strip_prefix("role-plan-")
                .and_then(|n| n.strip_suffix(".md"))
            else {
                continue;
            };
            let matches = match (agent, task_id) {
                (_, Some(_)) => stem.ends_with(&wanted),
                (Some(_), None) => stem.starts_with(&wanted),
                (None, None) => false,
            };
            if matches {
                plans.push((dir.clone(), e.path()));
            }
        }
        if task_id.is_some() && !plans.is_empty() {
            break;
        }
    }
    let mut tasks = Vec::new();
    // When inferring, a broken assignment only matters if no usable task is
    // in progress (it may be the one): then it is the reason to refuse.
    let mut unusable: Option<String> = None;
    for (dir, path) in plans {
        // The verdict of full validation, from the cache when the plan's
        // bytes are the ones last validated (issue 23 item 3).
        let verdict = super::plan_cache::verdict(root, &path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let Some(verdict) = verdict else { continue };
        let (task_id, plan_agent, allowed, forbidden) = match verdict {
            PlanVerdict::Usable {
                task_id,
                agent,
                allowed,
                forbidden,
            } => (task_id, agent, allowed, forbidden),
            PlanVerdict::Unusable(why) => {
                let reason = format!(
                    "the task assignment {} cannot be used ({why}); writes are refused until it validates",
                    path.display()
                );
                if task_id.is_some() {
                    return Err(reason);
                }
                unusable.get_or_insert(reason);
                continue;
            }
        };
        let session = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        tasks.push((
            dir,
            Task {
                task_id,
                agent: plan_agent,
                session,
                allowed,
                forbidden,
            },
        ));
    }
    if let Some(t) = task_id {
        let Some((_, task)) = tasks.into_iter().find(|(_, task)| task.task_id == t) else {
            return Err(format!(
                "SQUAD_TASK={t} names no task assignment under {}/{SQUAD_DIR}/sessions; writes are refused until the task's role-plan exists (or fix SQUAD_TASK)",
                root.display()
            ));
        };
        if let Some(a) = agent
            && task.agent != a
        {
            return Err(format!(
                "SQUAD_TASK={t} is assigned to {}, not to SQUAD_AGENT={a}; fix the environment the agent runs in",
                task.agent
            ));
        }
        return Ok(Some(task));
    }
    let agent = agent.unwrap_or_default();
    let mut in_progress = Vec::new();
    for (dir, task) in tasks {
        let progress = dir.join(format!("role-comm-{agent}-{}.md", task.task_id));
        if let Ok(Some(file)) = load_file(&progress, FileKind::ProgressUpdate)
            && let Entry::Progress(p) = file.entry
            && p.status == TaskStatus::InProgress
        {
            in_progress.push(task);
        }
    }
    match in_progress.len() {
        1 => Ok(in_progress.pop()),
        0 if unusable.is_some() => Err(unusable.unwrap_or_default()),
        0 => Err(format!(
            "SQUAD_AGENT={agent} has no task in progress, so its boundaries are unknown; report progress with status in_progress, or set SQUAD_TASK"
        )),
        _ => Err(format!(
            "SQUAD_AGENT={agent} has {} tasks in progress ({}); set SQUAD_TASK to the one this session works on",
            in_progress.len(),
            in_progress
                .iter()
                .map(|t| t.task_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Lock records that still hold at `now`, judged as `squadctl lock`
/// judges them (expiry, a gone or reused pid, a restart); an unreadable
/// record counts as held on everything until its time to live passes.
fn live_locks(
    root: &Path,
    policy: &Policy,
    now: chrono::DateTime<Utc>,
) -> Result<Vec<LockRecord>, String> {
    let entries = locks::load(root, policy.lock_default_ttl).map_err(|e| {
        format!("cannot read the lock records: {e}; writes are refused until they are readable")
    })?;
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let host = locks::host_name();
    let facts = locks::table_facts(now, &host, &entries);
    Ok(entries
        .iter()
        .filter(|e| entry_staleness(&locks::table_entry(e, &host), &facts).is_none())
        .map(|e| match e {
            locks::Entry::Held { record, .. } => record.clone(),
            locks::Entry::Corrupt {
                path,
                session,
                written_at,
                held_until,
                ..
            } => LockRecord {
                targets: vec!["**".into()],
                mode: Mode::Exclusive,
                agent: format!("an unreadable lock record ({})", path.display()),
                task_id: "unknown task".into(),
                session: session.clone(),
                pid: None,
                pid_started_at: None,
                host: String::new(),
                acquired_at: *written_at,
                expires_at: *held_until,
            },
        })
        .collect())
}

// ---------------------------------------------------------------------------
// install / uninstall
// ---------------------------------------------------------------------------

pub(crate) fn quoted(program: &str) -> String {
    let plain = program
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:".contains(c));
    if plain {
        program.to_string()
    } else {
        format!("'{}'", program.replace('\'', r"'\''"))
    }
}

/// Where the settings live and what our entry is.
struct Target {
    path: PathBuf,
    format: Format,
}

fn target(root_arg: Option<&Path>, args: &InstallArgs) -> Result<Target, String> {
    let project = root::resolve(root_arg)
        .map(|r| root::fs_path(&r).to_path_buf())
        .unwrap_or_else(|_| root::fs_path(&root::here(root_arg)).to_path_buf());
    let format = if args.claude {
        Format::Claude
    } else if args.codex {
        Format::Codex
    } else if args.gemini {
        Format::Gemini
    } else {
        Format::Copilot
    };
    Ok(Target {
        path: hook_file_path(&project, format, args.user, &env)?,
        format,
    })
}

/// The hook's command line for `format` (read by `ctl::guard_hook_line`
/// without clap).
pub(crate) fn command_line(program: &str, format: Format) -> String {
    format!("{} guard --format {format}", quoted(program))
}

/// The settings with our entry added (or refreshed) or removed. `Ok(None)`
/// when nothing changes.
pub(crate) fn merge(
    existing: Option<&str>,
    format: Format,
    program: &str,
    add: bool,
) -> Result<Option<serde_json::Value>, String> {
    use serde_json::{Value, json};
    let mut doc: Value = match existing {
        Some(text) if !text.trim().is_empty() => serde_json::from_str(text).map_err(|e| {
            format!(
                "{}:{}: not valid JSON: {e}; fix it first (nothing was changed)",
                e.line(),
                e.column()
            )
        })?,
        _ => json!({}),
    };
    let before = doc.clone();
    let Value::Object(top) = &mut doc else {
        return Err(
            "the settings file is not a JSON object; fix it first (nothing was changed)".into(),
        );
    };
    let command = command_line(program, format);
    let (event, ours) = match format {
        Format::Claude => (
            "PreToolUse",
            json!({"matcher": "Write|Edit|MultiEdit|NotebookEdit|Bash", "hooks": [{"type": "command", "command": command, "timeout": 10}]}),
        ),
        Format::Codex => (
            "PreToolUse",
            json!({"matcher": "Bash|apply_patch", "hooks": [{"type": "command", "command": command, "timeout": 10}]}),
        ),
        Format::Copilot => (
            "preToolUse",
            json!({"type": "command", "bash": command, "timeoutSec": 10}),
        ),
        // Gemini CLI's timeout is in milliseconds.
        Format::Gemini => (
            "BeforeTool",
            json!({"matcher": "write_file|replace|run_shell_command", "hooks": [{"type": "command", "command": command, "timeout": 10000}]}),
        ),
    };
    if format == Format::Copilot && add {
        top.entry("version").or_insert(json!(1));
    }
    let hooks = top.entry("hooks").or_insert_with(|| json!({}));
    let Value::Object(hooks) = hooks else {
        return Err("`hooks` is not a JSON object; fix it first (nothing was changed)".into());
    };
    let list = hooks.entry(event).or_insert_with(|| json!([]));
    let Value::Array(list) = list else {
        return Err(format!(
            "`hooks.{event}` is not a JSON array; fix it first (nothing was changed)"
        ));
    };
    // Remove our handlers wherever they are (an add then puts one back).
    if format == Format::Copilot {
        list.retain(|h| !is_ours(h, format));
    } else {
        for group in list.iter_mut() {
            if let Some(Value::Array(handlers)) = group.get_mut("hooks") {
                let had = handlers.len();
                handlers.retain(|h| !is_ours(h, format));
                if had > 0 && handlers.is_empty() {
                    *group = Value::Null;
                }
            }
        }
        list.retain(|g| !g.is_null());
    }
    if add {
        list.push(ours);
    } else if list.is_empty() {
        hooks.remove(event);
    }
    super::presence::merge_hooks(hooks, format, &quoted(program), add)?;
    if !add {
        if hooks.is_empty() {
            top.remove("hooks");
        }
        if format == Format::Copilot && top.len() == 1 && top.contains_key("version") {
            top.remove("version");
        }
    }
    Ok((doc != before).then_some(doc))
}

/// A line diff (longest common subsequence), `-`/`+`/` ` prefixed.
pub(crate) fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        }
    }
    out
}

/// `text` as one word of a POSIX shell command (the CLIs run hooks with
/// `sh -c`): as is when it holds nothing the shell reads, else in single
/// quotes.
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,".contains(c))
    {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn install(root_arg: Option<&Path>, args: &InstallArgs, add: bool) -> u8 {
    let t = match target(root_arg, args) {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    let existing = match read_regular_to_string(&t.path, 4 * 1024 * 1024) {
        Ok(text) => Some(text),
        Err(ReadError::NotFound) => None,
        Err(e) => return super::fail(format!("{}: {e}", t.path.display())),
    };
    let program = match &args.program {
        Some(p) => p.clone(),
        None => match std::env::current_exe() {
            Ok(p) => shell_word(&p.display().to_string()),
            Err(e) => {
                return super::fail(format!(
                    "cannot tell where squadctl is: {e}; pass --program PATH"
                ));
            }
        },
    };
    let merged = match merge(existing.as_deref(), t.format, &program, add) {
        Ok(m) => m,
        Err(e) => return super::fail(format!("{}: {e}", t.path.display())),
    };
    let verb = if add { "installed in" } else { "removed from" };
    let Some(doc) = merged else {
        let state = if add {
            "already installed in"
        } else {
            "not installed in"
        };
        println!("squad guard ({}) {state} {}", t.format, t.path.display());
        return after_install(root_arg, args, &t, add);
    };
    let empty = doc.as_object().is_some_and(|o| o.is_empty());
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    // Our own file with nothing left in it goes away entirely.
    let remove_file = !add && empty && t.format == Format::Copilot;
    if args.dry_run {
        // Compared in the canonical formatting the file is written in, so
        // the diff shows the entries that change, not the whitespace.
        let old = existing
            .as_deref()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .map(|t| t + "\n")
            .unwrap_or_default();
        if existing.as_deref().is_some_and(|e| e != old) {
            println!("# the file is rewritten in canonical JSON formatting (2-space indent)");
        }
        let new = if remove_file { "" } else { text.as_str() };
        let shown = t.path.display();
        print!("--- {shown}\n+++ {shown}\n{}", diff(&old, new));
        return crate::exit::OK;
    }
    // Never through a link planted below the project (or home) directory.
    let result = if remove_file {
        crate::safefs::remove_project_file(&t.path)
    } else {
        crate::safefs::write_project_file(&t.path, text.as_bytes(), Some(0o777))
    };
    if let Err(e) = result {
        return super::fail(format!("{}: {e}", t.path.display()));
    }
    println!("squad guard ({}) {verb} {}", t.format, t.path.display());
    if add
        && let Some(program) = &args.program
        && let Some(w) = super::program::unreachable_warning(program, "the hooks")
    {
        super::warn(w);
    }
    after_install(root_arg, args, &t, add)
}

/// What a CLI needs beyond the hook file before its next run calls the
/// guard (Codex: project trust and hook review; Copilot: folder trust for
/// repository hooks), done with `--trust` or said.
fn after_install(root_arg: Option<&Path>, args: &InstallArgs, t: &Target, add: bool) -> u8 {
    use super::codex_trust;
    if !add || args.dry_run {
        return crate::exit::OK;
    }
    let project = root::resolve(root_arg)
        .map(|r| root::fs_path(&r).to_path_buf())
        .unwrap_or_else(|_| root::fs_path(&root::here(root_arg)).to_path_buf());
    let project = std::fs::canonicalize(&project).unwrap_or(project);
    let hooks_file = std::fs::canonicalize(&t.path).unwrap_or_else(|_| t.path.clone());
    match t.format {
        Format::Codex if args.trust => {
            let Some(codex) = codex_trust::on_path("codex") else {
                return super::fail(
                    "--trust asks Codex itself (`codex app-server`), but no `codex` is on PATH; the hook file is installed, trust is not",
                );
            };
            match codex_trust::trust(&codex, &project, &hooks_file, args.user) {
                Ok(done) => {
                    print!("{done}");
                    println!("codex: the guard is trusted and will run");
                    println!(
                        "codex: the presence hooks are trusted and will run (`status` and `top` show when the agent waits for you)"
                    );
                    crate::exit::OK
                }
                Err(e) => super::fail(format!("{e}; the hook file is installed, trust is not")),
            }
        }
        Format::Codex => {
            // Already reviewed (a re-install that changed nothing keeps the
            // hash): say so rather than list steps that are done.
            if codex_trust::on_path("codex").is_some_and(|c| {
                codex_trust::is_trusted(&c, &project, &hooks_file).unwrap_or(false)
            }) {
                println!("codex: the guard and the presence hooks are trusted and will run");
            } else {
                print!(
                    "{}",
                    codex_trust::steps_left(&project, &hooks_file, args.user)
                );
            }
            crate::exit::OK
        }
        Format::Gemini if !args.user => {
            println!(
                "Gemini CLI loads .gemini/settings.json only in a trusted workspace: `gemini -p` needs GEMINI_CLI_TRUST_WORKSPACE=true in its environment (`--skip-trust` runs without the project's hooks); `squadctl guard install --gemini --user` installs a hook every run loads"
            );
            crate::exit::OK
        }
        Format::Copilot if !args.user => {
            println!(
                "Copilot CLI loads .github/hooks/ only in a trusted folder: `copilot -p` needs `--trust-folder {}` (or GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true); `squadctl guard install --copilot --user` installs a hook every run loads",
                project.display()
            );
            crate::exit::OK
        }
        _ => crate::exit::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_other_entries_and_uninstall_removes_only_ours() {
        let existing = r#"{"model":"x","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"audit.sh"}]}],"Stop":[{"hooks":[{"type":"command","command":"stop.sh"}]}]}}"#;
        let added = merge(Some(existing), Format::Claude, "squadctl", true)
            .unwrap()
            .unwrap();
        let text = added.to_string();
        assert!(
            text.contains("audit.sh")
                && text.contains("stop.sh")
                && text.contains("\"model\":\"x\"")
        );
        assert!(text.contains("squadctl guard --format claude"));
        // Idempotent.
        assert!(
            merge(Some(&text), Format::Claude, "squadctl", true)
                .unwrap()
                .is_none()
        );
        let removed = merge(Some(&text), Format::Claude, "squadctl", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            removed,
            serde_json::from_str::<serde_json::Value>(existing).unwrap()
        );
        assert!(merge(Some("[1]"), Format::Claude, "squadctl", true).is_err());
        assert!(
            merge(Some("{nope"), Format::Claude, "squadctl", true)
                .unwrap_err()
                .starts_with("1:2")
        );
    }

    #[test]
    fn copilot_file_is_ours_alone() {
        let added = merge(None, Format::Copilot, "/opt/my tools/squadctl", true)
            .unwrap()
            .unwrap();
        assert_eq!(added["version"], 1);
        assert_eq!(
            added["hooks"]["preToolUse"][0]["bash"],
            "'/opt/my tools/squadctl' guard --format copilot"
        );
        let removed = merge(Some(&added.to_string()), Format::Copilot, "x", false)
            .unwrap()
            .unwrap();
        assert_eq!(removed, serde_json::json!({}));
    }

    #[test]
    fn diffs() {
        assert_eq!(diff("a\nb\nc\n", "a\nx\nc\n"), " a\n-b\n+x\n c\n");
    }
}
