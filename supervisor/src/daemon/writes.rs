//! The shell's side of squadd's own outputs of a root: session-status.md
//! (under the session's lock), the shared context, the persisted state,
//! the lock table, retention and the wrap-up of a session that ended.
//!
//! Only I/O is left here: taking locks, reading what the core asks for,
//! writing what it gives and handing each outcome back as an input. What
//! to write, when, and whether at all (the root gone, the lock busy, the
//! file vanishing, this host not the cluster's leader) is decided in
//! `core/outputs.rs`.

use self::core::Input;
use self::core::outputs::{StatusFacts, StatusLock, StatusText};
use self::core::upkeep::LockTaken;
use super::*;

impl EventLoop {
    /// Carries out one output effect (see [`core::Effect`]).
    pub(super) fn perform_output(&mut self, effect: core::Effect, now: Now) {
        use self::core::Effect;
        match effect {
            Effect::LockStatuses { root, sessions } => {
                self.lock_statuses(root, sessions, None, now)
            }
            // The leader's status writes: the one place they are made.
            Effect::WriteStatusTexts { root, texts } => self.write_status_texts(root, texts, now),
            Effect::WriteContext {
                root,
                path,
                fragments,
                now: before_going_on,
            } => self.write_context(root, path, fragments, before_going_on),
            Effect::WriteState { path, bytes, .. } => self.write_state(&path, bytes),
            Effect::ReadLocks(root) => self.read_locks(root, now),
            Effect::ReclaimLocks { root, expired } => self.reclaim_locks(root, expired, now),
            Effect::ReleaseSessionLocks {
                root,
                session,
                reason,
            } => self.release_session_locks(root, &session, &reason, now),
            Effect::EndSession {
                root,
                session,
                status,
                path,
                text,
            } => self.end_session(root, session, status, path, &text, now),
            Effect::RereadStatus { root, session } => self.reread_status(root, &session),
            Effect::LookAtStatuses { root, sessions } => self.look_at_statuses(root, sessions, now),
            other => {
                self.perform(vec![other], now);
            }
        }
    }

    /// Whether root `i`'s `.squad/sessions` is there (the core decides
    /// what that means with what it knows: missing, taken over).
    fn sessions_present(&self, i: RootId) -> bool {
        self.roots.core(i).sessions_dir.is_dir()
    }

    /// Writes the persisted state now, if the core says so.
    pub(super) fn save_state(&mut self, i: RootId) {
        let present = self.sessions_present(i);
        self.step(i, Input::SaveStateDue { present }, Now { wall: Utc::now() });
    }

    /// Carries out [`core::Effect::WriteState`].
    pub(super) fn write_state(&mut self, path: &Path, bytes: Result<Vec<u8>, String>) {
        let result = bytes.and_then(|b| {
            self.writer
                .write_private(path, &b)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = result {
            tracing::warn!(error = %e, "cannot save state.json");
        }
    }

    /// Carries out [`core::Effect::LockStatuses`]: each session's lock
    /// taken without waiting (`held`: the lock of a session the caller
    /// already holds, a session edit) and what it gave handed to the core,
    /// whose re-reads, looks and writes are carried out before the locks
    /// are let go.
    pub(super) fn lock_statuses(
        &mut self,
        i: RootId,
        names: Vec<String>,
        held: Option<(&str, std::fs::File)>,
        now: Now,
    ) {
        let mut held = held;
        let mut locks = Vec::new();
        let mut taken = Vec::with_capacity(names.len());
        for name in names {
            let mine = held.take_if(|(n, _)| *n == name.as_str());
            let callers = mine.is_some();
            let lock = match mine {
                Some((_, f)) => edits::Locked::Held(f),
                None => self.lock_status(i, &name),
            };
            let lock = match lock {
                edits::Locked::Held(f) => {
                    locks.push(f);
                    StatusLock::Held
                }
                edits::Locked::Busy => StatusLock::Busy,
                edits::Locked::Unavailable => StatusLock::Unavailable,
            };
            taken.push(LockTaken {
                session: name,
                lock,
                callers,
            });
        }
        self.step(i, Input::StatusLocksTaken { sessions: taken }, now);
        drop(locks);
    }

    /// Carries out [`core::Effect::LookAtStatuses`] (their locks held):
    /// what is seen of each status file handed to the core.
    fn look_at_statuses(&mut self, i: RootId, sessions: Vec<(String, StatusLock)>, now: Now) {
        let mut facts = Vec::with_capacity(sessions.len());
        for (name, lock) in sessions {
            let dir = self.roots.core(i).session_dir(&name);
            let vanishing = self
                .intake
                .vanishing(&dir.join(SESSION_STATUS_FILE))
                .map(|at| at.saturating_duration_since(Instant::now()));
            facts.push(StatusFacts {
                session: name,
                lock,
                vanishing,
                dir_present: dir.is_dir(),
            });
        }
        self.step(i, Input::StatusesLocked { sessions: facts }, now);
    }

    /// Carries out [`core::Effect::WriteStatusTexts`]: one batch of the
    /// writer, each outcome handed back.
    pub(super) fn write_status_texts(&mut self, i: RootId, texts: Vec<StatusText>, now: Now) {
        for t in texts {
            let tag = Tag {
                root: i,
                session: Some(t.session),
                output: "session-status",
            };
            self.writer.stage(t.path, t.text.into_bytes(), tag);
        }
        for writer::Committed {
            path,
            tag,
            bytes,
            result,
        } in self.writer.commit()
        {
            let session = tag.session.unwrap_or_default();
            let written = result.is_ok();
            let input = Input::StatusWritten {
                session: session.clone(),
                path,
                bytes: &bytes,
                error: result.err().map(|e| e.to_string()),
            };
            self.step(tag.root, input, now);
            if written {
                // Replication call site: the leader's status to every
                // checkout (a no-op on a follower, docs/cluster.md).
                self.roots
                    .shell(tag.root)
                    .publish_owned(&session, SESSION_STATUS_FILE);
            }
        }
    }

    /// Has the shared context written if the core says so (`now`: on this
    /// task, before returning, as at start-up and shutdown).
    pub(super) fn write_shared_context(&mut self, i: RootId, now: bool) {
        let present = self.sessions_present(i);
        let wall = Utc::now();
        self.step(i, Input::ContextDue { present, now }, Now { wall });
    }

    /// Carries out [`core::Effect::WriteContext`]: the file is assembled
    /// and written by the background writer (`now`: here). It is read
    /// again only when its (inode, size, mtime) is not what squadd's own
    /// last write left (see [`context`]).
    pub(super) fn write_context(
        &mut self,
        i: RootId,
        path: PathBuf,
        fragments: self::core::ContextParts,
        now: bool,
    ) {
        let job = context::Job {
            path,
            fragments,
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

    /// Reports every background write finished so far.
    pub(super) fn report_written_behind(&mut self) {
        for done in self.writer.take_done() {
            self.written_behind(done);
        }
    }

    /// A background write finished.
    pub(super) fn written_behind(&mut self, (path, tag, result): writer::Done) {
        let context_written = result.is_ok() && tag.output == "shared-context";
        let root = tag.root;
        let input = Input::OutputDone {
            session: tag.session,
            path,
            output: tag.output,
            error: result.err().map(|e| e.to_string()),
        };
        self.step(tag.root, input, Now { wall: Utc::now() });
        if context_written {
            // Replication call site: the leader's shared context to every
            // checkout (a no-op on a follower, docs/cluster.md).
            self.roots.shell(root).publish_context();
        }
    }

    /// Carries out [`core::Effect::RunRetention`]: the same plan and
    /// execution as `squadctl gc`, leaving alone the sessions squadd is
    /// still busy with; the outcome handed back.
    pub(super) fn run_retention(&mut self, i: RootId, now: Now) {
        let busy = self.busy_sessions(i);
        let run = upkeep::run_retention(self.roots.core(i), &busy, now.wall);
        self.roots.shell(i).publish_retired(&run);
        self.step(i, Input::RetentionRan(run), now);
    }

    /// Sessions retention must leave alone: paths still waiting to be read,
    /// status writes held back.
    pub(super) fn busy_sessions(&self, i: RootId) -> BTreeSet<String> {
        let mut busy = self.intake.busy_sessions(&self.roots.core(i).sessions_dir);
        busy.extend(self.timers.held_sessions(i).map(str::to_string));
        busy
    }

    /// Carries out [`core::Effect::RefreshLocks`].
    pub(super) fn refresh_locks(&mut self, i: RootId) {
        let present = self.sessions_present(i);
        self.step(i, Input::LocksDue { present }, Now { wall: Utc::now() });
    }

    /// Carries out [`core::Effect::ReadLocks`]: the table locked without
    /// waiting and read; the core's answer is carried out under the lock.
    pub(super) fn read_locks(&mut self, i: RootId, now: Now) {
        let (guard, table) = upkeep::read_locks(self.roots.core(i));
        self.step(i, Input::LocksRead(table), now);
        drop(guard);
    }

    /// Carries out [`core::Effect::ReclaimLocks`] (the table is locked).
    pub(super) fn reclaim_locks(
        &mut self,
        i: RootId,
        mut expired: Vec<crate::locks::Entry>,
        now: Now,
    ) {
        let events = crate::locks::reclaim(&mut expired, now.wall, "");
        self.step(i, Input::LocksReclaimed(events), now);
    }

    /// A session's wrap-up is due: handed to the core with what was seen.
    pub(super) fn wrap_up(
        &mut self,
        i: RootId,
        session: String,
        status: String,
        why: self::core::wrapup::WrapUpWhy,
        now: Now,
    ) {
        let input = Input::WrapUpDue {
            session,
            status,
            why,
        };
        self.step(i, input, now);
    }

    /// Carries out [`core::Effect::ReleaseSessionLocks`].
    fn release_session_locks(&mut self, i: RootId, session: &str, reason: &str, now: Now) {
        let dir = self.roots.core(i).session_dir(session);
        let events = crate::locks::release_ended_session(&self.roots.core(i).root, &dir, reason);
        self.step(i, Input::SessionLocksReleased(events), now);
    }

    /// Carries out [`core::Effect::EndSession`]: temporaries removed, then
    /// summary.md written.
    fn end_session(
        &mut self,
        i: RootId,
        session: String,
        status: String,
        path: PathBuf,
        text: &str,
        now: Now,
    ) {
        let dir = self.roots.core(i).session_dir(&session);
        let removed = self.writer.remove_temporary_files(&dir);
        let error = self
            .writer
            .write(&path, text.as_bytes(), false)
            .err()
            .map(|e| e.to_string());
        let input = Input::SessionEnded {
            session,
            status,
            path,
            removed,
            error,
        };
        self.step(i, input, now);
    }
}
