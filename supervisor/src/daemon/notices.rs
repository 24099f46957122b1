//! squadd tells agents what concerns them: a task became ready, went
//! overdue, a file they wrote is invalid, a dependency violation.
//!
//! One path: the event log taps the events that may call for a notice
//! ([`wanted`]); once per batch [`EventLoop::send_notices`] looks at each
//! against what squadd knows now (a task no longer ready is not announced),
//! asks `squad_policies::notices` which notices the fact calls for, and
//! writes each as a protocol message file from `squadd` into the session
//! (`role-comm-squadd-to-<agent>-msg_squadd_<kind>_<hash>.md`). The file is
//! then indexed, validated and delivered like any message: Maildir inbox,
//! priorities, notify hooks, escalation. Its id is a hash of the fact, so the
//! file is the record: a fact already told (before a restart too) is never
//! told again. At start-up every standing fact is looked at once, so a fact
//! that arose while squadd was down, or a notice a kill -9 interrupted, is
//! still told.
//!
//! Which notice files a fact calls for (one per file across a batch), the
//! batch sizes, what a write failure calls for and (with `cluster:`) that
//! only the leader writes them are the core's ([`core::notices`]); what is
//! here is I/O: taking the tapped events, handing each root its own, and
//! writing the files as one group commit.

use super::EventLoop;
use super::core::notices::{NoticeFile, TappedEvent};
use super::core::{self, Effect, Now, RootId};
use crate::events::EventKind;
use chrono::{DateTime, Utc};
use std::path::PathBuf;

/// A tapped event: (root, session, path, kind).
pub(crate) type Tapped = (RootId, Option<String>, Option<PathBuf>, EventKind);

pub(crate) use super::core::notices::{NOTICE_BATCH, STARTUP_NOTICES};

impl EventLoop {
    /// Writes the notices the tapped events call for, at most
    /// [`NOTICE_BATCH`] events at a time (the rest wait for the next
    /// wake-up: see [`Self::notices_pending`]). Each root's core gets its
    /// own events of the batch, in tapped order, in one step
    /// ([`core::Input::NoticesTapped`]: which files they call for); the
    /// files are written as one group commit ([`Self::write_notices`]).
    pub(super) fn send_notices(&mut self, wall: DateTime<Utc>) {
        self.send_notices_at_most(wall, NOTICE_BATCH)
    }

    /// [`Self::send_notices`] of at most `batch` tapped events (the
    /// start-up batch is smaller: [`STARTUP_NOTICES`]).
    pub(super) fn send_notices_at_most(&mut self, wall: DateTime<Utc>, batch: usize) {
        let tapped = self.log.take_tapped(batch);
        if tapped.is_empty() {
            return;
        }
        let now = Now { wall };
        let mut by_root: Vec<(RootId, Vec<TappedEvent>)> = Vec::new();
        for (i, session, path, kind) in tapped {
            match by_root.iter_mut().find(|(r, _)| *r == i) {
                Some((_, events)) => events.push((session, path, kind)),
                None => by_root.push((i, vec![(session, path, kind)])),
            }
        }
        let mut files: Vec<NoticeFile> = Vec::new();
        for (i, events) in by_root {
            files.extend(self.notice_step(i, events, now));
        }
        self.write_notices(files);
    }

    /// One root's step for its tapped events: its notice files, every
    /// other effect carried out.
    fn notice_step(&mut self, i: RootId, events: Vec<TappedEvent>, now: Now) -> Vec<NoticeFile> {
        let input = core::Input::NoticesTapped(events);
        let effects = core::Core::new(i, self.roots.core_mut(i)).step(input, now);
        let mut files = Vec::new();
        let mut rest = Vec::new();
        for e in effects {
            match e {
                Effect::WriteNotice(n) => files.push(n),
                other => rest.push(other),
            }
        }
        self.perform(rest, now);
        files
    }

    /// Writes notice files, the first half of one group commit with their
    /// deliveries: every file is written complete (temporary file, fsync,
    /// rename), each indexed from the bytes squadd wrote (never read back)
    /// and routed into the outbox. The next [`Self::flush_outbox`], the
    /// batch's last step, writes the deliveries, then fsyncs the session
    /// directories of these files and the inboxes together
    /// ([`Self::commit_group`]), and only then announces any delivery: the
    /// session directory's fsync is no longer a wait between the status
    /// write and the delivery (issue 23 item 1).
    pub(super) fn write_notices(&mut self, notices: Vec<NoticeFile>) {
        if notices.is_empty() {
            return;
        }
        let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::with_capacity(notices.len());
        let mut whose: Vec<(RootId, String, String)> = Vec::with_capacity(notices.len());
        for n in notices {
            files.push((n.path, n.text.into_bytes()));
            whose.push((n.root, n.session, n.file));
        }
        let results = self.writer.write_group_unsynced(&files);
        for (((path, bytes), (i, name, file)), result) in files.into_iter().zip(whose).zip(results)
        {
            match result {
                // Indexed, validated and routed like any message, from
                // what was written.
                Ok(()) => {
                    self.roots.shell(i).publish_owned(&name, &file);
                    let input = core::Input::NoticeWritten {
                        file: core::files::FileRef {
                            session: name,
                            file,
                            path,
                        },
                        bytes: std::sync::Arc::<[u8]>::from(bytes),
                    };
                    self.step(i, input, Now { wall: Utc::now() });
                }
                Err(e) => {
                    let input = core::Input::NoticeFailed {
                        file: core::files::FileRef {
                            session: name,
                            file,
                            path,
                        },
                        error: e.to_string(),
                    };
                    self.step(i, input, Now { wall: Utc::now() });
                }
            }
        }
    }

    /// Fsyncs, in parallel, the inboxes `dirs` a batch delivered into and
    /// the session directories its notice files went into (the second
    /// half of the group commit [`Self::write_notices`] began); before any
    /// delivery of the batch is announced. A notice's directory that fails
    /// its fsync is said so (the file is there for readers, but a crash may
    /// lose it). Returns the inboxes whose fsync failed.
    pub(super) fn commit_group(
        &mut self,
        dirs: std::collections::BTreeMap<PathBuf, crate::safefs::Dir>,
    ) -> std::collections::BTreeMap<PathBuf, String> {
        let inboxes: Vec<PathBuf> = dirs.keys().cloned().collect();
        let mut failed = self.writer.sync_group(dirs);
        let notices: Vec<(PathBuf, String)> = failed
            .iter()
            .filter(|(path, _)| !inboxes.contains(path))
            .map(|(path, e)| (path.clone(), e.clone()))
            .collect();
        for (path, error) in notices {
            failed.remove(&path);
            let Some(i) = self.roots.of(&path) else {
                continue;
            };
            let session = path.file_name().map(|n| n.to_string_lossy().into_owned());
            self.log.emit(
                i,
                session.as_deref(),
                Some(&path),
                EventKind::OutputFailed {
                    output: "notice".into(),
                    error: format!("fsync of {}: {error}", path.display()),
                },
            );
        }
        failed
    }

    /// Whether tapped facts wait for [`Self::send_notices`] (more than one
    /// batch's worth, as at start-up with many standing facts): the event
    /// loop comes back at once, between other work.
    pub(super) fn notices_pending(&self) -> bool {
        self.log.has_tapped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::core::notices::{notice_id, wanted};
    use squad_policies::notices::Notice;
    use squad_policies::notices::NoticeKind;
    use squad_protocol::model::Priority;

    #[test]
    fn a_notice_id_is_stable_per_session_fact_and_recipient_and_short() {
        let n = |key: &str, to: &str| Notice {
            kind: NoticeKind::TaskReady,
            to: to.into(),
            priority: Priority::Medium,
            key: key.into(),
        };
        let a = notice_id("s1", &n("ready|task_1|bob|bob", "bob"));
        assert_eq!(a, notice_id("s1", &n("ready|task_1|bob|bob", "bob")));
        assert_ne!(a, notice_id("s2", &n("ready|task_1|bob|bob", "bob")));
        assert_ne!(a, notice_id("s1", &n("ready|task_2|bob|bob", "bob")));
        assert!(squad_protocol::IdKind::Message.matches(&a), "{a}");
        assert!(a.len() <= 40, "{a}");
        assert!(wanted(&EventKind::TaskReady {
            task_id: "task_1".into(),
            agent: "bob".into()
        }));
        assert!(!wanted(&EventKind::FileRemoved));
    }
}
