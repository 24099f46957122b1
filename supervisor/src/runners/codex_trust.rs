//! What Codex needs before it runs the guard, asked of Codex itself.
//!
//! Codex (0.169) loads `<project>/.codex/hooks.json` only for a trusted
//! project (`[projects."<dir>"] trust_level = "trusted"` in
//! `$CODEX_HOME/config.toml`), and even then skips every hook nobody has
//! reviewed: a reviewed hook's hash is kept under `[hooks.state."<hooks.json
//! path>:pre_tool_use:<group>:<handler>"] trusted_hash`. The hash is Codex's
//! own digest of the hook's normalized definition, so rather than
//! re-deriving it we ask `codex app-server` (JSON-RPC over stdio):
//! `hooks/list` reports each hook's key, current hash and trust status, and
//! `config/batchWrite` records trust through Codex's own config writer.
//! The same holds for the presence hooks `guard install --codex` adds
//! (`squadctl presence --format codex` on `UserPromptSubmit`,
//! `PermissionRequest`, `PostToolUse`, `Stop`, `SessionEnd`): `--trust`
//! reviews them with the guard.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long one answer of `codex app-server` may take (it starts in well
/// under a second; the margin is for a loaded machine).
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// What went wrong asking Codex (`codex app-server`) about its hooks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodexError {
    /// `codex app-server` could not be started.
    #[error("cannot start `{} app-server`: {source}", codex.display())]
    Start {
        /// The `codex` run.
        codex: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It started without the pipes asked for.
    #[error("codex app-server: no stdio")]
    NoStdio,
    /// Writing a request failed.
    #[error("codex app-server: {0}")]
    Io(#[source] std::io::Error),
    /// No answer in time.
    #[error("codex app-server: no answer to {0}")]
    NoAnswer(String),
    /// It exited before answering.
    #[error("codex app-server exited before answering {0}")]
    Exited(String),
    /// It answered with an error.
    #[error("codex app-server: {method}: {error}")]
    Refused {
        /// The request.
        method: String,
        /// Its JSON-RPC error.
        error: Value,
    },
    /// Codex does not list our hook at all.
    #[error(
        "codex does not list the guard of {} for {} (is the file valid and the project trusted?)",
        hooks_file.display(),
        project.display()
    )]
    NotListed {
        /// The hook file.
        hooks_file: PathBuf,
        /// The project.
        project: PathBuf,
    },
    /// After trusting, Codex still would not run the hook.
    #[error("codex still lists the guard as {status}{}", if *enabled { "" } else { " (disabled)" })]
    StillUntrusted {
        /// Its trust status.
        status: String,
        /// Whether it is enabled.
        enabled: bool,
    },
    /// After trusting, the hook is gone from Codex's list.
    #[error("codex no longer lists the guard")]
    Gone,
}

/// One hook as Codex lists it for a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CodexHook {
    /// The `hooks.state` key (`<source path>:pre_tool_use:0:0`).
    pub key: String,
    /// The command line Codex would run.
    pub command: String,
    /// The file the hook comes from.
    pub source_path: String,
    /// `sha256:…` of the hook's current definition.
    pub current_hash: String,
    /// `trusted`, `untrusted` (never reviewed), `modified` (edited after
    /// review) or `managed`.
    pub trust_status: String,
    /// Whether the hook is enabled.
    pub enabled: bool,
}

/// A running `codex app-server`, stopped when dropped.
pub(crate) struct AppServer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl AppServer {
    /// Starts `codex app-server` (the `codex` given, in the caller's
    /// environment: `CODEX_HOME`, `HOME`) and initializes the session.
    pub(crate) fn start(codex: &Path) -> Result<AppServer, CodexError> {
        AppServer::start_with_env(codex, &std::collections::BTreeMap::new())
    }

    /// [`AppServer::start`] with `env` over the caller's environment (a
    /// runner entry's `CODEX_HOME`, `HOME`).
    pub(crate) fn start_with_env(
        codex: &Path,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<AppServer, CodexError> {
        let mut child = Command::new(codex)
            .arg("app-server")
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| CodexError::Start {
                codex: codex.to_path_buf(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CodexError::NoStdio);
        };
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = AppServer {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        server.call(
            "initialize",
            json!({"clientInfo": {"name": "squadctl", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        server.send(&json!({"jsonrpc": "2.0", "method": "initialized"}))?;
        Ok(server)
    }

    fn send(&mut self, msg: &Value) -> Result<(), CodexError> {
        writeln!(self.stdin, "{msg}")
            .and_then(|()| self.stdin.flush())
            .map_err(CodexError::Io)
    }

    /// Sends a request and waits for its answer (notifications in between
    /// are skipped).
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Result<Value, CodexError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(CodexError::NoAnswer(method.to_string()));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CodexError::Exited(method.to_string()));
                }
            };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if msg["id"] != json!(id) {
                continue;
            }
            if let Some(err) = msg.get("error") {
                return Err(CodexError::Refused {
                    method: method.to_string(),
                    error: err.clone(),
                });
            }
            return Ok(msg["result"].clone());
        }
    }

    /// The hooks Codex would load for a session in `cwd` (every event: the
    /// guard's `preToolUse` and the presence hooks').
    pub(crate) fn hooks(&mut self, cwd: &Path) -> Result<Vec<CodexHook>, CodexError> {
        let result = self.call("hooks/list", json!({"cwds": [cwd]}))?;
        let mut out = Vec::new();
        for entry in result["data"].as_array().into_iter().flatten() {
            for h in entry["hooks"].as_array().into_iter().flatten() {
                let s = |k: &str| h[k].as_str().unwrap_or("").to_string();
                out.push(CodexHook {
                    key: s("key"),
                    command: s("command"),
                    source_path: s("sourcePath"),
                    current_hash: s("currentHash"),
                    trust_status: s("trustStatus"),
                    enabled: h["enabled"].as_bool().unwrap_or(true),
                });
            }
        }
        Ok(out)
    }

    /// Records in the user's `config.toml`, through Codex's own writer,
    /// that `project` is trusted.
    pub(crate) fn trust_project(&mut self, project: &Path) -> Result<(), CodexError> {
        let mut projects = serde_json::Map::new();
        projects.insert(
            project.display().to_string(),
            json!({"trust_level": "trusted"}),
        );
        self.call(
            "config/batchWrite",
            json!({"edits": [{"keyPath": "projects", "mergeStrategy": "upsert", "value": projects}]}),
        )
        .map(drop)
    }

    /// Records the hook's current hash as reviewed.
    pub(crate) fn trust_hook(&mut self, hook: &CodexHook) -> Result<(), CodexError> {
        let mut state = serde_json::Map::new();
        state.insert(hook.key.clone(), json!({"trusted_hash": hook.current_hash}));
        self.call(
            "config/batchWrite",
            json!({"edits": [{"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": state}]}),
        )
        .map(drop)
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name` found on `PATH`, as a shell would find it.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Our hook among Codex's: the one whose command runs `guard --format
/// codex` from `hooks_file`.
pub(crate) fn ours<'a>(hooks: &'a [CodexHook], hooks_file: &Path) -> Option<&'a CodexHook> {
    hooks.iter().find(|h| {
        h.command.ends_with(" guard --format codex") && Path::new(&h.source_path) == hooks_file
    })
}

/// Our presence hooks among Codex's: those whose command runs `presence
/// --format codex` from `hooks_file`.
pub(crate) fn presence_hooks<'a>(hooks: &'a [CodexHook], hooks_file: &Path) -> Vec<&'a CodexHook> {
    hooks
        .iter()
        .filter(|h| {
            h.command.ends_with(" presence --format codex")
                && Path::new(&h.source_path) == hooks_file
        })
        .collect()
}

/// Whether Codex runs the hook as things are.
fn runs(h: &CodexHook) -> bool {
    h.enabled && (h.trust_status == "trusted" || h.trust_status == "managed")
}

/// Our hook among Codex's from any file but `except` (the user's hook
/// file): the project guard Codex loads for a directory whatever file it
/// comes from.
pub(crate) fn ours_from_any<'a>(
    hooks: &'a [CodexHook],
    except: Option<&Path>,
) -> Option<&'a CodexHook> {
    hooks.iter().find(|h| {
        h.command.ends_with(" guard --format codex")
            && except.is_none_or(|u| Path::new(&h.source_path) != u)
    })
}

/// What `--dangerously-bypass-hook-trust` bypasses, said before it is ever
/// suggested.
pub(crate) const BYPASS_WARNING: &str = "`codex exec --dangerously-bypass-hook-trust` would run the guard without a review, but it runs every enabled hook of every config layer unreviewed for that invocation (a hook an agent or a cloned repository planted in .codex/hooks.json included), so it is not recommended";

/// The steps left to a person before Codex runs the guard, when
/// `guard install --codex` was not given `--trust`.
pub(crate) fn steps_left(project: &Path, hooks_file: &Path, user: bool) -> String {
    let mut s =
        String::from("Codex runs this hook only after two steps that are a person's to take:\n");
    if !user {
        s += &format!(
            "  1. trust the project: `[projects.\"{}\"] trust_level = \"trusted\"` in $CODEX_HOME/config.toml (Codex ignores .codex/ in an untrusted project; trusting it also loads its .codex/config.toml, exec policies and MCP servers);\n",
            project.display()
        );
    }
    s += &format!(
        "  {}. review the hooks (the guard, and the presence hooks that say when the agent waits for you): in `codex`, /hooks, or record each one's hash as `[hooks.state.\"{}:<event>:<group>:<handler>\"] trusted_hash` (Codex skips an unreviewed hook silently, and again after any edit of it);\n",
        if user { 1 } else { 2 },
        hooks_file.display()
    );
    s += "  `squadctl guard install --codex --trust` does both through `codex app-server` (Codex's own config writer), for these hooks only;\n  ";
    s += BYPASS_WARNING;
    s += ".\n";
    s
}

/// Whether Codex runs the guard of `hooks_file` in `project` as things are.
pub(crate) fn is_trusted(
    codex: &Path,
    project: &Path,
    hooks_file: &Path,
) -> Result<bool, CodexError> {
    let hooks = AppServer::start(codex)?.hooks(project)?;
    Ok(ours(&hooks, hooks_file).is_some_and(runs)
        && presence_hooks(&hooks, hooks_file).into_iter().all(runs))
}

/// `guard install --codex --trust`: trusts the project (unless `user`) and
/// our hooks (the guard and the presence hooks), then checks with Codex
/// that they would run. Returns what was done, one line per step.
pub(crate) fn trust(
    codex: &Path,
    project: &Path,
    hooks_file: &Path,
    user: bool,
) -> Result<String, CodexError> {
    let mut server = AppServer::start(codex)?;
    let mut done = String::new();
    if !user {
        server.trust_project(project)?;
        done += &format!("codex: project {} trusted\n", project.display());
    }
    let hooks = server.hooks(project)?;
    let Some(hook) = ours(&hooks, hooks_file).cloned() else {
        return Err(CodexError::NotListed {
            hooks_file: hooks_file.to_path_buf(),
            project: project.to_path_buf(),
        });
    };
    let presence: Vec<CodexHook> = presence_hooks(&hooks, hooks_file)
        .into_iter()
        .cloned()
        .collect();
    for hook in std::iter::once(&hook).chain(&presence) {
        if hook.trust_status != "trusted" && hook.trust_status != "managed" {
            server.trust_hook(hook)?;
            done += &format!(
                "codex: hook {} reviewed ({})\n",
                hook.key, hook.current_hash
            );
        }
    }
    // Codex itself must now say it runs the hooks.
    let after = server.hooks(project)?;
    if let Some(h) = presence_hooks(&after, hooks_file)
        .into_iter()
        .find(|h| !runs(h))
    {
        return Err(CodexError::StillUntrusted {
            status: format!("{} (presence hook {})", h.trust_status, h.key),
            enabled: h.enabled,
        });
    }
    match ours(&after, hooks_file) {
        Some(h) if runs(h) => Ok(done),
        Some(h) => Err(CodexError::StillUntrusted {
            status: h.trust_status.clone(),
            enabled: h.enabled,
        }),
        None => Err(CodexError::Gone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `codex` that is missing or that is not an app server is a typed
    /// error, with the text `guard install --trust` and the doctor print.
    #[test]
    fn a_codex_that_cannot_answer_is_a_typed_error() {
        let missing = Path::new("/nonexistent/codex");
        let e = AppServer::start(missing).err().expect("no such codex");
        assert!(
            matches!(&e, CodexError::Start { codex, .. } if codex == missing),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("cannot start `/nonexistent/codex app-server`: "),
            "{e}"
        );
        // Exits at once: the request finds a closed pipe, or no answer comes.
        let e = AppServer::start(Path::new("/bin/true"))
            .err()
            .expect("true is no app server");
        match &e {
            CodexError::Exited(method) => {
                assert_eq!(method, "initialize");
                assert_eq!(
                    e.to_string(),
                    "codex app-server exited before answering initialize"
                );
            }
            CodexError::Io(_) => assert!(e.to_string().starts_with("codex app-server: ")),
            other => panic!("{other:?}"),
        }
    }
}
