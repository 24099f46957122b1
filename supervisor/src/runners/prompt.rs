//! The spawn prompt (`<session>/runs/<task>/prompt.md`): everything an agent
//! needs to work on one task without a human briefing it.
//!
//! Assembled from the team directory (the agent's charter, the decisions
//! and directives in scope for it, its recent history), its skills
//! (`<available_skills>` and the MCP table), the task's plan, and how to
//! report. The team files come from the one team reader,
//! [`squad_protocol::team::read_team`].

use squad_protocol::model::TaskAssignment;
use squad_protocol::team::{Texts, markdown::strip_import_banner, read_team_with};
use squad_protocol::teamdir;
use std::fmt::Write as _;
use std::path::Path;

/// History entries (`## `/`### ` headed sections) kept, newest last.
const HISTORY_ENTRIES: usize = 5;
/// Decisions kept in scope, newest last.
const DECISIONS_KEPT: usize = 20;

/// The facts of one run a prompt is built from.
#[derive(Debug, Clone)]
pub(crate) struct PromptInput<'a> {
    /// Project root.
    pub root: &'a Path,
    /// Session directory name.
    pub session: &'a str,
    /// The task's plan.
    pub plan: &'a TaskAssignment,
    /// The model config.json gives the agent (`None`: the CLI's own).
    pub model: Option<&'a str>,
    /// MCP servers of config.json: (name, type, tools).
    pub mcp: Vec<(String, String, Vec<String>)>,
    /// `squadctl review changes`: what the lead asks to change in the
    /// work of the run before (docs/review.md).
    pub review: Option<&'a str>,
}

/// Splits markdown into entries at `##`/`###` headings (text before the
/// first heading is dropped).
fn entries(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        let heading = !fence && (line.starts_with("## ") || line.starts_with("### "));
        if heading {
            out.push(String::new());
        }
        if let Some(last) = out.last_mut() {
            last.push_str(line);
            last.push('\n');
        }
    }
    out.into_iter().map(|e| e.trim_end().to_string()).collect()
}

/// Whether a decision entry applies to `agent`: team-wide unless it names
/// a scope (`agent:<name>`, `skill:…`, `project`) other than this agent's.
fn in_scope(entry: &str, agent: &str) -> bool {
    let lower = entry.to_ascii_lowercase();
    match lower.find("agent:") {
        Some(i) => {
            let rest = &lower[i + "agent:".len()..];
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            name == agent
        }
        None => true,
    }
}

/// The prompt text.
pub(crate) fn render(input: &PromptInput<'_>) -> String {
    let plan = input.plan;
    let agent = plan.meta.agent.as_str();
    let task = plan.meta.task_id.as_str();
    // Decisions and this agent's history; the other agents' only probed.
    let team = teamdir::locate(input.root).map(|t| read_team_with(&t, Texts::Agent(agent)));
    let own = team.as_ref().and_then(|t| t.agents.get(agent));
    let mut out = String::new();
    let _ = writeln!(out, "# {agent}: {task}\n");
    let model = input.model.map_or_else(
        || "your CLI's default model".to_string(),
        |m| format!("model `{m}`"),
    );
    let _ = writeln!(
        out,
        "You are `{agent}`, an agent of this project's squad, started by squadd to work on task `{task}` of session `{}` ({model}). Work on this task only, inside its boundaries, and report as described at the end.\n",
        input.session
    );

    let charter = own.and_then(|a| a.charter.as_deref());
    out.push_str("## Your charter\n\n");
    match charter {
        Some(c) if !c.trim().is_empty() => {
            out.push_str(c.trim());
            out.push_str("\n\n");
        }
        _ => out.push_str("(no charter: `.squad/agents/<name>/charter.md` does not exist)\n\n"),
    }

    let (skills, _) = crate::skills::agent_prompt(input.root, agent);
    if !skills.available_skills.is_empty() {
        out.push_str("## Skills\n\n");
        out.push_str(skills.available_skills.trim_end());
        out.push_str("\n\n");
    }
    if !skills.mcp_table.is_empty() {
        out.push_str(skills.mcp_table.trim_end());
        out.push_str("\n\n");
    }
    if !input.mcp.is_empty() {
        out.push_str("## MCP servers (config.json)\n\n| server | type | tools |\n|---|---|---|\n");
        for (name, kind, tools) in &input.mcp {
            let _ = writeln!(out, "| {name} | {kind} | {} |", tools.join(", "));
        }
        out.push('\n');
    }

    if let Some(t) = &team {
        let decisions: Vec<String> = t
            .decisions
            .as_deref()
            .map(entries)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| in_scope(e, agent))
            .collect();
        if !decisions.is_empty() {
            out.push_str("## Decisions and directives in force\n\n");
            let skip = decisions.len().saturating_sub(DECISIONS_KEPT);
            for d in &decisions[skip..] {
                // One level down: they sit under this section's heading.
                let _ = writeln!(out, "#{d}\n");
            }
        }
        // An imported history's origin banner is for the humans reading it.
        let history = own
            .and_then(|a| a.history.as_deref())
            .map(|h| entries(strip_import_banner(h)))
            .unwrap_or_default();
        if !history.is_empty() {
            out.push_str("## Your recent history\n\n");
            let skip = history.len().saturating_sub(HISTORY_ENTRIES);
            for h in &history[skip..] {
                let _ = writeln!(out, "#{h}\n");
            }
        }
    }

    if let Some(comment) = input.review {
        out.push_str("## Changes asked in review\n\n");
        let _ = writeln!(
            out,
            "You worked on this task before: your work is committed on branch `squad/{task}`, in the worktree you start in. The lead reviewed it and asks for these changes before it is merged:\n\n{}\n\nMake them on top of your earlier work, then report `completed` again (the lead reviews it again).\n",
            comment.trim()
        );
    }

    out.push_str("## The task\n\n");
    let _ = writeln!(
        out,
        "- task: `{task}` (priority {})",
        plan.meta.priority.as_str()
    );
    if let Some(t) = plan.meta.timeout {
        let _ = writeln!(out, "- time limit: {t} s");
    }
    if !plan.requires().is_empty() {
        let _ = writeln!(
            out,
            "- completed before you started: {}",
            plan.requires().join(", ")
        );
    }
    let _ = writeln!(out, "\n### Instruction\n\n{}\n", plan.instruction.trim());
    out.push_str("### Boundaries\n\n");
    if plan.allowed().is_empty() {
        out.push_str("- you may change: nothing (no `allowed` globs)\n");
    } else {
        let _ = writeln!(out, "- you may change: {}", code_list(plan.allowed()));
    }
    if !plan.forbidden().is_empty() {
        let _ = writeln!(
            out,
            "- you must not change: {}",
            code_list(plan.forbidden())
        );
    }
    out.push('\n');
    if let Some(outputs) = plan.outputs.as_ref().filter(|o| !o.is_empty()) {
        out.push_str("### Outputs\n\n");
        for (k, v) in outputs {
            let _ = writeln!(out, "- {k}: `{v}`");
        }
        out.push('\n');
    }
    if let Some(criteria) = plan.success_criteria.as_ref().filter(|c| !c.is_empty()) {
        out.push_str("### Success criteria\n\n");
        for c in criteria {
            let _ = writeln!(out, "- {c}");
        }
        out.push('\n');
    }

    out.push_str("## How to report\n\n");
    let _ = writeln!(
        out,
        "Your environment has SQUAD_AGENT={agent}, SQUAD_TASK={task} and SQUAD_SESSION={}, so these commands need no flags (the `squad-protocol` skill has the details):\n",
        input.session
    );
    out.push_str(
        "- `squadctl progress --status in_progress --percent 10 --action \"what you are doing\"` when you start, and as you go\n\
         - `squadctl lock acquire <path>` before editing a shared file, `squadctl lock release <path>` after\n\
         - `squadctl inbox next` to read messages sent to you; `squadctl send --to <agent> --priority medium --type question --subject … --message …` to ask\n\
         - `squadctl report-error --severity error --type <kind> --message \"…\"` when something is wrong\n\
         - `squadctl progress --status blocked --blocker \"…\"` when you cannot go on\n\
         - `squadctl progress --status completed --percent 100 --artifact <path>` when every success criterion holds; then exit\n\n\
         Exiting without reporting `completed` counts as a failed run: squadd tells the lead and retries.\n",
    );
    out
}

fn code_list(v: &[String]) -> String {
    v.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use squad_protocol::model::Document;

    /// The spawn prompt of the fixture team (tests/fixtures/runners-team),
    /// against `expected-prompt.md` there. `UPDATE_SNAPSHOTS=1` rewrites it.
    #[test]
    fn the_fixture_teams_prompt_matches_the_snapshot() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/runners-team");
        let root = std::fs::canonicalize(root).unwrap();
        let plan_path = root.join("role-plan-backend-task_042.md");
        let text = std::fs::read_to_string(&plan_path).unwrap();
        let report =
            squad_protocol::check_text(&plan_path, squad_protocol::FileKind::TaskAssignment, &text);
        let Some(Document::TaskAssignment(plan)) = report.document else {
            panic!("{:?}", report.diagnostics);
        };
        let (config, diags) = squad_protocol::config::parse(
            &root.join(".squad/config.json"),
            &std::fs::read_to_string(root.join(".squad/config.json")).unwrap(),
        );
        assert!(diags.is_empty(), "{diags:?}");
        let prompt = render(&PromptInput {
            root: &root,
            session: "20260115T103000Z-search",
            plan: &plan,
            model: config.model_for("backend"),
            mcp: config
                .mcp
                .iter()
                .map(|(n, s)| (n.clone(), s.kind.clone(), s.tools.clone()))
                .collect(),
            review: None,
        })
        .replace(&root.display().to_string(), "<root>");
        let snapshot = root.join("expected-prompt.md");
        if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&snapshot, &prompt).unwrap();
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        assert_eq!(prompt, expected, "UPDATE_SNAPSHOTS=1 rewrites the snapshot");
        // What the issue asks of it, independently of the snapshot.
        assert!(prompt.contains("Owns the HTTP API"));
        assert!(prompt.contains("api-conventions"));
        assert!(prompt.contains("| github | local | issues, pulls |"));
        assert!(prompt.contains("Errors are JSON"));
        assert!(prompt.contains("Backend logs with tracing"));
        assert!(!prompt.contains("Frontend uses React"), "out of scope");
        assert!(prompt.contains("Pagination"));
        assert!(prompt.contains("GET /users/search"));
        assert!(prompt.contains("`src/frontend/**`"));
        assert!(prompt.contains("handler: `src/api/search.rs`"));
        assert!(prompt.contains("cargo test -p api passes"));
        assert!(prompt.contains("squadctl progress --status completed"));
    }
}
