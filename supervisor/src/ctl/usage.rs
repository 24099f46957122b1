//! `squadctl usage`: tokens and cost of the agent runs, per task, agent
//! and session, as a table, CSV or JSON (docs/runners.md, "Tokens and
//! cost"). Read from the run records (run.json), so it works with squadd
//! down; `status` and `top` show the sessions' totals from the same sums.

use crate::runners::RunRecord;
use serde_json::{Value, json};
use squad_policies::usage::{Usage, sum};
use std::collections::BTreeMap;
use std::path::Path;

/// Tokens and cost of the agent runs: per task (over its runs), and summed
/// per agent and per session.
///
/// A task's figures are what its runs' output reported (docs/runners.md
/// lists what each agent CLI reports); the cost comes from config.json's
/// `prices`, else the CLI's own estimate, and is `?` (JSON null) when a
/// model has neither. `--csv` prints one row per task, `--json` everything.
#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// CSV, one row per task: session, task, agent, runs, state, model,
    /// input_tokens, cached_tokens, output_tokens, cost_usd.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// JSON: `tasks`, `agents`, `sessions`.
    #[arg(long)]
    pub json: bool,
}

/// Each key's sum of its records' task usage (`None` when no run of it
/// reported any).
pub(crate) fn totals<'a, K: Ord>(
    runs: impl IntoIterator<Item = &'a RunRecord>,
    key: impl Fn(&RunRecord) -> K,
) -> BTreeMap<K, Usage> {
    let mut parts: BTreeMap<K, Vec<Usage>> = BTreeMap::new();
    for r in runs {
        if let Some(u) = r.task_usage() {
            parts.entry(key(r)).or_default().push(u);
        }
    }
    parts
        .into_iter()
        .filter_map(|(k, v)| Some((k, sum(&v)?)))
        .collect()
}

/// `$0.0012`, or `?` when the cost is unknown.
pub(crate) fn cost(u: &Usage) -> String {
    u.cost_usd.map_or_else(|| "?".into(), |c| c.to_string())
}

/// The sessions' totals as JSON (`status --json`'s `usage`).
pub(crate) fn sessions_json(runs: &[RunRecord]) -> Value {
    json!(totals(runs, |r| r.session.clone()))
}

/// One line per session with usage (`status`, `top`).
pub(crate) fn sessions_human(runs: &[RunRecord]) -> String {
    totals(runs, |r| r.session.clone())
        .iter()
        .map(|(s, u)| {
            format!(
                "{}: {} tokens ({}), cost {}\n",
                crate::text::escape(s),
                u.total_tokens(),
                u.summary(),
                cost(u)
            )
        })
        .collect()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Runs `squadctl usage`.
pub(crate) fn run(root_arg: Option<&Path>, args: UsageArgs) -> u8 {
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let runs: Vec<RunRecord> = crate::runners::all_records(&root)
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| args.session.as_deref().is_none_or(|s| s == r.session))
        .collect();
    if let Some(s) = &args.session
        && runs.is_empty()
        && !root.join(".squad/sessions").join(s).is_dir()
    {
        return super::fail(format!("no session named `{s}`"));
    }
    let tasks: Vec<(&RunRecord, Option<Usage>)> =
        runs.iter().map(|r| (r, r.task_usage())).collect();
    if args.csv {
        let mut out = String::from(
            "session,task,agent,runs,state,model,input_tokens,cached_tokens,output_tokens,cost_usd\n",
        );
        for (r, u) in &tasks {
            let u = u.clone().unwrap_or_default();
            let model = u
                .model
                .clone()
                .or_else(|| r.model.clone())
                .unwrap_or_default();
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&r.session),
                csv_field(&r.task),
                csv_field(&r.agent),
                r.attempt,
                r.state.as_str(),
                csv_field(&model),
                u.input_tokens,
                u.cached_tokens,
                u.output_tokens,
                u.cost_usd
                    .map_or_else(String::new, |c| format!("{:.6}", c.dollars())),
            ));
        }
        return super::print(&out);
    }
    let by_agent = totals(&runs, |r| r.agent.clone());
    let by_session = totals(&runs, |r| r.session.clone());
    if args.json {
        let tasks: Vec<Value> = tasks
            .iter()
            .map(|(r, u)| {
                json!({
                    "session": r.session,
                    "task": r.task,
                    "agent": r.agent,
                    "runs": r.attempt,
                    "state": r.state.as_str(),
                    "usage": u,
                })
            })
            .collect();
        let v = json!({"tasks": tasks, "agents": by_agent, "sessions": by_session});
        return super::print(&format!("{v:#}\n"));
    }
    let mut out = String::new();
    for (r, u) in &tasks {
        let Some(u) = u else { continue };
        out.push_str(&format!(
            "{} {} ({}) {}: {}\n",
            crate::text::escape(&r.session),
            crate::text::escape(&r.task),
            crate::text::escape(&r.agent),
            u.model.as_deref().map_or("", |m| m),
            u.summary()
        ));
    }
    if out.is_empty() {
        return super::print(
            "no run reported tokens (docs/runners.md lists what each agent CLI reports)\n",
        );
    }
    out.push_str("by agent:\n");
    for (a, u) in &by_agent {
        out.push_str(&format!("  {}: {}\n", crate::text::escape(a), u.summary()));
    }
    out.push_str("by session:\n");
    for (s, u) in &by_session {
        out.push_str(&format!("  {}: {}\n", crate::text::escape(s), u.summary()));
    }
    super::print(&out)
}
