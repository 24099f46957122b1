//! docs/mcp.md's install paths run exactly as written (issue 38): each
//! `<!-- e2e: CLI -->` block of the page, line by line through `sh -c` in
//! a project, with `squadctl` and the real CLI on `PATH` and the squad
//! variables set as a runner sets them, against the scripted model server,
//! which calls the squad tool `progress`. The call must succeed and the
//! task end completed: a path that only lists the tools fails here.

use crate::real_clis::{
    Project, SESSION, claude_env, cli, codex_env, copilot_env, project, run_cli,
};
use crate::real_clis_gemini::gemini_env;
use crate::stub_model::{Step, StubModel};
use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The lines of the sh block after `<!-- e2e: NAME -->` in docs/mcp.md.
fn doc_block(name: &str) -> Vec<String> {
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/mcp.md"))
            .unwrap();
    let marker = format!("<!-- e2e: {name} -->");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/mcp.md has no `{marker}`"));
    let rest = &page[at + marker.len()..];
    let body = rest
        .split_once("```sh\n")
        .and_then(|(_, b)| b.split_once("\n```"))
        .map(|(b, _)| b)
        .unwrap_or_else(|| panic!("no sh block after `{marker}`"));
    body.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// Runs the block's lines in the project, in order, each to exit 0.
fn run_block(name: &str, p: &Project, env: &[(String, String)], stub: &StubModel) {
    for line in doc_block(name) {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &line])
            .current_dir(&p.root)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("SQUAD_AGENT", "backend")
            .env("SQUAD_TASK", "task_1")
            .env("SQUAD_SESSION", SESSION)
            .env("SQUAD_ROOT", &p.root);
        let (code, out) = run_cli(cmd);
        assert_eq!(
            code,
            Some(0),
            "`{line}` failed:\n{out}\nrequests:\n{}",
            stub.transcript()
        );
    }
}

/// The model's `progress` call succeeded and task_1 is completed.
fn assert_reported_through_mcp(p: &Project, stub: &StubModel) {
    let r = stub
        .tool_result(0)
        .unwrap_or_else(|| panic!("the model's call got no result\n{}", stub.transcript()));
    assert!(
        r.contains("completed") && !r.contains("approval") && !r.contains("permission"),
        "the squad tool call failed: {r}\n{}",
        stub.transcript()
    );
    let out = ok(run(ctl(&p.root).args([
        "task",
        "show",
        "task_1",
        "--json",
        "--session",
        SESSION,
    ])));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["state"], "completed", "{v:#}");
}

fn steps() -> Vec<Step> {
    vec![Step::Mcp(
        "progress".into(),
        serde_json::json!({"task": "task_1", "status": "completed", "percent": 100}),
    )]
}

/// `PATH` with this build's squadctl first, then the CLI's folder.
fn with_squadctl(env: &mut [(String, String)]) {
    let squadctl = PathBuf::from(env!("CARGO_BIN_EXE_squadctl"));
    let dir = squadctl.parent().unwrap().display().to_string();
    for (k, v) in env.iter_mut() {
        if k == "PATH" {
            *v = format!("{dir}:{v}");
        }
    }
}

#[test]
fn the_documented_claude_code_path_calls_a_squad_tool() {
    let Some(claude) = cli("claude") else { return };
    let p = project();
    let stub = StubModel::start(steps());
    let mut env = claude_env(&stub, &p.home, &claude);
    with_squadctl(&mut env);
    run_block("claude", &p, &env, &stub);
    assert_reported_through_mcp(&p, &stub);
}

#[test]
fn the_documented_codex_path_calls_a_squad_tool() {
    let Some(codex) = cli("codex") else { return };
    let p = project();
    let stub = StubModel::start(steps());
    let mut env = codex_env(&stub, &p.home, &codex);
    with_squadctl(&mut env);
    run_block("codex", &p, &env, &stub);
    assert_reported_through_mcp(&p, &stub);
}

#[test]
fn the_documented_copilot_path_calls_a_squad_tool() {
    let Some(copilot) = cli("copilot") else {
        return;
    };
    let p = project();
    let stub = StubModel::start(steps());
    let mut env = copilot_env(&stub, &p.home, &copilot);
    with_squadctl(&mut env);
    run_block("copilot", &p, &env, &stub);
    assert_reported_through_mcp(&p, &stub);
}

#[test]
fn the_documented_gemini_path_calls_a_squad_tool() {
    let Some(gemini) = cli("gemini") else { return };
    let p = project();
    let stub = StubModel::start(steps());
    // The workspace's trust is the block's own (`GEMINI_CLI_TRUST_WORKSPACE`).
    let mut env: Vec<(String, String)> = gemini_env(&stub, &p.home, &gemini)
        .into_iter()
        .filter(|(k, _)| k != "GEMINI_CLI_TRUST_WORKSPACE")
        .collect();
    with_squadctl(&mut env);
    run_block("gemini", &p, &env, &stub);
    assert_reported_through_mcp(&p, &stub);
}
