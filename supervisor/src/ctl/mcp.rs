// Over 800 lines: one MCP server with one tool per agent command (each a
// schema and the argv it runs), read best as one table. The split waiting
// is the Streamable HTTP transport (`--http`) into its own file (issue 42),
// after issues 38 and 40 land their changes here.
//! `squadctl mcp`: the agent commands as an MCP server over stdio (or
//! Streamable HTTP on loopback), for one agent in one project (docs/mcp.md).
//!
//! Every tool runs the `squadctl` command it mirrors through
//! [`super::run_captured`]: the same parser, the same checks, the same
//! refusal text. A refusal (non-zero exit) is returned as a tool error
//! (`isError`) carrying what the command prints on stderr.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{
    ErrorData as McpError, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Serve the agent commands as MCP tools over stdio (or HTTP on loopback).
///
/// Runs an MCP server (JSON-RPC on stdin/stdout, or Streamable HTTP with
/// `--http 127.0.0.1:PORT`) for one agent in one
/// project: `next`, `task_show`, `task_list`, `progress`, `report_error`,
/// `send`, `reply`, `inbox_list`, `inbox_read`, `inbox_show`, `inbox_ack`,
/// `lock_acquire`, `lock_release`, `lock_list`, `memory_add`,
/// `memory_query`, and the lead's `task_new`, `session_phase`,
/// `session_gate`, `session_complete`, `session_fail`. Each tool runs the
/// squadctl command of the same name, so its rules and refusals are the
/// command's; a refusal is a tool error with the command's text.
///
/// `squadctl mcp --agent A install --claude` pins the agent in the installed
/// entry; docs/mcp.md has the tools, resources and notifications.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The agent the server acts for.
    #[arg(long, env = "SQUAD_AGENT", value_name = "A")]
    pub agent: Option<String>,
    /// The session (default: the one active session).
    #[arg(long, env = "SQUAD_SESSION", value_name = "ID")]
    pub session: Option<String>,
    /// Serve Streamable HTTP on this loopback address (e.g. `127.0.0.1:8765`;
    /// port 0 picks a free one) instead of stdio.
    ///
    /// Only 127.0.0.1 and ::1 are accepted, requests must name a loopback
    /// `Host`, browser requests (any `Origin` header) are refused, and every
    /// request must carry `Authorization: Bearer <token>`: a new token at
    /// every start, in `.squad/run/mcp/<agent>-<port>.token` (mode 0600).
    /// The address and the token's file are printed on stderr (`listening
    /// on http://…/mcp (token in …)`).
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<String>,
    /// Install into an agent CLI's MCP configuration instead of serving.
    #[command(subcommand)]
    pub command: Option<McpCommand>,
}

/// `squadctl mcp …`.
#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Add the server to an agent CLI's MCP configuration (merging).
    Install(InstallArgs),
    /// Print the current bearer token of this agent's `--http` server.
    ///
    /// Reads `.squad/run/mcp/<agent>-<port>.token`, which the server at URL
    /// wrote at its start (a new token at every start). Agent CLIs run it
    /// when they connect: Claude Code as its `headersHelper` (`--headers`),
    /// and for Codex and Gemini CLI it fills `SQUAD_MCP_TOKEN`. Fails when
    /// no server of the agent runs on that port.
    Token(http_client::TokenArgs),
}

/// Arguments of `mcp install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Claude Code: `.mcp.json` at the project root (`~/.claude.json` with `--user`).
    ///
    /// The entry runs this squadctl (absolute path) with `mcp`, plus
    /// `--agent A` when `squadctl mcp --agent A install` names one;
    /// otherwise the agent comes from `SQUAD_AGENT`, which runners set.
    #[arg(long)]
    pub claude: bool,
    /// Codex CLI: `[mcp_servers.squad]` in `.codex/config.toml` (a trusted
    /// project's), or `$CODEX_HOME/config.toml` (`~/.codex`) with `--user`.
    #[arg(long)]
    pub codex: bool,
    /// GitHub Copilot CLI: `~/.copilot/mcp-config.json` (per user only:
    /// needs `--user`).
    #[arg(long)]
    pub copilot: bool,
    /// Gemini CLI: `mcpServers.squad` in `.gemini/settings.json` (a trusted
    /// workspace's), or `~/.gemini/settings.json` with `--user`; `trust:
    /// true`, so headless runs call its tools without a confirmation.
    #[arg(long)]
    pub gemini: bool,
    /// Install for the user instead of the project.
    #[arg(long)]
    pub user: bool,
    /// Install an entry for the running `squadctl mcp --agent A --http`
    /// server at URL (e.g. `http://127.0.0.1:8765/mcp`) instead of stdio.
    ///
    /// Needs `--agent`. The entry never holds the token (new at every start
    /// of the server) but where it is read at connection: Claude Code runs
    /// `squadctl mcp token --headers` as its `headersHelper`; Codex and
    /// Gemini CLI read it from `SQUAD_MCP_TOKEN` (set it with `squadctl mcp
    /// --agent A token URL`). Copilot CLI is refused: it takes fixed
    /// headers only.
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `squadctl mcp`.
pub(crate) fn run(root_arg: Option<&Path>, args: McpArgs) -> u8 {
    match args.command {
        Some(McpCommand::Install(i)) => return install::install(root_arg, args.agent, i),
        Some(McpCommand::Token(t)) => {
            return http_client::token(root_arg, args.agent.as_deref(), &t);
        }
        None => {}
    }
    let Some(agent) = args.agent else {
        return super::fail("mcp: name the agent with --agent or SQUAD_AGENT");
    };
    if !squad_protocol::IdKind::Agent.matches(&agent) {
        return super::fail(format!("mcp: `{agent}` is not a valid agent name"));
    }
    let http = match args
        .http
        .as_deref()
        .map(super::mcp_http::loopback_addr)
        .transpose()
    {
        Ok(a) => a,
        Err(e) => return super::fail(e),
    };
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return super::fail(format!("mcp: cannot start the runtime: {e}")),
    };
    let server = Squad::new(root.clone(), agent.clone(), args.session);
    let result: Result<(), String> = runtime.block_on(async move {
        if let Some(addr) = http {
            return super::mcp_http::serve(server, addr, &root, &agent).await;
        }
        let (read, write) = rmcp::transport::stdio_pipes();
        let transport = super::mcp_stdio::Stdio::new(read, write, server.closing.clone());
        let service = server.serve(transport).await.map_err(|e| e.to_string())?;
        service.waiting().await.map_err(|e| e.to_string())?;
        Ok(())
    });
    // The client is gone and its calls were cancelled: their commands end
    // at once, and nothing keeps the process beyond a moment.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => crate::exit::OK,
        Err(e) => super::fail(format!("mcp: {e}")),
    }
}

/// The server: one agent in one project.
#[derive(Debug, Clone)]
pub(crate) struct Squad {
    root: PathBuf,
    agent: String,
    session: Option<String>,
    /// The commands running at once, at most [`MAX_CALLS`] (shared by every
    /// session of an HTTP server): more calls wait for one to end.
    pool: Arc<tokio::sync::Semaphore>,
    /// Set when the client has gone: every call in flight ends.
    pub(crate) closing: Arc<tokio::sync::watch::Sender<bool>>,
}

/// How many tool calls run their command at once, per server process: a
/// client cannot exhaust the process's threads with calls it gave up on
/// (those end at once anyway: see [`Squad::until_cancelled`]).
const MAX_CALLS: usize = 16;

/// Cancels a command running for a call when the call's future goes
/// (answered, cancelled by the client, or the client gone).
struct CancelOnDrop(Arc<super::wait::Cancel>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Builds a command line from required and optional parts.
#[derive(Default)]
struct Argv(Vec<String>);

impl Argv {
    fn new(parts: &[&str]) -> Self {
        Argv(parts.iter().map(|s| s.to_string()).collect())
    }
    fn arg(mut self, v: impl Into<String>) -> Self {
        self.0.push(v.into());
        self
    }
    fn flag(mut self, name: &str, on: Option<bool>) -> Self {
        if on == Some(true) {
            self.0.push(name.to_string());
        }
        self
    }
    /// `--name=VALUE`, one word: a value is never read as an option,
    /// whatever it starts with (a Markdown bullet `- item`, `--force`).
    fn opt(mut self, name: &str, v: Option<impl ToString>) -> Self {
        if let Some(v) = v {
            self.0.push(format!("{name}={}", v.to_string()));
        }
        self
    }
    fn many(mut self, name: &str, vs: Option<Vec<String>>) -> Self {
        for v in vs.unwrap_or_default() {
            self.0.push(format!("{name}={v}"));
        }
        self
    }
}

impl Squad {
    /// A server for `agent` in the project at `root`.
    pub(crate) fn new(root: PathBuf, agent: String, session: Option<String>) -> Self {
        Squad {
            root,
            agent,
            session,
            pool: Arc::new(tokio::sync::Semaphore::new(MAX_CALLS)),
            closing: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }

    /// `work` (a call's handling), unless the client cancels the call
    /// (`cancelled`) or goes away first: then `work` is dropped, which
    /// cancels its command ([`CancelOnDrop`]), and the call ends now.
    async fn until_cancelled<T>(
        &self,
        cancelled: impl std::future::Future<Output = ()>,
        work: impl std::future::Future<Output = Result<T, McpError>>,
    ) -> Result<T, McpError> {
        let mut closing = self.closing.subscribe();
        tokio::select! {
            r = work => r,
            () = cancelled => Err(McpError::internal_error("the call was cancelled", None)),
            _ = closing.wait_for(|gone| *gone) => {
                Err(McpError::internal_error("the client has gone", None))
            }
        }
    }

    /// Runs a squadctl command line for this project on the blocking pool
    /// (commands do file I/O and may wait on locks) and turns its outcome
    /// into a tool result.
    async fn exec(&self, argv: Argv) -> Result<CallToolResult, McpError> {
        let captured = self.capture(argv).await?;
        Ok(to_result(captured))
    }

    async fn capture(&self, argv: Argv) -> Result<super::Captured, McpError> {
        let mut full = vec!["--root".to_string(), self.root.display().to_string()];
        full.extend(argv.0);
        let agent = self.agent.clone();
        let permit =
            self.pool.clone().acquire_owned().await.map_err(|e| {
                McpError::internal_error(format!("the server is stopping: {e}"), None)
            })?;
        let cancel = Arc::new(super::wait::Cancel::default());
        let _cancel_on_drop = CancelOnDrop(cancel.clone());
        tokio::task::spawn_blocking(move || {
            // The permit is held as long as the command runs, not the call.
            let _permit = permit;
            super::wait::cancellable(cancel, || super::run_captured(&agent, &full))
        })
        .await
        .map_err(|e| McpError::internal_error(format!("the command did not finish: {e}"), None))
    }

    fn session_or(&self, s: Option<String>) -> Option<String> {
        s.or_else(|| self.session.clone())
    }
}

/// Exit 0: the command's stdout; otherwise a tool error with its stderr
/// (and any JSON it printed), the text the CLI shows.
fn to_result(c: super::Captured) -> CallToolResult {
    if c.code == crate::exit::OK {
        let text = if c.stdout.is_empty() {
            "ok\n".to_string()
        } else {
            c.stdout
        };
        CallToolResult::success(vec![ContentBlock::text(text)])
    } else {
        let mut text = c.stderr;
        if !c.stdout.is_empty() {
            text.push_str(&c.stdout);
        }
        CallToolResult::error(vec![ContentBlock::text(text)])
    }
}

/// Input of tools that only take an optional session.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SessionOnly {
    /// The session (default: the server's, else the one active session).
    pub session: Option<String>,
}

/// Input of `next` and `inbox_read`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct Waiting {
    /// The session (default: the server's, else the one active session).
    pub session: Option<String>,
    /// Wait this long (e.g. `30s`, `5m`) for one instead of answering at once.
    pub wait: Option<String>,
}

/// Input of `inbox_read`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct InboxRead {
    /// The session (default: the server's, else the one active session).
    pub session: Option<String>,
    /// Wait this long (e.g. `30s`, `5m`) for one instead of answering at once.
    pub wait: Option<String>,
    /// Leave it unread (do not acknowledge it).
    pub peek: Option<bool>,
}

/// Input of `task_show`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct TaskShow {
    /// The task id (`task_…`).
    pub task: String,
    /// The session (default: the server's, else the one active session).
    pub session: Option<String>,
}

/// Input of `task_list`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct TaskList {
    /// The session (default: the server's, else the one active session).
    pub session: Option<String>,
    /// Only this assignee's tasks.
    pub agent: Option<String>,
    /// Only tasks in these derived states.
    pub status: Option<Vec<String>>,
}

/// Input of `progress`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct Progress {
    /// The task.
    pub task: String,
    /// The session.
    pub session: Option<String>,
    /// pending, in_progress, completed or blocked (default: as before).
    pub status: Option<String>,
    /// 0 to 100.
    pub percent: Option<u8>,
    /// What you are doing now.
    pub action: Option<String>,
    /// Steps done (added).
    pub done: Option<Vec<String>>,
    /// Steps left (replace the remaining steps).
    pub todo: Option<Vec<String>>,
    /// Files created or changed (added).
    pub artifact: Option<Vec<String>>,
    /// What blocks you (with status blocked).
    pub blocker: Option<String>,
    /// Who can unblock you.
    pub needs: Option<String>,
    /// Decisions, TYPE:TEXT (added).
    pub decision: Option<Vec<String>>,
    /// Check results, NAME=passing|failing|not_run.
    pub check: Option<Vec<String>>,
}

/// Input of `report_error`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct ReportError {
    /// The task that failed.
    pub task: Option<String>,
    /// The session.
    pub session: Option<String>,
    /// critical, error or warning.
    pub severity: String,
    /// Error class (build, test, dependency, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// The error.
    pub message: String,
    /// Project-relative path where it happened.
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<u64>,
    /// 1-based column.
    pub column: Option<u64>,
    /// What you tried.
    pub tried: Option<Vec<String>>,
    /// Who should step in.
    pub needs: Option<String>,
}

/// Input of `send`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SendInput {
    /// The recipient agent (or `all`, as `squadctl send --to`).
    pub to: String,
    /// critical, high, medium or low.
    pub priority: String,
    /// question, request or notification.
    #[serde(rename = "type")]
    pub kind: String,
    /// The subject line.
    pub subject: String,
    /// The body.
    pub message: String,
    /// The task it is about.
    pub task: Option<String>,
    /// When an answer is needed (RFC 3339 or a duration).
    pub response_by: Option<String>,
    /// The message id this answers.
    pub in_reply_to: Option<String>,
    /// The session.
    pub session: Option<String>,
    /// Send to an agent the project does not know yet (otherwise refused
    /// as a likely typo, naming the agent meant).
    pub new_agent: Option<bool>,
}

/// Input of `reply`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct Reply {
    /// The id of the message in your inbox you answer.
    pub message_id: String,
    /// The body.
    pub message: String,
    /// critical, high, medium or low (default medium).
    pub priority: Option<String>,
    /// question, request or notification (default notification).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// The session.
    pub session: Option<String>,
}

/// Input of `inbox_ack` and `inbox_show`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct InboxAck {
    /// The message id.
    pub message_id: String,
    /// The session.
    pub session: Option<String>,
}

/// Input of `lock_acquire`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct LockAcquire {
    /// Project-relative paths or globs.
    pub targets: Vec<String>,
    /// The task the lock is for.
    pub task: String,
    /// The session.
    pub session: Option<String>,
    /// How long (e.g. `30m`; default from the policy).
    pub ttl: Option<String>,
    /// A shared (read) lock.
    pub shared: Option<bool>,
}

/// Input of `lock_release`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct LockRelease {
    /// The paths or globs to release.
    pub targets: Option<Vec<String>>,
    /// Release every lock you hold.
    pub all: Option<bool>,
}

/// Input of `memory_add`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct MemoryAdd {
    /// The entry type (decision, learning, …; `squadctl memory add --help`).
    #[serde(rename = "type")]
    pub kind: String,
    /// One line.
    pub summary: String,
    /// Scope.
    pub scope: Option<String>,
    /// Comma-separated tags.
    pub tags: Option<String>,
    /// Details.
    pub details: Option<String>,
    /// Why.
    pub rationale: Option<String>,
    /// The timestamp of the entry this supersedes.
    pub supersedes: Option<String>,
    /// Related links.
    pub related: Option<Vec<String>>,
    /// When the entry expires.
    pub expires: Option<String>,
}

/// Input of `memory_query`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct MemoryQuery {
    /// Entry type.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Author.
    pub author: Option<String>,
    /// Scope.
    pub scope: Option<String>,
    /// Tag.
    pub tag: Option<String>,
    /// After this time.
    pub after: Option<String>,
    /// Before this time.
    pub before: Option<String>,
    /// Text to find.
    pub text: Option<String>,
    /// Only this agent's history.
    pub agent: Option<String>,
}

/// Input of `task_new` (lead).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct TaskNew {
    /// The assignee.
    pub agent: String,
    /// What to do.
    pub instruction: String,
    /// The task id (default: the next free `task_NNN`).
    pub id: Option<String>,
    /// The session.
    pub session: Option<String>,
    /// Tasks that must complete first.
    pub requires: Option<Vec<String>>,
    /// Tasks that wait for this one.
    pub blocks: Option<Vec<String>>,
    /// Globs the task may change.
    pub allow: Option<Vec<String>>,
    /// Globs the task must not change.
    pub forbid: Option<Vec<String>>,
    /// critical, high, medium or low.
    pub priority: Option<String>,
    /// Overdue after (e.g. `30m`).
    pub timeout: Option<String>,
    /// Success criteria.
    pub criterion: Option<Vec<String>>,
}

/// Input of `session_phase` (lead).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SessionPhase {
    /// The session directory name or id.
    pub session: String,
    /// The phase.
    pub phase: String,
}

/// Input of `session_gate` (lead).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SessionGate {
    /// The session directory name or id.
    pub session: String,
    /// The gate (a phase name).
    pub gate: String,
    /// The gate status.
    pub status: String,
}

/// Input of `session_complete` (lead).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SessionComplete {
    /// The session directory name or id.
    pub session: String,
    /// Complete a session that was marked failed.
    pub force: Option<bool>,
}

/// Input of `session_fail` (lead).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SessionFail {
    /// The session directory name or id.
    pub session: String,
    /// Why.
    pub reason: String,
}

#[tool_router]
impl Squad {
    #[tool(description = "Your next ready task (squadctl next).")]
    async fn next(&self, Parameters(p): Parameters<Waiting>) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["next", "--json", "--agent", &self.agent])
            .opt("--session", self.session_or(p.session))
            .opt("--wait", p.wait);
        self.exec(a).await
    }

    #[tool(description = "One task: plan, progress, readiness, locks (squadctl task show).")]
    async fn task_show(
        &self,
        Parameters(p): Parameters<TaskShow>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["task", "show", "--json"])
            .opt("--session", self.session_or(p.session))
            .arg("--")
            .arg(p.task);
        self.exec(a).await
    }

    #[tool(description = "The tasks of a session with their derived state (squadctl task list).")]
    async fn task_list(
        &self,
        Parameters(p): Parameters<TaskList>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["task", "list", "--json"])
            .opt("--session", self.session_or(p.session))
            .opt("--agent", p.agent)
            .many("--status", p.status);
        self.exec(a).await
    }

    #[tool(
        description = "Report progress on your task (squadctl progress); status completed finishes it."
    )]
    async fn progress(
        &self,
        Parameters(p): Parameters<Progress>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["progress", "--json", "--agent", &self.agent])
            .opt("--task", Some(p.task))
            .opt("--session", self.session_or(p.session))
            .opt("--status", p.status)
            .opt("--percent", p.percent)
            .opt("--action", p.action)
            .many("--done", p.done)
            .many("--todo", p.todo)
            .many("--artifact", p.artifact)
            .opt("--blocker", p.blocker)
            .opt("--needs", p.needs)
            .many("--decision", p.decision)
            .many("--check", p.check);
        self.exec(a).await
    }

    #[tool(description = "Report an error you hit (squadctl report-error).")]
    async fn report_error(
        &self,
        Parameters(p): Parameters<ReportError>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["report-error", "--json", "--agent", &self.agent])
            .opt("--task", p.task)
            .opt("--session", self.session_or(p.session))
            .opt("--severity", Some(p.severity))
            .opt("--type", Some(p.kind))
            .opt("--message", Some(p.message))
            .opt("--file", p.file)
            .opt("--line", p.line)
            .opt("--column", p.column)
            .many("--tried", p.tried)
            .opt("--needs", p.needs);
        self.exec(a).await
    }

    #[tool(description = "Send a message to another agent (squadctl send).")]
    async fn send(&self, Parameters(p): Parameters<SendInput>) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["send", "--json", "--from", &self.agent])
            .opt("--to", Some(p.to))
            .opt("--priority", Some(p.priority))
            .opt("--type", Some(p.kind))
            .opt("--subject", Some(p.subject))
            .opt("--message", Some(p.message))
            .opt("--task", p.task)
            .opt("--response-by", p.response_by)
            .opt("--in-reply-to", p.in_reply_to)
            .opt("--session", self.session_or(p.session))
            .flag("--new-agent", p.new_agent);
        self.exec(a).await
    }

    #[tool(
        description = "Answer a message in your inbox (squadctl reply): a send to its sender about its task, with in_reply_to set."
    )]
    async fn reply(&self, Parameters(p): Parameters<Reply>) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["reply", "--json", "--from", &self.agent])
            .opt("--message", Some(p.message))
            .opt("--priority", p.priority)
            .opt("--type", p.kind)
            .opt("--session", self.session_or(p.session))
            .arg("--")
            .arg(p.message_id);
        self.exec(a).await
    }

    #[tool(description = "Your delivered messages, unread and read (squadctl inbox list).")]
    async fn inbox_list(
        &self,
        Parameters(p): Parameters<SessionOnly>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["inbox", "list", "--json", &self.agent])
            .opt("--session", self.session_or(p.session));
        self.exec(a).await
    }

    #[tool(
        description = "Read and acknowledge your most urgent unread message (squadctl inbox next), optionally waiting for one; peek leaves it unread."
    )]
    async fn inbox_read(
        &self,
        Parameters(p): Parameters<InboxRead>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["inbox", "next", "--json", &self.agent])
            .opt("--session", self.session_or(p.session))
            .opt("--wait", p.wait)
            .flag("--peek", p.peek);
        self.exec(a).await
    }

    #[tool(
        description = "One message of your inbox by id, read or unread, without acknowledging it (squadctl inbox show)."
    )]
    async fn inbox_show(
        &self,
        Parameters(p): Parameters<InboxAck>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["inbox", "show", "--json"])
            .opt("--session", self.session_or(p.session))
            .arg("--")
            .arg(&self.agent)
            .arg(p.message_id);
        self.exec(a).await
    }

    #[tool(description = "Acknowledge (mark read) a message in your inbox (squadctl inbox ack).")]
    async fn inbox_ack(
        &self,
        Parameters(p): Parameters<InboxAck>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["inbox", "ack", "--json"])
            .opt("--session", self.session_or(p.session))
            .arg("--")
            .arg(&self.agent)
            .arg(p.message_id);
        self.exec(a).await
    }

    #[tool(
        description = "Take advisory locks on paths or globs for a task (squadctl lock acquire); refused on conflict."
    )]
    async fn lock_acquire(
        &self,
        Parameters(p): Parameters<LockAcquire>,
    ) -> Result<CallToolResult, McpError> {
        let mut a = Argv::new(&["lock", "acquire", "--json", "--agent", &self.agent])
            .opt("--task", Some(p.task))
            .opt("--session", self.session_or(p.session))
            .opt("--ttl", p.ttl)
            .flag("--shared", p.shared)
            .arg("--");
        a.0.extend(p.targets);
        self.exec(a).await
    }

    #[tool(description = "Release your locks (squadctl lock release).")]
    async fn lock_release(
        &self,
        Parameters(p): Parameters<LockRelease>,
    ) -> Result<CallToolResult, McpError> {
        let mut a = Argv::new(&["lock", "release", "--json", "--agent", &self.agent])
            .flag("--all", p.all)
            .arg("--");
        a.0.extend(p.targets.unwrap_or_default());
        self.exec(a).await
    }

    #[tool(description = "The live locks of the project (squadctl lock list).")]
    async fn lock_list(&self) -> Result<CallToolResult, McpError> {
        self.exec(Argv::new(&["lock", "list", "--json"])).await
    }

    #[tool(description = "Add a team-memory entry (squadctl memory add).")]
    async fn memory_add(
        &self,
        Parameters(p): Parameters<MemoryAdd>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["memory", "add", "--author", &self.agent])
            .opt("--type", Some(p.kind))
            .opt("--summary", Some(p.summary))
            .opt("--scope", p.scope)
            .opt("--tags", p.tags)
            .opt("--details", p.details)
            .opt("--rationale", p.rationale)
            .opt("--supersedes", p.supersedes)
            .many("--related", p.related)
            .opt("--expires", p.expires);
        self.exec(a).await
    }

    #[tool(description = "Query team memory (squadctl memory query).")]
    async fn memory_query(
        &self,
        Parameters(p): Parameters<MemoryQuery>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["memory", "query", "--json"])
            .opt("--type", p.kind)
            .opt("--author", p.author)
            .opt("--scope", p.scope)
            .opt("--tag", p.tag)
            .opt("--after", p.after)
            .opt("--before", p.before)
            .opt("--text", p.text)
            .opt("--agent", p.agent);
        self.exec(a).await
    }

    #[tool(
        description = "Lead: assign a task (squadctl task new); refuses duplicate ids, unknown dependencies and cycles."
    )]
    async fn task_new(
        &self,
        Parameters(p): Parameters<TaskNew>,
    ) -> Result<CallToolResult, McpError> {
        let a = Argv::new(&["task", "new", "--json"])
            .opt("--agent", Some(p.agent))
            .opt("--instruction", Some(p.instruction))
            .opt("--id", p.id)
            .opt("--session", self.session_or(p.session))
            .many("--requires", p.requires)
            .many("--blocks", p.blocks)
            .many("--allow", p.allow)
            .many("--forbid", p.forbid)
            .opt("--priority", p.priority)
            .opt("--timeout", p.timeout)
            .many("--criterion", p.criterion);
        self.exec(a).await
    }

    #[tool(description = "Lead: set the session's phase (squadctl session phase).")]
    async fn session_phase(
        &self,
        Parameters(p): Parameters<SessionPhase>,
    ) -> Result<CallToolResult, McpError> {
        self.exec(Argv::new(&[
            "session", "phase", "--json", "--", &p.session, &p.phase,
        ]))
        .await
    }

    #[tool(description = "Lead: set one validation gate (squadctl session gate).")]
    async fn session_gate(
        &self,
        Parameters(p): Parameters<SessionGate>,
    ) -> Result<CallToolResult, McpError> {
        self.exec(Argv::new(&[
            "session", "gate", "--json", "--", &p.session, &p.gate, &p.status,
        ]))
        .await
    }

    #[tool(description = "Lead: mark the session completed (squadctl session complete).")]
    async fn session_complete(
        &self,
        Parameters(p): Parameters<SessionComplete>,
    ) -> Result<CallToolResult, McpError> {
        self.exec(
            Argv::new(&["session", "complete", "--json"])
                .flag("--force", p.force)
                .arg("--")
                .arg(p.session),
        )
        .await
    }

    #[tool(description = "Lead: mark the session failed (squadctl session fail).")]
    async fn session_fail(
        &self,
        Parameters(p): Parameters<SessionFail>,
    ) -> Result<CallToolResult, McpError> {
        self.exec(Argv::new(&[
            "session", "fail", "--json", "--reason", &p.reason, "--", &p.session,
        ]))
        .await
    }
}

/// The resources: (URI, name, description).
const RESOURCES: [(&str, &str, &str); 4] = [
    (
        INBOX_URI,
        "inbox",
        "Your delivered messages, unread and read (inbox list --json).",
    ),
    (
        TASKS_URI,
        "tasks",
        "Your task assignments with their derived state (task list --agent --json).",
    ),
    (
        "squad://agent/skills",
        "skills",
        "Your skills' <available_skills> prompt (skills prompt --agent).",
    ),
    (
        "squad://sessions",
        "sessions",
        "The sessions: status, phase, done/total tasks (session list --json).",
    ),
];
const INBOX_URI: &str = "squad://agent/inbox";
const TASKS_URI: &str = "squad://agent/tasks";

impl Squad {
    /// The command line that renders a resource.
    fn resource_argv(&self, uri: &str) -> Option<Argv> {
        let session = self.session.clone();
        Some(match uri {
            INBOX_URI => {
                Argv::new(&["inbox", "list", "--json", &self.agent]).opt("--session", session)
            }
            TASKS_URI => Argv::new(&["task", "list", "--json", "--agent", &self.agent])
                .opt("--session", session),
            "squad://agent/skills" => Argv::new(&["skills", "prompt", "--agent", &self.agent]),
            "squad://sessions" => Argv::new(&["session", "list", "--json"]),
            _ => return None,
        })
    }

    /// What the notification thread compares between wake-ups: the unread
    /// message ids and the ready task ids of this agent.
    fn watch_state(&self) -> (Vec<String>, Vec<String>) {
        let run = |argv: Argv| {
            let mut full = vec!["--root".to_string(), self.root.display().to_string()];
            full.extend(argv.0);
            super::run_captured(&self.agent, &full)
        };
        let ids = |c: super::Captured, list: &str, id: &str, keep: &str| -> Vec<String> {
            let v: serde_json::Value = serde_json::from_str(&c.stdout).unwrap_or_default();
            let items = v
                .get(list)
                .and_then(|l| l.as_array())
                .cloned()
                .or_else(|| v.as_array().cloned());
            let mut out: Vec<String> = items
                .unwrap_or_default()
                .iter()
                .filter(|i| i.get(keep).and_then(|k| k.as_bool()) == Some(true))
                .filter_map(|i| i.get(id).and_then(|x| x.as_str()).map(str::to_string))
                .collect();
            out.sort();
            out
        };
        let unread = ids(
            run(Argv::new(&["inbox", "list", "--json", &self.agent])
                .opt("--session", self.session.clone())),
            "messages",
            "message_id",
            "unread",
        );
        let ready = ids(
            run(Argv::new(&["next", "--json", "--agent", &self.agent])
                .opt("--session", self.session.clone())),
            "tasks",
            "task_id",
            "ready",
        );
        (unread, ready)
    }

    /// Watches the agent's inbox and sessions (inotify through
    /// [`super::wait::Waiter`], as `inbox next --wait` does) and tells the
    /// client when a message arrives or a task becomes ready, until the
    /// client goes away.
    fn watch(self, peer: rmcp::Peer<RoleServer>, runtime: tokio::runtime::Handle) {
        let mut waiter = super::wait::Waiter::new(Vec::new());
        waiter.add(super::message::inbox_watch_dirs(&self.root, &self.agent));
        let (mut unread, mut ready) = self.watch_state();
        while !peer.is_transport_closed() {
            // A rare look without a change, as a safety net (and to notice
            // the client leaving).
            waiter.wait(std::time::Duration::from_secs(30));
            waiter.add(super::message::inbox_watch_dirs(&self.root, &self.agent));
            let (now_unread, now_ready) = self.watch_state();
            let new_messages = now_unread.iter().any(|m| !unread.contains(m));
            let new_ready = now_ready.iter().any(|t| !ready.contains(t));
            for (changed, uri) in [(new_messages, INBOX_URI), (new_ready, TASKS_URI)] {
                if changed {
                    let sent = runtime.block_on(
                        peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)),
                    );
                    if sent.is_err() {
                        return;
                    }
                }
            }
            (unread, ready) = (now_unread, now_ready);
        }
    }
}

/// The lead's tools: listed only for an agent the policy names as a lead;
/// called by another, the command refuses them with the CLI's text.
const LEAD_TOOLS: [&str; 5] = [
    "task_new",
    "session_phase",
    "session_gate",
    "session_complete",
    "session_fail",
];

#[tool_handler]
impl ServerHandler for Squad {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, McpError> {
        let ct = context.ct.clone();
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.until_cancelled(ct.cancelled(), Self::tool_router().call(call))
            .await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // Judged on every listing: the policy (its leads) may change while
        // the server runs.
        let lead = super::write::is_lead(&self.root, &self.agent);
        Ok(ListToolsResult::with_all_items(
            Self::tool_router()
                .list_all()
                .into_iter()
                .filter(|t| lead || !LEAD_TOOLS.contains(&t.name.as_ref()))
                .collect(),
        ))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(
            RESOURCES
                .iter()
                .map(|(uri, name, description)| {
                    Resource::new(*uri, *name)
                        .with_description(*description)
                        .with_mime_type(if *uri == "squad://agent/skills" {
                            "text/plain"
                        } else {
                            "application/json"
                        })
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let Some(argv) = self.resource_argv(&request.uri) else {
            return Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        };
        let c = self
            .until_cancelled(context.ct.cancelled(), self.capture(argv))
            .await?;
        if c.code != crate::exit::OK {
            return Err(McpError::internal_error(c.stderr, None));
        }
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            vec![ResourceContents::text(c.stdout, request.uri)],
        )))
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Updates of the inbox and tasks are sent whether or not subscribed.
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let me = self.clone();
        let runtime = tokio::runtime::Handle::current();
        let spawned = std::thread::Builder::new()
            .name("mcp-watch".into())
            .spawn(move || me.watch(context.peer, runtime));
        if let Err(e) = spawned {
            super::warn(format!(
                "mcp: no notifications: cannot start the watcher: {e}"
            ));
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_instructions(format!(
            "squad-supervisor tools for agent `{}`: the squadctl agent commands with their rules; a refusal is a tool error with the reason.",
            self.agent
        ))
    }
}

mod http_client;
mod install;
