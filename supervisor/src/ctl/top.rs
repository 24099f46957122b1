//! `squadctl top`: the lead's live console (docs/console.md). What needs a
//! human first (the model of `status`, crate::attention), then the sessions
//! with their tasks and runs, then the lead's unread messages. Redrawn when
//! squadd reports an event, or, with squadd down, when a file under
//! `.squad/sessions` changes (inotify): there is no polling loop.

use crate::attention::Item;
use crate::control::{Client, Method};
use crate::runners::{RunRecord, RunState};
use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// A live dashboard of the project: a "needs you" pane first (blocked
/// tasks, error reports, held or failed runs, overdue tasks and replies,
/// invalid files, policy problems, each with the command that resolves it),
/// the sessions with phase and progress, each task's state, agent, run and
/// due time, and the lead's unread messages.
///
/// Keys: q quit; ↑/↓ or k/j move; Enter opens the selected item (again to
/// close); s stops the selected task's run (as `squadctl stop`); r starts
/// it again (as `squadctl run`; squadd must run); a acknowledges the
/// selected message. Redrawn on squadd's events, or on file changes when
/// squadd is down (it says so). Respects NO_COLOR; fits 60 columns.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

/// One task line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskLine {
    /// Session directory name.
    pub session: String,
    /// Task id.
    pub task: String,
    /// Assignee.
    pub agent: String,
    /// Derived state (`blocked`, `in_progress`, `overdue`…).
    pub state: String,
    /// Its run: `running pid 123`, `held (stopped)`, or empty.
    pub run: String,
    /// A live run's facts: uptime, CPU, the last file its agent wrote
    /// (`up 3m02s cpu 1.5% wrote role-comm-… 12s ago`), or empty.
    pub run_detail: String,
    /// When it is due, when it has started.
    pub due: Option<DateTime<Utc>>,
}

/// One session line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionLine {
    /// Directory name.
    pub name: String,
    /// Phase as written, or `-`.
    pub phase: String,
    /// `completed` or `failed` once the session ended, else empty.
    pub ended: String,
    /// Completed tasks.
    pub done: u64,
    /// All tasks.
    pub total: u64,
    /// Tokens and cost of its runs (`12034 tok $0.41`), or empty.
    pub cost: String,
}

/// One unread message of the lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageLine {
    /// Session directory name.
    pub session: String,
    /// Message id.
    pub id: String,
    /// Priority word.
    pub priority: String,
    /// Its sender and subject (`bob: api shape?`), or the id when the
    /// file cannot be read as a message.
    pub what: String,
    /// The inbox entry.
    pub path: PathBuf,
    /// The lead it was sent to.
    pub agent: String,
    /// The session directory.
    pub dir: PathBuf,
}

/// What the screen shows: rendering is a pure function of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TopView {
    /// `squadd running (pid N)` or `squadd DOWN (…): read from the files`.
    pub daemon: String,
    /// Whether squadd answered.
    pub daemon_up: bool,
    /// The needs-you items.
    pub attention: Vec<Item>,
    /// squadd's last warnings and errors (`HH:MM:SS LEVEL text`), oldest
    /// first: its log may be a file nobody watches.
    pub warnings: Vec<String>,
    /// Sessions.
    pub sessions: Vec<SessionLine>,
    /// Tasks of every session, in session order.
    pub tasks: Vec<TaskLine>,
    /// The lead's unread messages.
    pub messages: Vec<MessageLine>,
    /// Index into the selectable rows (attention, tasks, messages).
    pub selected: usize,
    /// The opened item's text.
    pub detail: Option<String>,
    /// The last action's outcome.
    pub notice: Option<String>,
    /// Colours on (off under NO_COLOR).
    pub color: bool,
}

/// What a selectable row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selected {
    /// A needs-you item.
    Attention(usize),
    /// A task.
    Task(usize),
    /// A message.
    Message(usize),
}

impl TopView {
    /// How many rows can be selected.
    pub(crate) fn rows(&self) -> usize {
        self.attention.len() + self.tasks.len() + self.messages.len()
    }

    /// The selected row.
    pub(crate) fn selected(&self) -> Option<Selected> {
        let (a, t) = (self.attention.len(), self.tasks.len());
        let i = self.selected;
        if i < a {
            Some(Selected::Attention(i))
        } else if i < a + t {
            Some(Selected::Task(i - a))
        } else if i < self.rows() {
            Some(Selected::Message(i - a - t))
        } else {
            None
        }
    }

    /// Moves the selection by `delta`, within the rows.
    pub(crate) fn step(&mut self, delta: isize) {
        let last = self.rows().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(delta).min(last);
    }

    /// The text Enter opens for the selected row.
    pub(crate) fn open(&self) -> Option<String> {
        Some(match self.selected()? {
            Selected::Attention(i) => {
                let it = &self.attention[i];
                format!(
                    "{} [{}]\n{}\n\nresolve with:\n  {}",
                    it.kind, it.severity, it.summary, it.command
                )
            }
            Selected::Task(i) => {
                let t = &self.tasks[i];
                format!(
                    "task {} in {}\nagent: {}\nstate: {}\nrun: {} {}\ndue: {}\n\nmore: squadctl task show {} --session {}\n(s stops its run, r starts it)",
                    t.task,
                    t.session,
                    t.agent,
                    t.state,
                    if t.run.is_empty() { "-" } else { &t.run },
                    t.run_detail,
                    t.due.map_or_else(
                        || "-".into(),
                        |d| d.format("%Y-%m-%d %H:%M UTC").to_string()
                    ),
                    t.task,
                    t.session
                )
            }
            Selected::Message(i) => {
                let m = &self.messages[i];
                let body = std::fs::read_to_string(&m.path)
                    .unwrap_or_else(|e| format!("cannot read {}: {e}", m.path.display()));
                crate::text::escape(&format!(
                    "message {} ({}) in {}\n\n{body}",
                    m.id, m.priority, m.session
                ))
                .into_owned()
            }
        })
    }
}

fn bar(done: u64, total: u64, width: usize) -> String {
    let filled = (done as usize * width)
        .checked_div(total as usize)
        .unwrap_or(0)
        .min(width);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

/// Draws the view. Pure: the same view gives the same screen.
pub(crate) fn render(frame: &mut Frame<'_>, view: &TopView) {
    let style = |c: Color| {
        if view.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    };
    let chosen = view.selected();
    let mark = |row: Selected| {
        if chosen == Some(row) {
            ("> ", Style::default().add_modifier(Modifier::REVERSED))
        } else {
            ("  ", Style::default())
        }
    };
    let areas = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .split(frame.area());
    let head = Line::from(vec![
        Span::styled(
            view.daemon.clone(),
            style(if view.daemon_up {
                Color::Green
            } else {
                Color::Red
            }),
        ),
        Span::raw(format!("  needs you: {}", view.attention.len())),
    ]);
    frame.render_widget(Paragraph::new(head), areas[0]);

    let mut lines: Vec<Line> = Vec::new();
    lines.push(Line::styled(
        format!("NEEDS YOU ({})", view.attention.len()),
        style(Color::Yellow).add_modifier(Modifier::BOLD),
    ));
    if view.attention.is_empty() {
        lines.push(Line::raw("  nothing"));
    }
    for (i, it) in view.attention.iter().enumerate() {
        let (m, s) = mark(Selected::Attention(i));
        let colour = match it.severity.as_str() {
            "critical" => Color::Red,
            "error" => Color::LightRed,
            _ => Color::Yellow,
        };
        lines.push(Line::from(vec![
            Span::styled(m, s),
            Span::styled(format!("{:<8} ", it.severity), style(colour)),
            Span::styled(it.summary.clone(), s),
        ]));
    }
    if !view.warnings.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            format!("SQUADD WARNED ({} latest)", view.warnings.len()),
            style(Color::Yellow).add_modifier(Modifier::BOLD),
        ));
        for w in &view.warnings {
            lines.push(Line::raw(format!("  {w}")));
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "SESSIONS",
        style(Color::Cyan).add_modifier(Modifier::BOLD),
    ));
    let mut task_index = 0;
    for s in &view.sessions {
        lines.push(Line::raw(format!(
            "  {} {} {}/{} {}{}",
            s.name,
            bar(s.done, s.total, 10),
            s.done,
            s.total,
            if s.ended.is_empty() {
                format!("phase {}", s.phase)
            } else {
                format!("session {}", s.ended)
            },
            if s.cost.is_empty() {
                String::new()
            } else {
                format!(" {}", s.cost)
            }
        )));
        while let Some(t) = view.tasks.get(task_index).filter(|t| t.session == s.name) {
            let (m, st) = mark(Selected::Task(task_index));
            let state_colour = match t.state.as_str() {
                "blocked" | "overdue" => Color::Red,
                "completed" => Color::Green,
                "in_progress" => Color::Cyan,
                _ => Color::Reset,
            };
            lines.push(Line::from(vec![
                Span::styled(m, st),
                Span::styled(format!("  {} ", t.task), st),
                Span::styled(format!("{} ", t.state), style(state_colour)),
                Span::raw(format!(
                    "{}{}{}",
                    t.agent,
                    if t.run.is_empty() {
                        String::new()
                    } else {
                        format!(" run {}", t.run)
                    },
                    t.due
                        .map_or_else(String::new, |d| format!(" due {}", d.format("%H:%M")))
                )),
            ]));
            // A live run's facts on a line of their own: a 60-column line
            // cuts them, not the task's state.
            if !t.run_detail.is_empty() {
                lines.push(Line::raw(format!("      {}", t.run_detail)));
            }
            task_index += 1;
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        format!("MESSAGES FOR THE LEAD ({} unread)", view.messages.len()),
        style(Color::Cyan).add_modifier(Modifier::BOLD),
    ));
    for (i, msg) in view.messages.iter().enumerate() {
        let (m, s) = mark(Selected::Message(i));
        lines.push(Line::from(vec![
            Span::styled(m, s),
            Span::styled(
                format!("{} {} ({})", msg.priority, msg.what, msg.session),
                s,
            ),
        ]));
    }
    // Keep the selected row on screen in a short terminal.
    let height = areas[1].height.saturating_sub(2) as usize;
    let selected_line = lines
        .iter()
        .position(|l| l.spans.first().is_some_and(|s| s.content == "> "))
        .unwrap_or(0);
    let scroll = selected_line.saturating_sub(height.saturating_sub(1)) as u16;
    frame.render_widget(
        Paragraph::new(lines)
            .block(Block::default().borders(Borders::TOP))
            .scroll((scroll, 0)),
        areas[1],
    );
    if let Some(text) = &view.detail {
        let area = areas[1].inner(ratatui::layout::Margin {
            horizontal: 1,
            vertical: 1,
        });
        frame.render_widget(ratatui::widgets::Clear, area);
        frame.render_widget(
            Paragraph::new(text.clone())
                .wrap(Wrap { trim: false })
                .block(Block::default().borders(Borders::ALL).title("Enter: close")),
            area,
        );
    }
    let foot = view
        .notice
        .clone()
        .unwrap_or_else(|| "q quit j/k move Enter open s stop r run a ack".to_string());
    frame.render_widget(Paragraph::new(foot), areas[2]);
}

fn run_word(runs: &[RunRecord], session: &str, task: &str) -> String {
    let Some(r) = runs.iter().find(|r| r.session == session && r.task == task) else {
        return String::new();
    };
    match r.state {
        RunState::Running => format!("running pid {}", r.pid),
        _ if r.held => format!("held ({})", r.state.as_str()),
        s => s.as_str().to_string(),
    }
}

/// A live run's uptime, CPU (averaged over its life, as `squadctl runs`)
/// and the last protocol file its agent wrote, with its age; empty when
/// the task has no live run.
fn run_detail(
    runs: &[RunRecord],
    session_dir: &Path,
    session: &str,
    task: &str,
    now: DateTime<Utc>,
) -> String {
    let Some(r) = runs
        .iter()
        .find(|r| r.session == session && r.task == task && r.state == RunState::Running)
    else {
        return String::new();
    };
    if !crate::runners::alive(r.pid, r.process_start) {
        return "process gone".into();
    }
    let age =
        |t: DateTime<Utc>| super::runs::secs(&serde_json::json!((now - t).num_seconds().max(0)));
    let cpu = super::runs::usage(r.pid).map_or_else(|| "-".into(), |(c, _)| format!("{c:.1}%"));
    let wrote = crate::runners::last_write_file(session_dir, &r.agent).map_or_else(
        || "wrote nothing yet".into(),
        |(name, at)| format!("wrote {} {} ago", crate::text::escape(&name), age(at)),
    );
    format!("up {} cpu {cpu} {wrote}", age(r.started_at))
}

/// The most warnings of squadd's the console shows.
const MAX_WARNINGS: usize = 3;

/// Builds the view from the files and squadd (what `status` gathers), the
/// tasks' derivation and the lead's inboxes.
fn gather(root: &Path, session: Option<&str>, color: bool) -> TopView {
    let now = Utc::now();
    let mut view = TopView {
        color,
        ..TopView::default()
    };
    let g = match super::status::gather(root, session, now) {
        Ok(g) => g,
        Err(e) => {
            view.daemon = format!("cannot read the project: {e}");
            return view;
        }
    };
    match &g.report.daemon {
        crate::status::DaemonReport::Running { pid, warnings, .. } => {
            view.daemon = format!("squadd running (pid {pid})");
            view.daemon_up = true;
            // The last few, newest last, escaped (they quote paths).
            view.warnings = warnings
                .iter()
                .rev()
                .take(MAX_WARNINGS)
                .rev()
                .map(|w| {
                    crate::text::escape(&format!(
                        "{} {} {}",
                        w.at.with_timezone(&chrono::Local).format("%H:%M:%S"),
                        w.level,
                        w.text
                    ))
                    .into_owned()
                })
                .collect();
        }
        crate::status::DaemonReport::Down { reason } => {
            view.daemon = format!("squadd DOWN ({reason}): read from the files");
        }
    }
    view.attention = g.attention;
    let leads = crate::locks::load_policy(root)
        .map(|p| p.leads())
        .unwrap_or_else(|_| vec!["lead".to_string()]);
    let sessions = crate::index::scan_root(root, 1).unwrap_or_default();
    let state = crate::state::State::load(root);
    let empty = Default::default();
    let costs = super::usage::totals(&g.runs, |r| r.session.clone());
    for r in &g.report.roots {
        for s in &r.sessions {
            view.sessions.push(SessionLine {
                ended: match s.status {
                    squad_protocol::model::SessionState::Active => String::new(),
                    other => other.as_str().to_string(),
                },
                name: s.name.clone(),
                phase: s.phase.map_or_else(|| "-".into(), |p| p.to_string()),
                done: s.tasks_completed,
                total: s.tasks_total,
                cost: costs.get(&s.name).map_or_else(String::new, |u| {
                    format!("{} tok {}", u.total_tokens(), super::usage::cost(u))
                }),
            });
            let Some(index) = sessions.get(&s.name) else {
                continue;
            };
            let starts = state.task_starts.get(&s.name).unwrap_or(&empty);
            let derived = crate::derive::derive_session(index, starts, now);
            for t in &derived.tasks {
                view.tasks.push(TaskLine {
                    session: s.name.clone(),
                    task: t.task_id.clone(),
                    agent: t.agent.clone(),
                    state: if t.overdue {
                        "overdue".into()
                    } else if t.ready {
                        "ready".into()
                    } else {
                        t.state.as_str().to_string()
                    },
                    run: run_word(&g.runs, &s.name, &t.task_id),
                    run_detail: run_detail(&g.runs, &index.dir, &s.name, &t.task_id, now),
                    due: t.due_at,
                });
            }
            for lead in &leads {
                for m in crate::inbox::list(&index.dir, lead)
                    .into_iter()
                    .filter(|m| m.unread)
                {
                    let what = match super::message::read_message(&m) {
                        Ok((_, Some(msg))) => crate::text::escape(&format!(
                            "{}: {}",
                            msg.meta.from_agent, msg.subject
                        ))
                        .into_owned(),
                        _ => crate::text::escape(&m.message_id).into_owned(),
                    };
                    view.messages.push(MessageLine {
                        session: s.name.clone(),
                        id: m.message_id.clone(),
                        what,
                        priority: m.priority.to_string(),
                        path: m.path.clone(),
                        agent: lead.clone(),
                        dir: index.dir.clone(),
                    });
                }
            }
        }
    }
    // Everything from files: no control character reaches the terminal.
    for it in &mut view.attention {
        it.summary = crate::text::escape(&it.summary).into_owned();
        it.command = crate::text::escape(&it.command).into_owned();
    }
    for t in &mut view.tasks {
        t.task = crate::text::escape(&t.task).into_owned();
        t.agent = crate::text::escape(&t.agent).into_owned();
    }
    view
}

/// What wakes the console.
enum Wake {
    Key(crossterm::event::KeyEvent),
    Changed,
    Resized,
    Quit,
}

/// Sends `Changed` when an agent's presence record changes (a CLI's hook
/// wrote it: `squadctl presence`), squadd up or down: who waits for the
/// person shows at once. The records' directory is made when missing, so
/// there is something to watch.
fn watch_presence(root: &Path, tx: mpsc::Sender<Wake>) {
    use notify::Watcher;
    let dir = crate::root::fs_path(root)
        .join(squad_protocol::tree::SQUAD_DIR)
        .join(crate::agent_presence::DIR);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    std::thread::spawn(move || {
        let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            use notify::EventKind as K;
            if e.is_ok_and(|e| matches!(e.kind, K::Create(_) | K::Remove(_) | K::Modify(_))) {
                let _ = tx.send(Wake::Changed);
            }
        });
        let Ok(mut watcher) = watcher else { return };
        if watcher
            .watch(&dir, notify::RecursiveMode::NonRecursive)
            .is_err()
        {
            return;
        }
        // Keep the watcher alive as long as the console runs.
        loop {
            std::thread::park();
        }
    });
}

/// Sends `Changed` on every squadd event; when squadd is down or goes away,
/// on every change under `.squad/sessions` instead (inotify).
fn watch(root: PathBuf, tx: mpsc::Sender<Wake>) {
    std::thread::spawn(move || {
        let follow = Client::connect(&root, Duration::from_secs(2)).and_then(|mut c| {
            c.send(Method::Events { follow: true })?;
            c.set_read_timeout(None)?;
            Ok(c)
        });
        if let Ok(mut c) = follow {
            while let Ok(Some(_)) = c.read() {
                if tx.send(Wake::Changed).is_err() {
                    return;
                }
            }
            // The stream ended: squadd stopped. Say so, then watch files.
            if tx.send(Wake::Changed).is_err() {
                return;
            }
        }
        use notify::Watcher;
        let tx2 = tx.clone();
        // Writes, creations, renames and removals; not reads (the console's
        // own reads would wake it again).
        let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
            use notify::EventKind as K;
            use notify::event::{AccessKind, AccessMode, ModifyKind};
            let changed = e.is_ok_and(|e| match e.kind {
                K::Create(_) | K::Remove(_) => true,
                K::Modify(ModifyKind::Metadata(_)) => false,
                K::Modify(_) => true,
                K::Access(AccessKind::Close(AccessMode::Write)) => true,
                _ => false,
            });
            if changed {
                let _ = tx2.send(Wake::Changed);
            }
        });
        let Ok(mut watcher) = watcher else { return };
        let dir = crate::root::fs_path(&root)
            .join(squad_protocol::tree::SQUAD_DIR)
            .join("sessions");
        if watcher
            .watch(&dir, notify::RecursiveMode::Recursive)
            .is_err()
        {
            return;
        }
        // Keep the watcher alive as long as the console runs.
        loop {
            std::thread::park();
        }
    });
}

/// Runs `squadctl top`.
pub(crate) fn top(root_arg: Option<&Path>, args: TopArgs) -> u8 {
    use crossterm::event::{Event, KeyCode, KeyEventKind};
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => return super::fail(format!("cannot open the terminal: {e}")),
    };
    let (tx, rx) = mpsc::channel();
    watch(root.clone(), tx.clone());
    watch_presence(&root, tx.clone());
    // Keys on their own thread, blocking: the main loop waits on one
    // channel for keys and changes alike.
    std::thread::spawn(move || {
        loop {
            let wake = match crossterm::event::read() {
                Ok(Event::Key(k)) => Wake::Key(k),
                Ok(Event::Resize(..)) => Wake::Resized,
                Ok(_) => continue,
                Err(_) => Wake::Quit,
            };
            let quit = matches!(wake, Wake::Quit);
            if tx.send(wake).is_err() || quit {
                return;
            }
        }
    });
    let mut view = gather(&root, args.session.as_deref(), color);
    let mut code = crate::exit::OK;
    // A key read while draining a burst of changes, handled next.
    let mut pending: Option<Wake> = None;
    loop {
        if let Err(e) = terminal.draw(|f| render(f, &view)) {
            code = super::fail(format!("cannot draw: {e}"));
            break;
        }
        let wake = match pending.take() {
            Some(w) => w,
            None => match rx.recv() {
                Ok(w) => w,
                Err(_) => break,
            },
        };
        let mut refresh = false;
        match wake {
            Wake::Quit => break,
            Wake::Resized => {}
            Wake::Changed => refresh = true,
            Wake::Key(k) if k.kind != KeyEventKind::Press => {}
            Wake::Key(k) => match k.code {
                KeyCode::Char('q') => break,
                KeyCode::Down | KeyCode::Char('j') => view.step(1),
                KeyCode::Up | KeyCode::Char('k') => view.step(-1),
                KeyCode::Enter => {
                    view.detail = if view.detail.is_some() {
                        None
                    } else {
                        view.open()
                    }
                }
                KeyCode::Esc => view.detail = None,
                KeyCode::Char('s') => {
                    view.notice = Some(match selected_task(&view) {
                        Some((task, session)) => {
                            match super::runs::stop_run(&root, &task, Some(&session)) {
                                Ok(_) => format!("stopping {task}"),
                                Err(e) => format!("cannot stop {task}: {e}"),
                            }
                        }
                        None => "s stops the selected task's run".into(),
                    });
                    refresh = true;
                }
                KeyCode::Char('r') => {
                    view.notice = Some(match selected_task(&view) {
                        Some((task, session)) => {
                            match super::runs::start_run(&root, &task, Some(&session)) {
                                Ok(v) => format!("started {task} (pid {})", v["pid"]),
                                Err(e) => crate::text::escape(&e).into_owned(),
                            }
                        }
                        None => "r starts the selected task's run".into(),
                    });
                    refresh = true;
                }
                KeyCode::Char('a') => {
                    view.notice = Some(match view.selected() {
                        Some(Selected::Message(i)) => {
                            let m = &view.messages[i];
                            match ack(m) {
                                Ok(()) => format!("acknowledged {}", m.id),
                                Err(e) => format!("cannot acknowledge {}: {e}", m.id),
                            }
                        }
                        _ => "a acknowledges the selected message".into(),
                    });
                    refresh = true;
                }
                _ => {}
            },
        }
        if refresh {
            // One redraw for a burst of changes.
            while let Ok(w) = rx.try_recv() {
                if !matches!(w, Wake::Changed) {
                    pending = Some(w);
                    break;
                }
            }
            let (selected, detail, notice) =
                (view.selected, view.detail.take(), view.notice.take());
            view = gather(&root, args.session.as_deref(), color);
            view.selected = selected.min(view.rows().saturating_sub(1));
            view.detail = detail;
            view.notice = notice;
        }
    }
    ratatui::restore();
    code
}

/// The task (and its session) of the selected row: a task, or a needs-you
/// item about one.
fn selected_task(view: &TopView) -> Option<(String, String)> {
    match view.selected()? {
        Selected::Task(i) => Some((view.tasks[i].task.clone(), view.tasks[i].session.clone())),
        Selected::Attention(i) => view.attention[i]
            .task
            .clone()
            .zip(view.attention[i].session.clone()),
        Selected::Message(_) => None,
    }
}

/// Acknowledges a message (as `inbox next` does).
fn ack(m: &MessageLine) -> std::io::Result<()> {
    let item = crate::inbox::list(&m.dir, &m.agent)
        .into_iter()
        .find(|i| i.path == m.path && i.unread)
        .ok_or_else(|| std::io::Error::other("already acknowledged"))?;
    crate::inbox::ack(&item).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn view() -> TopView {
        TopView {
            daemon: "squadd DOWN (not running): read from the files".into(),
            attention: vec![Item {
                id: "0123456789abcdef".into(),
                kind: crate::attention::Kind::BlockedTask,
                severity: "error".into(),
                session: Some("s1".into()),
                task: Some("t1".into()),
                summary: "t1 (alice) is blocked: need the schema".into(),
                command: "squadctl task show t1 --session s1".into(),
            }],
            sessions: vec![SessionLine {
                ended: String::new(),
                name: "s1".into(),
                phase: "implementation".into(),
                done: 1,
                total: 2,
                cost: String::new(),
            }],
            tasks: vec![TaskLine {
                session: "s1".into(),
                task: "t1".into(),
                agent: "alice".into(),
                state: "blocked".into(),
                run: "held (stopped)".into(),
                run_detail: String::new(),
                due: None,
            }],
            ..TopView::default()
        }
    }

    fn screen(view: &TopView, width: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(width, 20)).unwrap_or_else(|e| panic!("{e}"));
        t.draw(|f| render(f, view))
            .unwrap_or_else(|e| panic!("{e}"));
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    }

    #[test]
    fn needs_you_comes_first_and_fits_sixty_columns() {
        let text = screen(&view(), 60);
        let needs = text.find("NEEDS YOU (1)").unwrap_or(usize::MAX);
        let sessions = text.find("SESSIONS").unwrap_or(0);
        assert!(needs < sessions, "{text}");
        assert!(text.contains("> error    t1 (alice) is blocked"), "{text}");
        assert!(text.contains("s1 [#####-----] 1/2"), "{text}");
        assert!(
            text.contains("t1 blocked alice run held (stopped)"),
            "{text}"
        );
        assert!(text.contains("squadd DOWN"), "{text}");
    }

    #[test]
    fn a_live_run_shows_its_pid_uptime_cpu_and_last_write_under_its_task() {
        let mut v = view();
        v.tasks[0].state = "in_progress".into();
        v.tasks[0].run = "running pid 4242".into();
        v.tasks[0].run_detail = "up 3m02s cpu 1.5% wrote role-comm-alice-t1.md 12s ago".into();
        v.tasks[0].due = chrono::DateTime::parse_from_rfc3339("2026-01-01T14:05:00Z")
            .ok()
            .map(|d| d.with_timezone(&Utc));
        let text = screen(&v, 60);
        assert!(
            text.contains("t1 in_progress alice run running pid 4242 due 14:05"),
            "{text}"
        );
        assert!(
            text.contains("      up 3m02s cpu 1.5% wrote role-comm-alice-t1.md"),
            "{text}"
        );
        assert!(text.contains("s stop r run a ack"), "{text}");
    }

    #[test]
    fn squadds_warnings_have_a_pane_of_their_own_after_needs_you() {
        let mut v = view();
        assert!(!screen(&v, 60).contains("SQUADD WARNED"));
        v.warnings = vec!["10:00:01 WARN cannot write summary.md".into()];
        let text = screen(&v, 60);
        let (needs, warned, sessions) = (
            text.find("NEEDS YOU").unwrap_or(usize::MAX),
            text.find("SQUADD WARNED (1 latest)").unwrap_or(usize::MAX),
            text.find("SESSIONS").unwrap_or(0),
        );
        assert!(needs < warned && warned < sessions, "{text}");
        assert!(
            text.contains("  10:00:01 WARN cannot write summary.md"),
            "{text}"
        );
    }

    #[test]
    fn lead_messages_show_sender_and_subject_and_an_ended_session_says_so() {
        let mut v = view();
        v.messages.push(MessageLine {
            session: "s1".into(),
            id: "msg_1".into(),
            priority: "high".into(),
            what: "bob: api shape?".into(),
            path: PathBuf::new(),
            agent: "lead".into(),
            dir: PathBuf::new(),
        });
        v.sessions[0].ended = "completed".into();
        let text = screen(&v, 60);
        assert!(text.contains("high bob: api shape? (s1)"), "{text}");
        assert!(text.contains("1/2 session completed"), "{text}");
    }

    #[test]
    fn moving_and_opening_follow_the_rows() {
        let mut v = view();
        v.step(5);
        assert_eq!(v.selected(), Some(Selected::Task(0)));
        v.step(-9);
        assert_eq!(v.selected(), Some(Selected::Attention(0)));
        let opened = v.open().unwrap_or_default();
        assert!(
            opened.contains("squadctl task show t1 --session s1"),
            "{opened}"
        );
        v.detail = Some(opened);
        assert!(screen(&v, 60).contains("resolve with:"));
    }

    #[test]
    fn no_color_draws_no_colour() {
        let mut t = Terminal::new(TestBackend::new(60, 20)).unwrap_or_else(|e| panic!("{e}"));
        let mut v = view();
        v.color = false;
        t.draw(|f| render(f, &v)).unwrap_or_else(|e| panic!("{e}"));
        let buf = t.backend().buffer().clone();
        assert!(buf.content().iter().all(|c| c.fg == Color::Reset));
    }
}
