// Over 800 lines: the team directory's effects in three sections (an
// export gathered, an import written all or nothing through its journal,
// the diagnostics); the journal's crash points and the import share
// private helpers. The split waiting is the import and its journal into
// team/import.rs (issue 42), after issue 41's changes here land.
//! The team directory's effects (docs/team.md): gathering skill folders for
//! an export, writing an import all or nothing, and the team's diagnostics
//! for `squadctl validate`/`check` and squadd's status.
//!
//! Parsing and checking live in `squad_protocol::team`; this module only
//! reads folders and writes files.

use squad_protocol::Diagnostic;
use squad_protocol::fsx;
use squad_protocol::team::bundle::{self, Bundle, ImportOptions, Plan, SkillFiles};
use squad_protocol::team::{MAX_TEAM_FILE_BYTES, Team, Texts, read_team, read_team_with};
use squad_protocol::teamdir::{self, LEGACY_TEAM_DIR, TEAM_DIR, TeamDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The project's team problems, as `squadctl validate`/`check` and squadd's
/// status report them: `(diagnostics, files read)`. Nothing when the
/// project has no team directory (a protocol-only project).
pub(crate) fn project_diagnostics(project: &Path) -> (Vec<Diagnostic>, usize) {
    match teamdir::locate(project) {
        Some(t) if !t.from_main_checkout && holds_team(&t.path) => {
            let team = read_team(&t);
            (team.diagnostics, team.files)
        }
        _ => (Vec::new(), 0),
    }
}

/// Whether a team directory holds a team (team.md, casting/ or
/// routing.md): a `.squad/` made by `squadctl init` for sessions only, or
/// holding only agents' skills, is not one and has no team to validate.
pub(crate) fn holds_team(dir: &Path) -> bool {
    ["team.md", "casting", "routing.md"]
        .iter()
        .any(|f| std::fs::symlink_metadata(dir.join(f)).is_ok())
}

/// Checks `path` when it names a team file (`<team>/team.md`,
/// `routing.md`, `ceremonies.md`, `casting/*.json`,
/// `agents/<name>/charter.md|history.md`): the diagnostics of its team that
/// are about that file. `None` for anything else. `squadctl validate PATH`
/// routes such paths here.
pub(crate) fn check_target(path: &Path) -> Option<(Vec<Diagnostic>, usize)> {
    let parts: Vec<&std::ffi::OsStr> = path.iter().collect();
    let at = parts
        .iter()
        .rposition(|p| *p == TEAM_DIR || *p == LEGACY_TEAM_DIR)?;
    let rel: Vec<&str> = parts[at + 1..]
        .iter()
        .map(|p| p.to_str())
        .collect::<Option<_>>()?;
    let is_team_file = match rel.as_slice() {
        [f] => matches!(*f, "team.md" | "routing.md" | "ceremonies.md"),
        ["casting", f] => f.ends_with(".json"),
        ["agents", _, f] | ["agents", "_alumni", _, f] => {
            matches!(*f, "charter.md" | "history.md")
        }
        _ => false,
    };
    if !is_team_file || !std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir()) {
        return None;
    }
    let project: PathBuf = parts[..at].iter().collect();
    let team = teamdir::locate(&project)?;
    let team = read_team(&team);
    let diagnostics = team
        .diagnostics
        .into_iter()
        .filter(|d| d.path == path)
        .collect();
    Some((diagnostics, 1))
}

/// The team's health, as squadd's status reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TeamHealth {
    /// Whether the project has a team directory.
    pub present: bool,
    /// Roster members.
    pub members: usize,
    /// Errors found.
    pub errors: usize,
    /// Warnings found.
    pub warnings: usize,
    /// The first problems, `path:line:col: severity[rule]: message`.
    pub problems: Vec<String>,
}

/// Reads the team and summarises what is wrong (squadd's status).
pub(crate) fn health(project: &Path) -> TeamHealth {
    let Some(t) = teamdir::locate(project).filter(|t| !t.from_main_checkout && holds_team(&t.path))
    else {
        return TeamHealth::default();
    };
    // decisions.md and the histories only probed: status stays flat in the
    // team's history (issue 43 item 4).
    let team = read_team_with(&t, Texts::Roster);
    let errors = team.diagnostics.iter().filter(|d| d.is_error()).count();
    let mut sorted: Vec<&Diagnostic> = team.diagnostics.iter().collect();
    // Errors first: those are what status must show.
    sorted.sort_by_key(|d| !d.is_error());
    TeamHealth {
        present: true,
        members: team.roster.members.len(),
        errors,
        warnings: team.diagnostics.len() - errors,
        // Paths relative to the project, as the skills' problems are shown.
        problems: sorted
            .iter()
            .take(5)
            .map(|d| {
                let mut d = (*d).clone();
                if let Ok(rel) = d.path.strip_prefix(project) {
                    d.path = rel.to_path_buf();
                }
                d.to_string()
            })
            .collect(),
    }
}

/// Whether a changed path is one of the team files squadd follows: team.md,
/// routing.md, ceremonies.md, casting/, agents/ (charters, histories).
pub(crate) fn is_team_path(root: &Path, path: &Path) -> bool {
    [TEAM_DIR, LEGACY_TEAM_DIR].iter().any(|d| {
        let Ok(rel) = path.strip_prefix(root.join(d)) else {
            return false;
        };
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts
            .last()
            .is_some_and(|n| squad_protocol::atomic::is_temp_name(n))
        {
            return false;
        }
        match parts.as_slice() {
            [f] => matches!(
                f.as_str(),
                "team.md" | "routing.md" | "ceremonies.md" | "casting" | "agents"
            ),
            [dir, _] => dir == "casting" || dir == "agents",
            [agents, _, f] => {
                agents == "agents" && matches!(f.as_str(), "charter.md" | "history.md")
            }
            _ => false,
        }
    })
}

/// The directories squadd watches for team changes (those that exist).
pub(crate) fn watch_dirs(root: &Path) -> Vec<PathBuf> {
    let Some(t) = teamdir::locate(root).filter(|t| !t.from_main_checkout) else {
        return Vec::new();
    };
    let mut out = vec![t.path.clone()];
    for sub in ["casting", "agents"] {
        let d = t.path.join(sub);
        if std::fs::symlink_metadata(&d).is_ok_and(|m| m.is_dir()) {
            out.push(d.clone());
            if sub == "agents"
                && let Ok(entries) = std::fs::read_dir(&d)
            {
                for e in entries.flatten() {
                    if std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir()) {
                        out.push(e.path());
                    }
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------

/// Reads a skill folder's files (relative `/` paths to text): regular UTF-8
/// files of at most 16 MiB, at most 8 levels deep, dot files and names that
/// could not be imported left out. What is left out is said in `notes`.
pub(crate) fn read_skill_folder(dir: &Path, label: &str, notes: &mut Vec<String>) -> SkillFiles {
    let mut out = SkillFiles::new();
    walk(dir, "", 0, label, &mut out, notes);
    out
}

fn walk(
    dir: &Path,
    prefix: &str,
    depth: usize,
    label: &str,
    out: &mut SkillFiles,
    notes: &mut Vec<String>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            notes.push(format!(
                "{label}: a file name that is not UTF-8 is left out"
            ));
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let rel = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if let Some(p) = bundle::name_problem(&name) {
            notes.push(format!("{label}/{rel}: left out (the name {p})"));
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            if depth + 1 >= bundle::MAX_SKILL_PATH_DEPTH {
                notes.push(format!("{label}/{rel}: left out (too deep)"));
            } else {
                walk(&e.path(), &rel, depth + 1, label, out, notes);
            }
            continue;
        }
        match fsx::read_regular_to_string(&e.path(), MAX_TEAM_FILE_BYTES) {
            Ok(text) => {
                out.insert(rel, text);
            }
            Err(err) => notes.push(format!("{label}/{rel}: left out ({err})")),
        }
    }
}

fn real_subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    if !squad_protocol::team::read::is_real_dir(dir) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
        .filter(|(n, _)| !n.starts_with('.'))
        .collect();
    out.sort();
    out
}

/// Why the skill place `dir` (under `project`) is not read, when a
/// directory on the way to it is a symbolic link (`.claude -> ~/dotfiles`):
/// an export never reads through a link, which may lead out of the project
/// and pack someone else's files. `None` when every component is real.
fn linked_component(project: &Path, dir: &Path) -> Option<String> {
    let rel = dir.strip_prefix(project).ok()?;
    let mut at = project.to_path_buf();
    for c in rel.components() {
        at.push(c);
        let meta = std::fs::symlink_metadata(crate::root::fs_path(&at)).ok()?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(crate::root::fs_path(&at))
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into());
            let leaves = match (
                std::fs::canonicalize(crate::root::fs_path(&at)),
                std::fs::canonicalize(crate::root::fs_path(project)),
            ) {
                (Ok(t), Ok(p)) if t.starts_with(&p) => "",
                _ => ", out of the project",
            };
            return Some(format!(
                "{}: not exported: {} is a symbolic link (to {target}{leaves}); an export never reads through a link",
                dir.display(),
                at.display()
            ));
        }
    }
    None
}

/// The entries of `dir` that are symbolic links (skill folders an export
/// leaves out), sorted.
fn linked_entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Whether a skill folder is a built-in squadctl installed (it ships with
/// the binary: exporting it would only make a `-imported` copy).
fn is_installed_builtin(name: &str, dir: &Path) -> bool {
    crate::skills::BUILTINS.iter().any(|b| b.name == name)
        && dir.join(crate::skills::RECORD_FILE).exists()
}

/// The skills an export carries: the team's (from every skill place, the
/// first of a name wins) and each agent's own, with notes on what is left
/// out.
#[allow(clippy::type_complexity)]
pub(crate) fn gather_skills(
    team: &TeamDir,
) -> (
    BTreeMap<String, SkillFiles>,
    BTreeMap<String, BTreeMap<String, SkillFiles>>,
    Vec<String>,
) {
    let mut notes = Vec::new();
    let mut skills = BTreeMap::new();
    let mut places = vec![team.path.join("skills")];
    places.extend(
        squad_protocol::skill::discover::PROJECT_SKILL_DIRS
            .iter()
            .map(|d| team.project.join(d)),
    );
    for place in places {
        if let Some(note) = linked_component(&team.project, &place) {
            notes.push(note);
            continue;
        }
        for link in linked_entries(&place) {
            notes.push(format!(
                "{}: not exported: a skill folder that is a symbolic link (an export never reads through a link)",
                link.display()
            ));
        }
        for (name, dir) in real_subdirs(&place) {
            if skills.contains_key(&name) || is_installed_builtin(&name, &dir) {
                continue;
            }
            if bundle::name_problem(&name).is_some() {
                continue;
            }
            let label = dir.display().to_string();
            let files = read_skill_folder(&dir, &label, &mut notes);
            if files.contains_key(squad_protocol::skill::SKILL_FILE) {
                skills.insert(name, files);
            }
        }
    }
    let mut agent_skills = BTreeMap::new();
    for (agent, dir) in real_subdirs(&team.path.join("agents")) {
        let mut mine = BTreeMap::new();
        for (name, sdir) in real_subdirs(&dir.join("skills")) {
            let label = sdir.display().to_string();
            let files = read_skill_folder(&sdir, &label, &mut notes);
            if files.contains_key(squad_protocol::skill::SKILL_FILE) {
                mine.insert(name, files);
            }
        }
        if !mine.is_empty() {
            agent_skills.insert(agent, mine);
        }
    }
    (skills, agent_skills, notes)
}

/// The files of each agent's folder an export carries besides `charter.md`,
/// `history.md` and `skills/` (`history-archive.md`, which `memory archive`
/// writes, notes, …): by folder, retired agents' by `_alumni/<folder>`, with
/// notes naming what is left out (not UTF-8 text, too large, a link).
pub(crate) fn gather_agent_files(team: &TeamDir) -> (BTreeMap<String, SkillFiles>, Vec<String>) {
    let alumni = squad_protocol::team::read::ALUMNI_DIR;
    let agents = team.path.join("agents");
    let mut dirs: Vec<(String, PathBuf)> = real_subdirs(&agents)
        .into_iter()
        .filter(|(n, _)| n != alumni)
        .collect();
    for (n, d) in real_subdirs(&agents.join(alumni)) {
        dirs.push((format!("{alumni}/{n}"), d));
    }
    let mut notes = Vec::new();
    let mut out = BTreeMap::new();
    for (key, dir) in dirs {
        let label = dir.display().to_string();
        let mut files = read_skill_folder(&dir, &label, &mut notes);
        files.retain(|rel, _| {
            !matches!(rel.as_str(), "charter.md" | "history.md") && !rel.starts_with("skills/")
        });
        if !files.is_empty() {
            out.insert(key, files);
        }
    }
    // The agents' skills were read (and their problems said) with the skills.
    notes.retain(|n| !n.contains("/skills/"));
    (out, notes)
}

/// The `**Owner:**` of the roster's Project Context, if any.
pub(crate) fn owner(team: &Team) -> String {
    team.team_md
        .as_deref()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let l = l.trim_start_matches(['-', '*', ' ']);
                let rest = l
                    .strip_prefix("**Owner:**")
                    .or_else(|| l.strip_prefix("Owner:**"))?;
                Some(rest.trim().to_string())
            })
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------

/// The marker file of a staging directory still being built.
const STAGING_MARKER: &str = ".squad-import-staging";

/// What an import did (or would do).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ImportReport {
    /// The team directory written.
    pub target: PathBuf,
    /// Where the old team went (`--force`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
    /// Files written (or to be written).
    pub files: Vec<PathBuf>,
    /// Agents imported.
    pub agents: Vec<String>,
    /// Team skills imported (their names on disk).
    pub skills: Vec<String>,
    /// The shape of the file read.
    pub shape: &'static str,
    /// Remarks (renamed skills, parts not imported, leftovers cleaned).
    pub notes: Vec<String>,
    /// Nothing was written.
    pub dry_run: bool,
}

fn staging_prefix(target_name: &str) -> String {
    format!("{target_name}.import-")
}

fn stamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string()
}

/// A free `<dir>-backup-<timestamp>[-n]` beside `target`.
fn backup_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| TEAM_DIR.into());
    let base = format!("{name}-backup-{}", stamp());
    let mut candidate = target.with_file_name(&base);
    let mut n = 1;
    while std::fs::symlink_metadata(&candidate).is_ok() {
        candidate = target.with_file_name(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

/// Cleans what an import killed earlier left beside `target`: an unfinished
/// staging directory (it holds the marker) is removed; a directory without
/// the marker is an old team swapped out just before the kill, and is moved
/// to a backup name, never deleted.
fn clean_leftovers(project: &Path, target: &Path, notes: &mut Vec<String>) {
    let Some(target_name) = target.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let prefix = staging_prefix(target_name);
    let Ok(entries) = std::fs::read_dir(crate::root::fs_path(project)) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix) {
            continue;
        }
        let path = e.path();
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        // Another import running now (its pid alive) is left alone.
        let pid = name[prefix.len()..]
            .split('-')
            .next()
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(pid) = pid
            && pid != std::process::id() as i32
            && pid_alive(pid)
        {
            continue;
        }
        let is_staging = path.join(STAGING_MARKER).exists()
            || std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none());
        if is_staging {
            if std::fs::remove_dir_all(&path).is_ok() {
                notes.push(format!(
                    "removed {} (an import interrupted earlier)",
                    path.display()
                ));
            }
        } else {
            let backup = backup_path(target);
            if std::fs::rename(&path, &backup).is_ok() {
                notes.push(format!(
                    "{} (a team an interrupted import had swapped out) moved to {}",
                    path.display(),
                    backup.display()
                ));
                keep_non_team_entries(&backup, target, notes);
            }
        }
    }
    // A marker a kill left in the team itself (after the swap).
    let _ = std::fs::remove_file(target.join(STAGING_MARKER));
}

/// Removes what a squadctl killed while writing the journal itself left
/// (`..squad-import-journal.json.tmp.PID.N`, no process PID any more): the
/// journal never came to be, so nothing else would ever remove it. A live
/// writer's temporary stays; a link is removed, never followed.
fn remove_dead_journal_temporaries(dir: &Path) {
    let prefix = format!(".{JOURNAL_FILE}.tmp.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|tail| tail.split('.').next())
            .and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|p| !pid_alive(p)) && e.file_type().is_ok_and(|t| !t.is_dir()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Whether a process with this pid exists (signal 0 probes without
/// sending anything; EPERM means it exists but is someone else's).
fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks the pid.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Creates `path` (never through an existing entry or symlink), writes
/// and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Fsyncs the directory `path`, opened as a directory without following a
/// link (a FIFO or link planted there is refused at once, never waited on).
fn sync_dir(path: &Path) -> std::io::Result<()> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
            crate::safefs::Dir::open_root(parent)?
                .open_dir(name)?
                .sync()
        }
        // The project root itself (the operator's choice, maybe a link).
        _ => crate::safefs::Dir::open_root(path)?.sync(),
    }
}

/// Why a staged team could not be built.
#[derive(Debug, thiserror::Error)]
enum BuildError {
    /// A directory or file of the staging tree could not be made.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The plan names a path outside the team directory (a bug).
    #[error("internal: a planned path leaves the team directory")]
    Escapes,
}

/// Builds the team of `plan` in `staging` (every file written and synced).
fn build(staging: &Path, plan: &Plan) -> Result<(), BuildError> {
    let io = |p: &Path, source: std::io::Error| BuildError::Io {
        path: p.to_path_buf(),
        source,
    };
    std::fs::create_dir(staging).map_err(|e| io(staging, e))?;
    let marker = staging.join(STAGING_MARKER);
    std::fs::write(&marker, b"").map_err(|e| io(&marker, e))?;
    if !plan.is_contained() {
        return Err(BuildError::Escapes);
    }
    for d in &plan.dirs {
        let p = staging.join(d);
        std::fs::create_dir(&p).map_err(|e| io(&p, e))?;
    }
    // Files are created new and synced; no temporary-and-rename per file:
    // nobody sees the staging directory until the one rename publishes the
    // whole tree, which is what makes the import atomic.
    for (f, text) in &plan.files {
        let p = staging.join(f);
        write_new(&p, text.as_bytes()).map_err(|e| io(&p, e))?;
    }
    // Directories deepest first, so every entry is durable before the rename.
    let mut dirs: Vec<&PathBuf> = plan.dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let p = staging.join(d);
        sync_dir(&p).map_err(|e| io(&p, e))?;
    }
    sync_dir(staging).map_err(|e| io(staging, e))
}

/// The entries of a team directory that are the team's: they go to the
/// backup with the old team. Everything else (squadd's `sessions/`, `run/`,
/// `archives/`, `policies.yaml`, `config.json`, `audit.jsonl`, …) belongs
/// to the project and comes back.
const TEAM_ENTRIES: &[&str] = &[
    "team.md",
    "routing.md",
    "ceremonies.md",
    "decisions.md",
    "decisions",
    "agents",
    "casting",
    "orchestration-log",
    "log",
    "skills",
];

/// Moves back from the old directory (now `backup`) into the new team
/// `target` what is not the team's, one rename each (inodes kept: a running
/// squadd's watches, pid lock and socket follow), and the skills the new
/// team lacks (built-ins `squadctl init` installed). A crash between two
/// renames leaves the rest in the backup, never lost.
fn keep_non_team_entries(backup: &Path, target: &Path, notes: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(backup) else {
        return;
    };
    let mut kept = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(n) = name.to_str() else { continue };
        if n == "skills" {
            if std::fs::symlink_metadata(target.join("skills")).is_err() {
                if std::fs::rename(e.path(), target.join("skills")).is_ok() {
                    kept.push("skills/".to_string());
                }
                continue;
            }
            for (skill, dir) in real_subdirs(&e.path()) {
                let to = target.join("skills").join(&skill);
                if std::fs::symlink_metadata(&to).is_err() && std::fs::rename(&dir, &to).is_ok() {
                    kept.push(format!("skills/{skill}/"));
                }
            }
            let _ = std::fs::remove_dir(e.path());
            continue;
        }
        if TEAM_ENTRIES.contains(&n) || n == STAGING_MARKER {
            continue;
        }
        let to = target.join(&name);
        // An empty directory squadd recreated meanwhile (its sessions/)
        // gives way to the real one.
        if std::fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir(&to);
        }
        if std::fs::symlink_metadata(&to).is_err() && std::fs::rename(e.path(), &to).is_ok() {
            kept.push(n.to_string());
        }
    }
    if !kept.is_empty() {
        kept.sort();
        notes.push(format!("kept the project's {}", kept.join(", ")));
    }
    // Empty placeholders of a team that never was (init makes none today).
    for n in ["decisions/inbox", "decisions", "orchestration-log", "log"] {
        let _ = std::fs::remove_dir(backup.join(n));
    }
    let _ = sync_dir(target);
}

/// The journal of an import that swaps teams, in the project directory:
/// which directories the renames involve, so an import killed half-way is
/// finished or undone by the next `squadctl` command, import or squadd
/// start ([`recover_interrupted_import`]).
pub(crate) const JOURNAL_FILE: &str = ".squad-import-journal.json";

/// What the journal records: names of entries of the project directory.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Journal {
    /// The importing process (a live one is not interfered with).
    pid: u32,
    /// The team directory (`.squad` or `.ai-team`).
    target: String,
    /// The new team being built, then (after the swap) the old team.
    staging: String,
    /// Where the old team goes.
    backup: String,
}

impl Journal {
    /// Every name is one plain entry of the project (the journal is a file
    /// anyone could edit: it must not send renames elsewhere).
    fn is_plain(&self) -> bool {
        [&self.target, &self.staging, &self.backup]
            .iter()
            .all(|n| bundle::name_problem(n.trim_start_matches('.')).is_none() && !n.is_empty())
    }
}

/// For tests: `SQUAD_IMPORT_CRASH_AT=<step>` aborts the import at that
/// step (`swapped`: just after the old team is moved aside; `aside`: after
/// it got its backup name), as a kill -9 would. Debug builds only.
fn crash_point(step: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("SQUAD_IMPORT_CRASH_AT").is_ok_and(|s| s == step) {
        std::process::abort();
    }
    #[cfg(not(debug_assertions))]
    let _ = step;
}

/// Finishes or undoes an import of `project` that was killed while
/// swapping teams (its journal is there and its process is gone): when the
/// new team is in place, the old one gets its backup name and the
/// project's own entries (squadd's `sessions/`, `run/`, `policies.yaml`,
/// `config.json`, `audit.jsonl`, …) come back into it; before the swap, the
/// unfinished new team is removed. Returns what it did, one line each;
/// nothing when there was nothing to do.
pub(crate) fn recover_interrupted_import(project: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let dir = crate::root::fs_path(project);
    remove_dead_journal_temporaries(dir);
    let path = dir.join(JOURNAL_FILE);
    let text = match fsx::read_regular_to_string(&path, 64 * 1024) {
        Ok(t) => t,
        Err(fsx::ReadError::NotFound) => return notes,
        Err(e) => {
            notes.push(format!(
                "{}: {e}; an interrupted import is left as it is",
                path.display()
            ));
            return notes;
        }
    };
    let j: Journal = match serde_json::from_str(&text) {
        Ok(j) if Journal::is_plain(&j) => j,
        _ => {
            notes.push(format!(
                "{}: not an import journal squadctl wrote; left as it is (remove it once the team directory is as you want it)",
                path.display()
            ));
            return notes;
        }
    };
    if j.pid != std::process::id() && pid_alive(j.pid as i32) {
        // An import running now: it finishes its own work.
        return notes;
    }
    let (target, staging, backup) = (
        dir.join(&j.target),
        dir.join(&j.staging),
        dir.join(&j.backup),
    );
    let is_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    let marked = |p: &Path| is_dir(p) && std::fs::symlink_metadata(p.join(STAGING_MARKER)).is_ok();
    if std::fs::symlink_metadata(&target).is_err() {
        // Between the two renames of a non-atomic swap.
        if marked(&staging) {
            let _ = std::fs::rename(&staging, &target);
        } else if is_dir(&backup) && std::fs::rename(&backup, &target).is_ok() {
            notes.push(format!(
                "undid an interrupted import: the old team is back in {}",
                target.display()
            ));
        }
    }
    if marked(&target) {
        if is_dir(&staging) && !marked(&staging) {
            let _ = std::fs::rename(&staging, &backup);
        }
        keep_non_team_entries(&backup, &target, &mut notes);
        let _ = std::fs::remove_file(target.join(STAGING_MARKER));
        let _ = std::fs::remove_dir(&backup);
        notes.push(format!(
            "finished an import interrupted after the swap: the new team is in {}, the old one in {}",
            target.display(),
            if is_dir(&backup) {
                backup.display().to_string()
            } else {
                "nothing (it was empty)".into()
            }
        ));
    } else if marked(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        notes.push(format!(
            "undid an import interrupted before the swap: {} is as it was",
            target.display()
        ));
    }
    let _ = std::fs::remove_file(&path);
    let _ = crate::safefs::Dir::open_root(dir).and_then(|d| d.sync());
    notes
}

/// [`recover_interrupted_import`] for a `squadctl` command: the project at
/// `--root`, else the nearest directory at or above the current one with a
/// journal (or a team directory, which ends the search).
pub(crate) fn recover_for_command(root_arg: Option<&Path>) -> Vec<String> {
    if let Some(r) = root_arg {
        return recover_interrupted_import(r);
    }
    let Ok(cwd) = std::env::current_dir() else {
        return Vec::new();
    };
    for d in cwd.ancestors() {
        if std::fs::symlink_metadata(d.join(JOURNAL_FILE)).is_ok() {
            return recover_interrupted_import(d);
        }
        if teamdir::locate(d).is_some() {
            break;
        }
    }
    Vec::new()
}

/// Swaps `a` and `b` atomically (both exist). Linux: renameat2 with
/// RENAME_EXCHANGE; elsewhere `Err(Unsupported)`.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ca = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let cb = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths; renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// The team directory an import writes: the project's own `.squad/` or
/// `.ai-team/` when there is one, else `.squad/`.
pub(crate) fn import_target(project: &Path) -> (PathBuf, bool) {
    match teamdir::locate(project).filter(|t| !t.from_main_checkout) {
        Some(t) => (t.path, true),
        None => (project.join(TEAM_DIR), false),
    }
}

/// Holds a project's import lock: an advisory lock (flock semantics) on the
/// project directory itself, whose inode no import moves. A second import
/// waits for it, saying so on stderr.
fn lock_project(project: &Path) -> std::io::Result<std::fs::File> {
    let dir = std::fs::File::open(crate::root::fs_path(project))?;
    match dir.try_lock() {
        Ok(()) => return Ok(dir),
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    eprintln!(
        "squadctl: waiting for another import into {} to finish",
        crate::text::escape(&crate::root::fs_path(project).display().to_string())
    );
    dir.lock()?;
    Ok(dir)
}

/// Why an import did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ImportError {
    /// The project already has a team directory (and no `--force`).
    #[error("{0}")]
    Refused(String),
    /// Reading or writing failed; the project is as it was.
    #[error("{0}")]
    Io(String),
}

static STAGING_COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Imports `bundle` into `project` (docs/team.md): refused when the
/// project has a team directory unless `force` (the old one is moved to a
/// backup), all or nothing (built beside, renamed into place).
pub(crate) fn import(
    project: &Path,
    bundle: &Bundle,
    force: bool,
    dry_run: bool,
) -> Result<ImportReport, ImportError> {
    // One import of a project at a time, decided from what the one before
    // left: a second one would find the first's staging directory and
    // journal mid-swap (two at once stranded the sessions in a
    // `.squad.import-*` directory in 4 of 12 rounds).
    let _held = match dry_run {
        true => None,
        false => Some(lock_project(project).map_err(|e| {
            ImportError::Io(format!(
                "{}: cannot take the project's import lock: {e}; nothing was written",
                crate::root::fs_path(project).display()
            ))
        })?),
    };
    let (target, exists) = import_target(project);
    let now = chrono::Utc::now();
    let builtins: Vec<&str> = crate::skills::BUILTINS.iter().map(|b| b.name).collect();
    let plan = bundle::plan(
        bundle,
        &ImportOptions {
            imported_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            date: now.format("%Y-%m-%d").to_string(),
            builtin_skills: &builtins,
        },
    );
    let mut report = ImportReport {
        target: target.clone(),
        backup: None,
        files: plan.files.iter().map(|(f, _)| target.join(f)).collect(),
        agents: bundle.agents.keys().cloned().collect(),
        skills: plan
            .dirs
            .iter()
            .filter(|d| d.parent() == Some(Path::new("skills")))
            .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect(),
        shape: bundle.shape.as_str(),
        notes: plan.notes.clone(),
        dry_run,
    };
    // Checked before anything is written (nothing to undo, no staging
    // directory left behind).
    let conflicts = plan.conflicts();
    if !conflicts.is_empty() {
        return Err(ImportError::Refused(format!(
            "the file cannot be imported as it is; nothing was written: {}",
            conflicts.join("; ")
        )));
    }
    if let Some(link) = [TEAM_DIR, LEGACY_TEAM_DIR]
        .iter()
        .map(|d| project.join(d))
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
    {
        return Err(ImportError::Refused(format!(
            "{} is a symbolic link; an import never writes through a link (the team would land wherever it points); nothing was written. Replace the link with a directory, or import into the project it points to",
            link.display()
        )));
    }
    if std::fs::symlink_metadata(&target).is_ok_and(|m| !m.is_dir()) {
        return Err(ImportError::Refused(format!(
            "{} exists and is not a directory; nothing was written",
            target.display()
        )));
    }
    // A directory holding no team (squadd's sessions, built-in skills from
    // `squadctl init`) is no team to protect: it is replaced as with
    // --force, and what is not a team's comes back.
    if exists && !force && holds_team(&target) {
        return Err(ImportError::Refused(format!(
            "{} already holds a team; nothing was written. To replace it, run again with --force: the old team is moved to {}-backup-<timestamp>/ (never deleted)",
            target.display(),
            target.display()
        )));
    }
    if dry_run {
        if exists {
            report.backup = Some(backup_path(&target));
        }
        return Ok(report);
    }
    report.notes.extend(recover_interrupted_import(project));
    clean_leftovers(project, &target, &mut report.notes);
    let target_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| TEAM_DIR.into());
    let staging = project.join(format!(
        "{}{}-{}",
        staging_prefix(&target_name),
        std::process::id(),
        STAGING_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    if let Err(e) = build(&staging, &plan) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(ImportError::Io(format!("{e}; nothing was written")));
    }
    // A failure before the new team is in place removes the staging
    // directory (it still holds its marker: an unfinished new team).
    let io = |e: std::io::Error| {
        let unfinished = staging.join(STAGING_MARKER).exists();
        let target_untouched = std::fs::symlink_metadata(&target).is_err()
            || (target.is_dir() && !target.join(STAGING_MARKER).exists());
        if unfinished && target_untouched {
            let _ = std::fs::remove_dir_all(&staging);
        }
        ImportError::Io(format!("{}: {e}", target.display()))
    };
    if exists {
        let backup = backup_path(&target);
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let journal = Journal {
            pid: std::process::id(),
            target: name(&target),
            staging: name(&staging),
            backup: name(&backup),
        };
        let journal_path = crate::root::fs_path(project).join(JOURNAL_FILE);
        let journal_text = serde_json::to_string_pretty(&journal).unwrap_or_default() + "\n";
        if let Err(e) = squad_protocol::write_atomic(&journal_path, journal_text.as_bytes()) {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(ImportError::Io(format!(
                "{}: {e}; nothing was written",
                journal_path.display()
            )));
        }
        match exchange(&staging, &target) {
            Ok(()) => {
                crash_point("swapped");
                // `staging` now holds the old team: give it its backup name.
                std::fs::rename(&staging, &backup).map_err(io)?;
            }
            Err(_) => {
                std::fs::rename(&target, &backup).map_err(io)?;
                std::fs::rename(&staging, &target).map_err(io)?;
            }
        }
        crash_point("aside");
        // The marker stays until the project's entries are back: until then
        // the journal's recovery knows the new team is in place.
        keep_non_team_entries(&backup, &target, &mut report.notes);
        let _ = std::fs::remove_file(target.join(STAGING_MARKER));
        let _ = sync_dir(&target);
        let _ = std::fs::remove_file(&journal_path);
        // Nothing of a team was there: the backup holds nothing worth keeping.
        if std::fs::remove_dir(&backup).is_ok() {
            report
                .notes
                .push(format!("{} was empty; removed", backup.display()));
        } else {
            report.backup = Some(backup);
        }
    } else {
        std::fs::rename(&staging, &target).map_err(io)?;
    }
    let _ = std::fs::remove_file(target.join(STAGING_MARKER));
    let _ = sync_dir(&target);
    // The project root is the operator's choice (it may be reached by a link).
    let _ = crate::safefs::Dir::open_root(crate::root::fs_path(project)).and_then(|d| d.sync());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_temporary_of_a_killed_writer_goes_at_the_next_recovery() {
        // Regression (campaign round 15): an import killed while writing its
        // journal left `..squad-import-journal.json.tmp.PID.0` for good.
        let dir = tempfile::tempdir().unwrap();
        let dead = dir
            .path()
            .join(format!(".{JOURNAL_FILE}.tmp.{}.0", i32::MAX));
        let live = dir
            .path()
            .join(format!(".{JOURNAL_FILE}.tmp.{}.0", std::process::id()));
        std::fs::write(&dead, "{").unwrap();
        std::fs::write(&live, "{").unwrap();
        assert!(recover_interrupted_import(dir.path()).is_empty());
        assert!(!dead.exists(), "a dead writer's temporary stays");
        assert!(live.exists(), "a live writer's temporary was removed");
    }

    #[test]
    fn a_journal_naming_paths_outside_the_project_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("p");
        std::fs::create_dir_all(p.join(".squad")).unwrap();
        std::fs::create_dir_all(tmp.path().join("victim")).unwrap();
        for bad in [
            r#"{"pid":1,"target":".squad","staging":"../victim","backup":".squad-backup-x"}"#,
            r#"{"pid":1,"target":"/etc","staging":".squad.import-1-0","backup":".b"}"#,
            r#"{"pid":1,"target":"..","staging":".s","backup":".b"}"#,
            "not json",
        ] {
            std::fs::write(p.join(JOURNAL_FILE), bad).unwrap();
            let notes = recover_interrupted_import(&p);
            assert_eq!(notes.len(), 1, "{bad}: {notes:?}");
            assert!(notes[0].contains("left as it is"), "{notes:?}");
            assert!(tmp.path().join("victim").is_dir());
            assert!(p.join(JOURNAL_FILE).exists());
        }
    }

    #[test]
    fn team_paths_are_the_team_files_only() {
        let root = Path::new("/p");
        for yes in [
            ".squad/team.md",
            ".squad/routing.md",
            ".ai-team/ceremonies.md",
            ".squad/casting",
            ".squad/casting/registry.json",
            ".squad/agents",
            ".squad/agents/fido",
            ".squad/agents/fido/charter.md",
            ".squad/agents/fido/history.md",
        ] {
            assert!(is_team_path(root, &root.join(yes)), "{yes}");
        }
        for no in [
            ".squad/decisions.md",
            ".squad/sessions/x/role-plan-a-task_1.md",
            ".squad/agents/fido/notes.md",
            ".squad/casting/.registry.json.tmp.1.0",
            ".squad/team.md.bak/x",
            "team.md",
        ] {
            assert!(!is_team_path(root, &root.join(no)), "{no}");
        }
    }
}
