//! Tokens, cost, the CLI's model warning and budgets of agent runs (issue
//! 38) with the real binaries: squadd starts a script that prints what
//! Claude Code prints with `--output-format stream-json --verbose` (known
//! token counts; its retirement warning on stderr), and squadd records,
//! prices, shows and holds the run to its budget. The real CLIs do the
//! same against the scripted model in `real_clis.rs`.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The fake Claude Code run: `TURNS` responses of 1000 input, 200 cached
/// and 50 output tokens each, Claude Code 2.1.332's retirement warning,
/// the `result` with the totals, then `completed`. `MODE=spend` never
/// stops responding (a response every half second, a fast model's pace,
/// above squadd's 200 ms look at live runs) until it is stopped.
const AGENT: &str = r#"#!/bin/sh
echo '{"type":"system","subtype":"init","model":"claude-opus-4-8"}'
echo '⚠ Claude Opus 4.8 will be retired on November 30, 2026. Consider switching to a newer model.' >&2
usage='"usage":{"input_tokens":1000,"cache_read_input_tokens":200,"cache_creation_input_tokens":0,"output_tokens":50}'
i=0
while [ "$MODE" = spend ] || [ $i -lt "${TURNS:-2}" ]; do
  echo '{"type":"assistant","message":{"id":"msg_'$i'","model":"claude-opus-4-8",'"$usage"'}}'
  i=$((i+1))
  # Stays: the pace of a model's responses, until squadd stops the run.
  [ "$MODE" = spend ] && sleep 0.5
done
in=$((i*1000)); cached=$((i*200)); out=$((i*50))
echo '{"type":"result","subtype":"success","total_cost_usd":0.5,"usage":{"input_tokens":'$in'},"modelUsage":{"claude-opus-4-8":{"inputTokens":'$in',"outputTokens":'$out',"cacheReadInputTokens":'$cached',"cacheCreationInputTokens":0,"costUSD":0.5}}}'
"$SQUADCTL" progress --status completed --percent 100 -q
"#;

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    session: PathBuf,
}

/// A project whose every agent is the fake run, with `runners_extra`
/// under `runners:` and the agent's `env`.
fn project(env: &[(&str, &str)], runners_extra: &str, config: &str) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(tmp.path()).unwrap();
    let session = init_session(&root, "spend");
    let agent = root.join("fake-claude.sh");
    fs::write(&agent, AGENT).unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    let mut env_yaml = format!("        SQUADCTL: \"{}\"\n", env!("CARGO_BIN_EXE_squadctl"));
    for (k, v) in env {
        env_yaml.push_str(&format!("        {k}: \"{v}\"\n"));
    }
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  retry_backoff: 100ms\n{runners_extra}  agents:\n    \"*\":\n      command: [\"{}\"]\n      max_retries: 1\n      env:\n{env_yaml}",
            agent.display()
        ),
    );
    fs::write(root.join(".squad/config.json"), config).unwrap();
    Project {
        _tmp: tmp,
        root,
        session,
    }
}

fn task(root: &Path, id: &str) {
    ok(run(ctl(root).args([
        "task",
        "new",
        "--id",
        id,
        "--agent",
        "alpha",
        "--instruction",
        "spend",
        "--allow",
        "src/**",
    ])));
}

/// The run of `task` in `runs --all --json`, once `done` says so.
fn run_of(root: &Path, task: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually("the run as expected", || {
        let out = run(ctl(root).args(["runs", "--all", "--json"]));
        let v: Value = serde_json::from_str(&stdout(&out)).ok()?;
        v.as_array()?
            .iter()
            .find(|r| r["task"] == task && done(r))
            .cloned()
    })
}

#[test]
fn a_runs_tokens_are_recorded_priced_and_shown_with_the_clis_model_warning() {
    let p = project(
        &[("TURNS", "2")],
        "",
        r#"{"models": {"default": "claude-opus-4-8"}, "prices": {"claude-opus-4-8": {"input": 5, "cachedInput": 0.5, "output": 25}}}"#,
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_a");
    let r = run_of(&p.root, "task_a", |r| r["completed"] == true);
    // Exactly the result's totals, priced by the table:
    // 2000 * $5/M + 400 * $0.5/M + 100 * $25/M = $0.0127.
    let u = &r["usage"];
    assert_eq!(
        (
            u["input_tokens"].as_u64(),
            u["cached_tokens"].as_u64(),
            u["output_tokens"].as_u64()
        ),
        (Some(2000), Some(400), Some(100)),
        "{r:#}"
    );
    assert_eq!(u["cost_usd"].as_f64(), Some(0.0127), "{r:#}");
    assert_eq!(u["cost_from"], "prices", "{r:#}");
    assert_eq!(u["model"], "claude-opus-4-8");
    assert!(
        r["model_warning"]
            .as_str()
            .is_some_and(|w| w.contains("will be retired on November 30, 2026")),
        "{r:#}"
    );
    // Needs attention: the warning, with what to do.
    let status: Value =
        serde_json::from_str(&ok(run(ctl(&p.root).args(["status", "--json"])))).unwrap();
    let items = status["needs_attention"].as_array().unwrap();
    assert!(
        items.iter().any(|i| i["kind"] == "model-warning"
            && i["summary"]
                .as_str()
                .unwrap_or("")
                .contains("claude-opus-4-8")),
        "{status:#}"
    );
    // status and usage show the session's figures; the audit log too.
    let sname = p
        .session
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        status["usage"][&sname]["cost_usd"].as_f64(),
        Some(0.0127),
        "{status:#}"
    );
    let human = ok(run(ctl(&p.root).args(["status"])));
    assert!(
        human.contains("tokens and cost:") && human.contains("2500 tokens"),
        "{human}"
    );
    let csv = ok(run(ctl(&p.root).args(["usage", "--csv"])));
    assert_eq!(
        csv.lines().nth(1),
        Some(
            format!("{sname},task_a,alpha,1,exited,claude-opus-4-8,2000,400,100,0.012700").as_str()
        ),
        "{csv}"
    );
    let shown = ok(run(ctl(&p.root).args([
        "task",
        "show",
        "task_a",
        "--session",
        &sname,
    ])));
    assert!(
        shown.contains("tokens: 2000 in, 400 cached, 100 out, $0.0127"),
        "{shown}"
    );
    let log = audit_log(&p.root).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("\"kind\":\"agent-exited\"") && l.contains("\"cost_usd\":0.0127")),
        "{log}"
    );
    // The console shows the session's tokens and cost on its line.
    if crate::attention::have_tmux() {
        let top = crate::attention::start_top(&p.root, "90", "30");
        top.wait_for(&[&sname, "2500 tok $0.0127"]);
    }
}

#[test]
fn a_run_over_its_token_budget_is_stopped_held_and_the_lead_told_the_figures() {
    let p = project(
        &[("MODE", "spend")],
        "  grace: 1s\n  budget:\n    run: {tokens: 5000}\n    session: {tokens: 6000}\n",
        "{}",
    );
    let _d = Daemon::start(&p.root);
    task(&p.root, "task_b");
    // Stopped within a response of passing 5000 tokens (1250 each).
    let r = run_of(&p.root, "task_b", |r| r["state"] == "over-budget");
    assert_eq!(r["held"], true, "{r:#}");
    let figures = r["over_budget"].as_str().unwrap_or_default().to_string();
    let used: u64 = figures.split(' ').next().unwrap().parse().unwrap();
    assert!((5001..=6250).contains(&used), "{figures}");
    assert!(
        figures.ends_with("tokens of a 5000-token budget"),
        "{figures}"
    );
    let log = audit_log(&p.root).unwrap_or_default();
    assert!(log.contains("\"kind\":\"agent-over-budget\""), "{log}");
    // The lead is told, with the figures.
    let text = eventually("the lead's message", || {
        fs::read_dir(&p.session)
            .ok()?
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("role-comm-squadd-to-lead-")
            })
            .map(|e| fs::read_to_string(e.path()).unwrap_or_default())
            .find(|t| t.contains("over its budget"))
    });
    assert!(text.contains(&figures), "{text}");
    // Held: not retried although a retry was left; the session's budget
    // needs attention.
    let status: Value =
        serde_json::from_str(&ok(run(ctl(&p.root).args(["status", "--json"])))).unwrap();
    let kinds: Vec<&str> = status["needs_attention"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"run-held") && kinds.contains(&"session-budget"),
        "{status:#}"
    );
    let r = run_of(&p.root, "task_b", |_| true);
    assert_eq!(r["attempt"], 1, "{r:#}");
}
