//! Skills on disk: the built-in skills the binary ships and their
//! installation into a team (`squadctl skills upgrade`, `squadctl init`), and
//! the skills check squadd runs when a skill directory changes.
//!
//! Built-ins are installed into `<team>/skills/<name>/SKILL.md` beside an
//! install record `.squad-builtin.json` holding the version and a hash of the
//! file as written. An upgrade replaces a built-in only when the record says
//! squadctl wrote it and the hash says nobody changed it since; learned skills
//! (no record) are never touched.

use crate::safefs::write_atomic;
use serde::{Deserialize, Serialize};
use squad_policies::skills::{Installed, Upgrade, upgrade};
use squad_protocol::Diagnostic;
use squad_protocol::fsx::{self, ReadError};
use squad_protocol::skill::{self, SKILL_FILE, discover};
use std::path::{Path, PathBuf};

/// Why built-in skills could not be checked or installed.
#[derive(Debug, thiserror::Error)]
pub enum SkillsError {
    /// A skill file or its record could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ReadError,
    },
    /// A skill folder or file could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The folder or file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A skill's folder is a symbolic link.
    #[error("{}: is a symbolic link; not written through", .0.display())]
    LinkedSkill(PathBuf),
    /// The skills directory is a symbolic link.
    #[error("{}: is a symbolic link; built-in skills are not written through it", .0.display())]
    LinkedSkills(PathBuf),
    /// The install record could not be serialized.
    #[error("{0}")]
    Record(#[from] serde_json::Error),
}

/// A skill compiled into the binary.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// Its name (and folder name).
    pub name: &'static str,
    /// The SKILL.md text.
    pub text: &'static str,
}

/// Every built-in skill. Content is owned by the features they teach
/// (squad-protocol: the command line; squad-memory-format: memory files).
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "squad-protocol",
        text: include_str!("../skills/squad-protocol/SKILL.md"),
    },
    Builtin {
        name: "squad-memory-format",
        text: include_str!("../skills/squad-memory-format/SKILL.md"),
    },
];

/// The install record's file name, in the skill's folder.
pub const RECORD_FILE: &str = ".squad-builtin.json";

impl Builtin {
    /// `metadata.version` of the shipped SKILL.md ("0" if it had none; a
    /// test keeps every built-in versioned).
    pub fn version(&self) -> String {
        skill::check_text(&Path::new(self.name).join(SKILL_FILE), self.text, true)
            .skill
            .and_then(|s| s.version().map(str::to_string))
            .unwrap_or_else(|| "0".into())
    }
}

/// The install record of a built-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The built-in's name.
    pub skill: String,
    /// The version installed.
    pub version: String,
    /// FNV-1a 64 of the SKILL.md as written, in hex: tells whether the user
    /// changed it (not a security measure: anyone may edit the skill).
    pub fnv1a64: String,
}

/// FNV-1a 64-bit hash in hex.
pub fn fnv1a64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What happened (or, in a dry run, would happen) to one built-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The built-in.
    pub skill: String,
    /// Its SKILL.md in the team.
    pub path: PathBuf,
    /// The shipped version.
    pub version: String,
    /// `installed`, `replaced`, `up-to-date`, `modified` or `not-builtin`.
    pub action: &'static str,
    /// One line for people.
    pub message: String,
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn installed(dir: &Path) -> Result<Installed, SkillsError> {
    match std::fs::symlink_metadata(dir) {
        Err(_) => return Ok(Installed::Missing),
        // A file (or anything but a directory) where the folder goes.
        Ok(m) if !m.is_dir() => return Ok(Installed::NotOurs),
        Ok(_) => {}
    }
    let file = dir.join(SKILL_FILE);
    let bytes = match fsx::read_regular(&file, skill::frontmatter::MAX_SKILL_BYTES) {
        Ok(b) => b,
        Err(ReadError::NotFound) => return Ok(Installed::Missing),
        // A symlink, FIFO or oversized file is nothing squadctl wrote.
        Err(ReadError::Symlink | ReadError::NotRegular(_) | ReadError::TooLarge { .. }) => {
            return Ok(Installed::NotOurs);
        }
        Err(source) => return Err(SkillsError::Read { path: file, source }),
    };
    let record = match fsx::read_regular_to_string(&dir.join(RECORD_FILE), 64 * 1024) {
        Ok(text) => serde_json::from_str::<Record>(&text).ok(),
        Err(ReadError::NotFound) => None,
        Err(ReadError::Symlink | ReadError::NotRegular(_) | ReadError::TooLarge { .. }) => None,
        Err(source) => {
            return Err(SkillsError::Read {
                path: dir.join(RECORD_FILE),
                source,
            });
        }
    };
    Ok(match record {
        None => Installed::NotOurs,
        Some(r) => Installed::Ours {
            unmodified: r.fnv1a64 == fnv1a64(&bytes),
            version: r.version,
        },
    })
}

/// Writes a built-in and its record. SKILL.md first: a crash between the two
/// writes leaves a file whose hash disagrees with the record, which later
/// upgrades report as modified and leave alone (never lost, never clobbered).
fn write_builtin(dir: &Path, b: &Builtin, version: &str) -> Result<(), SkillsError> {
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SkillsError::Write { path, source }
    };
    // Made without following a link below the project root.
    crate::safefs::project_parent(&dir.join(SKILL_FILE), Some(0o777)).map_err(failed(dir))?;
    if is_symlink(dir) {
        return Err(SkillsError::LinkedSkill(dir.to_path_buf()));
    }
    let file = dir.join(SKILL_FILE);
    write_atomic(&file, b.text.as_bytes()).map_err(failed(&file))?;
    let record = Record {
        skill: b.name.to_string(),
        version: version.to_string(),
        fnv1a64: fnv1a64(b.text.as_bytes()),
    };
    let json = serde_json::to_string_pretty(&record)? + "\n";
    let path = dir.join(RECORD_FILE);
    write_atomic(&path, json.as_bytes()).map_err(failed(&path))
}

/// Installs missing built-in skills into `<team_dir>/skills/` and replaces
/// older, unmodified ones; reports modified ones and same-named learned
/// skills and leaves them alone. With `dry_run`, writes nothing and reports
/// what it would do. `squadctl init` and `squadctl skills upgrade` call it.
pub fn install_builtin(team_dir: &Path, dry_run: bool) -> Result<Vec<Outcome>, SkillsError> {
    let skills_dir = team_dir.join("skills");
    if is_symlink(&skills_dir) {
        return Err(SkillsError::LinkedSkills(skills_dir));
    }
    let mut out = Vec::new();
    for b in BUILTINS {
        let dir = skills_dir.join(b.name);
        if is_symlink(&dir) {
            out.push(Outcome {
                skill: b.name.into(),
                path: dir.join(SKILL_FILE),
                version: b.version(),
                action: "not-builtin",
                message: "is a symbolic link; left alone".into(),
            });
            continue;
        }
        let version = b.version();
        let decision = upgrade(&installed(&dir)?, &version);
        let (action, message) = match &decision {
            Upgrade::Install => ("installed", format!("installed version {version}")),
            Upgrade::Replace { from } => (
                "replaced",
                format!("replaced version {from} with {version}"),
            ),
            Upgrade::UpToDate => ("up-to-date", format!("version {version} is installed")),
            Upgrade::KeepModified { version: v } => (
                "modified",
                format!(
                    "changed since version {v} was installed; left alone (to take version {version}, move your copy away and run `squadctl skills upgrade` again)"
                ),
            ),
            Upgrade::KeepNotOurs => (
                "not-builtin",
                "a skill of this name that squadctl did not install; left alone".to_string(),
            ),
        };
        if !dry_run && matches!(decision, Upgrade::Install | Upgrade::Replace { .. }) {
            write_builtin(&dir, b, &version)?;
        }
        out.push(Outcome {
            skill: b.name.into(),
            path: dir.join(SKILL_FILE),
            version,
            action,
            message,
        });
    }
    Ok(out)
}

/// The skills part of an agent's prompt: its own skills and the team's, as
/// the agent runner puts it into spawn prompts.
pub fn agent_prompt(
    project: &Path,
    agent: &str,
) -> (skill::prompt::SkillsPrompt, discover::Discovery) {
    let d = discover::discover(project, Some(agent), false);
    let entries: Vec<skill::prompt::Entry<'_>> = d
        .skills
        .iter()
        .map(|f| skill::prompt::Entry {
            skill: &f.skill,
            location: &f.location,
        })
        .collect();
    let p = skill::prompt::render(&entries);
    (p, d)
}

/// The project's skill problems, as `squadctl validate`/`check` and squadd's
/// status report them (lenient: only skipped skills are errors).
pub fn project_diagnostics(project: &Path) -> (Vec<Diagnostic>, usize) {
    let d = discover::discover_all(project, false);
    (d.diagnostics, d.files)
}

/// Checks `path` when it names skills rather than protocol files: a
/// `SKILL.md` (or `skill.md`), a folder holding one, or a skills directory
/// (`.squad/skills`, `.github/skills`, …, `<team>/agents/<name>/skills`).
/// `None` for anything else. `squadctl validate PATH` routes such paths here.
pub fn check_target(path: &Path, strict: bool) -> Option<discover::Discovery> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let one = |file: &Path| {
        let r = skill::check_file(file, strict);
        discover::Discovery {
            files: 1,
            diagnostics: r.diagnostics,
            ..Default::default()
        }
    };
    if !meta.is_dir() {
        return matches!(name, SKILL_FILE | "skill.md").then(|| one(path));
    }
    for file in [SKILL_FILE, "skill.md"] {
        if std::fs::symlink_metadata(path.join(file)).is_ok() {
            return Some(one(&path.join(file)));
        }
    }
    let full = std::fs::canonicalize(path).ok()?;
    let parent = full.parent()?;
    let parent_name = parent.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let grandparent = parent
        .parent()
        .and_then(|g| g.file_name())
        .and_then(|n| n.to_str());
    let skills_dir = full.file_name().is_some_and(|n| n == "skills")
        && (matches!(
            parent_name,
            ".squad" | ".ai-team" | ".github" | ".copilot" | ".claude" | ".agents"
        ) || grandparent == Some("agents"));
    skills_dir.then(|| discover::scan_dir(path, path, strict))
}

/// The most problems [`SkillsHealth`] lists (the counts are always complete).
pub const MAX_LISTED_PROBLEMS: usize = 20;

/// A project's skills as `squadctl status` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillsHealth {
    /// Skills in effect (team and agents').
    pub loaded: usize,
    /// Skills hidden by one of the same name.
    pub shadowed: usize,
    /// Skills skipped (errors of lenient loading).
    pub errors: usize,
    /// Warnings.
    pub warnings: usize,
    /// The first problems, as `path:line:col: severity[rule]: message`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// Checks a project's skills (front matter only) for status reports.
pub fn health(project: &Path) -> SkillsHealth {
    health_cached(project, &mut SkillCache::default())
}

/// What identifies one version of a SKILL.md without reading it: device,
/// inode, size, modification and change times (an in-place write changes
/// the change time even when it keeps the size and the modification time).
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// squadd's memory of each SKILL.md's check, so a skill edit re-reads that
/// skill only (issue 26 item 15: every edit re-read all 50,000 skills).
#[derive(Debug, Default)]
pub struct SkillCache {
    files: std::collections::HashMap<PathBuf, (Stamp, skill::SkillReport)>,
    /// SKILL.md files read by the last [`health_cached`] (the others were
    /// unchanged since the one before).
    pub reread: usize,
}

/// [`health`], re-reading only the SKILL.md files that changed since the
/// last call with the same `cache` (by [`Stamp`]); what was not seen this
/// time is forgotten.
pub fn health_cached(project: &Path, cache: &mut SkillCache) -> SkillsHealth {
    let mut seen = std::collections::HashMap::new();
    let mut reread = 0;
    let d = discover::discover_all_with(project, false, &mut |path: &Path, strict: bool| {
        let Some(now) = stamp(path) else {
            reread += 1;
            return skill::check_file(path, strict);
        };
        let report = match cache.files.remove(path) {
            Some((was, report)) if was == now => report,
            _ => {
                reread += 1;
                skill::check_file(path, strict)
            }
        };
        seen.insert(path.to_path_buf(), (now, report.clone()));
        report
    });
    cache.files = seen;
    cache.reread = reread;
    let errors = d.diagnostics.iter().filter(|x| x.is_error()).count();
    SkillsHealth {
        loaded: d.skills.len(),
        shadowed: d.shadowed.len(),
        errors,
        warnings: d.diagnostics.len() - errors,
        problems: d
            .diagnostics
            .iter()
            .take(MAX_LISTED_PROBLEMS)
            .map(|x| {
                // Relative to the project, as the other commands print them.
                let mut x = x.clone();
                if let Ok(rel) = x.path.strip_prefix(project) {
                    x.path = rel.to_path_buf();
                }
                x.to_string()
            })
            .collect(),
    }
}

fn real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

fn real_subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The most skill folders squadd watches in one project (one inotify watch
/// each, to see a SKILL.md edited in place). The places holding them are
/// always watched, so a skill added, removed or renamed is always seen;
/// past this many, an edit inside a further skill folder is seen at the next
/// change in its place or the next rescan (docs/skills.md). Keeps 50,000
/// skills from taking 50,000 of the user's watches.
pub const MAX_SKILL_FOLDER_WATCHES: usize = 256;

/// The directories squadd watches (non-recursively) to see skill changes:
/// `.github/`, `.copilot/`, `.claude/`, `.agents/` (their `skills/` may
/// appear), each skill place, the first [`MAX_SKILL_FOLDER_WATCHES`] skill
/// folders in them (by place, then name) and every folder there without a
/// SKILL.md yet, and `<team>/agents/`, each agent's
/// folder and its `skills/`. Only real directories: symlinks are never
/// followed.
pub fn watch_dirs(project: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for d in discover::PROJECT_SKILL_DIRS {
        if let Some(parent) = Path::new(d).parent() {
            let p = project.join(parent);
            if real_dir(&p) {
                dirs.push(p);
            }
        }
    }
    let mut places: Vec<PathBuf> = discover::team_places(project)
        .into_iter()
        .map(|p| p.dir)
        .collect();
    if let Some(team) = squad_protocol::teamdir::locate(project) {
        let agents = team.path.join("agents");
        if real_dir(&agents) {
            dirs.push(agents);
        }
        for agent in discover::agents(&team) {
            let place = discover::agent_place(project, &team, &agent);
            if let Some(parent) = place.dir.parent()
                && real_dir(parent)
            {
                dirs.push(parent.to_path_buf());
            }
            places.push(place.dir);
        }
    }
    let mut budget = MAX_SKILL_FOLDER_WATCHES;
    for place in places.into_iter().filter(|p| real_dir(p)) {
        for folder in real_subdirs(&place) {
            // A folder still without its SKILL.md is watched whatever the
            // budget: the file it is about to get is a new skill.
            let has_file = [SKILL_FILE, "skill.md"]
                .iter()
                .any(|f| std::fs::symlink_metadata(folder.join(f)).is_ok());
            if !has_file {
                dirs.push(folder);
            } else if budget > 0 {
                budget -= 1;
                dirs.push(folder);
            }
        }
        dirs.push(place);
    }
    dirs
}

/// Whether a changed path under `project` can change its skills (pure: by
/// the path alone). The team directory is `.squad/` or `.ai-team/`.
pub fn is_skill_path(project: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(project) else {
        return false;
    };
    let parts: Vec<&str> = rel
        .components()
        .map(|c| c.as_os_str().to_str().unwrap_or(""))
        .collect();
    let team = |p: &str| {
        p == squad_protocol::teamdir::TEAM_DIR || p == squad_protocol::teamdir::LEGACY_TEAM_DIR
    };
    let other = |p: &str| {
        discover::PROJECT_SKILL_DIRS
            .iter()
            .any(|d| Path::new(d).parent() == Some(Path::new(p)))
    };
    match parts.as_slice() {
        [p] => other(p),
        [p, "skills", ..] => team(p) || other(p),
        [p, "agents"] | [p, "agents", _] => team(p),
        [p, "agents", _, "skills", ..] => team(p),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skill_cache_rereads_only_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let skills = dir.path().join(".squad/skills");
        for name in ["a", "b", "c"] {
            std::fs::create_dir_all(skills.join(name)).unwrap();
            std::fs::write(
                skills.join(name).join(SKILL_FILE),
                format!("---\nname: {name}\ndescription: Use for {name}.\n---\nBody.\n"),
            )
            .unwrap();
        }
        let mut cache = SkillCache::default();
        let first = health_cached(dir.path(), &mut cache);
        assert_eq!((first.loaded, cache.reread), (3, 3));
        assert_eq!(health_cached(dir.path(), &mut cache), first);
        assert_eq!(cache.reread, 0);
        std::fs::write(skills.join("b").join(SKILL_FILE), "").unwrap();
        let broken = health_cached(dir.path(), &mut cache);
        assert_eq!((broken.loaded, broken.errors, cache.reread), (2, 1, 1));
        // What the cache says equals a fresh check.
        assert_eq!(broken, health(dir.path()));
        std::fs::remove_dir_all(skills.join("c")).unwrap();
        assert_eq!(health_cached(dir.path(), &mut cache).loaded, 1);
        assert_eq!((cache.reread, cache.files.len()), (0, 2));
    }

    #[test]
    fn builtins_are_valid_versioned_and_named_as_their_folder() {
        for b in BUILTINS {
            let path = Path::new("skills").join(b.name).join(SKILL_FILE);
            let report = skill::check_text(&path, b.text, true);
            assert!(
                report.diagnostics.is_empty(),
                "{}: {:#?}",
                b.name,
                report.diagnostics
            );
            let s = report.skill.unwrap();
            assert_eq!(s.name, b.name);
            assert!(s.version().is_some(), "{} has no metadata.version", b.name);
        }
    }

    #[test]
    fn skill_paths() {
        let p = Path::new("/p");
        let yes = [
            "/p/.github",
            "/p/.claude/skills",
            "/p/.agents/skills/x/SKILL.md",
            "/p/.squad/skills",
            "/p/.squad/skills/x/SKILL.md",
            "/p/.ai-team/skills/x",
            "/p/.squad/agents",
            "/p/.squad/agents/ana",
            "/p/.squad/agents/ana/skills/x/SKILL.md",
        ];
        for y in yes {
            assert!(is_skill_path(p, Path::new(y)), "{y}");
        }
        let no = [
            "/p",
            "/p/.squad",
            "/p/.claude/context/shared-context.json",
            "/p/.squad/sessions/s/x.md",
            "/p/.squad/agents/ana/history.md",
            "/p/src/skills/x",
            "/q/.github",
        ];
        for n in no {
            assert!(!is_skill_path(p, Path::new(n)), "{n}");
        }
    }

    #[test]
    fn fnv_known_values() {
        assert_eq!(fnv1a64(b""), "cbf29ce484222325");
        assert_eq!(fnv1a64(b"a"), "af63dc4c8601ec8c");
    }
}
