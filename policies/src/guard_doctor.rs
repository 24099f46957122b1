//! Whether an agent CLI's next run in a project calls the guard
//! (`squadctl guard doctor`, and squadd before it dispatches to a runner).
//! A pure function of facts squadctl gathers (hook files, the CLI's own
//! trust records, the runner's command line); docs/guards.md says what each
//! CLI needs.

use serde::Serialize;

/// The agent CLIs the guard knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Cli {
    /// Claude Code (`claude`).
    Claude,
    /// Codex CLI (`codex`).
    Codex,
    /// GitHub Copilot CLI (`copilot`).
    Copilot,
    /// Gemini CLI (`gemini`).
    Gemini,
}

impl Cli {
    /// Every CLI, in report order.
    pub const ALL: [Cli; 4] = [Cli::Claude, Cli::Codex, Cli::Copilot, Cli::Gemini];

    /// The program name (`claude`, `codex`, `copilot`, `gemini`).
    pub fn program(self) -> &'static str {
        match self {
            Cli::Claude => "claude",
            Cli::Codex => "codex",
            Cli::Copilot => "copilot",
            Cli::Gemini => "gemini",
        }
    }

    /// The CLI a runner's program runs, from its file name.
    pub fn of_program(program: &str) -> Option<Cli> {
        let name = program.rsplit('/').next().unwrap_or(program);
        Cli::ALL.into_iter().find(|c| c.program() == name)
    }
}

/// One hook file as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookFile {
    /// No file.
    Missing,
    /// The file is there but not valid JSON (the message says where).
    Invalid(String),
    /// Valid, without the guard's entry.
    NoEntry,
    /// The guard's entry is there, and run as the CLI runs it (its
    /// command, matcher and settings, with a desktop launcher's PATH) it
    /// denied a synthetic write the guard must refuse.
    Installed,
    /// The guard's entry is there but the proof failed: run as the CLI
    /// would, it did not deny the probe (why: exit 127, a matcher that
    /// never sees a write, hooks disabled…).
    NotProven(String),
}

/// What Codex itself says of the guard's hook (`codex app-server`
/// `hooks/list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodexHookTrust {
    /// Codex could not be asked (not on PATH, or it failed: the text).
    Unknown(String),
    /// Codex does not list the hook (an untrusted project's `.codex/` is
    /// not loaded at all).
    NotListed,
    /// Listed with this trust status: `trusted`, `untrusted` (never
    /// reviewed), `modified` (edited after its review), `managed`; and
    /// whether it is enabled.
    Listed {
        /// Codex's trust status.
        status: String,
        /// Whether the hook is enabled.
        enabled: bool,
    },
}

/// How a runner of the policy starts this CLI.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunnerUse {
    /// Agents (or `*`) whose runner runs this CLI.
    pub agents: Vec<String>,
    /// Whether every one of those entries says `guard: off`.
    pub guard_off: bool,
    /// Copilot: the command passes `--trust-folder` (or the entry sets
    /// `GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true`). Gemini CLI: the entry
    /// sets `GEMINI_CLI_TRUST_WORKSPACE=true` (`--skip-trust` does not load
    /// the project's hooks).
    pub trusts_folder: bool,
}

/// Everything the verdict on one CLI depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliFacts {
    /// Which CLI.
    pub cli: Cli,
    /// `--version` output when found on PATH; `None`: not found.
    pub version: Option<String>,
    /// The runners that start it; `None`: no runner does.
    pub runner: Option<RunnerUse>,
    /// The project's hook file (`.claude/settings.json`,
    /// `.codex/hooks.json`, `.github/hooks/squad.json`) and its path.
    pub project_hook: (String, HookFile),
    /// The user's hook file and its path.
    pub user_hook: (String, HookFile),
    /// Codex: whether `[projects."<root>"] trust_level = "trusted"`.
    pub codex_project_trusted: Option<bool>,
    /// Codex: what it says of the project's hook and of the user's hook.
    pub codex_trust: (CodexHookTrust, CodexHookTrust),
}

/// How one line of the report came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Worth knowing; does not make the CLI unguarded by itself.
    Warn,
    /// This makes the CLI run unguarded (or not run).
    Fail,
}

/// One checked fact, with the fix when it fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// What was checked (`hook file`, `project trusted`, …).
    pub check: String,
    /// The outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it (for `warn` and `fail`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The verdict on one CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CliVerdict {
    /// Which CLI.
    pub cli: Cli,
    /// Whether its next run in the project calls the guard.
    pub guarded: bool,
    /// Whether a runner starts it (and squadd would refuse to dispatch:
    /// unguarded without `guard: off`).
    pub runner: bool,
    /// A runner starts it unguarded without `guard: off`: `guard doctor`
    /// exits 1 and squadd refuses to dispatch to it.
    pub blocks_dispatch: bool,
    /// The checks, in order.
    pub lines: Vec<Line>,
}

fn line(check: &str, status: Status, detail: String, fix: Option<String>) -> Line {
    Line {
        check: check.into(),
        status,
        detail,
        fix,
    }
}

fn install_cmd(cli: Cli, user: bool) -> String {
    let trust = if cli == Cli::Codex { " --trust" } else { "" };
    let user = if user { " --user" } else { "" };
    format!("squadctl guard install --{}{user}{trust}", cli.program())
}

/// The hook-file line for one file; `true` when the guard's entry is there.
fn hook_line(cli: Cli, which: &str, (path, file): &(String, HookFile), user: bool) -> (Line, bool) {
    let check = format!("{which} hook");
    match file {
        HookFile::Installed => (
            line(&check, Status::Ok, format!("{path}: guard installed"), None),
            true,
        ),
        HookFile::Missing => (
            line(
                &check,
                Status::Fail,
                format!("{path}: missing"),
                Some(install_cmd(cli, user)),
            ),
            false,
        ),
        HookFile::NoEntry => (
            line(
                &check,
                Status::Fail,
                format!("{path}: no guard entry"),
                Some(install_cmd(cli, user)),
            ),
            false,
        ),
        HookFile::NotProven(why) => (
            line(
                &check,
                Status::Fail,
                format!("{path}: the guard's entry is there but does not guard: {why}"),
                Some(format!(
                    "fix it, or run `{}` again (it writes squadctl's absolute path)",
                    install_cmd(cli, user)
                )),
            ),
            false,
        ),
        HookFile::Invalid(e) => (
            line(
                &check,
                Status::Fail,
                format!("{path}: {e}"),
                Some(format!("fix the file, then {}", install_cmd(cli, user))),
            ),
            false,
        ),
    }
}

/// Codex's word on one installed hook: a line, and whether it runs.
fn codex_line(which: &str, trust: &CodexHookTrust, user: bool) -> (Line, bool) {
    let check = format!("{which} hook trusted by codex");
    let fix = Some(format!(
        "{} (or review it in `codex`: /hooks)",
        install_cmd(Cli::Codex, user)
    ));
    match trust {
        CodexHookTrust::Listed { status, enabled } if !enabled => (
            line(
                &check,
                Status::Fail,
                format!("{status}, but disabled in config.toml (`enabled = false`)"),
                Some("remove `enabled = false` from its [hooks.state] entry".into()),
            ),
            false,
        ),
        CodexHookTrust::Listed { status, .. } if status == "trusted" || status == "managed" => (
            line(&check, Status::Ok, format!("{status}: hash matches"), None),
            true,
        ),
        CodexHookTrust::Listed { status, .. } if status == "modified" => (
            line(
                &check,
                Status::Fail,
                "modified: edited after its review (the hash no longer matches); Codex skips it silently".into(),
                fix,
            ),
            false,
        ),
        CodexHookTrust::Listed { status, .. } => (
            line(
                &check,
                Status::Fail,
                format!("{status}: never reviewed; Codex skips it silently"),
                fix,
            ),
            false,
        ),
        CodexHookTrust::NotListed => (
            line(
                &check,
                Status::Fail,
                "codex does not load it".into(),
                fix,
            ),
            false,
        ),
        CodexHookTrust::Unknown(why) => (
            line(
                &check,
                Status::Fail,
                format!("cannot ask codex: {why}"),
                Some("put `codex` on PATH so its hook trust can be checked".into()),
            ),
            false,
        ),
    }
}

/// Whether the CLI's next run calls the guard, line by line.
pub fn diagnose(f: &CliFacts) -> CliVerdict {
    let mut lines = Vec::new();
    let cli = f.cli;
    match &f.version {
        Some(v) => lines.push(line("installed", Status::Ok, v.clone(), None)),
        None => lines.push(line(
            "installed",
            if f.runner.is_some() {
                Status::Fail
            } else {
                Status::Warn
            },
            format!("`{}` not found on PATH", cli.program()),
            Some(format!("install {} or put it on PATH", cli.program())),
        )),
    }
    let (project_line, project_ok) = hook_line(cli, "project", &f.project_hook, false);
    let (user_line, user_ok) = hook_line(cli, "user", &f.user_hook, true);
    // Either file suffices: report the one that is there, or both when none.
    let mut guarded = match (project_ok, user_ok) {
        (true, true) => {
            lines.push(project_line);
            lines.push(user_line);
            true
        }
        (true, false) => {
            lines.push(project_line);
            true
        }
        (false, true) => {
            lines.push(user_line);
            true
        }
        (false, false) => {
            lines.push(project_line);
            if !matches!(f.user_hook.1, HookFile::Missing) {
                lines.push(user_line);
            }
            false
        }
    };
    match cli {
        Cli::Claude => {}
        Cli::Codex => {
            let mut runs = false;
            if project_ok {
                let trusted = f.codex_project_trusted == Some(true);
                lines.push(line(
                    "project trusted by codex",
                    if trusted { Status::Ok } else { Status::Fail },
                    if trusted {
                        "trust_level = \"trusted\"".into()
                    } else {
                        "not trusted: Codex ignores the project's .codex/, hooks included".into()
                    },
                    (!trusted).then(|| install_cmd(Cli::Codex, false)),
                ));
                let (l, ok) = codex_line("project", &f.codex_trust.0, false);
                lines.push(l);
                runs |= trusted && ok;
            }
            if user_ok {
                let (l, ok) = codex_line("user", &f.codex_trust.1, true);
                lines.push(l);
                runs |= ok;
            }
            guarded &= runs;
        }
        Cli::Copilot => {
            if project_ok && !user_ok {
                let trusts = f.runner.as_ref().is_some_and(|r| r.trusts_folder);
                let (status, detail, fix) = match &f.runner {
                    Some(_) if trusts => (Status::Ok, "the runner passes --trust-folder".to_string(), None),
                    Some(_) => (
                        Status::Fail,
                        "`copilot -p` loads .github/hooks/ only in a trusted folder, and the runner does not pass --trust-folder".to_string(),
                        Some(format!(
                            "add \"--trust-folder\" to the runner's command, or {}",
                            install_cmd(Cli::Copilot, true)
                        )),
                    ),
                    // Not "guarded": whether a run passes --trust-folder is
                    // the caller's, not the file's.
                    None => (
                        Status::Fail,
                        "`copilot -p` loads .github/hooks/ only with --trust-folder (interactive: once the folder is trusted); a run without it is unguarded".to_string(),
                        Some(install_cmd(Cli::Copilot, true)),
                    ),
                };
                guarded &= status != Status::Fail;
                lines.push(line("folder trust", status, detail, fix));
            }
        }
        Cli::Gemini => {
            if project_ok && !user_ok {
                let trusts = f.runner.as_ref().is_some_and(|r| r.trusts_folder);
                let (status, detail, fix) = match &f.runner {
                    Some(_) if trusts => (
                        Status::Ok,
                        "the runner sets GEMINI_CLI_TRUST_WORKSPACE=true".to_string(),
                        None,
                    ),
                    Some(_) => (
                        Status::Fail,
                        "`gemini -p` loads .gemini/settings.json hooks only in a trusted workspace, and the runner does not set GEMINI_CLI_TRUST_WORKSPACE=true (`--skip-trust` runs without the project's hooks)".to_string(),
                        Some(format!(
                            "add `GEMINI_CLI_TRUST_WORKSPACE: \"true\"` to the runner's env, or {}",
                            install_cmd(Cli::Gemini, true)
                        )),
                    ),
                    None => (
                        Status::Warn,
                        "`gemini -p` loads .gemini/settings.json hooks only in a trusted workspace (GEMINI_CLI_TRUST_WORKSPACE=true, or trusted interactively)".to_string(),
                        Some(install_cmd(Cli::Gemini, true)),
                    ),
                };
                guarded &= status != Status::Fail;
                lines.push(line("folder trust", status, detail, fix));
            }
        }
    }
    let runner = f.runner.is_some();
    let guard_off = f.runner.as_ref().is_some_and(|r| r.guard_off);
    if let Some(r) = &f.runner {
        let who = r.agents.join(", ");
        let (status, detail) = match (guarded, guard_off) {
            (true, _) => (Status::Ok, format!("runner of {who}: guarded")),
            (false, true) => (
                Status::Warn,
                format!("runner of {who}: runs unguarded, allowed by `guard: off`"),
            ),
            (false, false) => (
                Status::Fail,
                format!("runner of {who}: would run unguarded; squadd refuses to dispatch to it"),
            ),
        };
        lines.push(line(
            "runner",
            status,
            detail,
            (status == Status::Fail)
                .then(|| "fix the lines above, or set `guard: off` on the runner entry".into()),
        ));
    }
    CliVerdict {
        cli,
        guarded,
        runner,
        blocks_dispatch: runner && !guarded && !guard_off,
        lines,
    }
}

/// The first failing line's detail and fix, for a refusal message.
pub fn refusal(v: &CliVerdict) -> String {
    let fails: Vec<String> = v
        .lines
        .iter()
        .filter(|l| l.status == Status::Fail && l.check != "runner")
        .map(|l| match &l.fix {
            Some(fix) => format!("{}: {} (fix: {fix})", l.check, l.detail),
            None => format!("{}: {}", l.check, l.detail),
        })
        .collect();
    format!(
        "{} would run unguarded: {}; or set `guard: off` on the runner entry",
        v.cli.program(),
        fails.join("; ")
    )
}

// ---------------------------------------------------------------------------
// The proof: the hook run as the CLI runs it, on a write it must refuse.
// One table per CLI, so another CLI slots in with its own rows.
// ---------------------------------------------------------------------------

/// How a CLI keeps and runs its pre-tool hooks, for the proof.
#[derive(Debug, Clone, Copy)]
pub struct HookShape {
    /// The event key under `hooks`.
    pub event: &'static str,
    /// The key of a handler's command.
    pub command_key: &'static str,
    /// The key of a handler's timeout.
    pub timeout_key: &'static str,
    /// Whether that timeout is in milliseconds (Gemini CLI), not seconds.
    pub timeout_in_ms: bool,
    /// Whether handlers sit in matcher groups (`{"matcher", "hooks": […]}`).
    pub grouped: bool,
    /// The tool name of the probe write, matched against the matchers.
    pub probe_tool: &'static str,
}

impl Cli {
    /// How this CLI keeps its pre-tool hooks.
    pub fn hook_shape(self) -> HookShape {
        match self {
            Cli::Claude => HookShape {
                event: "PreToolUse",
                command_key: "command",
                timeout_key: "timeout",
                timeout_in_ms: false,
                grouped: true,
                probe_tool: "Write",
            },
            Cli::Codex => HookShape {
                event: "PreToolUse",
                command_key: "command",
                timeout_key: "timeout",
                timeout_in_ms: false,
                grouped: true,
                probe_tool: "apply_patch",
            },
            Cli::Copilot => HookShape {
                event: "preToolUse",
                command_key: "bash",
                timeout_key: "timeoutSec",
                timeout_in_ms: false,
                grouped: false,
                probe_tool: "create",
            },
            Cli::Gemini => HookShape {
                event: "BeforeTool",
                command_key: "command",
                timeout_key: "timeout",
                timeout_in_ms: true,
                grouped: true,
                probe_tool: "write_file",
            },
        }
    }

    /// The hook input this CLI sends before it writes `path` (absolute) in
    /// the project at `cwd`.
    pub fn probe_input(self, cwd: &str, path: &str) -> String {
        let v = match self {
            Cli::Claude => serde_json::json!({
                "session_id": "squad-guard-doctor",
                "hook_event_name": "PreToolUse",
                "cwd": cwd,
                "tool_name": "Write",
                "tool_input": {"file_path": path, "content": "probe\n"},
            }),
            Cli::Codex => serde_json::json!({
                "session_id": "squad-guard-doctor",
                "turn_id": "squad-guard-doctor",
                "hook_event_name": "PreToolUse",
                "cwd": cwd,
                "tool_name": "apply_patch",
                "tool_input": {"command": format!("*** Begin Patch\n*** Add File: {path}\n+probe\n*** End Patch\n")},
            }),
            Cli::Copilot => serde_json::json!({
                "timestamp": 0,
                "cwd": cwd,
                "toolName": "create",
                "toolArgs": serde_json::json!({"path": path, "file_text": "probe\n"}).to_string(),
            }),
            Cli::Gemini => serde_json::json!({
                "session_id": "squad-guard-doctor",
                "hook_event_name": "BeforeTool",
                "cwd": cwd,
                "tool_name": "write_file",
                "tool_input": {"file_path": path, "content": "probe\n"},
            }),
        };
        v.to_string()
    }
}

/// One hook command the CLI would run for the probe write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    /// The shell command.
    pub command: String,
    /// Its timeout, seconds (the file's, else the CLI's default of 60).
    pub timeout_secs: u64,
}

/// Whether a matcher selects `tool`: absent, empty or `*` selects every
/// tool; else a `|`-separated list of tool names. Anything else (a
/// regular expression) is `None`: the doctor does not guess.
fn matcher_selects(matcher: Option<&str>, tool: &str) -> Option<bool> {
    match matcher.map(str::trim) {
        None | Some("") | Some("*") => Some(true),
        Some(m)
            if m.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|') =>
        {
            Some(m.split('|').any(|n| n == tool))
        }
        Some(_) => None,
    }
}

/// The commands a CLI runs from one hook file's text before the probe
/// write, or why none will (`Err`): hooks disabled (`disableAllHooks`), no
/// entry of `"type": "command"` whose matcher selects the write (a
/// `"type": "prompt"` entry runs no command), a matcher the doctor cannot
/// read.
pub fn probe_commands(cli: Cli, text: &str) -> Result<Vec<HookCommand>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    if doc.get("disableAllHooks") == Some(&serde_json::Value::Bool(true)) {
        return Err("`disableAllHooks: true` in the same file turns every hook off".into());
    }
    let shape = cli.hook_shape();
    let list = doc["hooks"][shape.event]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut handlers = Vec::new();
    let mut unreadable = Vec::new();
    if shape.grouped {
        for group in &list {
            match matcher_selects(group["matcher"].as_str(), shape.probe_tool) {
                Some(true) => {
                    handlers.extend(group["hooks"].as_array().cloned().unwrap_or_default())
                }
                Some(false) => {}
                None => unreadable.push(group["matcher"].as_str().unwrap_or_default().to_string()),
            }
        }
    } else {
        handlers = list;
    }
    let commands: Vec<HookCommand> = handlers
        .iter()
        .filter(|h| h["type"].as_str().unwrap_or("command") == "command")
        .filter_map(|h| {
            let command = h[shape.command_key].as_str()?.trim();
            (!command.is_empty()).then(|| HookCommand {
                command: command.to_string(),
                timeout_secs: h[shape.timeout_key].as_u64().map_or(60, |t| {
                    if shape.timeout_in_ms {
                        t.div_ceil(1000)
                    } else {
                        t
                    }
                }),
            })
        })
        .collect();
    if commands.is_empty() {
        let why = if unreadable.is_empty() {
            format!(
                "no `\"type\": \"command\"` hook whose matcher selects `{}` (a write)",
                shape.probe_tool
            )
        } else {
            format!(
                "no hook selects `{}` by a list of tool names (matcher `{}` cannot be judged)",
                shape.probe_tool,
                unreadable.join("`, `")
            )
        };
        return Err(why);
    }
    Ok(commands)
}

/// Whether a hook's answer (its exit status, `None` when killed, and its
/// stdout) denies the call, as the CLI reads it: exit 2 (Claude Code,
/// Codex, Gemini CLI), or JSON with `permissionDecision: "deny"` (at the
/// top, or in `hookSpecificOutput`) or `decision: "block"` (Gemini CLI also
/// `decision: "deny"`).
pub fn is_denial(cli: Cli, code: Option<i32>, stdout: &str) -> bool {
    if code == Some(2) && cli != Cli::Copilot {
        return true;
    }
    if code != Some(0) {
        return false;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(stdout.trim()) else {
        return false;
    };
    v["permissionDecision"] == "deny"
        || v["hookSpecificOutput"]["permissionDecision"] == "deny"
        || (cli != Cli::Copilot && v["decision"] == "block")
        || (cli == Cli::Gemini && v["decision"] == "deny")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proof_reads_each_clis_hooks_as_the_cli_does() {
        let claude = |m: &str, ty: &str, extra: &str| {
            format!(
                r#"{{{extra}"hooks": {{"PreToolUse": [{{"matcher": "{m}", "hooks": [{{"type": "{ty}", "command": "/bin/squadctl guard --format claude", "timeout": 10}}]}}]}}}}"#
            )
        };
        let ok = probe_commands(Cli::Claude, &claude("Write|Edit|Bash", "command", "")).unwrap();
        assert_eq!(ok[0].command, "/bin/squadctl guard --format claude");
        assert_eq!(ok[0].timeout_secs, 10);
        assert!(probe_commands(Cli::Claude, &claude("", "command", "")).is_ok());
        for (text, why) in [
            (claude("Read", "command", ""), "selects `Write`"),
            (claude("Write", "prompt", ""), "selects `Write`"),
            (
                claude("Write", "command", r#""disableAllHooks": true, "#),
                "disableAllHooks",
            ),
            (claude("Wr.*", "command", ""), "cannot be judged"),
        ] {
            let e = probe_commands(Cli::Claude, &text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let copilot = r#"{"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": "squadctl guard --format copilot", "timeoutSec": 5}]}}"#;
        assert_eq!(
            probe_commands(Cli::Copilot, copilot).unwrap()[0].timeout_secs,
            5
        );
        let codex = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash|apply_patch", "hooks": [{"type": "command", "command": "x"}]}]}}"#;
        assert_eq!(
            probe_commands(Cli::Codex, codex).unwrap()[0].timeout_secs,
            60
        );
    }

    #[test]
    fn only_a_denial_the_cli_reads_as_one_counts() {
        let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}"#;
        assert!(is_denial(Cli::Claude, Some(0), deny));
        assert!(is_denial(Cli::Claude, Some(2), ""));
        assert!(!is_denial(
            Cli::Claude,
            Some(127),
            "sh: squadctl: not found"
        ));
        assert!(!is_denial(Cli::Claude, Some(0), ""));
        assert!(!is_denial(Cli::Claude, None, deny));
        assert!(is_denial(
            Cli::Copilot,
            Some(0),
            r#"{"permissionDecision": "deny"}"#
        ));
        assert!(!is_denial(Cli::Copilot, Some(2), ""));
        // Each probe is JSON the guard reads.
        for cli in Cli::ALL {
            let v: serde_json::Value =
                serde_json::from_str(&cli.probe_input("/p", "/p/.squad/run/x")).unwrap();
            assert_eq!(v["cwd"], "/p");
        }
    }

    fn facts(cli: Cli) -> CliFacts {
        CliFacts {
            cli,
            version: Some("1.0".into()),
            runner: None,
            project_hook: ("p".into(), HookFile::Installed),
            user_hook: ("u".into(), HookFile::Missing),
            codex_project_trusted: Some(true),
            codex_trust: (
                CodexHookTrust::Listed {
                    status: "trusted".into(),
                    enabled: true,
                },
                CodexHookTrust::NotListed,
            ),
        }
    }

    #[test]
    fn claude_with_a_hook_is_guarded_and_without_one_blocks_its_runner() {
        assert!(diagnose(&facts(Cli::Claude)).guarded);
        let mut f = facts(Cli::Claude);
        f.project_hook.1 = HookFile::Missing;
        f.runner = Some(RunnerUse {
            agents: vec!["*".into()],
            ..RunnerUse::default()
        });
        let v = diagnose(&f);
        assert!(!v.guarded && v.blocks_dispatch);
        assert!(refusal(&v).contains("squadctl guard install --claude"));
        f.runner.as_mut().unwrap().guard_off = true;
        assert!(!diagnose(&f).blocks_dispatch);
    }

    #[test]
    fn codex_needs_project_trust_and_a_matching_review() {
        assert!(diagnose(&facts(Cli::Codex)).guarded);
        let mut f = facts(Cli::Codex);
        f.codex_project_trusted = Some(false);
        assert!(!diagnose(&f).guarded);
        let mut f = facts(Cli::Codex);
        f.codex_trust.0 = CodexHookTrust::Listed {
            status: "modified".into(),
            enabled: true,
        };
        let v = diagnose(&f);
        assert!(!v.guarded);
        assert!(
            v.lines
                .iter()
                .any(|l| l.detail.contains("edited after its review"))
        );
        // The user's reviewed hook suffices without project trust.
        let mut f = facts(Cli::Codex);
        f.project_hook.1 = HookFile::Missing;
        f.codex_project_trusted = Some(false);
        f.user_hook.1 = HookFile::Installed;
        f.codex_trust.1 = CodexHookTrust::Listed {
            status: "trusted".into(),
            enabled: true,
        };
        assert!(diagnose(&f).guarded);
    }

    /// Issue 38: a Gemini runner's project hook runs only when the runner
    /// trusts the workspace through `GEMINI_CLI_TRUST_WORKSPACE=true`.
    #[test]
    fn gemini_project_hooks_need_the_runner_to_trust_the_workspace() {
        let mut f = facts(Cli::Gemini);
        f.runner = Some(RunnerUse {
            agents: vec!["docs".into()],
            guard_off: false,
            trusts_folder: false,
        });
        let v = diagnose(&f);
        assert!(v.blocks_dispatch);
        assert!(
            refusal(&v).contains("GEMINI_CLI_TRUST_WORKSPACE"),
            "{}",
            refusal(&v)
        );
        f.runner.as_mut().unwrap().trusts_folder = true;
        assert!(diagnose(&f).guarded);
        f.runner.as_mut().unwrap().trusts_folder = false;
        f.user_hook.1 = HookFile::Installed;
        assert!(diagnose(&f).guarded);
        assert_eq!(Cli::of_program("/usr/bin/gemini"), Some(Cli::Gemini));
    }

    #[test]
    fn copilot_repository_hooks_need_the_runner_to_trust_the_folder() {
        let mut f = facts(Cli::Copilot);
        f.runner = Some(RunnerUse {
            agents: vec!["frontend".into()],
            guard_off: false,
            trusts_folder: false,
        });
        assert!(diagnose(&f).blocks_dispatch);
        f.runner.as_mut().unwrap().trusts_folder = true;
        assert!(diagnose(&f).guarded);
        f.runner.as_mut().unwrap().trusts_folder = false;
        f.user_hook.1 = HookFile::Installed;
        assert!(diagnose(&f).guarded);
    }

    #[test]
    fn programs_name_their_cli() {
        assert_eq!(Cli::of_program("/usr/local/bin/codex"), Some(Cli::Codex));
        assert_eq!(Cli::of_program("claude"), Some(Cli::Claude));
        assert_eq!(Cli::of_program("./agent.sh"), None);
    }
}
