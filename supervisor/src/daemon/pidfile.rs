//! One daemon per root: an advisory lock on `.squad/run/squadd.pid`.

use std::fs::{File, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Holds the lock for as long as it lives (the OS releases it when the
/// process exits, however it exits).
#[derive(Debug)]
pub(crate) struct PidLock {
    _file: File,
    /// The pid the file named before we took it: the previous squadd of
    /// this root, gone (it held the lock until it died).
    pub previous: Option<u32>,
}

impl PidLock {
    /// Whether `path` is still the file this lock is held on (a `.squad/`
    /// deleted and recreated has a new pid file nobody holds).
    pub(crate) fn is_at(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self._file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum PidLockError {
    /// Another process holds it.
    #[error(
        "another squadd (pid {pid}) is already supervising this root; stop it first (lock: {path})"
    )]
    Held {
        /// The pid written in the file, or `unknown`.
        pid: String,
        /// The lock file.
        path: String,
    },
    /// The file could not be opened or written.
    #[error("cannot use the pid file {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// The error.
        source: io::Error,
    },
}

/// Takes the lock on `root/rel` and writes our pid into it. Opened below
/// `root` without following links: a `squadd.pid` (or `.squad/run`) that
/// is a symlink is refused, never truncated through.
pub(crate) fn acquire(root: &Path, rel: &Path) -> Result<PidLock, PidLockError> {
    let path = root.join(rel);
    let io_err = |source| PidLockError::Io {
        path: path.display().to_string(),
        source,
    };
    let (dir, name) = crate::safefs::parent_of(root, &path, None).map_err(io_err)?;
    let mut file = dir
        .open_file(&name, libc::O_RDWR | libc::O_CREAT, 0o644)
        .map_err(io_err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let pid = text.trim();
            return Err(PidLockError::Held {
                pid: if pid.is_empty() {
                    "unknown".into()
                } else {
                    pid.into()
                },
                path: path.display().to_string(),
            });
        }
        Err(TryLockError::Error(e)) => return Err(io_err(e)),
    }
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let previous = text
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|&p| p != std::process::id());
    file.set_len(0).map_err(io_err)?;
    file.seek(SeekFrom::Start(0)).map_err(io_err)?;
    writeln!(file, "{}", std::process::id()).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    Ok(PidLock {
        _file: file,
        previous,
    })
}
