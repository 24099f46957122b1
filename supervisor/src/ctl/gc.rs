//! `squadctl gc`: retention, now, with the plan shown first.

use crate::exit;
use crate::locks::audit;
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
/// Exit status: 0 done (or planned), 1 some action failed, 2 usage or I/O.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Show the plan; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Plan as of this time (RFC 3339), instead of now.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,

    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn age(secs: u64) -> String {
    format_duration(Duration::from_secs(secs))
}

/// Renders a plan for people.
pub fn render_plan(plan: &Plan, dry_run: bool) -> String {
    let mut out = String::new();
    for a in &plan.actions {
        let verb = match (a.verb, dry_run) {
            (Verb::Archive, true) => "would archive",
            (Verb::Delete, true) => "would delete",
            (Verb::Archive, false) => "archive",
            (Verb::Delete, false) => "delete",
        };
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
    let archive = plan
        .actions
        .iter()
        .filter(|a| a.verb == Verb::Archive)
        .count();
    out.push_str(&format!(
        "{archive} to archive, {} to delete, {} skipped\n",
        plan.actions.len() - archive,
        plan.skips.len()
    ));
    out
}

/// Runs `squadctl gc`.
pub fn run(root_arg: Option<&Path>, args: Args) -> u8 {
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
    let facts = match crate::retention::gather(&root, now, &BTreeSet::new()) {
        Ok(f) => f,
        Err(e) => return super::fail(format!("{}: {e}", root.display())),
    };
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
    let results = crate::retention::execute(&root, &plan, now);
    let mut failed = 0;
    for (session, path, kind) in &results {
        if matches!(kind, crate::events::EventKind::RetentionFailed { .. }) {
            failed += 1;
        }
        audit(&root, Some(session), Some(path), kind.clone());
    }
    let code = if args.json {
        let done: Vec<serde_json::Value> = results
            .iter()
            .map(|(s, _, k)| json!({"session": s, "event": k}))
            .collect();
        super::print(&format!(
            "{:#}\n",
            json!({"dry_run": false, "now": now, "plan": plan, "results": done})
        ))
    } else {
        let mut text = render_plan(&plan, false);
        for (s, _, k) in &results {
            if let crate::events::EventKind::RetentionFailed { error } = k {
                text.push_str(&format!("FAILED {s}: {error}\n"));
            }
        }
        super::print_human(&text)
    };
    if code != exit::OK {
        return code;
    }
    if failed > 0 { exit::PROBLEMS } else { exit::OK }
}
