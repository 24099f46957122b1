//! squadd's own outputs of a root: session-status.md (under the session's
//! lock), the shared context, the persisted state; lock expiry, retention
//! and the wrap-up of a session that ended.

use super::*;

impl Supervisor {
    pub(super) fn save_state(&mut self, i: RootId) {
        self.timers.cancel(&Timer::SaveState(i));
        if self.root_gone(i) {
            // Never recreate what is being deleted; saved when it is back.
            return;
        }
        let path = state_path(&self.roots.core(i).root);
        let result = self
            .roots
            .core_mut(i)
            .state_to_save()
            .encode()
            .and_then(|bytes| self.writer.write_private(&path, &bytes));
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot save state.json");
        }
    }

    /// The new session-status.md of a session, when it differs from the file.
    pub(super) fn status_update(
        &self,
        i: RootId,
        name: &str,
        wall: DateTime<Utc>,
    ) -> Option<(PathBuf, String)> {
        let r = self.roots.core(i);
        let session = r.sessions.get(name)?;
        let view = session.head();
        let dir = r.session_dir(name);
        let path = dir.join(SESSION_STATUS_FILE);
        // The file as squadd last read or wrote it (a foreign edit is read
        // and indexed when its event arrives): no read here.
        let existing = match session.index().files.get(SESSION_STATUS_FILE) {
            // Not text (or unreadable): never overwritten.
            Some(f) => Some(f.text.as_deref()?),
            None if dir.is_dir() => None,
            None => return None,
        };
        let text = render_status(existing, &view, wall)?;
        (existing != Some(text.as_str())).then_some((path, text))
    }

    /// Writes the session-status.md of each named session that changed, as
    /// one batch of the writer.
    /// With `cluster:`, only the leader writes them ([`Self::leads`]).
    pub(super) fn write_statuses(&mut self, i: RootId, names: &[String], wall: DateTime<Utc>) {
        if !self.leads(i) {
            return;
        }
        self.write_statuses_locked(i, names, wall, None);
    }

    /// [`Self::write_statuses`], each under its session's lock (`held`: the
    /// lock of a session the caller already holds). Under the lock the file
    /// is re-read first, so an edit squadctl made without squadd (at its
    /// start-up) is the text the render starts from; a session whose lock is
    /// busy is written a moment later.
    pub(super) fn write_statuses_locked(
        &mut self,
        i: RootId,
        names: &[String],
        wall: DateTime<Utc>,
        held: Option<(&str, std::fs::File)>,
    ) {
        let mut held = held;
        let mut locks = Vec::new();
        for name in names {
            if !self.roots.core(i).sessions.contains_key(name) {
                continue;
            }
            let mine = held.take_if(|(n, _)| *n == name.as_str());
            let lock = match mine {
                Some((_, f)) => edits::Locked::Held(f),
                None => {
                    let lock = self.lock_status(i, name);
                    if !matches!(lock, edits::Locked::Busy) {
                        self.reread_status(i, name);
                    }
                    lock
                }
            };
            match lock {
                edits::Locked::Held(f) => locks.push(f),
                edits::Locked::Busy => {
                    let timer = Timer::Status {
                        root: i,
                        session: name.clone(),
                    };
                    self.timers
                        .set_earlier(timer, Instant::now() + edits::STATUS_LOCK_RETRY);
                    continue;
                }
                edits::Locked::Unavailable => {}
            }
            // A status file found gone may be being replaced (`git
            // checkout` unlinks, then creates it): writing one now would
            // make that create fail. Written once it is back or surely gone.
            let status = self
                .roots
                .core(i)
                .session_dir(name)
                .join(SESSION_STATUS_FILE);
            if let Some(at) = self.intake.vanishing(&status) {
                let timer = Timer::Status {
                    root: i,
                    session: name.clone(),
                };
                self.timers.set_earlier(timer, at);
                continue;
            }
            if let Some((path, text)) = self.status_update(i, name, wall) {
                self.writer.stage(
                    path,
                    text.into_bytes(),
                    Tag {
                        root: i,
                        session: Some(name.clone()),
                        output: "session-status",
                    },
                );
            }
        }
        for writer::Committed {
            path,
            tag,
            bytes,
            result,
        } in self.writer.commit()
        {
            let name = tag.session.unwrap_or_default();
            let kind = match result {
                Ok(()) => {
                    // Index what we wrote, so its watch event is recognised as ours.
                    let input = self::core::Input::OwnWrite {
                        file: self::core::files::FileRef {
                            session: name.clone(),
                            file: SESSION_STATUS_FILE.to_string(),
                            path: path.clone(),
                        },
                        kind: FileKind::SessionStatus,
                        bytes: &bytes,
                    };
                    self.step(tag.root, input, Now { wall });
                    self.roots
                        .shell(tag.root)
                        .publish_owned(&name, SESSION_STATUS_FILE);
                    EventKind::OutputWritten {
                        output: tag.output.into(),
                    }
                }
                Err(e) => EventKind::OutputFailed {
                    output: tag.output.into(),
                    error: e.to_string(),
                },
            };
            self.log.emit(tag.root, Some(&name), Some(&path), kind);
        }
        drop(locks);
    }

    /// Brings the shared context's fragments up to date and has the file
    /// assembled and written by the background writer (`now`: on this
    /// task, before returning, as at start-up and shutdown). The file is
    /// read again only when its (inode, size, mtime) is not what squadd's
    /// own last write left (see [`context`]).
    pub(super) fn write_shared_context(&mut self, i: RootId, now: bool) {
        self.timers.cancel(&Timer::Context(i));
        // With `cluster:`, only the leader writes it.
        if self.root_gone(i) || !self.leads(i) {
            return;
        }
        let job = context::Job {
            path: self.roots.core(i).root.join(SHARED_CONTEXT),
            fragments: self.roots.core_mut(i).context_fragments(),
            tag: Tag {
                root: i,
                session: None,
                output: "shared-context",
            },
        };
        if let Some(done) = self.writer.write_context(job, now) {
            self.written_behind(done);
        }
    }

    /// A background write finished.
    pub(super) fn written_behind(&mut self, (path, tag, result): writer::Done) {
        let kind = match result {
            Ok(()) => EventKind::OutputWritten {
                output: tag.output.into(),
            },
            Err(e) => EventKind::OutputFailed {
                output: tag.output.into(),
                error: e.to_string(),
            },
        };
        self.log
            .emit(tag.root, tag.session.as_deref(), Some(&path), kind);
    }

    /// Records the events upkeep caused.
    pub(super) fn record(&mut self, i: RootId, caused: Vec<upkeep::Caused>) {
        for (session, path, kind) in caused {
            self.log.emit(i, session.as_deref(), path.as_deref(), kind);
        }
    }

    pub(super) fn schedule_retention(&mut self, i: RootId, wall: DateTime<Utc>) {
        match self.roots.core(i).next_gc {
            Some(at) => self
                .timers
                .set_wall(Timer::Retention(i), at, wall, Instant::now()),
            None => self.timers.cancel(&Timer::Retention(i)),
        }
    }

    /// Sessions retention must leave alone: paths still waiting to be read,
    /// status writes held back.
    pub(super) fn busy_sessions(&self, i: RootId) -> BTreeSet<String> {
        let mut busy = self.intake.busy_sessions(&self.roots.core(i).sessions_dir);
        busy.extend(self.timers.held_sessions(i).map(str::to_string));
        busy
    }

    pub(super) fn refresh_locks(&mut self, i: RootId) {
        if self.root_gone(i) {
            return;
        }
        let mut caused = Vec::new();
        let next = upkeep::refresh_locks(self.roots.core_mut(i), &mut caused);
        self.record(i, caused);
        match next {
            upkeep::LocksNext::Retry(after) => self.timers.set(
                Timer::Locks(i),
                super::timers::instant_after(Instant::now(), after),
            ),
            upkeep::LocksNext::At(Some(at)) => {
                self.timers
                    .set_wall(Timer::Locks(i), at, Utc::now(), Instant::now())
            }
            upkeep::LocksNext::At(None) => self.timers.cancel(&Timer::Locks(i)),
        }
    }

    pub(super) fn release_session_locks(&mut self, i: RootId, name: &str, status: &str) {
        let mut caused = Vec::new();
        upkeep::release_session_locks(self.roots.core(i), name, status, &mut caused);
        self.record(i, caused);
        self.timers.set(Timer::Locks(i), Instant::now());
    }

    /// Releases a session's locks and writes its summary.
    pub(super) fn wrap_up(&mut self, i: RootId, name: &str, status: &str, wall: DateTime<Utc>) {
        self.release_session_locks(i, name, status);
        self.end_session(i, name, status, wall);
    }

    pub(super) fn end_session(&mut self, i: RootId, name: &str, status: &str, wall: DateTime<Utc>) {
        if let Some(caused) =
            upkeep::end_session(self.roots.core(i), &mut self.writer, name, status, wall)
        {
            self.record(i, vec![caused]);
        }
    }
}
