// Over 800 lines: `squadctl lock` and its four subcommands (acquire with
// its wait, release, renew, list) over one set of record helpers. The
// split waiting is acquire and its wait into ctl/lock/acquire.rs (issue 42).
//! `squadctl lock`: advisory locks on paths and globs, for agents.

use crate::events::EventKind;
use crate::exit;
use crate::locks::{
    Entry, LOCKS_DIR, Reclaim, escapes_root, host_name, load, process_start, record_path, transact,
};
use chrono::{DateTime, Utc};
use clap::Subcommand;
use serde_json::json;
use squad_policies::Boundaries;
use squad_policies::duration::{format_duration, parse_duration};
use squad_policies::locks::{
    AcquireOutcome, LockRecord, Mode, Request, parse_target, plan_acquire, plan_release, plan_renew,
};
use squad_protocol::IdKind;
use squad_protocol::model::SessionState;
use squad_protocol::tree::session_dirs;
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
    /// Whether a cluster lock's fencing token is still the current
    /// holding's: exit 0 current, 1 stale (the lock lapsed or another
    /// holds it), 2 when it cannot be known.
    ///
    /// `lock acquire` prints the token of each cluster lock it takes (the
    /// key's revision when the holding began; a later holding always has a
    /// larger one). Whoever accepts an agent's writes can ask this before
    /// taking one.
    Verify(super::lock_fence::VerifyArgs),
}

/// Arguments of `lock acquire`.
#[derive(Debug, clap::Args)]
pub struct AcquireArgs {
    /// Paths or globs, relative to the project root.
    #[arg(required = true, value_name = "TARGET")]
    pub targets: Vec<String>,
    /// The agent taking the lock.
    #[arg(long, env = "SQUAD_AGENT")]
    pub agent: String,
    /// The agent's task; its boundaries limit what may be locked.
    #[arg(long, env = "SQUAD_TASK")]
    pub task: String,
    /// The session holding the task: a directory name in `.squad/sessions/`.
    /// Default: the session whose plan names the task; when several do, the
    /// only active one, else the command lists them and asks for --session.
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
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
    #[arg(long, env = "SQUAD_AGENT")]
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
    #[arg(long, env = "SQUAD_AGENT")]
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
pub(crate) fn run(root_arg: Option<&Path>, cmd: LockCommand) -> u8 {
    let (root, policy) = match super::root_and_policy(root_arg) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match cmd {
        LockCommand::Acquire(a) => acquire(&root, &policy, a),
        LockCommand::Release(a) => release(&root, &policy, a),
        LockCommand::Renew(a) => renew(&root, &policy, a),
        LockCommand::List(a) => list(&root, &policy, a),
        LockCommand::Verify(a) => super::lock_fence::verify(&root, &policy, a),
    }
}

fn ttl(arg: Option<&str>, policy: &squad_policies::Policy) -> Result<Duration, String> {
    let ttl = match arg {
        Some(t) => parse_duration(t).map_err(|e| format!("--ttl: {e}"))?,
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

/// `now + ttl`, or an error when that is past the calendar's end.
fn expiry(now: DateTime<Utc>, ttl: Duration) -> Result<DateTime<Utc>, String> {
    chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .ok_or_else(|| format!("--ttl {} is too far in the future", format_duration(ttl)))
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Where a task lives: its session and what its plan says.
struct TaskHome {
    dir: PathBuf,
    allowed: Vec<String>,
    forbidden: Vec<String>,
    assignee: String,
}

fn session_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether a session has ended (its recorded status is completed or failed).
fn ended(dir: &Path) -> Option<SessionState> {
    super::message::session_state(dir).filter(|s| *s != SessionState::Active)
}

/// Finds the session whose plan assigns `task` (or checks the named one)
/// through the one session resolver of the agent commands
/// ([`super::target::resolve`]); an ended session holds no locks.
fn task_session(root: &Path, session: Option<&str>, task: &str) -> Result<TaskHome, String> {
    let index = super::target::resolve(root, session, super::target::Defines::Task(task))?;
    if let Some(state) = ended(&index.dir) {
        return Err(format!(
            "session `{}` is {state}: its locks were released when it ended",
            crate::text::escape(&index.name)
        ));
    }
    let plan = index.plans().find(|p| p.task_id == task).ok_or_else(|| {
        format!(
            "task `{task}` has no valid task assignment in session `{}`",
            crate::text::escape(&index.name)
        )
    })?;
    Ok(TaskHome {
        allowed: plan.allowed.to_vec(),
        forbidden: plan.forbidden.to_vec(),
        assignee: plan.agent.clone(),
        dir: index.dir.clone(),
    })
}

/// What stands in the way of an acquisition.
fn blocker_message(entry: &Entry, held: &str, wanted: &str) -> String {
    match entry {
        Entry::Held { record, .. } => format!(
            "`{wanted}` overlaps `{held}`, locked {} by {} (task {}) in session {} until {}",
            record.mode,
            record.agent,
            record.task_id,
            crate::text::escape(&record.session),
            stamp(record.expires_at)
        ),
        Entry::Corrupt {
            path,
            held_until,
            error,
            ..
        } => format!(
            "an unreadable lock record {} ({}) counts as held on everything until {}; fix or remove it",
            crate::text::escape(&path.display().to_string()),
            crate::text::escape(error),
            stamp(*held_until)
        ),
    }
}

enum Attempt {
    /// The record, and each cluster lock's fencing token (target, token).
    Taken(PathBuf, LockRecord, Vec<(String, u64)>),
    /// Why, until when, and whether the blocker names a process (whose
    /// death no watch reports).
    Conflict(String, DateTime<Utc>, bool),
}

/// Says why a lock was refused (on stderr, and as JSON with `--json`).
fn refuse(message: String, json: bool) -> u8 {
    if json {
        super::print(&format!(
            "{:#}\n",
            json!({"taken": false, "error": message})
        ));
    }
    super::eprint_text(&format!(
        "squadctl: lock refused: {}\n",
        crate::text::escape_lines(&message)
    ));
    exit::PROBLEMS
}

fn acquire(root: &Path, policy: &squad_policies::Policy, args: AcquireArgs) -> u8 {
    let Checked {
        ttl,
        wait,
        targets,
        home,
        pid_started_at,
    } = match checked(root, policy, &args) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mode = if args.shared {
        Mode::Shared
    } else {
        Mode::Exclusive
    };
    let session_name = session_name(&home.dir);
    // A wait too long for the clock is a wait without end.
    let deadline = Instant::now().checked_add(wait);
    let mut waiter = (!wait.is_zero()).then(|| super::wait::Waiter::new(Vec::new()));
    // Another host's release is no local file change: a waiter looks again
    // after this long, doubling up to a limit (many waiters on a busy
    // machine must not flood their squadd), with a per-process offset so
    // waiters do not look in step.
    let mut cluster_poll =
        CLUSTER_POLL + chrono::Duration::milliseconds(i64::from(std::process::id() % 50));

    loop {
        // Watch first, then look: a release in between wakes the wait
        // instead of being missed (lock directories created since are added
        // on every turn).
        if let Some(waiter) = &mut waiter {
            waiter.add(
                session_dirs(root)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|d| d.join(LOCKS_DIR)),
            );
        }
        let attempt = transact(root, policy.lock_default_ttl, Reclaim::Stale, |txn| {
            let request = Request {
                agent: &args.agent,
                task_id: &args.task,
                session: &session_name,
                mode,
                targets: &targets,
            };
            let plan = plan_acquire(&request, &txn.table(), &txn.facts());
            let supersede = match plan.outcome {
                AcquireOutcome::Blocked {
                    by,
                    held,
                    wanted,
                    until,
                } => {
                    let blocker = txn.entries().get(by);
                    let message = blocker
                        .map(|e| blocker_message(e, &held, &wanted))
                        .unwrap_or_default();
                    let has_pid = matches!(
                        blocker,
                        Some(Entry::Held { record, .. }) if record.pid.is_some()
                    );
                    return Ok(Attempt::Conflict(message, until, has_pid));
                }
                AcquireOutcome::Take { supersede } => supersede,
            };
            let record = LockRecord {
                targets: targets.clone(),
                mode,
                agent: args.agent.clone(),
                task_id: args.task.clone(),
                session: session_name.clone(),
                pid: args.pid,
                pid_started_at,
                host: txn.host.clone(),
                acquired_at: txn.now,
                expires_at: expiry(txn.now, ttl)?,
            };
            let path = record_path(&home.dir, &record);
            txn.write(&path, &record)?;
            // Cluster call site (docs/cluster.md): with `cluster:`, an
            // exclusive lock is also taken cluster-wide through the local
            // squadd, after the local record is written (squadd renews the
            // cluster key only while that record is live), and undone when
            // another host holds it.
            let tokens = match cluster_take(root, policy, &record) {
                Ok(ClusterTake::Taken(tokens)) => tokens,
                Ok(ClusterTake::Held(refusal)) => {
                    txn.remove(&path)?;
                    return Ok(Attempt::Conflict(refusal, Utc::now() + cluster_poll, false));
                }
                Err(e) => {
                    txn.remove(&path)?;
                    return Err(e);
                }
            };
            // The new record is written first: a crash in between leaves a
            // harmless duplicate, never a gap.
            let own: Vec<(PathBuf, LockRecord, Vec<String>)> = supersede
                .into_iter()
                .filter_map(|(i, kept)| match txn.entries().get(i) {
                    Some(Entry::Held { path: p, record }) if *p != path => {
                        Some((p.clone(), record.clone(), kept))
                    }
                    _ => None,
                })
                .collect();
            for (old_path, old, kept) in own {
                if kept.is_empty() {
                    txn.remove(&old_path)?;
                } else {
                    txn.write(
                        &old_path,
                        &LockRecord {
                            targets: kept,
                            ..old
                        },
                    )?;
                }
            }
            txn.report(
                &record.session,
                &path,
                EventKind::LockAcquired {
                    targets: record.targets.clone(),
                    mode: record.mode.to_string(),
                    agent: record.agent.clone(),
                    task_id: record.task_id.clone(),
                },
            );
            Ok(Attempt::Taken(path, record, tokens))
        });
        match attempt {
            Err(e) => return super::fail(e),
            Ok(Attempt::Taken(path, record, tokens)) => {
                return if args.json {
                    let tokens: serde_json::Map<String, serde_json::Value> =
                        tokens.into_iter().map(|(t, n)| (t, json!(n))).collect();
                    super::print(&format!(
                        "{:#}\n",
                        json!({"taken": true, "record": path.display().to_string(), "lock": record, "tokens": tokens})
                    ))
                } else {
                    let fencing: String = tokens
                        .iter()
                        .map(|(t, n)| format!("fencing token {n} for {t}\n"))
                        .collect();
                    super::print_human(&format!(
                        "locked {} ({mode}) for {} ({}) until {}\n{fencing}",
                        record.targets.join(", "),
                        record.agent,
                        record.task_id,
                        stamp(record.expires_at)
                    ))
                };
            }
            Ok(Attempt::Conflict(message, until, has_pid)) => {
                cluster_poll = (cluster_poll * 2).min(CLUSTER_POLL_MAX);
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return refuse(message, args.json);
                }
                // Sleep on an inotify watch of every session's locks/ until a
                // record changes, the blocker expires, or the wait runs out:
                // no busy loop.
                let Some(waiter) = &waiter else {
                    return refuse(message, args.json);
                };
                let mut timeout = deadline.map_or(Duration::MAX, |d| d - now);
                if let Ok(left) = (until - Utc::now()).to_std() {
                    timeout = timeout.min(left + Duration::from_millis(10));
                }
                // A holder's death is not a file change: with a pid, look
                // again now and then; otherwise a change or the expiry ends
                // the wait (and a rare safety look).
                timeout = timeout.min(if has_pid { PROCESS_CHECK } else { SAFETY_LOOK });
                waiter.wait(timeout);
                // A cancelled call (its MCP client gave up) takes nothing
                // it would not be told about.
                if super::wait::cancelled() {
                    return refuse(message, args.json);
                }
            }
        }
    }
}

/// What an acquisition asks for, checked: the names, the time to live
/// and the wait, the targets (inside the project and the task's
/// boundaries), the task's session, the process named. The exit code
/// when something is wrong, said.
fn checked(
    root: &Path,
    policy: &squad_policies::Policy,
    args: &AcquireArgs,
) -> Result<Checked, u8> {
    // Each check's exit code, said (`super::fail`, [`refuse`]).
    let fail = |message: String| Err(super::fail(message));
    let refuse = |message: String, json: bool| Err(refuse(message, json));
    if !IdKind::Agent.matches(&args.agent) {
        return fail(format!(
            "`{}` is not a valid agent name",
            crate::text::escape(&args.agent)
        ));
    }
    if !IdKind::Task.matches(&args.task) {
        return fail(format!(
            "`{}` is not a valid task id",
            crate::text::escape(&args.task)
        ));
    }
    let ttl = match ttl(args.ttl.as_deref(), policy) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if let Err(e) = expiry(Utc::now(), ttl) {
        return fail(e);
    }
    let wait = match args.wait.as_deref().map(parse_duration).transpose() {
        Ok(w) => w.unwrap_or_default(),
        Err(e) => return fail(format!("--wait: {e}")),
    };
    let mut targets = Vec::new();
    for t in &args.targets {
        match parse_target(t) {
            Ok(n) => targets.push(n),
            Err(e) => return refuse(format!("`{}`: {e}", shorten(t)), args.json),
        }
    }
    let home = match task_session(root, args.session.as_deref(), &args.task) {
        Ok(x) => x,
        Err(e) => return refuse(e, args.json),
    };
    if home.assignee != args.agent {
        return refuse(
            format!(
                "task `{}` is assigned to `{}`, not `{}`",
                args.task, home.assignee, args.agent
            ),
            args.json,
        );
    }
    let boundaries = Boundaries::new(&home.allowed, &home.forbidden, &policy.forbidden);
    for t in &targets {
        let existing_part = squad_policies::boundary::literal_prefix(t);
        if let Some(to) = escapes_root(root, existing_part) {
            return refuse(
                format!(
                    "`{t}` resolves through a symlink to {}, outside the project",
                    crate::text::escape(&to)
                ),
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
            None => return fail(format!("--pid {pid}: no such process")),
        },
        None => None,
    };
    Ok(Checked {
        ttl,
        wait,
        targets,
        home,
        pid_started_at,
    })
}

/// An acquisition's request, checked ([`checked`]).
struct Checked {
    ttl: Duration,
    wait: Duration,
    targets: Vec<String>,
    home: TaskHome,
    pid_started_at: Option<u64>,
}

/// How often a waiting acquisition looks again at a lock another host holds
/// (no local file change reports its release).
const CLUSTER_POLL: chrono::Duration = chrono::Duration::milliseconds(100);

/// The longest a waiting acquisition goes between looks at a lock another
/// host holds.
const CLUSTER_POLL_MAX: chrono::Duration = chrono::Duration::milliseconds(1500);

/// What a cluster acquisition came to.
enum ClusterTake {
    /// Taken, with each target's fencing token (none when not a cluster
    /// lock).
    Taken(Vec<(String, u64)>),
    /// Another host holds one of the targets: why, in words.
    Held(String),
}

/// Takes `record`'s targets cluster-wide when the project has `cluster:`
/// and the lock is exclusive; `Err` when the cluster cannot be asked
/// (squadd down, NATS unreachable): no cluster lock is ever assumed.
fn cluster_take(
    root: &Path,
    policy: &squad_policies::Policy,
    record: &LockRecord,
) -> Result<ClusterTake, String> {
    if policy.cluster.is_none() || record.mode != Mode::Exclusive {
        return Ok(ClusterTake::Taken(Vec::new()));
    }
    let answer = crate::cluster::client::call(
        root,
        "acquire",
        &record.targets,
        &record.agent,
        &record.task_id,
        &record.session,
    )
    .map_err(|e| format!("cluster lock not taken: {e}"))?;
    if answer["taken"].as_bool() == Some(true) {
        let tokens = answer["tokens"].as_array().cloned().unwrap_or_default();
        return Ok(ClusterTake::Taken(
            record
                .targets
                .iter()
                .zip(tokens.iter().filter_map(|t| t.as_u64()))
                .map(|(t, n)| (t.clone(), n))
                .collect(),
        ));
    }
    let h = &answer["holder"];
    let s = |k: &str| crate::text::escape(h[k].as_str().unwrap_or("?")).into_owned();
    Ok(ClusterTake::Held(format!(
        "`{}` is locked cluster-wide by {} (task {}) in session {} on host {}",
        s("target"),
        s("agent"),
        s("task"),
        s("session"),
        s("host")
    )))
}

/// Gives back released targets cluster-wide at once (squadd would release
/// them at its next renewal anyway, the local records being gone).
fn cluster_give_back(
    root: &Path,
    policy: &squad_policies::Policy,
    agent: &str,
    targets: &[String],
) {
    if policy.cluster.is_none() || targets.is_empty() {
        return;
    }
    if let Err(e) = crate::cluster::client::call(root, "release", targets, agent, "", "") {
        super::eprint_text(&format!(
            "squadctl: warning: cluster release deferred to squadd's next renewal: {}\n",
            crate::text::escape_lines(&e.to_string())
        ));
    }
}

/// How often a waiting acquisition checks whether a holder's process died
/// (the one thing no watch reports).
const PROCESS_CHECK: Duration = Duration::from_secs(1);

/// The longest a waiting acquisition sleeps without looking (a change the
/// watch could not see: a lock directory created while waiting).
const SAFETY_LOOK: Duration = Duration::from_secs(30);

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
    // A holder may release what already lapsed: nothing is reclaimed here.
    let result = transact(root, policy.lock_default_ttl, Reclaim::No, |txn| {
        let steps = plan_release(
            &args.agent,
            (!args.all).then_some(wanted.as_slice()),
            &txn.table(),
        );
        let mut released = Vec::new();
        for step in steps {
            let Some(Entry::Held { path, record }) = txn.entries().get(step.index).cloned() else {
                continue;
            };
            if step.kept.is_empty() {
                txn.remove(&path)?;
            } else {
                txn.write(
                    &path,
                    &LockRecord {
                        targets: step.kept,
                        ..record.clone()
                    },
                )?;
            }
            txn.report(
                &record.session,
                &path,
                EventKind::LockReleased {
                    targets: step.released.clone(),
                    agent: args.agent.clone(),
                    reason: "released by its holder".into(),
                },
            );
            released.extend(step.released);
        }
        Ok(released)
    });
    match result {
        Err(e) => super::fail(e),
        Ok(released) => {
            cluster_give_back(root, policy, &args.agent, &released);
            let missing: Vec<&String> = wanted.iter().filter(|w| !released.contains(w)).collect();
            let text = if args.json {
                format!("{:#}\n", json!({"released": released, "not_held": missing}))
            } else if released.is_empty() {
                format!("{} holds none of these locks\n", args.agent)
            } else {
                format!("released {}\n", released.join(", "))
            };
            let code = super::print_human(&text);
            if code != exit::OK {
                return code;
            }
            // `--all` asks for nothing in particular: holding nothing (the
            // session ended and squadd released them) is not a failure, so
            // an agent finishing as the skill shows never fails here.
            if (released.is_empty() && !args.all) || !missing.is_empty() {
                if !args.json && !missing.is_empty() && !released.is_empty() {
                    super::eprint_text(&format!(
                        "squadctl: not held by {}: {}\n",
                        args.agent,
                        missing
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
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
    // Stale locks are reclaimed first: an expired lock is not renewed, it
    // may already be someone else's turn.
    let result = transact(root, policy.lock_default_ttl, Reclaim::Stale, |txn| {
        let (_, indexes) = plan_renew(&args.agent, &wanted, &txn.table(), &txn.facts());
        // Cluster call site (docs/cluster.md, "Fencing tokens"): a cluster
        // lock that lapsed (its TTL ran out while squadd was stopped or cut
        // off, another host took it) is not renewed: the agent is told.
        if policy.cluster.is_some() {
            let clustered: Vec<String> = indexes
                .iter()
                .filter_map(|i| match txn.entries().get(*i) {
                    Some(Entry::Held { record, .. }) if record.mode == Mode::Exclusive => {
                        Some(record.targets.clone())
                    }
                    _ => None,
                })
                .flatten()
                .collect();
            let lapsed = super::lock_fence::lapsed(root, &args.agent, &clustered)
                .map_err(|e| format!("cannot confirm the cluster lock, not renewed: {e}"))?;
            if let Some(why) = lapsed {
                return Ok(Err(why));
            }
        }
        let expires_at = expiry(txn.now, ttl)?;
        let mut renewed = Vec::new();
        for i in indexes {
            let Some(Entry::Held { path, record }) = txn.entries().get(i).cloned() else {
                continue;
            };
            let record = LockRecord {
                expires_at,
                ..record
            };
            txn.write(&path, &record)?;
            renewed.push(record);
        }
        Ok(Ok(renewed))
    });
    match result {
        Err(e) => super::fail(e),
        Ok(Err(lapsed)) => {
            if args.json {
                super::print(&format!("{:#}\n", json!({"renewed": [], "error": lapsed})));
            }
            super::eprint_text(&format!(
                "squadctl: not renewed: {}\n",
                crate::text::escape_lines(&lapsed)
            ));
            exit::PROBLEMS
        }
        Ok(Ok(renewed)) if renewed.is_empty() => {
            super::eprint_text(&format!(
                "squadctl: {} holds no live lock on {}\n",
                args.agent,
                wanted.join(", ")
            ));
            if args.json {
                super::print(&format!("{:#}\n", json!({"renewed": []})));
            }
            exit::PROBLEMS
        }
        Ok(Ok(renewed)) => {
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
                super::print_human(&lines)
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
    // Cluster call site (docs/cluster.md): with `cluster:`, the
    // cluster-wide table as the local squadd sees it, after the local one.
    let cluster = policy
        .cluster
        .as_ref()
        .map(|_| crate::cluster::client::call(root, "list", &[], "", "", ""));
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
                    ..
                } => json!({
                    "record": path.display().to_string(),
                    "state": "corrupt",
                    "session": session,
                    "held_until": stamp(*held_until),
                    "error": error,
                }),
            })
            .collect();
        let mut v = json!({"locks": items});
        match &cluster {
            Some(Ok(c)) => v["cluster_locks"] = c["locks"].clone(),
            Some(Err(e)) => v["cluster_error"] = json!(e),
            None => {}
        }
        return super::print(&format!("{v:#}\n"));
    }
    let mut out = String::new();
    if entries.is_empty() {
        out.push_str("no locks\n");
    }
    for e in &entries {
        let esc = |s: &str| crate::text::escape(s).into_owned();
        match e {
            Entry::Held { record, .. } => out.push_str(&format!(
                "{}  {}  {} ({})  until {}  [{}]  {}\n",
                esc(&record.targets.join(", ")),
                record.mode,
                esc(&record.agent),
                esc(&record.task_id),
                stamp(record.expires_at),
                esc(&state_of(e)),
                esc(&record.session),
            )),
            Entry::Corrupt {
                path,
                held_until,
                error,
                ..
            } => out.push_str(&format!(
                "UNREADABLE {}  counts as held on everything until {}  ({})\n",
                esc(&path.display().to_string()),
                stamp(*held_until),
                esc(error)
            )),
        }
    }
    match &cluster {
        Some(Ok(c)) => {
            let locks = c["locks"].as_array().cloned().unwrap_or_default();
            out.push_str(&format!("cluster-wide: {} lock(s)\n", locks.len()));
            let s = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_string();
            for l in &locks {
                out.push_str(&format!(
                    "  {}  {} ({})  session {}  host {}\n",
                    crate::text::escape(&s(&l["target"])),
                    crate::text::escape(&s(&l["agent"])),
                    crate::text::escape(&s(&l["task"])),
                    crate::text::escape(&s(&l["session"])),
                    crate::text::escape(&s(&l["host"])),
                ));
            }
        }
        Some(Err(e)) => out.push_str(&format!(
            "cluster-wide: unknown ({})\n",
            crate::text::escape_lines(&e.to_string())
        )),
        None => {}
    }
    // Targets, agents and sessions come from files anyone can write.
    super::print_human(&out)
}
