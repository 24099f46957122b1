//! One changed path at a time: what it means (`intake::classify`), reading
//! it, handing its contents to the session core and carrying out the
//! outcome (events, wrap-up, deadline timers).

use self::core::files::FileRef;
use super::*;

impl Supervisor {
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
                    let replaced = matches!(caused.2, EventKind::PolicyReloaded);
                    self.record(i, vec![caused]);
                    self.schedule_retention(i, Utc::now());
                    if replaced {
                        let now = Now { wall: Utc::now() };
                        self.step(i, self::core::Input::PolicyChanged, now);
                    }
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

    /// Reads one file of a known session and hands what the read gave
    /// (bytes, gone, a reason it cannot be read) to the core
    /// ([`core::files`]); returns the session it touched and whether the
    /// change was only a removal.
    pub(super) fn apply_file(
        &mut self,
        i: RootId,
        name: &str,
        file: &str,
        path: &Path,
        kind: FileKind,
    ) -> Option<(String, bool)> {
        let file = FileRef {
            session: name.to_string(),
            file: file.to_string(),
            path: path.to_path_buf(),
        };
        let now = Now { wall: Utc::now() };
        let input = match read_regular(path, MAX_FILE_BYTES) {
            Ok(bytes) => {
                let file_name = file.file.clone();
                let input = self::core::Input::FileRead {
                    file,
                    kind,
                    bytes: &bytes,
                };
                let mut touched = self.step(i, input, now);
                // Replication call site: a protocol file changed here (an
                // arrival written by the replication task is recognised
                // there as synced, never echoed).
                if !touched.is_empty()
                    && let Some(replica) = &self.roots.shell(i).replica
                {
                    replica.changed(name, &file_name);
                }
                return touched.pop();
            }
            // Gone, or unreadable: indexed as such, with the reason.
            Err(_) => match load_file(path, kind) {
                Ok(None) => self::core::Input::FileGone(file),
                Ok(Some(indexed)) => self::core::Input::FileUnreadable {
                    file,
                    indexed: Box::new(indexed),
                },
                Err(e) => {
                    // The machine's fault (out of descriptors), not the
                    // file's: read again in a moment, nothing recorded.
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
        self.step(i, input, now).pop()
    }
}
