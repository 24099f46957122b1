//! What an agent CLI is given to reach a `squadctl mcp --http` server: the
//! entries `mcp install --http URL` writes, and `mcp token`, which reads the
//! server's current bearer token from its file (docs/mcp.md, "Installing an
//! HTTP server").
//!
//! The token is new at every start of the server, so no entry holds it:
//! each names where it is read when the CLI connects (Claude Code's
//! `headersHelper` runs `squadctl mcp token --headers`; Codex and Gemini CLI
//! read it from `SQUAD_MCP_TOKEN`). Copilot CLI takes fixed headers only,
//! so it is refused rather than given a token that the next start voids.

use squad_policies::guard_doctor::Cli as Host;
use std::path::Path;

/// The variable Codex (`bearer_token_env_var`) and Gemini CLI (`$VAR` in
/// its settings) read the token from.
pub(crate) const TOKEN_ENV: &str = "SQUAD_MCP_TOKEN";

/// Arguments of `mcp token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The server's URL, as `mcp --http` printed it (e.g.
    /// `http://127.0.0.1:8765/mcp`).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Print the request headers as a JSON object
    /// (`{"Authorization": "Bearer …"}`), as Claude Code's `headersHelper`
    /// wants, instead of the bare token.
    #[arg(long)]
    pub headers: bool,
}

/// Why an HTTP entry or a token could not be given.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpClientError {
    /// The URL is not `http://<loopback address>:<port>/…`.
    #[error(
        "`{0}` is not the URL of a loopback server; use the one `mcp --http` printed, e.g. http://127.0.0.1:8765/mcp"
    )]
    Url(String),
    /// The token's file is named by the agent.
    #[error(
        "name the agent (`squadctl mcp --agent A …`): the token is the one of that agent's server"
    )]
    NoAgent,
    /// The agent name is not one.
    #[error("`{0}` is not a valid agent name")]
    BadAgent(String),
    /// Copilot CLI has no way to read a token that changes.
    #[error(
        "Copilot CLI takes fixed headers only, and the server's token is new at every start; install the stdio entry (without --http)"
    )]
    Copilot,
    /// No server of that agent on that port is running (or it is not ours).
    #[error("{path}: {error}; is `squadctl mcp --agent {agent} --http 127.0.0.1:{port}` running?")]
    NoToken {
        path: String,
        error: squad_protocol::fsx::ReadError,
        agent: String,
        port: u16,
    },
    /// The file does not hold a token the server makes.
    #[error("{0}: not a token of `squadctl mcp --http` (64 hex digits)")]
    NotAToken(String),
    /// The project root could not be found.
    #[error("{0}")]
    Root(#[from] crate::root::RootError),
    /// The project root has no absolute path.
    #[error("cannot tell where the project is: {0}")]
    Where(std::io::Error),
}

/// A server's URL, checked: `http://`, a loopback address, a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerUrl {
    /// As given (the entry holds it so).
    pub url: String,
    /// The port, which names the token's file.
    pub port: u16,
}

impl ServerUrl {
    /// Parses `text`; only what `mcp --http` can listen on is taken.
    pub(crate) fn parse(text: &str) -> Result<ServerUrl, HttpClientError> {
        let bad = || HttpClientError::Url(crate::text::escape(text).to_string());
        let rest = text.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad());
        }
        let addr = super::super::mcp_http::loopback_addr(authority).map_err(|_| bad())?;
        if addr.port() == 0 {
            return Err(bad());
        }
        Ok(ServerUrl {
            url: text.to_string(),
            port: addr.port(),
        })
    }
}

/// The agent named for an HTTP entry or a token, checked.
pub(crate) fn agent_of(agent: Option<&str>) -> Result<&str, HttpClientError> {
    let agent = agent.ok_or(HttpClientError::NoAgent)?;
    if !squad_protocol::IdKind::Agent.matches(agent) {
        return Err(HttpClientError::BadAgent(agent.to_string()));
    }
    Ok(agent)
}

/// What `host`'s configuration holds for the server at `url` of `agent`
/// (JSON CLIs), with `program` (this squadctl) and `root` (the project)
/// for the command that reads the token.
pub(crate) fn json_entry(
    host: Host,
    program: &str,
    root: &Path,
    agent: &str,
    url: &ServerUrl,
) -> Result<serde_json::Value, HttpClientError> {
    use super::super::guard::quoted;
    match host {
        // Claude Code runs `headersHelper` (by the shell) at each
        // connection: a restarted server's token is read then.
        Host::Claude => Ok(serde_json::json!({
            "type": "http",
            "url": url.url,
            "headersHelper": format!(
                "{} --root {} mcp --agent {} token --headers {}",
                quoted(program),
                quoted(&root.display().to_string()),
                quoted(agent),
                quoted(&url.url),
            ),
        })),
        // Gemini CLI expands `$VAR` in its settings when it loads them.
        Host::Gemini => Ok(serde_json::json!({
            "httpUrl": url.url,
            "headers": {"Authorization": format!("Bearer ${TOKEN_ENV}")},
            "trust": true,
        })),
        Host::Copilot => Err(HttpClientError::Copilot),
        // Codex's configuration is TOML: see [`codex_table`].
        Host::Codex => Err(HttpClientError::Url(url.url.clone())),
    }
}

/// Codex's `[mcp_servers.squad]` table for the server at `url`: the token
/// from [`TOKEN_ENV`], the tools approved for `codex exec`.
pub(crate) fn codex_table(url: &ServerUrl) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!(
        "[mcp_servers.squad]\nurl = {}\nbearer_token_env_var = {}\ndefault_tools_approval_mode = \"approve\"\n",
        quote(&url.url),
        quote(TOKEN_ENV)
    )
}

/// The current token of `agent`'s server at `url` in the project at `root`.
pub(crate) fn read_token(
    root: &Path,
    agent: &str,
    url: &ServerUrl,
) -> Result<String, HttpClientError> {
    let path = super::super::mcp_http::token_path(root, agent, url.port);
    let text = squad_protocol::fsx::read_regular_to_string(&path, 1024).map_err(|error| {
        HttpClientError::NoToken {
            path: path.display().to_string(),
            error,
            agent: agent.to_string(),
            port: url.port,
        }
    })?;
    let token = text.trim();
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HttpClientError::NotAToken(path.display().to_string()));
    }
    Ok(token.to_string())
}

/// Runs `squadctl mcp --agent A token URL`.
pub(super) fn token(root_arg: Option<&Path>, agent: Option<&str>, args: &TokenArgs) -> u8 {
    let found = (|| {
        let agent = agent_of(agent)?;
        let url = ServerUrl::parse(&args.url)?;
        let root = crate::root::resolve(root_arg)?;
        read_token(crate::root::fs_path(&root), agent, &url)
    })();
    match found {
        Ok(token) if args.headers => super::super::print(&format!(
            "{}\n",
            serde_json::json!({"Authorization": format!("Bearer {token}")})
        )),
        Ok(token) => super::super::print(&format!("{token}\n")),
        Err(e) => super::super::fail(format!("mcp token: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_with_a_port_are_taken() {
        let ok = ServerUrl::parse("http://127.0.0.1:8765/mcp").unwrap();
        assert_eq!(ok.port, 8765);
        assert_eq!(ServerUrl::parse("http://[::1]:9/mcp").unwrap().port, 9);
        for bad in [
            "https://127.0.0.1:8765/mcp",
            "http://localhost:8765/mcp",
            "http://192.0.2.1:8765/mcp",
            "http://127.0.0.1/mcp",
            "http://127.0.0.1:0/mcp",
            "http://127.0.0.1:8765/m cp",
            "127.0.0.1:8765",
        ] {
            assert!(ServerUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_claude_helper_is_one_shell_command_whatever_the_paths() {
        let url = ServerUrl::parse("http://127.0.0.1:8765/mcp").unwrap();
        let entry = json_entry(
            Host::Claude,
            "/opt/my tools/squadctl",
            Path::new("/src/it's"),
            "alice",
            &url,
        )
        .unwrap();
        assert_eq!(
            entry["headersHelper"],
            "'/opt/my tools/squadctl' --root '/src/it'\\''s' mcp --agent alice token --headers http://127.0.0.1:8765/mcp"
        );
        assert!(json_entry(Host::Copilot, "/s", Path::new("/r"), "a", &url).is_err());
    }
}
