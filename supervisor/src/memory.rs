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

use crate::safefs::write_atomic;
use chrono::{DateTime, Utc};
use squad_policies::memory::{ArchiveRule, EntryFacts, plan};
use squad_protocol::atomic::sync_dir;
use squad_protocol::fsx::read_regular_to_string;
use squad_protocol::memory::{self, Document};
use std::path::{Path, PathBuf};

/// Memory files are read up to this size (real decisions.md files reach
/// hundreds of KB; this leaves room without reading anything unbounded).
pub const READ_LIMIT: u64 = 64 * 1024 * 1024;

/// Which kind of memory file a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
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
pub struct MemoryFile {
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
pub fn inbox_files(team: &Path) -> Vec<PathBuf> {
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

/// Every memory file of a team directory that exists.
pub fn discover(team: &Path) -> Vec<MemoryFile> {
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
    for p in inbox_files(team) {
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
pub fn classify(path: &Path) -> MemoryFile {
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
pub fn read(path: &Path) -> Result<String, String> {
    read_regular_to_string(path, READ_LIMIT).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a file that may not exist yet (an archive): absent is empty.
fn read_or_empty(path: &Path) -> Result<String, String> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        _ => read(path),
    }
}

/// What a merge did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MergeReport {
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

/// Merges `decisions/inbox/*.md` into decisions.md: appends the entries it
/// lacks in timestamp order, makes decisions.md durable, and only then
/// removes the inbox files whose every word is now in decisions.md.
pub fn merge_inbox(team: &Path, dry_run: bool) -> Result<MergeReport, String> {
    let live_path = team.join("decisions.md");
    let live = read_or_empty(&live_path)?;
    let mut report = MergeReport::default();
    let mut texts = Vec::new();
    for p in inbox_files(team) {
        match read(&p) {
            Ok(t) => texts.push((p, t)),
            Err(e) => report.kept.push((p, e)),
        }
    }
    report.inbox_files = texts.len() + report.kept.len();
    let srcs: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
    let m = memory::merge(&live, &srcs);
    report.appended = m.appended;
    report.duplicates = m.duplicates;
    if dry_run {
        return Ok(report);
    }
    if m.appended > 0 {
        write_atomic(&live_path, m.output.as_bytes())
            .map_err(|e| format!("{}: {e}", live_path.display()))?;
    }
    // Remove an inbox file only when it holds entries and nothing else, and
    // each of its entries is in the durable decisions.md.
    let merged = memory::parse(&m.output);
    let have: std::collections::HashSet<String> =
        merged.entries().map(|e| e.identity(&m.output)).collect();
    for (p, t) in texts {
        let doc = memory::parse(&t);
        let entries: Vec<_> = doc.entries().collect();
        if entries.is_empty() {
            report.kept.push((p, "no entry found in it".into()));
        } else if memory::has_loose_text(&t) {
            report.kept.push((
                p,
                "text outside entries; merged its entries, kept the file".into(),
            ));
        } else if entries.iter().any(|e| !have.contains(&e.identity(&t))) {
            report
                .kept
                .push((p, "not all entries are in decisions.md".into()));
        } else {
            crate::safefs::remove_project_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            report.removed.push(p);
        }
    }
    if !report.removed.is_empty() {
        sync_dir(&team.join("decisions").join("inbox")).map_err(|e| e.to_string())?;
    }
    Ok(report)
}

/// What an archive run did to one file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArchiveReport {
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
pub fn archive_path(live: &Path) -> PathBuf {
    let stem = live
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("memory");
    live.with_file_name(format!("{stem}-archive.md"))
}

/// Archives one live file by the rule: the archive is written (durably)
/// before the live file loses anything.
pub fn archive_file(
    live_path: &Path,
    rule: ArchiveRule,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<ArchiveReport, String> {
    let live = read(live_path)?;
    let archive_path = archive_path(live_path);
    let archive = read_or_empty(&archive_path)?;
    let doc: Document = memory::parse(&live);
    let facts: Vec<EntryFacts> = doc
        .entries()
        .map(|e| EntryFacts {
            moment: e.moment(),
            bytes: (e.span.end - e.span.start) as u64,
        })
        .collect();
    let moves = plan(&facts, live.len() as u64, rule, now);
    let moved = moves.iter().filter(|m| **m).count();
    let (new_archive, new_live, appended) = memory::split_archive(&live, &archive, &moves);
    let report = ArchiveReport {
        file: live_path.to_path_buf(),
        archive: archive_path.clone(),
        moved,
        appended,
    };
    if dry_run || moved == 0 {
        return Ok(report);
    }
    if appended > 0 {
        write_atomic(&archive_path, new_archive.as_bytes())
            .map_err(|e| format!("{}: {e}", archive_path.display()))?;
    }
    write_atomic(live_path, new_live.as_bytes())
        .map_err(|e| format!("{}: {e}", live_path.display()))?;
    Ok(report)
}

/// Archives decisions.md and every agent's history.md.
pub fn archive_team(
    team: &Path,
    rule: ArchiveRule,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<Vec<ArchiveReport>, String> {
    discover(team)
        .into_iter()
        .filter(|f| matches!(f.kind, FileKind::Decisions | FileKind::History))
        .map(|f| archive_file(&f.path, rule, now, dry_run))
        .collect()
}

/// Diagnostics of memory files, for `memory validate`, `validate` and `check`.
/// `legacy` adds a notice per legacy entry (only `memory validate` asks: real
/// teams' files are mostly legacy, and `validate` must stay quiet about it).
pub fn diagnostics(files: &[MemoryFile], legacy: bool) -> Vec<squad_protocol::Diagnostic> {
    let mut docs = Vec::new();
    let mut out = Vec::new();
    for f in files {
        match read(&f.path) {
            Ok(t) => docs.push((f.path.clone(), memory::parse(&t))),
            Err(e) => out.push(squad_protocol::Diagnostic::new(
                &f.path,
                squad_protocol::Rule::Unreadable,
                e,
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
pub fn project_diagnostics(project: &Path) -> (Vec<squad_protocol::Diagnostic>, usize) {
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
