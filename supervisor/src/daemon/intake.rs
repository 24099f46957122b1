//! Watching and event intake: the watches squadd holds, the paths the watcher
//! reported that are waiting to settle, and what a changed path means
//! ([`super::core::paths::classify`]). Nothing here reads a protocol file.

use super::StartError;
use notify::EventKind as FsKind;
use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use watcher::Watcher;

/// How long a file written in place may keep changing before it is read
/// anyway. Renames, closes after writing and deletions are handled at once;
/// only bare modifications wait, and never longer than this.
const SETTLE: Duration = Duration::from_millis(3);

/// The most watcher notifications held in memory waiting for squadd. The
/// watcher thread reads the kernel's queue as fast as it fills, so a burst
/// that squadd cannot keep up with would otherwise pile up in memory (a
/// 50,000-message burst held a quarter of a million events); past this the
/// notifications are dropped and one rescan stands for them, as the
/// kernel's own queue does at `fs.inotify.max_queued_events`.
/// `SQUADD_MAX_QUEUED=N` lowers it, so that tests can reach the overflow
/// path without a burst of this size.
pub(crate) const MAX_QUEUED: usize = 16_384;

/// [`MAX_QUEUED`], or `SQUADD_MAX_QUEUED` when set to a positive number.
fn max_queued() -> usize {
    std::env::var("SQUADD_MAX_QUEUED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(MAX_QUEUED)
}

/// What the watcher sends.
pub(crate) type Notification = notify::Result<notify::Event>;

/// The watches and the paths waiting to be read.
pub(crate) struct Intake {
    watcher: Watcher,
    /// Watched directories, with the identity (device, inode) each had when watched: a watch
    /// follows its directory, so one replaced at the same path (`squadctl
    /// import` swaps `.squad/`) is watched again (see [`Intake::watch`]).
    watched: BTreeMap<PathBuf, (u64, u64)>,
    pending: HashMap<PathBuf, Instant>,
    /// The roots, for the watcher thread's filter.
    followed: Followed,
    queue: Arc<AtomicUsize>,
    /// Set when notifications were dropped (see [`MAX_QUEUED`]) until the
    /// rescan that stands for them is taken.
    overflow: Arc<AtomicBool>,
    /// Unreadable files and how many times each was read again.
    unreadable: HashMap<PathBuf, u32>,
    /// Indexed files found gone, with the moment their removal counts if
    /// they are still gone then (see [`Intake::vanished`]).
    vanished: HashMap<PathBuf, Instant>,
    /// Directories that could not be watched (the inotify limit), retried
    /// with backoff and polled meanwhile ([`Intake::poll_unwatched`]).
    unwatched: BTreeSet<PathBuf>,
    /// What each unwatched directory held when last looked at.
    listings: HashMap<PathBuf, Listing>,
    /// The unwatched directory the last poll ended with (the next one
    /// starts after it: a poll over budget leaves the rest for the next).
    poll_cursor: Option<PathBuf>,
    /// The next retry's delay.
    rewatch_after: Duration,
    /// When the next retry of unwatched directories is due (none: at once).
    next_rewatch: Option<Instant>,
    /// At most this many watches (`SQUADD_MAX_WATCHES`): a share of the
    /// per-user inotify limit for squadd, which behaves as the limit does.
    max_watches: Option<usize>,
}

/// How long an indexed file that was found gone is given to come back
/// before its removal counts. Replacing a file is often a removal and a
/// create: `git checkout` unlinks and creates, vim and Emacs rename the
/// file aside and write it anew. Read in between, such a save was a
/// `file-removed` (its task gone, ready again, notified again) and then a
/// new file: a file that is back within this is a change, not a removal.
pub(crate) const REMOVAL_GRACE: Duration = Duration::from_millis(250);

/// How often directories that could not be watched (the watch limit) are
/// looked at for changes, until they are watched again.
pub(crate) const POLL_UNWATCHED: Duration = Duration::from_secs(2);

/// The most directory entries one poll of unwatched directories looks at
/// (one `lstat` each): a poll that reaches it leaves the directories after
/// the last one it listed to the next poll, round-robin, so that the cost
/// of a poll is bounded however many directories went unwatched.
pub(crate) const POLL_BUDGET: usize = 20_000;

/// What a directory entry looked like: inode, change time, modification
/// time and size. Any write, rename over, `chmod` or replacement changes
/// one of them.
type Stamp = (u64, i64, i64, i64, i64, u64);

/// An unwatched directory's entries, by name.
type Listing = HashMap<std::ffi::OsString, Stamp>;

/// Lists `dir` with a stamp for each entry (not following symlinks);
/// `None` when it cannot be listed.
fn list(dir: &Path) -> Option<Listing> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut out = Listing::new();
    for e in entries.flatten() {
        // An entry gone between the listing and its stat is left out: its
        // removal is seen as one.
        if let Ok(m) = std::fs::symlink_metadata(e.path()) {
            let stamp = (
                m.ino(),
                m.ctime(),
                m.ctime_nsec(),
                m.mtime(),
                m.mtime_nsec(),
                m.size(),
            );
            out.insert(e.file_name(), stamp);
        }
    }
    Some(out)
}

/// The first retry of unwatched directories comes after this; each retry
/// that leaves some unwatched doubles it, up to [`REWATCH_MAX`].
pub(crate) const REWATCH_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between retries of unwatched directories.
pub(crate) const REWATCH_MAX: Duration = Duration::from_secs(60);

/// How many times an unreadable file is read again (after 1 s, 2 s, 4 s …
/// 64 s) before squadd waits for its next event. A permission change is an
/// attribute event and is read at once; the retries cover what no event
/// announces (an ACL or a parent directory's permission fixed).
pub(crate) const UNREADABLE_RETRIES: u32 = 7;

/// A directory's (device, inode): what a watch follows.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A read or an open: nothing changed (a close after writing is not one).
fn is_read(kind: &FsKind) -> bool {
    matches!(kind, FsKind::Access(a) if !matches!(a, AccessKind::Close(AccessMode::Write)))
}

/// Whether a changed entry's name is a writer's temporary: a hidden name
/// with an extension after the leading dot (`.msg_1.partial`, `.x.swp`,
/// squadd's own `.x.tmp.<pid>.<n>`). Nothing squadd follows is named so:
/// the dot directories it follows (`.squad`, `.ai-team`, `.claude`,
/// `.github`, `.copilot`, `.agents`) have no extension, and [`super::core::paths::classify`]
/// ignores hidden session directories and temporaries.
pub(crate) fn is_temporary(name: &OsStr) -> bool {
    let Some(rest) = name.as_bytes().strip_prefix(b".") else {
        return false;
    };
    rest.iter()
        .position(|b| *b == b'.')
        .is_some_and(|i| i > 0 && i + 1 < rest.len())
}

/// Notifications the watcher thread drops before they count against
/// [`MAX_QUEUED`]: reads (squadd's own included; `note` ignores them, and a
/// rescan reads every file, so counting them made a rescan of a large
/// session overflow the queue again, one rescan after another for ever),
/// and changes of temporaries only (a writer's `.x.partial` and squadd's
/// own `.x.tmp.*` are two or three of every message's notifications: a
/// burst overflowed at a third of its real changes). A rename from a
/// temporary to a real name is kept by the half naming the real file (or,
/// from `notify`, the event carrying both paths); a rescan request carries
/// none and is kept.
fn droppable(e: &notify::Event) -> bool {
    is_read(&e.kind)
        || (!e.need_rescan()
            && !e.paths.is_empty()
            && e.paths
                .iter()
                .all(|p| p.file_name().is_some_and(is_temporary)))
}

/// The roots squadd supervises, as (directory, sessions directory), shared
/// with the watcher thread: it drops notifications of paths under a root
/// that squadd does not follow ([`super::core::paths::follows`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Followed(Arc<RwLock<Vec<(PathBuf, PathBuf)>>>);

impl Followed {
    /// Whether every path of `e` is under a root and followed by none
    /// (the innermost root decides, as [`super::roots::Roots::of`] picks
    /// it). A path outside every root is kept (skills outside the
    /// project), and so is a notification without paths (a rescan).
    fn ignores(&self, e: &notify::Event) -> bool {
        if e.need_rescan() || e.paths.is_empty() {
            return false;
        }
        // A poisoned lock only means a panic elsewhere: keep everything.
        let Ok(roots) = self.0.read() else {
            return false;
        };
        e.paths.iter().all(|p| {
            roots
                .iter()
                .filter(|(root, _)| p.starts_with(root))
                .max_by_key(|(root, _)| root.components().count())
                .is_some_and(|(root, sessions)| !super::core::paths::follows(root, sessions, p))
        })
    }
}

/// What one notification asks for beyond reading paths.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Noted {
    /// Paths were queued (or nothing to do).
    Queued,
    /// The watcher failed: report it and rescan every root.
    Failed(String),
    /// The watcher lost events under these paths (every root when empty).
    Rescan(Vec<PathBuf>),
}

/// A watch error with what to do about the inotify limit.
pub(crate) fn watch_error_hint(e: &notify::Error) -> String {
    WatchError::from(e).to_string()
}

/// Why a directory could not be watched, or the watcher failed: the
/// watcher's message, with how to fix a full watch table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WatchError {
    /// The inotify watch limit is reached.
    #[error(
        "{0}: the inotify watch limit is reached; raise it with `sudo sysctl fs.inotify.max_user_watches=524288` (persist in /etc/sysctl.d/)"
    )]
    Limit(String),
    /// The kernel refused a watch with ENOSPC (the same limit, as older
    /// kernels report it).
    #[error(
        "{0}: the inotify watch limit is reached (ENOSPC); raise it with `sudo sysctl fs.inotify.max_user_watches=524288`"
    )]
    NoSpace(String),
    /// Anything else the watcher reported.
    #[error("{0}")]
    Other(String),
}

impl From<&notify::Error> for WatchError {
    fn from(e: &notify::Error) -> WatchError {
        match &e.kind {
            notify::ErrorKind::MaxFilesWatch => WatchError::Limit(e.to_string()),
            notify::ErrorKind::Io(io) if io.raw_os_error() == Some(libc::ENOSPC) => {
                WatchError::NoSpace(e.to_string())
            }
            _ => WatchError::Other(e.to_string()),
        }
    }
}

impl Intake {
    /// Starts the watcher; notifications arrive on the returned channel.
    pub(crate) fn start() -> Result<(Intake, mpsc::UnboundedReceiver<Notification>), StartError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let queue = Arc::new(AtomicUsize::new(0));
        let queue_in = queue.clone();
        let overflow = Arc::new(AtomicBool::new(false));
        let overflow_in = overflow.clone();
        let max_queued = max_queued();
        let followed = Followed::default();
        let followed_in = followed.clone();
        let watcher = Watcher::start(move |res: Notification| {
            // Reads, temporaries and what squadd does not follow are
            // dropped before they count against the cap (see `droppable`,
            // `Followed::ignores`).
            if res
                .as_ref()
                .is_ok_and(|e| droppable(e) || followed_in.ignores(e))
            {
                return;
            }
            if queue_in.load(Ordering::Relaxed) >= max_queued {
                if !overflow_in.swap(true, Ordering::AcqRel) {
                    queue_in.fetch_add(1, Ordering::Relaxed);
                    let rescan =
                        notify::Event::new(FsKind::Other).set_flag(notify::event::Flag::Rescan);
                    let _ = tx.send(Ok(rescan));
                }
                return;
            }
            queue_in.fetch_add(1, Ordering::Relaxed);
            let _ = tx.send(res);
        })
        .map_err(|e| StartError::Watch(watch_error_hint(&e)))?;
        Ok((
            Intake {
                watcher,
                watched: BTreeMap::new(),
                pending: HashMap::new(),
                followed,
                queue,
                overflow,
                unreadable: HashMap::new(),
                vanished: HashMap::new(),
                unwatched: BTreeSet::new(),
                listings: HashMap::new(),
                poll_cursor: None,
                rewatch_after: REWATCH_FIRST,
                next_rewatch: None,
                max_watches: std::env::var("SQUADD_MAX_WATCHES")
                    .ok()
                    .and_then(|v| v.trim().parse().ok()),
            },
            rx,
        ))
    }

    /// Has the watcher thread drop the notifications of paths under `root`
    /// that squadd does not follow (see [`Followed`]).
    pub(crate) fn follow_root(&self, root: &Path, sessions_dir: &Path) {
        if let Ok(mut roots) = self.followed.0.write() {
            roots.push((root.to_path_buf(), sessions_dir.to_path_buf()));
        }
    }

    /// Watches a directory (non-recursively) unless it is watched already.
    /// A directory that cannot be watched (and exists) is remembered for
    /// [`Intake::rewatch`].
    pub(crate) fn watch(&mut self, path: &Path) -> Result<(), WatchError> {
        if self.watched.contains_key(path) {
            return Ok(());
        }
        let identity = identity(path);
        let result = if self
            .max_watches
            .is_some_and(|max| self.watched.len() >= max)
        {
            Err(WatchError::from(&notify::Error::new(
                notify::ErrorKind::MaxFilesWatch,
            )))
        } else {
            self.watcher.watch(path).map_err(|e| WatchError::from(&e))
        };
        match result {
            Ok(()) => {
                self.unwatched.remove(path);
                self.listings.remove(path);
                self.watched
                    .insert(path.to_path_buf(), identity.unwrap_or_default());
                Ok(())
            }
            Err(e) => {
                if path.is_dir() {
                    self.unwatched.insert(path.to_path_buf());
                    // What it holds now: what changes from here on is what
                    // a poll reports (the caller reads what is there).
                    if !self.listings.contains_key(path) {
                        let now = list(path).unwrap_or_default();
                        self.listings.insert(path.to_path_buf(), now);
                    }
                }
                Err(e)
            }
        }
    }

    /// Drops the watch of `path` when another directory stands there now
    /// (the watch stayed with the one moved away): the next
    /// [`Intake::watch`] of it watches the new one. Checked where a
    /// directory can be replaced whole (the root's own directories, the
    /// team's), not on every watch (a delivery re-watches its inbox).
    pub(crate) fn forget_if_replaced(&mut self, path: &Path) {
        let Some(held) = self.watched.get(path) else {
            return;
        };
        if identity(path).is_some_and(|now| now != *held) {
            self.watched.remove(path);
            let _ = self.watcher.unwatch(path);
        }
    }

    /// Why changes are polled for rather than reported, when they are: no
    /// inotify instance could be had (every directory is polled), or some
    /// directories could not be watched (those are).
    pub(crate) fn polling(&self) -> Option<String> {
        #[cfg(target_os = "linux")]
        if let Some(why) = self.watcher.polling() {
            return Some(why.to_string());
        }
        let n = self.unwatched.len();
        (n > 0).then(|| {
            let max = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
                .ok()
                .map_or_else(String::new, |m| format!(", now {}", m.trim()));
            format!(
                "{} could not be watched: this user's programs hold fs.inotify.max_user_watches watches{max}; polled every {}s (changes there seen up to that late) and watched again once watches are free; raise it with `sudo sysctl fs.inotify.max_user_watches=524288` (persist in /etc/sysctl.d/)",
                crate::text::count(n, "directory", "directories"),
                POLL_UNWATCHED.as_secs()
            )
        })
    }

    pub(crate) fn unwatched(&self) -> &BTreeSet<PathBuf> {
        &self.unwatched
    }

    /// Tries to watch the unwatched directories again; returns those now
    /// watched (directories that vanished are dropped). The delay before
    /// the next try doubles while some stay unwatched.
    pub(crate) fn rewatch(&mut self) -> Vec<PathBuf> {
        let pending: Vec<PathBuf> = std::mem::take(&mut self.unwatched).into_iter().collect();
        let mut restored = Vec::new();
        for path in pending {
            if !path.is_dir() {
                self.listings.remove(&path);
                continue;
            }
            if self.watch(&path).is_ok() {
                restored.push(path);
            }
        }
        self.rewatch_after = if self.unwatched.is_empty() {
            REWATCH_FIRST
        } else {
            (self.rewatch_after * 2).min(REWATCH_MAX)
        };
        self.next_rewatch = Some(super::timers::instant_after(
            Instant::now(),
            self.rewatch_after,
        ));
        restored
    }

    /// Whether the retry of unwatched directories is due (its back-off
    /// over); the polls between retries come every [`POLL_UNWATCHED`].
    pub(crate) fn rewatch_due(&self, now: Instant) -> bool {
        self.next_rewatch.is_none_or(|at| at <= now)
    }

    /// When the next poll or retry of unwatched directories is due.
    pub(crate) fn next_unwatched_turn(&self, now: Instant) -> Instant {
        let poll = super::timers::instant_after(now, POLL_UNWATCHED);
        self.next_rewatch.map_or(poll, |at| at.min(poll))
    }

    /// Looks at the unwatched directories for what changed since the last
    /// look (an entry added, removed, or with another inode, times or size)
    /// and queues those paths as a watch would have reported them; returns
    /// how many. At most [`POLL_BUDGET`] entries a poll: the directories
    /// after the last one listed wait for the next poll.
    pub(crate) fn poll_unwatched(&mut self, now: Instant) -> usize {
        let all: Vec<PathBuf> = self.unwatched.iter().cloned().collect();
        // Round-robin: those after the last directory listed come first.
        let start = self
            .poll_cursor
            .as_ref()
            .map_or(0, |c| all.partition_point(|p| p <= c));
        let order = all[start..].iter().chain(&all[..start]);
        let mut budget = POLL_BUDGET;
        let mut changed = Vec::new();
        for dir in order {
            if budget == 0 {
                break;
            }
            // Gone or unreadable: what its parent's watch or poll reports.
            let Some(now_held) = list(dir) else {
                continue;
            };
            budget = budget.saturating_sub(now_held.len().max(1));
            let before = self.listings.remove(dir).unwrap_or_default();
            for (name, stamp) in &now_held {
                if before.get(name) != Some(stamp) {
                    changed.push(dir.join(name));
                }
            }
            for name in before.keys() {
                if !now_held.contains_key(name) {
                    changed.push(dir.join(name));
                }
            }
            self.listings.insert(dir.clone(), now_held);
            self.poll_cursor = Some(dir.clone());
        }
        let n = changed.len();
        for path in changed {
            self.retry(path, now);
        }
        n
    }

    /// How long until the next [`Intake::rewatch`].
    pub(crate) fn rewatch_delay(&self) -> Duration {
        self.rewatch_after
    }

    /// Stops watching a directory.
    pub(crate) fn unwatch(&mut self, path: &Path) {
        if self.watched.remove(path).is_some() {
            // The kernel drops watches of deleted directories itself.
            let _ = self.watcher.unwatch(path);
        }
    }

    /// Stops watching `dir` and everything under it (a session that went:
    /// its inbox watches go with it, also when it was moved rather than
    /// deleted).
    pub(crate) fn unwatch_under(&mut self, dir: &Path) {
        let under: Vec<PathBuf> = self
            .watched
            .keys()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        for p in under {
            self.unwatch(&p);
        }
        self.unreadable.retain(|p, _| !p.starts_with(dir));
        self.unwatched.retain(|p| !p.starts_with(dir));
        self.listings.retain(|p, _| !p.starts_with(dir));
        self.vanished.retain(|p, _| !p.starts_with(dir));
    }

    /// Forgets the watches under `prefix`: the kernel dropped them when the
    /// directory vanished, and a directory that comes back must be watched
    /// again.
    pub(crate) fn forget_under(&mut self, prefix: &Path) {
        self.watched.retain(|p, _| !p.starts_with(prefix));
        self.unwatched.retain(|p| !p.starts_with(prefix));
        self.listings.retain(|p, _| !p.starts_with(prefix));
    }

    /// Watches held.
    pub(crate) fn watch_count(&self) -> usize {
        self.watched.len()
    }

    /// Notifications and paths not processed yet.
    pub(crate) fn queue_depth(&self) -> usize {
        self.queue.load(Ordering::Relaxed) + self.pending.len()
    }

    /// Takes one watcher notification.
    pub(crate) fn note(&mut self, res: Notification, now: Instant) -> Noted {
        self.queue.fetch_sub(1, Ordering::Relaxed);
        let event = match res {
            Ok(e) => e,
            Err(e) => return Noted::Failed(watch_error_hint(&e)),
        };
        if event.need_rescan() {
            // Notifications after this one are queued again; the rescan
            // (after this batch) covers the ones dropped before it.
            self.overflow.store(false, Ordering::Release);
            return Noted::Rescan(event.paths);
        }
        let settle = match event.kind {
            // Our own reads (and everyone's) produce access events; only a
            // close after writing means a writer has finished.
            FsKind::Access(AccessKind::Close(AccessMode::Write)) => Duration::ZERO,
            FsKind::Access(_) => return Noted::Queued,
            // Attribute changes are events too: `chmod 644` makes an
            // unreadable file readable without touching its bytes. A file
            // whose bytes did not change is recognised by its fingerprint.
            FsKind::Modify(ModifyKind::Metadata(_)) => SETTLE,
            FsKind::Modify(ModifyKind::Data(_)) | FsKind::Create(CreateKind::File) => SETTLE,
            _ => Duration::ZERO,
        };
        let due = now + settle;
        for path in event.paths {
            self.pending
                .entry(path)
                .and_modify(|d| *d = (*d).min(due))
                .or_insert(due);
        }
        Noted::Queued
    }

    /// Queues `path` again, due at `at` (a read that failed for lack of
    /// file descriptors is retried, never recorded as the file's fault).
    pub(crate) fn retry(&mut self, path: PathBuf, at: Instant) {
        self.pending
            .entry(path)
            .and_modify(|d| *d = (*d).min(at))
            .or_insert(at);
    }

    /// A file was unreadable: queues it again after a backoff (1 s, 2 s,
    /// 4 s …), at most [`UNREADABLE_RETRIES`] times; false once exhausted.
    pub(crate) fn retry_unreadable(&mut self, path: &Path, now: Instant) -> bool {
        let tries = self.unreadable.entry(path.to_path_buf()).or_insert(0);
        if *tries >= UNREADABLE_RETRIES {
            return false;
        }
        let after = Duration::from_secs(1 << *tries);
        *tries += 1;
        self.retry(path.to_path_buf(), super::timers::instant_after(now, after));
        true
    }

    /// A file was read (or went): its unreadable retries end.
    pub(crate) fn readable(&mut self, path: &Path) {
        if !self.unreadable.is_empty() {
            self.unreadable.remove(path);
        }
    }

    /// An indexed file was found gone: true when it was found gone at least
    /// [`REMOVAL_GRACE`] ago and not seen since (its removal counts now);
    /// otherwise false, and it is read again when the grace is over (a file
    /// that is back by then, or whose create event comes first, is read as
    /// changed).
    pub(crate) fn vanished(&mut self, path: &Path, now: Instant) -> bool {
        match self.vanished.get(path) {
            Some(at) if *at <= now => {
                self.vanished.remove(path);
                true
            }
            // Read again in the meantime (another event, or squadd's
            // re-read of a status file before writing it): the read at the
            // deadline decides (queued again: this read may have taken it).
            Some(at) => {
                let at = *at;
                self.retry(path.to_path_buf(), at);
                false
            }
            None => {
                let at = now + REMOVAL_GRACE;
                self.vanished.insert(path.to_path_buf(), at);
                self.retry(path.to_path_buf(), at);
                false
            }
        }
    }

    /// When the removal of a file found gone counts, while squadd waits to
    /// see whether it comes back.
    pub(crate) fn vanishing(&self, path: &Path) -> Option<Instant> {
        self.vanished.get(path).copied()
    }

    /// A file was found present, or is not indexed any more (a rescan
    /// recorded its removal): no removal of it is waiting to be confirmed.
    pub(crate) fn clear_vanished(&mut self, path: &Path) {
        if !self.vanished.is_empty() {
            self.vanished.remove(path);
        }
    }

    /// When the next queued path settles.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.pending.values().min().copied()
    }

    /// Removes and returns the paths that settled by `now`.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<PathBuf> {
        let due: Vec<PathBuf> = self
            .pending
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for p in &due {
            self.pending.remove(p);
        }
        // A burst grew the table: give its room back once it is over (a
        // hash map never shrinks by itself).
        if self.pending.is_empty() && self.pending.capacity() > 1024 {
            self.pending = HashMap::new();
        }
        due
    }

    /// Session directory names under `sessions_dir` with paths still
    /// waiting (retention leaves such sessions alone).
    pub(crate) fn busy_sessions(&self, sessions_dir: &Path) -> BTreeSet<String> {
        self.pending
            .keys()
            .filter_map(|p| p.strip_prefix(sessions_dir).ok())
            .filter_map(|rel| rel.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect()
    }
}

// What a changed path means (`classify`, pure) is the core's
// (`core/paths.rs`); its tests stay with the watcher's here.
#[cfg(test)]
use super::core::paths::{PathChange, classify};

#[cfg(test)]
mod tests;
mod watcher;
