//! squadd's own files and directories, created and opened without following
//! symlinks.
//!
//! Every agent can write the project, so every agent could plant a symlink
//! where squadd writes (`.squad/run` → elsewhere, `squadd.pid` → any file).
//! Paths under a root are therefore never resolved by the kernel in one go:
//! [`Dir`] holds a directory file descriptor opened once from the root, and
//! each further component is opened with `openat(O_NOFOLLOW | O_DIRECTORY)`
//! (or created with `mkdirat`); files are created, renamed and removed
//! relative to that descriptor. A symlink (or any non-directory) where a
//! directory is expected, or a symlink where a file is expected, is refused
//! with an error naming the path.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// An open directory, reached from a root without following symlinks.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn cstr(name: &std::ffi::OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn refused(path: &Path, what: &str) -> io::Error {
    io::Error::other(format!(
        "{}: {what}; squadd never follows a link or writes through one in its own tree",
        path.display()
    ))
}

/// Whether an error is "the directory or file is not there".
pub(crate) fn is_missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl Dir {
    /// Opens a root directory. The root itself is the operator's choice
    /// (it may be reached through a link); everything below is not.
    pub(crate) fn open_root(root: &Path) -> io::Result<Dir> {
        // An empty path is the current directory (how squadctl names it).
        let at = if root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            root
        };
        let c = cstr(at.as_os_str())?;
        // SAFETY: a valid NUL-terminated path; the fd is owned at once.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Dir {
            // SAFETY: fd was just returned by open and is not owned elsewhere.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: root.to_path_buf(),
        })
    }

    /// The path this directory was reached by (for messages).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the subdirectory `name` (one component), refusing a link.
    pub(crate) fn open_dir(&self, name: &std::ffi::OsStr) -> io::Result<Dir> {
        let c = cstr(name)?;
        let path = self.path.join(name);
        // SAFETY: valid dirfd and NUL-terminated name; the fd is owned at once.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => refused(
                    &path,
                    "a link or a non-directory where a directory is expected",
                ),
                _ => e,
            });
        }
        Ok(Dir {
            // SAFETY: fd was just returned by openat and is not owned elsewhere.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path,
        })
    }

    /// Opens (creating with `mode` when missing) the subdirectory `name`.
    pub(crate) fn create_dir(&self, name: &std::ffi::OsStr, mode: u32) -> io::Result<Dir> {
        let c = cstr(name)?;
        // SAFETY: valid dirfd and NUL-terminated name.
        let r = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
        self.open_dir(name)
    }

    /// Walks `rel` (relative, plain components only) below this directory,
    /// creating missing directories with `mode` when given, else failing
    /// with NotFound: a directory that vanished is never recreated.
    pub(crate) fn walk(&self, rel: &Path, create: Option<u32>) -> io::Result<Dir> {
        let mut dir = Dir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        };
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(refused(&self.path.join(rel), "not a plain relative path"));
            };
            dir = match create {
                Some(mode) => dir.create_dir(name, mode)?,
                None => dir.open_dir(name)?,
            };
        }
        Ok(dir)
    }

    /// Opens the regular file `name` for writing (never through a link,
    /// never a FIFO or device: non-blocking, checked after opening).
    pub(crate) fn open_file(&self, name: &str, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let c = cstr(std::ffi::OsStr::new(name))?;
        let path = self.path.join(name);
        // SAFETY: valid dirfd and NUL-terminated name; the fd is owned at once.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => refused(&path, "a link where a file is expected"),
                _ => e,
            });
        }
        // SAFETY: fd was just returned by openat and is not owned elsewhere.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        if !file.metadata()?.is_file() {
            return Err(refused(&path, "not a regular file"));
        }
        Ok(file)
    }

    /// Writes `name` atomically (temporary file in this directory, fsync,
    /// `renameat`, fsync of the directory), created with `mode`.
    pub(crate) fn write_atomic(&self, name: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        self.write_atomic_unsynced(name, bytes, mode)?;
        self.sync()
    }

    /// [`Dir::write_atomic`] without the fsync of the directory: the file
    /// is complete on disk and replaces `name` whole, but the rename is
    /// durable only once the caller fsyncs this directory ([`Dir::sync`]).
    /// For group commits: many files of one directory, one directory fsync.
    pub(crate) fn write_atomic_unsynced(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
    ) -> io::Result<()> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = format!(".{name}.tmp.{}.{n}", std::process::id());
        let result = (|| {
            let mut f =
                self.open_file(&temp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            drop(f);
            self.rename(&temp, self, name)
        })();
        if result.is_err() {
            let _ = self.unlink(&temp);
        }
        result
    }

    /// `renameat(self/from, to_dir/to)`.
    pub(crate) fn rename(&self, from: &str, to_dir: &Dir, to: &str) -> io::Result<()> {
        self.rename_os(std::ffi::OsStr::new(from), to_dir, std::ffi::OsStr::new(to))
    }

    /// Renames `from` to `to` in `to_dir` only if `to` does not exist
    /// (`RENAME_NOREPLACE`): AlreadyExists otherwise.
    pub(crate) fn rename_noreplace(&self, from: &str, to_dir: &Dir, to: &str) -> io::Result<()> {
        self.rename_flags(
            std::ffi::OsStr::new(from),
            to_dir,
            std::ffi::OsStr::new(to),
            libc::RENAME_NOREPLACE,
        )
    }

    /// [`Dir::rename`] of names taken as bytes.
    fn rename_os(
        &self,
        from: &std::ffi::OsStr,
        to_dir: &Dir,
        to: &std::ffi::OsStr,
    ) -> io::Result<()> {
        self.rename_flags(from, to_dir, to, 0)
    }

    /// `renameat2` with `flags` (0: a plain `renameat`).
    fn rename_flags(
        &self,
        from: &std::ffi::OsStr,
        to_dir: &Dir,
        to: &std::ffi::OsStr,
        flags: libc::c_uint,
    ) -> io::Result<()> {
        let (f, t) = (cstr(from)?, cstr(to)?);
        // SAFETY: valid dirfds and NUL-terminated names.
        let r = unsafe {
            libc::renameat2(
                self.fd.as_raw_fd(),
                f.as_ptr(),
                to_dir.fd.as_raw_fd(),
                t.as_ptr(),
                flags,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes `to` a second name (a hard link) of the file `name`, both in
    /// this directory; a link at `name` is linked, never followed.
    pub(crate) fn link(&self, name: &str, to: &str) -> io::Result<()> {
        self.link_into(name, self, to)
    }

    /// Makes `to_dir/to` a second name (a hard link) of the file `name` of
    /// this directory: `EEXIST` when `to` exists (never replaced).
    pub(crate) fn link_into(&self, name: &str, to_dir: &Dir, to: &str) -> io::Result<()> {
        let (f, t) = (cstr(name.as_ref())?, cstr(to.as_ref())?);
        // SAFETY: valid dirfds and NUL-terminated names.
        let r = unsafe {
            libc::linkat(
                self.fd.as_raw_fd(),
                f.as_ptr(),
                to_dir.fd.as_raw_fd(),
                t.as_ptr(),
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the file (or link) `name` in this directory.
    pub(crate) fn unlink(&self, name: &str) -> io::Result<()> {
        self.unlinkat_os(std::ffi::OsStr::new(name), 0)
    }

    /// Whether `name` exists in this directory (as anything, links not followed).
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.stat(name).is_ok()
    }

    /// The names in this directory (not `.`/`..`), listed through the
    /// descriptor itself, never by re-resolving the path.
    pub(crate) fn names(&self) -> io::Result<Vec<String>> {
        // /proc/self/fd/N is the open directory, wherever its path leads now.
        let fd_path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        let mut out = Vec::new();
        for e in std::fs::read_dir(fd_path)? {
            out.push(e?.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }

    /// `lstat` of `name` in this directory (links not followed).
    pub(crate) fn stat(&self, name: &str) -> io::Result<libc::stat> {
        self.stat_os(std::ffi::OsStr::new(name))
    }

    /// Whether `name` is a real directory (not a link to one).
    pub(crate) fn is_dir(&self, name: &str) -> bool {
        self.stat(name).is_ok_and(|st| is_dir_mode(&st))
    }

    /// Removes `name` and everything below it, relative to descriptors all
    /// the way down: a link inside is removed, never followed, and nothing
    /// outside this directory can be reached by swapping a path.
    ///
    /// At most [`REMOVE_DEPTH`] descriptors are open at once however deep
    /// the tree: a directory deeper than that is first moved up to the top
    /// of the tree being removed (a rename within it) and removed by a
    /// later pass, so a tree deeper than the fd limit still goes entirely.
    /// Names are taken as bytes (never re-encoded), and an entry someone
    /// else removed meanwhile counts as removed.
    pub(crate) fn remove_tree(&self, name: &str) -> io::Result<()> {
        let name = std::ffi::OsStr::new(name);
        if !self.stat_os(name).is_ok_and(|st| is_dir_mode(&st)) {
            return gone_is_fine(self.unlinkat_os(name, 0));
        }
        let top = self.open_dir(name)?;
        loop {
            let names = top.names_os()?;
            if names.is_empty() {
                break;
            }
            for n in names {
                top.remove_within(&n, &top, 1)?;
            }
        }
        drop(top);
        gone_is_fine(self.unlinkat_os(name, libc::AT_REMOVEDIR))
    }

    /// One level of [`Dir::remove_tree`]: `depth` levels below `top`.
    fn remove_within(&self, name: &std::ffi::OsStr, top: &Dir, depth: usize) -> io::Result<()> {
        let st = match self.stat_os(name) {
            Ok(st) => st,
            Err(e) if is_missing(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        if !is_dir_mode(&st) {
            return gone_is_fine(self.unlinkat_os(name, 0));
        }
        if depth >= REMOVE_DEPTH {
            let lifted = format!(
                ".lifted-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            );
            return gone_is_fine(self.rename_os(name, top, std::ffi::OsStr::new(&lifted)));
        }
        let child = match self.open_dir(name) {
            Ok(c) => c,
            Err(e) if is_missing(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        for n in child.names_os()? {
            child.remove_within(&n, top, depth + 1)?;
        }
        drop(child);
        gone_is_fine(self.unlinkat_os(name, libc::AT_REMOVEDIR))
    }

    /// The names in this directory as bytes (not `.`/`..`).
    fn names_os(&self) -> io::Result<Vec<std::ffi::OsString>> {
        let fd_path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        std::fs::read_dir(fd_path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }

    /// `lstat` of `name` (as bytes) in this directory: the one `fstatat`
    /// behind [`Dir::stat`], [`Dir::contains`] and [`Dir::is_dir`].
    fn stat_os(&self, name: &std::ffi::OsStr) -> io::Result<libc::stat> {
        let c = cstr(name)?;
        // SAFETY: valid dirfd, NUL-terminated name, a plain out-buffer.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) < 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(st)
        }
    }

    /// `unlinkat` of `name` (as bytes): the one behind [`Dir::unlink`] and
    /// [`Dir::rmdir`].
    fn unlinkat_os(&self, name: &std::ffi::OsStr, flags: libc::c_int) -> io::Result<()> {
        let c = cstr(name)?;
        // SAFETY: valid dirfd and NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), flags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads the regular file `name` (at most `limit` bytes; never a link
    /// or a FIFO).
    pub(crate) fn read(&self, name: &str, limit: u64) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let f = self.open_file(name, libc::O_RDONLY, 0)?;
        let mut bytes = Vec::new();
        f.take(limit + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(io::Error::other(format!(
                "{}: over {limit} bytes",
                self.path.join(name).display()
            )));
        }
        Ok(bytes)
    }

    /// A path that reaches `name` in this very directory (through
    /// `/proc/self/fd`), for calls that take only a path (`bind`).
    pub(crate) fn fd_path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    /// Sets this directory's permission bits (`fchmod` on the descriptor).
    pub(crate) fn chmod(&self, mode: u32) -> io::Result<()> {
        // SAFETY: valid fd.
        if unsafe { libc::fchmod(self.fd.as_raw_fd(), mode as libc::mode_t) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Fsyncs the directory (makes a create or rename in it durable).
    pub(crate) fn sync(&self) -> io::Result<()> {
        // SAFETY: valid fd.
        if unsafe { libc::fsync(self.fd.as_raw_fd()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// How many directory levels [`Dir::remove_tree`] holds open at most.
pub(crate) const REMOVE_DEPTH: usize = 16;

fn is_dir_mode(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// A removal whose target is already gone succeeded (someone else did it).
fn gone_is_fine(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if is_missing(&e) => Ok(()),
        r => r,
    }
}

/// How old a temporary file must be before a sweep removes it: a writer
/// finishes within milliseconds, so one older than this was left by a crash.
pub(crate) const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes the temporaries squadd and squadctl leave when killed, older than
/// `older_than`, in a session directory: our own naming (`.name.tmp.pid.n`)
/// at its top level and in `locks/`, and anything in `inbox/<agent>/tmp/`.
/// Returns how many went. Nothing is followed; a younger file (a write in
/// flight) is left alone.
pub(crate) fn sweep_temporaries(session: &Dir, older_than: std::time::Duration) -> usize {
    sweep_temporaries_left_by(session, older_than, None)
}

/// [`sweep_temporaries`], and at once those named after `dead_writer`
/// (`.name.tmp.PID.N`): the pid of the previous squadd of this root, whose
/// pid lock we now hold, so it is gone and will never rename them.
fn sweep_temporaries_left_by(
    session: &Dir,
    older_than: std::time::Duration,
    dead_writer: Option<u32>,
) -> usize {
    let ours = |name: &str| squad_protocol::atomic::is_temp_name(name);
    let mut removed = sweep_in(session, older_than, dead_writer, ours);
    if let Ok(locks) = session.open_dir(std::ffi::OsStr::new(squad_protocol::tree::LOCKS_DIR)) {
        removed += sweep_in(&locks, older_than, dead_writer, ours);
    }
    if let Ok(inbox) = session.open_dir(std::ffi::OsStr::new("inbox")) {
        for agent in inbox.names().unwrap_or_default() {
            if let Ok(tmp) = inbox
                .open_dir(std::ffi::OsStr::new(&agent))
                .and_then(|a| a.open_dir(std::ffi::OsStr::new("tmp")))
            {
                // A second name of a delivered message is its mark of not
                // yet audited (crate::inbox::deliver_unsynced): squadd's
                // start says it and removes it, never the sweep.
                removed += sweep_in(&tmp, older_than, dead_writer, |name| {
                    tmp.stat(name).is_ok_and(|st| st.st_nlink < 2)
                });
            }
        }
    }
    removed
}

/// Every stale temporary squadd itself may leave in `root` when killed:
/// those of each session ([`sweep_temporaries`]), `.squad/run/.state.json.tmp.*`
/// and `.claude/context/.shared-context.json.tmp.*`, older than
/// [`STALE_AFTER`]. Run at start and by every retention run; returns how
/// many went.
pub(crate) fn sweep_squadd_temporaries(root: &Path, dead_squadd: Option<u32>) -> usize {
    let Ok(dir) = Dir::open_root(root) else {
        return 0;
    };
    let mut removed = 0;
    if let Ok(sessions) = dir.walk(Path::new(".squad/sessions"), None) {
        for name in sessions.names().unwrap_or_default() {
            if let Ok(s) = sessions.open_dir(std::ffi::OsStr::new(&name)) {
                removed += sweep_temporaries_left_by(&s, STALE_AFTER, dead_squadd);
            }
        }
    }
    for (at, file) in [
        (".squad/run", "state.json"),
        (".claude/context", "shared-context.json"),
    ] {
        if let Ok(d) = dir.walk(Path::new(at), None) {
            let prefix = format!(".{file}.tmp.");
            removed += sweep_in(&d, STALE_AFTER, dead_squadd, |name| {
                name.starts_with(&prefix)
            });
        }
    }
    removed
}

/// Unlinks the entries of `dir` that `ours` accepts, are not directories
/// (lstat: a link is removed, never followed) and are at least `older_than`
/// old; returns how many went.
fn sweep_in(
    dir: &Dir,
    older_than: std::time::Duration,
    dead_writer: Option<u32>,
    ours: impl Fn(&str) -> bool,
) -> usize {
    let now = std::time::SystemTime::now();
    let stale = |dir: &Dir, name: &str| {
        dir.stat(name).is_ok_and(|st| {
            st.st_mode & libc::S_IFMT != libc::S_IFDIR && {
                let mtime = std::time::UNIX_EPOCH
                    + std::time::Duration::from_secs(u64::try_from(st.st_mtime).unwrap_or(0));
                now.duration_since(mtime).is_ok_and(|age| age >= older_than)
            } || dead_writer.is_some_and(|pid| written_by_gone(name, pid))
        })
    };
    let mut removed = 0;
    for name in dir.names().unwrap_or_default() {
        if ours(&name) && stale(dir, &name) && dir.unlink(&name).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether `name` is a temporary of the atomic writers' naming
/// (`.name.tmp.PID.N`) written by `pid`, and no process `pid` exists (a
/// reused pid is a live process: its files keep the age rule).
fn written_by_gone(name: &str, pid: u32) -> bool {
    let named = name
        .rsplit_once(".tmp.")
        .and_then(|(_, tail)| tail.split('.').next())
        .is_some_and(|p| p == pid.to_string());
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    named
        && raw > 0
        && unsafe { libc::kill(raw, 0) } != 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// `rel` (a relative form of `path`) as its directory and file name.
fn split_name<'a>(path: &Path, rel: &'a Path) -> io::Result<(&'a Path, String)> {
    let name = rel
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| refused(path, "no file name"))?
        .to_string();
    Ok((rel.parent().unwrap_or(Path::new("")), name))
}

/// The directory holding `path`, reached from `root` without following a
/// link below the root; with `create`, missing directories are made (mode
/// 0o755 or the given one), else a missing one is NotFound.
pub(crate) fn parent_of(
    root: &Path,
    path: &Path,
    create: Option<u32>,
) -> io::Result<(Dir, String)> {
    let rel = path
        .strip_prefix(root)
        .map_err(|_| refused(path, "outside the root"))?;
    let (parent, name) = split_name(path, rel)?;
    let dir = Dir::open_root(root)?.walk(parent, create)?;
    Ok((dir, name))
}

/// The directories a project's own tree starts at (and the user's agent
/// settings: `~/.claude`): a path through one of them is anchored at its
/// parent (see [`project_anchor`]).
const TREE_ROOTS: &[&str] = &[".squad", ".ai-team", ".claude", ".codex", ".github"];

/// Where a write to `path` is anchored: the directory holding the last
/// `.squad` (or `.ai-team`, `.claude`, `.codex`, `.github`) component of the path,
/// that is the project root; for any other path its own directory. Nothing
/// below the anchor is followed when writing; the anchor itself is the
/// operator's choice (it may be reached through a link).
pub(crate) fn project_anchor(path: &Path) -> PathBuf {
    // The last such component: a project may itself live below a directory
    // named like one (`~/.github/project/.squad/…`).
    let mut at = PathBuf::new();
    let mut anchor = None;
    for c in path.components() {
        if let Component::Normal(n) = c
            && TREE_ROOTS.iter().any(|r| n == *r)
        {
            anchor = Some(if at.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                at.clone()
            });
        }
        at.push(c);
    }
    anchor.unwrap_or_else(|| match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    })
}

/// The directory holding `path` and the file's name, reached from its
/// [`project_anchor`] without following a link; with `create`, missing
/// directories are made with that mode.
pub(crate) fn project_parent(path: &Path, create: Option<u32>) -> io::Result<(Dir, String)> {
    let anchor = project_anchor(path);
    let rel = if anchor == Path::new(".") && !path.starts_with(".") {
        path
    } else {
        path.strip_prefix(&anchor)
            .map_err(|_| refused(path, "outside the project"))?
    };
    let (parent, name) = split_name(path, rel)?;
    // The anchor is the operator's choice (a project root, `$CODEX_HOME`):
    // made like any directory they name when asked to create.
    if create.is_some() && !anchor.is_dir() {
        std::fs::create_dir_all(&anchor)?;
    }
    let dir = Dir::open_root(&anchor)?.walk(parent, create)?;
    Ok((dir, name))
}

/// squadctl's (and squadd's) one way to write a file of a project:
/// atomically (temporary file, fsync, rename, directory fsync), relative to
/// directory descriptors reached from the project root without following a
/// link, so a symlink an agent planted anywhere below the root (a session
/// directory, `locks/`, `inbox/<agent>`, `.squad` itself) is refused with
/// an error naming it, never written through. A link at the file itself is
/// replaced, never followed. Created with mode `0o666` less the umask.
pub(crate) fn write_project_file(path: &Path, bytes: &[u8], create: Option<u32>) -> io::Result<()> {
    let (dir, name) = project_parent(path, create)?;
    dir.write_atomic(&name, bytes, 0o666)
}

/// [`write_project_file`] into an existing directory: the drop-in for
/// `squad_protocol::write_atomic` in everything squadctl writes.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_project_file(path, bytes, None)
}

/// Removes the file `path` of a project (see [`write_project_file`]): the
/// link or file itself, never anything through a link below the root.
pub(crate) fn remove_project_file(path: &Path) -> io::Result<()> {
    let (dir, name) = project_parent(path, None)?;
    dir.unlink(&name)
}

/// Writes `root/rel` atomically, never through a link below `root`; with
/// `create`, missing directories are made with that mode. A directory that
/// vanished (without `create`) fails with NotFound and is not recreated.
pub(crate) fn write_atomic_under(
    root: &Path,
    path: &Path,
    bytes: &[u8],
    mode: u32,
    create: Option<u32>,
) -> io::Result<()> {
    let (dir, name) = parent_of(root, path, create)?;
    dir.write_atomic(&name, bytes, mode)
}

/// A directory a group commit wrote into, not yet fsynced, with the
/// positions of the files written into it.
pub(crate) type WrittenDir = (Dir, Vec<usize>);

/// Writes many files below `root`, the first half of a group commit:
/// every file written atomically (temporary file, fsync, rename, never
/// through a link, into existing directories only: a crash leaves no file
/// or a complete one), the directories they went into returned *not yet
/// fsynced*. Directories are worked on in parallel (at most `threads`). Until
/// the caller fsyncs them ([`sync_dirs`]) a power loss may forget a rename,
/// so nothing written is to be announced before; the caller can fsync them
/// together with other directories of the same batch (one fsync per
/// directory per batch). Each directory comes with the positions of the
/// files written into it.
pub(crate) fn write_group_unsynced_under(
    root: &Path,
    files: &[(PathBuf, &[u8])],
    mode: u32,
    threads: usize,
) -> (Vec<io::Result<()>>, Vec<WrittenDir>) {
    // Files by directory, keeping each file's position.
    let mut dirs: std::collections::BTreeMap<&Path, Vec<usize>> = Default::default();
    for (n, (path, _)) in files.iter().enumerate() {
        dirs.entry(path.parent().unwrap_or(Path::new("")))
            .or_default()
            .push(n);
    }
    let groups: Vec<(&Path, Vec<usize>)> = dirs.into_iter().collect();
    let done = squad_protocol::tree::parallel_map(&groups, threads, |(dir, members)| {
        let mut out: Vec<(usize, io::Result<()>)> = Vec::with_capacity(members.len());
        let opened = Dir::open_root(root).and_then(|r| {
            let rel = dir
                .strip_prefix(root)
                .map_err(|_| refused(dir, "outside the root"))?;
            r.walk(rel, None)
        });
        let d = match opened {
            Ok(d) => d,
            Err(e) => {
                for &n in members {
                    out.push((n, Err(io::Error::new(e.kind(), e.to_string()))));
                }
                return (out, None);
            }
        };
        for &n in members {
            let (path, bytes) = &files[n];
            let result = match path.file_name().and_then(|f| f.to_str()) {
                Some(name) => d.write_atomic_unsynced(name, bytes, mode),
                None => Err(refused(path, "no file name")),
            };
            out.push((n, result));
        }
        let wrote: Vec<usize> = out
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(n, _)| *n)
            .collect();
        (out, (!wrote.is_empty()).then_some((d, wrote)))
    });
    let mut results: Vec<Option<io::Result<()>>> = files.iter().map(|_| None).collect();
    let mut written = Vec::new();
    for (out, dir) in done {
        for (n, r) in out {
            results[n] = Some(r);
        }
        written.extend(dir);
    }
    let results = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(io::Error::other("not written"))))
        .collect();
    (results, written)
}

/// Fsyncs directories in parallel (at most `threads`: the file system can
/// merge their journal commits into one); each one's outcome, in order.
pub(crate) fn sync_dirs(dirs: &[Dir], threads: usize) -> Vec<io::Result<()>> {
    squad_protocol::tree::parallel_map(dirs, threads, Dir::sync)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_group_commit_writes_every_file_refuses_links_and_reports_each() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::create_dir_all(r.join("s1")).unwrap();
        fs::create_dir_all(r.join("s2")).unwrap();
        symlink(outside.path(), r.join("l")).unwrap();
        let files: Vec<(PathBuf, &[u8])> = vec![
            (r.join("s1/a.md"), b"a"),
            (r.join("s2/b.md"), b"b"),
            (r.join("l/c.md"), b"c"),
            (r.join("gone/d.md"), b"d"),
            (r.join("s1/e.md"), b"e"),
        ];
        let (results, dirs) = write_group_unsynced_under(r, &files, 0o644, 4);
        let ok: Vec<bool> = results.iter().map(Result::is_ok).collect();
        assert_eq!(ok, [true, true, false, false, true]);
        // One directory each, with the files written into it, to fsync.
        let written: Vec<(PathBuf, Vec<usize>)> = dirs
            .iter()
            .map(|(d, n)| (d.path().to_path_buf(), n.clone()))
            .collect();
        assert_eq!(
            written,
            [(r.join("s1"), vec![0, 4]), (r.join("s2"), vec![1])]
        );
        let dirs: Vec<Dir> = dirs.into_iter().map(|(d, _)| d).collect();
        assert!(sync_dirs(&dirs, 2).iter().all(Result::is_ok));
        assert_eq!(fs::read(r.join("s1/a.md")).unwrap(), b"a");
        assert_eq!(fs::read(r.join("s1/e.md")).unwrap(), b"e");
        assert_eq!(fs::read(r.join("s2/b.md")).unwrap(), b"b");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(!r.join("gone").exists(), "never recreated");
        // No temporary left behind.
        assert_eq!(fs::read_dir(r.join("s1")).unwrap().count(), 2);
    }

    #[test]
    fn writes_below_a_root_and_refuses_links_on_the_way() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        write_atomic_under(r, &r.join("a/b/f.txt"), b"x", 0o644, Some(0o755)).unwrap();
        assert_eq!(fs::read(r.join("a/b/f.txt")).unwrap(), b"x");
        symlink(outside.path(), r.join("l")).unwrap();
        let e = write_atomic_under(r, &r.join("l/f.txt"), b"x", 0o644, Some(0o755)).unwrap_err();
        assert!(e.to_string().contains("never follows a link"), "{e}");
        fs::write(outside.path().join("target"), b"keep").unwrap();
        symlink(outside.path().join("target"), r.join("a/b/g.txt")).unwrap();
        // Atomic replacement replaces the link itself, never the target.
        write_atomic_under(r, &r.join("a/b/g.txt"), b"new", 0o644, None).unwrap();
        assert_eq!(fs::read(outside.path().join("target")).unwrap(), b"keep");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn sweeps_take_only_stale_temporaries_of_our_naming() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::create_dir_all(r.join("locks")).unwrap();
        fs::create_dir_all(r.join("inbox/bob/tmp")).unwrap();
        for p in [
            ".session-status.md.tmp.1.0",
            "locks/.x.json.tmp.2.0",
            "inbox/bob/tmp/0-critical-x.md.3",
            "role-plan-a-task_1.md",
            "notes.tmp",
        ] {
            fs::write(r.join(p), "x").unwrap();
        }
        let d = Dir::open_root(r).unwrap();
        assert_eq!(sweep_temporaries(&d, STALE_AFTER), 0, "all young");
        assert_eq!(sweep_temporaries(&d, std::time::Duration::ZERO), 3);
        assert!(r.join("role-plan-a-task_1.md").exists());
        assert!(r.join("notes.tmp").exists());
        assert!(!r.join("locks/.x.json.tmp.2.0").exists());
    }

    #[test]
    fn the_temporaries_of_the_previous_squadd_are_swept_at_once() {
        // Regression: kill -9 mid-write then a restart left the notice's
        // temporary behind for a minute (daemon::kill_9_and_restart_…).
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let s = r.join(".squad/sessions/s1");
        fs::create_dir_all(&s).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let gone = format!(".role-comm-squadd-to-a-x.md.tmp.{dead}.0");
        let other = format!(".session-status.md.tmp.{}.0", dead + 1);
        fs::write(s.join(&gone), "x").unwrap();
        fs::write(s.join(&other), "x").unwrap();
        assert_eq!(sweep_squadd_temporaries(r, None), 0, "all young");
        assert_eq!(sweep_squadd_temporaries(r, Some(dead)), 1);
        assert!(!s.join(&gone).exists());
        assert!(s.join(&other).exists(), "another writer's waits its minute");
    }

    #[test]
    fn trees_are_removed_through_descriptors_without_following_links() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("keep"), "x").unwrap();
        let r = root.path();
        fs::create_dir_all(r.join("t/a/b")).unwrap();
        fs::write(r.join("t/a/b/f"), "x").unwrap();
        symlink(outside.path(), r.join("t/a/link")).unwrap();
        Dir::open_root(r).unwrap().remove_tree("t").unwrap();
        assert!(!r.join("t").exists());
        assert!(outside.path().join("keep").exists());
    }

    #[test]
    fn trees_deeper_than_the_fd_limit_are_removed_with_few_descriptors() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // 300 levels, with a file and a non-UTF-8 name on the way (the fd
        // limit itself is lowered in the e2e test, in its own process).
        let mut p = r.join("t");
        for i in 0..300 {
            p.push(if i == 150 {
                std::ffi::OsStr::from_bytes(b"\xff").to_os_string()
            } else {
                "d".into()
            });
        }
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("f"), "x").unwrap();
        let d = Dir::open_root(r).unwrap();
        let open_fds = || fs::read_dir("/proc/self/fd").unwrap().count();
        let before = open_fds();
        d.remove_tree("t").unwrap();
        assert!(!r.join("t").exists());
        assert_eq!(open_fds(), before, "no descriptor leaked");
    }

    #[test]
    fn project_files_are_anchored_at_the_project_root() {
        assert_eq!(
            project_anchor(Path::new("/p/.squad/sessions/S/x.md")),
            Path::new("/p")
        );
        assert_eq!(project_anchor(Path::new(".squad/x")), Path::new("."));
        assert_eq!(project_anchor(Path::new("/p/AGENTS.md")), Path::new("/p"));
        assert_eq!(
            project_anchor(Path::new("/h/.github/p/.squad/run/x")),
            Path::new("/h/.github/p")
        );
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::create_dir_all(r.join(".squad/sessions")).unwrap();
        symlink(outside.path(), r.join(".squad/sessions/S")).unwrap();
        let e = write_project_file(&r.join(".squad/sessions/S/f.md"), b"x", None).unwrap_err();
        assert!(e.to_string().contains("never follows a link"), "{e}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        write_project_file(&r.join(".squad/sessions/T/f.md"), b"x", Some(0o777)).unwrap();
        assert_eq!(fs::read(r.join(".squad/sessions/T/f.md")).unwrap(), b"x");
    }

    #[test]
    fn a_vanished_directory_is_not_recreated() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let e = write_atomic_under(r, &r.join("gone/f"), b"x", 0o644, None).unwrap_err();
        assert!(is_missing(&e), "{e}");
        assert!(!r.join("gone").exists());
    }

    #[test]
    fn files_open_only_when_regular_and_not_links() {
        let root = tempfile::tempdir().unwrap();
        let d = Dir::open_root(root.path()).unwrap();
        let fifo = root.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = d
            .open_file("fifo", libc::O_WRONLY | libc::O_APPEND, 0)
            .unwrap_err();
        // A FIFO without a reader: ENXIO at once, never a hang.
        assert!(e.raw_os_error() == Some(libc::ENXIO) || e.to_string().contains("regular"));
        let e = d.open_file("fifo", libc::O_RDONLY, 0).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        symlink("/etc/passwd", root.path().join("l")).unwrap();
        let e = d
            .open_file("l", libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT, 0o600)
            .unwrap_err();
        assert!(e.to_string().contains("a link where a file"), "{e}");
    }
}
