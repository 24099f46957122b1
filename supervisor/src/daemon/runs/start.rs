//! Starting a run: the full plan of a task, the prompt, the run directory\n//! and record, the process; and what a failed start leaves behind.

use super::*;

impl Supervisor {
    /// A high-priority message from `squadd` to the lead named by policy,
    /// written into the session as a protocol file (the normal routing
    /// delivers it).
    /// A run that could not start (its folder, its prompt or the spawn
    /// failed): a `run-failed` event and word to the lead; the task is held.
    pub(super) fn report_start_failure(
        &mut self,
        i: RootId,
        c: &Candidate,
        dir: Option<&Path>,
        error: &str,
        wall: DateTime<Utc>,
    ) {
        self.log.emit(
            i,
            Some(&c.session),
            dir,
            EventKind::RunFailed {
                task_id: c.task.clone(),
                agent: c.agent.clone(),
                error: error.to_string(),
            },
        );
        self.tell_lead(
            i,
            &c.session,
            &c.task,
            &format!(
                "The runner of {} ({}) could not start: {error}. The task is held; `squadctl run {}` tries again.",
                c.task, c.agent, c.task
            ),
            wall,
        );
    }

    /// The full plan of a task (the index keeps only what derivation needs).
    pub(super) fn full_plan(&self, i: RootId, session: &str, task: &str) -> Option<TaskAssignment> {
        let core = self.roots.core(i).sessions.get(session)?;
        core.index().full_plan(task)
    }

    /// Starts one run: prompt.md, a `running` run.json without a pid (so a
    /// crash between here and the spawn leaves a run that is reported lost,
    /// never started twice), the process, then run.json with its pid.
    pub(super) fn start_run(
        &mut self,
        i: RootId,
        c: &Candidate,
        wall: DateTime<Utc>,
    ) -> Result<u32, String> {
        match self.try_start_run(i, c, wall) {
            Ok(pid) => Ok(pid),
            Err(Failed::Reported(e)) => Err(e),
            // Nothing started and no run.json to record it in: held in
            // memory (so it is not tried again on every batch) and reported.
            Err(Failed::Before(error)) => {
                let rec = RunRecord {
                    task: c.task.clone(),
                    agent: c.agent.clone(),
                    session: c.session.clone(),
                    attempt: c.attempts + 1,
                    state: RunState::Failed,
                    pid: 0,
                    process_start: 0,
                    started_at: wall,
                    deadline: wall,
                    command: Vec::new(),
                    exit: None,
                    completed: false,
                    retry_at: None,
                    held: true,
                };
                self.report_start_failure(i, c, None, &error, wall);
                self.roots
                    .shell_mut(i)
                    .runs
                    .past
                    .insert((c.session.clone(), c.task.clone()), rec);
                Err(error)
            }
        }
    }

    pub(super) fn try_start_run(
        &mut self,
        i: RootId,
        c: &Candidate,
        wall: DateTime<Utc>,
    ) -> Result<u32, Failed> {
        let root = self.roots.core(i).root.clone();
        let plan = self
            .full_plan(i, &c.session, &c.task)
            .ok_or_else(|| Failed::Before(format!("{}: no valid task assignment", c.task)))?;
        let policy = self.roots.core(i).policy.runners.clone();
        let spec = policy
            .runner_for(&c.agent)
            .cloned()
            .ok_or_else(|| Failed::Before(format!("no runner for {}", c.agent)))?;
        // An agent CLI that would run without the guard is not started
        // unless its entry says `guard: off` (docs/runners.md); the refusal
        // reaches the lead like any start failure.
        runners::check::runner_check(&root, &c.agent, &spec).map_err(Failed::Before)?;
        let session_dir = self.roots.core(i).session_dir(&c.session);
        let dir = runners::ensure_run_dir(&session_dir, &c.task).map_err(|e| {
            Failed::Before(format!(
                "{}: {e}",
                runners::run_dir(&session_dir, &c.task).display()
            ))
        })?;
        let config = &self.roots.shell(i).runs.config;
        let model = config.model_for(&c.agent).to_string();
        let mcp = config
            .mcp
            .iter()
            .map(|(n, s)| (n.clone(), s.kind.clone(), s.tools.clone()))
            .collect();
        let default_timeout = Duration::from_millis(config.sessions.default_timeout_ms);
        let text = prompt::render(&prompt::PromptInput {
            root: &root,
            session: &c.session,
            plan: &plan,
            model: &model,
            mcp,
        });
        let prompt_path = dir.join(runners::PROMPT_FILE);
        runners::write_prompt(&dir, &text)
            .map_err(|e| Failed::Before(format!("{}: {e}", prompt_path.display())))?;
        // issue 30 (docs/worktrees.md): the run works in a worktree of its own.
        let spec = if policy.worktree_for(&c.agent) {
            let tree = crate::worktree::prepare(&root, &dir, &c.session, &c.task)
                .map_err(Failed::Before)?;
            crate::worktree::spec_in(&spec, &tree)
        } else {
            spec
        };
        let limit =
            squad_policies::runners::run_timeout(Some(&spec), plan.meta.timeout, default_timeout);
        let mut rec = RunRecord {
            task: c.task.clone(),
            agent: c.agent.clone(),
            session: c.session.clone(),
            attempt: c.attempts + 1,
            state: RunState::Running,
            pid: 0,
            process_start: 0,
            started_at: wall,
            deadline: decide::deadline(wall, limit),
            command: Vec::new(),
            exit: None,
            completed: false,
            retry_at: None,
            held: false,
        };
        runners::write_record(&dir, &rec).map_err(|e| Failed::Before(format!("run.json: {e}")))?;
        let prompt_file = prompt_path.display().to_string();
        let root_text = root.display().to_string();
        let vars = Vars {
            prompt_file: &prompt_file,
            task: &c.task,
            agent: &c.agent,
            session: &c.session,
            model: &model,
            root: &root_text,
        };
        let key = (c.session.clone(), c.task.clone());
        let env = runners::run_env(
            std::env::vars_os(),
            &policy.pass_env,
            squadctl_dir().as_deref(),
            &spec,
            &vars,
            &root,
        );
        let procs = &mut self.roots.shell_mut(i).runs.procs;
        let spawned = runners::spawn_request(&spec, &vars, &root, &dir, env, policy.log_max_bytes)
            .and_then(|request| procs.spawn(&request).map(|started| (started, request)));
        match spawned {
            Ok((started, request)) => {
                rec.pid = started.pid;
                rec.process_start = started.process_start;
                rec.command = request.argv;
                keep_record(&dir, &rec);
                self.log.emit(
                    i,
                    Some(&c.session),
                    Some(&dir),
                    EventKind::AgentSpawned {
                        task_id: c.task.clone(),
                        agent: c.agent.clone(),
                        pid: started.pid,
                        attempt: rec.attempt,
                    },
                );
                let pid = started.pid;
                self.roots.shell_mut(i).runs.started(rec, dir, session_dir);
                self.timers.set_earlier(Timer::Runs, Instant::now() + POLL);
                Ok(pid)
            }
            Err(e) => {
                let error = format!("{}: {e}", spec.command.first().map_or("", String::as_str));
                rec.state = RunState::Failed;
                rec.held = true;
                rec.exit = Some(Exit {
                    at: wall,
                    code: None,
                    signal: None,
                });
                keep_record(&dir, &rec);
                self.report_start_failure(i, c, Some(&dir), &error, wall);
                self.roots.shell_mut(i).runs.past.insert(key, rec);
                Err(Failed::Reported(error))
            }
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
