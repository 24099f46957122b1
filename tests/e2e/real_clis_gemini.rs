//! Gemini CLI (issue 38, item 4) driven like the other real CLIs of
//! `real_clis.rs`: guarded through its `BeforeTool` hook (project and user
//! installs, and the `--skip-trust` gotcha), run by squadd to completion
//! with its tokens and cost counted, against the scripted model server's
//! Gemini API.

use crate::real_clis::{
    Project, SESSION, assert_guarded, assert_tokens, cli, install_guard, path_with, project,
    run_cli, runner_runs_to_completion, steps,
};
use crate::stub_model::{Step, StubModel};
use std::fs;
use std::path::Path;
use std::process::Command;

/// Gemini CLI: `--approval-mode yolo` (nobody approves each tool; the
/// guard still judges) and the run's environment sets
/// `GEMINI_CLI_TRUST_WORKSPACE=true` (see [`gemini_env`]).
const GEMINI_LINE: &str = r#"["gemini", "-p", "Read {prompt_file} and work on task {task} as it says.", "--approval-mode", "yolo", "--output-format", "stream-json", "--model", "{model}"]"#;
/// The environment that points Gemini CLI at the stub (Gemini API,
/// `GOOGLE_GEMINI_BASE_URL`) with an API key, the user settings selecting
/// API-key auth, and the workspace trusted: headless `gemini -p` refuses
/// to run in an untrusted folder, and loads the project's
/// `.gemini/settings.json` (hooks included) only with
/// `GEMINI_CLI_TRUST_WORKSPACE=true` (`--skip-trust` runs without them:
/// `gemini_skip_trust_runs_without_the_projects_hooks`).
pub(crate) fn gemini_env(stub: &StubModel, home: &Path, gemini: &Path) -> Vec<(String, String)> {
    let dir = home.join(".gemini");
    fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    if !settings.exists() {
        fs::write(
            &settings,
            r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"disableAutoUpdate": true}}"#,
        )
        .unwrap();
    }
    [
        ("HOME", home.display().to_string()),
        ("GEMINI_API_KEY", "stub".into()),
        ("GOOGLE_GEMINI_BASE_URL", stub.url()),
        ("GEMINI_CLI_TRUST_WORKSPACE", "true".into()),
        ("PATH", path_with(gemini)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `gemini -p` on the project as backend/task_1, with `extra` arguments.
fn run_gemini(
    gemini: &Path,
    p: &Project,
    env: Vec<(String, String)>,
    extra: &[&str],
) -> (Option<i32>, String) {
    let mut cmd = Command::new(gemini);
    cmd.current_dir(&p.root)
        .args([
            "-p",
            "Work on task_1.",
            "--approval-mode",
            "yolo",
            "--model",
            "gemini-2.5-pro",
        ])
        .args(extra)
        .env_clear()
        .envs(env)
        .env("SQUAD_AGENT", "backend")
        .env("SQUAD_TASK", "task_1")
        .env("SQUAD_SESSION", SESSION);
    run_cli(cmd)
}

/// Issue 38 item 4: Gemini CLI's `BeforeTool` hook, installed by `guard
/// install --gemini`, refuses the writes outside the boundaries, into a
/// lock and through a shell redirection, and its reason reaches the model
/// as the tool's error.
#[test]
fn gemini_calls_the_guard_installed_by_guard_install() {
    let Some(gemini) = cli("gemini") else { return };
    let p = project();
    let out = install_guard(&p.root, &p.home, &["--gemini"]);
    assert!(out.contains("GEMINI_CLI_TRUST_WORKSPACE=true"), "{out}");
    let stub = StubModel::start(steps(&p.root));
    let env = gemini_env(&stub, &p.home, &gemini);
    let (code, log) = run_gemini(&gemini, &p, env, &[]);
    assert_eq!(code, Some(0), "gemini exit\n{log}\n{}", stub.transcript());
    assert_guarded(&stub, &p.root, &log);
}

/// The user-level hook (`guard install --gemini --user`) runs in every
/// workspace, also one trusted with `--skip-trust`.
#[test]
fn gemini_calls_the_user_level_guard() {
    let Some(gemini) = cli("gemini") else { return };
    let p = project();
    let stub = StubModel::start(steps(&p.root));
    let env: Vec<(String, String)> = gemini_env(&stub, &p.home, &gemini)
        .into_iter()
        .filter(|(k, _)| k != "GEMINI_CLI_TRUST_WORKSPACE")
        .collect();
    install_guard(&p.root, &p.home, &["--gemini", "--user"]);
    let (code, log) = run_gemini(&gemini, &p, env, &["--skip-trust"]);
    assert_eq!(code, Some(0), "gemini exit\n{log}\n{}", stub.transcript());
    assert_guarded(&stub, &p.root, &log);
}

/// Why the runner line trusts the workspace through the environment:
/// with `--skip-trust` Gemini CLI 0.61.0 runs, but without the project's
/// `.gemini/settings.json`, so the project's hook never runs and the
/// forbidden file is written. (Should a newer Gemini CLI load them, this
/// fails in CI's newest-CLIs report.)
#[test]
fn gemini_skip_trust_runs_without_the_projects_hooks() {
    let Some(gemini) = cli("gemini") else { return };
    let p = project();
    install_guard(&p.root, &p.home, &["--gemini"]);
    let stub = StubModel::start(steps(&p.root)[..1].to_vec());
    let env: Vec<(String, String)> = gemini_env(&stub, &p.home, &gemini)
        .into_iter()
        .filter(|(k, _)| k != "GEMINI_CLI_TRUST_WORKSPACE")
        .collect();
    let (code, log) = run_gemini(&gemini, &p, env, &["--skip-trust"]);
    assert_eq!(code, Some(0), "gemini exit\n{log}\n{}", stub.transcript());
    assert!(
        p.root.join("frontend/forbidden.txt").exists(),
        "--skip-trust now loads the project's hooks: docs/guards.md can say so\n{log}"
    );
}

/// The documented Gemini runner line, started by squadd: guarded, reports
/// completed through `squadctl progress` in its shell tool, and the run's
/// tokens and cost are exactly the stub's at the price table's price.
#[test]
fn gemini_runner_runs_guarded_to_completion() {
    let Some(gemini) = cli("gemini") else { return };
    let p = project();
    install_guard(&p.root, &p.home, &["--gemini"]);
    let stub = StubModel::start(vec![
        Step::Write(
            p.root.join("frontend/forbidden.txt").display().to_string(),
            "nope\n".into(),
        ),
        Step::Shell("squadctl progress --status completed --percent 100".into()),
    ]);
    fs::write(
        p.root.join(".squad/config.json"),
        r#"{"models": {"roleOverrides": {"backend": "gemini-2.5-pro"}}, "prices": {"gemini-2.5-pro": {"input": 1.25, "cachedInput": 0.31, "output": 10}}}"#,
    )
    .unwrap();
    let env = gemini_env(&stub, &p.home, &gemini);
    let run = runner_runs_to_completion(GEMINI_LINE, env, &stub, &p);
    assert_tokens(&run, &stub);
    let n = stub.answers() as f64;
    let (i, c, o) = crate::stub_model::TOKENS;
    let micros = (n * (i as f64 * 1.25 + c as f64 * 0.31 + o as f64 * 10.0)).round();
    assert_eq!(
        run["usage"]["cost_usd"].as_f64(),
        Some(micros / 1e6),
        "{run:#}"
    );
    assert_eq!(run["usage"]["model"], "gemini-2.5-pro", "{run:#}");
}
