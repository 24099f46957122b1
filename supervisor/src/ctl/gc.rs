//! `squadctl gc`: retention, now, with the plan shown first.

use crate::exit;
use crate::locks::audit;
use crate::retention::Outcome;
use chrono::{DateTime, Utc};
use serde_json::json;
use squad_policies::duration::format_duration;
use squad_policies::retention::{Plan, Verb, plan};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

/// Archive and delete sessions by the retention policy.
///
/// Completed sessions are archived (moved to `.squad/archives/`) 24 h after
/// completing, archives deleted 30 days after archiving, failed sessions
/// deleted 7 days after failing; active sessions are kept indefinitely. Ages
/// are set in `.squad/policies.yaml` (`retention:`). Ages count from the
/// session's own records (`completed_at`, `failed_at`, `archived_at`), with
/// the directory's mtime as a fallback that the plan names.
///
/// Never touched: active sessions, sessions holding live locks, symbolic
/// links, anything resolving outside `.squad/`; an existing archive is never
/// overwritten. Every action is audited. The daemon runs the same code on the
/// policy's `retention.schedule`.
///
/// One gc runs at a time per project (`.squad/run/gc.lock`, shared with
/// squadd's scheduled run): a second one waits (`--wait`), then says another
/// gc is running. An action someone else already did is reported as such,
/// not as a failure. A deletion that was interrupted (a `.deleting-*`
/// directory) is finished by the next run, and reported until it is.
///
/// Exit status: 0 done (or planned), 1 some action failed or another gc kept
/// running past `--wait`, 2 usage or I/O.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Plan as of this time (RFC 3339), instead of now. A time in the
    /// future only with --dry-run (acting on it would archive and delete
    /// before the policy says); a real run records the real time as
    /// `archived_at`, whatever --now says.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,

    /// How long to wait for another gc (or squadd's scheduled retention)
    /// to finish, e.g. `30s`, `0s` to give up at once.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub wait: String,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn age(secs: u64) -> String {
    format_duration(Duration::from_secs(secs))
}

/// Renders a plan for people.
pub(crate) fn render_plan(plan: &Plan, dry_run: bool) -> String {
    let mut out = String::new();
    for a in &plan.actions {
        let verb = match (a.verb, dry_run) {
            (Verb::Archive, true) => "would archive",
            (Verb::Delete, true) => "would delete",
            (Verb::Finish, true) => "would finish",
            (Verb::Archive, false) => "archive",
            (Verb::Delete, false) => "delete",
            (Verb::Finish, false) => "finish",
        };
        if a.verb == Verb::Finish {
            out.push_str(&format!(
                "{verb:<13} {:<8} {}  (deleting it was interrupted; left since {})\n",
                format!("{:?}", a.place).to_lowercase(),
                crate::text::escape(&a.name),
                a.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
            continue;
        }
        out.push_str(&format!(
            "{verb:<13} {:<8} {}  ({} reached: {} since {} {})\n",
            format!("{:?}", a.place).to_lowercase(),
            crate::text::escape(&a.name),
            a.rule,
            age(a.age_secs),
            a.since_source,
            a.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    for s in &plan.skips {
        out.push_str(&format!(
            "{:<13} {:<8} {}  ({})\n",
            "skip",
            format!("{:?}", s.place).to_lowercase(),
            crate::text::escape(&s.name),
            crate::text::escape(&s.reason)
        ));
    }
    // What stays, and why: a run that does nothing says so.
    for k in &plan.kept {
        out.push_str(&format!(
            "{:<13} {:<8} {}  ({})\n",
            "keep",
            format!("{:?}", k.place).to_lowercase(),
            crate::text::escape(&k.name),
            crate::text::escape(&k.reason)
        ));
    }
    let archive = plan
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Archive)
        .count();
    let finish = plan
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Finish)
        .count();
    out.push_str(&format!(
        "{archive} to archive, {} to delete, {} skipped, {} kept{}\n",
        plan.actions.len() - archive - finish,
        plan.skips.len(),
        plan.kept.len(),
        if finish > 0 {
            format!(", {finish} interrupted deletion(s) to finish")
        } else {
            String::new()
        }
    ));
    out
}

/// Runs `squadctl gc`.
pub(crate) fn run(root_arg: Option<&Path>, args: Args) -> u8 {
    let (root, policy) = match super::root_and_policy(root_arg) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let now: DateTime<Utc> = match &args.now {
        Some(t) => match DateTime::parse_from_rfc3339(t) {
            Ok(t) => t.with_timezone(&Utc),
            Err(e) => {
                return super::fail(format!("--now `{t}`: {e}; write e.g. 2024-06-01T12:00:00Z"));
            }
        },
        None => Utc::now(),
    };
    if args.now.is_some() && !args.dry_run && now > Utc::now() {
        return super::fail(format!(
            "--now {} is in the future: acting on it would archive and delete before the policy says; use it with --dry-run",
            args.now.as_deref().unwrap_or_default()
        ));
    }
    let wait = match squad_policies::duration::parse_duration(&args.wait) {
        Ok(d) => d,
        Err(e) => return super::fail(format!("--wait `{}`: {e}", args.wait)),
    };
    // A dry run changes nothing: it plans without waiting for the lock.
    let _guard = if args.dry_run {
        None
    } else {
        match crate::retention::gc_lock(&root, wait) {
            Ok(Some(g)) => Some(g),
            Ok(None) => {
                eprintln!(
                    "squadctl: another gc is running on {} (squadctl gc or squadd's scheduled retention) and did not finish within {}; nothing done, try again later",
                    crate::text::escape(&root.display().to_string()),
                    format_duration(wait)
                );
                return exit::PROBLEMS;
            }
            Err(e) => {
                return super::fail(format!(
                    "{}: cannot take the gc lock: {e}",
                    root.join(".squad/run")
                        .join(crate::retention::GC_LOCK_FILE)
                        .display()
                ));
            }
        }
    };
    let mut places = match crate::retention::Places::open(&root) {
        Ok(p) => p,
        Err(e) => return super::fail(format!("{}: {e}", root.display())),
    };
    let facts = crate::retention::gather(&places, now, &BTreeSet::new());
    let plan = plan(&policy.retention, &facts, now);
    if args.dry_run {
        return if args.json {
            super::print(&format!(
                "{:#}\n",
                json!({"dry_run": true, "now": now, "plan": plan})
            ))
        } else {
            super::print_human(&render_plan(&plan, true))
        };
    }
    let results = crate::retention::execute(&mut places, &plan, Utc::now());
    let mut failed = 0;
    for (session, path, outcome) in &results {
        match outcome {
            Outcome::Done(kind) => audit(&root, Some(session), Some(path), kind.clone()),
            Outcome::Failed(kind) => {
                failed += 1;
                audit(&root, Some(session), Some(path), kind.clone())
            }
            Outcome::AlreadyDone => {}
        }
    }
    let code = if args.json {
        let done: Vec<serde_json::Value> = results
            .iter()
            .map(|(s, _, o)| match o {
                Outcome::Done(k) | Outcome::Failed(k) => json!({"session": s, "event": k}),
                Outcome::AlreadyDone => json!({"session": s, "already_done": true}),
            })
            .collect();
        super::print(&format!(
            "{:#}\n",
            json!({"dry_run": false, "now": now, "plan": plan, "results": done})
        ))
    } else {
        let mut text = render_plan(&plan, false);
        for (s, _, o) in &results {
            match o {
                Outcome::Failed(crate::events::EventKind::RetentionFailed { error }) => {
                    text.push_str(&format!("FAILED {}\n", crate::text::escape(error)))
                }
                Outcome::AlreadyDone => text.push_str(&format!(
                    "already done by someone else: {}\n",
                    crate::text::escape(s)
                )),
                _ => {}
            }
        }
        super::print_human(&text)
    };
    if code != exit::OK {
        return code;
    }
    if failed > 0 { exit::PROBLEMS } else { exit::OK }
}
