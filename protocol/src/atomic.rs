//! Atomic file writes: a reader sees the old content or the new, never a mix,
//! and a crash at any instant leaves one of the two on disk.
//!
//! The recipe: write a temporary file in the same directory (so the rename
//! cannot cross file systems), fsync it, rename it over the target, fsync the
//! directory so the rename itself is durable.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Whether a file name is one of our temporary files, so watchers and
/// cleaners can recognise (and ignore or remove) them.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp.")
}

fn temp_path(target: &Path) -> io::Result<PathBuf> {
    let name = target
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = format!(".{}.tmp.{}.{n}", name.to_string_lossy(), std::process::id());
    Ok(target.with_file_name(temp))
}

/// Writes `contents` to `path` atomically and durably.
///
/// The parent directory must exist. On error the target is untouched and the
/// temporary file is removed.
pub fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_atomic_with(path, contents, None)
}

/// Like [`write_atomic`], creating the file with Unix permission bits `mode`
/// (before the umask) when given.
pub fn write_atomic_with(path: &Path, contents: &[u8], mode: Option<u32>) -> io::Result<()> {
    let temp = temp_path(path)?;
    let result = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(mode);
        }
        #[cfg(not(unix))]
        let _ = mode;
        let mut file = options.open(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        sync_parent(path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Fsyncs the directory holding `path`, making a rename or create in it durable.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(parent)
}

/// Fsyncs a directory.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_replaces_without_leaving_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("session-status.md");
        write_atomic(&target, b"one").unwrap();
        write_atomic(&target, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("session-status.md")]);
    }

    #[test]
    fn missing_directory_is_an_error_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("nope").join("x.md");
        assert!(write_atomic(&target, b"x").is_err());
        assert!(!dir.path().join("nope").exists());
    }

    #[test]
    fn temp_names_are_recognised() {
        let t = temp_path(Path::new("/a/b/session-status.md")).unwrap();
        let name = t.file_name().unwrap().to_str().unwrap();
        assert!(is_temp_name(name), "{name}");
        assert!(!is_temp_name("session-status.md"));
        assert_eq!(crate::FileKind::from_file_name(name), None);
    }

    #[cfg(unix)]
    #[test]
    fn mode_is_applied() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("secret");
        write_atomic_with(&target, b"x", Some(0o600)).unwrap();
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
