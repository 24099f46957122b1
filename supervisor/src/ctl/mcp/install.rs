//! `squadctl mcp install`: the squad server in an agent CLI's MCP
//! configuration, with what that CLI needs to call its tools with nobody
//! there to approve them (docs/mcp.md, "Configuring agent CLIs").

use super::InstallArgs;
use std::path::{Path, PathBuf};

/// The agent CLI whose configuration `mcp install` edits (the guard's list).
use squad_policies::guard_doctor::Cli as Host;

/// Why `mcp install` changed nothing.
#[derive(Debug, thiserror::Error)]
enum InstallError {
    /// No HOME to find a user's configuration in.
    #[error("HOME is not set; cannot find the user's configuration")]
    NoHome,
    /// The project root could not be found.
    #[error("{0}")]
    Root(#[from] crate::root::RootError),
    /// Copilot CLI has no project-level MCP configuration.
    #[error("Copilot CLI reads MCP servers from ~/.copilot/mcp-config.json only; add --user")]
    CopilotNeedsUser,
    /// The file is not valid JSON.
    #[error("{line}:{column}: not valid JSON: {error}; fix it first (nothing was changed)")]
    NotJson {
        line: usize,
        column: usize,
        error: serde_json::Error,
    },
    /// A part of the file is not of the type it must be.
    #[error("{0} is not a JSON {1}; fix it first (nothing was changed)")]
    Shape(&'static str, &'static str),
    /// Codex's `squad` server defined by other means than our table.
    #[error(
        "{0}:1: the `squad` MCP server is defined outside a [mcp_servers.squad] table; remove that definition or edit it by hand (nothing was changed)"
    )]
    TomlElsewhere(usize),
    /// The file could not be read.
    #[error("{0}: {1}")]
    Read(String, squad_protocol::fsx::ReadError),
    /// The merge of the file at the path refused it.
    #[error("{0}: {1}")]
    At(String, Box<InstallError>),
    /// An HTTP entry could not be made.
    #[error("{0}")]
    Http(#[from] super::http_client::HttpClientError),
}

/// The configuration file `install` edits for `host`.
fn config_path(root_arg: Option<&Path>, host: Host, user: bool) -> Result<PathBuf, InstallError> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or(InstallError::NoHome)
    };
    let project = || -> Result<PathBuf, InstallError> {
        Ok(crate::root::fs_path(&crate::root::resolve(root_arg)?).to_path_buf())
    };
    Ok(match (host, user) {
        (Host::Claude, false) => project()?.join(".mcp.json"),
        (Host::Claude, true) => home()?.join(".claude.json"),
        (Host::Codex, false) => project()?.join(".codex/config.toml"),
        (Host::Codex, true) => std::env::var_os("CODEX_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .map_or_else(|| home().map(|h| h.join(".codex")), Ok)?
            .join("config.toml"),
        (Host::Copilot, true) => home()?.join(".copilot/mcp-config.json"),
        (Host::Copilot, false) => {
            return Err(InstallError::CopilotNeedsUser);
        }
        (Host::Gemini, false) => project()?.join(".gemini/settings.json"),
        (Host::Gemini, true) => home()?.join(".gemini/settings.json"),
    })
}

// The server entry lives with the runners, which pass it too.
use crate::runners::mcp_json_entry as json_entry;

/// A JSON configuration as read (`{}` when missing or empty), or where it
/// is not valid JSON.
fn json_object(existing: Option<&str>) -> Result<serde_json::Value, InstallError> {
    match existing {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str(text).map_err(|error| InstallError::NotJson {
                line: error.line(),
                column: error.column(),
                error,
            })
        }
        _ => Ok(serde_json::json!({})),
    }
}

/// The JSON configuration with `mcpServers.squad` set to `entry`, everything
/// else kept; `Ok(None)` when it is already so.
fn merge_json(
    existing: Option<&str>,
    entry: serde_json::Value,
) -> Result<Option<String>, InstallError> {
    use serde_json::Value;
    let mut doc = json_object(existing)?;
    let Value::Object(top) = &mut doc else {
        return Err(InstallError::Shape("the file", "object"));
    };
    let servers = top
        .entry("mcpServers")
        .or_insert_with(|| serde_json::json!({}));
    let Value::Object(servers) = servers else {
        return Err(InstallError::Shape("`mcpServers`", "object"));
    };
    if servers.get("squad") == Some(&entry) {
        return Ok(None);
    }
    servers.insert("squad".into(), entry);
    // A Value always serialises.
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Ok(Some(text))
}

/// The variables that say who and where the agent is (set by runners and
/// the squad-protocol skill), passed to the server by CLIs that start it
/// with a reduced environment.
const SQUAD_ENV: [&str; 4] = ["SQUAD_AGENT", "SQUAD_SESSION", "SQUAD_TASK", "SQUAD_ROOT"];

/// The permission rule that lets Claude Code call every tool of the
/// server `squad` without asking (`claude -p` has no one to ask).
pub(crate) const CLAUDE_ALLOW: &str = "mcp__squad";

/// Claude Code's settings with [`CLAUDE_ALLOW`] in `permissions.allow`,
/// everything else kept; `Ok(None)` when it is there already.
fn merge_allow(existing: Option<&str>) -> Result<Option<String>, InstallError> {
    use serde_json::Value;
    let mut doc = json_object(existing)?;
    let Value::Object(top) = &mut doc else {
        return Err(InstallError::Shape("the file", "object"));
    };
    let perms = top
        .entry("permissions")
        .or_insert_with(|| serde_json::json!({}));
    let Value::Object(perms) = perms else {
        return Err(InstallError::Shape("`permissions`", "object"));
    };
    let allow = perms
        .entry("allow")
        .or_insert_with(|| serde_json::json!([]));
    let Value::Array(allow) = allow else {
        return Err(InstallError::Shape("`permissions.allow`", "array"));
    };
    if allow.iter().any(|r| r == CLAUDE_ALLOW) {
        return Ok(None);
    }
    allow.push(serde_json::json!(CLAUDE_ALLOW));
    // A Value always serialises.
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    Ok(Some(text))
}

/// Codex's `[mcp_servers.squad]` table for a stdio server: `program` with
/// `args`.
fn stdio_table(program: &str, args: &[String]) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    // `codex exec` never asks for approval, so a tool that needs one
    // fails ("approval policy is never"): the server's tools are approved
    // here. Codex starts servers with a reduced environment: the agent's
    // identity is passed through by name.
    format!(
        "[mcp_servers.squad]\ncommand = {}\nargs = [{}]\nenv_vars = [{}]\ndefault_tools_approval_mode = \"approve\"\n",
        quote(program),
        args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(", "),
        SQUAD_ENV
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The TOML configuration with the `[mcp_servers.squad]` table replaced by
/// (or appended as) ours, every other line kept as it was; `Ok(None)` when
/// it is already so. Line-based (no TOML dependency): our table is the
/// header line and the lines up to the next header; a `squad` server
/// defined any other way (dotted keys, an inline table) is refused rather
/// than guessed at.
fn merge_toml(existing: Option<&str>, ours: &str) -> Result<Option<String>, InstallError> {
    let text = existing.unwrap_or("");
    let header = |line: &str| -> Option<String> {
        let t = line.trim();
        let t = t.strip_prefix("[[").or_else(|| t.strip_prefix('['))?;
        let end = t.find(']')?;
        Some(
            t[..end]
                .split('.')
                .map(|p| p.trim().trim_matches('"'))
                .collect::<Vec<_>>()
                .join("."),
        )
    };
    let mut kept = Vec::new();
    let mut table = String::new();
    let mut skipping = false;
    let mut found = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(h) = header(line) {
            table = h.clone();
            skipping = h == "mcp_servers.squad" || h.starts_with("mcp_servers.squad.");
            if h == "mcp_servers.squad" && found.is_none() {
                found = Some(kept.len());
            }
            if skipping {
                continue;
            }
        } else if skipping {
            continue;
        } else {
            let key = line.trim_start();
            let elsewhere = (table.is_empty() && key.starts_with("mcp_servers.squad"))
                || (table == "mcp_servers"
                    && (key.starts_with("squad ")
                        || key.starts_with("squad=")
                        || key.starts_with("squad.")));
            if elsewhere {
                return Err(InstallError::TomlElsewhere(i + 1));
            }
        }
        kept.push(line.to_string());
    }
    let mut out = match found {
        Some(at) => {
            let mut lines = kept[..at].join("\n");
            if !lines.is_empty() {
                lines.push('\n');
            }
            lines.push_str(ours);
            let rest = kept[at..].join("\n");
            if !rest.is_empty() {
                lines.push('\n');
                lines.push_str(&rest);
                lines.push('\n');
            }
            lines
        }
        None => {
            let mut lines = kept.join("\n");
            if !lines.is_empty() {
                lines.push_str("\n\n");
            }
            lines.push_str(ours);
            lines
        }
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok((out != text).then_some(out))
}

/// The new text of the configuration file at `path` by `merge` (given its
/// text, `None` when missing; answering `None` when nothing changes).
fn merged(
    path: &Path,
    merge: impl FnOnce(Option<&str>) -> Result<Option<String>, InstallError>,
) -> Result<Option<String>, InstallError> {
    let existing = match squad_protocol::fsx::read_regular_to_string(path, 16 * 1024 * 1024) {
        Ok(text) => Some(text),
        Err(squad_protocol::fsx::ReadError::NotFound) => None,
        Err(e) => return Err(InstallError::Read(path.display().to_string(), e)),
    };
    merge(existing.as_deref())
        .map_err(|e| InstallError::At(path.display().to_string(), Box::new(e)))
}

use super::http_client::{self, HttpClientError, ServerUrl};

/// The server an `--http` install is for.
struct HttpTarget {
    url: ServerUrl,
    agent: String,
    /// The project, whose `.squad/run/mcp/` holds the token.
    root: PathBuf,
}

/// The `--http URL` install's server, checked before any file is read.
fn http_target(
    root_arg: Option<&Path>,
    agent: Option<&str>,
    url: &str,
    hosts: &[Host],
) -> Result<HttpTarget, HttpClientError> {
    let agent = http_client::agent_of(agent)?.to_string();
    let url = ServerUrl::parse(url)?;
    if hosts.contains(&Host::Copilot) {
        return Err(HttpClientError::Copilot);
    }
    let root = crate::root::fs_path(&crate::root::resolve(root_arg)?).to_path_buf();
    // The helper runs from wherever the CLI is: the root by absolute path.
    let root = std::fs::canonicalize(&root)
        .or_else(|_| std::path::absolute(&root))
        .map_err(HttpClientError::Where)?;
    Ok(HttpTarget { url, agent, root })
}

/// Runs `squadctl mcp install`.
pub(super) fn install(root_arg: Option<&Path>, agent: Option<String>, args: InstallArgs) -> u8 {
    let hosts: Vec<Host> = [
        (args.claude, Host::Claude),
        (args.codex, Host::Codex),
        (args.copilot, Host::Copilot),
        (args.gemini, Host::Gemini),
    ]
    .into_iter()
    .filter_map(|(on, h)| on.then_some(h))
    .collect();
    if hosts.is_empty() {
        return super::super::fail(
            "mcp install: name the agent CLI: --claude, --codex, --copilot or --gemini",
        );
    }
    if let Some(a) = &agent
        && !squad_protocol::IdKind::Agent.matches(a)
    {
        return super::super::fail(format!("mcp install: `{a}` is not a valid agent name"));
    }
    // The absolute path of this squadctl: agent CLIs start servers without
    // the user's shell PATH set up.
    let program = match std::env::current_exe() {
        Ok(p) => p.display().to_string(),
        Err(e) => {
            return super::super::fail(format!("mcp install: cannot tell where squadctl is: {e}"));
        }
    };
    // `--http URL`: the running server of the agent, its token read at
    // each connection (never written into the entry).
    let http = match args
        .http
        .as_deref()
        .map(|url| http_target(root_arg, agent.as_deref(), url, &hosts))
        .transpose()
    {
        Ok(h) => h,
        Err(e) => return super::super::fail(format!("mcp install --http: {e}")),
    };
    let mut server_args = vec!["mcp".to_string()];
    if let Some(a) = agent {
        server_args.extend(["--agent".to_string(), a]);
    }
    // Every file's new text first, then the writes: a refusal (a file
    // that is not valid JSON) leaves every file as it was.
    let mut planned: Vec<(PathBuf, Option<String>, serde_json::Value)> = Vec::new();
    for host in hosts {
        let path = match config_path(root_arg, host, args.user) {
            Ok(p) => p,
            Err(e) => return super::super::fail(format!("mcp install --{}: {e}", host.program())),
        };
        let text = match merged(&path, |existing| match (host, &http) {
            (Host::Codex, None) => merge_toml(existing, &stdio_table(&program, &server_args)),
            (Host::Codex, Some(h)) => merge_toml(existing, &http_client::codex_table(&h.url)),
            (_, None) => merge_json(existing, json_entry(host, &program, &server_args)),
            (_, Some(h)) => merge_json(
                existing,
                http_client::json_entry(host, &program, &h.root, &h.agent, &h.url)?,
            ),
        }) {
            Ok(t) => t,
            Err(e) => return super::super::fail(e.to_string()),
        };
        let mut entry =
            serde_json::json!({"cli": host.program(), "path": path.display().to_string()});
        if let Some(h) = &http {
            entry["url"] = serde_json::json!(h.url.url);
        }
        planned.push((path, text, entry));
        // `claude -p` asks before each MCP tool call and, with no one to
        // answer, refuses it; a project's own allow rules count only in a
        // workspace someone trusted interactively: the rule goes into the
        // user's settings.
        if host == Host::Claude {
            let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
                return super::super::fail(
                    "mcp install --claude: HOME is not set; cannot find ~/.claude/settings.json",
                );
            };
            let path = PathBuf::from(home).join(".claude/settings.json");
            let text = match merged(&path, merge_allow) {
                Ok(t) => t,
                Err(e) => return super::super::fail(e.to_string()),
            };
            let entry = serde_json::json!({
                "cli": host.program(),
                "path": path.display().to_string(),
                "allow": CLAUDE_ALLOW,
            });
            planned.push((path, text, entry));
        }
    }
    let mut report = Vec::new();
    for (path, text, mut entry) in planned {
        if let Some(text) = &text
            && let Err(e) = crate::safefs::write_project_file(&path, text.as_bytes(), Some(0o777))
        {
            return super::super::fail(format!("{}: {e}", path.display()));
        }
        entry["changed"] = serde_json::json!(text.is_some());
        report.push(entry);
    }
    if args.json {
        return super::super::print(&format!("{:#}\n", serde_json::json!(report)));
    }
    let mut text = String::new();
    for r in &report {
        let what = if r["allow"].is_string() {
            format!("allow rule `{CLAUDE_ALLOW}` (the server's tools run without asking)")
        } else {
            match r["url"].as_str() {
                Some(url) => format!(
                    "squad MCP server at {url} ({}; token read at each connection)",
                    r["cli"].as_str().unwrap_or_default()
                ),
                None => format!(
                    "squad MCP server ({})",
                    r["cli"].as_str().unwrap_or_default()
                ),
            }
        };
        let state = if r["changed"] == true {
            "installed in"
        } else {
            "already installed in"
        };
        text.push_str(&format!(
            "{what} {state} {}\n",
            r["path"].as_str().unwrap_or_default()
        ));
    }
    if !args.user {
        // A project file others check out names this machine's squadctl
        // (agent CLIs start the server without the shell's PATH): say so
        // rather than let it travel unnoticed (issue 40 item 6).
        text.push_str(&format!(
            "note: the project's entry runs {program} (this machine's squadctl, by its absolute path); on another machine or checkout, run `squadctl mcp install` there, or use --user to keep it out of the repository\n"
        ));
    }
    super::super::print_human(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_merge_keeps_other_servers_and_is_idempotent() {
        let existing =
            r#"{"model":"x","mcpServers":{"other":{"command":"o"},"squad":{"command":"old"}}}"#;
        let entry = json_entry(Host::Claude, "/bin/squadctl", &["mcp".into()]);
        let merged = merge_json(Some(existing), entry.clone()).unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(v["model"], "x");
        assert_eq!(v["mcpServers"]["other"]["command"], "o");
        assert_eq!(v["mcpServers"]["squad"], entry);
        assert_eq!(merge_json(Some(&merged), entry.clone()).unwrap(), None);
        let err = merge_json(Some("{\n  \"a\": ,\n}"), entry.clone()).unwrap_err();
        assert!(err.to_string().starts_with("2:"), "{err}");
        assert!(merge_json(Some(r#"{"mcpServers": []}"#), entry).is_err());
    }

    /// What every squad table of Codex ends with (issue 38): the agent's
    /// variables passed through, the tools approved for `codex exec`.
    const TAIL: &str = "env_vars = [\"SQUAD_AGENT\", \"SQUAD_SESSION\", \"SQUAD_TASK\", \"SQUAD_ROOT\"]\ndefault_tools_approval_mode = \"approve\"\n";

    #[test]
    fn claude_allow_rule_is_merged_once() {
        let merged = merge_allow(Some(
            r#"{"model": "x", "permissions": {"allow": ["Bash(ls)"], "deny": ["Read(.env)"]}}"#,
        ))
        .unwrap()
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(
            v["permissions"]["allow"],
            serde_json::json!(["Bash(ls)", "mcp__squad"])
        );
        assert_eq!(v["permissions"]["deny"][0], "Read(.env)");
        assert_eq!(v["model"], "x");
        assert_eq!(merge_allow(Some(&merged)).unwrap(), None);
        assert!(merge_allow(None).unwrap().unwrap().contains("mcp__squad"));
        assert!(merge_allow(Some(r#"{"permissions": {"allow": "x"}}"#)).is_err());
    }

    #[test]
    fn toml_merge_replaces_only_our_table() {
        let existing = "model = \"o3\"\n\n[mcp_servers.squad]\ncommand = \"old\"\n\n[mcp_servers.squad.env]\nX = \"1\"\n\n[mcp_servers.docs]\ncommand = \"docs\"\n";
        let merged = merge_toml(
            Some(existing),
            &stdio_table("/bin/squadctl", &["mcp".into()]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            merged,
            format!(
                "model = \"o3\"\n\n[mcp_servers.squad]\ncommand = \"/bin/squadctl\"\nargs = [\"mcp\"]\n{TAIL}\n[mcp_servers.docs]\ncommand = \"docs\"\n"
            )
        );
        assert_eq!(
            merge_toml(
                Some(&merged),
                &stdio_table("/bin/squadctl", &["mcp".into()])
            )
            .unwrap(),
            None
        );
        let fresh = merge_toml(None, &stdio_table("/a \"b\"", &["mcp".into()]))
            .unwrap()
            .unwrap();
        assert_eq!(
            fresh,
            format!("[mcp_servers.squad]\ncommand = \"/a \\\"b\\\"\"\nargs = [\"mcp\"]\n{TAIL}")
        );
        let appended = merge_toml(Some("model = \"o3\""), &stdio_table("/s", &[]))
            .unwrap()
            .unwrap();
        assert_eq!(
            appended,
            format!("model = \"o3\"\n\n[mcp_servers.squad]\ncommand = \"/s\"\nargs = []\n{TAIL}")
        );
        for other_form in [
            "[mcp_servers]\nsquad = { command = \"x\" }\n",
            "mcp_servers.squad.command = \"x\"\n",
        ] {
            assert!(
                merge_toml(Some(other_form), &stdio_table("/s", &[])).is_err(),
                "{other_form}"
            );
        }
    }
}
