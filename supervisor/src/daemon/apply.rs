//! One changed path at a time: what it means (`intake::classify`), reading
//! it, handing its contents to the session core and carrying out the
//! outcome (events, wrap-up, deadline timers).

use super::*;

impl Supervisor {
    /// Carries out what a session change caused: events, the wrap-up of a
    /// session that ended, task deadline timers, the persisted state.
    /// A session that ended by `removal` (only losing files) is wrapped up
    /// after [`REMOVAL_DELAY`] if it still exists and still ended then.
    pub(super) fn take_outcome(
        &mut self,
        i: RootId,
        name: &str,
        out: Outcome,
        wall: DateTime<Utc>,
        removal: bool,
    ) {
        for kind in out.events {
            self.log.emit(i, Some(name), None, kind);
        }
        if let Some(status) = out.ended {
            if removal {
                let timer = Timer::WrapUp {
                    root: i,
                    session: name.to_string(),
                };
                self.timers.set(timer, Instant::now() + REMOVAL_DELAY);
            } else {
                self.wrap_up(i, name, &status.to_string(), wall);
            }
        }
        for kind in out.overdue {
            self.log.emit(i, Some(name), None, kind);
        }
        if out.state_changed {
            self.state_changed(i);
        }
        for (task, at) in out.timers {
            let timer = Timer::TaskDue {
                root: i,
                session: name.to_string(),
                task,
            };
            match at {
                Some(at) => self.timers.set_wall(timer, at, wall, Instant::now()),
                None => self.timers.cancel(&timer),
            }
        }
    }

    pub(super) fn report_invalid_files(&mut self, i: RootId, name: &str) {
        for (path, errors, first, unreadable) in self.roots.core(i).invalid_files(name) {
            if unreadable {
                self.intake.retry_unreadable(&path, Instant::now());
            }
            self.log.emit(
                i,
                Some(name),
                Some(&path),
                EventKind::FileInvalid { errors, first },
            );
        }
    }

    /// Takes one watcher notification.
    pub(super) fn note(&mut self, res: intake::Notification) {
        match self.intake.note(res, Instant::now()) {
            Noted::Queued => {}
            Noted::Failed(error) => {
                tracing::error!(%error, "watcher error");
                for i in self.roots.ids() {
                    self.log.emit(
                        i,
                        None,
                        None,
                        EventKind::WatchError {
                            error: error.clone(),
                        },
                    );
                    self.timers.set(Timer::Rescan(i), Instant::now());
                }
            }
            Noted::Rescan(paths) => {
                let roots: BTreeSet<RootId> = if paths.is_empty() {
                    self.roots.ids().collect()
                } else {
                    paths.iter().filter_map(|p| self.root_of(p)).collect()
                };
                for i in roots {
                    self.timers.set(Timer::Rescan(i), Instant::now());
                }
            }
        }
    }

    /// Applies one changed path; returns the session it touched and whether
    /// the change was only a removal.
    pub(super) fn apply_path(&mut self, i: RootId, path: &Path) -> Option<(String, bool)> {
        if self.is_config(i, path) {
            self.reload_config(i);
            return None;
        }
        let r = self.roots.core(i);
        match classify(&r.root, &r.sessions_dir, path)? {
            PathChange::Policy => {
                if let Some(caused) = upkeep::reload_policy(self.roots.core_mut(i)) {
                    self.record(i, vec![caused]);
                    self.schedule_retention(i, Utc::now());
                }
                None
            }
            PathChange::Rescan => {
                self.timers.set(Timer::Rescan(i), Instant::now());
                None
            }
            PathChange::Control => {
                // Checked a moment later: a `.squad/` being deleted is gone
                // by then, and nothing is recreated inside it.
                self.timers
                    .set_earlier(Timer::RootCheck(i), Instant::now() + CONTROL_DELAY);
                None
            }
            PathChange::Skills => {
                self.timers
                    .set_earlier(Timer::Skills(i), Instant::now() + SKILLS_DELAY);
                None
            }
            PathChange::MemoryInbox => {
                if self.roots.core(i).policy.memory.merge {
                    // Each change restarts the quiet period.
                    self.timers
                        .set(Timer::MemoryInbox(i), Instant::now() + MEMORY_INBOX_DELAY);
                }
                None
            }
            PathChange::SessionDir(name) => self.apply_session_dir(i, &name),
            PathChange::LocksDir(name) => {
                let dir = self.roots.core(i).session_dir(&name);
                self.watch_locks(i, &dir);
                self.timers.set(Timer::Locks(i), Instant::now());
                None
            }
            PathChange::Inbox {
                session,
                agent,
                file,
            } => {
                self.inbox_changed(i, &session, agent, file, path);
                None
            }
            PathChange::LockRecord(_) => {
                self.timers.set(Timer::Locks(i), Instant::now());
                None
            }
            PathChange::SessionFile {
                session,
                file,
                kind,
            } => {
                if !self.roots.core(i).sessions.contains_key(&session) {
                    // An event for a session we have not seen yet: scan it.
                    return self.apply_session_dir(i, &session);
                }
                self.apply_file(i, &session, &file, path, kind)
            }
        }
    }

    pub(super) fn apply_file(
        &mut self,
        i: RootId,
        name: &str,
        file: &str,
        path: &Path,
        kind: FileKind,
    ) -> Option<(String, bool)> {
        // Same bytes as indexed (a repeated event, or squadd's own write):
        // recognised by fingerprint, not parsed again.
        let indexed = self
            .roots
            .core(i)
            .sessions
            .get(name)?
            .index()
            .files
            .get(file)
            .map(|f| f.fingerprint);
        let loaded = match read_regular(path, MAX_FILE_BYTES) {
            Ok(bytes) if indexed == Some(crate::index::fingerprint(&bytes)) => {
                self.intake.clear_vanished(path);
                return None;
            }
            Ok(bytes) => {
                // Replication call site: a protocol file changed here (an
                // arrival written by the replication task is recognised
                // there as synced, never echoed).
                if let Some(replica) = &self.roots.shell(i).replica {
                    replica.changed(name, file);
                }
                Some(crate::index::index_bytes(path, kind, &bytes))
            }
            // Gone, or unreadable: indexed as such, with the reason.
            Err(_) => match load_file(path, kind) {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read; retrying");
                    if squad_protocol::fsx::is_transient_io(&e) {
                        self.intake.retry(
                            path.to_path_buf(),
                            Instant::now() + Duration::from_millis(250),
                        );
                    }
                    return None;
                }
            },
        };
        // Gone: a removal counts once the file stayed gone for a moment (a
        // file replaced by unlink or rename and create is a change).
        if loaded.is_none() && indexed.is_some() {
            if !self.intake.vanished(path, Instant::now()) {
                tracing::debug!(path = %path.display(), "gone; removal counts if still gone in a moment");
                return None;
            }
        } else {
            self.intake.clear_vanished(path);
        }
        // A read error is never sticky: an unreadable file is read again
        // (its attribute change is an event too, see intake).
        if loaded.as_ref().is_some_and(is_unreadable) {
            self.intake.retry_unreadable(path, Instant::now());
            let same = self
                .roots
                .core(i)
                .sessions
                .get(name)?
                .index()
                .files
                .get(file)
                .zip(loaded.as_ref())
                .is_some_and(|(old, new)| is_unreadable(old) && old.diagnostics == new.diagnostics);
            if same {
                return None;
            }
        } else {
            self.intake.readable(path);
        }
        self.apply_loaded(i, name, file, path, loaded, None)
    }

    /// Hands a file's new contents (`None`: gone) to the session core and
    /// carries out the outcome: deliveries (from `own`, the bytes squadd
    /// itself wrote, when given: not read back), events, wrap-up, timers.
    pub(super) fn apply_loaded(
        &mut self,
        i: RootId,
        name: &str,
        file: &str,
        path: &Path,
        loaded: Option<crate::index::IndexedFile>,
        own: Option<std::sync::Arc<[u8]>>,
    ) -> Option<(String, bool)> {
        let wall = Utc::now();
        let reply_to = |f: Option<&crate::index::IndexedFile>| match f.map(|f| &f.entry) {
            Some(crate::index::Entry::Message(m)) => m.in_reply_to.clone(),
            _ => None,
        };
        let before = reply_to(self.roots.core(i).sessions.get(name)?.index().file(file));
        let after = reply_to(loaded.as_ref());
        let mut out = self
            .roots
            .core_mut(i)
            .apply_file(name, file, loaded, wall)?;
        if out
            .file
            .as_ref()
            .is_some_and(|f| *f != FileOutcome::Unchanged)
        {
            let mail = self
                .roots
                .core_mut(i)
                .mail
                .entry(name.to_string())
                .or_default();
            mail.note_reply(before.as_deref(), false);
            mail.note_reply(after.as_deref(), true);
            self.route_file(i, name, file, wall, own);
        }
        let touched = match out.file.take()? {
            FileOutcome::Unchanged => return None,
            FileOutcome::Removed => {
                self.log
                    .emit(i, Some(name), Some(path), EventKind::FileRemoved);
                (name.to_string(), true)
            }
            FileOutcome::Changed(event) => {
                self.log.emit(i, Some(name), Some(path), event);
                (name.to_string(), false)
            }
        };
        self.take_outcome(i, name, out, wall, touched.1);
        Some(touched)
    }
}
