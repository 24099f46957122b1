//! One changed path at a time, the I/O: the path handed to the core (what
//! it means and calls for is decided in [`core::paths`]), then reading the
//! file, stat-ing the inbox entry or re-reading the policy it asked for,
//! each read handed to the core ([`core::files`]). Nothing here decides
//! beyond what the file system answers.

use self::core::files::FileRef;
use super::*;

impl EventLoop {
    /// Takes one watcher notification: what it means for each root is the
    /// core's ([`core::paths`]).
    pub(super) fn note(&mut self, res: intake::Notification) {
        let now = Now { wall: Utc::now() };
        match self.intake.note(res, Instant::now()) {
            Noted::Queued => {}
            Noted::Failed(error) => {
                tracing::error!(%error, "watcher error");
                for i in self.roots.ids() {
                    let error = error.clone();
                    self.step(i, self::core::Input::WatcherFailed { error }, now);
                }
            }
            Noted::Rescan(paths) => {
                let roots: BTreeSet<RootId> = if paths.is_empty() {
                    self.roots.ids().collect()
                } else {
                    paths.iter().filter_map(|p| self.root_of(p)).collect()
                };
                for i in roots {
                    self.step(i, self::core::Input::EventsLost, now);
                }
            }
        }
    }

    /// Applies one changed path ([`core::Input::PathChanged`]: the core
    /// says what it calls for); returns the session it touched and whether
    /// the change was only a removal.
    pub(super) fn apply_path(&mut self, i: RootId, path: &Path) -> Option<(String, bool)> {
        let now = Now { wall: Utc::now() };
        self.step(i, self::core::Input::PathChanged { path }, now)
            .pop()
    }

    /// Carries out what a changed path asked for ([`core::paths`]): a
    /// re-read of config.json or the policy, a session's `locks/` watched,
    /// an inbox entry looked at.
    pub(super) fn perform_path(&mut self, effect: self::core::Effect) {
        use self::core::Effect;
        match effect {
            Effect::ReloadConfig(root) => self.reload_config(root),
            Effect::ReloadPolicy(root) => self.reload_policy(root),
            Effect::WatchLocks { root, session } => {
                let dir = self.roots.core(root).session_dir(&session);
                self.watch_locks(root, &dir);
            }
            Effect::LookAtInboxEntry {
                root,
                session,
                agent,
                file,
                path,
            } => self.inbox_changed(root, &session, agent, file, &path),
            Effect::LookAtPresence { root, agent, path } => {
                let record = read_presence(&path).map(Box::new);
                let input = self::core::Input::PresenceRead { agent, record };
                self.step(root, input, Now { wall: Utc::now() });
            }
            other => tracing::error!(?other, "not a changed path's effect"),
        }
    }

    /// Re-reads root `i`'s `.squad/policies.yaml`
    /// ([`core::Effect::ReloadPolicy`]) for the core to decide
    /// ([`core::Input::PolicyRead`]).
    pub(super) fn reload_policy(&mut self, i: RootId) {
        let read = crate::locks::load_policy(&self.roots.core(i).root).map(Box::new);
        let now = Now { wall: Utc::now() };
        self.step(i, self::core::Input::PolicyRead(read), now);
    }

    /// An entry of an unread inbox appeared or went (acknowledged)
    /// ([`core::Effect::LookAtInboxEntry`]): one `stat`, handed to the core
    /// ([`core::Input::InboxEntry`]).
    pub(super) fn inbox_changed(
        &mut self,
        i: RootId,
        session: &str,
        agent: String,
        file: String,
        path: &Path,
    ) {
        let present = std::fs::symlink_metadata(path).ok().map(|m| {
            m.modified()
                .map(DateTime::<Utc>::from)
                .unwrap_or_else(|_| Utc::now())
        });
        let input = self::core::Input::InboxEntry {
            session: session.to_string(),
            agent,
            file,
            present,
        };
        self.step(i, input, Now { wall: Utc::now() });
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

/// An agent's presence record (`None`: gone, its CLI gone, or refused: a
/// refused one is said in the log, with why).
fn read_presence(path: &Path) -> Option<crate::agent_presence::Record> {
    match crate::agent_presence::read_checked(path) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "presence record refused");
            None
        }
    }
}

/// At most this many presence records are read when squadd starts.
const MAX_PRESENCE_RECORDS: usize = 1000;

impl EventLoop {
    /// Every agent's presence record, read once the root's sessions are
    /// loaded (start-up, and after a rescan) and handed to the core
    /// ([`self::core::Input::PresenceListed`]): a wait that began while
    /// squadd was down is told.
    pub(super) fn list_presence(&mut self, i: RootId) {
        let dir = self
            .roots
            .core(i)
            .root
            .join(squad_protocol::tree::SQUAD_DIR)
            .join(crate::agent_presence::DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut records = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(agent) = name.strip_suffix(".json") else {
                continue;
            };
            if !squad_protocol::IdKind::Agent.matches(agent) {
                continue;
            }
            if records.len() == MAX_PRESENCE_RECORDS {
                tracing::warn!(dir = %dir.display(), "over {MAX_PRESENCE_RECORDS} presence records: the rest are read when they change");
                break;
            }
            records.push((agent.to_string(), read_presence(&e.path())));
        }
        let input = self::core::Input::PresenceListed { records };
        self.step(i, input, Now { wall: Utc::now() });
    }
}
