//! Waiting for a change on disk without polling: `lock acquire --wait` and
//! `inbox next --wait` sleep on a watch of the directories that matter.

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// A watch on some directories; [`Waiter::wait`] returns on any change in
/// them or after the timeout.
pub(crate) struct Waiter {
    watch: Option<(RecommendedWatcher, Receiver<()>)>,
    watched: HashSet<PathBuf>,
}

impl Waiter {
    /// Watches the existing ones among `dirs` (non-recursively). Without a
    /// watcher (limits reached) it degrades to sleeping for the timeout.
    pub(crate) fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Waiter {
        let (tx, rx) = channel();
        let watch = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Only changes wake the waiter. Opens and reads are events too
            // (inotify's IN_OPEN, IN_CLOSE_NOWRITE), and the waiter's own
            // look at the directory would wake it again at once: a busy loop.
            if res.is_ok_and(|e| is_change(&e.kind)) {
                let _ = tx.send(());
            }
        })
        .ok()
        .map(|w| (w, rx));
        let mut waiter = Waiter {
            watch,
            watched: HashSet::new(),
        };
        waiter.add(dirs);
        waiter
    }

    /// Also watches those among `dirs` that exist and are not watched yet
    /// (an inbox or a session created while waiting).
    pub(crate) fn add(&mut self, dirs: impl IntoIterator<Item = PathBuf>) {
        let Some((w, _)) = &mut self.watch else {
            return;
        };
        for dir in dirs {
            if !self.watched.contains(&dir)
                && dir.is_dir()
                && w.watch(&dir, RecursiveMode::NonRecursive).is_ok()
            {
                self.watched.insert(dir);
            }
        }
    }

    /// Sleeps until a change or `timeout` (a change that came while the
    /// caller was looking counts: it returns at once).
    pub(crate) fn wait(&self, timeout: Duration) {
        match &self.watch {
            Some((_, rx)) => {
                let _ = rx.recv_timeout(timeout);
                while rx.try_recv().is_ok() {}
            }
            None => std::thread::sleep(timeout),
        }
    }
}

/// Whether a watch event is a change (a file created, written, renamed,
/// removed), not a mere look (open, read, close after reading).
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode};
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn looking_at_a_watched_directory_does_not_wake_the_waiter() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), b"{}").unwrap();
        let waiter = Waiter::new([dir.path().to_path_buf()]);
        // What the waiting loop does on each turn: list and read.
        for _ in 0..3 {
            let _ = std::fs::read_dir(dir.path()).unwrap().count();
            let _ = squad_protocol::fsx::read_regular(&dir.path().join("a.json"), 64);
        }
        let start = Instant::now();
        waiter.wait(Duration::from_millis(300));
        assert!(
            start.elapsed() >= Duration::from_millis(250),
            "woke after {:?} on its own reads",
            start.elapsed()
        );
        // A change wakes it.
        let path = dir.path().join("b.json");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::write(path, b"{}").unwrap();
        });
        let start = Instant::now();
        waiter.wait(Duration::from_secs(20));
        assert!(start.elapsed() < Duration::from_secs(10));
        writer.join().unwrap();
    }
}
