// Over 800 lines: team memory's effects (read, merge the decisions inbox,
// archive, upkeep), each a crash-safe sequence of whole-file replaces
// sharing the aside/restore helpers. The split waiting is the archive into
// memory/archive.rs (issue 42), after issue 41's changes here land.
//! Team memory effects: reading memory files, merging the decisions inbox,
//! archiving old entries. Plain functions so that `squadctl memory` and
//! squadd share them.
//!
//! Crash safety (kill -9 at any instant): every write is a whole-file atomic
//! replace (temp file, fsync, rename), and every step is idempotent by entry
//! identity, so the order of writes decides what a crash can leave:
//! - merge writes decisions.md (inbox entries appended) and only then removes
//!   the inbox files; a crash in between leaves entries in both, and the next
//!   run sees them in decisions.md and appends nothing twice;
//! - archive writes the archive (entries appended) and only then rewrites the
//!   live file without them; a crash in between leaves entries in both, and
//!   the next run skips them in the archive and removes them from the live
//!   file. Readers ([`load`]) count an entry present in both once.
//!
//! Every writer of a team's memory (decisions.md, the archives, histories,
//! the inbox) holds the team's memory lock ([`lock`]) while it reads and
//! writes, so two writers never replace each other's work.

use chrono::{DateTime, Utc};
use squad_policies::memory::{ArchiveRule, EntryFacts, plan};
use squad_protocol::fsx::read_regular_to_string;
use squad_protocol::memory::{self, Document};
use std::path::{Path, PathBuf};

mod shared;
pub(crate) use shared::rewrite;

/// Why a memory file could not be read, merged, archived or backed up;
/// nothing of the file is lost when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// A memory file could not be read (fsx: no-follow, regular, sized).
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: squad_protocol::fsx::ReadError,
    },
    /// A file or directory could not be written, opened or removed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// decisions.md has a fence that never closes: nothing was merged.
    #[error(
        "{}:{line}: a code fence opened here never closes, so no entry below it can be seen (a merge would append them again); close the fence, then merge (nothing was merged)",
        path.display()
    )]
    UnclosedFence {
        /// decisions.md.
        path: PathBuf,
        /// The fence's line.
        line: usize,
    },
    /// Merged entries would not parse back as entries: nothing was merged.
    #[error(
        "{}: {count} appended entries would not read back as entries (nothing was merged); check the inbox files for unbalanced fences or headings",
        path.display()
    )]
    Invisible {
        /// decisions.md.
        path: PathBuf,
        /// How many entries.
        count: usize,
    },
    /// The inbox directory could not be synced after removals.
    #[error("{0}")]
    Sync(#[source] std::io::Error),
}

// The commands not yet converted report errors as `String`: `?` keeps
// working in them until they are.
impl From<MemoryError> for String {
    fn from(e: MemoryError) -> Self {
        e.to_string()
    }
}

/// An I/O error on `path`, as a [`MemoryError`].
fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> MemoryError + '_ {
    move |source| MemoryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Memory files are read up to this size (real decisions.md files reach
/// hundreds of KB; this leaves room without reading anything unbounded).
pub(crate) const READ_LIMIT: u64 = 64 * 1024 * 1024;

/// Which kind of memory file a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FileKind {
    /// decisions.md.
    Decisions,
    /// decisions-archive.md.
    DecisionsArchive,
    /// decisions/inbox/*.md.
    Inbox,
    /// agents/{name}/history.md.
    History,
    /// agents/{name}/history-archive.md.
    HistoryArchive,
}

/// One memory file of a team directory.
#[derive(Debug, Clone)]
pub(crate) struct MemoryFile {
    /// Its path.
    pub path: PathBuf,
    /// What it is.
    pub kind: FileKind,
    /// The agent, for history files.
    pub agent: Option<String>,
}

fn is_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

fn sorted_dir(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The inbox files (`decisions/inbox/*.md`, temp files skipped), sorted.
pub(crate) fn inbox_files(team: &Path) -> Vec<PathBuf> {
    sorted_dir(&team.join("decisions").join("inbox"))
        .into_iter()
        .filter(|p| {
            p.extension().is_some_and(|e| e == "md")
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    !squad_protocol::atomic::is_temp_name(n) && !n.starts_with('.')
                })
                && is_file(p)
        })
        .collect()
}

/// Prefix and suffix of an inbox file a merge has set aside
/// (`.merging.<n>.<name>.aside`): a dot name not ending in `.md`, so Squad's
/// own merge and SquadUI pass it by, and the file an agent opens by its name
/// afterwards is a new one.
const ASIDE: &str = ".merging.";
const ASIDE_END: &str = ".aside";

/// The set-aside name of inbox file `name`, number `n`.
fn aside_name(n: usize, name: &str) -> String {
    format!("{ASIDE}{n}.{name}{ASIDE_END}")
}

/// The inbox name a set-aside file had.
fn aside_original(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(ASIDE)?.strip_suffix(ASIDE_END)?;
    let (n, orig) = rest.split_once('.')?;
    (n.bytes().all(|b| b.is_ascii_digit()) && orig.ends_with(".md")).then_some(orig)
}

/// Inbox files a merge set aside and did not finish (killed), sorted.
pub(crate) fn aside_files(team: &Path) -> Vec<PathBuf> {
    sorted_dir(&team.join("decisions").join("inbox"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| aside_original(n).is_some())
                && is_file(p)
        })
        .collect()
}

/// The memory lock's file, in the team directory.
pub(crate) const LOCK_FILE: &str = ".memory.lock";

/// Holds a team's memory lock (an advisory lock, flock semantics, on
/// `<team>/.memory.lock`) while alive. Its file names the holder.
pub(crate) struct MemoryLock {
    _file: std::fs::File,
}

/// Takes the memory lock of a team directory. With `wait`, blocks until it
/// is free, first saying on stderr who holds it; otherwise `Ok(None)` when
/// it is held. `what` names the holder for whoever waits (`squadctl memory
/// merge`, `squadd`).
pub(crate) fn lock(team: &Path, what: &str, wait: bool) -> Result<Option<MemoryLock>, MemoryError> {
    use std::io::{Read as _, Seek as _, Write as _};
    let path = team.join(LOCK_FILE);
    let err = |e: std::io::Error| io_error(&path)(e);
    let (dir, name) = crate::safefs::project_parent(&path, None).map_err(err)?;
    let mut file = dir
        .open_file(&name, libc::O_RDWR | libc::O_CREAT, 0o644)
        .map_err(err)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) if !wait => return Ok(None),
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = (&file).take(512).read_to_string(&mut holder);
            let holder = holder.trim();
            eprintln!(
                "squadctl: waiting for the memory lock {}: held by {}",
                crate::text::escape(&path.display().to_string()),
                crate::text::escape(if holder.is_empty() {
                    "another process"
                } else {
                    holder
                })
            );
            file.lock().map_err(err)?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(err(e)),
    }
    // Best effort: the lock holds whether or not the name is written.
    let _ = file.set_len(0).and_then(|()| {
        file.rewind()?;
        writeln!(file, "pid {} ({what})", std::process::id())
    });
    Ok(Some(MemoryLock { _file: file }))
}

/// Whether process `pid` exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Removes the temporaries (`.name.tmp.<pid>.<n>`) that memory writers
/// killed mid-write left in the team's memory directories: only for memory
/// file names, only of processes that are gone, never through a link.
/// Called with the memory lock held, so no memory writer is mid-write; it
/// also carries over what other writers appended to a file a killed rewrite
/// replaced (`.<name>.prev.*`, see [`rewrite`]).
pub(crate) fn sweep_temps(team: &Path, _lock: &MemoryLock) -> usize {
    let mut dirs = vec![team.to_path_buf(), team.join("decisions").join("inbox")];
    let agents = team.join("agents");
    for d in sorted_dir(&agents)
        .into_iter()
        .chain(sorted_dir(&agents.join("_alumni")))
    {
        dirs.push(d);
    }
    let backups = team.join(BACKUP_DIR);
    let mut stack = vec![backups];
    while let Some(d) = stack.pop() {
        for c in sorted_dir(&d) {
            if std::fs::symlink_metadata(&c).is_ok_and(|m| m.is_dir()) {
                stack.push(c);
            }
        }
        dirs.push(d);
    }
    let mut removed = 0;
    for d in dirs {
        let Ok((dir, _)) = crate::safefs::project_parent(&d.join("x"), None) else {
            continue;
        };
        let names = dir.names().unwrap_or_default();
        // What other writers appended to files a killed rewrite replaced.
        let mut replaced: Vec<&str> = names
            .iter()
            .filter_map(|n| n.strip_prefix('.')?.split_once(".prev.").map(|(b, _)| b))
            .filter(|b| b.ends_with(".md"))
            .collect();
        replaced.sort_unstable();
        replaced.dedup();
        for base in replaced {
            if let Err(e) = shared::settle(&dir, base, &d.join(base)) {
                tracing::warn!(error = %e, "cannot carry over appends to a replaced memory file");
            }
        }
        for name in &names {
            let Some((base, rest)) = name.strip_prefix('.').and_then(|n| n.split_once(".tmp."))
            else {
                continue;
            };
            let memory_name = base.ends_with(".md") || base.contains(".md.bak");
            let pid = rest.split('.').next().and_then(|p| p.parse::<i32>().ok());
            if memory_name
                && pid.is_some_and(|p| p != std::process::id() as i32 && !alive(p))
                && dir.unlink(name).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// Where `memory convert` keeps originals: a dot directory of the team,
/// outside `decisions/` (Squad's merge takes every non-dot file of the
/// inbox; SquadUI reads every `.md` below `decisions/`).
pub(crate) const BACKUP_DIR: &str = ".memory-backups";

/// Keeps `src`, the original of `file`, as a backup and returns its path:
/// under `<team>/.memory-backups/` (same relative path, `.bak`, `.bak.N`)
/// when the file is in a team directory, else beside it as `.<name>.bak`.
/// A backup with the same content already there is reused, not repeated.
pub(crate) fn backup(team: Option<&Path>, file: &Path, src: &str) -> Result<PathBuf, MemoryError> {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("memory.md");
    let base = match team.and_then(|t| Some((t, file.strip_prefix(t).ok()?))) {
        Some((t, rel)) => t
            .join(BACKUP_DIR)
            .join(rel)
            .with_file_name(format!("{name}.bak")),
        None => file.with_file_name(format!(".{name}.bak")),
    };
    let base_name = base
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("memory.md.bak")
        .to_string();
    let mut b = base.clone();
    let mut n = 1;
    loop {
        match read(&b) {
            Ok(t) if t == src => return Ok(b),
            Ok(_) => {}
            Err(_) if std::fs::symlink_metadata(&b).is_err() => break,
            Err(_) => {}
        }
        b = base.with_file_name(format!("{base_name}.{n}"));
        n += 1;
    }
    crate::safefs::write_project_file(&b, src.as_bytes(), Some(0o700)).map_err(io_error(&b))?;
    Ok(b)
}

/// The team directory a memory file belongs to (its `.squad/` or `.ai-team/`
/// ancestor), if any.
pub(crate) fn team_of(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .find(|a| {
            a.file_name()
                .is_some_and(|n| n == ".squad" || n == ".ai-team")
        })
        .map(Path::to_path_buf)
}

/// Every memory file of a team directory that exists.
pub(crate) fn discover(team: &Path) -> Vec<MemoryFile> {
    let mut out = Vec::new();
    let mut push = |path: PathBuf, kind, agent: Option<String>| {
        if is_file(&path) {
            out.push(MemoryFile { path, kind, agent });
        }
    };
    push(team.join("decisions.md"), FileKind::Decisions, None);
    push(
        team.join("decisions-archive.md"),
        FileKind::DecisionsArchive,
        None,
    );
    for p in inbox_files(team).into_iter().chain(aside_files(team)) {
        push(p, FileKind::Inbox, None);
    }
    let agents = team.join("agents");
    let mut dirs = sorted_dir(&agents);
    dirs.extend(sorted_dir(&agents.join("_alumni")));
    for d in dirs {
        let Some(name) = d.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if name == "_alumni" {
            continue;
        }
        push(d.join("history.md"), FileKind::History, Some(name.clone()));
        push(
            d.join("history-archive.md"),
            FileKind::HistoryArchive,
            Some(name),
        );
    }
    out
}

/// Classifies a path given on the command line.
pub(crate) fn classify(path: &Path) -> MemoryFile {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str());
    let (kind, agent) = match name {
        "decisions-archive.md" => (FileKind::DecisionsArchive, None),
        "history.md" => (FileKind::History, parent.map(str::to_string)),
        "history-archive.md" => (FileKind::HistoryArchive, parent.map(str::to_string)),
        _ if parent == Some("inbox") => (FileKind::Inbox, None),
        _ => (FileKind::Decisions, None),
    };
    MemoryFile {
        path: path.to_path_buf(),
        kind,
        agent,
    }
}

/// Reads a memory file (fsx: no-follow, regular files only, size-limited).
pub(crate) fn read(path: &Path) -> Result<String, MemoryError> {
    read_regular_to_string(path, READ_LIMIT).map_err(|source| MemoryError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a file that may not exist yet (an archive): absent is empty.
fn read_or_empty(path: &Path) -> Result<String, MemoryError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        _ => read(path),
    }
}

/// What a merge did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct MergeReport {
    /// Inbox files read.
    pub inbox_files: usize,
    /// Entries appended to decisions.md.
    pub appended: usize,
    /// Entries decisions.md already held.
    pub duplicates: usize,
    /// Inbox files removed.
    pub removed: Vec<PathBuf>,
    /// Inbox files kept, with the reason.
    pub kept: Vec<(PathBuf, String)>,
}

/// Why an inbox file cannot be merged and removed as a whole, if it cannot.
fn unmergeable(t: &str) -> Option<String> {
    if let Some(line) = memory::unclosed_fence(t) {
        return Some(format!(
            "line {line}: a code fence that never closes; close it, then merge"
        ));
    }
    let doc = memory::parse(t);
    if doc.entries().next().is_none() {
        return Some("no entry found in it".into());
    }
    memory::has_loose_text(t)
        .then(|| "text outside entries; merged its entries, kept the file".into())
}

/// Merges `decisions/inbox/*.md` into decisions.md: appends the entries it
/// lacks in timestamp order, makes decisions.md durable, and only then
/// removes the inbox files whose every entry is now in decisions.md.
///
/// An inbox file is first renamed aside (`.merging.<n>.<name>.aside`, the same
/// inode), then read: an agent that writes to the name afterwards makes a
/// new file, which the next merge takes. The set-aside file is removed only
/// if it still holds exactly the text merged; one that grew meanwhile (an
/// agent that had it open) goes back to the inbox, and the next merge adds
/// what is new. A merge killed midway leaves set-aside files, which the next
/// merge takes first (and `memory query` reads meanwhile).
pub(crate) fn merge_inbox(
    team: &Path,
    dry_run: bool,
    _lock: &MemoryLock,
) -> Result<MergeReport, MemoryError> {
    let live_path = team.join("decisions.md");
    let live = read_or_empty(&live_path)?;
    if let Some(line) = memory::unclosed_fence(&live) {
        return Err(MemoryError::UnclosedFence {
            path: live_path,
            line,
        });
    }
    let inbox = team.join("decisions").join("inbox");
    let mut report = MergeReport::default();
    // (name it had in the inbox, where it is now, its text)
    let mut taken: Vec<(PathBuf, PathBuf, String)> = Vec::new();
    // One team directory from here on, reached once: if another tool moves
    // it away meanwhile (`import --force`), the merge ends in the team its
    // inbox belonged to, never in the one that took its place.
    let (team_dir, live_name) =
        crate::safefs::project_parent(&live_path, None).map_err(io_error(team))?;
    let dir = if dry_run || !inbox.is_dir() {
        None
    } else {
        Some(
            team_dir
                .walk(Path::new("decisions/inbox"), None)
                .map_err(io_error(&inbox))?,
        )
    };
    for p in aside_files(team) {
        let orig = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(aside_original)
            .map_or_else(|| p.clone(), |o| inbox.join(o));
        match read(&p) {
            Ok(t) => taken.push((orig, p, t)),
            Err(e) => report.kept.push((p, e.to_string())),
        }
    }
    for p in inbox_files(team) {
        let t = match read(&p) {
            Ok(t) => t,
            Err(e) => {
                report.kept.push((p, e.to_string()));
                continue;
            }
        };
        if let Some(why) = unmergeable(&t) {
            // Its entries are merged, the file stays where it is (renaming
            // it would wake squadd's inbox watch again and again).
            if memory::unclosed_fence(&t).is_none() {
                taken.push((p.clone(), p.clone(), t));
            }
            report.kept.push((p, why));
            continue;
        }
        let Some(dir) = &dir else {
            taken.push((p.clone(), p, t));
            continue;
        };
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let mut set = None;
        for n in 0..1000 {
            let aside = aside_name(n, name);
            match dir.rename_noreplace(name, dir, &aside) {
                Ok(()) => {
                    set = Some(inbox.join(aside));
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    report.kept.push((p.clone(), e.to_string()));
                    break;
                }
            }
        }
        let Some(aside) = set else { continue };
        // Read again: the text now set aside is what counts.
        match read(&aside) {
            Ok(t) => taken.push((p, aside, t)),
            Err(e) => report.kept.push((aside, e.to_string())),
        }
    }
    report.inbox_files = taken.len()
        + report
            .kept
            .iter()
            .filter(|(p, _)| !taken.iter().any(|t| &t.0 == p))
            .count();
    let mut texts: Vec<&str> = Vec::new();
    for (_, _, t) in &taken {
        if memory::unclosed_fence(t).is_none() {
            texts.push(t);
        }
    }
    if dry_run {
        let m = memory::merge(&live, &texts);
        report.appended = m.appended;
        report.duplicates = m.duplicates;
        return Ok(report);
    }
    let restore_all = |taken: &[(PathBuf, PathBuf, String)]| {
        for (orig, at, _) in taken {
            if orig != at {
                let _ = restore(dir.as_ref(), at, orig);
            }
        }
    };
    // Computed again from decisions.md as it is when written: Squad's
    // Scribe and people append to it without the memory lock.
    let mut output = String::new();
    let written = shared::rewrite_in(&team_dir, &live_name, &live_path, |live| {
        if let Some(line) = memory::unclosed_fence(live) {
            return Err(MemoryError::UnclosedFence {
                path: live_path.clone(),
                line,
            });
        }
        let m = memory::merge(live, &texts);
        if !m.invisible.is_empty() {
            return Err(MemoryError::Invisible {
                path: live_path.clone(),
                count: m.invisible.len(),
            });
        }
        report.appended = m.appended;
        report.duplicates = m.duplicates;
        output = m.output;
        Ok((report.appended > 0).then(|| output.clone()))
    });
    if let Err(e) = written {
        restore_all(&taken);
        return Err(e);
    }
    let merged = memory::parse(&output);
    let have: std::collections::HashSet<String> =
        merged.entries().map(|e| e.identity(&output)).collect();
    for (orig, at, t) in taken {
        if orig == at {
            continue; // kept where it is (reported above)
        }
        let why = unmergeable(&t).or_else(|| {
            let doc = memory::parse(&t);
            doc.entries()
                .any(|e| !have.contains(&e.identity(&t)))
                .then(|| "not all entries are in decisions.md".to_string())
        });
        // Removed only if it still holds exactly what was merged and no one
        // can write to it any more.
        let mut held = None;
        let why = why.or_else(|| match closed_and_unchanged(dir.as_ref(), &at, &t) {
            Ok(f) => {
                held = f;
                None
            }
            Err(why) => Some(why),
        });
        match why {
            None => {
                // `why` is None only with the inbox directory at hand.
                let name = at.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if let Some(d) = &dir {
                    d.unlink(name).map_err(io_error(&at))?;
                }
                drop(held);
                report.removed.push(orig);
            }
            Some(why) => {
                let back = restore(dir.as_ref(), &at, &orig).unwrap_or(at);
                report.kept.push((back, why));
            }
        }
    }
    if let Some(d) = dir.as_ref().filter(|_| !report.removed.is_empty()) {
        d.sync().map_err(MemoryError::Sync)?;
    }
    Ok(report)
}

/// Checks that the set-aside file `at` still holds exactly `text` and that
/// no process has it open for writing: a read lease (`F_SETLEASE`) is
/// granted only then, and while it is held an opener for writing would wait
/// for us. Nobody opens the set-aside name, so after the check nothing can
/// be added to it. Returns the file holding the lease (held until the file
/// is removed); where leases are not supported, the content check alone.
fn closed_and_unchanged(
    dir: Option<&crate::safefs::Dir>,
    at: &Path,
    text: &str,
) -> Result<Option<std::fs::File>, String> {
    use std::io::Read as _;
    use std::os::fd::AsRawFd as _;
    let name = at.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(dir) = dir else {
        return Err("no inbox directory".into());
    };
    let file = dir
        .open_file(name, libc::O_RDONLY, 0)
        .map_err(|e| format!("{}: {e}", at.display()))?;
    // SAFETY: fcntl on a descriptor this function owns.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        return Err("an agent still has it open for writing; merged next time".into());
    }
    let mut now = String::new();
    (&file)
        .take(READ_LIMIT + 1)
        .read_to_string(&mut now)
        .map_err(|e| format!("{}: {e}", at.display()))?;
    if now != text {
        return Err("it changed during the merge; what is new is merged next time".into());
    }
    Ok(Some(file))
}

/// Puts a set-aside inbox file back under its name, or `<stem>-kept-<n>.md`
/// when an agent wrote a new file of that name meanwhile; returns where.
fn restore(dir: Option<&crate::safefs::Dir>, at: &Path, orig: &Path) -> Option<PathBuf> {
    let dir = dir?;
    let from = at.file_name()?.to_str()?;
    let name = orig.file_name()?.to_str()?;
    let stem = name.strip_suffix(".md").unwrap_or(name);
    for n in 0..1000 {
        let to = if n == 0 {
            name.to_string()
        } else {
            format!("{stem}-kept-{n}.md")
        };
        match dir.rename_noreplace(from, dir, &to) {
            Ok(()) => return Some(orig.with_file_name(to)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
    }
    None
}

/// What an archive run did to one file.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ArchiveReport {
    /// The live file.
    pub file: PathBuf,
    /// Its archive.
    pub archive: PathBuf,
    /// Entries the plan moves.
    pub moved: usize,
    /// Entries appended to the archive (the others were there already).
    pub appended: usize,
}

/// The archive of a live memory file: `decisions.md` → `decisions-archive.md`,
/// `history.md` → `history-archive.md`.
pub(crate) fn archive_path(live: &Path) -> PathBuf {
    let stem = live
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("memory");
    live.with_file_name(format!("{stem}-archive.md"))
}

/// Archives one live file by the rule: the archive is written (durably)
/// before the live file loses anything.
pub(crate) fn archive_file(
    live_path: &Path,
    rule: ArchiveRule,
    now: DateTime<Utc>,
    dry_run: bool,
    _lock: &MemoryLock,
) -> Result<ArchiveReport, MemoryError> {
    let archive_path = archive_path(live_path);
    let mut report = ArchiveReport {
        file: live_path.to_path_buf(),
        archive: archive_path.clone(),
        moved: 0,
        appended: 0,
    };
    // The plan is made again from the live file as it is when written
    // (agents append to their histories, the Scribe to decisions.md); the
    // archive is written first, idempotently (entries it holds are skipped).
    let mut plan_of = |live: &str| -> Result<Option<String>, MemoryError> {
        let doc: Document = memory::parse(live);
        let facts: Vec<EntryFacts> = doc
            .entries()
            .map(|e| EntryFacts {
                moment: e.moment(),
                bytes: (e.span.end - e.span.start) as u64,
            })
            .collect();
        let moves = plan(&facts, live.len() as u64, rule, now);
        report.moved = moves.iter().filter(|m| **m).count();
        if dry_run || report.moved == 0 {
            let archive = read_or_empty(&archive_path)?;
            report.appended = memory::split_archive(live, &archive, &moves).2;
            return Ok(None);
        }
        report.appended = 0;
        shared::rewrite(&archive_path, |archive| {
            let (new_archive, _, appended) = memory::split_archive(live, archive, &moves);
            report.appended = appended;
            Ok((appended > 0).then_some(new_archive))
        })?;
        Ok(Some(memory::split_archive(live, "", &moves).1))
    };
    if dry_run {
        plan_of(&read(live_path)?)?;
    } else {
        shared::rewrite(live_path, plan_of)?;
    }
    Ok(report)
}

/// Archives decisions.md and every agent's history.md.
pub(crate) fn archive_team(
    team: &Path,
    rule: ArchiveRule,
    now: DateTime<Utc>,
    dry_run: bool,
    lock: &MemoryLock,
) -> Result<Vec<ArchiveReport>, MemoryError> {
    discover(team)
        .into_iter()
        .filter(|f| matches!(f.kind, FileKind::Decisions | FileKind::History))
        .map(|f| archive_file(&f.path, rule, now, dry_run, lock))
        .collect()
}

/// Diagnostics of memory files, for `memory validate`, `validate` and `check`.
/// `legacy` adds a notice per legacy entry (only `memory validate` asks: real
/// teams' files are mostly legacy, and `validate` must stay quiet about it).
pub(crate) fn diagnostics(files: &[MemoryFile], legacy: bool) -> Vec<squad_protocol::Diagnostic> {
    let mut docs = Vec::new();
    let mut out = Vec::new();
    for f in files {
        match read(&f.path) {
            Ok(t) => docs.push((f.path.clone(), memory::parse(&t))),
            Err(e) => out.push(squad_protocol::Diagnostic::new(
                &f.path,
                squad_protocol::Rule::Unreadable,
                e.to_string(),
                "check the file's type and permissions",
            )),
        }
    }
    let mut known = memory::Known::default();
    for (_, d) in &docs {
        known.add(d);
    }
    let now = Utc::now().fixed_offset();
    for (p, d) in &docs {
        out.extend(memory::validate(p, d, &known, now, legacy));
    }
    out
}

/// The memory diagnostics of a project (`squadctl validate` and `check`):
/// diagnostics and the number of files read.
pub(crate) fn project_diagnostics(project: &Path) -> (Vec<squad_protocol::Diagnostic>, usize) {
    let dir = if project.as_os_str().is_empty() {
        Path::new(".")
    } else {
        project
    };
    let Some(team) = squad_protocol::teamdir::locate(dir) else {
        return (Vec::new(), 0);
    };
    let files = discover(&team.path);
    (diagnostics(&files, false), files.len())
}

#[cfg(test)]
mod error_tests {
    use super::*;

    /// A refused merge is a typed error naming decisions.md and the line,
    /// with the message `memory merge` has always printed; nothing changes.
    #[test]
    fn a_merge_refused_for_an_unclosed_fence_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let team = dir.path();
        let live = "# Decisions\n\n```\nnever closed\n";
        std::fs::write(team.join("decisions.md"), live).unwrap();
        let held = lock(team, "test", false).unwrap().unwrap();
        let e = merge_inbox(team, false, &held).unwrap_err();
        assert!(
            matches!(&e, MemoryError::UnclosedFence { line: 3, path } if *path == team.join("decisions.md")),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}:3: a code fence opened here never closes, so no entry below it can be seen (a merge would append them again); close the fence, then merge (nothing was merged)",
                team.join("decisions.md").display()
            )
        );
        assert_eq!(
            std::fs::read_to_string(team.join("decisions.md")).unwrap(),
            live
        );
    }
}
