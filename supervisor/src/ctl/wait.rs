//! Waiting for a change on disk without polling: `lock acquire --wait` and
//! `inbox next --wait` sleep on a watch of the directories that matter.

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// A watch on some directories; [`Waiter::wait`] returns on any change in
/// them or after the timeout.
pub struct Waiter {
    watch: Option<(RecommendedWatcher, Receiver<()>)>,
}

impl Waiter {
    /// Watches the existing ones among `dirs` (non-recursively). Without a
    /// watcher (limits reached) it degrades to sleeping for the timeout.
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Waiter {
        let (tx, rx) = channel();
        let watch = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok() {
                let _ = tx.send(());
            }
        })
        .ok()
        .map(|mut w| {
            for dir in dirs {
                if dir.is_dir() {
                    let _ = w.watch(&dir, RecursiveMode::NonRecursive);
                }
            }
            (w, rx)
        });
        Waiter { watch }
    }

    /// Sleeps until a change or `timeout`.
    pub fn wait(&self, timeout: Duration) {
        match &self.watch {
            Some((_, rx)) => {
                let _ = rx.recv_timeout(timeout);
                while rx.try_recv().is_ok() {}
            }
            None => std::thread::sleep(timeout),
        }
    }
}
