//! The pages, rendered on the server as HTML that reads without a script:
//! the sessions with what needs you (`/`), a session's board (`/s/S`), its
//! task graph (`/s/S/graph`) and a task (`/s/S/t/T`). What is shown is
//! gathered as `squadctl status` and `top` gather it (ctl::status,
//! crate::attention, crate::derive); every text goes through
//! [`super::html`].

use super::html;
use crate::derive::{SessionView, TaskView};
use crate::index::SessionIndex;
use crate::runners::{RunRecord, RunState};
use chrono::{DateTime, Utc};
use squad_protocol::model::TaskStatus;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The board's columns, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Column {
    Pending,
    Ready,
    Running,
    Review,
    Held,
    Done,
    Failed,
}

impl Column {
    const ALL: [Column; 7] = [
        Column::Pending,
        Column::Ready,
        Column::Running,
        Column::Review,
        Column::Held,
        Column::Done,
        Column::Failed,
    ];

    fn word(self) -> &'static str {
        match self {
            Column::Pending => "pending",
            Column::Ready => "ready",
            Column::Running => "running",
            Column::Review => "review",
            Column::Held => "held",
            Column::Done => "done",
            Column::Failed => "failed",
        }
    }
}

/// Where a task's card goes: its worktree branch waiting for review or
/// held, a held run, a run that failed, else the task's reported state
/// (ready: pending with its prerequisites met).
pub(super) fn column(t: &TaskView, run: Option<&RunRecord>, tree: Option<&str>) -> Column {
    if tree == Some("review") {
        return Column::Review;
    }
    if tree == Some("held") || run.is_some_and(|r| r.held) {
        return Column::Held;
    }
    match t.state {
        TaskStatus::Completed => Column::Done,
        TaskStatus::InProgress | TaskStatus::Blocked => Column::Running,
        TaskStatus::Pending => match run.map(|r| r.state) {
            Some(RunState::Running) => Column::Running,
            Some(RunState::Failed | RunState::TimedOut | RunState::Lost) => Column::Failed,
            _ if t.ready => Column::Ready,
            _ => Column::Pending,
        },
    }
}

/// What every page shows on top and the sessions' derived tasks.
pub(super) struct Loaded {
    daemon: String,
    up: bool,
    attention: Vec<crate::attention::Item>,
    runs: Vec<RunRecord>,
    pub(super) sessions: BTreeMap<String, SessionIndex>,
    /// squadd's persisted facts (when tasks started), read once a page.
    state: crate::state::State,
    pub(super) now: DateTime<Utc>,
}

impl Loaded {
    /// What the page of `session` (or of all) shows; `None` when there is
    /// no such session.
    pub(super) fn new(
        root: &Path,
        session: Option<&str>,
    ) -> Result<Option<Loaded>, super::WebError> {
        let now = Utc::now();
        let sessions = crate::index::scan_root(root, 1).unwrap_or_default();
        if session.is_some_and(|s| !sessions.contains_key(s)) {
            return Ok(None);
        }
        let g = super::super::status::gather(root, session, now).map_err(super::WebError::Io)?;
        let (daemon, up) = match &g.report.daemon {
            crate::status::DaemonReport::Running { pid, .. } => {
                (format!("squadd running (pid {pid}): live"), true)
            }
            crate::status::DaemonReport::Down { reason } => (
                format!(
                    "squadd is down ({reason}): read-only from the files; the page follows file changes"
                ),
                false,
            ),
        };
        Ok(Some(Loaded {
            daemon,
            up,
            attention: g.attention,
            runs: g.runs,
            sessions,
            state: crate::state::State::load(root),
            now,
        }))
    }

    fn derive(&self, s: &SessionIndex) -> SessionView {
        let empty = Default::default();
        let starts = self.state.task_starts.get(&s.name).unwrap_or(&empty);
        crate::derive::derive_session(s, starts, self.now)
    }

    fn run(&self, session: &str, task: &str) -> Option<&RunRecord> {
        self.runs
            .iter()
            .find(|r| r.session == session && r.task == task)
    }

    pub(super) fn banner(&self) -> String {
        format!(
            "<p id=\"daemon\" class=\"daemon {}\" role=\"status\">{}</p>\n",
            if self.up { "up" } else { "down" },
            html(&self.daemon)
        )
    }

    /// The needs-you items (of `session`, or all), as `status` lists them.
    fn needs_you(&self, session: Option<&str>) -> String {
        let items: Vec<_> = self
            .attention
            .iter()
            .filter(|i| session.is_none() || i.session.as_deref() == session)
            .collect();
        if items.is_empty() {
            return "<section class=\"needs\" aria-labelledby=\"needs-h\"><h2 id=\"needs-h\">Needs you</h2><p>Nothing needs you.</p></section>\n".into();
        }
        let mut out = String::from(
            "<section class=\"needs\" aria-labelledby=\"needs-h\"><h2 id=\"needs-h\">Needs you</h2><ul>\n",
        );
        for i in items {
            let what = match (&i.session, &i.task) {
                (Some(s), Some(t)) => {
                    format!("<a href=\"{}\">{}</a>", task_href(s, t), html(&i.summary))
                }
                _ => html(&i.summary),
            };
            let _ = writeln!(
                out,
                "<li class=\"sev-{}\"><span class=\"sev\">{}</span> {what} <code>{}</code></li>",
                html(&i.severity),
                html(&i.severity),
                html(&i.command)
            );
        }
        out.push_str("</ul></section>\n");
        out
    }
}

fn task_href(session: &str, task: &str) -> String {
    format!("/s/{}/t/{}", html(session), html(task))
}

/// The whole document around `main`.
pub(super) fn page(title: &str, crumbs: &[(String, String)], main: &str) -> String {
    let mut nav = String::from("<a href=\"/\">squad</a>");
    for (href, text) in crumbs {
        let _ = write!(nav, " › <a href=\"{href}\">{}</a>", html(text));
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>{} · squad</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <script src=\"/assets/live.js\" defer></script></head>\n\
         <body><header><nav aria-label=\"breadcrumbs\">{nav}</nav></header>\n<main id=\"main\">\n{main}</main></body></html>\n",
        html(title)
    )
}

/// A page that is not there.
pub(super) fn not_found(what: &str) -> String {
    page(
        "not found",
        &[],
        &format!("<h1>Not found</h1><p>{}</p>\n", html(what)),
    )
}

/// The review gate's three actions on a branch waiting for review
/// (docs/review.md): plain forms POSTing to `/s/S/t/T/do/ACTION`, which
/// work without JS; `changes` needs a comment, `reject` takes one.
fn review_forms(session: &str, task: &str) -> String {
    let to = |action: &str| format!("/s/{}/t/{}/do/{action}", html(session), html(task));
    format!(
        "<section class=\"review\" aria-labelledby=\"review-h\"><h2 id=\"review-h\">Review</h2>\n\
         <p>The branch <code>squad/{t}</code> waits for your review before it is merged (its diff and each file's verdict are below, under Changes).</p>\n\
         <form method=\"post\" action=\"{approve}\" id=\"review-approve\"><button type=\"submit\">Approve: merge it (judged again)</button></form>\n\
         <form method=\"post\" action=\"{changes}\" id=\"review-changes\"><label>What to change (sent to the agent, a new run starts on the same branch) <textarea name=\"comment\" required rows=\"3\"></textarea></label> <button type=\"submit\">Request changes</button></form>\n\
         <form method=\"post\" action=\"{reject}\" id=\"review-reject\"><label>Why (optional) <input type=\"text\" name=\"comment\"></label> <button type=\"submit\">Reject: the task fails, the branch is kept</button></form>\n\
         </section>\n",
        t = html(task),
        approve = to("approve"),
        changes = to("changes"),
        reject = to("reject"),
    )
}

/// The page of a review action that was not carried out, and why.
pub(super) fn action_failed(session: &str, task: &str, action: &str, why: &str) -> String {
    let back = format!("/s/{}/t/{}", html(session), html(task));
    page(
        "not done",
        &[
            (format!("/s/{}", html(session)), session.to_string()),
            (back.clone(), task.to_string()),
        ],
        &format!(
            "<h1>Not done</h1><p id=\"why\">{} of {} was not carried out: {}</p>\n<p><a href=\"{back}\">Back to {}</a></p>\n",
            html(action),
            html(task),
            html(why),
            html(task)
        ),
    )
}

/// `/`: what needs you, then every session with its progress.
pub(super) fn index(root: &Path) -> Result<String, super::WebError> {
    let Some(l) = Loaded::new(root, None)? else {
        return Err(super::WebError::Io("cannot read the project".into()));
    };
    let mut main = l.banner();
    main.push_str(&l.needs_you(None));
    main.push_str("<section aria-labelledby=\"sessions-h\"><h2 id=\"sessions-h\">Sessions</h2><ul class=\"sessions\">\n");
    for s in l.sessions.values() {
        let v = l.derive(s);
        let _ = writeln!(
            main,
            "<li><a href=\"/s/{n}\">{n}</a> <span class=\"state\">{}</span> {}/{} done · <a href=\"/s/{n}/graph\">graph</a></li>",
            v.status.as_str(),
            v.tasks_completed,
            v.tasks_total,
            n = html(&s.name)
        );
    }
    main.push_str("</ul></section>\n");
    Ok(page("sessions", &[], &main))
}

/// `/s/SESSION`: the board, or `None` when there is no such session.
pub(super) fn board(root: &Path, session: &str) -> Result<Option<String>, super::WebError> {
    let Some(l) = Loaded::new(root, Some(session))? else {
        return Ok(None);
    };
    let Some(s) = l.sessions.get(session) else {
        return Ok(None);
    };
    let v = l.derive(s);
    let mut main = l.banner();
    let _ = writeln!(
        main,
        "<h1>{} <small>{} · {}/{} done · <a href=\"/s/{n}/graph\">graph</a> · <a href=\"/s/{n}/messages\">messages</a></small></h1>",
        html(session),
        v.status.as_str(),
        v.tasks_completed,
        v.tasks_total,
        n = html(session)
    );
    main.push_str(&l.needs_you(Some(session)));
    let mut cols: BTreeMap<Column, Vec<String>> = BTreeMap::new();
    for t in &v.tasks {
        let run = l.run(session, &t.task_id);
        let tree = tree_state(&s.dir, &t.task_id);
        let c = column(t, run, tree.as_deref());
        cols.entry(c)
            .or_default()
            .push(card(session, t, c, run, l.now));
    }
    main.push_str("<div class=\"board\">\n");
    for c in Column::ALL {
        let cards = cols.remove(&c).unwrap_or_default();
        let _ = writeln!(
            main,
            "<section class=\"col\" data-column=\"{w}\" aria-labelledby=\"col-{w}\"><h2 id=\"col-{w}\">{w} <span class=\"count\">{}</span></h2><ol>",
            cards.len(),
            w = c.word()
        );
        for card in cards {
            main.push_str(&card);
        }
        main.push_str("</ol></section>\n");
    }
    main.push_str("</div>\n");
    Ok(Some(page(
        session,
        &[(format!("/s/{}", html(session)), session.to_string())],
        &main,
    )))
}

/// A task's worktree branch state word (`active`, `held`, `review`…), when
/// it ran in a worktree of its own.
fn tree_state(session_dir: &Path, task: &str) -> Option<String> {
    let tree = crate::worktree::load(&crate::runners::run_dir(session_dir, task))?;
    serde_json::to_value(tree.state)
        .ok()?
        .as_str()
        .map(str::to_string)
}

fn age(now: DateTime<Utc>, t: DateTime<Utc>) -> String {
    let s = (now - t).num_seconds().max(0);
    if s < 120 {
        format!("{s}s")
    } else if s < 7200 {
        format!("{}m", s / 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

fn card(
    session: &str,
    t: &TaskView,
    c: Column,
    run: Option<&RunRecord>,
    now: DateTime<Utc>,
) -> String {
    let mut facts = vec![
        format!("<span class=\"agent\">{}</span>", html(&t.agent)),
        format!(
            "<span class=\"prio prio-{p}\">{p}</span>",
            p = t.priority.as_str()
        ),
        format!(
            "<span class=\"word\">{}</span>",
            super::graph::state_word(t)
        ),
    ];
    if let Some(d) = t.due_at {
        facts.push(format!(
            "<span class=\"due{}\">due {}</span>",
            if t.overdue { " overdue" } else { "" },
            d.format("%Y-%m-%d %H:%M UTC")
        ));
    }
    if let Some(r) = run.filter(|r| r.state == RunState::Running) {
        facts.push(format!(
            "<span class=\"run\">run up {}</span>",
            age(now, r.started_at)
        ));
    } else if let Some(r) = run {
        facts.push(format!(
            "<span class=\"run\">run {}{}</span>",
            r.state.as_str(),
            if r.held { ", held" } else { "" }
        ));
    }
    if !t.unmet.is_empty() {
        facts.push(format!(
            "<span class=\"waits\">waits for {}</span>",
            html(&t.unmet.join(", "))
        ));
    }
    for b in &t.blockers {
        facts.push(format!(
            "<span class=\"blocker\">blocked: {}</span>",
            html(b)
        ));
    }
    format!(
        "<li class=\"card\" id=\"card-{id}\" data-task=\"{id}\" data-column=\"{c}\"><a href=\"{href}\">{id}</a> {}</li>\n",
        facts.join(" "),
        id = html(&t.task_id),
        c = c.word(),
        href = task_href(session, &t.task_id),
    )
}

/// `/s/SESSION/graph`: the graph page; with `raw`, the SVG alone.
pub(super) fn graph(
    root: &Path,
    session: &str,
    raw: bool,
) -> Result<Option<String>, super::WebError> {
    let Some(l) = Loaded::new(root, Some(session))? else {
        return Ok(None);
    };
    let Some(s) = l.sessions.get(session) else {
        return Ok(None);
    };
    let v = l.derive(s);
    let svg = super::graph::svg(&v, session);
    if raw {
        return Ok(Some(svg));
    }
    let mut main = l.banner();
    let _ = writeln!(
        main,
        "<h1>{} <small>task graph · <a href=\"/s/{n}\">board</a> · <a href=\"/s/{n}/graph.svg\">SVG</a></small></h1>",
        html(session),
        n = html(session)
    );
    main.push_str("<p class=\"legend\">Arrows point from a task to the tasks waiting for it; <span class=\"blocked\">dashed</span>: still waited for (blocked); <span class=\"critical\">red</span>: the critical path (the longest chain of tasks not completed).</p>\n<figure class=\"graph\">");
    main.push_str(&svg);
    main.push_str("</figure>\n");
    Ok(Some(page(
        &format!("{session} graph"),
        &[
            (format!("/s/{}", html(session)), session.to_string()),
            (format!("/s/{}/graph", html(session)), "graph".into()),
        ],
        &main,
    )))
}

/// The most lines of a run's log a task page shows (run.log itself is
/// capped by squadd).
const LOG_LINES: usize = 200;

/// `/s/SESSION/t/TASK`: the task, or `None` when there is no such task.
pub(super) fn task(
    root: &Path,
    session: &str,
    task: &str,
) -> Result<Option<String>, super::WebError> {
    let Some(l) = Loaded::new(root, Some(session))? else {
        return Ok(None);
    };
    let Some(s) = l.sessions.get(session) else {
        return Ok(None);
    };
    let v = l.derive(s);
    let Some(t) = v.tasks.iter().find(|t| t.task_id == task) else {
        return Ok(None);
    };
    let run = l.run(session, task);
    let tree_word = tree_state(&s.dir, task);
    let c = column(t, run, tree_word.as_deref());
    let mut main = l.banner();
    let _ = writeln!(
        main,
        "<h1>{} <small>{} · {} · <span class=\"word\" id=\"column\" data-column=\"{c}\">{c}</span></small></h1>",
        html(task),
        html(&t.agent),
        t.priority.as_str(),
        c = c.word()
    );
    main.push_str(&l.needs_you(Some(session)).replace(
        "<section class=\"needs\"",
        "<section class=\"needs compact\"",
    ));
    if tree_word.as_deref() == Some("review") {
        main.push_str(&review_forms(session, task));
    }
    // The plan.
    main.push_str("<section aria-labelledby=\"plan-h\"><h2 id=\"plan-h\">Plan</h2>\n");
    let links = |ids: &[String]| -> String {
        if ids.is_empty() {
            return "-".into();
        }
        ids.iter()
            .map(|p| {
                let state = v
                    .tasks
                    .iter()
                    .find(|o| &o.task_id == p)
                    .map_or("no plan", super::graph::state_word);
                format!(
                    "<a href=\"{}\">{}</a> ({state})",
                    task_href(session, p),
                    html(p)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let dependents: Vec<String> = v
        .tasks
        .iter()
        .filter(|o| o.prerequisites.contains(&t.task_id))
        .map(|o| o.task_id.clone())
        .collect();
    let _ = writeln!(
        main,
        "<dl><dt>requires</dt><dd>{}</dd><dt>waited for by</dt><dd>{}</dd>",
        links(&t.prerequisites),
        links(&dependents)
    );
    if let Some(d) = t.due_at {
        let _ = writeln!(
            main,
            "<dt>due</dt><dd>{}{}</dd>",
            d.to_rfc3339(),
            if t.overdue { " (overdue)" } else { "" }
        );
    }
    if let Some(p) = s.full_plan(task) {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter()
                    .map(|g| format!("<code>{}</code>", html(g)))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        let _ = writeln!(
            main,
            "<dt>may change</dt><dd>{}</dd><dt>must not change</dt><dd>{}</dd></dl>\n<h3>Instruction</h3><pre class=\"instruction\">{}</pre>",
            list(p.allowed()),
            list(p.forbidden()),
            html(p.instruction.trim_end())
        );
    } else {
        main.push_str("</dl><p>The plan file cannot be read as a task assignment.</p>\n");
    }
    main.push_str("</section>\n");
    // Progress updates, newest first.
    let mut updates: Vec<_> = s.progress().filter(|p| p.task_id == task).collect();
    updates.sort_by_key(|p| std::cmp::Reverse(p.updated_at));
    main.push_str("<section aria-labelledby=\"progress-h\"><h2 id=\"progress-h\">Progress</h2>\n");
    if updates.is_empty() {
        main.push_str("<p>No progress update yet.</p>\n");
    } else {
        main.push_str("<ol class=\"progress\">\n");
        for p in updates {
            let _ = write!(
                main,
                "<li><time>{}</time> {} <span class=\"word\">{}</span>",
                p.updated_at.to_rfc3339(),
                html(&p.agent),
                p.status.as_str()
            );
            if !p.artifacts.is_empty() {
                let _ = write!(main, " artifacts: {}", html(&p.artifacts.join(", ")));
            }
            for b in p.blockers.iter() {
                let _ = write!(
                    main,
                    " <span class=\"blocker\">blocked: {}</span>",
                    html(&b.description)
                );
            }
            main.push_str("</li>\n");
        }
        main.push_str("</ol>\n");
    }
    main.push_str("</section>\n");
    // The run: its record and the tail of its log.
    main.push_str("<section aria-labelledby=\"run-h\"><h2 id=\"run-h\">Run</h2>\n");
    match run {
        None => main.push_str("<p>No run of this task.</p>\n"),
        Some(r) => {
            let exit = r
                .exit
                .as_ref()
                .map_or_else(String::new, |e| match (e.code, e.signal) {
                    (Some(c), _) => format!(", exit code {c}"),
                    (_, Some(sig)) => format!(", killed by signal {sig}"),
                    _ => String::new(),
                });
            let _ = writeln!(
                main,
                "<p>attempt {} · <span class=\"word\">{}</span>{}{exit} · started {} · pid {}</p>",
                r.attempt,
                r.state.as_str(),
                if r.held { " (held)" } else { "" },
                r.started_at.to_rfc3339(),
                r.pid
            );
        }
    }
    let log = crate::runners::log_tail(&crate::runners::run_dir(&s.dir, task), LOG_LINES);
    if !log.is_empty() {
        let _ = writeln!(
            main,
            "<h3>Log (last {} lines)</h3><pre class=\"log\" id=\"log\">{}</pre>",
            LOG_LINES,
            html(&log.join("\n"))
        );
    }
    main.push_str("</section>\n");
    main.push_str(&diff_section(root, s, task, &t.agent));
    // The review gate's buttons (issue 44) go here, as POST forms to
    // /s/SESSION/t/TASK/do/ACTION: the server already requires the token
    // and the page's own Origin for every POST.
    Ok(Some(page(
        &format!("{task} · {session}"),
        &[
            (format!("/s/{}", html(session)), session.to_string()),
            (task_href(session, task), task.to_string()),
        ],
        &main,
    )))
}

/// The run's branch diff (worktree runs): each changed file with the
/// boundary verdict `squadctl check` gives it (crate::changes).
fn diff_section(root: &Path, s: &SessionIndex, task: &str, agent: &str) -> String {
    let mut out =
        String::from("<section aria-labelledby=\"diff-h\"><h2 id=\"diff-h\">Changes</h2>\n");
    let Some(tree) = crate::worktree::load(&crate::runners::run_dir(&s.dir, task)) else {
        out.push_str(
            "<p>The task has no worktree run, so no branch of its own to show.</p></section>\n",
        );
        return out;
    };
    let changes = crate::changes::git_changes(root, &tree.base, &tree.branch);
    let policy = crate::locks::load_policy(root);
    let verdicts = policy.map_err(|e| e.to_string()).and_then(|p| {
        crate::changes::judge_branch(root, &p, &tree.base, &tree.branch, task, agent)
    });
    match (changes, verdicts) {
        (Ok(changes), Ok(diags)) => {
            let _ = writeln!(
                out,
                "<p>branch <code>{}</code> from <code>{}</code></p><table class=\"diff\"><thead><tr><th>file</th><th>change</th><th>boundary verdict</th></tr></thead><tbody>",
                html(&tree.branch),
                html(&tree.base.chars().take(12).collect::<String>())
            );
            for c in &changes {
                let found: Vec<String> = diags
                    .iter()
                    .filter(|d| d.path == Path::new(&c.path))
                    .map(|d| format!("{}: {}", d.rule, d.message))
                    .collect();
                let (class, verdict) = if found.is_empty() {
                    ("ok", "within its boundaries".to_string())
                } else {
                    ("refused", found.join("; "))
                };
                let _ = writeln!(
                    out,
                    "<tr class=\"{class}\"><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                    html(&c.path),
                    html(&c.status.to_string()),
                    html(&verdict)
                );
            }
            out.push_str("</tbody></table>\n");
            let other: Vec<_> = diags
                .iter()
                .filter(|d| !changes.iter().any(|c| d.path == Path::new(&c.path)))
                .collect();
            for d in other {
                let _ = writeln!(
                    out,
                    "<p class=\"refused\">{}: {}: {}</p>",
                    html(&d.path.display().to_string()),
                    d.rule,
                    html(&d.message)
                );
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            let _ = writeln!(out, "<p>Cannot read the branch: {}</p>", html(&e));
        }
    }
    out.push_str("</section>\n");
    out
}
