//! `squadctl guard doctor`: for each agent CLI on PATH or started by a
//! runner, whether its next run in this project calls the guard. The facts
//! are gathered by [`crate::runners::check`] (which squadd also asks before
//! it starts a runner); the verdict is `squad_policies::guard_doctor::diagnose`.

use crate::locks;
use crate::root;
use crate::runners::check::{any_in_worktrees, doctor};
use crate::worktree_start::ScratchTree;
use squad_policies::guard_doctor::{Cli, CliVerdict, Line, Status};
use squad_policies::runners::RunnersPolicy;
use std::path::Path;

/// Check that each agent CLI's next run in this project calls the guard.
///
/// For each of claude, codex, copilot and gemini found on PATH or named by
/// a runner of the policy: the CLI's version, the project's and the user's hook file
/// (present, valid JSON, holding the guard's entry, and proven: its hooks,
/// run as the CLI runs them with a desktop launcher's PATH, deny a write
/// the guard refuses), and what the CLI needs
/// beyond the file: Codex must trust the project and list the hook as
/// reviewed with a matching hash (asked of `codex app-server` itself);
/// `copilot -p` loads repository hooks only with `--trust-folder`, `gemini
/// -p` the project's only with `GEMINI_CLI_TRUST_WORKSPACE=true`. Each
/// failing line says its fix. A CLI that warned in its newest run's output
/// that its model is deprecated or retiring gets a `model` warning.
///
/// Exit status: 1 when a runner's CLI would run unguarded without
/// `guard: off` (squadd refuses to dispatch to it), else 0.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print JSON: `{"ok": bool, "clis": [{cli, guarded, runner,
    /// blocks_dispatch, lines: [{check, status, detail, fix}]}]}`.
    #[arg(long)]
    pub json: bool,
}

/// The project's runners (the policy's `runners:`).
fn runners_of(root: &Path) -> Result<RunnersPolicy, locks::PolicyLoadError> {
    locks::load_policy(root).map(|p| p.runners)
}

/// Whether any runner's CLI would run unguarded without `guard: off`, and
/// the one-line summary (`squadctl health`, `status --check`).
pub(crate) fn summary(root: &Path) -> (bool, String) {
    let runners = match runners_of(root) {
        Ok(r) => r,
        Err(e) => return (false, format!("cannot read the policy: {e}")),
    };
    let scratch = scratch_tree(root, &runners);
    let verdicts = doctor(root, &runners, scratch.as_ref().map(ScratchTree::path));
    let blocked: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.blocks_dispatch)
        .map(|v| v.cli.program())
        .collect();
    let unguarded: Vec<&str> = verdicts
        .iter()
        .filter(|v| !v.guarded && !v.blocks_dispatch)
        .map(|v| v.cli.program())
        .collect();
    let text = if !blocked.is_empty() {
        format!("runners would run unguarded: {}", blocked.join(", "))
    } else if !unguarded.is_empty() {
        format!("unguarded on PATH (no runner): {}", unguarded.join(", "))
    } else if verdicts.is_empty() {
        "no agent CLI on PATH or in a runner".into()
    } else {
        "every agent CLI is guarded".into()
    };
    (!blocked.is_empty(), text)
}

/// With runners working in worktrees, a worktree made as a run's would be,
/// to judge their CLIs where their runs start (issue 44).
fn scratch_tree(root: &Path, runners: &RunnersPolicy) -> Option<ScratchTree> {
    if !any_in_worktrees(runners) {
        return None;
    }
    ScratchTree::make(root, runners)
        .inspect_err(|e| tracing::debug!(error = %e, "no scratch worktree"))
        .ok()
}

fn human(verdicts: &[CliVerdict]) -> String {
    if verdicts.is_empty() {
        return "no agent CLI (claude, codex, copilot, gemini) on PATH or in a runner\n".into();
    }
    let mut out = String::new();
    for v in verdicts {
        out.push_str(&format!(
            "{}: {}\n",
            v.cli.program(),
            if v.guarded {
                "guarded"
            } else if v.blocks_dispatch {
                "UNGUARDED (a runner starts it: squadd refuses to dispatch)"
            } else {
                "UNGUARDED"
            }
        ));
        for l in &v.lines {
            let tag = match l.status {
                Status::Ok => "ok",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            out.push_str(&format!(
                "  {tag:<5} {:<30} {}\n",
                l.check,
                crate::text::escape(&l.detail)
            ));
            if let Some(fix) = &l.fix {
                out.push_str(&format!("        fix: {}\n", crate::text::escape(fix)));
            }
        }
    }
    out
}

/// Each CLI's own warning that its model is deprecated or retiring, from
/// the newest run of it that showed one (docs/runners.md, "Models"): a
/// `model` warning line of that CLI.
fn model_warnings(root: &Path, verdicts: &mut [CliVerdict]) {
    let mut newest: Vec<(Cli, crate::runners::RunRecord)> = Vec::new();
    for (_, r) in crate::runners::all_records(root) {
        let Some(cli) = r.command.first().and_then(|p| Cli::of_program(p)) else {
            continue;
        };
        match newest.iter_mut().find(|(c, _)| *c == cli) {
            Some((_, n)) if n.started_at >= r.started_at => {}
            Some((_, n)) => *n = r,
            None => newest.push((cli, r)),
        }
    }
    for (cli, r) in newest {
        let (Some(w), Some(v)) = (&r.model_warning, verdicts.iter_mut().find(|v| v.cli == cli))
        else {
            continue;
        };
        v.lines.push(Line {
            check: "model".into(),
            status: Status::Warn,
            detail: format!(
                "{w} (run {} of {} by {}{})",
                r.attempt,
                r.task,
                r.agent,
                r.model.as_deref().map_or_else(String::new, |m| format!(", model {m}"))
            ),
            fix: Some(
                "pin a current model in .squad/config.json `models`, or remove the pin (docs/runners.md, Models)"
                    .into(),
            ),
        });
    }
}

/// Runs `squadctl guard doctor`.
pub(crate) fn run(root_arg: Option<&Path>, args: &DoctorArgs) -> u8 {
    let root = match root::resolve(root_arg) {
        Ok(r) => r,
        Err(e) => return super::fail(e),
    };
    let root = root::fs_path(&root).to_path_buf();
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let runners = match runners_of(&root) {
        Ok(r) => r,
        Err(e) => return super::fail(format!("cannot read the runners: {e}")),
    };
    let scratch = scratch_tree(&root, &runners);
    let mut verdicts = doctor(&root, &runners, scratch.as_ref().map(ScratchTree::path));
    model_warnings(&root, &mut verdicts);
    let blocked = verdicts.iter().any(|v| v.blocks_dispatch);
    let code = if args.json {
        let v = serde_json::json!({"ok": !blocked, "clis": verdicts});
        super::print(&format!("{v:#}\n"))
    } else {
        super::print(&human(&verdicts))
    };
    if code != crate::exit::OK {
        return code;
    }
    if blocked {
        crate::exit::PROBLEMS
    } else {
        crate::exit::OK
    }
}
