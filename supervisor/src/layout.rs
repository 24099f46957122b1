//! Creating a project's `.squad/` layout (docs/protocol.md, "On-disk layout").

use crate::safefs::Dir;
use squad_protocol::tree::{ARCHIVES_DIR, RUN_DIR, SESSIONS_DIR, SQUAD_DIR};
use std::io;
use std::path::{Path, PathBuf};

/// Creates (or opens) `name` in `parent` without following a link: a
/// symlink planted at `.squad`, `.squad/run`… is refused, never used.
fn create_dir(parent: &Dir, name: &str, created: &mut Vec<PathBuf>) -> io::Result<Dir> {
    let existed = parent.contains(name);
    let dir = parent.create_dir(std::ffi::OsStr::new(name), 0o777)?;
    if !existed {
        created.push(dir.path().to_path_buf());
    }
    Ok(dir)
}

/// Creates `.squad/` with `sessions/`, `archives/` and `run/` (mode 0700)
/// under `root`; returns the directories it created. Existing directories
/// are left alone, except that `run/` is always made 0700.
pub(crate) fn create_layout(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut created = Vec::new();
    let squad = create_dir(&Dir::open_root(root)?, SQUAD_DIR, &mut created)?;
    create_dir(&squad, SESSIONS_DIR, &mut created)?;
    create_dir(&squad, ARCHIVES_DIR, &mut created)?;
    let run = create_dir(&squad, RUN_DIR, &mut created)?;
    // Through the descriptor: the directory checked is the one changed.
    run.chmod(0o700)?;
    Ok(created)
}

/// `.squad/.gitignore` as `squadctl init` writes it: the runtime state squadd
/// and squadctl keep next to the protocol files, which `git add -A` must not
/// commit. Paths are relative to `.squad/`.
pub(crate) const GITIGNORE: &str = "\
# Written by `squadctl init`: runtime state of squadd and squadctl, not for git.
/run/
/audit.jsonl
/audit.jsonl.*
/sessions/*/inbox/
/sessions/*/locks/
/sessions/*/runs/
/sessions/*/role-comm-squadd-to-*
.*.tmp.*
";

/// Files squad-supervisor generates outside `.squad/`, which `squadctl
/// init` lists in the project's top-level `.gitignore` (issue 40 item 6):
/// squadd's shared context (regenerated from the sessions) and the team
/// exports `squadctl export` writes by default (files to carry elsewhere:
/// `squad-export.json`, and `squad-export-<timestamp>.squad` for
/// `--format squad`).
pub(crate) const PROJECT_IGNORES: [&str; 3] = [
    "/.claude/context/shared-context.json",
    "/squad-export.json",
    "/squad-export-*.squad",
];

/// The heading of the block `init` appends to `.gitignore`.
const PROJECT_IGNORES_HEADING: &str =
    "# squad-supervisor: generated files (added by `squadctl init`)";

/// Appends to `<root>/.gitignore` (created if missing) the entries of
/// [`PROJECT_IGNORES`] it lacks, under one heading; the user's lines are
/// kept as they are. `Ok(true)` when it wrote.
pub(crate) fn ensure_project_ignores(root: &Path) -> io::Result<bool> {
    let path = root.join(".gitignore");
    let old = match squad_protocol::fsx::read_regular_to_string(&path, 1 << 20) {
        Ok(t) => t,
        Err(squad_protocol::fsx::ReadError::NotFound) => String::new(),
        Err(e) => return Err(io::Error::other(e.to_string())),
    };
    let has = |entry: &str| {
        old.lines().any(|l| {
            let l = l.trim();
            l == entry || l == entry.trim_start_matches('/')
        })
    };
    let missing: Vec<&str> = PROJECT_IGNORES.into_iter().filter(|e| !has(e)).collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut text = old;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !text.contains(PROJECT_IGNORES_HEADING) {
        text.push_str(PROJECT_IGNORES_HEADING);
        text.push('\n');
    }
    for e in missing {
        text.push_str(e);
        text.push('\n');
    }
    crate::safefs::write_atomic(&path, text.as_bytes())?;
    Ok(true)
}

/// Whether a project-relative path (`.squad/…`, `/`-separated) is runtime
/// state listed in [`GITIGNORE`]; `squadctl check` skips such changes.
pub(crate) fn is_runtime_path(path: &str) -> bool {
    let Some(rest) = path
        .strip_prefix(SQUAD_DIR)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return false;
    };
    let name = rest.rsplit('/').next().unwrap_or(rest);
    if squad_protocol::atomic::is_temp_name(name) {
        return true;
    }
    if rest.starts_with("run/") || rest == "audit.jsonl" || rest.starts_with("audit.jsonl.") {
        return true;
    }
    let mut parts = rest.split('/');
    // squadd's notices to agents (like the inboxes they are delivered to).
    if let (Some(SESSIONS_DIR), Some(_), Some(file), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
        && file.starts_with("role-comm-squadd-to-")
    {
        return true;
    }
    let mut parts = rest.split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (
            Some(SESSIONS_DIR),
            Some(_),
            // runs/: squadd's run records, prompts and logs.
            Some("inbox" | "locks" | "runs"),
            Some(_)
        )
    )
}

#[cfg(test)]
mod tests {
    use super::is_runtime_path;

    #[test]
    fn runtime_paths_are_the_gitignored_ones() {
        for p in [
            ".squad/run/state.json",
            ".squad/audit.jsonl",
            ".squad/audit.jsonl.1",
            ".squad/sessions/s1/inbox/bob/new/x.md",
            ".squad/sessions/s1/locks/abc.json",
            ".squad/sessions/s1/runs/task_001/run.log",
            ".squad/sessions/s1/.role-plan-a-task_1.md.tmp.12.0",
            ".squad/sessions/s1/role-comm-squadd-to-bob-msg_squadd_ready_0123456789abcdef.md",
        ] {
            assert!(is_runtime_path(p), "{p}");
        }
        for p in [
            ".squad/sessions/s1/role-plan-a-task_1.md",
            ".squad/sessions/s1/session-status.md",
            ".squad/sessions/s1/summary.md",
            ".squad/skills/x/SKILL.md",
            "src/run/x.rs",
            ".squad/sessions/inbox",
            ".squad/sessions/s1/role-comm-alice-to-bob-msg_1.md",
        ] {
            assert!(!is_runtime_path(p), "{p}");
        }
    }
}
