//! Whether an agent CLI's run in a project calls the guard: the facts
//! (hook files, the CLI's version, what Codex says of the hook's trust, how
//! a runner starts it) gathered for `squad_policies::guard_doctor::diagnose`.
//! squadd asks [`runner_check`] before it starts a runner; `squadctl guard
//! doctor` reports [`doctor`]. Here, under `runners`, so that neither the
//! daemon nor the CLI depends on the other for it.

use super::codex_trust::{self, AppServer};
use squad_policies::guard_doctor::{
    Cli, CliFacts, CliVerdict, CodexHookTrust, HookCommand, HookFile, RunnerUse, diagnose,
    is_denial, probe_commands, refusal,
};
use squad_policies::runners::{RunnerSpec, RunnersPolicy};
use squad_protocol::fsx::{ReadError, read_regular_to_string};
use squad_protocol::hook::Format;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment a CLI run sees: the process's own, with a runner
/// entry's `env` over it.
pub(crate) type Env = BTreeMap<String, String>;

pub(crate) fn var(env: &Env, name: &str) -> Option<String> {
    env.get(name)
        .cloned()
        .or_else(|| std::env::var(name).ok())
        .filter(|v| !v.is_empty())
}

/// `program` as the runner or a shell would find it: a path as given
/// (relative to `root`), a bare name on PATH.
pub(crate) fn find_program(program: &str, root: &Path, env: &Env) -> Option<PathBuf> {
    if program.contains('/') {
        let p = root.join(program);
        return p.is_file().then_some(p);
    }
    let path = var(env, "PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The first line of `program --version`, within 20 s.
fn version(program: &Path) -> Option<String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
}

pub(crate) fn format_of(cli: Cli) -> Format {
    match cli {
        Cli::Claude => Format::Claude,
        Cli::Codex => Format::Codex,
        Cli::Copilot => Format::Copilot,
        Cli::Gemini => Format::Gemini,
    }
}

/// The PATH the proof runs hooks with: what a desktop launcher, an IDE or
/// cron gives a CLI, without the user's shell setup.
const LAUNCHER_PATH: &str = "/usr/bin:/bin";

/// The longest the proof waits for one hook.
const PROOF_TIMEOUT: Duration = Duration::from_secs(10);

/// The hook file at `path` as found, its guard entry proven by running it
/// as `cli` would (see [`prove`]).
fn hook_file(path: &Path, cli: Cli, root: &Path, env: &Env) -> HookFile {
    match read_regular_to_string(path, 4 * 1024 * 1024) {
        Err(ReadError::NotFound) => HookFile::Missing,
        Err(e) => HookFile::Invalid(e.to_string()),
        Ok(text) => match super::hook_file::installed(&text, format_of(cli)) {
            Ok(true) => prove(cli, &text, root, env),
            Ok(false) => HookFile::NoEntry,
            Err(e) => HookFile::Invalid(e),
        },
    }
}

/// Claude Code's settings that turn every hook off: `disableAllHooks` in
/// the user's, the project's or the project's local settings.
fn claude_disabled(root: &Path, env: &Env) -> Option<String> {
    let mut files = vec![
        root.join(".claude/settings.json"),
        root.join(".claude/settings.local.json"),
    ];
    if let Some(home) = var(env, "HOME") {
        files.push(Path::new(&home).join(".claude/settings.json"));
    }
    files.into_iter().find_map(|f| {
        let text = read_regular_to_string(&f, 4 * 1024 * 1024).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        (v.get("disableAllHooks") == Some(&serde_json::Value::Bool(true))).then(|| {
            format!(
                "`disableAllHooks: true` in {} turns every hook off",
                f.display()
            )
        })
    })
}

/// The proof: the hooks of `text` that `cli` would run before a write
/// (its matchers, entry types and settings), each run as the CLI runs it
/// (`sh -c COMMAND`, the hook input on stdin, the project as working
/// directory, PATH as a desktop launcher gives it) on a write of
/// `.squad/run/guard-doctor-probe`, which the guard refuses to everyone.
/// Installed only when one of them denies it; nothing is written.
fn prove(cli: Cli, text: &str, root: &Path, env: &Env) -> HookFile {
    if cli == Cli::Claude
        && let Some(why) = claude_disabled(root, env)
    {
        return HookFile::NotProven(why);
    }
    let commands = match probe_commands(cli, text) {
        Ok(c) => c,
        Err(why) => return HookFile::NotProven(why),
    };
    let probe = root
        .join(squad_protocol::tree::SQUAD_DIR)
        .join(squad_protocol::tree::RUN_DIR)
        .join("guard-doctor-probe");
    let input = cli.probe_input(&root.display().to_string(), &probe.display().to_string());
    let mut said = Vec::new();
    for c in &commands {
        match run_hook(c, root, &input, env) {
            Ok((code, stdout, _)) if is_denial(cli, code, &stdout) => return HookFile::Installed,
            Ok((code, stdout, stderr)) => {
                let out = format!("{} {}", stderr.trim(), stdout.trim());
                said.push(format!(
                    "`{}` {}{}",
                    c.command,
                    code.map_or_else(
                        || "timed out or was killed".to_string(),
                        |c| format!("exited {c}")
                    ),
                    if out.trim().is_empty() {
                        " without a denial".to_string()
                    } else {
                        format!(
                            ": {}",
                            crate::text::escape(out.trim())
                                .chars()
                                .take(200)
                                .collect::<String>()
                        )
                    }
                ));
            }
            Err(e) => said.push(format!("`{}` could not run: {e}", c.command)),
        }
    }
    HookFile::NotProven(format!(
        "run as {} runs it (PATH={LAUNCHER_PATH}), it did not deny a write the guard refuses: {}",
        cli.program(),
        said.join("; ")
    ))
}

/// Runs one hook command as a CLI does; (exit code, stdout, stderr).
fn run_hook(
    c: &HookCommand,
    root: &Path,
    input: &str,
    env: &Env,
) -> std::io::Result<(Option<i32>, String, String)> {
    use std::io::Write;
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&c.command)
        .current_dir(root)
        .env_clear()
        .env("PATH", LAUNCHER_PATH)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(home) = var(env, "HOME") {
        cmd.env("HOME", home);
    }
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that exits without reading leaves a broken pipe: its answer counts.
        let _ = stdin.write_all(input.as_bytes());
    }
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let limit = PROOF_TIMEOUT.min(Duration::from_secs(c.timeout_secs.max(1)));
    match rx.recv_timeout(limit) {
        Ok(out) => {
            let out = out?;
            Ok((
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ))
        }
        Err(_) => {
            // SAFETY: a signal to the child we started, still unreaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            Ok((None, String::new(), String::new()))
        }
    }
}

/// What Codex says of our hooks in `root`: (project hook, user hook).
fn codex_says(
    codex: Option<&Path>,
    root: &Path,
    project_hook: &Path,
    user_hook: Option<&Path>,
    env: &Env,
) -> (CodexHookTrust, CodexHookTrust) {
    let Some(codex) = codex else {
        let u = CodexHookTrust::Unknown("`codex` not found on PATH".into());
        return (u.clone(), u);
    };
    let listed = || -> Result<Vec<codex_trust::CodexHook>, codex_trust::CodexError> {
        // The run's CODEX_HOME / HOME decide which config Codex reads.
        let mut server = AppServer::start_with_env(codex, env)?;
        server.hooks(root)
    };
    match listed() {
        Err(e) => {
            let u = CodexHookTrust::Unknown(e.to_string());
            (u.clone(), u)
        }
        Ok(hooks) => {
            let of = |file: Option<&Path>| {
                let Some(file) = file else {
                    return CodexHookTrust::NotListed;
                };
                let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
                let user =
                    user_hook.map(|u| std::fs::canonicalize(u).unwrap_or_else(|_| u.to_path_buf()));
                // The project's guard as Codex loads it for this directory:
                // a run's worktree inside the main checkout gets the main
                // checkout's `.codex/hooks.json` (Codex 0.169-0.171 take
                // the project's layer from the repository a worktree
                // belongs to), not the worktree's own copy.
                let found = codex_trust::ours(&hooks, &file).or_else(|| {
                    (Some(file.as_path()) != user.as_deref())
                        .then(|| codex_trust::ours_from_any(&hooks, user.as_deref()))
                        .flatten()
                });
                match found {
                    Some(h) => CodexHookTrust::Listed {
                        status: h.trust_status.clone(),
                        enabled: h.enabled,
                    },
                    None => CodexHookTrust::NotListed,
                }
            };
            (of(Some(project_hook)), of(user_hook))
        }
    }
}

/// The facts about one CLI, as a run with `env` in `root` would meet them.
/// `ask_version`: run `--version` (doctor); squadd's check skips it, since
/// the version does not decide whether the run is guarded.
fn facts(
    cli: Cli,
    root: &Path,
    program: Option<&Path>,
    runner: Option<RunnerUse>,
    env: &Env,
    ask_version: bool,
) -> CliFacts {
    let var = |name: &str| var(env, name);
    let project_path = super::hook_file::hook_file_path(root, format_of(cli), false, &var)
        .unwrap_or_else(|_| root.to_path_buf());
    let user_path = super::hook_file::hook_file_path(root, format_of(cli), true, &var).ok();
    let project_hook = hook_file(&project_path, cli, root, env);
    let user_hook = user_path
        .as_deref()
        .map_or(HookFile::Missing, |p| hook_file(p, cli, root, env));
    let codex_trust = if cli == Cli::Codex
        && (project_hook == HookFile::Installed || user_hook == HookFile::Installed)
    {
        codex_says(program, root, &project_path, user_path.as_deref(), env)
    } else {
        (CodexHookTrust::NotListed, CodexHookTrust::NotListed)
    };
    // Codex loads a project's .codex/ only when it trusts the project, so
    // a listed project hook is proof of trust.
    let codex_project_trusted = match &codex_trust.0 {
        CodexHookTrust::Listed { .. } => Some(true),
        CodexHookTrust::NotListed => Some(false),
        CodexHookTrust::Unknown(_) => None,
    };
    let shown = |p: &Path| {
        p.strip_prefix(root)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    CliFacts {
        cli,
        version: if ask_version {
            program.and_then(version)
        } else {
            program.map(|p| p.display().to_string())
        },
        runner,
        project_hook: (shown(&project_path), project_hook),
        user_hook: (
            user_path.as_deref().map_or("(no HOME)".into(), shown),
            user_hook,
        ),
        codex_project_trusted,
        codex_trust,
    }
}

/// How a runner entry starts its CLI.
fn runner_use(agent: &str, spec: &RunnerSpec) -> RunnerUse {
    RunnerUse {
        agents: vec![agent.to_string()],
        guard_off: spec.guard_off,
        trusts_folder: spec.command.iter().any(|a| a == "--trust-folder")
            || [
                "GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS",
                "GEMINI_CLI_TRUST_WORKSPACE",
            ]
            .iter()
            .any(|k| spec.env.get(*k).is_some_and(|v| v == "true")),
    }
}

/// Whether a runner of `runners` starts its runs in worktrees.
pub(crate) fn any_in_worktrees(runners: &RunnersPolicy) -> bool {
    runners
        .agents
        .values()
        .any(|s| s.worktree.unwrap_or(runners.worktree))
}

/// The verdicts for every CLI on PATH or named by a runner of `runners`.
/// `tree`: a scratch worktree made as squadd makes a run's (guard settings
/// carried); a CLI whose runner works in worktrees is judged there, since
/// that is where its runs start.
pub(crate) fn doctor(root: &Path, runners: &RunnersPolicy, tree: Option<&Path>) -> Vec<CliVerdict> {
    let mut out = Vec::new();
    let none = Env::new();
    for cli in Cli::ALL {
        // Runner entries starting this CLI, and the environment of the
        // first (HOME, CODEX_HOME may be set there).
        let mut runner: Option<RunnerUse> = None;
        let mut env = Env::new();
        let mut program = None;
        let mut in_tree = false;
        for (agent, spec) in &runners.agents {
            let Some(first) = spec.command.first() else {
                continue;
            };
            if Cli::of_program(first) != Some(cli) {
                continue;
            }
            in_tree |= spec.worktree.unwrap_or(runners.worktree);
            let u = runner_use(agent, spec);
            match &mut runner {
                None => {
                    env = spec.env.clone().into_iter().collect();
                    program = find_program(first, root, &env);
                    runner = Some(u);
                }
                Some(r) => {
                    r.agents.extend(u.agents);
                    r.guard_off &= u.guard_off;
                    r.trusts_folder &= u.trusts_folder;
                }
            }
        }
        if program.is_none() {
            program = find_program(cli.program(), root, &none);
        }
        if runner.is_none() && program.is_none() {
            continue;
        }
        let judged = tree.filter(|_| in_tree);
        let mut verdict = diagnose(&facts(
            cli,
            judged.unwrap_or(root),
            program.as_deref(),
            runner,
            &env,
            true,
        ));
        if in_tree {
            verdict.lines.insert(0, worktree_line(judged.is_some()));
        }
        out.push(verdict);
    }
    out
}

/// The doctor's line saying where a worktree runner's CLI was judged.
fn worktree_line(judged: bool) -> squad_policies::guard_doctor::Line {
    use squad_policies::guard_doctor::{Line, Status};
    if judged {
        Line {
            check: "worktree".into(),
            status: Status::Ok,
            detail: "judged in a worktree made as squadd makes a run's (the branch's files at HEAD, the guard's settings carried from this checkout)".into(),
            fix: None,
        }
    } else {
        Line {
            check: "worktree".into(),
            status: Status::Warn,
            detail: "its runs start in worktrees, but no worktree could be made to judge (not a git checkout on a commit?): judged in this checkout".into(),
            fix: Some("see docs/worktrees.md".into()),
        }
    }
}

/// squadd, before it starts a runner: `Err` with the reason and the fix
/// when the runner's CLI would run without the guard and the entry does not
/// say `guard: off`. A runner that is not one of the known CLIs passes.
pub(crate) fn runner_check(root: &Path, agent: &str, spec: &RunnerSpec) -> Result<(), String> {
    if spec.guard_off {
        return Ok(());
    }
    let Some(first) = spec.command.first() else {
        return Ok(());
    };
    let Some(cli) = Cli::of_program(first) else {
        return Ok(());
    };
    let env: Env = spec.env.clone().into_iter().collect();
    let program = find_program(first, root, &env);
    let verdict = diagnose(&facts(
        cli,
        root,
        program.as_deref(),
        Some(runner_use(agent, spec)),
        &env,
        false,
    ));
    if verdict.blocks_dispatch {
        Err(refusal(&verdict))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// squadd's code (the daemon and the runners it starts) never reaches
    /// into the CLI's modules: what both need lives under `runners` (issue
    /// 22; the daemon used to call `ctl::guard_doctor::runner_check`).
    #[test]
    fn the_daemon_and_the_runners_do_not_depend_on_the_cli() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        // Spelt in two parts so that this line is not a match itself.
        let needle = ["crate::", "ctl"].concat();
        let mut offenders = Vec::new();
        let mut dirs = vec![src.join("daemon"), src.join("runners")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                panic!("cannot list {}", dir.display());
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    for (n, line) in text.lines().enumerate() {
                        if line.contains(&needle) && !line.trim_start().starts_with("//") {
                            offenders.push(format!("{}:{}: {line}", path.display(), n + 1));
                        }
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "{}", offenders.join("\n"));
    }
}
