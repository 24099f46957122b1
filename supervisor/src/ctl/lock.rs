//! `squadctl lock`: advisory locks on paths and globs, for agents.

use crate::events::EventKind;
use crate::exit;
use crate::index::{Entry as IndexEntry, scan_session};
use crate::locks::{
    Entry, LOCKS_DIR, audit, audit_all, escapes_root, host_name, load, lock_table, process_start,
    reclaim, record_path, write_record,
};
use chrono::{DateTime, Utc};
use clap::Subcommand;
use serde_json::json;
use squad_policies::Boundaries;
use squad_policies::duration::{format_duration, parse_duration};
use squad_policies::locks::{LockRecord, Mode, conflict, parse_target};
use squad_protocol::IdKind;
use squad_protocol::tree::{session_dirs, sessions_dir};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lock commands.
///
/// Locks are advisory: they tell agents who is changing what. A target is a
/// project-relative path or a glob (`src/api/**`). Records live in the
/// session's `locks/` directory; every change to the table is serialized by an
/// OS lock on `.squad/run/locks.mutex`, so this works with or without squadd.
///
/// Exit status: 0 done, 1 refused or in conflict (the holder is named), 2
/// usage or I/O failure.
#[derive(Debug, Subcommand)]
pub enum LockCommand {
    /// Take locks on one or more targets: all of them or none.
    ///
    /// Refused when a target is unsafe (absolute, `..`, a glob matching the
    /// whole project), outside the task's boundaries, or overlaps a lock held
    /// by someone else (same path; a path matched by a glob; two globs whose
    /// literal prefixes nest). Expired locks and locks whose process is gone
    /// are reclaimed first.
    Acquire(AcquireArgs),
    /// Release targets held by an agent.
    Release(ReleaseArgs),
    /// Extend locks held by an agent.
    Renew(RenewArgs),
    /// List every lock of the project.
    List(ListArgs),
}

/// Arguments of `lock acquire`.
#[derive(Debug, clap::Args)]
pub struct AcquireArgs {
    /// Paths or globs, relative to the project root.
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// The agent taking the lock.
    #[arg(long)]
    pub agent: String,
    /// The agent's task; its boundaries limit what may be locked.
    #[arg(long)]
    pub task: String,
    /// The session holding the task (default: the session whose plan names it).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Time to live (default: the policy's `locks.default_ttl`, 15m).
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// A shared lock: conflicts only with exclusive ones.
    #[arg(long)]
    pub shared: bool,
    /// Wait up to DURATION for conflicting locks to go away.
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
    /// A process whose exit releases the lock (e.g. the agent's own `$$`).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `lock release`.
#[derive(Debug, clap::Args)]
pub struct ReleaseArgs {
    /// Targets to release (as they were locked).
    #[arg(value_name = "TARGET", required_unless_present = "all")]
    pub targets: Vec<String>,
    /// The holder.
    #[arg(long)]
    pub agent: String,
    /// Release every lock of the agent.
    #[arg(long)]
    pub all: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `lock renew`.
#[derive(Debug, clap::Args)]
pub struct RenewArgs {
    /// Targets to renew (every lock of the agent that holds one of them).
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// The holder.
    #[arg(long)]
    pub agent: String,
    /// New time to live from now (default: the policy's `locks.default_ttl`).
    #[arg(long, value_name = "DURATION")]
    pub ttl: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `lock list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs a lock command.
pub fn run(root_arg: Option<&Path>, cmd: LockCommand) -> u8 {
    let (root, policy) = match super::root_and_policy(root_arg) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match cmd {
        LockCommand::Acquire(a) => acquire(&root, &policy, a),
        LockCommand::Release(a) => release(&root, &policy, a),
        LockCommand::Renew(a) => renew(&root, &policy, a),
        LockCommand::List(a) => list(&root, &policy, a),
    }
}

fn ttl(arg: Option<&str>, policy: &squad_policies::Policy) -> Result<Duration, String> {
    let ttl = match arg {
        Some(t) => parse_duration(t)?,
        None => policy.lock_default_ttl,
    };
    if ttl.is_zero() || ttl > policy.lock_max_ttl {
        return Err(format!(
            "--ttl must be positive and at most {} (policy locks.max_ttl)",
            format_duration(policy.lock_max_ttl)
        ));
    }
    Ok(ttl)
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Finds the session whose plan assigns `task` (or checks the named one) and
/// returns its directory and the task's boundaries.
fn task_session(
    root: &Path,
    session: Option<&str>,
    agent: &str,
    task: &str,
) -> Result<(PathBuf, Vec<String>, Vec<String>, String), String> {
    let dirs: Vec<PathBuf> = match session {
        Some(s) => vec![sessions_dir(root).join(s)],
        None => session_dirs(root).map_err(|e| e.to_string())?,
    };
    // A valid plan always carries its canonical name (anything else is a
    // filename-mismatch error), so the agent's own plan is one file away.
    for dir in &dirs {
        let name = squad_protocol::model::canonical_file_name(
            squad_protocol::FileKind::TaskAssignment,
            agent,
            task,
            "",
        );
        let path = dir.join(name);
        if let Ok(Some(f)) =
            crate::index::load_file(&path, squad_protocol::FileKind::TaskAssignment)
            && let IndexEntry::Plan(p) = f.entry
            && p.task_id == task
        {
            return Ok((dir.clone(), p.allowed, p.forbidden, p.agent));
        }
    }
    // Otherwise scan, to say who the task belongs to.
    for dir in dirs {
        if !dir.is_dir() {
            return Err(format!("no session directory {}", dir.display()));
        }
        let index = scan_session(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for f in index.files.values() {
            if let IndexEntry::Plan(p) = &f.entry
                && p.task_id == task
            {
                return Ok((dir, p.allowed.clone(), p.forbidden.clone(), p.agent.clone()));
            }
        }
    }
    Err(match session {
        Some(s) => format!("task `{task}` has no valid task assignment in session `{s}`"),
        None => format!(
            "task `{task}` has no valid task assignment in any session; check the id or pass --session"
        ),
    })
}

/// What stands in the way of an acquisition.
fn blocker_message(entry: &Entry, held: &str, wanted: &str) -> String {
    match entry {
        Entry::Held { record, .. } => format!(
            "`{wanted}` overlaps `{held}`, locked {} by {} (task {}) until {}",
            record.mode,
            record.agent,
            record.task_id,
            stamp(record.expires_at)
        ),
        Entry::Corrupt {
            path, held_until, ..
        } => format!(
            "an unreadable lock record {} counts as held on everything until {}; fix or remove it",
            path.display(),
            stamp(*held_until)
        ),
    }
}

enum Attempt {
    Taken(PathBuf, LockRecord),
    Conflict(String, Option<DateTime<Utc>>),
}

fn acquire(root: &Path, policy: &squad_policies::Policy, args: AcquireArgs) -> u8 {
    let refuse = |message: String, json: bool| -> u8 {
        if json {
            super::print(&format!(
                "{:#}\n",
                json!({"taken": false, "error": message})
            ));
        }
        eprintln!("squadctl: lock refused: {message}");
        exit::PROBLEMS
    };
    if !IdKind::Agent.matches(&args.agent) {
        return super::fail(format!("`{}` is not a valid agent name", args.agent));
    }
    if !IdKind::Task.matches(&args.task) {
        return super::fail(format!("`{}` is not a valid task id", args.task));
    }
    let ttl = match ttl(args.ttl.as_deref(), policy) {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    let wait = match args.wait.as_deref().map(parse_duration).transpose() {
        Ok(w) => w.unwrap_or_default(),
        Err(e) => return super::fail(e),
    };
    let mut targets = Vec::new();
    for t in &args.targets {
        match parse_target(t) {
            Ok(n) => targets.push(n),
            Err(e) => return refuse(format!("`{}`: {e}", shorten(t)), args.json),
        }
    }
    let (session_dir, allowed, forbidden, assignee) =
        match task_session(root, args.session.as_deref(), &args.agent, &args.task) {
            Ok(x) => x,
            Err(e) => return refuse(e, args.json),
        };
    if assignee != args.agent {
        return refuse(
            format!(
                "task `{}` is assigned to `{assignee}`, not `{}`",
                args.task, args.agent
            ),
            args.json,
        );
    }
    let boundaries = Boundaries::new(&allowed, &forbidden, &policy.forbidden);
    for t in &targets {
        let existing_part = squad_policies::boundary::literal_prefix(t);
        if let Some(to) = escapes_root(root, existing_part) {
            return refuse(
                format!("`{t}` resolves through a symlink to {to}, outside the project"),
                args.json,
            );
        }
        let decision = boundaries.decide_target(t);
        if !decision.is_allowed() {
            return refuse(
                format!(
                    "`{t}` is outside task {}'s boundaries: {decision}",
                    args.task
                ),
                args.json,
            );
        }
    }
    let pid_started_at = match args.pid {
        Some(pid) => match process_start(pid) {
            Some(t) => Some(t),
            None => return super::fail(format!("--pid {pid}: no such process")),
        },
        None => None,
    };
    let mode = if args.shared {
        Mode::Shared
    } else {
        Mode::Exclusive
    };
    let host = host_name();
    let session_name = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let deadline = Instant::now() + wait;
    let mut waiter: Option<super::wait::Waiter> = None;

    loop {
        let attempt = (|| -> Result<Attempt, String> {
            let _guard =
                lock_table(root).map_err(|e| format!("cannot lock the lock table: {e}"))?;
            let now = Utc::now();
            let mut entries = load(root, policy.lock_default_ttl).map_err(|e| e.to_string())?;
            audit_all(root, reclaim(&mut entries, now, &host));
            for entry in &entries {
                let blocking = match entry {
                    Entry::Held { record, .. } => {
                        // The same agent and task re-taking its own lock is a renewal,
                        // not a conflict; anyone else overlapping is.
                        if record.agent == args.agent && record.task_id == args.task {
                            None
                        } else {
                            conflict(record, mode, &targets).map(|(h, w)| {
                                (blocker_message(entry, h, w), Some(record.expires_at))
                            })
                        }
                    }
                    Entry::Corrupt { held_until, .. } => {
                        Some((blocker_message(entry, "", ""), Some(*held_until)))
                    }
                };
                if let Some((message, until)) = blocking {
                    return Ok(Attempt::Conflict(message, until));
                }
            }
            let record = LockRecord {
                targets: targets.clone(),
                mode,
                agent: args.agent.clone(),
                task_id: args.task.clone(),
                session: session_name.clone(),
                pid: args.pid,
                pid_started_at,
                host: host.clone(),
                acquired_at: now,
                expires_at: now + chrono::Duration::from_std(ttl).unwrap_or_default(),
            };
            let path = record_path(&session_dir, &record);
            write_record(&path, &record).map_err(|e| format!("{}: {e}", path.display()))?;
            // Re-taking one's own targets moves them into the new record (the
            // new one is written first: a crash in between leaves a harmless
            // duplicate, never a gap).
            for entry in &entries {
                let Entry::Held {
                    path: old_path,
                    record: old,
                } = entry
                else {
                    continue;
                };
                if old.agent != args.agent || old.task_id != args.task || *old_path == path {
                    continue;
                }
                let kept: Vec<String> = old
                    .targets
                    .iter()
                    .filter(|t| !targets.contains(t))
                    .cloned()
                    .collect();
                if kept.len() == old.targets.len() {
                    continue;
                }
                let result = if kept.is_empty() {
                    std::fs::remove_file(old_path)
                } else {
                    write_record(
                        old_path,
                        &LockRecord {
                            targets: kept,
                            ..old.clone()
                        },
                    )
                };
                result.map_err(|e| format!("{}: {e}", old_path.display()))?;
            }
            Ok(Attempt::Taken(path, record))
        })();
        match attempt {
            Err(e) => return super::fail(e),
            Ok(Attempt::Taken(path, record)) => {
                audit(
                    root,
                    Some(&record.session),
                    Some(&path),
                    EventKind::LockAcquired {
                        targets: record.targets.clone(),
                        mode: record.mode.to_string(),
                        agent: record.agent.clone(),
                        task_id: record.task_id.clone(),
                    },
                );
                return if args.json {
                    super::print(&format!(
                        "{:#}\n",
                        json!({"taken": true, "record": path.display().to_string(), "lock": record})
                    ))
                } else {
                    super::print(&format!(
                        "locked {} ({mode}) for {} ({}) until {}\n",
                        record.targets.join(", "),
                        record.agent,
                        record.task_id,
                        stamp(record.expires_at)
                    ))
                };
            }
            Ok(Attempt::Conflict(message, until)) => {
                let now = Instant::now();
                if now >= deadline {
                    return refuse(message, args.json);
                }
                // Sleep until a lock record changes, the blocker expires, or
                // the wait runs out: no busy loop.
                let waiter = waiter.get_or_insert_with(|| {
                    super::wait::Waiter::new(
                        session_dirs(root)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|d| d.join(LOCKS_DIR)),
                    )
                });
                let until_expiry = until
                    .and_then(|u| (u - Utc::now()).to_std().ok())
                    .map(|d| d + Duration::from_millis(10));
                let mut timeout = deadline - now;
                if let Some(e) = until_expiry {
                    timeout = timeout.min(e);
                }
                // Dead processes are only noticed by polling; check them now and then.
                timeout = timeout.min(Duration::from_secs(1));
                waiter.wait(timeout);
            }
        }
    }
}

/// Normalizes targets named on the command line.
fn parse_targets(targets: &[String]) -> Result<Vec<String>, String> {
    targets
        .iter()
        .map(|t| parse_target(t).map_err(|e| format!("`{}`: {e}", shorten(t))))
        .collect()
}

fn shorten(s: &str) -> String {
    if s.len() > 80 {
        let cut = (0..=77).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        format!("{}… ({} bytes)", &s[..cut], s.len())
    } else {
        s.to_string()
    }
}

fn release(root: &Path, policy: &squad_policies::Policy, args: ReleaseArgs) -> u8 {
    let wanted = match parse_targets(&args.targets) {
        Ok(w) => w,
        Err(e) => return super::fail(e),
    };
    let result = (|| -> Result<Vec<String>, String> {
        let _guard = lock_table(root).map_err(|e| e.to_string())?;
        let entries = load(root, policy.lock_default_ttl).map_err(|e| e.to_string())?;
        let mut released = Vec::new();
        for entry in entries {
            let Entry::Held { path, mut record } = entry else {
                continue;
            };
            if record.agent != args.agent {
                continue;
            }
            let (gone, kept): (Vec<String>, Vec<String>) = record
                .targets
                .iter()
                .cloned()
                .partition(|t| args.all || wanted.contains(t));
            if gone.is_empty() {
                continue;
            }
            if kept.is_empty() {
                std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            } else {
                record.targets = kept;
                write_record(&path, &record).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            audit(
                root,
                Some(&record.session),
                Some(&path),
                EventKind::LockReleased {
                    targets: gone.clone(),
                    agent: args.agent.clone(),
                    reason: "released by its holder".into(),
                },
            );
            released.extend(gone);
        }
        Ok(released)
    })();
    match result {
        Err(e) => super::fail(e),
        Ok(released) => {
            let missing: Vec<&String> = wanted.iter().filter(|w| !released.contains(w)).collect();
            let text = if args.json {
                format!("{:#}\n", json!({"released": released, "not_held": missing}))
            } else if released.is_empty() {
                format!("{} holds none of these locks\n", args.agent)
            } else {
                format!("released {}\n", released.join(", "))
            };
            let code = super::print(&text);
            if code != exit::OK {
                return code;
            }
            if released.is_empty() || !missing.is_empty() {
                if !args.json && !missing.is_empty() && !released.is_empty() {
                    eprintln!(
                        "squadctl: not held by {}: {}",
                        args.agent,
                        missing
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                }
                exit::PROBLEMS
            } else {
                exit::OK
            }
        }
    }
}

fn renew(root: &Path, policy: &squad_policies::Policy, args: RenewArgs) -> u8 {
    let ttl = match ttl(args.ttl.as_deref(), policy) {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    let wanted = match parse_targets(&args.targets) {
        Ok(w) => w,
        Err(e) => return super::fail(e),
    };
    let host = host_name();
    let result = (|| -> Result<Vec<LockRecord>, String> {
        let _guard = lock_table(root).map_err(|e| e.to_string())?;
        let now = Utc::now();
        let mut entries = load(root, policy.lock_default_ttl).map_err(|e| e.to_string())?;
        // An expired lock is not renewed: it may already be someone else's turn.
        audit_all(root, reclaim(&mut entries, now, &host));
        let mut renewed = Vec::new();
        for entry in entries {
            let Entry::Held { path, mut record } = entry else {
                continue;
            };
            if record.agent != args.agent || !record.targets.iter().any(|t| wanted.contains(t)) {
                continue;
            }
            record.expires_at = now + chrono::Duration::from_std(ttl).unwrap_or_default();
            write_record(&path, &record).map_err(|e| format!("{}: {e}", path.display()))?;
            renewed.push(record);
        }
        Ok(renewed)
    })();
    match result {
        Err(e) => super::fail(e),
        Ok(renewed) if renewed.is_empty() => {
            eprintln!(
                "squadctl: {} holds no live lock on {}",
                args.agent,
                wanted.join(", ")
            );
            if args.json {
                super::print(&format!("{:#}\n", json!({"renewed": []})));
            }
            exit::PROBLEMS
        }
        Ok(renewed) => {
            if args.json {
                super::print(&format!("{:#}\n", json!({"renewed": renewed})))
            } else {
                let lines: String = renewed
                    .iter()
                    .map(|r| {
                        format!(
                            "renewed {} until {}\n",
                            r.targets.join(", "),
                            stamp(r.expires_at)
                        )
                    })
                    .collect();
                super::print(&lines)
            }
        }
    }
}

fn list(root: &Path, policy: &squad_policies::Policy, args: ListArgs) -> u8 {
    let entries = match load(root, policy.lock_default_ttl) {
        Ok(e) => e,
        Err(e) => return super::fail(e),
    };
    let now = Utc::now();
    let host = host_name();
    let stale = crate::locks::stale_entries(&entries, now, &host);
    let state_of = |e: &Entry| {
        stale
            .iter()
            .find(|(s, _)| s.path() == e.path())
            .map_or_else(|| "held".to_string(), |(_, why)| format!("stale: {why}"))
    };
    if args.json {
        let items: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| match e {
                Entry::Held { path, record } => json!({
                    "record": path.display().to_string(),
                    "state": state_of(e),
                    "lock": record,
                }),
                Entry::Corrupt {
                    path,
                    session,
                    held_until,
                    error,
                } => json!({
                    "record": path.display().to_string(),
                    "state": "corrupt",
                    "session": session,
                    "held_until": stamp(*held_until),
                    "error": error,
                }),
            })
            .collect();
        return super::print(&format!("{:#}\n", json!({"locks": items})));
    }
    if entries.is_empty() {
        return super::print("no locks\n");
    }
    let mut out = String::new();
    for e in &entries {
        match e {
            Entry::Held { record, .. } => out.push_str(&format!(
                "{}  {}  {} ({})  until {}  [{}]  {}\n",
                record.targets.join(", "),
                record.mode,
                record.agent,
                record.task_id,
                stamp(record.expires_at),
                state_of(e),
                record.session,
            )),
            Entry::Corrupt {
                path,
                held_until,
                error,
                ..
            } => out.push_str(&format!(
                "UNREADABLE {}  counts as held on everything until {}  ({error})\n",
                path.display(),
                stamp(*held_until)
            )),
        }
    }
    super::print(&out)
}
