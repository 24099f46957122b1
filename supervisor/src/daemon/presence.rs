//! A root's presence, in the shell, the I/O: the watches (and retrying
//! those the kernel refused), the pid lock and control socket (restored
//! when `.squad/` is recreated, given up when another squadd took the
//! root), and the skills and team re-read when their folders change. What
//! each outcome calls for is decided in [`core::presence`] (a watch that
//! failed, the pid lock tried, the socket bound, skills read), and so is
//! the control check's order (`Input::Control`: a root taken over or
//! missing is not checked; the socket only once the pid lock is ours),
//! carried out here step by step. What still decides here: re-arming the
//! retry of watches still refused after a retry (one timer for every
//! root, while the core is per root).
use super::core::presence::{ControlInput, ControlNext};
use super::*;

impl EventLoop {
    /// Watches `path`; a failure is the core's to decide
    /// ([`core::Input::WatchFailed`]), told whether the directory is kept
    /// for another try and after what back-off.
    pub(super) fn watch(&mut self, i: RootId, path: &Path) {
        if let Err(error) = self.intake.watch(path) {
            tracing::error!(path = %path.display(), %error, "cannot watch");
            let rewatch_after = self
                .intake
                .unwatched()
                .contains(path)
                // The first poll of it comes within the poll interval,
                // whatever the retries' back-off has grown to.
                .then(|| self.intake.rewatch_delay().min(intake::POLL_UNWATCHED));
            let input = core::Input::WatchFailed {
                path: path.to_path_buf(),
                error: error.to_string(),
                rewatch_after,
            };
            self.step(i, input, core::Now { wall: Utc::now() });
        }
    }

    /// Retries the directories that could not be watched; the roots that
    /// got a watch back are rescanned (what changed there meanwhile was
    /// never reported).
    ///
    /// Between retries (their back-off grows to a minute) the directories
    /// still unwatched are polled every [`intake::POLL_UNWATCHED`]: what
    /// changed there is queued as a watch would have reported it, so a
    /// file written in one is still taken, late by up to the interval.
    pub(super) fn rewatch(&mut self) {
        let now = Instant::now();
        if self.intake.rewatch_due(now) {
            let restored = self.intake.rewatch();
            let roots: BTreeSet<RootId> = restored.iter().filter_map(|p| self.root_of(p)).collect();
            for i in roots {
                let dirs = restored
                    .iter()
                    .filter(|p| self.root_of(p) == Some(i))
                    .count();
                let now = core::Now { wall: Utc::now() };
                self.step(i, core::Input::WatchesRestored { dirs }, now);
            }
        }
        if !self.intake.unwatched().is_empty() {
            let changed = self.intake.poll_unwatched(now);
            if changed > 0 {
                tracing::debug!(changed, "changes found by polling unwatched directories");
            }
            self.timers
                .set(Timer::Rewatch, self.intake.next_unwatched_turn(now));
        }
    }

    /// Checks that root `i`'s pid lock and control socket are still where
    /// they belong, and restores them: a removed socket is bound again; a
    /// `.squad/` deleted and recreated gets our pid lock again, or, when
    /// another squadd took it first, the root is left to that squadd. Each
    /// step is the core's ([`core::Input::Control`]); this carries them
    /// out. Returns whether squadd still supervises the root.
    pub(super) fn check_control(&mut self, i: RootId) -> bool {
        let now = core::Now { wall: Utc::now() };
        let root = self.roots.core(i).root.clone();
        let pid_rel = Path::new(SQUAD_DIR).join(RUN_DIR).join("squadd.pid");
        let pid_path = root.join(&pid_rel);
        let socket = socket_path(&root);
        let mut tried = false;
        let mut next = self.control_step(i, ControlInput::Due, now);
        loop {
            match next {
                Some(ControlNext::GivenUp) => return false,
                Some(ControlNext::Supervised) | None => return true,
                Some(ControlNext::Recover) => {
                    // An import killed mid-swap: bring the root's own
                    // entries (run/ with our pid lock, sessions/) back
                    // before recreating anything.
                    for note in crate::team::recover_interrupted_import(&root) {
                        tracing::warn!(root = %root.display(), "{note}");
                    }
                }
                Some(ControlNext::TakePidLock) => {
                    tried = true;
                    self.take_pid_lock(i, &root, &pid_rel, now);
                }
                Some(ControlNext::BindSocket) => {
                    self.bind_socket(i, &root, socket, now);
                    return true;
                }
            }
            let shell = self.roots.shell(i);
            let seen = ControlInput::Seen {
                sessions_dir: self.roots.core(i).sessions_dir.is_dir(),
                squad_dir: crate::root::fs_path(&root).join(SQUAD_DIR).is_dir(),
                pid_lock: shell.pid_lock.as_ref().is_some_and(|l| l.is_at(&pid_path)),
                socket: shell.socket.as_ref().is_some_and(|b| b.is_at(&socket)),
                tried,
            };
            next = self.control_step(i, seen, now);
        }
    }

    /// One step of a control check: its next step (the core's
    /// [`core::Effect::Control`]), every other effect carried out.
    fn control_step(
        &mut self,
        i: RootId,
        input: ControlInput,
        now: core::Now,
    ) -> Option<ControlNext> {
        let input = core::Input::Control(input);
        let effects = core::Core::new(i, self.roots.core_mut(i)).step(input, now);
        let mut next = None;
        let mut rest = Vec::new();
        for e in effects {
            match e {
                core::Effect::Control { next: n, .. } => next = Some(n),
                other => rest.push(other),
            }
        }
        self.perform(rest, now);
        next
    }

    /// Carries out [`ControlNext::TakePidLock`]: `.squad/run` recreated,
    /// the pid lock tried, the outcome handed to the core.
    fn take_pid_lock(&mut self, i: RootId, root: &Path, pid_rel: &Path, now: core::Now) {
        // A `.squad/` without sessions is another tool's (its import moved
        // ours away): only `run/` is made there, never an empty
        // `sessions/` that would pass for the root come back.
        let made = if self.roots.core(i).sessions_dir.is_dir() {
            create_layout(root).map(drop)
        } else {
            crate::safefs::Dir::open_root(root)
                .and_then(|d| d.open_dir(SQUAD_DIR.as_ref()))
                .and_then(|squad| squad.create_dir(RUN_DIR.as_ref(), 0o700))
                .and_then(|run| run.chmod(0o700))
        };
        if let Err(e) = made {
            tracing::warn!(root = %root.display(), error = %e, "cannot recreate .squad/run");
        }
        let outcome = match pidfile::acquire(root, pid_rel) {
            Ok(lock) => {
                self.roots.shell_mut(i).pid_lock = Some(lock);
                self.log.reopen_audit(i);
                core::presence::PidLock::Taken
            }
            Err(pidfile::PidLockError::Held { pid, .. }) => core::presence::PidLock::Held(pid),
            Err(e) => {
                tracing::error!(root = %root.display(), error = %e, "cannot take the pid lock again");
                core::presence::PidLock::Failed
            }
        };
        self.step(i, core::Input::PidLockTried(outcome), now);
    }

    /// Carries out [`ControlNext::BindSocket`]: the old listener goes
    /// first (its file is gone or replaced), then the socket is bound.
    fn bind_socket(&mut self, i: RootId, root: &Path, path: PathBuf, now: core::Now) {
        self.roots.shell_mut(i).socket = None;
        match server::Bound::start(root, &path, i, self.calls.clone()) {
            Ok(bound) => {
                self.roots.shell_mut(i).socket = Some(bound);
                self.step(i, core::Input::SocketBound { path }, now);
            }
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "cannot bind the control socket again");
            }
        }
    }

    /// What `health` reports of the watches and the roots.
    pub(super) fn supervision(&self) -> health::Supervision {
        health::Supervision {
            watches: self.intake.watch_count(),
            polling: self.intake.polling(),
            queue_depth: self.intake.queue_depth(),
            turns: self.turns,
            unwatched: self
                .intake
                .unwatched()
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            roots: self
                .roots
                .ids()
                .map(|i| {
                    let r = self.roots.core(i);
                    let problem = if let Some(pid) = &r.taken_over {
                        Some(format!(
                            "taken over by another squadd (pid {pid}); not supervised"
                        ))
                    } else if let (true, Some(to)) = (r.missing, &r.moved_to) {
                        Some(format!(
                            ".squad/ was moved to {to}/ (another tool's import?); waiting for .squad/sessions to come back: move squadd's entries back (squadctl status says how)"
                        ))
                    } else if r.missing {
                        Some(".squad/sessions is missing; waiting for it to come back".into())
                    } else if !self
                        .roots
                        .shell(i)
                        .socket
                        .as_ref()
                        .is_some_and(|b| b.is_at(&socket_path(&r.root)))
                    {
                        Some("control socket not bound".into())
                    } else {
                        None
                    };
                    health::RootControl {
                        root: r.root.display().to_string(),
                        problem,
                        hooks: self.hooks.report(i, &r.policy.messages, &r.policy.hooks),
                        refused_outputs: self.roots.shell(i).replica.as_ref().map(|h| h.refused()),
                    }
                })
                .collect(),
        }
    }

    /// Another squadd holds root `i` now: stop supervising it, say so.
    pub(super) fn take_over(&mut self, i: RootId, pid: String) {
        tracing::error!(root = %self.roots.core(i).root.display(), %pid, "another squadd took the root over");
        self.roots.shell_mut(i).pid_lock = None;
        self.roots.shell_mut(i).socket = None;
        let root = self.roots.core(i).root.clone();
        self.intake.unwatch_under(&root);
        self.timers.cancel_root(i);
        let now = core::Now { wall: Utc::now() };
        self.step(i, core::Input::TakenOver { pid }, now);
    }

    /// Watches a session's `locks/` when it exists (squadctl creates it on
    /// the first acquisition; its creation event brings us back here).
    pub(super) fn watch_locks(&mut self, i: RootId, session_dir: &Path) {
        let locks = session_dir.join(crate::locks::LOCKS_DIR);
        if locks.is_dir() {
            self.watch(i, &locks);
        }
    }

    /// Watches the root, `.squad`, `.squad/sessions` and each session
    /// directory, each non-recursively: artifacts and other subdirectories
    /// cost nothing.
    pub(super) fn watch_root(&mut self, i: RootId) {
        let root = self.roots.core(i).root.clone();
        // `squadctl import` puts a new `.squad/` in the old one's place.
        self.intake.forget_if_replaced(&root.join(SQUAD_DIR));
        self.watch(i, &root);
        self.watch(i, &root.join(SQUAD_DIR));
        let sessions = self.roots.core(i).sessions_dir.clone();
        self.watch(i, &sessions);
        // The socket and pid file: a removed socket is bound again.
        self.watch(i, &root.join(SQUAD_DIR).join(RUN_DIR));
        // Agents' presence records (issue 38): who waits for a person.
        // Made here so that it is watched before the first record: a
        // record written with its directory would be missed. Never through
        // a link planted below the root (safefs); in `.squad/run` as squadd
        // made it (0700), with the mode the hooks use (umask applies).
        let run = Path::new(SQUAD_DIR).join(RUN_DIR);
        let made = crate::safefs::Dir::open_root(&root)
            .and_then(|d| d.walk(&run, None))
            .and_then(|d| {
                let name = Path::new(crate::agent_presence::DIR).file_name();
                d.create_dir(name.unwrap_or_default(), 0o777)
            });
        if made.is_ok() {
            self.watch(i, &root.join(SQUAD_DIR).join(crate::agent_presence::DIR));
        }
        if let Ok(dirs) = squad_protocol::tree::session_dirs(&root) {
            for dir in dirs {
                self.watch(i, &dir);
                self.watch_locks(i, &dir);
            }
        }
        for dir in crate::skills::watch_dirs(&root) {
            self.watch(i, &dir);
        }
        let inbox = root.join(SQUAD_DIR).join("decisions").join("inbox");
        if inbox.is_dir() {
            self.watch(i, &inbox);
        }
    }

    /// Re-checks a root's skills and watches skill folders that appeared.
    pub(super) fn refresh_skills(&mut self, i: RootId) {
        self.timers.cancel(&Timer::Skills(i));
        let root = self.roots.core(i).root.clone();
        for dir in crate::skills::watch_dirs(&root) {
            self.watch(i, &dir);
        }
        let cache = &mut self.roots.shell_mut(i).skills;
        let skills = crate::skills::health_cached(&root, cache);
        tracing::debug!(
            root = %root.display(),
            reread = cache.reread,
            loaded = skills.loaded,
            "skills checked"
        );
        for dir in crate::team::watch_dirs(&root) {
            // An import replaces the team's directories whole.
            self.intake.forget_if_replaced(&dir);
            self.watch(i, &dir);
        }
        let input = core::Input::SkillsRead {
            skills: Box::new(skills),
            team: Box::new(crate::team::health(&root)),
        };
        self.step(i, input, core::Now { wall: Utc::now() });
    }
}
