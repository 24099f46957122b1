//! Finding protocol files on disk and validating whole trees, using every core.
//!
//! Layout (docs/protocol.md, "On-disk layout"): `<root>/.squad/sessions/<session>/<file>.md`.
//! Only the top level of a session directory holds protocol files;
//! `artifacts/`, `locks/` and `inbox/` are not protocol files.

use crate::diagnostic::Diagnostic;
use crate::kind::FileKind;
use crate::session::{SessionFinding, check_session};
use crate::validate::{Finding, check_file, place, read_limited};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The project's squad directory name.
pub const SQUAD_DIR: &str = ".squad";
/// Sessions live in `.squad/sessions/`.
pub const SESSIONS_DIR: &str = "sessions";
/// Archived sessions live in `.squad/archives/`.
pub const ARCHIVES_DIR: &str = "archives";
/// Runtime files (socket, pid, lock mutex) live in `.squad/run/`.
pub const RUN_DIR: &str = "run";
/// A session's lock records live in its `locks/`.
pub const LOCKS_DIR: &str = "locks";

/// The nearest directory at or above `start` that holds a `.squad/` directory.
pub fn find_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|dir| dir.join(SQUAD_DIR).is_dir())
        .map(Path::to_path_buf)
}

/// The sessions directory of a project root.
pub fn sessions_dir(root: &Path) -> PathBuf {
    root.join(SQUAD_DIR).join(SESSIONS_DIR)
}

/// What a path given to `squadctl validate` stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One protocol file (file rules only).
    File(PathBuf, FileKind),
    /// One session directory.
    Session(PathBuf),
    /// A project root (every session under `.squad/sessions/`).
    Root(PathBuf),
}

/// Classifies a path: a file, a session directory, a project root, the
/// `.squad` directory or its `sessions` directory.
pub fn classify(path: &Path) -> io::Result<Scope> {
    let meta = fs::metadata(path)?;
    // `.` and `..` have no name of their own; use the directory's real one.
    let path = &if path.file_name().is_none() {
        fs::canonicalize(path)?
    } else {
        path.to_path_buf()
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    if !meta.is_dir() {
        let kind = name.as_deref().and_then(FileKind::from_file_name);
        return match kind {
            Some(kind) => Ok(Scope::File(path.to_path_buf(), kind)),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "`{}` is not a protocol file name (session-status.md, role-plan-*.md, role-comm-*.md, error-*.md)",
                    path.display()
                ),
            )),
        };
    }
    if path.join(SQUAD_DIR).is_dir() {
        return Ok(Scope::Root(path.to_path_buf()));
    }
    let parent = path.parent().unwrap_or(Path::new(""));
    match name.as_deref() {
        Some(SQUAD_DIR) => Ok(Scope::Root(parent.to_path_buf())),
        Some(SESSIONS_DIR) if parent.file_name().is_some_and(|n| n == SQUAD_DIR) => Ok(
            Scope::Root(parent.parent().unwrap_or(Path::new("")).to_path_buf()),
        ),
        _ => Ok(Scope::Session(path.to_path_buf())),
    }
}

/// The protocol files at the top level of a session directory, sorted by name.
pub fn session_files(dir: &Path) -> io::Result<Vec<(PathBuf, FileKind)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(kind) = FileKind::from_file_name(name) {
            files.push((dir.join(name), kind));
        }
    }
    files.sort();
    Ok(files)
}

/// The session directories of a project root, sorted by name.
pub fn session_dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let dir = sessions_dir(root);
    let mut names = Vec::new();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        // Never follow a symlink out of the tree; dot-directories are
        // sessions still being created (see `squadctl session new`).
        let name = entry.file_name();
        if entry.file_type()?.is_dir() && !name.as_encoded_bytes().starts_with(b".") {
            names.push(name);
        }
    }
    // All share one parent: ordered by the name's bytes, which is the
    // order of the paths. Sorted as names and joined after: comparing
    // paths re-parses their components at each comparison (a third of the
    // guard's listing cost).
    names.sort_unstable();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// The outcome of validating a set of paths.
#[derive(Debug, Default)]
pub struct Validation {
    /// Number of protocol files examined.
    pub files_checked: usize,
    /// Number of session directories examined.
    pub sessions_checked: usize,
    /// Every diagnostic, in path order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Validation {
    /// Number of error diagnostics.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warning diagnostics.
    pub fn warnings(&self) -> usize {
        self.diagnostics.len() - self.errors()
    }
}

/// Validates files, session directories and roots; `threads` workers parse
/// files in parallel (1 means on the calling thread).
pub fn validate_scopes(scopes: &[Scope], threads: usize) -> io::Result<Validation> {
    let mut sessions: Vec<PathBuf> = Vec::new();
    let mut loose: Vec<(PathBuf, FileKind)> = Vec::new();
    for scope in scopes {
        match scope {
            Scope::File(path, kind) => loose.push((path.clone(), *kind)),
            Scope::Session(dir) => sessions.push(dir.clone()),
            Scope::Root(root) => sessions.extend(session_dirs(root)?),
        }
    }
    sessions.sort();
    sessions.dedup();

    // One flat work list so the workers stay busy across small sessions.
    let mut work: Vec<(PathBuf, FileKind)> = Vec::new();
    let mut ranges: Vec<(PathBuf, std::ops::Range<usize>)> = Vec::new();
    for dir in &sessions {
        let files = session_files(dir)?;
        let start = work.len();
        work.extend(files);
        ranges.push((dir.clone(), start..work.len()));
    }
    let loose_start = work.len();
    work.extend(loose);

    let reports = parallel_map(&work, threads, |(path, kind)| check_file(path, *kind));

    let mut validation = Validation {
        files_checked: reports.len(),
        sessions_checked: sessions.len(),
        diagnostics: Vec::new(),
    };
    for (dir, range) in &ranges {
        let session_reports = &reports[range.clone()];
        let findings = check_session(dir, session_reports);
        for report in session_reports {
            validation
                .diagnostics
                .extend(report.diagnostics.iter().cloned());
        }
        validation
            .diagnostics
            .extend(place_session_findings(findings));
    }
    for report in &reports[loose_start..] {
        validation
            .diagnostics
            .extend(report.diagnostics.iter().cloned());
    }
    validation
        .diagnostics
        .sort_by(|a, b| (&a.path, a.location, a.rule).cmp(&(&b.path, b.location, b.rule)));
    Ok(validation)
}

/// Turns session findings into diagnostics, reading each file that has a
/// finding once to place its findings.
pub fn place_session_findings(findings: Vec<SessionFinding>) -> Vec<Diagnostic> {
    place_session_findings_with(findings, |path| {
        read_limited(path)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .map(std::borrow::Cow::Owned)
    })
}

/// Turns session findings into diagnostics, placing them in the text
/// `text_of` gives for each file (the daemon keeps the indexed text of plans
/// and status files, and field positions of the others, so placing never
/// reads the disk again).
pub fn place_session_findings_with<'a>(
    findings: Vec<SessionFinding>,
    text_of: impl Fn(&Path) -> Option<std::borrow::Cow<'a, str>>,
) -> Vec<Diagnostic> {
    let mut by_file: Vec<(PathBuf, bool, Vec<Finding>)> = Vec::new();
    for f in findings {
        match by_file.iter_mut().find(|(p, _, _)| *p == f.path) {
            Some((_, _, list)) => list.push(f.finding),
            None => by_file.push((f.path, f.on_directory, vec![f.finding])),
        }
    }
    by_file
        .into_iter()
        .flat_map(|(path, on_directory, findings)| {
            let text = (!on_directory).then(|| text_of(&path)).flatten();
            place_in_text(&path, text.as_deref(), findings)
        })
        .collect()
}

/// Places findings in a file by reading it again (only files with session
/// findings pay for this).
pub fn place_on_disk(path: &Path, on_directory: bool, findings: Vec<Finding>) -> Vec<Diagnostic> {
    let text = (!on_directory)
        .then(|| read_limited(path).ok())
        .flatten()
        .and_then(|b| String::from_utf8(b).ok());
    place_in_text(path, text.as_deref(), findings)
}

/// Places findings in a file's text (without a text: no positions).
pub fn place_in_text(path: &Path, text: Option<&str>, findings: Vec<Finding>) -> Vec<Diagnostic> {
    match text.map(crate::payload::extract) {
        Some(Ok(payload)) => place(path, payload.yaml, payload.line_offset, findings),
        _ => findings
            .into_iter()
            .map(|f| Diagnostic::new(path, f.rule, f.message, f.hint))
            .collect(),
    }
}

/// Maps `f` over `items` on `threads` scoped threads, preserving order.
pub fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut parts: Vec<Vec<(usize, R)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut local = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        local.push((i, f(item)));
                    }
                    local
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut all: Vec<(usize, R)> = parts.drain(..).flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

/// The number of worker threads to use by default: every available core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
