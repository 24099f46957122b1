//! Readers an agent needs: `squadctl next`, `task list`, `task show`,
//! `session list` and `graph`. Straight from the files, through the same
//! derivation as the daemon (`derive_session`), so answers match `status`.

use super::target::{self, Defines};
use crate::derive::{SessionView, TaskView, derive_session};
use crate::index::SessionIndex;
use chrono::Utc;
use serde_json::{Value, json};
use squad_protocol::model::{SessionState, TaskAssignment, TaskStatus};
use squad_protocol::tree::session_dirs;
use std::path::Path;

/// Arguments of `task list`.
#[derive(Debug, clap::Args)]
pub struct TaskListArgs {
    /// The session (default: the one active session).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Only this agent's tasks.
    #[arg(long, value_name = "A")]
    pub agent: Option<String>,
    /// Only tasks in this state: pending, ready, in_progress, completed,
    /// blocked, overdue; or whose run is held or failed (held, failed).
    #[arg(long, value_name = "S")]
    pub status: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `task show`.
#[derive(Debug, clap::Args)]
pub struct TaskShowArgs {
    /// The task id.
    #[arg(value_name = "T")]
    pub task: String,
    /// The session (default: the one active session that plans the task).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// What to do next: your ready and in-progress tasks (instruction,
/// boundaries, outputs) and your unread messages by priority, in one answer.
///
/// Exit 0 when there is something, 1 when there is nothing to do (after
/// `--wait`, which returns as soon as work or a message arrives).
#[derive(Debug, clap::Args)]
pub struct NextArgs {
    /// The agent.
    #[arg(long, env = "SQUAD_AGENT", value_name = "A")]
    pub agent: String,
    /// The session (default: every active session that plans work for the agent).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Wait up to DURATION (e.g. `10m`) for work or a message to arrive.
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `session list`.
#[derive(Debug, clap::Args)]
pub struct SessionListArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Graph formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// Mermaid flowchart (renders on GitHub).
    Mermaid,
    /// Graphviz dot.
    Dot,
    /// A text tree: each task under the tasks it waits for (the default on
    /// a terminal).
    Text,
}

/// The task graph of a session, coloured by status; an edge whose
/// prerequisite is not completed yet is drawn dashed and labelled `waits`.
#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// The session (default: the one active session).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Output format (default: text on a terminal, mermaid otherwise, so
    /// scripts and pipes keep getting Mermaid).
    #[arg(long, value_enum)]
    pub format: Option<GraphFormat>,
}

fn derive(root: &Path, s: &SessionIndex) -> SessionView {
    let state = crate::state::State::load(root);
    let empty = Default::default();
    let starts = state.task_starts.get(&s.name).unwrap_or(&empty);
    derive_session(s, starts, Utc::now())
}

/// The state word of a derived task: `ready` for a pending task whose
/// prerequisites are met, `overdue` past its deadline.
fn state_word(t: &TaskView) -> &'static str {
    if t.overdue {
        "overdue"
    } else if t.ready {
        "ready"
    } else {
        t.state.as_str()
    }
}

fn task_json(t: &TaskView, plan: Option<&TaskAssignment>) -> Value {
    let mut v = json!({
        "task_id": t.task_id,
        "agent": t.agent,
        "priority": t.priority.as_str(),
        "state": t.state.as_str(),
        "ready": t.ready,
        "overdue": t.overdue,
        "violation": t.violation,
        "prerequisites": t.prerequisites,
        "waiting_for": t.unmet,
        "due_at": t.due_at,
        "blockers": t.blockers,
    });
    if let Some(p) = plan {
        v["instruction"] = json!(p.instruction);
        v["allowed"] = json!(p.allowed());
        v["forbidden"] = json!(p.forbidden());
        v["outputs"] = json!(p.outputs.clone().unwrap_or_default());
        v["success_criteria"] = json!(p.success_criteria.clone().unwrap_or_default());
    }
    v
}

fn plan_text(out: &mut String, p: &TaskAssignment) {
    out.push_str("  instruction:\n");
    for l in p.instruction.trim_end().lines() {
        out.push_str(&format!("    {l}\n"));
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    out.push_str(&format!("  may change: {}\n", list(p.allowed())));
    if !p.forbidden().is_empty() {
        out.push_str(&format!("  must not change: {}\n", list(p.forbidden())));
    }
    for (k, v) in p.outputs.iter().flatten() {
        out.push_str(&format!("  output {k}: {v}\n"));
    }
    for c in p.success_criteria.iter().flatten() {
        out.push_str(&format!("  done when: {c}\n"));
    }
}

fn root_of(root_arg: Option<&Path>) -> Result<std::path::PathBuf, u8> {
    crate::root::resolve(root_arg)
        .map(|r| crate::root::fs_path(&r).to_path_buf())
        .map_err(super::fail)
}

/// Runs `squadctl next`.
pub(crate) fn next(root_arg: Option<&Path>, args: NextArgs) -> u8 {
    let root = match root_of(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    if !squad_protocol::IdKind::Agent.matches(&args.agent) {
        return super::fail(format!(
            "--agent `{}` is not a valid agent name",
            crate::text::escape(&args.agent)
        ));
    }
    let wait = match args
        .wait
        .as_deref()
        .map(squad_policies::duration::parse_duration)
    {
        Some(Ok(d)) => d,
        Some(Err(e)) => return super::fail(format!("--wait: {e}")),
        None => std::time::Duration::ZERO,
    };
    let deadline = std::time::Instant::now().checked_add(wait);
    let mut waiter = (!wait.is_zero()).then(|| super::wait::Waiter::new(Vec::new()));
    loop {
        // Watch first, then look: a change in between wakes the wait.
        if let Some(w) = &mut waiter {
            let mut dirs = vec![squad_protocol::tree::sessions_dir(&root)];
            for dir in session_dirs(&root).unwrap_or_default() {
                let inbox = crate::inbox::inbox_dir(&dir, &args.agent);
                dirs.extend([dir.clone(), dir.join("inbox"), inbox.join("new"), inbox]);
            }
            w.add(dirs);
        }
        match next_once(&root, &args) {
            Err(code) => return code,
            Ok(Some(code)) => return code,
            Ok(None) => {}
        }
        let now = std::time::Instant::now();
        let Some(w) = &waiter else { break };
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        // A rare look without a change, as a safety net.
        w.wait(
            deadline
                .map_or(std::time::Duration::MAX, |d| d - now)
                .min(std::time::Duration::from_secs(30)),
        );
        // A cancelled call (its MCP client gave up) waits no more.
        if super::wait::cancelled() {
            break;
        }
    }
    let code = if args.json {
        super::print(&format!(
            "{:#}\n",
            json!({"agent": args.agent, "tasks": [], "messages": []})
        ))
    } else {
        super::print_human(&format!(
            "nothing for {} yet: no ready or started task, no unread message\n",
            args.agent
        ))
    };
    if code == crate::exit::OK {
        crate::exit::PROBLEMS
    } else {
        code
    }
}

/// One look: `Ok(Some(code))` after printing the agent's work, `Ok(None)`
/// when there is none, `Err(code)` on failure.
fn next_once(root: &Path, args: &NextArgs) -> Result<Option<u8>, u8> {
    let root = root.to_path_buf();
    let sessions: Vec<SessionIndex> = match &args.session {
        Some(name) => match target::resolve(&root, Some(name), Defines::Any) {
            Ok(s) => vec![s],
            Err(e) => return Err(super::fail(e)),
        },
        None => session_dirs(&root)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| super::message::session_state(d) == Some(SessionState::Active))
            .filter_map(|d| target::load_work(&d).ok())
            .collect(),
    };
    let mut tasks = Vec::new();
    let mut messages = Vec::new();
    let mut human = String::new();
    for s in &sessions {
        let view = derive(&root, s);
        for t in view.tasks.iter().filter(|t| {
            t.agent == args.agent
                && (t.ready || matches!(t.state, TaskStatus::InProgress | TaskStatus::Blocked))
        }) {
            let plan = s.full_plan(&t.task_id);
            let mut v = task_json(t, plan.as_ref());
            v["session"] = json!(s.name);
            tasks.push(v);
            human.push_str(&format!(
                "task {} ({}, {}, session {})\n",
                t.task_id,
                state_word(t),
                t.priority,
                s.name
            ));
            if let Some(p) = &plan {
                plan_text(&mut human, p);
            }
        }
        let mut unread: Vec<_> = crate::inbox::list(&s.dir, &args.agent)
            .into_iter()
            .filter(|i| i.unread)
            .collect();
        unread.sort_by(|a, b| (a.priority, &a.name).cmp(&(b.priority, &b.name)));
        for i in unread {
            human.push_str(&format!(
                "message {} ({}, session {}): {}\n",
                i.message_id,
                i.priority,
                i.session,
                i.path.display()
            ));
            messages.push(json!({
                "session": i.session,
                "message_id": i.message_id,
                "priority": i.priority.as_str(),
                "path": i.path.display().to_string(),
            }));
        }
    }
    if tasks.is_empty() && messages.is_empty() {
        return Ok(None);
    }
    Ok(Some(if args.json {
        super::print(&format!(
            "{:#}\n",
            json!({"agent": args.agent, "tasks": tasks, "messages": messages})
        ))
    } else {
        super::print_human(&human)
    }))
}

/// Runs `squadctl task list`.
pub(crate) fn task_list(root: &Path, args: TaskListArgs) -> u8 {
    let s = match target::resolve(root, args.session.as_deref(), Defines::Any) {
        Ok(s) => s,
        // No active session: the latest ended one, said (its tasks are
        // still what a lead asks about once the work is done).
        Err(e) => match (args.session.is_none(), target::latest_ended(root)) {
            (true, Some((s, state))) => {
                super::warn(format!(
                    "no active session; the tasks of session {} ({state})",
                    crate::text::escape(&s.name)
                ));
                s
            }
            _ => return super::fail(e),
        },
    };
    let view = derive(root, &s);
    // A run that needs a human (held, or failed for good) shows beside
    // its task's state: the agent's own progress cannot say so.
    let records: Vec<crate::runners::RunRecord> = crate::runners::all_records(root)
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.session == s.name)
        .collect();
    let run_word = |t: &TaskView| -> Option<(&'static str, &'static str)> {
        let r = records.iter().find(|r| r.task == t.task_id)?;
        if r.completed || r.state == crate::runners::RunState::Running {
            None
        } else if r.held {
            Some(("held", r.state.as_str()))
        } else if r.state == crate::runners::RunState::Failed {
            Some(("failed", r.state.as_str()))
        } else {
            None
        }
    };
    let merges = super::handover::merge_map(root, &s, &view);
    let state_word =
        |t: &TaskView| super::handover::word(t, merges.get(t.task_id.as_str()), state_word(t));
    let shown: Vec<&TaskView> = view
        .tasks
        .iter()
        .filter(|t| args.agent.as_ref().is_none_or(|a| &t.agent == a))
        .filter(|t| {
            args.status.is_empty()
                || args.status.iter().any(|w| {
                    w == state_word(t)
                        || w == t.state.as_str()
                        || run_word(t).is_some_and(|(r, _)| r == w)
                })
        })
        .collect();
    if args.json {
        let list: Vec<Value> = shown
            .iter()
            .map(|t| {
                let mut v = task_json(t, None);
                if let Some(w) = merges.get(t.task_id.as_str()) {
                    v["ready"] = json!(false);
                    v["waiting_for_merge"] = json!(w);
                }
                v["run"] = run_word(t).map_or(
                    Value::Null,
                    |(r, state)| json!({"needs": r, "state": state}),
                );
                v
            })
            .collect();
        return super::print(&format!(
            "{:#}\n",
            json!({"session": s.name, "tasks": list})
        ));
    }
    let mut out = String::new();
    for t in shown {
        out.push_str(&format!(
            "{:<16} {:<20} {:<11} {:<8}{}\n",
            t.task_id,
            t.agent,
            state_word(t),
            t.priority,
            match (t.unmet.is_empty(), run_word(t)) {
                (_, Some((r, state))) => format!(" run {r} ({state})"),
                (true, None) => merges
                    .get(t.task_id.as_str())
                    .map_or_else(String::new, |w| {
                        format!(" waits for the merge of {}", w.join(", "))
                    }),
                (false, None) => format!(" waits for {}", t.unmet.join(", ")),
            }
        ));
    }
    if out.is_empty() {
        out = format!("no tasks in session {}\n", s.name);
    }
    super::print_human(&out)
}

/// Runs `squadctl task show`.
pub(crate) fn task_show(root: &Path, args: TaskShowArgs) -> u8 {
    let s = match target::resolve(root, args.session.as_deref(), Defines::Task(&args.task)) {
        Ok(s) => s,
        // A task of an ended session is still shown (read-only), said.
        Err(e) => match (
            args.session.is_none(),
            target::ended_session_of(root, &args.task),
        ) {
            (true, Some((s, state))) => {
                super::warn(format!(
                    "task {} is in session {}, which is {state}",
                    crate::text::escape(&args.task),
                    crate::text::escape(&s.name)
                ));
                s
            }
            _ => return super::fail(e),
        },
    };
    let view = derive(root, &s);
    let Some(t) = view.tasks.iter().find(|t| t.task_id == args.task) else {
        return super::fail(format!(
            "task `{}` has no valid task assignment in session `{}`",
            crate::text::escape(&args.task),
            s.name
        ));
    };
    let plan = s.full_plan(&t.task_id);
    let merges = super::handover::merge_waits(root, &s, &view, t);
    let dependents: Vec<&str> = view
        .tasks
        .iter()
        .filter(|o| o.prerequisites.contains(&t.task_id))
        .map(|o| o.task_id.as_str())
        .collect();
    let progress = s
        .progress()
        .filter(|p| p.task_id == t.task_id && p.agent == t.agent)
        .max_by_key(|p| p.updated_at);
    let ttl = crate::locks::load_policy(root)
        .map(|p| p.lock_default_ttl)
        .unwrap_or(std::time::Duration::from_secs(900));
    let locks: Vec<_> =
        crate::status::session_locks(&crate::locks::load(root, ttl).unwrap_or_default(), &s.name)
            .into_iter()
            .filter(|l| l.task_id == t.task_id)
            .collect();
    // Tokens and cost over the task's runs (docs/runners.md).
    let usage = crate::runners::read_record(&crate::runners::run_dir(&s.dir, &t.task_id))
        .filter(|r| r.task == t.task_id)
        .and_then(|r| r.task_usage());
    if args.json {
        let mut v = task_json(t, plan.as_ref());
        v["session"] = json!(s.name);
        if !merges.is_empty() {
            v["ready"] = json!(false);
        }
        v["waiting_for_merge"] = json!(merges);
        v["waited_for_by"] = json!(dependents);
        v["progress"] = progress.map_or(Value::Null, |p| {
            json!({"status": p.status.as_str(), "updated_at": p.updated_at, "artifacts": p.artifacts})
        });
        v["locks"] = json!(
            locks
                .iter()
                .map(|l| json!({"targets": l.targets, "mode": l.mode, "agent": l.agent, "until": l.until}))
                .collect::<Vec<_>>()
        );
        v["usage"] = json!(usage);
        return super::print(&format!("{v:#}\n"));
    }
    let mut out = format!(
        "task {} in session {}\n  agent: {}\n  priority: {}\n  state: {}\n",
        t.task_id,
        s.name,
        t.agent,
        t.priority,
        super::handover::word(t, Some(&merges), state_word(t))
    );
    if let Some(p) = progress {
        out.push_str(&format!("  last update: {}\n", p.updated_at.to_rfc3339()));
    }
    let list = |v: &[&str]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    // Every prerequisite with its state: a met one stays listed, as
    // `task_001 (completed)`, rather than vanishing once done.
    let requires: Vec<String> = t
        .prerequisites
        .iter()
        .map(|p| {
            let state = view
                .tasks
                .iter()
                .find(|o| &o.task_id == p)
                .map_or("no task assignment", state_word);
            format!("{p} ({state})")
        })
        .collect();
    let requires: Vec<&str> = requires.iter().map(String::as_str).collect();
    out.push_str(&format!("  requires: {}\n", list(&requires)));
    out.push_str(&format!("  waited for by: {}\n", list(&dependents)));
    if !merges.is_empty() {
        // Worktree mode: the work reaches this task through the session's
        // branch, not through `completed` (docs/worktrees.md).
        out.push_str(&format!(
            "  waits for the merge of: {}\n",
            merges.join(", ")
        ));
    }
    if let Some(d) = t.due_at {
        out.push_str(&format!(
            "  due: {}{}\n",
            d.to_rfc3339(),
            if t.overdue { " (overdue)" } else { "" }
        ));
    }
    for b in &t.blockers {
        out.push_str(&format!("  blocker: {b}\n"));
    }
    if let Some(u) = &usage {
        out.push_str(&format!("  tokens: {}\n", u.summary()));
    }
    for l in &locks {
        out.push_str(&format!(
            "  lock: {} ({}) until {}\n",
            l.targets.join(", "),
            l.mode,
            l.until.to_rfc3339()
        ));
    }
    if let Some(p) = &plan {
        plan_text(&mut out, p);
    }
    super::print_human(&out)
}

/// Runs `squadctl session list`.
pub(crate) fn session_list(root_arg: Option<&Path>, args: SessionListArgs) -> u8 {
    let root = match root_of(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let now = Utc::now();
    let mut rows = Vec::new();
    for dir in session_dirs(&root).unwrap_or_default() {
        let Ok(s) = target::load_work(&dir) else {
            continue;
        };
        let view = derive(&root, &s);
        let started = s.status().map(|st| st.started_at);
        let age = started.map(|t| (now - t.with_timezone(&Utc)).num_seconds().max(0));
        rows.push((view, age));
    }
    if args.json {
        let list: Vec<Value> = rows
            .iter()
            .map(|(v, age)| {
                json!({
                    "session": v.name,
                    "session_id": v.session_id,
                    "status": v.status.as_str(),
                    "phase": v.phase.map(|p| p.as_str()),
                    "tasks_completed": v.tasks_completed,
                    "tasks_total": v.tasks_total,
                    "age_seconds": age,
                })
            })
            .collect();
        return super::print(&format!("{:#}\n", json!({"sessions": list})));
    }
    // Columns as wide as their widest cell: a long slug or a `completed`
    // status never pushes the next column out of line.
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|(v, age)| {
            [
                crate::text::escape(&v.name).into_owned(),
                v.status.to_string(),
                v.phase.map_or("-", |p| p.as_str()).to_string(),
                format!("{}/{} tasks", v.tasks_completed, v.tasks_total),
                age.map_or_else(
                    || "-".to_string(),
                    |a| format!("{} old", crate::text::human_age(a)),
                ),
            ]
        })
        .collect();
    let mut out = String::new();
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    for c in &cells {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {}\n",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        ));
    }
    if out.is_empty() {
        out = "no sessions; create one with `squadctl session new`\n".into();
    }
    super::print_human(&out)
}

/// Renders the task graph of a derived session.
pub(crate) fn render_graph(view: &SessionView, format: GraphFormat) -> String {
    let mut out = String::new();
    match format {
        GraphFormat::Mermaid => {
            out.push_str("flowchart TD\n");
            for t in &view.tasks {
                out.push_str(&format!(
                    "  {id}[\"{id}<br/>{agent}<br/>{state}\"]:::{class}\n",
                    id = t.task_id,
                    agent = t.agent,
                    state = state_word(t),
                    class = state_word(t)
                ));
            }
            for t in &view.tasks {
                for p in &t.prerequisites {
                    if t.unmet.contains(p) {
                        out.push_str(&format!("  {p} -.->|waits| {}\n", t.task_id));
                    } else {
                        out.push_str(&format!("  {p} --> {}\n", t.task_id));
                    }
                }
            }
            for (class, colour) in COLOURS {
                out.push_str(&format!("  classDef {class} fill:{colour}\n"));
            }
        }
        GraphFormat::Dot => {
            out.push_str(&format!(
                "digraph \"{}\" {{\n  node [shape=box, style=filled];\n",
                view.name
            ));
            let colour = |w: &str| {
                COLOURS
                    .iter()
                    .find(|(c, _)| *c == w)
                    .map_or("#ffffff", |(_, c)| c)
            };
            for t in &view.tasks {
                out.push_str(&format!(
                    "  \"{id}\" [label=\"{id}\\n{agent}\\n{state}\", fillcolor=\"{fill}\"];\n",
                    id = t.task_id,
                    agent = t.agent,
                    state = state_word(t),
                    fill = colour(state_word(t))
                ));
            }
            for t in &view.tasks {
                for p in &t.prerequisites {
                    let style = if t.unmet.contains(p) {
                        " [style=dashed, label=\"waits\"]"
                    } else {
                        ""
                    };
                    out.push_str(&format!("  \"{p}\" -> \"{}\"{style};\n", t.task_id));
                }
            }
            out.push_str("}\n");
        }
        GraphFormat::Text => text_tree(view, &mut out),
    }
    out
}

/// The text tree: tasks without prerequisites at the top, each task under
/// every task it waits for; a task met again is named with `(above)` and
/// not expanded twice.
fn text_tree(view: &SessionView, out: &mut String) {
    fn walk<'a>(
        view: &'a SessionView,
        t: &'a TaskView,
        prefix: &str,
        last: bool,
        top: bool,
        seen: &mut std::collections::BTreeSet<&'a str>,
        out: &mut String,
    ) {
        let (branch, more) = match (top, last) {
            (true, _) => ("", ""),
            (false, true) => ("└── ", "    "),
            (false, false) => ("├── ", "│   "),
        };
        let again = !seen.insert(t.task_id.as_str());
        out.push_str(&format!(
            "{prefix}{branch}{} ({}, {}){}\n",
            t.task_id,
            t.agent,
            state_word(t),
            if again { " (above)" } else { "" }
        ));
        if again {
            return;
        }
        let children: Vec<&TaskView> = view
            .tasks
            .iter()
            .filter(|c| c.prerequisites.contains(&t.task_id))
            .collect();
        let inner = format!("{prefix}{more}");
        for (i, c) in children.iter().enumerate() {
            walk(view, c, &inner, i + 1 == children.len(), false, seen, out);
        }
    }
    out.push_str(&format!("session {}\n", view.name));
    let mut seen = std::collections::BTreeSet::new();
    let known = |id: &String| view.tasks.iter().any(|t| &t.task_id == id);
    // A task whose prerequisites are all unknown (no plan) is a root too.
    for t in view
        .tasks
        .iter()
        .filter(|t| !t.prerequisites.iter().any(known))
    {
        walk(view, t, "", true, true, &mut seen, out);
    }
    // Tasks only in a cycle have no root: list them so none is missing.
    for t in &view.tasks {
        if !seen.contains(t.task_id.as_str()) {
            walk(view, t, "", true, true, &mut seen, out);
        }
    }
}

/// Fill colour per state word.
const COLOURS: [(&str, &str); 6] = [
    ("pending", "#eeeeee"),
    ("ready", "#bbdefb"),
    ("in_progress", "#fff59d"),
    ("completed", "#c8e6c9"),
    ("blocked", "#ffcc80"),
    ("overdue", "#ef9a9a"),
];

/// Runs `squadctl graph`.
pub(crate) fn graph(root_arg: Option<&Path>, args: GraphArgs) -> u8 {
    let root = match root_of(root_arg) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let s = match target::resolve(&root, args.session.as_deref(), Defines::Any) {
        Ok(s) => s,
        Err(e) => return super::fail(e),
    };
    let format = args.format.unwrap_or_else(|| {
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() {
            GraphFormat::Text
        } else {
            GraphFormat::Mermaid
        }
    });
    super::print(&render_graph(&derive(&root, &s), format))
}
