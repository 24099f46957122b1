//! `squadctl init` on a legacy project: its team in `.ai-team/` and no
//! `.squad/`. squadd's files live in `.squad/`, and the Squad CLI takes a
//! `.squad/` for the team whenever there is one, so making `.squad/` beside
//! `.ai-team/` would hide the team from the CLI (and, after a plain `squad
//! upgrade`, from squadctl too). The project is migrated first, the way the
//! CLI's own `squad upgrade --migrate-directory` does it: `.gitattributes`
//! and `.gitignore` name `.squad/` where they named `.ai-team/`, `.ai-team/`
//! is renamed `.squad/`, `.ai-team-templates/` becomes `.squad/templates/`.
//! The CLI also scrubs email addresses from the team's files; that rewrites
//! what people wrote, so it is left to `squad scrub-emails .squad` (said).
//!
//! Every step is atomic and the order makes a kill -9 harmless: the
//! references are rewritten first (idempotent), the rename is one step, the
//! templates move whenever `.squad/` is there and they are not yet.

use crate::safefs::Dir;
use squad_protocol::teamdir::{LEGACY_TEAM_DIR, TEAM_DIR};
use std::path::Path;

/// The legacy templates directory the Squad CLI moves into `.squad/templates/`.
const LEGACY_TEMPLATES: &str = ".ai-team-templates";

/// Why a legacy project could not be migrated: nothing was renamed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MigrateError {
    /// `.ai-team` is not a real directory (a link): never moved through.
    #[error(
        "{0}/{LEGACY_TEAM_DIR} is a symbolic link, not the team directory itself: squadctl never moves a team through a link; migrate by hand (`squad upgrade --migrate-directory`), then run `squadctl init` again"
    )]
    Linked(String),
    /// A file system call failed.
    #[error(
        "{what}: {source}; nothing else was changed: migrate with `squad upgrade --migrate-directory`, then run `squadctl init` again"
    )]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> MigrateError {
    let what = what.into();
    move |source| MigrateError::Io { what, source }
}

/// Migrates the project at `root` when its team is in `.ai-team/` and it
/// has no `.squad/`; returns what was done, one line each (empty: nothing
/// to do).
pub(crate) fn legacy_project(root: &Path) -> Result<Vec<String>, MigrateError> {
    let shown = crate::root::fs_path(root).display().to_string();
    let dir = Dir::open_root(root).map_err(io(format!("cannot open {shown}")))?;
    let mut done = Vec::new();
    if !dir.contains(TEAM_DIR) && dir.contains(LEGACY_TEAM_DIR) {
        if !dir.is_dir(LEGACY_TEAM_DIR) {
            return Err(MigrateError::Linked(shown));
        }
        for file in [".gitattributes", ".gitignore"] {
            if rewrite_references(&dir, file)? {
                done.push(format!("{file}: {LEGACY_TEAM_DIR}/ now reads {TEAM_DIR}/"));
            }
        }
        dir.rename_noreplace(LEGACY_TEAM_DIR, &dir, TEAM_DIR)
            .map_err(io(format!(
                "cannot rename {LEGACY_TEAM_DIR}/ to {TEAM_DIR}/"
            )))?;
        dir.sync().map_err(io(format!("cannot sync {shown}")))?;
        done.insert(
            0,
            format!(
                "migrated the legacy team directory {LEGACY_TEAM_DIR}/ to {TEAM_DIR}/, as `squad upgrade --migrate-directory` does (it also scrubs email addresses from the team's files: `squad scrub-emails {TEAM_DIR}` if you want that); commit it: git add -A && git commit -m \"chore: migrate {LEGACY_TEAM_DIR}/ → {TEAM_DIR}/\""
            ),
        );
    }
    // After a migration (this one, or one cut short): the templates follow.
    if !dir.contains(LEGACY_TEAM_DIR) && dir.is_dir(TEAM_DIR) && dir.is_dir(LEGACY_TEMPLATES) {
        let squad = dir
            .open_dir(TEAM_DIR.as_ref())
            .map_err(io(format!("cannot open {TEAM_DIR}/")))?;
        if !squad.contains("templates") {
            dir.rename_noreplace(LEGACY_TEMPLATES, &squad, "templates")
                .map_err(io(format!("cannot move {LEGACY_TEMPLATES}/")))?;
            dir.sync().map_err(io(format!("cannot sync {shown}")))?;
            done.push(format!(
                "moved {LEGACY_TEMPLATES}/ to {TEAM_DIR}/templates/"
            ));
        }
    }
    Ok(done)
}

/// Rewrites `.ai-team/` to `.squad/` in the project file `name` (a regular
/// file, never through a link); whether it changed.
fn rewrite_references(dir: &Dir, name: &str) -> Result<bool, MigrateError> {
    if !dir
        .stat(name)
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
    {
        return Ok(false);
    }
    let bytes = dir
        .read(name, squad_protocol::team::MAX_TEAM_FILE_BYTES)
        .map_err(io(format!("cannot read {name}")))?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(false); // not text: left as it is
    };
    let from = format!("{LEGACY_TEAM_DIR}/");
    if !text.contains(&from) {
        return Ok(false);
    }
    let new = text.replace(&from, &format!("{TEAM_DIR}/"));
    dir.write_atomic(name, new.as_bytes(), 0o644)
        .map_err(io(format!("cannot write {name}")))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_project_is_migrated_once_and_its_references_follow() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        std::fs::create_dir_all(p.join(".ai-team/agents/ana")).unwrap();
        std::fs::write(p.join(".ai-team/team.md"), "# Team\n").unwrap();
        std::fs::write(
            p.join(".gitattributes"),
            ".ai-team/decisions.md merge=union\n*.png binary\n",
        )
        .unwrap();
        std::fs::create_dir_all(p.join(".ai-team-templates")).unwrap();
        std::fs::write(p.join(".ai-team-templates/charter.md"), "# C\n").unwrap();
        let done = legacy_project(p).unwrap();
        assert_eq!(done.len(), 3, "{done:?}");
        assert!(!p.join(".ai-team").exists());
        assert_eq!(
            std::fs::read_to_string(p.join(".squad/team.md")).unwrap(),
            "# Team\n"
        );
        assert_eq!(
            std::fs::read_to_string(p.join(".gitattributes")).unwrap(),
            ".squad/decisions.md merge=union\n*.png binary\n"
        );
        assert!(p.join(".squad/templates/charter.md").is_file());
        // Again: nothing to do.
        assert!(legacy_project(p).unwrap().is_empty());
    }

    #[test]
    fn a_project_with_both_or_a_linked_legacy_dir_is_not_moved() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        std::fs::create_dir_all(p.join(".ai-team")).unwrap();
        std::fs::create_dir_all(p.join(".squad")).unwrap();
        assert!(legacy_project(p).unwrap().is_empty());
        assert!(p.join(".ai-team").is_dir());
        let q = tmp.path().join("q");
        std::fs::create_dir_all(q.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("elsewhere", q.join(".ai-team")).unwrap();
        assert!(matches!(legacy_project(&q), Err(MigrateError::Linked(_))));
        assert!(!q.join(".squad").exists());
    }
}
