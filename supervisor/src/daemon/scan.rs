//! Reading whole sessions and roots, the I/O: the start-up scan, a rescan
//! (lost events, a root that came back), a session directory that changed,
//! and one listing of a session's inboxes. What follows from what was read
//! is decided in the core ([`core::scan`]).

use self::core::Input;
use self::core::scan::{InboxListing, Scanned};
use super::*;

impl EventLoop {
    pub(super) fn initial_scan(&mut self, i: RootId, now: DateTime<Utc>) {
        let root = self.roots.core(i).root.clone();
        let at = Now { wall: now };
        let (sessions, complete) = match scan_root(&root, default_threads()) {
            Ok(s) => (s, true),
            Err(e) => {
                tracing::error!(root = %root.display(), error = %e, "start-up scan failed");
                self.step(i, Input::StartScanFailed, at);
                (BTreeMap::new(), false)
            }
        };
        let files = sessions.values().map(|s| s.files.len()).sum();
        // Temporaries a kill -9 left behind (ours, older than a minute, or
        // written by the squadd before us, which is gone).
        let previous = self
            .roots
            .shell(i)
            .pid_lock
            .as_ref()
            .and_then(|l| l.previous);
        crate::safefs::sweep_squadd_temporaries(&root, previous);
        // The first derivation is the baseline: no task-ready storm at start.
        for index in sessions.into_values() {
            let input = Input::SessionScanned {
                index: Box::new(index),
                why: Scanned::StartUp,
            };
            self.step(i, input, at);
        }
        self.step(i, Input::StartScanned { files, complete }, at);
    }

    /// Re-reads a whole root; returns the sessions to re-derive.
    pub(super) fn rescan(&mut self, i: RootId) -> Vec<String> {
        let present = self.roots.core(i).sessions_dir.is_dir();
        let input = Input::RescanDue { present };
        let touched = self
            .step(i, input, Now { wall: Utc::now() })
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if !present {
            self.look_for_moved_root(i);
        }
        touched
    }

    /// The root is missing: where did its `.squad/` go? The directory of
    /// the root whose `run/squadd.pid` is the pid lock squadd holds (a
    /// rename keeps the file), said to the core ([`Input::RootMoved`]).
    /// Then, when another `.squad/` took its place (the other tool's new
    /// team), squadd's control is taken there (pid lock, socket), so that
    /// `health` and `status` keep answering and say what happened.
    pub(super) fn look_for_moved_root(&mut self, i: RootId) {
        let root = self.roots.core(i).root.clone();
        let moved = self.roots.shell(i).pid_lock.as_ref().and_then(|lock| {
            let entries = std::fs::read_dir(crate::root::fs_path(&root)).ok()?;
            entries.flatten().find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let dir = e.file_type().is_ok_and(|t| t.is_dir());
                let pid = e
                    .path()
                    .join(squad_protocol::tree::RUN_DIR)
                    .join("squadd.pid");
                (dir && name != SQUAD_DIR && lock.is_at(&pid)).then_some(name)
            })
        });
        if let Some(to) = moved {
            self.step(i, Input::RootMoved { to }, Now { wall: Utc::now() });
        }
        if crate::root::fs_path(&root).join(SQUAD_DIR).is_dir() {
            self.check_control(i);
        }
    }

    /// Checks the root's control, watches it and lists its session
    /// directories ([`core::Effect::ListSessions`]); returns the sessions
    /// the listing touched.
    pub(super) fn list_sessions(&mut self, i: RootId) -> Vec<(String, bool)> {
        if !self.check_control(i) {
            return Vec::new();
        }
        self.watch_root(i);
        let root = self.roots.core(i).root.clone();
        let listed = match squad_protocol::tree::session_dirs(&root) {
            Ok(dirs) => dirs,
            Err(e) => {
                tracing::error!(error = %e, "rescan failed");
                return Vec::new();
            }
        };
        // squadd supervises only directories named like sessions (see
        // intake::classify).
        let names: BTreeSet<String> = listed
            .iter()
            .filter_map(|d| d.file_name()?.to_str())
            .filter(|n| squad_protocol::ids::is_session_dir_name(n))
            .map(str::to_string)
            .collect();
        self.step(i, Input::SessionListed { names }, Now { wall: Utc::now() })
    }

    /// Lists a known session's files after lost events
    /// ([`core::Effect::RescanSession`]): the core has each read the way a
    /// file event reads it, so the session is never indexed twice (a burst
    /// that overflows the notification queue rescans again and again: a
    /// second index each time was most of squadd's memory after such a
    /// burst).
    pub(super) fn rescan_session(&mut self, i: RootId, name: &str) {
        let dir = self.roots.core(i).session_dir(name);
        // Unreadable now (or gone: its own event follows): keep what we have.
        let Ok(on_disk) = squad_protocol::tree::session_files(&dir) else {
            return;
        };
        let input = Input::SessionFilesListed {
            session: name.to_string(),
            on_disk,
        };
        self.step(i, input, Now { wall: Utc::now() });
    }

    /// Scans a session directory ([`core::Effect::ScanSession`]).
    pub(super) fn scan_session(
        &mut self,
        i: RootId,
        name: &str,
        why: Scanned,
    ) -> Vec<(String, bool)> {
        let dir = self.roots.core(i).session_dir(name);
        match scan_session(&dir) {
            Ok(index) => {
                let input = Input::SessionScanned {
                    index: Box::new(index),
                    why,
                };
                self.step(i, input, Now { wall: Utc::now() })
            }
            // Gone between the listing and the scan: its own event follows.
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "cannot scan the session");
                Vec::new()
            }
        }
    }

    /// A session's timers, watches and staged writes go
    /// ([`core::Effect::ForgetSession`]).
    pub(super) fn forget_session(&mut self, i: RootId, name: &str) {
        let dir = self.roots.core(i).session_dir(name);
        self.timers.cancel_session(i, name);
        // Its inbox and lock watches go with it.
        self.intake.unwatch_under(&dir);
        self.writer.forget_under(&dir);
    }

    /// A session directory changed: whether it is one now goes to the core.
    pub(super) fn apply_session_dir(&mut self, i: RootId, name: &str) -> Option<(String, bool)> {
        let dir = self.roots.core(i).session_dir(name);
        let present = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        let input = Input::SessionDir {
            session: name.to_string(),
            present,
        };
        self.step(i, input, Now { wall: Utc::now() }).pop()
    }

    /// Lists a session's inboxes once (start-up, a session that appeared,
    /// a rescan), watches each unread inbox, and hands the listing to the
    /// core ([`core::Input::InboxesListed`]: the mailbox seeded, the
    /// backlog offered).
    pub(super) fn seed_mail(&mut self, i: RootId, name: &str, wall: DateTime<Utc>) {
        let dir = self.roots.core(i).session_dir(name);
        let mut entries: Vec<InboxListing> = Vec::new();
        let mut watch = Vec::new();
        let mut marks = Vec::new();
        if let Ok(agents) = std::fs::read_dir(dir.join("inbox")) {
            for a in agents.flatten() {
                if !a.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let agent = a.file_name().to_string_lossy().into_owned();
                for (file, mark) in crate::inbox::unaudited(&a.path()) {
                    marks.push((agent.clone(), file, a.path(), mark));
                }
                for (sub, unread) in [("new", true), ("cur", false)] {
                    let Ok(files) = std::fs::read_dir(a.path().join(sub)) else {
                        continue;
                    };
                    if unread {
                        watch.push(a.path().join(sub));
                    }
                    for f in files.flatten() {
                        let at = unread
                            .then(|| f.metadata().and_then(|m| m.modified()).ok())
                            .flatten()
                            .map(DateTime::<Utc>::from);
                        let file = f.file_name().to_string_lossy().into_owned();
                        entries.push((agent.clone(), file, unread, at));
                    }
                }
            }
        }
        for path in watch {
            self.watch(i, &path);
        }
        let input = Input::InboxesListed {
            session: name.to_string(),
            entries,
        };
        self.step(i, input, Now { wall });
        if !marks.is_empty() {
            self.say_unaudited(i, name, marks, wall);
        }
    }

    /// Deliveries a killed squadd made and never audited (their marks in
    /// `tmp/`, [`crate::inbox::unaudited`]): those the audit log does not
    /// say (it may, when the kill fell between the line and the mark's
    /// removal) are said by the core ([`core::Input::DeliveriesUnaudited`]),
    /// then every mark goes.
    fn say_unaudited(
        &mut self,
        i: RootId,
        session: &str,
        marks: Vec<(String, String, PathBuf, String)>,
        wall: DateTime<Utc>,
    ) {
        let mut found = Vec::new();
        for (agent, file, _, _) in &marks {
            let id = squad_policies::messages::parse_inbox_name(file).map(|(_, id)| id);
            let said = id.is_some_and(|id| self.log.said_delivered(i, session, agent, &id));
            if !said {
                let dir = crate::inbox::inbox_dir(&self.roots.core(i).session_dir(session), agent);
                let sub = if dir.join("new").join(file).exists() {
                    "new"
                } else {
                    "cur"
                };
                found.push((agent.clone(), file.clone(), dir.join(sub).join(file)));
            }
        }
        let input = Input::DeliveriesUnaudited {
            session: session.to_string(),
            found,
        };
        self.step(i, input, Now { wall });
        let root = self.roots.core(i).root.clone();
        for (_, _, inbox, mark) in marks {
            // Never through a link an agent planted on the way.
            let at = inbox.join("tmp").join(mark);
            if let Ok((dir, name)) = crate::safefs::parent_of(&root, &at, None) {
                let _ = dir.unlink(&name);
            }
        }
    }
}
