//! `squadctl status`, `events` and `health`: ask the daemon, or read the files
//! when it is down.

use super::print;
use crate::control::{Client, ClientError, Method};
use crate::daemon::health::{Health, Verdict};
use crate::events::Event;
use crate::exit;
use crate::root;
use crate::status::{DaemonReport, StatusReport, render_human, report_from_files};
use squad_protocol::tree::default_threads;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long to wait for the daemon before reading the files instead.
const DAEMON_TIMEOUT: Duration = Duration::from_secs(2);

/// Show the daemon and every session: status, phase, tasks done/total, active
/// agents, ready and overdue tasks, dependency violations and validation
/// problems.
///
/// Asks squadd when it runs; otherwise reads the files directly (same
/// derivation) and says the daemon is down.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Only this session (directory name).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,

    /// For scripts: exit 1 when anything needs attention (the section
    /// printed first: blocked tasks, error reports, held or failed runs,
    /// overdue tasks and replies, invalid files, an invalid or refused
    /// policy, an invalid config.json), a session has dependency
    /// violations, a skill is skipped (see docs/skills.md), or the root is
    /// missing (warnings do not count); 0 otherwise.
    #[arg(long)]
    pub check: bool,

    /// With --check: do not fail on this kind of attention item (repeat for
    /// several). Kinds: policy-refused, policy-invalid, config-invalid,
    /// error-report, blocked-task, run-held, run-failed, overdue-reply,
    /// overdue-task, invalid-file, model-warning, session-budget,
    /// root-missing, agent-waiting.
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    pub allow: Vec<crate::attention::Kind>,

    /// Acknowledge the attention item ID (its `id` in `--json`): a blocked
    /// or overdue task, or an error report, that you have looked at. It
    /// leaves the list (and `--check`) until its fact changes: another
    /// blocker, a new report. Other kinds go when their cause does: run
    /// their command.
    #[arg(long, value_name = "ID", conflicts_with_all = ["check", "allow"])]
    pub ack: Option<String>,
}

/// Where acknowledged items are kept: one empty file per item id (no
/// read-modify-write, so two acknowledgements never lose one).
const ACKNOWLEDGED: &str = "run/acknowledged";

fn acknowledged_dir(root: &Path) -> PathBuf {
    root.join(squad_protocol::tree::SQUAD_DIR)
        .join(ACKNOWLEDGED)
}

/// The item ids acknowledged in the root.
fn read_acknowledged(root: &Path) -> std::collections::BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(acknowledged_dir(root)) else {
        return Default::default();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| crate::attention::is_item_id(n))
        .collect()
}

/// `status --ack ID`: records the acknowledgement of an item the lead
/// settles that way, and forgets those whose fact is gone.
fn acknowledge(root: &Path, id: &str, g: &Gathered, whole_root: bool, json: bool) -> u8 {
    // The item acknowledged, and whether this call recorded it.
    let said = |item: &crate::attention::Item, now: bool| {
        if json {
            let mut v = serde_json::to_value(item).unwrap_or_default();
            v["acknowledged_now"] = serde_json::Value::Bool(now);
            print(&format!("{v:#}\n"))
        } else if now {
            print(&format!("acknowledged {id}: {}\n", item.summary))
        } else {
            print(&format!("{id} was acknowledged: {}\n", item.summary))
        }
    };
    if !crate::attention::is_item_id(id) {
        return super::fail(format!(
            "`{id}` is not an item id (16 hex digits: `squadctl status --json` gives each item's `id`)"
        ));
    }
    if let Some(i) = g.acknowledged.iter().find(|i| i.id == id) {
        return said(i, false);
    }
    let Some(item) = g.attention.iter().find(|i| i.id == id) else {
        return super::fail(format!(
            "no item `{id}` needs attention: its fact changed or is gone (see `squadctl status`)"
        ));
    };
    if !item.kind.acknowledged_by_lead() {
        return super::fail(format!(
            "{id} ({}) goes when its cause does, not by acknowledging it: {}",
            item.kind, item.command
        ));
    }
    if whole_root {
        // Forget only ids that name no item at all: an id among the items
        // still needing attention may be another `--ack` written since
        // this one gathered.
        let standing: std::collections::BTreeSet<&str> = g
            .acknowledged
            .iter()
            .chain(&g.attention)
            .map(|i| i.id.as_str())
            .collect();
        for gone in read_acknowledged(root)
            .iter()
            .filter(|a| !standing.contains(a.as_str()))
        {
            let _ = crate::safefs::remove_project_file(&acknowledged_dir(root).join(gone));
        }
    }
    if let Err(e) = crate::safefs::write_atomic_under(
        root,
        &acknowledged_dir(root).join(id),
        b"",
        0o600,
        Some(0o700),
    ) {
        return super::fail(format!("{}: {e}", acknowledged_dir(root).display()));
    }
    said(item, true)
}

fn parse_kind(word: &str) -> Result<crate::attention::Kind, String> {
    crate::attention::Kind::parse(word).ok_or_else(|| {
        let all: Vec<&str> = crate::attention::Kind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        format!("unknown kind `{word}`; one of: {}", all.join(", "))
    })
}

/// The facts of the needs-attention model that come from files beside the
/// status report: run records, the policy and config.json.
pub(crate) fn attention_facts(
    root: &Path,
    session: Option<&str>,
) -> (Vec<crate::runners::RunRecord>, Vec<String>, Vec<String>) {
    let runs: Vec<crate::runners::RunRecord> = crate::runners::all_records(root)
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| session.is_none_or(|s| s == r.session))
        .collect();
    let line = |d: &squad_protocol::Diagnostic| {
        let at = d
            .location
            .map_or_else(String::new, |l| format!(":{}:{}", l.line, l.column));
        format!("{}{at}: {}: {}", d.path.display(), d.rule.id(), d.message)
    };
    let errors = |(found, _): (Vec<squad_protocol::Diagnostic>, usize)| -> Vec<String> {
        found.iter().filter(|d| d.is_error()).map(line).collect()
    };
    let policy = errors(crate::locks::policy_diagnostics(root));
    let config = errors(crate::runners::config_diagnostics(root));
    (runs, policy, config)
}

/// Show the daemon's recent events, or follow them as they happen.
///
/// With the daemon down, prints the audit log. The event kinds are listed
/// below.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// Keep streaming new events until interrupted; exits 2 with a message
    /// when squadd stops.
    #[arg(long, short)]
    pub follow: bool,

    /// Print one JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// Show the daemon's health: memory, CPU, watches, queue depth, notify
/// hooks (queued, running, failed) and free disk on each root's volume, each
/// with a verdict (ok, warn, critical).
///
/// Hooks warn when the oldest queued one has waited 5 minutes (critical at
/// 30) or one failed in the last hour (critical at 5 failures in a row).
///
/// Exit status: 0 when every verdict is ok, 1 when any is warn or critical,
/// 2 when the daemon is not running.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn resolve_root(root_arg: Option<&Path>) -> Result<PathBuf, u8> {
    root::resolve(root_arg)
        .map(|r| root::fs_path(&r).to_path_buf())
        .map_err(super::fail)
}

/// What `status` and `top` show: the report (from squadd, or the files when
/// it is down), the needs-attention items, and the run records.
pub(crate) struct Gathered {
    /// The status report, held runs' agents no longer active.
    pub report: StatusReport,
    /// What needs a human, most severe first.
    pub attention: Vec<crate::attention::Item>,
    /// Items the lead acknowledged (`status --ack`) whose fact stands.
    pub acknowledged: Vec<crate::attention::Item>,
    /// Every run record of the root (or the session).
    pub runs: Vec<crate::runners::RunRecord>,
    /// The agents' presence records (working, waiting for you, idle).
    pub presence: Vec<crate::agent_presence::Record>,
}

/// Gathers what `status` and `top` show.
pub(crate) fn gather(
    root: &Path,
    session: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Gathered, String> {
    let asked = Client::connect(root, DAEMON_TIMEOUT).and_then(|mut c| {
        c.call(Method::Status {
            session: session.map(str::to_string),
        })
    });
    let mut report = match asked {
        Ok(v) => serde_json::from_value::<StatusReport>(v)
            .map_err(|e| format!("unexpected status from squadd: {e}"))?,
        Err(e) => {
            let reason = match e {
                ClientError::NotRunning(_) => "not running".to_string(),
                other => other.to_string(),
            };
            let r = report_from_files(root, session, default_threads(), now)
                .map_err(|e| format!("{}: {e}", root.display()))?;
            StatusReport {
                daemon: DaemonReport::Down { reason },
                roots: vec![r],
            }
        }
    };
    if let Some(s) = session
        && report.roots.iter().all(|r| r.sessions.is_empty())
    {
        return Err(format!("no session named `{s}`"));
    }
    // One path style, whoever read the files (squadd's absolute roots, the
    // files' `.`): relative to the project root, or absolute (--absolute).
    // The root itself is named in full (in a worktree it is the main
    // checkout: docs/worktrees.md).
    for r in &mut report.roots {
        r.root = super::absolute(Path::new(&r.root));
        for s in &mut r.sessions {
            for p in &mut s.problems {
                p.path = super::shown(Path::new(&p.path));
            }
        }
    }
    // What needs a human (docs/daemon.md, "Needs attention").
    let (runs, policy_errors, config_errors) = attention_facts(root, session);
    crate::attention::drop_held_agents(&mut report, &runs);
    // Worktree branches held at merge (docs/worktrees.md, "Hand-over").
    let records: Vec<_> = crate::runners::all_records(root)
        .into_iter()
        .filter(|(_, r)| session.is_none_or(|s| s == r.session))
        .collect();
    let branches = crate::attention::held_branches(root, &records);
    super::handover::hold_back_ready(root, &mut report, &records, now);
    let presence: Vec<crate::agent_presence::Record> = crate::agent_presence::read_all(root)
        .into_iter()
        .filter(|p| session.is_none_or(|s| p.session.as_deref().is_none_or(|ps| ps == s)))
        .collect();
    let attention = crate::attention::needs_attention(&crate::attention::Facts {
        report: Some(&report),
        runs: &runs,
        policy_errors: &policy_errors,
        config_errors: &config_errors,
        session_budget: crate::locks::load_policy(root)
            .map(|p| p.runners.budget.session)
            .unwrap_or_default(),
        presence: &presence,
        config: Some(&crate::daemon::runs::load_config(root).0),
        branches: &branches,
    });
    let (attention, acknowledged) =
        crate::attention::split_acknowledged(attention, &read_acknowledged(root));
    Ok(Gathered {
        report,
        attention,
        acknowledged,
        runs,
        presence,
    })
}

/// Runs `squadctl status`.
pub(crate) fn status(root_arg: Option<&Path>, args: StatusArgs) -> u8 {
    let root = match resolve_root(root_arg) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let now = chrono::Utc::now();
    let gathered = match gather(&root, args.session.as_deref(), now) {
        Ok(g) => g,
        Err(e) => return super::fail(e),
    };
    if let Some(id) = &args.ack {
        return acknowledge(&root, id, &gathered, args.session.is_none(), args.json);
    }
    let Gathered {
        report,
        attention,
        acknowledged,
        runs: records,
        presence,
    } = gathered;
    // Agent runs (docs/runners.md), from their run.json files.
    let runs = super::runs::runs_report(&root, args.session.as_deref(), false, 0);
    // Cluster call site (docs/cluster.md): connection and leader, when on.
    let cluster = super::cluster::status_section(&root);
    let code = if args.json {
        let mut value = serde_json::to_value(&report).unwrap_or_default();
        value["needs_attention"] = serde_json::to_value(&attention).unwrap_or_default();
        value["acknowledged"] = serde_json::to_value(&acknowledged).unwrap_or_default();
        value["runs"] = serde_json::Value::Array(runs);
        // Tokens and cost per session (docs/runners.md).
        value["usage"] = super::usage::sessions_json(&records);
        // Which agent needs a person (docs/guards.md).
        value["presence"] = serde_json::to_value(&presence).unwrap_or_default();
        if let Some((_, c)) = &cluster {
            value["cluster"] = c.clone();
        }
        print(&format!("{value:#}\n"))
    } else {
        // Session names, agents and findings come from the files: escape
        // control characters before they reach the terminal.
        let mut text = crate::attention::render_human(
            &crate::text::escape_all(&attention).unwrap_or(attention.clone()),
        );
        if !acknowledged.is_empty() {
            text.push_str(&format!("acknowledged ({}):\n", acknowledged.len()));
            for i in &acknowledged {
                let place = i
                    .session
                    .as_deref()
                    .map_or_else(String::new, |s| format!("[{s}] "));
                text.push_str(&crate::text::escape_lines(&format!(
                    "  {place}{} ({})\n",
                    i.summary, i.id
                )));
            }
        }
        text.push_str(&render_human(
            &crate::text::escape_all(&report).unwrap_or(report.clone()),
            now,
        ));
        if !runs.is_empty() {
            text.push_str("agent runs:\n");
            text.push_str(&super::runs::runs_human(&runs));
        }
        if !presence.is_empty() {
            text.push_str("agents (their CLIs' hooks):\n");
            for p in &presence {
                text.push_str(&format!(
                    "  {} {}{}\n",
                    crate::text::escape(&p.agent),
                    p.state.as_str(),
                    p.detail
                        .as_deref()
                        .map_or_else(String::new, |d| format!(": {}", crate::text::escape(d)))
                ));
            }
        }
        let cost = super::usage::sessions_human(&records);
        if !cost.is_empty() {
            text.push_str("tokens and cost:\n");
            text.push_str(&cost);
        }
        if let Some((c, _)) = &cluster {
            text.push_str(c);
        }
        super::print_human(&text)
    };
    if code != exit::OK || !args.check {
        return code;
    }
    // A runner whose agent CLI would run without the guard (squadd refuses
    // to dispatch to it): `squadctl guard doctor` says why.
    let (guard_blocked, guard_text) = super::guard_doctor::summary(&root);
    if guard_blocked {
        eprintln!("squadctl: {guard_text} (see `squadctl guard doctor`)");
    }
    if has_problems(&report)
        || guard_blocked
        || attention.iter().any(|i| !args.allow.contains(&i.kind))
    {
        exit::PROBLEMS
    } else {
        exit::OK
    }
}

/// What `status --check` fails on besides the attention items: dependency
/// violations, skipped skills, team file errors, a missing root.
fn has_problems(report: &StatusReport) -> bool {
    report.roots.iter().any(|r| {
        r.missing
            || r.skills.errors > 0
            || r.team.errors > 0
            || r.sessions.iter().any(|s| !s.violations.is_empty())
    })
}

/// The `events --help` text listing every event kind, built from the enum.
pub(crate) fn event_kinds_help() -> String {
    let names = crate::events::EventKind::all_names();
    let mut out = String::from("Event kinds:\n");
    let mut line = String::from(" ");
    for (i, name) in names.iter().enumerate() {
        let item = if i + 1 == names.len() {
            format!(" {name}")
        } else {
            format!(" {name},")
        };
        if line.len() + item.len() > 78 {
            out.push_str(&line);
            out.push('\n');
            line = String::from(" ");
        }
        line.push_str(&item);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Runs `squadctl events`.
pub(crate) fn events(root_arg: Option<&Path>, args: EventsArgs) -> u8 {
    let root = match resolve_root(root_arg) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let show = |e: &Event| {
        if args.json {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            crate::text::escape(&e.human()).into_owned()
        }
    };
    let mut client = match Client::connect(&root, DAEMON_TIMEOUT) {
        Ok(c) => c,
        Err(ClientError::NotRunning(_)) if !args.follow => {
            eprintln!("squadctl: squadd is not running; showing the audit log");
            return match crate::audit::read_events(&root) {
                Ok(events) => {
                    let text: String = events.iter().map(|e| show(e) + "\n").collect();
                    print(&text)
                }
                Err(e) => super::fail(e),
            };
        }
        Err(e) => return super::fail(e),
    };
    if let Err(e) = client.send(Method::Events {
        follow: args.follow,
    }) {
        return super::fail(e);
    }
    if args.follow {
        if let Err(e) = client.set_read_timeout(None) {
            return super::fail(e);
        }
        loop {
            match client.read() {
                Ok(Some(v)) => match serde_json::from_value::<Event>(v) {
                    Ok(e) => {
                        if print(&(show(&e) + "\n")) != exit::OK {
                            return exit::FAILURE;
                        }
                    }
                    Err(e) => return super::fail(format!("unexpected event: {e}")),
                },
                // A stream ends only when squadd goes away: say so, and let
                // a supervising script notice.
                Ok(None) => {
                    return super::fail(
                        "squadd stopped (the event stream ended); restart squadd and follow again",
                    );
                }
                Err(e) => return super::fail(format!("lost the event stream: {e}")),
            }
        }
    }
    match client.read() {
        Ok(Some(v)) => match serde_json::from_value::<Vec<Event>>(v) {
            Ok(events) => print(&events.iter().map(|e| show(e) + "\n").collect::<String>()),
            Err(e) => super::fail(format!("unexpected events: {e}")),
        },
        Ok(None) => super::fail("squadd closed the connection"),
        Err(e) => super::fail(e),
    }
}

/// Runs `squadctl health`.
pub(crate) fn health(root_arg: Option<&Path>, args: HealthArgs) -> u8 {
    let root = match resolve_root(root_arg) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut health =
        match Client::connect(&root, DAEMON_TIMEOUT).and_then(|mut c| c.call(Method::Health)) {
            Ok(v) => match serde_json::from_value::<Health>(v) {
                Ok(h) => h,
                Err(e) => return super::fail(format!("unexpected health from squadd: {e}")),
            },
            Err(e) => return super::fail(e),
        };
    // Whether the runners' agent CLIs would call the guard, judged here
    // (it asks the CLIs themselves), not by squadd.
    let (guard_blocked, guard_text) = super::guard_doctor::summary(&root);
    health.checks.push(crate::daemon::health::Check {
        name: "guard".into(),
        value: guard_text,
        verdict: if guard_blocked {
            Verdict::Critical
        } else {
            Verdict::Ok
        },
        note: "critical when a runner's agent CLI would run unguarded; `squadctl guard doctor`"
            .into(),
    });
    // Cluster call site (docs/cluster.md): the NATS connection, when on.
    health.checks.extend(super::cluster::health_check(&root));
    let code = print(&if args.json {
        format!("{:#}\n", serde_json::to_value(&health).unwrap_or_default())
    } else {
        let mut out = String::new();
        for c in &health.checks {
            let verdict = match c.verdict {
                Verdict::Ok => "ok",
                Verdict::Warn => "WARN",
                Verdict::Critical => "CRITICAL",
            };
            // Values carry paths and a hook's error: escaped, so that a
            // name cannot break the line.
            out.push_str(&format!(
                "{verdict:<8} {:<7} {}  ({})\n",
                c.name,
                crate::text::escape(&c.value),
                c.note
            ));
        }
        out
    });
    if code != exit::OK {
        return code;
    }
    match health.verdict() {
        Verdict::Ok => exit::OK,
        _ => exit::PROBLEMS,
    }
}
