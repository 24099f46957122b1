//! The directory watcher behind [`super::Intake`]: on Linux squadd's own
//! inotify reader, elsewhere the `notify` crate's recommended watcher. Both
//! hand the same `notify::Event`s to the same handler.
//!
//! Why not `notify` on Linux too: it watches every directory for `IN_OPEN`
//! as well, and squadd never wants an open (a read is not a change). Every
//! file squadd (or an agent) opened in a watched directory woke the
//! watcher thread for nothing: squadd's own read of a progress update, its
//! status re-read, the lock, the directory walks of its safe writes. In
//! the growth benchmark the thread woke ~22 times per update (~12 without
//! opens), competing for the CPU with the loop that writes the status
//! (docs/performance.md, "Growth: the watcher's wake-ups").

use super::Notification;

#[cfg(not(target_os = "linux"))]
pub(crate) use self::portable::Watcher;

/// How often the polling fallback looks at the watched directories.
#[cfg(target_os = "linux")]
pub(crate) const POLL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(2);

/// The directory watcher on Linux: squadd's inotify reader, or, when the
/// kernel gives this user no more inotify instances (EMFILE from
/// `inotify_init1`: `fs.inotify.max_user_instances`, 128 by default, is
/// shared by every program of the user: editors, IDEs, other daemons), the
/// `notify` crate's polling watcher, which looks at every watched directory
/// each [`POLL_INTERVAL`]. squadd then starts and works, later by up to the
/// interval, instead of refusing to start; `health` and `status` say so.
#[cfg(target_os = "linux")]
pub(crate) enum Watcher {
    /// The kernel reports changes.
    Inotify(linux::Watcher),
    /// No inotify instance could be had: polling, and why.
    Polling(notify::PollWatcher, String),
}

#[cfg(target_os = "linux")]
impl Watcher {
    /// Starts watching; `handler` gets every notification.
    pub(crate) fn start(
        handler: impl FnMut(Notification) + Send + 'static,
    ) -> notify::Result<Watcher> {
        Watcher::start_on(inotify::Inotify::init(), handler)
    }

    /// [`Watcher::start`] with the result of `inotify_init1` given (tests
    /// give it the kernel's refusal).
    pub(crate) fn start_on(
        inotify: std::io::Result<inotify::Inotify>,
        handler: impl FnMut(Notification) + Send + 'static,
    ) -> notify::Result<Watcher> {
        match inotify {
            Ok(inotify) => linux::Watcher::start(inotify, handler).map(Watcher::Inotify),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                let config = notify::Config::default().with_poll_interval(POLL_INTERVAL);
                let why = instances_exhausted(&e);
                notify::PollWatcher::new(handler, config).map(|w| Watcher::Polling(w, why))
            }
            Err(e) => Err(notify::Error::io(e)),
        }
    }

    /// Watches the directory at `path` (its entries, not below).
    pub(crate) fn watch(&mut self, path: &std::path::Path) -> notify::Result<()> {
        use notify::Watcher as _;
        match self {
            Watcher::Inotify(w) => w.watch(path),
            Watcher::Polling(w, _) => w.watch(path, notify::RecursiveMode::NonRecursive),
        }
    }

    /// Stops watching `path`.
    pub(crate) fn unwatch(&mut self, path: &std::path::Path) -> notify::Result<()> {
        use notify::Watcher as _;
        match self {
            Watcher::Inotify(w) => w.unwatch(path),
            Watcher::Polling(w, _) => w.unwatch(path),
        }
    }

    /// Why squadd polls instead of being told of changes, when it does.
    pub(crate) fn polling(&self) -> Option<&str> {
        match self {
            Watcher::Inotify(_) => None,
            Watcher::Polling(_, why) => Some(why),
        }
    }
}

/// What to tell a user whose inotify instances are used up (the kernel
/// says EMFILE, "Too many open files", which sends people to `ulimit -n`).
#[cfg(target_os = "linux")]
fn instances_exhausted(e: &std::io::Error) -> String {
    let max = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .map_or_else(String::new, |m| format!(", now {}", m.trim()));
    format!(
        "no inotify instance could be had ({e}): this user's programs hold fs.inotify.max_user_instances of them{max} (or squadd is at its open-file limit); polling every {}s instead; raise it with `sudo sysctl fs.inotify.max_user_instances=1024` (persist in /etc/sysctl.d/)",
        POLL_INTERVAL.as_secs()
    )
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Notification;
    use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
    use notify::event::{
        AccessKind, AccessMode, CreateKind, DataChange, EventKind, Flag, MetadataKind, ModifyKind,
        RemoveKind, RenameMode,
    };
    use std::collections::HashMap;
    use std::ffi::OsStr;
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::thread::JoinHandle;

    /// What squadd asks the kernel to report of a watched directory: every
    /// change, no opens and no reads (`IN_OPEN`, `IN_ACCESS`,
    /// `IN_CLOSE_NOWRITE` are left out).
    const MASK: WatchMask = WatchMask::ATTRIB
        .union(WatchMask::CREATE)
        .union(WatchMask::DELETE)
        .union(WatchMask::CLOSE_WRITE)
        .union(WatchMask::MODIFY)
        .union(WatchMask::MOVED_FROM)
        .union(WatchMask::MOVED_TO)
        .union(WatchMask::DELETE_SELF)
        .union(WatchMask::MOVE_SELF);

    /// The watches, by descriptor (the reader names paths by it) and by
    /// path (`unwatch`). Locked by the reader for each batch of events, so
    /// a watch added is in the table before its first event is named.
    #[derive(Default)]
    struct Table {
        paths: HashMap<i32, PathBuf>,
        watches: HashMap<PathBuf, WatchDescriptor>,
    }

    impl Table {
        fn forget(&mut self, path: &Path) -> Option<WatchDescriptor> {
            let wd = self.watches.remove(path)?;
            self.paths.remove(&wd.get_watch_descriptor_id());
            Some(wd)
        }
    }

    /// An inotify instance and the thread that reads it.
    pub(crate) struct Watcher {
        watches: Watches,
        table: Arc<Mutex<Table>>,
        /// Written to on drop: wakes the reader to stop.
        stop: UnixStream,
        /// Set on drop: a reader busy with a flood of events stops between
        /// two reads, not once the kernel's queue is empty.
        stopping: Arc<AtomicBool>,
        reader: Option<JoinHandle<()>>,
    }

    impl Watcher {
        /// Starts the reader thread of `inotify`; `handler` gets every
        /// notification.
        pub(crate) fn start(
            inotify: Inotify,
            mut handler: impl FnMut(Notification) + Send + 'static,
        ) -> notify::Result<Watcher> {
            let watches = inotify.watches();
            let table = Arc::new(Mutex::new(Table::default()));
            let (stop, stopped) = UnixStream::pair().map_err(notify::Error::io)?;
            let reader_table = Arc::clone(&table);
            let stopping = Arc::new(AtomicBool::new(false));
            let reader_stopping = Arc::clone(&stopping);
            let reader = std::thread::Builder::new()
                .name("squadd-watcher".into())
                .spawn(move || {
                    let stop = Stop {
                        socket: &stopped,
                        flag: &reader_stopping,
                    };
                    read(inotify, &reader_table, &stop, &mut handler);
                })
                .map_err(notify::Error::io)?;
            Ok(Watcher {
                watches,
                table,
                stop,
                stopping,
                reader: Some(reader),
            })
        }

        /// Watches the directory at `path` (its entries, not below).
        pub(crate) fn watch(&mut self, path: &Path) -> notify::Result<()> {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            let wd = self.watches.add(path, MASK).map_err(|e| {
                let error = match e.raw_os_error() {
                    Some(libc::ENOSPC) => notify::Error::new(notify::ErrorKind::MaxFilesWatch),
                    Some(libc::ENOENT) => notify::Error::path_not_found(),
                    _ => notify::Error::io(e),
                };
                error.add_path(path.to_path_buf())
            })?;
            // The same directory under another path shares the descriptor:
            // events are named by the path watched last (as `notify` does).
            table
                .paths
                .insert(wd.get_watch_descriptor_id(), path.to_path_buf());
            table.watches.insert(path.to_path_buf(), wd);
            Ok(())
        }

        /// Stops watching `path`.
        pub(crate) fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
            let wd = self
                .table
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .forget(path)
                .ok_or_else(|| notify::Error::watch_not_found().add_path(path.to_path_buf()))?;
            // The kernel may have dropped it already (the directory went).
            let _ = self.watches.remove(wd);
            Ok(())
        }
    }

    impl Drop for Watcher {
        fn drop(&mut self) {
            use std::io::Write;
            self.stopping.store(true, Ordering::Release);
            let _ = (&self.stop).write_all(&[1]);
            if let Some(reader) = self.reader.take() {
                let _ = reader.join();
            }
        }
    }

    /// The reader thread: waits for events (or the stop), reads every event
    /// queued, names each by its watch and hands it on.
    fn read(
        mut inotify: Inotify,
        table: &Mutex<Table>,
        stop: &Stop<'_>,
        handler: &mut dyn FnMut(Notification),
    ) {
        // Room for a few hundred events per read (an event with a name of
        // up to 255 bytes is at most 272 bytes).
        let mut buffer = vec![0u8; 64 * 1024];
        let mut watches = inotify.watches();
        loop {
            match wait(&inotify, stop.socket) {
                Ok(Woken::Stop) => return,
                Ok(Woken::Events) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    failed(e, stop, handler);
                    continue;
                }
            }
            loop {
                if stop.asked() {
                    return;
                }
                let events = match inotify.read_events(&mut buffer) {
                    Ok(events) => events,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        failed(e, stop, handler);
                        break;
                    }
                };
                let mut table = table.lock().unwrap_or_else(PoisonError::into_inner);
                let mut read = 0usize;
                for event in events {
                    read += 1;
                    deliver(
                        &mut table,
                        &mut watches,
                        event.wd.get_watch_descriptor_id(),
                        event.mask,
                        event.name,
                        handler,
                    );
                }
                drop(table);
                if read == 0 {
                    break;
                }
            }
        }
    }

    /// A wait or a read failed: reported (squadd rescans), then waited out
    /// unless stopping, so a failure that lasts is not a busy loop.
    fn failed(e: io::Error, stop: &Stop<'_>, handler: &mut dyn FnMut(Notification)) {
        handler(Err(notify::Error::io(e)));
        if !stop.asked() {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }

    /// How the reader is told to stop: the socket wakes it from its wait,
    /// the flag stops it between two reads.
    struct Stop<'a> {
        socket: &'a UnixStream,
        flag: &'a AtomicBool,
    }

    impl Stop<'_> {
        fn asked(&self) -> bool {
            self.flag.load(Ordering::Acquire)
        }
    }

    /// Why the reader woke.
    enum Woken {
        Events,
        Stop,
    }

    /// Blocks until the inotify descriptor is readable or the stop socket
    /// is (written to, or its other end dropped).
    fn wait(inotify: &Inotify, stopped: &UnixStream) -> io::Result<Woken> {
        let mut fds = [
            libc::pollfd {
                fd: inotify.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stopped.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the call's
        // duration, and both descriptors are open (owned by the caller).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if fds[1].revents != 0 {
            return Ok(Woken::Stop);
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
            return Err(io::Error::other("the inotify descriptor failed"));
        }
        Ok(Woken::Events)
    }

    /// One kernel event: the table kept in step (watches the kernel dropped,
    /// directories moved or deleted away) and its notifications handed on.
    fn deliver(
        table: &mut Table,
        watches: &mut Watches,
        wd: i32,
        mask: EventMask,
        name: Option<&OsStr>,
        handler: &mut dyn FnMut(Notification),
    ) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            handler(Ok(
                notify::Event::new(EventKind::Other).set_flag(Flag::Rescan)
            ));
        }
        let Some(dir) = table.paths.get(&wd) else {
            // A watch removed while its events were queued.
            return;
        };
        let path = match name {
            Some(name) => dir.join(name),
            None => dir.clone(),
        };
        if mask.contains(EventMask::IGNORED) {
            // The kernel dropped the watch (its directory is gone, or
            // `unwatch` removed it): forgotten unless the path is watched
            // anew under another descriptor.
            if table
                .watches
                .get(&path)
                .is_some_and(|w| w.get_watch_descriptor_id() == wd)
            {
                table.forget(&path);
            }
            table.paths.remove(&wd);
            return;
        }
        // A watched directory moved or deleted out of a watched one: its
        // watches (and those below it) go, as with `notify`, so a directory
        // created at the same path later is watched afresh.
        if mask.intersects(EventMask::MOVED_FROM | EventMask::DELETE)
            && table.watches.contains_key(&path)
        {
            let below: Vec<PathBuf> = table
                .watches
                .keys()
                .filter(|p| p.starts_with(&path))
                .cloned()
                .collect();
            for p in below {
                if let Some(wd) = table.forget(&p) {
                    // Gone already when deleted; a moved one is dropped.
                    let _ = watches.remove(wd);
                }
            }
        }
        for kind in kinds(mask) {
            handler(Ok(notify::Event::new(kind).add_path(path.clone())));
        }
    }

    /// The `notify` event kinds of a kernel event's mask, one per change it
    /// reports (a rename is reported as its two halves, `From` and `To`,
    /// each with its own path).
    fn kinds(mask: EventMask) -> Vec<EventKind> {
        let folder = mask.contains(EventMask::ISDIR);
        let mut kinds = Vec::new();
        if mask.contains(EventMask::MOVED_FROM) || mask.contains(EventMask::MOVE_SELF) {
            kinds.push(EventKind::Modify(ModifyKind::Name(RenameMode::From)));
        }
        if mask.contains(EventMask::MOVED_TO) {
            kinds.push(EventKind::Modify(ModifyKind::Name(RenameMode::To)));
        }
        if mask.contains(EventMask::CREATE) {
            kinds.push(EventKind::Create(if folder {
                CreateKind::Folder
            } else {
                CreateKind::File
            }));
        }
        if mask.contains(EventMask::DELETE) {
            kinds.push(EventKind::Remove(if folder {
                RemoveKind::Folder
            } else {
                RemoveKind::File
            }));
        }
        if mask.contains(EventMask::DELETE_SELF) {
            kinds.push(EventKind::Remove(RemoveKind::Folder));
        }
        if mask.contains(EventMask::MODIFY) {
            kinds.push(EventKind::Modify(ModifyKind::Data(DataChange::Any)));
        }
        if mask.contains(EventMask::CLOSE_WRITE) {
            kinds.push(EventKind::Access(AccessKind::Close(AccessMode::Write)));
        }
        if mask.contains(EventMask::ATTRIB) {
            kinds.push(EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)));
        }
        kinds
    }
}

#[cfg(not(target_os = "linux"))]
mod portable {
    use super::Notification;
    use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
    use std::path::Path;

    /// The `notify` crate's watcher for this platform.
    pub(crate) struct Watcher(RecommendedWatcher);

    impl Watcher {
        /// Starts the watcher; `handler` gets every notification.
        pub(crate) fn start(
            handler: impl FnMut(Notification) + Send + 'static,
        ) -> notify::Result<Watcher> {
            notify::recommended_watcher(handler).map(Watcher)
        }

        /// Watches the directory at `path` (its entries, not below).
        pub(crate) fn watch(&mut self, path: &Path) -> notify::Result<()> {
            self.0.watch(path, RecursiveMode::NonRecursive)
        }

        /// Stops watching `path`.
        pub(crate) fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
            self.0.unwatch(path)
        }
    }
}
