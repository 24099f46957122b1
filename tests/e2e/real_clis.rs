//! The real agent CLIs (issue 25): Claude Code and Codex from npm, installed
//! by `squadctl guard install` and started by squadd's runners, each driven
//! by the scripted model server of `stub_model.rs` on 127.0.0.1. Each test
//! proves the guard runs inside the CLI: a write the guard refuses leaves no
//! file and its reason reaches the model as the tool result; an allowed
//! write happens; a lock held by another agent refuses.
//!
//! The CLIs are looked up in `$SQUAD_CLI_BIN` (the directory `.ci/run`
//! installs them into), then on `PATH`. A test whose CLI is absent says so
//! loudly and passes when CI is unset; with `CI` set it fails.

use crate::daemon::Daemon;
use crate::stub_model::{Step, StubModel};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub(crate) const SESSION: &str = "20240115T100000Z-clis";

/// The documented runner lines (docs/runners.md). Claude Code's prompt
/// comes before the options: `--allowedTools` takes several values and,
/// with no model configured (`--model {model}` left out), would swallow a
/// prompt after it. Each asks its CLI for machine-readable output, which
/// squadd reads for tokens and cost.
const CLAUDE_LINE: &str = r#"["claude", "-p", "Read {prompt_file} and work on task {task} as it says.", "--permission-mode", "acceptEdits", "--allowedTools", "Bash(squadctl:*)", "--model", "{model}", "--output-format", "stream-json", "--verbose"]"#;
const CODEX_LINE: &str = r#"["codex", "exec", "--json", "--sandbox", "workspace-write", "-m", "{model}", "Read {prompt_file} and work on task {task} as it says."]"#;
const COPILOT_LINE: &str = r#"["copilot", "-p", "Read {prompt_file} and work on task {task} as it says.", "--allow-all-tools", "--no-ask-user", "--trust-folder", "--model={model}"]"#;

/// The CLI's executable, or `None` (after saying why) when the test must be
/// skipped. Panics when CI is set and the CLI is missing.
pub(crate) fn cli(name: &str) -> Option<PathBuf> {
    let dirs = std::env::var_os("SQUAD_CLI_BIN")
        .into_iter()
        .chain(std::env::var_os("PATH"))
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    for dir in dirs {
        let exe = dir.join(name);
        if exe.is_file() {
            return Some(exe);
        }
    }
    let msg = format!(
        "real_clis: `{name}` not found in $SQUAD_CLI_BIN or PATH; install it as .ci/run does \
         (npm install --prefix ~/.cache/squad-ci/npm …; SQUAD_CLI_BIN=~/.cache/squad-ci/npm/node_modules/.bin)"
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}; CI is set, so this is a failure, not a skip");
    }
    crate::support::skip(&msg);
    None
}

/// `PATH` with squadctl's directory and the CLI's directory in front.
pub(crate) fn path_with(cli: &Path) -> String {
    let squadctl = Path::new(env!("CARGO_BIN_EXE_squadctl"));
    let mut dirs = vec![
        squadctl.parent().unwrap().to_path_buf(),
        cli.parent().unwrap().to_path_buf(),
    ];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// A project where backend (task_1) may write `backend/**` and `shared/**`,
/// frontend (task_2) holds a lock on `shared/gen.ts`; plus an empty home
/// directory for the CLI's own settings.
pub(crate) struct Project {
    _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) home: PathBuf,
}

pub(crate) fn project() -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(tmp.path()).unwrap();
    let root = base.join("proj");
    let home = base.join("home");
    fs::create_dir_all(root.join(".squad/run")).unwrap();
    fs::create_dir_all(&home).unwrap();
    let s = format!(".squad/sessions/{SESSION}");
    for (agent, task, allowed) in [
        ("backend", "task_1", "backend/**"),
        ("frontend", "task_2", "frontend/**"),
    ] {
        write(
            &root,
            &format!("{s}/role-plan-{agent}-{task}.md"),
            &plan_text(
                task,
                agent,
                &format!(
                    "boundaries:\n  allowed:\n    - \"{allowed}\"\n    - \"shared/**\"\n  forbidden: []\n"
                ),
            ),
        );
    }
    write(&root, "backend/api.rs", "fn main() {}\n");
    // The refused writes' directories exist, so an unguarded CLI would
    // write (Copilot's `create` does not make parent directories).
    write(&root, "frontend/app.ts", "export {}\n");
    write(&root, "shared/api.ts", "export {}\n");
    let out = ctl_run(
        &root,
        &words("lock acquire shared/gen.ts --agent frontend --task task_2 --ttl 1h"),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    Project {
        _tmp: tmp,
        root,
        home,
    }
}

/// `squadctl guard install <flag>` naming this build's squadctl.
pub(crate) fn install_guard(root: &Path, home: &Path, args: &[&str]) -> String {
    let mut c = ctl(root);
    c.args(["guard", "install"])
        .args(args)
        .args(["--program", env!("CARGO_BIN_EXE_squadctl")])
        .env("HOME", home);
    ok(run(&mut c))
}

/// The steps every CLI is driven through, and what each must produce.
pub(crate) fn steps(root: &Path) -> Vec<Step> {
    let p = |rel: &str| root.join(rel).display().to_string();
    vec![
        // 0: outside backend's boundaries.
        Step::Write(p("frontend/forbidden.txt"), "nope\n".into()),
        // 1: inside them.
        Step::Write(p("backend/allowed.txt"), "yes\n".into()),
        // 2: inside them, but locked by frontend.
        Step::Write(p("shared/gen.ts"), "locked\n".into()),
        // 3: a shell redirection outside the boundaries.
        Step::Shell(format!("echo nope > {}", p("frontend/shell.txt"))),
    ]
}

/// Checks what [`steps`] left behind.
pub(crate) fn assert_guarded(stub: &StubModel, root: &Path, log: &str) {
    let ctx = || format!("CLI output:\n{log}\nrequests:\n{}", stub.transcript());
    let result = |i: usize| {
        stub.tool_result(i)
            .unwrap_or_else(|| panic!("no tool result for step {i}\n{}", ctx()))
    };
    assert!(!root.join("frontend/forbidden.txt").exists(), "{}", ctx());
    let r = result(0);
    assert!(
        r.contains("squad guard") && r.contains("outside the boundaries of task_1"),
        "step 0 result: {r}\n{}",
        ctx()
    );
    // Issue 38: a refusal, not a breakage, whatever the CLI wraps around
    // it (Claude Code 2.1.332: "PreToolUse:Write hook error: …"), with
    // what is allowed and the way forward.
    for says in [
        "REFUSED",
        "not a hook failure",
        "`backend/**`",
        "ask the lead",
    ] {
        assert!(
            r.contains(says),
            "step 0 result lacks {says:?}: {r}\n{}",
            ctx()
        );
    }
    assert_eq!(
        fs::read_to_string(root.join("backend/allowed.txt"))
            .ok()
            .as_deref(),
        Some("yes\n"),
        "{}",
        ctx()
    );
    assert!(!root.join("shared/gen.ts").exists(), "{}", ctx());
    let r = result(2);
    assert!(
        r.contains("squad guard") && r.contains("locked by frontend"),
        "step 2 result: {r}\n{}",
        ctx()
    );
    assert!(!root.join("frontend/shell.txt").exists(), "{}", ctx());
    let r = result(3);
    assert!(r.contains("squad guard"), "step 3 result: {r}\n{}", ctx());
}

/// Runs `cmd` to its end (at most 3 minutes: a hung CLI fails the test
/// rather than the suite); its exit code and combined output.
pub(crate) fn run_cli(mut cmd: Command) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("out.log");
    let file = fs::File::create(&log).unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("the CLI starts");
    let code = exit_within(&mut child, Duration::from_secs(180));
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    (code, fs::read_to_string(&log).unwrap_or_default())
}

/// The environment that points Claude Code at the stub and keeps it off
/// the network and out of the developer's settings.
pub(crate) fn claude_env(stub: &StubModel, home: &Path, claude: &Path) -> Vec<(String, String)> {
    [
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", stub.url()),
        ("ANTHROPIC_API_KEY", "sk-ant-stub".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("PATH", path_with(claude)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn claude_code_calls_the_guard_installed_by_guard_install() {
    let Some(claude) = cli("claude") else { return };
    let p = project();
    install_guard(&p.root, &p.home, &["--claude"]);
    let stub = StubModel::start(steps(&p.root));
    let mut cmd = Command::new(&claude);
    cmd.current_dir(&p.root)
        .args([
            "-p",
            "--permission-mode",
            "acceptEdits",
            "--model",
            "claude-sonnet-4-5",
            "Work on task_1.",
        ])
        .env_clear()
        .envs(claude_env(&stub, &p.home, &claude))
        .env("SQUAD_AGENT", "backend")
        .env("SQUAD_TASK", "task_1")
        .env("SQUAD_SESSION", SESSION);
    let (code, log) = run_cli(cmd);
    assert_eq!(code, Some(0), "claude exit\n{log}\n{}", stub.transcript());
    assert_guarded(&stub, &p.root, &log);
}

/// A runner of squadd starting the CLI for a ready task: the run is guarded
/// (a write outside the boundaries refused), reports completed through
/// `squadctl progress`, and ends recorded in `squadctl runs --json`.
pub(crate) fn runner_runs_to_completion(
    command: &str,
    env: Vec<(String, String)>,
    stub: &StubModel,
    p: &Project,
) -> Value {
    runner_runs_to_completion_with(command, "", env, stub, p)
}

/// [`runner_runs_to_completion`] with more keys (YAML lines, indented as
/// the runner entry's) in the runner's policy entry: the run as `runs
/// --json` shows it.
fn runner_runs_to_completion_with(
    command: &str,
    entry_extra: &str,
    env: Vec<(String, String)>,
    stub: &StubModel,
    p: &Project,
) -> Value {
    let env_yaml: String = env
        .iter()
        .filter(|(k, _)| k != "PATH" && k != "HOME" && k != "CODEX_HOME")
        .map(|(k, v)| format!("        {k}: \"{v}\"\n"))
        .collect();
    write_policy(
        &p.root,
        format!(
            // Runs start from a cleared environment: what squadd got for
            // Codex's home is passed on by name.
            "runners:\n  dispatch: true\n  pass_env: [CODEX_HOME]\n  agents:\n    \"*\":\n      command: {command}\n      max_retries: 0\n{entry_extra}{}",
            if env_yaml.is_empty() {
                String::new()
            } else {
                format!("      env:\n{env_yaml}")
            }
        ),
    );
    let daemon_env: Vec<(&str, &str)> = env
        .iter()
        .filter(|(k, _)| k == "PATH" || k == "HOME" || k == "CODEX_HOME")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    // Only the task created below may be dispatched.
    fs::remove_dir_all(p.root.join(".squad/sessions").join(SESSION)).unwrap();
    let daemon = Daemon::start_with_env(&p.root, &daemon_env);
    let session = new_session(&p.root, "run");
    let sname = session.file_name().unwrap().to_string_lossy().into_owned();
    ok(run(ctl(&p.root).args([
        "task",
        "new",
        "--session",
        &sname,
        "--id",
        "task_9",
        "--agent",
        "backend",
        "--instruction",
        "write backend/allowed.txt",
        "--allow",
        "backend/**",
    ])));
    // A real CLI may take a while on a loaded machine: up to 3 minutes,
    // then the failure shows what the run logged and what the model saw.
    let ended = || {
        let out = run(ctl(&p.root).args(["runs", "--all", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v.as_array()?
            .iter()
            .find(|r| r["task"] == "task_9" && r["state"] != "running" && r["state"] != "gone")
            .cloned()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let run = loop {
        if let Some(r) = ended() {
            break r;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "the run did not end\nrun.log:\n{}\nrequests:\n{}",
                fs::read_to_string(session.join("runs/task_9/run.log")).unwrap_or_default(),
                stub.transcript()
            );
        }
        // Poll interval of a wait with a deadline.
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = fs::read_to_string(session.join("runs/task_9/run.log")).unwrap_or_default();
    drop(daemon);
    assert_eq!(
        run["state"],
        "exited",
        "{run}\n{log}\n{}",
        stub.transcript()
    );
    assert_eq!(
        run["exit"]["code"],
        0,
        "{run}\n{log}\n{}",
        stub.transcript()
    );
    assert_eq!(
        run["completed"],
        true,
        "{run}\n{log}\nlast tool result: {:?}\n{}",
        stub.tool_result(1),
        stub.transcript()
    );
    assert!(
        !p.root.join("frontend/forbidden.txt").exists(),
        "{log}\nstep 0 result: {:?}",
        stub.tool_result(0)
    );
    let r = stub.tool_result(0).unwrap_or_default();
    assert!(
        r.contains("squad guard") && r.contains("task_9"),
        "step 0 result: {r}\n{log}\n{}",
        stub.transcript()
    );
    run
}

/// Issue 38: the run's tokens in `runs --json` are exactly what the stub
/// reported (each answer [`crate::stub_model::TOKENS`]).
pub(crate) fn assert_tokens(run: &Value, stub: &StubModel) {
    let n = stub.answers();
    let (input, cached, output) = crate::stub_model::TOKENS;
    let u = &run["usage"];
    assert!(n > 0, "{}", stub.transcript());
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["cached_tokens"].as_u64(),
            u["output_tokens"].as_u64()
        ),
        (Some(n * input), Some(n * cached), Some(n * output)),
        "{run:#}\n{n} answers"
    );
}

/// Issue 44: the run's record holds the CLI's own conversation id, as its
/// output said it under `field` (`session_id`, `thread_id`): what a later
/// run resumes.
fn assert_conversation(run: &Value, p: &Project, field: &str) {
    let id = run["conversation"]
        .as_str()
        .unwrap_or_else(|| panic!("no conversation recorded: {run:#}"));
    let logs: Vec<String> = crate::worktree::walk(&p.root.join(".squad/sessions"))
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "run.log"))
        .filter_map(|f| fs::read_to_string(f).ok())
        .collect();
    let said = format!("\"{field}\":\"{id}\"");
    let line = logs
        .iter()
        .flat_map(|l| l.lines())
        .find(|l| l.contains(&said))
        .unwrap_or_else(|| panic!("{said} not in the run's output: {logs:#?}"));
    eprintln!("conversation line: {line}");
}

/// The price table every priced test writes (US dollars per million
/// tokens), and the cost of `answers` stub answers at `model`'s price.
const PRICES: &str = r#""prices": {"claude-opus-4-8": {"input": 5, "cachedInput": 0.5, "output": 25}, "gpt-5.1-codex": {"input": 1.25, "cachedInput": 0.125, "output": 10}}"#;

fn priced_cost(model: &str, answers: u64) -> f64 {
    let (input, cached, output) = crate::stub_model::TOKENS;
    let (pi, pc, po) = match model {
        "claude-opus-4-8" => (5.0, 0.5, 25.0),
        "gpt-5.1-codex" => (1.25, 0.125, 10.0),
        other => panic!("no price for {other}"),
    };
    // Rounded to micro-dollars, as squadd records it.
    let micros =
        (answers as f64 * (input as f64 * pi + cached as f64 * pc + output as f64 * po)).round();
    micros / 1e6
}

#[test]
fn claude_code_runner_runs_guarded_to_completion_with_the_default_model() {
    let Some(claude) = cli("claude") else { return };
    let p = project();
    install_guard(&p.root, &p.home, &["--claude"]);
    let stub = StubModel::start(vec![
        Step::Write(
            p.root.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Shell("squadctl progress --status completed --percent 100".into()),
    ]);
    // The documented runner line (docs/runners.md) with no model in
    // config.json: `--model {model}` is left out, Claude Code's own
    // default is used.
    let env = claude_env(&stub, &p.home, &claude);
    let run = runner_runs_to_completion(CLAUDE_LINE, env, &stub, &p);
    assert!(!run["command"].to_string().contains("--model"), "{run:#}");
    // Tokens as the stub reported them; with no price for Claude Code's
    // own default model, the cost is Claude Code's own estimate.
    assert_tokens(&run, &stub);
    assert_eq!(run["usage"]["cost_from"], "cli", "{run:#}");
    assert_conversation(&run, &p, "session_id");
}

/// The steps of a run that reports through the squad MCP server: a write
/// outside the boundaries (refused by the guard), then `progress
/// completed` as an MCP tool call (issue 38: the call must succeed, not
/// merely be offered; no shell step could complete the task instead).
fn mcp_steps(p: &Project) -> Vec<Step> {
    vec![
        Step::Write(
            p.root.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Mcp(
            "progress".into(),
            serde_json::json!({"task": "task_9", "status": "completed", "percent": 100}),
        ),
    ]
}

/// The MCP call of [`mcp_steps`] reached squadctl and succeeded.
fn assert_mcp_call_succeeded(stub: &StubModel, run: &Value) {
    let r = stub.tool_result(1).unwrap_or_default();
    assert!(
        !r.contains("approval") && !r.contains("permission") && !r.contains("is_error\":true"),
        "the MCP call was refused: {r}\n{run:#}\n{}",
        stub.transcript()
    );
    assert_eq!(run["completed"], true, "{r}\n{run:#}");
}

/// Issues 29 and 38: a runner with `mcp: true` starts Claude Code with the
/// squad MCP server for its agent, and the model's call of a squad tool
/// succeeds (`--allowedTools mcp__squad`: `claude -p` has no one to ask);
/// the run is guarded and completes through that call. Priced by
/// config.json: the cost is exactly the price table's.
#[test]
fn claude_code_runner_with_mcp_completes_through_a_squad_tool_call() {
    let Some(claude) = cli("claude") else { return };
    let p = project();
    install_guard(&p.root, &p.home, &["--claude"]);
    let stub = StubModel::start(mcp_steps(&p));
    fs::write(
        p.root.join(".squad/config.json"),
        format!(r#"{{"models": {{"default": "claude-opus-4-8"}}, {PRICES}}}"#),
    )
    .unwrap();
    let env = claude_env(&stub, &p.home, &claude);
    let run = runner_runs_to_completion_with(CLAUDE_LINE, "      mcp: true\n", env, &stub, &p);
    assert_mcp_call_succeeded(&stub, &run);
    assert_tokens(&run, &stub);
    assert_eq!(run["usage"]["model"], "claude-opus-4-8", "{run:#}");
    assert_eq!(run["usage"]["cost_from"], "prices", "{run:#}");
    assert_eq!(
        run["usage"]["cost_usd"].as_f64(),
        Some(priced_cost("claude-opus-4-8", stub.answers())),
        "{run:#}"
    );
}

/// As [`claude_code_runner_with_mcp_completes_through_a_squad_tool_call`],
/// for Codex (`-c mcp_servers.squad.*`, the server's tools approved: `codex
/// exec` never asks, so a call needing approval fails).
#[test]
fn codex_runner_with_mcp_completes_through_a_squad_tool_call() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    if has_git() {
        git_ok(&p.root, &["init", "-q"]);
    }
    let stub = StubModel::start(mcp_steps(&p));
    let env = codex_env(&stub, &p.home, &codex);
    install_codex_guard(&p.root, &env, true);
    fs::write(
        p.root.join(".squad/config.json"),
        format!(r#"{{"models": {{"roleOverrides": {{"backend": "gpt-5.1-codex"}}}}, {PRICES}}}"#),
    )
    .unwrap();
    let run = runner_runs_to_completion_with(CODEX_LINE, "      mcp: true\n", env, &stub, &p);
    assert_mcp_call_succeeded(&stub, &run);
    assert_tokens(&run, &stub);
    assert_eq!(
        run["usage"]["cost_usd"].as_f64(),
        Some(priced_cost("gpt-5.1-codex", stub.answers())),
        "{run:#}"
    );
}

/// As [`claude_code_runner_with_mcp_completes_through_a_squad_tool_call`],
/// for Copilot CLI (`--additional-mcp-config`).
#[test]
fn copilot_runner_with_mcp_completes_through_a_squad_tool_call() {
    let Some(copilot) = cli("copilot") else {
        return;
    };
    let p = project();
    install_guard(&p.root, &p.home, &["--copilot"]);
    let stub = StubModel::start(mcp_steps(&p));
    let env = copilot_env(&stub, &p.home, &copilot);
    let run = runner_runs_to_completion_with(COPILOT_LINE, "      mcp: true\n", env, &stub, &p);
    assert_mcp_call_succeeded(&stub, &run);
}

/// The environment that points Codex at the stub: `CODEX_HOME` holds a
/// config.toml whose model provider is the stub (Responses API).
pub(crate) fn codex_env(stub: &StubModel, home: &Path, codex: &Path) -> Vec<(String, String)> {
    let codex_home = home.join(".codex");
    fs::create_dir_all(&codex_home).unwrap();
    fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.1-codex\"\nmodel_provider = \"stub\"\n\n[model_providers.stub]\nname = \"stub\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n",
            stub.url()
        ),
    )
    .unwrap();
    [
        ("HOME", home.display().to_string()),
        ("CODEX_HOME", codex_home.display().to_string()),
        ("PATH", path_with(codex)),
        // squadd's tests run it with RUST_LOG=debug, which Codex would
        // inherit and fill run.log with.
        ("RUST_LOG", "error".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `guard install --codex --trust` with the CLI's environment (Codex on
/// PATH, its CODEX_HOME): what it printed.
pub(crate) fn install_codex_guard(root: &Path, env: &[(String, String)], trust: bool) -> String {
    let mut c = ctl(root);
    c.args(["guard", "install", "--codex"])
        .args(["--program", env!("CARGO_BIN_EXE_squadctl")])
        .envs(env.iter().map(|(k, v)| (k, v)));
    if trust {
        c.arg("--trust");
    }
    ok(run(&mut c))
}

#[test]
fn codex_calls_the_guard_after_guard_install_trust() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    let stub = StubModel::start(steps(&p.root));
    let env = codex_env(&stub, &p.home, &codex);
    let out = install_codex_guard(&p.root, &env, true);
    assert!(out.contains("the guard is trusted and will run"), "{out}");
    let mut cmd = Command::new(&codex);
    cmd.current_dir(&p.root)
        .args([
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "workspace-write",
            "Work on task_1.",
        ])
        .env_clear()
        .envs(env)
        .env("SQUAD_AGENT", "backend")
        .env("SQUAD_TASK", "task_1")
        .env("SQUAD_SESSION", SESSION);
    let (code, log) = run_cli(cmd);
    assert_eq!(code, Some(0), "codex exit\n{log}\n{}", stub.transcript());
    assert_guarded(&stub, &p.root, &log);
}

#[test]
fn codex_install_without_trust_says_what_is_left_and_warns_about_the_bypass() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    let stub = StubModel::start(vec![]);
    let env = codex_env(&stub, &p.home, &codex);
    let out = install_codex_guard(&p.root, &env, false);
    assert!(out.contains("trust the project"), "{out}");
    assert!(out.contains("trusted_hash"), "{out}");
    assert!(out.contains("--trust"), "{out}");
    assert!(
        out.contains("runs every enabled hook of every config layer unreviewed"),
        "{out}"
    );
}

#[test]
fn codex_runner_runs_guarded_to_completion() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    if has_git() {
        git_ok(&p.root, &["init", "-q"]);
    }
    let stub = StubModel::start(vec![
        Step::Write(
            p.root.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Shell("squadctl progress --status completed --percent 100".into()),
    ]);
    let env = codex_env(&stub, &p.home, &codex);
    install_codex_guard(&p.root, &env, true);
    fs::write(
        p.root.join(".squad/config.json"),
        r#"{"models": {"roleOverrides": {"backend": "gpt-5.1-codex"}}}"#,
    )
    .unwrap();
    // The documented runner line (docs/runners.md); `--full-auto` is gone
    // from Codex 0.169 (exit 2).
    let run = runner_runs_to_completion(CODEX_LINE, env, &stub, &p);
    // Codex names no model in its output: the configured one, unpriced.
    assert_tokens(&run, &stub);
    assert_eq!(run["usage"]["model"], "gpt-5.1-codex", "{run:#}");
    assert_eq!(run["usage"]["unpriced"][0], "gpt-5.1-codex", "{run:#}");
    assert_conversation(&run, &p, "thread_id");
}

/// The environment that points Copilot CLI at the stub: offline mode (no
/// GitHub sign-in, telemetry or update) with a BYOK provider of type
/// `anthropic`.
pub(crate) fn copilot_env(stub: &StubModel, home: &Path, copilot: &Path) -> Vec<(String, String)> {
    [
        ("HOME", home.display().to_string()),
        ("COPILOT_OFFLINE", "true".into()),
        ("COPILOT_PROVIDER_BASE_URL", stub.url()),
        ("COPILOT_PROVIDER_TYPE", "anthropic".into()),
        ("COPILOT_PROVIDER_API_KEY", "stub".into()),
        ("COPILOT_MODEL", "claude-sonnet-4-5".into()),
        ("COPILOT_AUTO_UPDATE", "false".into()),
        // The npm package unpacks itself (~235 MB) under the cache
        // directory on first run: share the real one rather than unpack
        // into every test's home.
        ("XDG_CACHE_HOME", shared_cache()),
        ("PATH", path_with(copilot)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The developer's (or CI's) cache directory.
fn shared_cache() -> String {
    std::env::var("XDG_CACHE_HOME")
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| std::env::var("HOME").ok().map(|h| format!("{h}/.cache")))
        .unwrap_or_else(|| "/tmp".into())
}

/// `copilot -p` on the project as backend/task_1, with `extra` arguments.
fn run_copilot(
    copilot: &Path,
    p: &Project,
    env: Vec<(String, String)>,
    extra: &[&str],
) -> (Option<i32>, String) {
    let mut cmd = Command::new(copilot);
    cmd.current_dir(&p.root)
        .args([
            "-p",
            "Work on task_1.",
            "--allow-all-tools",
            "--no-ask-user",
        ])
        .args(extra)
        .env_clear()
        .envs(env)
        .env("SQUAD_AGENT", "backend")
        .env("SQUAD_TASK", "task_1")
        .env("SQUAD_SESSION", SESSION);
    run_cli(cmd)
}

#[test]
fn copilot_calls_the_repository_guard_in_a_trusted_folder() {
    let Some(copilot) = cli("copilot") else {
        return;
    };
    let p = project();
    let out = install_guard(&p.root, &p.home, &["--copilot"]);
    assert!(out.contains("--trust-folder"), "{out}");
    let stub = StubModel::start(steps(&p.root));
    let env = copilot_env(&stub, &p.home, &copilot);
    let (code, log) = run_copilot(&copilot, &p, env, &["--trust-folder"]);
    assert_eq!(code, Some(0), "copilot exit\n{log}\n{}", stub.transcript());
    assert_guarded(&stub, &p.root, &log);
}

#[test]
fn copilot_calls_the_user_level_guard_with_no_folder_trust() {
    let Some(copilot) = cli("copilot") else {
        return;
    };
    let p = project();
    install_guard(&p.root, &p.home, &["--copilot", "--user"]);
    assert!(p.home.join(".copilot/hooks/squad.json").is_file());
    let stub = StubModel::start(steps(&p.root));
    let env = copilot_env(&stub, &p.home, &copilot);
    let (code, log) = run_copilot(&copilot, &p, env, &[]);
    assert_eq!(code, Some(0), "copilot exit\n{log}\n{}", stub.transcript());
    assert_guarded(&stub, &p.root, &log);
}

#[test]
fn copilot_runner_runs_guarded_to_completion() {
    let Some(copilot) = cli("copilot") else {
        return;
    };
    let p = project();
    install_guard(&p.root, &p.home, &["--copilot"]);
    let stub = StubModel::start(vec![
        Step::Write(
            p.root.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Shell("squadctl progress --status completed --percent 100".into()),
    ]);
    let env = copilot_env(&stub, &p.home, &copilot);
    // The documented runner line (docs/runners.md): --trust-folder so the
    // repository's .github/hooks/ are loaded under -p.
    runner_runs_to_completion(COPILOT_LINE, env, &stub, &p);
}

/// `squadctl guard doctor` with the CLI's environment: (exit code, output).
fn doctor(root: &Path, env: &[(String, String)]) -> (i32, String) {
    let out = run(ctl(root)
        .args(["guard", "doctor"])
        .envs(env.iter().map(|(k, v)| (k, v))));
    (code(&out), stdout(&out) + &stderr(&out))
}

#[test]
fn codex_doctor_lines_come_from_real_codex_configurations() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    let stub = StubModel::start(vec![]);
    let env = codex_env(&stub, &p.home, &codex);
    write_policy(
        &p.root,
        "runners:\n  agents:\n    backend:\n      command: [\"codex\", \"exec\", \"--sandbox\", \"workspace-write\", \"-m\", \"{model}\", \"Read {prompt_file}\"]\n",
    );
    // No hook file.
    let (status, out) = doctor(&p.root, &env);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains(".codex/hooks.json: missing"), "{out}");
    assert!(
        out.contains("fix: squadctl guard install --codex --trust"),
        "{out}"
    );
    // The version of the codex under test (pinned, or the newest in CI's
    // second step).
    let version = Command::new(&codex).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    assert!(version.starts_with("codex-cli "), "{version}");
    assert!(out.contains(&version), "{out}");
    // The hook file alone: the project is not trusted.
    install_codex_guard(&p.root, &env, false);
    let (status, out) = doctor(&p.root, &env);
    assert_eq!(status, 1, "{out}");
    assert!(
        out.contains("FAIL  project trusted by codex") && out.contains("not trusted"),
        "{out}"
    );
    // A trusted project, the hook never reviewed.
    let config = p.home.join(".codex/config.toml");
    let mut text = fs::read_to_string(&config).unwrap();
    text += &format!(
        "\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        p.root.display()
    );
    fs::write(&config, text).unwrap();
    let (status, out) = doctor(&p.root, &env);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("ok    project trusted by codex"), "{out}");
    assert!(out.contains("untrusted: never reviewed"), "{out}");
    // Reviewed: guarded.
    install_codex_guard(&p.root, &env, true);
    let (status, out) = doctor(&p.root, &env);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("codex: guarded"), "{out}");
    assert!(out.contains("trusted: hash matches"), "{out}");
    // Edited after the review: Codex would skip it again.
    let hooks = p.root.join(".codex/hooks.json");
    let edited = fs::read_to_string(&hooks)
        .unwrap()
        .replace("\"timeout\": 10", "\"timeout\": 11");
    fs::write(&hooks, edited).unwrap();
    let (status, out) = doctor(&p.root, &env);
    assert_eq!(status, 1, "{out}");
    assert!(out.contains("edited after its review"), "{out}");
}

#[test]
fn squadd_refuses_a_codex_runner_whose_hook_was_edited_after_review() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    let stub = StubModel::start(vec![Step::Write(
        p.root.join("frontend/forbidden.txt").display().to_string(),
        "nope\n".into(),
    )]);
    let env = codex_env(&stub, &p.home, &codex);
    install_codex_guard(&p.root, &env, true);
    // Edited after the review: Codex would skip it silently.
    let hooks = p.root.join(".codex/hooks.json");
    let edited = fs::read_to_string(&hooks)
        .unwrap()
        .replace("\"timeout\": 10", "\"timeout\": 11");
    fs::write(&hooks, edited).unwrap();
    fs::remove_dir_all(p.root.join(".squad/sessions").join(SESSION)).unwrap();
    write_policy(
        &p.root,
        "runners:\n  dispatch: true\n  agents:\n    \"*\":\n      command: [\"codex\", \"exec\", \"--sandbox\", \"workspace-write\", \"-m\", \"{model}\", \"Read {prompt_file}\"]\n      max_retries: 0\n",
    );
    let daemon_env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let _d = Daemon::start_with_env(&p.root, &daemon_env);
    new_session(&p.root, "run");
    ok(run(ctl(&p.root).args([
        "task",
        "new",
        "--id",
        "task_9",
        "--agent",
        "backend",
        "--instruction",
        "x",
        "--allow",
        "backend/**",
    ])));
    let log = crate::daemon::eventually("the refusal is audited", || {
        let log = audit_log(&p.root).unwrap_or_default();
        log.contains("\"kind\":\"run-failed\"").then_some(log)
    });
    assert!(log.contains("codex would run unguarded"), "{log}");
    assert!(log.contains("edited after its review"), "{log}");
    // Codex never ran: the model was never asked.
    assert!(stub.requests().is_empty(), "{}", stub.transcript());
    assert!(!p.root.join("frontend/forbidden.txt").exists());
}
