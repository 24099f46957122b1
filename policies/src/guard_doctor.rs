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
    /// The guard's entry is there.
    Installed,
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
                    None => (
                        Status::Warn,
                        "`copilot -p` loads .github/hooks/ only with --trust-folder (interactive: once the folder is trusted)".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

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
