//! Starting a run the core asked for ([`RunSpec`]): the guard check, the
//! run directory, prompt.md, the worktree, a `running` run.json without a
//! pid (so a crash between here and the spawn leaves a run that is
//! reported lost, never started twice), then the process.

use crate::daemon::core::runs::RunSpec;
use crate::runners::{self, Processes, RunRecord, prompt};
use chrono::{DateTime, Utc};
use squad_policies::runners::Vars;
use std::path::{Path, PathBuf};

/// Why a run did not start: the run's folder and the record written
/// before the spawn, if it got that far, and the reason.
pub(crate) type Failed = (Option<Box<(PathBuf, RunRecord)>>, String);

/// Starts one run: its record (with the pid) and its folder, or why not.
pub(crate) fn spawn(
    root: &Path,
    procs: &mut dyn Processes,
    log_max: u64,
    pass_env: &[String],
    spec: &RunSpec,
    wall: DateTime<Utc>,
) -> Result<(RunRecord, PathBuf), Failed> {
    let c = &spec.candidate;
    // An agent CLI that would run without the guard is not started unless
    // its entry says `guard: off` (docs/runners.md); the refusal reaches
    // the lead like any start failure. A worktree run is judged in its
    // worktree, once it is made (below).
    if !spec.worktree {
        runners::check::runner_check(root, &c.agent, &spec.runner).map_err(|e| (None, e))?;
    }
    let session_dir = &spec.session_dir;
    let dir = runners::ensure_run_dir(session_dir, &c.task).map_err(|e| {
        (
            None,
            format!("{}: {e}", runners::run_dir(session_dir, &c.task).display()),
        )
    })?;
    let text = prompt::render(&prompt::PromptInput {
        root,
        session: &c.session,
        plan: &spec.plan,
        model: spec.model.as_deref(),
        mcp: spec.mcp.clone(),
        review: spec.review.as_deref(),
    });
    let prompt_path = dir.join(runners::PROMPT_FILE);
    runners::write_prompt(&dir, &text)
        .map_err(|e| (None, format!("{}: {e}", prompt_path.display())))?;
    // issue 30 (docs/worktrees.md): the run works in a worktree of its own.
    let (runner, tree) = if spec.worktree {
        let fresh = !crate::worktree::tree_path(root, &c.session, &c.task)
            .join(".git")
            .exists();
        let tree =
            crate::worktree::prepare(root, &dir, &c.session, &c.task).map_err(|e| (None, e))?;
        // issue 44: the guard's settings in the worktree, whether or not
        // they are committed; then the check judges the directory the run
        // starts in, not the main checkout.
        let in_tree = |e: String| {
            (
                None,
                format!("the run's worktree {}: {e}", tree.path.display()),
            )
        };
        let guarded = crate::worktree_start::guard_tree(root, &tree.path, &spec.runner)
            .map_err(|e| in_tree(e.to_string()))?;
        if let Some(file) = &guarded.written {
            tracing::info!(worktree = %tree.path.display(), file, "the guard's settings written into a run's worktree");
        }
        runners::check::runner_check(&tree.path, &c.agent, &spec.runner).map_err(in_tree)?;
        (
            crate::worktree::spec_in(&spec.runner, &tree),
            Some((tree, fresh)),
        )
    } else {
        (spec.runner.clone(), None)
    };
    let limit = squad_policies::runners::run_timeout(
        Some(&runner),
        spec.plan.meta.timeout,
        spec.default_timeout,
    );
    let prompt_file = prompt_path.display().to_string();
    let root_text = root.display().to_string();
    let vars = Vars {
        prompt_file: &prompt_file,
        task: &c.task,
        agent: &c.agent,
        session: &c.session,
        model: spec.model.as_deref(),
        root: &root_text,
    };
    let env = runners::run_env(
        std::env::vars_os(),
        pass_env,
        squadctl_dir().as_deref(),
        &runner,
        &vars,
        root,
    );
    // issue 44: `runners.worktree_setup` in a new worktree (or one whose
    // setup has not succeeded yet), with the run's environment; a failure
    // holds the run with the output's tail. The run's time starts after it.
    let mut started = wall;
    if let Some((tree, fresh)) = &tree {
        let setup = crate::worktree_start::Setup {
            lines: &spec.setup,
            limit: spec.setup_timeout,
            env: &env,
            log_max,
        };
        match crate::worktree_start::set_up(&tree.path, &dir, *fresh, &setup) {
            Ok(took) => started += chrono::TimeDelta::from_std(took).unwrap_or_default(),
            Err(e) => {
                let mut rec = crate::daemon::core::runs::new_record(c, wall, limit);
                rec.model = spec.model.clone();
                return Err((
                    Some(Box::new((dir, rec))),
                    format!("the worktree setup in {} failed: {e}", tree.path.display()),
                ));
            }
        }
    }
    let mut rec = crate::daemon::core::runs::new_record(c, started, limit);
    rec.model = spec.model.clone();
    runners::write_record(&dir, &rec).map_err(|e| (None, format!("run.json: {e}")))?;
    let resume = spec.resume.as_deref();
    let spawned = runners::spawn_request(&runner, &vars, root, &dir, env, log_max, resume)
        .and_then(|request| procs.spawn(&request).map(|started| (started, request)));
    match spawned {
        Ok((started, request)) => {
            rec.pid = started.pid;
            rec.process_start = started.process_start;
            rec.command = request.argv;
            Ok((rec, dir))
        }
        Err(e) => {
            let error = format!("{}: {e}", runner.command.first().map_or("", String::as_str));
            Err((Some(Box::new((dir, rec))), error))
        }
    }
}

/// The folder of squadd's own program, where squadctl is installed beside
/// it: every run's PATH leads with it, so an agent finds this squadctl.
fn squadctl_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    dir.join("squadctl").is_file().then(|| dir.to_path_buf())
}
