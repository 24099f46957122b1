//! Waiting for a change on disk without polling: `lock acquire --wait`,
//! `inbox next --wait` and `next --wait` sleep on a watch of the
//! directories that matter, until a change, their time, or a [`Cancel`]
//! (an MCP client cancelled the call, or went away).

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The cancellation of one command run in-process (an MCP tool call): set
/// from another thread, it wakes the command's waits, which then end as if
/// their time were up. A command on the command line has none.
#[derive(Debug, Default)]
pub(crate) struct Cancel {
    cancelled: AtomicBool,
    /// The wake-ups of the command's waiters.
    wakers: Mutex<Vec<Sender<()>>>,
}

impl Cancel {
    /// Cancels the command: its waits end now and from now on.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let wakers = self.wakers.lock().unwrap_or_else(|e| e.into_inner());
        for w in wakers.iter() {
            let _ = w.send(());
        }
    }
}

thread_local! {
    /// The cancellation of the command this thread runs, if any.
    static CURRENT: RefCell<Option<Arc<Cancel>>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread with `cancel` as its cancellation.
pub(crate) fn cancellable<R>(cancel: Arc<Cancel>, f: impl FnOnce() -> R) -> R {
    CURRENT.with(|c| *c.borrow_mut() = Some(cancel));
    let r = f();
    CURRENT.with(|c| *c.borrow_mut() = None);
    r
}

/// Whether the command this thread runs was cancelled (its waits are over).
pub(crate) fn cancelled() -> bool {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|c| c.cancelled.load(Ordering::SeqCst))
    })
}

/// A watch on some directories; [`Waiter::wait`] returns on any change in
/// them, after the timeout, or when the command is cancelled.
pub(crate) struct Waiter {
    watch: Option<RecommendedWatcher>,
    /// Wake-ups: a change (from the watcher) or the cancellation.
    rx: Receiver<()>,
    /// Keeps the channel open without a watcher, so a wait lasts its time.
    _open: Sender<()>,
    watched: HashSet<PathBuf>,
}

impl Waiter {
    /// Watches the existing ones among `dirs` (non-recursively). Without a
    /// watcher (limits reached) it degrades to sleeping for the timeout.
    pub(crate) fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Waiter {
        let (tx, rx) = channel();
        let open = tx.clone();
        CURRENT.with(|c| {
            if let Some(cancel) = c.borrow().as_ref() {
                let mut wakers = cancel.wakers.lock().unwrap_or_else(|e| e.into_inner());
                wakers.push(tx.clone());
            }
        });
        let watch = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            // Only changes wake the waiter. Opens and reads are events too
            // (inotify's IN_OPEN, IN_CLOSE_NOWRITE), and the waiter's own
            // look at the directory would wake it again at once: a busy loop.
            if res.is_ok_and(|e| is_change(&e.kind)) {
                let _ = tx.send(());
            }
        })
        .ok();
        let mut waiter = Waiter {
            watch,
            rx,
            _open: open,
            watched: HashSet::new(),
        };
        waiter.add(dirs);
        waiter
    }

    /// Also watches those among `dirs` that exist and are not watched yet
    /// (an inbox or a session created while waiting).
    pub(crate) fn add(&mut self, dirs: impl IntoIterator<Item = PathBuf>) {
        let Some(w) = &mut self.watch else {
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

    /// Sleeps until a change, `timeout` or the command's cancellation (a
    /// change that came while the caller was looking counts: it returns at
    /// once). Without a watcher only the time or the cancellation end it.
    pub(crate) fn wait(&self, timeout: Duration) {
        if cancelled() {
            return;
        }
        let _ = self.rx.recv_timeout(timeout);
        while self.rx.try_recv().is_ok() {}
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

    #[test]
    fn a_cancel_from_another_thread_ends_the_wait_and_every_later_one() {
        let cancel = Arc::new(Cancel::default());
        let other = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.cancel();
        });
        let start = Instant::now();
        cancellable(cancel, || {
            let waiter = Waiter::new(Vec::new());
            waiter.wait(Duration::from_secs(600));
            assert!(cancelled());
            waiter.wait(Duration::from_secs(600));
        });
        assert!(start.elapsed() < Duration::from_secs(60));
        assert!(!cancelled(), "the cancellation is the command's only");
        canceller.join().unwrap();
    }
}
