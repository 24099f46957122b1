//! Live updates: a thread follows squadd's event stream (as `squadctl
//! top` does) and, while squadd is down, the files under `.squad/sessions`
//! (inotify); each change becomes an event with an id of this server's own
//! (increasing from 1 at every start), kept in a ring so a page's
//! `EventSource` that reconnects with `Last-Event-ID` gets what it missed,
//! or a `reload` when that is no longer known.

use crate::control::{Client, Method};
use bytes::Bytes;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many events a reconnecting page can catch up on.
const RING: usize = 512;

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    /// This server's id for it.
    pub id: u64,
    /// squadd's event kind (`task-ready`…), `changed` for a file change
    /// seen while squadd is down, `squadd-up` / `squadd-down`.
    pub kind: String,
    /// The session, when known.
    pub session: Option<String>,
}

impl Change {
    /// The server-sent event.
    pub(super) fn frame(&self) -> Bytes {
        let data = serde_json::json!({"kind": self.kind, "session": self.session});
        Bytes::from(format!("id: {}\nevent: change\ndata: {data}\n\n", self.id))
    }
}

/// The feed the pages' streams subscribe to.
#[derive(Clone)]
pub(super) struct Feed {
    tx: tokio::sync::broadcast::Sender<Change>,
    ring: Arc<Mutex<Ring>>,
}

#[derive(Default)]
struct Ring {
    next: u64,
    kept: VecDeque<Change>,
}

/// What a stream that (re)connects is sent first.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CatchUp {
    /// The changes after the last one it saw.
    Missed(Vec<Change>),
    /// Its last id is not of this start or fell out of the ring: reload.
    Reload,
}

impl Feed {
    /// A feed with nothing in it yet.
    pub(super) fn new() -> Feed {
        let (tx, _) = tokio::sync::broadcast::channel(RING);
        Feed {
            tx,
            ring: Arc::new(Mutex::new(Ring {
                next: 1,
                kept: VecDeque::new(),
            })),
        }
    }

    /// Numbers, keeps and sends a change.
    pub(super) fn publish(&self, kind: &str, session: Option<String>) {
        let Ok(mut ring) = self.ring.lock() else {
            return;
        };
        let change = Change {
            id: ring.next,
            kind: kind.to_string(),
            session,
        };
        ring.next += 1;
        if ring.kept.len() == RING {
            ring.kept.pop_front();
        }
        ring.kept.push_back(change.clone());
        // Sent under the lock, so a subscriber taken with `catch_up` sees
        // every change exactly once.
        let _ = self.tx.send(change);
    }

    /// A subscription, and what a stream whose last id was `last` missed.
    pub(super) fn subscribe(
        &self,
        last: Option<u64>,
    ) -> (tokio::sync::broadcast::Receiver<Change>, CatchUp) {
        let Ok(ring) = self.ring.lock() else {
            return (self.tx.subscribe(), CatchUp::Reload);
        };
        let rx = self.tx.subscribe();
        let catch_up = match last {
            None => CatchUp::Missed(Vec::new()),
            Some(last) if last >= ring.next => CatchUp::Reload,
            Some(last) => {
                let oldest = ring.kept.front().map_or(ring.next, |c| c.id);
                if last + 1 < oldest {
                    CatchUp::Reload
                } else {
                    CatchUp::Missed(ring.kept.iter().filter(|c| c.id > last).cloned().collect())
                }
            }
        };
        (rx, catch_up)
    }

    /// Follows squadd, or the files while it is down, on a thread of its
    /// own, for as long as the process runs.
    pub(super) fn start(&self, root: PathBuf) {
        let feed = self.clone();
        std::thread::spawn(move || follow(&root, &feed));
    }
}

/// How long a file-watching feed waits before asking whether squadd is
/// back (when no file changes meanwhile).
const RETRY: Duration = Duration::from_secs(2);

/// How long after a file change more changes are taken as the same one
/// (a write and its rename), well inside the pages' 100 ms.
const COALESCE: Duration = Duration::from_millis(25);

fn follow(root: &std::path::Path, feed: &Feed) {
    let mut was_up = None;
    loop {
        let follow = Client::connect(root, Duration::from_secs(2)).and_then(|mut c| {
            c.send(Method::Events { follow: true })?;
            c.set_read_timeout(None)?;
            Ok(c)
        });
        if let Ok(mut c) = follow {
            if was_up != Some(true) {
                feed.publish("squadd-up", None);
            }
            was_up = Some(true);
            while let Ok(Some(v)) = c.read() {
                let kind = v
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or("event")
                    .to_string();
                let session = v
                    .get("session")
                    .and_then(|s| s.as_str())
                    .map(str::to_string);
                feed.publish(&kind, session);
            }
        }
        if was_up != Some(false) {
            feed.publish("squadd-down", None);
        }
        was_up = Some(false);
        watch_files(root, feed);
    }
}

/// Publishes a `changed` per change under `.squad/sessions` until squadd
/// answers again (asked every [`RETRY`] and after each change).
fn watch_files(root: &std::path::Path, feed: &Feed) {
    use notify::Watcher;
    let (tx, rx) = std::sync::mpsc::channel::<Option<String>>();
    let sessions = crate::root::fs_path(root)
        .join(squad_protocol::tree::SQUAD_DIR)
        .join("sessions");
    // Events name absolute paths: the session is the first component
    // under the directory's real path.
    let base = std::fs::canonicalize(&sessions).unwrap_or_else(|_| sessions.clone());
    let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        use notify::EventKind as K;
        use notify::event::{AccessKind, AccessMode, ModifyKind};
        let Ok(e) = e else { return };
        let changed = match e.kind {
            K::Create(_) | K::Remove(_) => true,
            K::Modify(ModifyKind::Metadata(_)) => false,
            K::Modify(_) => true,
            K::Access(AccessKind::Close(AccessMode::Write)) => true,
            _ => false,
        };
        if changed {
            let session = e.paths.first().and_then(|p| {
                p.strip_prefix(&base)
                    .ok()?
                    .components()
                    .next()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
            });
            let _ = tx.send(session);
        }
    });
    let mut watcher = watcher.ok();
    if let Some(w) = watcher.as_mut() {
        let _ = w.watch(&sessions, notify::RecursiveMode::Recursive);
    }
    loop {
        match rx.recv_timeout(RETRY) {
            Ok(session) => {
                // One change often comes as several events (write, rename):
                // those within COALESCE of each other go out as one.
                let mut last = session;
                let until = std::time::Instant::now() + COALESCE;
                while let Ok(s) =
                    rx.recv_timeout(until.saturating_duration_since(std::time::Instant::now()))
                {
                    last = s;
                }
                feed.publish("changed", last);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // No watcher: only squadd's return can wake the pages.
                // Stays: a timed wait for squadd, with nothing to watch.
                std::thread::sleep(RETRY);
            }
        }
        if Client::connect(root, Duration::from_millis(200)).is_ok() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reconnect_gets_what_it_missed_or_a_reload() {
        let feed = Feed::new();
        for _ in 0..3 {
            feed.publish("task-ready", Some("s".into()));
        }
        let ids = |c: CatchUp| match c {
            CatchUp::Missed(v) => v.iter().map(|c| c.id).collect::<Vec<_>>(),
            CatchUp::Reload => vec![0],
        };
        assert_eq!(ids(feed.subscribe(Some(1)).1), vec![2, 3]);
        assert_eq!(ids(feed.subscribe(Some(3)).1), Vec::<u64>::new());
        assert_eq!(ids(feed.subscribe(None).1), Vec::<u64>::new());
        // An id of another start (higher than any here): reload.
        assert_eq!(feed.subscribe(Some(99)).1, CatchUp::Reload);
        for _ in 0..RING {
            feed.publish("changed", None);
        }
        assert_eq!(feed.subscribe(Some(1)).1, CatchUp::Reload);
    }
}
