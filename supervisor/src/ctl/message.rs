// Over 800 lines: `squadctl send` and `squadctl inbox` (list, next, show,
// read) share the message file format and its rendering. The split
// waiting is inbox into ctl/inbox.rs (issue 42), after issue 40's changes
// here land.
//! `squadctl send` and `squadctl inbox`: messages for agents.

use super::undelivered::undelivered;
use crate::exit;
use crate::inbox::{self, Item};
use crate::index::{Entry, load_file};
use crate::root;
use crate::safefs::write_atomic;
use chrono::{DateTime, Utc};
use clap::{Subcommand, ValueEnum};
use serde_json::json;
use squad_protocol::kind::SESSION_STATUS_FILE;
use squad_protocol::model::{
    Document, Message, MessageContext, MessageMeta, MessageType, Priority, SessionState,
};
use squad_protocol::tree::{session_dirs, sessions_dir};
use squad_protocol::{FileKind, IdKind, check_text};
use std::hash::{BuildHasher, RandomState};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Priorities on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PriorityArg {
    /// Immediate.
    Critical,
    /// Within a minute.
    High,
    /// Within five minutes.
    Medium,
    /// When the recipient is free.
    Low,
}

/// Message types on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TypeArg {
    /// Expects an answer.
    Question,
    /// Expects an action.
    Request,
    /// For information.
    Notification,
}

/// Send a message to another agent.
///
/// Writes a canonical, valid message file
/// (`role-comm-<from>-to-<to>-<message_id>.md`) into the session atomically
/// and prints its id. squadd delivers it into the recipient's inbox by
/// priority.
///
/// The recipient must be an agent the project knows (a task assignment,
/// message or inbox of any session, the team, the policy's leads and
/// runners, or `lead`): an unknown one is refused (exit 1, nothing
/// written) with the name most likely meant, unless `--new-agent`.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// Sender.
    #[arg(long, env = "SQUAD_AGENT")]
    pub from: String,
    /// Recipient.
    #[arg(long)]
    pub to: String,
    /// Delivery priority.
    #[arg(long, value_enum, default_value = "medium")]
    pub priority: PriorityArg,
    /// Message type.
    #[arg(long = "type", value_enum)]
    pub kind: TypeArg,
    /// One line.
    #[arg(long)]
    pub subject: String,
    /// The body.
    #[arg(
        long,
        conflicts_with = "message_file",
        required_unless_present = "message_file"
    )]
    pub message: Option<String>,
    /// Read the body from a file (`-` for stdin).
    #[arg(long, value_name = "F")]
    pub message_file: Option<PathBuf>,
    /// The task the message is about.
    #[arg(long, value_name = "T")]
    pub task: Option<String>,
    /// A reply is needed by this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub response_by: Option<String>,
    /// The message this one answers.
    #[arg(long, value_name = "ID")]
    pub in_reply_to: Option<String>,
    /// The session (default: the only active session).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Send to an agent the project does not know yet (no task, message,
    /// team file or policy names it): without it such a recipient is
    /// refused as a likely typo.
    #[arg(long)]
    pub new_agent: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Inbox commands.
#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// List an agent's delivered messages, unread first, by priority then
    /// time, then the messages addressed to it that squadd has not delivered
    /// yet (squadd is down, or a low-priority message waits its turn).
    List(InboxArgs),
    /// Print the highest-priority unread message and acknowledge it (exit 1
    /// when there is none, after `--wait`); `--peek` leaves it unread.
    Next(NextArgs),
    /// Print one message by id, read or unread, without acknowledging it.
    Show(AckArgs),
    /// Acknowledge a message by id (moves it from new/ to cur/).
    Ack(AckArgs),
}

/// Arguments of `inbox list`.
#[derive(Debug, clap::Args)]
pub struct InboxArgs {
    /// The agent (default: `SQUAD_AGENT`).
    #[arg(env = "SQUAD_AGENT")]
    pub agent: String,
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `inbox next`.
#[derive(Debug, clap::Args)]
pub struct NextArgs {
    /// The agent (default: `SQUAD_AGENT`).
    #[arg(env = "SQUAD_AGENT")]
    pub agent: String,
    /// Wait up to DURATION for a message to arrive.
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
    /// Print it without acknowledging it (it stays unread).
    #[arg(long)]
    pub peek: bool,
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `inbox ack` and `inbox show`.
#[derive(Debug, clap::Args)]
pub struct AckArgs {
    /// `[AGENT] MESSAGE_ID`: the agent defaults to `SQUAD_AGENT`.
    #[arg(value_name = "AGENT] [MESSAGE_ID", num_args = 1..=2, required = true)]
    pub ids: Vec<String>,
    /// Only this session.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn priority(p: PriorityArg) -> Priority {
    match p {
        PriorityArg::Critical => Priority::Critical,
        PriorityArg::High => Priority::High,
        PriorityArg::Medium => Priority::Medium,
        PriorityArg::Low => Priority::Low,
    }
}

/// The status a session's `session-status.md` records, when readable.
pub(crate) fn session_state(dir: &Path) -> Option<SessionState> {
    match load_file(&dir.join(SESSION_STATUS_FILE), FileKind::SessionStatus)
        .ok()??
        .entry
    {
        Entry::Status(s) => Some(s.status),
        _ => None,
    }
}

/// Answer a message in your inbox.
///
/// Sends to the original's sender, about the original's task, in its
/// session, with `in_reply_to` set and the subject `Re: <subject>`; the
/// rules and refusals are `send`'s. Once sent, the original is read
/// (acknowledged, as `inbox ack`).
#[derive(Debug, clap::Args)]
pub struct ReplyArgs {
    /// The id of the message answered (in your inbox).
    #[arg(value_name = "MESSAGE_ID")]
    pub message_id: String,
    /// You, the original's recipient.
    #[arg(long, env = "SQUAD_AGENT")]
    pub from: String,
    /// The body.
    #[arg(long)]
    pub message: String,
    /// Delivery priority.
    #[arg(long, value_enum, default_value = "medium")]
    pub priority: PriorityArg,
    /// Message type.
    #[arg(long = "type", value_enum, default_value = "notification")]
    pub kind: TypeArg,
    /// The session to look in (default: every session).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `squadctl reply`: finds the original in the agent's inbox and sends
/// the answer through [`send`].
pub(crate) fn reply(root_arg: Option<&Path>, args: ReplyArgs) -> u8 {
    let root = match root::resolve(root_arg) {
        Ok(r) => root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let list = match items(&root, &args.from, args.session.as_deref()) {
        Ok(l) => l,
        Err(e) => return super::fail(e),
    };
    let Some(item) = list.iter().find(|i| i.message_id == args.message_id) else {
        return super::fail(format!(
            "no message {} in {}'s inbox; `squadctl inbox list {}` shows them",
            args.message_id, args.from, args.from
        ));
    };
    let original = match read_message(item) {
        Ok((_, m)) => m,
        Err(e) => return super::fail(e),
    };
    let Some(original) = original else {
        return super::fail(format!(
            "{}: not a valid message; cannot tell whom to answer",
            item.path.display()
        ));
    };
    let subject = if original.subject.starts_with("Re: ") {
        original.subject.clone()
    } else {
        format!("Re: {}", original.subject)
    };
    let code = send(
        Some(&root),
        SendArgs {
            from: args.from,
            to: original.meta.from_agent.clone(),
            priority: args.priority,
            kind: args.kind,
            subject,
            message: Some(args.message),
            message_file: None,
            task: original.context.as_ref().and_then(|c| c.task_id.clone()),
            response_by: None,
            in_reply_to: Some(args.message_id),
            session: Some(item.session.clone()),
            // The original's sender wrote a message: known.
            new_agent: true,
            json: args.json,
        },
    );
    // Answered is read: the question leaves the unread ones (and cannot
    // escalate as an overdue reply any more).
    if code == exit::OK
        && item.unread
        && let Err(e) = inbox::ack(item)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        super::warn(format!(
            "the answer was sent, but {} stays unread: {e}",
            item.message_id
        ));
    }
    code
}

/// Runs `squadctl send`.
pub(crate) fn send(root_arg: Option<&Path>, args: SendArgs) -> u8 {
    let root = match root::resolve(root_arg) {
        Ok(r) => root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    for (what, id) in [("--from", &args.from), ("--to", &args.to)] {
        if !IdKind::Agent.matches(id) {
            return super::fail(format!(
                "{what} `{id}` is not a valid agent name (e.g. `backend-dev`)"
            ));
        }
    }
    // A recipient nobody knows is most often a typo: its message would
    // wait in an inbox nobody reads.
    if !args.new_agent
        && let Some(why) = super::recipients::check(&root, &args.to)
    {
        super::eprint_text(&format!("squadctl: {why}\n"));
        return exit::PROBLEMS;
    }
    let body = match (&args.message, &args.message_file) {
        (Some(m), _) => m.clone(),
        (None, Some(f)) if f.as_os_str() == "-" => {
            let mut s = String::new();
            if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
                return super::fail(format!("stdin: {e}"));
            }
            s
        }
        (None, Some(f)) => match std::fs::read_to_string(f) {
            Ok(s) => s,
            Err(e) => return super::fail(format!("{}: {e}", f.display())),
        },
        (None, None) => return super::fail("pass --message or --message-file"),
    };
    // The one resolver of the agent commands: the named session, else the
    // one active session that plans the task (or the sender's work).
    let what = match &args.task {
        Some(t) => super::target::Defines::Task(t),
        None => super::target::Defines::Agent(&args.from),
    };
    // A message about a task no plan defines is rejected by `validate` and
    // `check` later: refuse it now, with nothing written. Without a task
    // only the session's directory is needed.
    let session = match &args.task {
        Some(task) => match super::target::resolve(&root, args.session.as_deref(), what) {
            Ok(index) if index.plans().any(|p| &p.task_id == task) => index.dir,
            Ok(index) => {
                return super::fail(format!(
                    "--task `{}`: no task assignment in session `{}` defines it; check the id (`squadctl task list`)",
                    crate::text::escape(task),
                    crate::text::escape(&index.name)
                ));
            }
            Err(e) => return super::fail(e),
        },
        None => match super::target::quick_dir(&root, args.session.as_deref(), what) {
            Some(dir) => dir,
            None => match super::target::resolve(&root, args.session.as_deref(), what) {
                Ok(index) => index.dir,
                Err(e) => return super::fail(e),
            },
        },
    };
    let now = Utc::now();
    let response_by = match args
        .response_by
        .as_deref()
        .map(DateTime::parse_from_rfc3339)
    {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            return super::fail(format!(
                "--response-by: {e}; write e.g. 2024-01-15T10:45:00Z"
            ));
        }
        None => None,
    };
    let hash =
        RandomState::new().hash_one((std::process::id(), now.timestamp_nanos_opt())) & 0xff_ffff;
    let message_id = format!("msg_{}_{hash:06x}", now.format("%Y%m%dT%H%M%S%3fZ"));
    let doc = Document::Message(Message {
        meta: MessageMeta {
            message_id: message_id.clone(),
            from_agent: args.from.clone(),
            to_agent: args.to.clone(),
            created_at: now.fixed_offset(),
            priority: priority(args.priority),
        },
        kind: match args.kind {
            TypeArg::Question => MessageType::Question,
            TypeArg::Request => MessageType::Request,
            TypeArg::Notification => MessageType::Notification,
        },
        subject: args.subject.clone(),
        message: body,
        context: args.task.clone().map(|task_id| MessageContext {
            task_id: Some(task_id),
            ..MessageContext::default()
        }),
        response_needed: response_by.map(|_| true),
        response_by,
        in_reply_to: args.in_reply_to.clone(),
    });
    let text = match doc.to_file_text() {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    // squadd reads no protocol file past the limit: a bigger message would
    // be saved and never delivered, so it is refused before "sent".
    let limit = squad_protocol::validate::MAX_FILE_BYTES;
    if text.len() as u64 > limit {
        return super::fail(format!(
            "the message would be a {} byte file; the limit of a protocol file is {limit} bytes (1 MiB), and squadd would never deliver it. Shorten it, or put the details in a file under the session's artifacts/ and name it",
            text.len()
        ));
    }
    let name = doc.file_name();
    // What we write must validate: refuse rather than hand squadd a bad file.
    let report = check_text(Path::new(&name), FileKind::Message, &text);
    if let Some(d) = report.diagnostics.iter().find(|d| d.is_error()) {
        return super::fail(format!("{}: {}", d.rule, d.message));
    }
    let path = session.join(&name);
    if let Err(e) = write_atomic(&path, text.as_bytes()) {
        return super::fail(format!("{}: {e}", path.display()));
    }
    // squadd delivers; without it the message waits in the session.
    let daemon_up = daemon_running(&root);
    if !daemon_up {
        super::warn(format!(
            "squadd is not running for this project: the message is saved in the session and delivered to {}'s inbox when squadd runs (`inbox list {}` shows it as not delivered yet)",
            args.to, args.to
        ));
    }
    if args.json {
        super::print(&format!(
            "{:#}\n",
            json!({"message_id": message_id, "path": super::shown(&path), "daemon_running": daemon_up})
        ))
    } else {
        super::print(&format!("{message_id}\n"))
    }
}

/// Whether squadd answers on the root's control socket.
fn daemon_running(root: &Path) -> bool {
    crate::control::Client::connect(root, Duration::from_secs(2))
        .and_then(|mut c| c.call(crate::control::Method::Ping))
        .is_ok()
}

fn session_list(root: &Path, session: Option<&str>) -> Result<Vec<PathBuf>, String> {
    match session {
        Some(s) => Ok(vec![crate::root::named_session(root, s)?]),
        None => session_dirs(root).map_err(|e| e.to_string()),
    }
}

fn items(root: &Path, agent: &str, session: Option<&str>) -> Result<Vec<Item>, String> {
    let dirs = session_list(root, session)?;
    let mut all: Vec<Item> = dirs.iter().flat_map(|d| inbox::list(d, agent)).collect();
    all.sort_by(|a, b| (!a.unread, &a.name).cmp(&(!b.unread, &b.name)));
    Ok(all)
}

/// A delivered message's text and, when it parses, the message. The
/// delivered copy keeps the message's payload under an inbox name, so it is
/// read as a message payload rather than checked by file name (squadd
/// validated it before delivering).
pub(crate) fn read_message(item: &Item) -> Result<(String, Option<Message>), String> {
    let text = squad_protocol::fsx::read_regular_to_string(
        &item.path,
        squad_protocol::validate::MAX_FILE_BYTES,
    )
    .map_err(|e| format!("{}: {e}", item.path.display()))?;
    let message = squad_protocol::payload::extract(&text)
        .ok()
        .and_then(|p| squad_protocol::depth::from_str::<Message>(p.yaml).ok());
    Ok((text, message))
}

/// Seconds since the message was sent (else delivered), at `now`.
fn age_secs(i: &Item, m: Option<&Message>, now: DateTime<Utc>) -> Option<i64> {
    let sent = m
        .map(|m| m.meta.created_at.with_timezone(&Utc))
        .or_else(|| i.delivered_at.map(DateTime::<Utc>::from))?;
    Some((now - sent).num_seconds().max(0))
}

/// The JSON of an inbox entry: where it is, and what a person reads first
/// (sender, type, subject, task, age); the message fields are null when
/// the delivered file does not parse.
fn item_json(i: &Item, m: Option<&Message>, now: DateTime<Utc>) -> serde_json::Value {
    json!({
        "session": i.session,
        "message_id": i.message_id,
        "priority": i.priority,
        "unread": i.unread,
        "path": super::shown(&i.path),
        "from": m.map(|m| &m.meta.from_agent),
        "type": m.map(|m| &m.kind),
        "subject": m.map(|m| &m.subject),
        "task": m.and_then(|m| m.context.as_ref()).and_then(|c| c.task_id.as_ref()),
        "in_reply_to": m.and_then(|m| m.in_reply_to.as_ref()),
        "created_at": m.map(|m| m.meta.created_at.to_rfc3339()),
        "age_seconds": age_secs(i, m, now),
    })
}

/// One message for a person: a header (priority, type, sender, age,
/// subject; id, session, task, file) and the file as delivered.
fn render_message(
    i: &Item,
    path: &Path,
    text: &str,
    m: Option<&Message>,
    now: DateTime<Utc>,
) -> String {
    let esc = |s: &str| crate::text::escape(s).into_owned();
    let age = age_secs(i, m, now).map_or_else(|| "?".to_string(), crate::text::human_age);
    let head = match m {
        Some(m) => format!(
            "# {} {} from {}, {age} ago: {}\n",
            i.priority,
            m.kind,
            esc(&m.meta.from_agent),
            esc(&m.subject)
        ),
        None => format!("# {} (not a readable message), {age} ago\n", i.priority),
    };
    let task = m
        .and_then(|m| m.context.as_ref())
        .and_then(|c| c.task_id.as_deref())
        .map_or_else(String::new, |t| format!(" about {}", esc(t)));
    format!(
        "{head}# {} in {}{task}{}; {}\n{}",
        esc(&i.message_id),
        esc(&i.session),
        if i.unread { ", unread" } else { "" },
        esc(&super::shown(path)),
        text
    )
}

/// Runs a `squadctl inbox` subcommand.
pub(crate) fn inbox_cmd(root_arg: Option<&Path>, cmd: InboxCommand) -> u8 {
    let root = match root::resolve(root_arg) {
        Ok(r) => root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let agent = match &cmd {
        InboxCommand::List(a) => &a.agent,
        InboxCommand::Next(a) => &a.agent,
        InboxCommand::Ack(a) | InboxCommand::Show(a) => match a.ids.as_slice() {
            [agent, _] => agent,
            _ => {
                let verb = if matches!(cmd, InboxCommand::Ack(_)) {
                    "ack"
                } else {
                    "show"
                };
                return match std::env::var("SQUAD_AGENT") {
                    Ok(agent) => {
                        let mut ids = vec![agent];
                        ids.extend(a.ids.iter().cloned());
                        let a = AckArgs {
                            ids,
                            session: a.session.clone(),
                            json: a.json,
                        };
                        inbox_cmd(
                            root_arg,
                            if verb == "ack" {
                                InboxCommand::Ack(a)
                            } else {
                                InboxCommand::Show(a)
                            },
                        )
                    }
                    Err(_) => super::fail(format!(
                        "inbox {verb}: name the agent (`inbox {verb} AGENT MESSAGE_ID`) or set SQUAD_AGENT"
                    )),
                };
            }
        },
    };
    if !IdKind::Agent.matches(agent) {
        return super::fail(format!("`{agent}` is not a valid agent name"));
    }
    match cmd {
        InboxCommand::List(a) => list(&root, &a),
        InboxCommand::Next(a) => next(&root, a),
        InboxCommand::Show(a) => show(&root, &a),
        InboxCommand::Ack(a) => {
            let (agent, message_id) = match a.ids.as_slice() {
                [agent, id] => (agent.as_str(), id.as_str()),
                _ => return super::fail("inbox ack: AGENT MESSAGE_ID"),
            };
            let found = match items(&root, agent, a.session.as_deref()) {
                Ok(list) => list
                    .into_iter()
                    .find(|i| i.unread && i.message_id == message_id),
                Err(e) => return super::fail(e),
            };
            let Some(item) = found else {
                super::eprint_text(&format!(
                    "squadctl: no unread message {message_id} for {agent}\n"
                ));
                return exit::PROBLEMS;
            };
            match inbox::ack(&item) {
                Ok(to) if a.json => super::print(&format!(
                    "{:#}\n",
                    json!({"acknowledged": item.message_id, "path": to.display().to_string()})
                )),
                Ok(_) => super::print(&format!("acknowledged {}\n", item.message_id)),
                Err(e) => super::fail(e),
            }
        }
    }
}

fn list(root: &Path, a: &InboxArgs) -> u8 {
    let (list, waiting) = match items(root, &a.agent, a.session.as_deref()).and_then(|l| {
        let dirs = session_list(root, a.session.as_deref())?;
        let waiting = undelivered(&dirs, &a.agent, &l);
        Ok((l, waiting))
    }) {
        Ok(x) => x,
        Err(e) => return super::fail(e),
    };
    if a.json {
        let waiting: Vec<serde_json::Value> = waiting
            .iter()
            .map(|w| {
                json!({
                    "session": w.session,
                    "message_id": w.message_id,
                    "priority": w.priority,
                    "from": w.from,
                    "path": super::shown(&w.path),
                })
            })
            .collect();
        let now = Utc::now();
        let messages: Vec<serde_json::Value> = list
            .iter()
            .map(|i| item_json(i, read_message(i).ok().and_then(|(_, m)| m).as_ref(), now))
            .collect();
        return super::print(&format!(
            "{:#}\n",
            json!({"messages": messages, "not_delivered": waiting})
        ));
    }
    let mut out = String::new();
    if list.is_empty() && waiting.is_empty() {
        out.push_str(&format!("{} has no messages\n", a.agent));
    }
    let esc = |s: &str| crate::text::escape(s).into_owned();
    let now = Utc::now();
    for i in &list {
        let m = read_message(i).ok().and_then(|(_, m)| m);
        let age =
            age_secs(i, m.as_ref(), now).map_or_else(|| "?".to_string(), crate::text::human_age);
        let what = match &m {
            Some(m) => format!(
                "{:<12} {:<12} {}",
                esc(&m.meta.from_agent),
                m.kind.to_string(),
                esc(&m.subject)
            ),
            None => "(not a readable message)".to_string(),
        };
        out.push_str(&format!(
            "{} {:<8} {age:>4}  {what}  [{} {}]\n",
            if i.unread { "*" } else { " " },
            i.priority,
            esc(&i.message_id),
            esc(&i.session),
        ));
    }
    if !list.is_empty() {
        out.push_str(&format!(
            "(* unread; `squadctl inbox show {} ID` reads one without acknowledging it, `squadctl reply ID` answers)\n",
            esc(&a.agent)
        ));
    }
    if !waiting.is_empty() {
        let why = if daemon_running(root) {
            "squadd delivers them in priority order"
        } else {
            "squadd is not running: they are delivered when it runs"
        };
        out.push_str(&format!("not delivered yet ({why}):\n"));
        for w in &waiting {
            out.push_str(&format!(
                "  {:<8} {}  from {}  {}  {}\n",
                w.priority,
                esc(&w.message_id),
                esc(&w.from),
                esc(&w.session),
                esc(&super::shown(&w.path))
            ));
        }
    }
    super::print_human(&out)
}

/// The directories whose changes can mean a new message in `agent`'s
/// inbox: the sessions directory (new sessions) and, per session, the places
/// an inbox appears in (the session, inbox/, the agent's inbox and its new/).
/// Watched by `inbox next --wait` and by `squadctl mcp`'s notifications.
pub(crate) fn inbox_watch_dirs(root: &Path, agent: &str) -> Vec<PathBuf> {
    let mut dirs = vec![sessions_dir(root)];
    for dir in session_dirs(root).unwrap_or_default() {
        let agent_inbox = inbox::inbox_dir(&dir, agent);
        dirs.extend([
            dir.clone(),
            dir.join("inbox"),
            agent_inbox.join("new"),
            agent_inbox,
        ]);
    }
    dirs
}

fn next(root: &Path, a: NextArgs) -> u8 {
    let wait = match a
        .wait
        .as_deref()
        .map(squad_policies::duration::parse_duration)
    {
        Some(Ok(d)) => d,
        Some(Err(e)) => return super::fail(e),
        None => Duration::ZERO,
    };
    // A wait too long for the clock is a wait without end.
    let deadline = Instant::now().checked_add(wait);
    let mut waiter = (!wait.is_zero()).then(|| super::wait::Waiter::new(Vec::new()));
    loop {
        // Watch first, then look: a message that lands in between wakes the
        // wait instead of being missed. Directories that appeared since are
        // added on every turn.
        if let Some(waiter) = &mut waiter {
            waiter.add(inbox_watch_dirs(root, &a.agent));
        }
        let list = match items(root, &a.agent, a.session.as_deref()) {
            Ok(l) => l,
            Err(e) => return super::fail(e),
        };
        if let Some(item) = list.into_iter().find(|i| i.unread) {
            let (body, message) = read_message(&item).unwrap_or_default();
            let now = Utc::now();
            if a.peek {
                return print_one(&item, &body, message.as_ref(), now, a.json);
            }
            match inbox::ack(&item) {
                // Someone else took it first: look again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return super::fail(e),
                Ok(to) => {
                    // This call acknowledged it: it is read now.
                    let read = Item {
                        unread: false,
                        path: to.clone(),
                        ..item
                    };
                    return print_one(&read, &body, message.as_ref(), now, a.json);
                }
            }
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            super::eprint_text(&format!("squadctl: no unread message for {}\n", a.agent));
            return exit::PROBLEMS;
        }
        let Some(waiter) = &waiter else {
            super::eprint_text(&format!("squadctl: no unread message for {}\n", a.agent));
            return exit::PROBLEMS;
        };
        // A rare look without a change, as a safety net.
        waiter.wait(
            deadline
                .map_or(Duration::MAX, |d| d - now)
                .min(Duration::from_secs(30)),
        );
        // A cancelled call (its MCP client gave up) acknowledges nothing
        // it would not be told about.
        if super::wait::cancelled() {
            super::eprint_text(&format!("squadctl: no unread message for {}\n", a.agent));
            return exit::PROBLEMS;
        }
    }
}

/// `inbox show [AGENT] ID`: one message, read or unread, printed without
/// acknowledging it.
fn show(root: &Path, a: &AckArgs) -> u8 {
    let (agent, message_id) = match a.ids.as_slice() {
        [agent, id] => (agent.as_str(), id.as_str()),
        _ => return super::fail("inbox show: AGENT MESSAGE_ID"),
    };
    let item = match items(root, agent, a.session.as_deref()) {
        Ok(list) => list.into_iter().find(|i| i.message_id == message_id),
        Err(e) => return super::fail(e),
    };
    let Some(item) = item else {
        return super::fail(format!(
            "no message {} in {}'s inbox; `squadctl inbox list {}` shows them",
            crate::text::escape(message_id),
            agent,
            agent
        ));
    };
    let (body, message) = match read_message(&item) {
        Ok(x) => x,
        Err(e) => return super::fail(e),
    };
    print_one(&item, &body, message.as_ref(), Utc::now(), a.json)
}

/// Prints one inbox entry with its content: as JSON (the entry's fields
/// plus `content`) or for people.
fn print_one(
    item: &Item,
    body: &str,
    message: Option<&Message>,
    now: DateTime<Utc>,
    json: bool,
) -> u8 {
    if json {
        let mut v = item_json(item, message, now);
        v["content"] = json!(body);
        return super::print(&format!("{v:#}\n"));
    }
    super::print_human(&render_message(item, &item.path, body, message, now))
}
