//! Rewriting a memory file that other writers append to without our lock.
//!
//! Squad's Scribe, the agents and people append to `decisions.md` and to
//! histories directly (open for append, write, close) and take no memory
//! lock. A whole-file replace (temporary file, rename) that read the file
//! before such an append would drop it: the append lands in the old file,
//! which the rename unlinks. So every rewrite of a memory file goes through
//! [`rewrite`]:
//!
//! 1. the file is opened and read through one descriptor (its inode and
//!    the `len` bytes read are what the new text is computed from);
//! 2. before the rename, a second name is linked to the old inode,
//!    `.<name>.prev.<len>.<pid>.<n>` (a dot name not ending in `.md`, which
//!    Squad and SquadUI pass by), and the file is checked: same inode, same
//!    size. A change means another writer was there: everything is
//!    computed again from the new bytes (a merge or convert then treats the
//!    appended entries like any other);
//! 3. after the rename, whatever reached the old inode anyway (an appender
//!    that opened it before the rename and wrote after) is found through
//!    the `.prev` name: once no process has the old file open for writing
//!    (a read lease is granted), the bytes past `len` are appended to the
//!    new file verbatim (the same rewrite again), and only then is the
//!    `.prev` name removed.
//!
//! A kill -9 between 2 and 3 leaves the `.prev` name, and with it every byte
//! appended to the old file: the next memory writer (under the memory lock,
//! [`settle`]) carries them over the same way. A carry-over is idempotent:
//! bytes the file already holds are not appended twice.

use super::{MemoryError, READ_LIMIT, io_error};
use crate::safefs::Dir;
use std::io::{Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// How many times a rewrite computes again after another writer changed the
/// file under it, before it writes anyway (the carry-over keeps their bytes).
const ATTEMPTS: usize = 20;

/// How long a carry-over waits for the writers of an old file to close it.
/// One still open after that keeps its `.prev` name for the next writer.
const PATIENCE: Duration = Duration::from_secs(2);

/// The part of a `.prev` name after the file's name.
const PREV: &str = ".prev.";

/// `(len, rest)` of a `.prev` name of file `name`.
fn prev_len(link: &str, name: &str) -> Option<usize> {
    let rest = link
        .strip_prefix('.')?
        .strip_prefix(name)?
        .strip_prefix(PREV)?;
    rest.split('.').next()?.parse().ok()
}

/// The file's text as read through one descriptor (kept open: its inode is
/// the one the text came from), or `None` when there is no file.
fn open_read(
    dir: &Dir,
    name: &str,
    path: &Path,
) -> Result<Option<(std::fs::File, String)>, MemoryError> {
    let file = match dir.open_file(name, libc::O_RDONLY, 0) {
        Ok(f) => f,
        Err(e) if crate::safefs::is_missing(&e) => return Ok(None),
        Err(e) => return Err(io_error(path)(e)),
    };
    let text = read_all(&file, path)?;
    Ok(Some((file, text)))
}

/// All of an open memory file, as UTF-8.
fn read_all(file: &std::fs::File, path: &Path) -> Result<String, MemoryError> {
    let mut bytes = Vec::new();
    file.take(READ_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error(path))?;
    if bytes.len() as u64 > READ_LIMIT {
        return Err(io_error(path)(std::io::Error::other(format!(
            "over {READ_LIMIT} bytes"
        ))));
    }
    String::from_utf8(bytes).map_err(|e| {
        io_error(path)(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not valid UTF-8: {e}"),
        ))
    })
}

/// Writes `bytes` to a new temporary file of `dir` (synced) and returns its
/// name (the atomic writers' naming, so a killed writer's is swept).
fn temp(dir: &Dir, name: &str, bytes: &[u8], path: &Path) -> Result<String, MemoryError> {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = format!(".{name}.tmp.{}.{n}", std::process::id());
    let written = (|| {
        let mut f = dir.open_file(&t, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o666)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = dir.unlink(&t);
        return Err(io_error(path)(e));
    }
    Ok(t)
}

/// What [`rewrite`] wrote.
#[derive(Debug, Default)]
pub(crate) struct Rewritten {
    /// The text computed and written (absent: nothing to write).
    pub text: Option<String>,
    /// Bytes other writers appended meanwhile, carried over after it.
    pub carried: usize,
}

/// Replaces the memory file `path` with `f(its current text)` (`""` when it
/// does not exist), losing nothing another writer appends meanwhile (see the
/// module's documentation). `f` may run more than once (after a change by
/// another writer) and must be a function of the text it is given; `None`
/// writes nothing. Called with the team's memory lock held.
pub(crate) fn rewrite<F>(path: &Path, f: F) -> Result<Rewritten, MemoryError>
where
    F: FnMut(&str) -> Result<Option<String>, MemoryError>,
{
    let (dir, name) = crate::safefs::project_parent(path, None).map_err(io_error(path))?;
    rewrite_in(&dir, &name, path, f)
}

/// [`rewrite`] of the file `name` of the open directory `dir` (`path`
/// names it in errors): for a caller that keeps to one team directory
/// whatever happens to its path meanwhile.
pub(crate) fn rewrite_in<F>(
    dir: &Dir,
    name: &str,
    path: &Path,
    f: F,
) -> Result<Rewritten, MemoryError>
where
    F: FnMut(&str) -> Result<Option<String>, MemoryError>,
{
    settle(dir, name, path)?;
    let text = write(dir, name, path, f)?;
    let carried = settle(dir, name, path)?;
    Ok(Rewritten { text, carried })
}

/// The attempts of a rewrite: read, compute, replace if unchanged (the last
/// attempt replaces anyway). The text written, if any.
fn write<F>(dir: &Dir, name: &str, path: &Path, mut f: F) -> Result<Option<String>, MemoryError>
where
    F: FnMut(&str) -> Result<Option<String>, MemoryError>,
{
    for attempt in 1..=ATTEMPTS {
        let old = open_read(dir, name, path)?;
        let text = old.as_ref().map_or("", |(_, t)| t.as_str());
        let Some(new) = f(text)? else {
            return Ok(None);
        };
        let t = temp(dir, name, new.as_bytes(), path)?;
        let done = replace(dir, name, &t, old.as_ref(), attempt == ATTEMPTS, path);
        if !matches!(done, Ok(true)) {
            let _ = dir.unlink(&t);
        }
        if done? {
            return Ok(Some(new));
        }
    }
    Ok(None)
}

/// Renames temporary `t` over `name`, keeping the replaced file reachable by
/// a `.prev` name. `false` (nothing done) when the file changed since it was
/// read, unless `anyway`.
fn replace(
    dir: &Dir,
    name: &str,
    t: &str,
    old: Option<&(std::fs::File, String)>,
    anyway: bool,
    path: &Path,
) -> Result<bool, MemoryError> {
    let Some((file, text)) = old else {
        // No file was there: create it only if none appeared meanwhile.
        return match dir.rename_noreplace(t, dir, name) {
            Ok(()) => {
                dir.sync().map_err(io_error(path))?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !anyway => Ok(false),
            Err(e) => Err(io_error(path)(e)),
        };
    };
    let meta = file.metadata().map_err(io_error(path))?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let prev = format!(".{name}{PREV}{}.{}.{n}", text.len(), std::process::id());
    dir.link(name, &prev).map_err(io_error(path))?;
    let same = |st: &libc::stat| st.st_ino == meta.ino() && st.st_dev == meta.dev();
    let linked_old = dir.stat(&prev).is_ok_and(|st| same(&st));
    let unchanged = linked_old
        && file.metadata().is_ok_and(|m| m.len() == text.len() as u64)
        && dir.stat(name).is_ok_and(|st| same(&st));
    if !(unchanged || anyway && linked_old) {
        let _ = dir.unlink(&prev);
        return Ok(false);
    }
    dir.rename(t, dir, name).map_err(io_error(path))?;
    dir.sync().map_err(io_error(path))?;
    Ok(true)
}

/// Carries over to `name` what was appended to the files it replaced (the
/// `.prev` names of this or a killed rewrite), then removes those names;
/// returns how many bytes were carried. A `.prev` file still open for
/// writing after [`PATIENCE`] gives what it holds and keeps a name for the
/// next writer.
pub(crate) fn settle(dir: &Dir, name: &str, path: &Path) -> Result<usize, MemoryError> {
    let mut carried = 0;
    // Each carry-over is itself a replace, which may leave a new `.prev`.
    for _ in 0..ATTEMPTS {
        let mut links: Vec<(String, usize)> = dir
            .names()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|l| prev_len(&l, name).map(|n| (l, n)))
            .collect();
        if links.is_empty() {
            break;
        }
        links.sort();
        for (link, len) in links {
            carried += carry(dir, name, &link, len, path)?;
        }
    }
    Ok(carried)
}

/// One `.prev` file: its bytes past `len` appended to `name`, then the name
/// removed (or renamed to the new length when writers still hold it open).
fn carry(dir: &Dir, name: &str, link: &str, len: usize, path: &Path) -> Result<usize, MemoryError> {
    let Ok(file) = dir.open_file(link, libc::O_RDONLY, 0) else {
        let _ = dir.unlink(link);
        return Ok(0);
    };
    let quiet = no_writers(&file);
    let now = read_all(&file, path)?;
    // Same inode as the file itself: the rename never happened.
    let current = dir.stat(name).ok();
    let meta = file.metadata().map_err(io_error(path))?;
    if current.is_some_and(|st| st.st_ino == meta.ino() && st.st_dev == meta.dev()) {
        let _ = dir.unlink(link);
        return Ok(0);
    }
    let tail = now.get(len..).unwrap_or("").to_string();
    let mut carried = 0;
    if !tail.trim().is_empty() {
        let cur = open_read(dir, name, path)?
            .map(|(_, t)| t)
            .unwrap_or_default();
        // Already carried by a run killed before it removed the name.
        if !cur.contains(tail.trim()) {
            // Not `rewrite`: this is the settling it starts with.
            write(dir, name, path, |base| {
                Ok(Some(append_verbatim(base, &tail)))
            })?;
            carried = tail.len();
        }
    }
    if quiet {
        dir.unlink(link).map_err(io_error(path))?;
    } else {
        // Still open for writing somewhere: keep watching past what we took.
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let again = format!(".{name}{PREV}{}.{}.{n}", now.len(), std::process::id());
        dir.rename(link, dir, &again).map_err(io_error(path))?;
    }
    dir.sync().map_err(io_error(path))?;
    Ok(carried)
}

/// `base` with `tail` after it, on a line of its own, separated by a blank
/// line so an appended entry cannot run into the text before it.
fn append_verbatim(base: &str, tail: &str) -> String {
    let mut out = String::with_capacity(base.len() + tail.len() + 2);
    out.push_str(base);
    if !out.is_empty() && !tail.starts_with('\n') {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
    }
    out.push_str(tail);
    out
}

/// Waits until no process has `file` open for writing (a read lease is
/// granted only then), at most [`PATIENCE`]. `true` when none has; also
/// `true` where leases are not available (a short pause stands in).
fn no_writers(file: &std::fs::File) -> bool {
    let fd = file.as_raw_fd();
    let until = Instant::now() + PATIENCE;
    loop {
        // SAFETY: fcntl on a descriptor the caller owns.
        if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } == 0 {
            // SAFETY: as above; the lease was only a test.
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return true;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            // Stays: no leases here (another owner, a file system without
            // them): give a writer in flight the time to finish.
            std::thread::sleep(Duration::from_millis(20));
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        // Stays: polling for the writers to close the file.
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let team = tmp.path().join(".squad");
        std::fs::create_dir_all(&team).unwrap();
        (tmp, team)
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// An append between the read and the rename is seen before the rename:
    /// the new text is computed again from the bytes with the append.
    #[test]
    fn an_append_before_the_rename_is_computed_again() {
        let (_tmp, team) = team();
        let p = team.join("decisions.md");
        std::fs::write(&p, "# D\n").unwrap();
        let mut calls = 0;
        let r = rewrite(&p, |t| {
            calls += 1;
            if calls == 1 {
                append(&p, "\n### Scribe's entry\n");
            }
            Ok(Some(format!("{t}[merged]\n")))
        })
        .unwrap();
        assert_eq!(calls, 2);
        assert_eq!(r.carried, 0);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# D\n\n### Scribe's entry\n[merged]\n"
        );
        assert_eq!(std::fs::read_dir(&team).unwrap().count(), 1);
    }

    /// An append to the old file after the rename (its writer opened it
    /// before) is carried over, verbatim, after the new text.
    #[test]
    fn an_append_to_the_replaced_file_is_carried_over() {
        let (_tmp, team) = team();
        let p = team.join("decisions.md");
        std::fs::write(&p, "# D\n").unwrap();
        let mut held = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        let (dir, name) = crate::safefs::project_parent(&p, None).unwrap();
        let (file, text) = open_read(&dir, &name, &p).unwrap().unwrap();
        let t = temp(&dir, &name, b"# D\nnew\n", &p).unwrap();
        assert!(replace(&dir, &name, &t, Some(&(file, text)), false, &p).unwrap());
        // The writer that opened the old file writes now, then closes.
        held.write_all(b"### Late entry\n").unwrap();
        drop(held);
        assert_eq!(settle(&dir, &name, &p).unwrap(), "### Late entry\n".len());
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# D\nnew\n\n### Late entry\n"
        );
        // Settled once: a second settle carries nothing, no name is left.
        assert_eq!(settle(&dir, &name, &p).unwrap(), 0);
        assert_eq!(std::fs::read_dir(&team).unwrap().count(), 1);
    }

    /// A `.prev` name left by a killed rewrite is carried over by the next
    /// one, whose carry-over a third run does not repeat.
    #[test]
    fn a_killed_rewrite_is_settled_by_the_next_one() {
        let (_tmp, team) = team();
        let p = team.join("decisions.md");
        std::fs::write(&p, "old\nappended\n").unwrap();
        // The killed writer had read "old\n" (4 bytes) and renamed its text
        // over the file; "appended\n" reached the old file afterwards.
        std::fs::hard_link(&p, team.join(".decisions.md.prev.4.1.0")).unwrap();
        std::fs::write(team.join("new"), "old\nmerged\n").unwrap();
        std::fs::rename(team.join("new"), &p).unwrap();
        let r = rewrite(&p, |t| Ok(Some(format!("{t}more\n")))).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "old\nmerged\n\nappended\nmore\n"
        );
        assert_eq!(r.carried, 0, "carried before, by the settle it starts with");
        assert_eq!(std::fs::read_dir(&team).unwrap().count(), 1);
    }

    /// A file that did not exist is created, unless another writer created
    /// it meanwhile: then computed again from theirs.
    #[test]
    fn a_file_created_meanwhile_is_not_overwritten() {
        let (_tmp, team) = team();
        let p = team.join("decisions-archive.md");
        let mut calls = 0;
        rewrite(&p, |t| {
            calls += 1;
            if calls == 1 {
                std::fs::write(&p, "theirs\n").unwrap();
            }
            Ok(Some(format!("{t}ours\n")))
        })
        .unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "theirs\nours\n");
    }

    #[test]
    fn prev_names_are_read_back() {
        assert_eq!(
            prev_len(".decisions.md.prev.42.7.3", "decisions.md"),
            Some(42)
        );
        assert_eq!(prev_len(".history.md.prev.42.7.3", "decisions.md"), None);
        assert_eq!(prev_len(".decisions.md.tmp.42.7", "decisions.md"), None);
    }
}
