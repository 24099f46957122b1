//! Reading whole sessions and roots: the start-up scan, a rescan after lost
//! events or a root that came back, a session that appeared or vanished,
//! and seeding a session's mailbox from one listing of its inboxes.

use super::*;

impl Supervisor {
    pub(super) fn initial_scan(&mut self, i: RootId, now: DateTime<Utc>) {
        let root = self.roots.core(i).root.clone();
        let mut scanned = true;
        let sessions = match scan_root(&root, default_threads()) {
            Ok(s) => s,
            Err(e) => {
                scanned = false;
                tracing::error!(root = %root.display(), error = %e, "start-up scan failed");
                self.roots.core_mut(i).missing = true;
                self.log.emit(i, None, None, EventKind::RootMissing);
                self.timers
                    .set(Timer::RootCheck(i), Instant::now() + ROOT_CHECK_FIRST);
                BTreeMap::new()
            }
        };
        let files = sessions.values().map(|s| s.files.len()).sum();
        let count = sessions.len();
        let names: Vec<String> = sessions.keys().cloned().collect();
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
        for (name, index) in sessions {
            let out = self.roots.core_mut(i).load_session(index, now, false);
            self.report_invalid_files(i, &name);
            // A session that ended while squadd was down still holds its
            // locks, and may lack its summary.
            let ended = out.ended;
            let dir = self.roots.core(i).session_dir(&name);
            self.take_outcome(i, &name, Outcome { ended: None, ..out }, now, false);
            if let Some(status) = ended {
                let status = status.to_string();
                if dir.join(crate::locks::LOCKS_DIR).is_dir() {
                    self.release_session_locks(i, &name, &status);
                }
                if !dir.join(SUMMARY_FILE).exists() {
                    self.end_session(i, &name, &status, now);
                }
            }
        }
        if scanned {
            // Sessions deleted or archived while squadd was down.
            self.roots.core_mut(i).prune_state();
        }
        self.write_statuses(i, &names, now);
        self.refresh_skills(i);
        // Facts that arose while squadd was down (told once: see notices).
        for name in &names {
            self.tap_standing_facts(i, name);
        }
        // The backlog written while squadd was down: critical first.
        for name in &names {
            self.seed_mail(i, name, now);
        }
        // A few notices now: a start-up that owes a few is quiet once
        // ready. One that owes more (overdue work piled up while squadd was
        // down) tells the rest after READY, a batch per wake-up, so
        // readiness costs at most [`STARTUP_NOTICES`] however many are owed
        // (issue 23 item 2: a whole batch of 256 notices and their
        // deliveries was most of a start-up with 5,000 overdue tasks).
        self.send_notices_at_most(now, super::notices::STARTUP_NOTICES);
        self.flush_outbox(now);
        self.save_state(i);
        self.write_shared_context(i, true);
        self.log.emit(
            i,
            None,
            None,
            EventKind::Started {
                sessions: count,
                files,
            },
        );
    }

    /// Re-reads a whole root; returns the sessions to re-derive.
    pub(super) fn rescan(&mut self, i: RootId) -> Vec<String> {
        let root = self.roots.core(i).root.clone();
        if self.roots.core(i).taken_over.is_some() {
            return Vec::new();
        }
        if !self.roots.core(i).sessions_dir.is_dir() {
            // The kernel dropped the watches of everything that vanished;
            // forget them too, or the directories that come back later would
            // count as watched and never be watched again.
            self.intake.forget_under(&root.join(SQUAD_DIR));
            if !root.is_dir() {
                self.intake.forget_under(&root);
            }
            if !self.roots.core(i).missing {
                self.roots.core_mut(i).missing = true;
                self.log.emit(i, None, None, EventKind::RootMissing);
                // A root deleted and recreated is a new directory that no
                // watch covers: look for it (only while it is missing).
                self.roots.core_mut(i).check_after = ROOT_CHECK_FIRST;
                self.timers
                    .set(Timer::RootCheck(i), Instant::now() + ROOT_CHECK_FIRST);
            }
            return Vec::new();
        }
        if self.roots.core(i).missing {
            self.timers.cancel(&Timer::RootCheck(i));
            // Watches of a root directory that was replaced are dead.
            self.intake.unwatch_under(&root);
        }
        if !self.check_control(i) {
            return Vec::new();
        }
        self.watch_root(i);
        self.timers.set(Timer::Skills(i), Instant::now());
        let listed = match squad_protocol::tree::session_dirs(&root) {
            Ok(dirs) => dirs,
            Err(e) => {
                tracing::error!(error = %e, "rescan failed");
                return Vec::new();
            }
        };
        // squadd supervises only directories named like sessions (see
        // intake::classify).
        let mut names: BTreeSet<String> = listed
            .iter()
            .filter_map(|d| d.file_name()?.to_str())
            .filter(|n| squad_protocol::ids::is_session_dir_name(n))
            .map(str::to_string)
            .collect();
        // What the reads of a rescan used goes back once the rescans of a
        // burst are over.
        self.timers.set(Timer::Trim, Instant::now() + TRIM_DELAY);
        let old: BTreeSet<String> = self.roots.core(i).sessions.keys().cloned().collect();
        for gone in old.difference(&names) {
            self.forget_session(i, gone);
        }
        // What changed while events were lost is announced as changes.
        let wall = Utc::now();
        for name in &names {
            if old.contains(name) {
                self.rescan_session(i, name);
            } else {
                match scan_session(&self.roots.core(i).session_dir(name)) {
                    Ok(index) => {
                        let out = self.roots.core_mut(i).load_session(index, wall, true);
                        self.take_outcome(i, name, out, wall, false);
                    }
                    // Gone between the listing and the scan: its own event
                    // follows.
                    Err(e) => {
                        tracing::debug!(session = %name, error = %e, "session not scanned");
                        continue;
                    }
                }
            }
            self.seed_mail(i, name, wall);
        }
        let was_missing = std::mem::replace(&mut self.roots.core_mut(i).missing, false);
        let reason = if was_missing {
            self.log.emit(i, None, None, EventKind::RootRestored);
            "root restored"
        } else {
            "the watcher asked for a rescan"
        };
        self.log.emit(
            i,
            None,
            None,
            EventKind::Rescanned {
                reason: reason.into(),
            },
        );
        names.extend(old);
        names.into_iter().collect()
    }

    /// Brings a known session up to date after lost events: each file on
    /// disk goes the one way a file event goes ([`Self::apply_file`]: the
    /// same bytes as indexed are not parsed again), each indexed file no
    /// longer on disk is a removal. Beyond reading the files, the work is
    /// proportional to what changed, and the session is never indexed
    /// twice (a burst that overflows the notification queue rescans again
    /// and again: a second index each time was most of squadd's memory
    /// after such a burst).
    pub(super) fn rescan_session(&mut self, i: RootId, name: &str) {
        let dir = self.roots.core(i).session_dir(name);
        // Unreadable now (or gone: its own event follows): keep what we have.
        let Ok(on_disk) = squad_protocol::tree::session_files(&dir) else {
            return;
        };
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (path, kind) in on_disk {
            let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let file = file.to_string();
            self.apply_file(i, name, &file, &path, kind);
            seen.insert(file);
        }
        let gone: Vec<(String, FileKind)> = self
            .roots
            .core(i)
            .sessions
            .get(name)
            .map(|core| {
                core.index()
                    .files
                    .iter()
                    .filter(|(file, _)| !seen.contains(*file))
                    .map(|(file, f)| (file.to_string(), f.kind))
                    .collect()
            })
            .unwrap_or_default();
        for (file, kind) in gone {
            let path = dir.join(&file);
            self.apply_file(i, name, &file, &path, kind);
        }
    }

    /// A session directory vanished.
    pub(super) fn forget_session(&mut self, i: RootId, name: &str) {
        let dir = self.roots.core(i).session_dir(name);
        self.roots.core_mut(i).remove_session(name);
        self.timers.cancel_session(i, name);
        // Its inbox and lock watches go with it.
        self.intake.unwatch_under(&dir);
        self.writer.forget_under(&dir);
        self.log
            .emit(i, Some(name), Some(&dir), EventKind::SessionRemoved);
        self.timers
            .set_earlier(Timer::Context(i), Instant::now() + CONTEXT_DELAY);
        self.state_changed(i);
    }

    pub(super) fn apply_session_dir(&mut self, i: RootId, name: &str) -> Option<(String, bool)> {
        let dir = self.roots.core(i).session_dir(name);
        let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        let known = self.roots.core(i).sessions.contains_key(name);
        match (is_dir, known) {
            (true, false) => {
                // Watch first, then scan: files created before the watch
                // existed are found by the scan.
                self.watch(i, &dir);
                self.watch_locks(i, &dir);
                match scan_session(&dir) {
                    Ok(s) => {
                        let wall = Utc::now();
                        let out = self.roots.core_mut(i).load_session(s, wall, true);
                        self.log
                            .emit(i, Some(name), Some(&dir), EventKind::SessionAdded);
                        self.report_invalid_files(i, name);
                        self.take_outcome(i, name, out, wall, false);
                        self.seed_mail(i, name, wall);
                        Some((name.to_string(), false))
                    }
                    Err(e) => {
                        tracing::warn!(dir = %dir.display(), error = %e, "cannot scan new session");
                        None
                    }
                }
            }
            (false, true) => {
                self.forget_session(i, name);
                None
            }
            _ => None,
        }
    }

    /// Seeds a session's mailbox with one listing of its inboxes (start-up,
    /// a session that appeared, a rescan), watches each unread inbox, and
    /// offers everything its files ask to deliver (the backlog).
    pub(super) fn seed_mail(&mut self, i: RootId, name: &str, wall: DateTime<Utc>) {
        let dir = self.roots.core(i).session_dir(name);
        let mut entries = Vec::new();
        let mut watch = Vec::new();
        if let Ok(agents) = std::fs::read_dir(dir.join("inbox")) {
            for a in agents.flatten() {
                if !a.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let agent = a.file_name().to_string_lossy().into_owned();
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
        let mut mail = routing::Mailbox::default();
        mail.seed(&self.roots.core(i).policy.messages, entries);
        let mut messages = Vec::new();
        let mut files = Vec::new();
        if let Some(core) = self.roots.core(i).sessions.get(name) {
            for (file, f) in core.index().files.iter() {
                if let crate::index::Entry::Message(m) = &f.entry {
                    mail.note_reply(m.in_reply_to.as_deref(), true);
                    messages.push(m.message_id.clone());
                }
                files.push(file.to_string());
            }
        }
        self.roots.core_mut(i).mail.insert(name.to_string(), mail);
        // What is past due (a backlog) is checked now, not after READY.
        self.run_escalations(i, name, Utc::now());
        for file in files {
            self.route_file(i, name, &file, wall, None);
        }
    }
}
