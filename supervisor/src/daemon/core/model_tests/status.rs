//! squadd's status writes in the model: the core's status effects carried
//! out as the shell carries them out (`writes.rs`: the sessions' locks
//! taken, the texts written as one batch, each write told back and its
//! watch event read), and the oracle's rule: the text written is the
//! from-scratch render of the session's files over the file as it was,
//! and after every operation a status file that a render would change has
//! its write held back on the session's status timer.

use super::world::World;
use super::*;
use crate::daemon::core::files::FileRef;
use crate::daemon::core::outputs::{StatusFacts, StatusLock, StatusText};
use crate::outputs::render_status;

impl World {
    /// [`Effect::LockStatuses`]: every lock free, the file not vanishing.
    pub(super) fn lock_statuses(&mut self, root: RootId, sessions: Vec<String>) {
        let snap = &self.snaps[root.0 as usize];
        let sessions = sessions
            .into_iter()
            .map(|session| StatusFacts {
                dir_present: snap.files.contains_key(&session),
                session,
                lock: StatusLock::Held,
                vanishing: None,
            })
            .collect();
        self.step(root, Input::StatusesLocked { sessions });
    }

    /// [`Effect::WriteStatusTexts`]: each text checked against the
    /// oracle's render, written, told back (`Input::StatusWritten`), then
    /// its watch event read (squadd's own bytes: nothing follows).
    pub(super) fn write_status_texts(&mut self, root: RootId, texts: Vec<StatusText>) {
        let r = root.0 as usize;
        let want = Known::from_scratch(&self.snaps[r], self.now);
        for t in texts {
            let existing = self.snaps[r]
                .files
                .get(&t.session)
                .and_then(|f| f.get(SESSION_STATUS_FILE));
            let existing = match existing {
                Some(bytes) => match std::str::from_utf8(bytes) {
                    Ok(text) => Some(text),
                    Err(_) => panic!("root {r} {}: a status file not text overwritten", t.session),
                },
                None => None,
            };
            let view = &want.sessions[&t.session].view;
            let expected = render_status(existing, view, self.now);
            assert_eq!(
                Some(&t.text),
                expected.as_ref(),
                "root {r} {}: the status text written",
                t.session
            );
            assert_ne!(
                existing,
                Some(t.text.as_str()),
                "root {r} {}: a status file written unchanged",
                t.session
            );
            let bytes = t.text.into_bytes();
            self.put(r, &t.session, SESSION_STATUS_FILE, Some(bytes.clone()));
            let input = Input::StatusWritten {
                session: t.session.clone(),
                path: t.path.clone(),
                bytes: &bytes,
                error: None,
            };
            self.step(root, input);
            let file = FileRef {
                session: t.session,
                file: SESSION_STATUS_FILE.to_string(),
                path: t.path,
            };
            self.read(root, file, FileKind::SessionStatus);
        }
    }

    /// After an operation: a status file (text) that the from-scratch
    /// render would change has its write held back on its timer.
    pub(super) fn check_statuses(&self, r: usize, want: &Known) {
        for (name, w) in &want.sessions {
            let Some(bytes) = self.snaps[r].files[name].get(SESSION_STATUS_FILE) else {
                continue;
            };
            let Ok(text) = std::str::from_utf8(bytes) else {
                continue;
            };
            let Some(render) = render_status(Some(text), &w.view, self.now) else {
                continue;
            };
            if render != text {
                let timer = Timer::Status {
                    root: id(r),
                    session: name.clone(),
                };
                assert!(
                    self.timers.contains_key(&timer),
                    "root {r} {name}: session-status.md is stale, no write held back:\n{text}\nrenders\n{render}"
                );
            }
        }
    }
}
