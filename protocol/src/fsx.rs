//! Safe opens of paths that someone else can create.
//!
//! Every agent can write the project, so any path the supervisor reads may be
//! a FIFO (an `open()` that blocks forever), a device, a directory or a
//! symlink aimed outside the project. Every read of such a path in the
//! workspace goes through [`open_regular`] or [`read_regular`]: a
//! non-blocking, no-follow open, then `fstat` on the descriptor, so what is
//! checked is what is read (no race between a `stat` and an `open`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why a path could not be read as a regular file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path does not exist.
    #[error("not found")]
    NotFound,
    /// The path is a symlink; it is never followed.
    #[error("is a symbolic link (never followed)")]
    Symlink,
    /// The path exists but is not a regular file (a FIFO, a socket, a device,
    /// a directory).
    #[error("is not a regular file ({0})")]
    NotRegular(&'static str),
    /// The file is larger than the caller's limit; it was not read.
    #[error("is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The size seen (at least `limit + 1` when the file grew while read).
        size: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// Any other I/O error (permissions, out of file descriptors, …).
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl ReadError {
    /// Whether retrying later may succeed without the file changing (out of
    /// file descriptors, interrupted): such a failure is the machine's, never
    /// the file's fault.
    pub fn is_transient(&self) -> bool {
        match self {
            ReadError::Io(e) => is_transient_io(e),
            _ => false,
        }
    }
}

/// Whether an I/O error is the machine's, not the file's (out of file
/// descriptors or memory, interrupted): retry later.
pub fn is_transient_io(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc_codes::EMFILE
                | libc_codes::ENFILE
                | libc_codes::ENOMEM
                | libc_codes::EINTR
                | libc_codes::EAGAIN
        )
    )
}

// The few errno values we test for, without a libc dependency in this crate.
#[cfg(target_os = "linux")]
mod libc_codes {
    pub(super) const EINTR: i32 = 4;
    pub(super) const EAGAIN: i32 = 11;
    pub(super) const ENOMEM: i32 = 12;
    pub(super) const ENFILE: i32 = 23;
    pub(super) const EMFILE: i32 = 24;
    pub(super) const ELOOP: i32 = 40;
    pub(super) const O_NONBLOCK: i32 = 0o4000;
    pub(super) const O_NOFOLLOW: i32 = 0o400000;
}
#[cfg(not(target_os = "linux"))]
mod libc_codes {
    // BSD / macOS values.
    pub const EINTR: i32 = 4;
    pub const EAGAIN: i32 = 35;
    pub const ENOMEM: i32 = 12;
    pub const ENFILE: i32 = 23;
    pub const EMFILE: i32 = 24;
    pub const ELOOP: i32 = 62;
    pub const O_NONBLOCK: i32 = 0x0004;
    pub const O_NOFOLLOW: i32 = 0x0100;
}

fn kind_name(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "a device";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading when it is a regular file, without following a
/// symlink in its last component and without blocking on a FIFO.
pub fn open_regular(path: &Path) -> Result<File, ReadError> {
    open_regular_sized(path).map(|(file, _)| file)
}

/// [`open_regular`] with the size seen by its one `fstat`, so that a reader
/// needs no second `fstat` for it (every guard call reads a few dozen files).
fn open_regular_sized(path: &Path) -> Result<(File, u64), ReadError> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc_codes::O_NONBLOCK | libc_codes::O_NOFOLLOW);
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(ReadError::NotFound),
        Err(e) if e.raw_os_error() == Some(libc_codes::ELOOP) => return Err(ReadError::Symlink),
        Err(e) => return Err(ReadError::Io(e)),
    };
    let meta = file.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(ReadError::NotRegular(kind_name(&ft)));
    }
    Ok((file, meta.len()))
}

/// What [`read_regular`] would refuse, found without reading: the file is
/// opened as it would be and its size checked; its size on success.
/// (Unlike [`read_regular_to_string`] it cannot see invalid UTF-8.)
pub fn probe_regular(path: &Path, limit: u64) -> Result<u64, ReadError> {
    let (_, size) = open_regular_sized(path)?;
    if size > limit {
        return Err(ReadError::TooLarge { size, limit });
    }
    Ok(size)
}

/// Reads the whole of the regular file at `path`, refusing it unread when it
/// is larger than `limit` bytes (checked on the open descriptor, and again
/// while reading in case it grows).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (file, size) = open_regular_sized(path)?;
    if size > limit {
        return Err(ReadError::TooLarge { size, limit });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// Like [`read_regular`], as UTF-8 text (invalid UTF-8 is an
/// [`io::ErrorKind::InvalidData`] error).
pub fn read_regular_to_string(path: &Path, limit: u64) -> Result<String, ReadError> {
    let bytes = read_regular(path, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        ReadError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not valid UTF-8: {e}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read_regular(&p, 10).unwrap(), b"hello");
    }

    #[test]
    fn refuses_over_the_limit_unread() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        assert!(matches!(
            read_regular(&p, 4),
            Err(ReadError::TooLarge { size: 5, limit: 4 })
        ));
    }

    #[test]
    fn missing_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_regular(&dir.path().join("nope"), 4),
            Err(ReadError::NotFound)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn never_follows_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t");
        std::fs::write(&target, b"secret").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(read_regular(&link, 100), Err(ReadError::Symlink)));
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        assert!(matches!(
            read_regular(&fifo, 100),
            Err(ReadError::NotRegular("a FIFO"))
        ));
    }

    #[test]
    fn a_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_regular(dir.path(), 100),
            Err(ReadError::NotRegular("a directory"))
        ));
    }
}
