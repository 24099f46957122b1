//! What squadd reads for its agent runs (docs/runners.md), free of any
//! decision: config.json, and the session facts run supervision asks about
//! ([`FileFacts`]). The decisions are the core's (`core/runs.rs`); the
//! process I/O and the carrying out of run effects are in `processes.rs`;
//! a run's start (folder, prompt, worktree, record, spawn) in
//! [`start`].

use crate::index::Entry;
use crate::runners::{self, RunRecord};
use chrono::{DateTime, Utc};
use squad_protocol::FileKind;
use squad_protocol::config::{CONFIG_FILE, RuntimeConfig};
use squad_protocol::model::TaskStatus;
use std::path::Path;

pub(crate) mod start;

pub(crate) use super::core::runs::RunError;

/// Reads config.json of a root: (config, first error).
pub(crate) fn load_config(root: &Path) -> (RuntimeConfig, Option<String>) {
    let team = squad_protocol::teamdir::locate(root)
        .map(|t| t.path)
        .unwrap_or_else(|| root.join(squad_protocol::tree::SQUAD_DIR));
    let path = team.join(CONFIG_FILE);
    let text = match squad_protocol::fsx::read_regular_to_string(&path, 1 << 20) {
        Ok(t) => t,
        Err(squad_protocol::fsx::ReadError::NotFound) => {
            return (RuntimeConfig::default(), None);
        }
        Err(e) => {
            return (
                RuntimeConfig::default(),
                Some(format!("{}: {e}", path.display())),
            );
        }
    };
    let (config, diags) = squad_protocol::config::parse(&path, &text);
    let first = diags.iter().find(|d| d.is_error()).map(|d| d.to_string());
    (config, first)
}

/// config.json of a root as squadd starts on it (the defaults when invalid,
/// with a warning).
pub(crate) fn initial_config(root: &Path) -> RuntimeConfig {
    let (config, error) = load_config(root);
    if let Some(e) = error {
        tracing::warn!(error = %e, "config.json invalid; using the defaults");
    }
    config
}

/// The session facts run supervision asks about, read from the files.
pub(crate) struct FileFacts;

impl super::core::runs::RunFacts for FileFacts {
    fn completed_in_file(&self, session_dir: &Path, rec: &RunRecord) -> bool {
        // The agent may have written `completed` and exited before the
        // file's watch event settled: read it rather than wait for the index.
        let path = session_dir.join(format!("role-comm-{}-{}.md", rec.agent, rec.task));
        let Ok(bytes) =
            squad_protocol::fsx::read_regular(&path, squad_protocol::validate::MAX_FILE_BYTES)
        else {
            return false;
        };
        let f = crate::index::index_bytes(&path, FileKind::ProgressUpdate, &bytes);
        matches!(&f.entry, Entry::Progress(p) if p.status == TaskStatus::Completed)
    }

    fn last_write(&self, session_dir: &Path, agent: &str) -> Option<DateTime<Utc>> {
        runners::last_write(session_dir, agent)
    }

    fn tree_state(
        &self,
        session_dir: &Path,
        rec: &RunRecord,
    ) -> Option<(crate::worktree::TreeState, Option<String>)> {
        // `<root>/.squad/sessions/<session>`.
        let root = session_dir.parent()?.parent()?.parent()?;
        let run_dir = runners::run_dir(session_dir, &rec.task);
        crate::worktree::recorded_state(root, &run_dir, &rec.session, &rec.task)
    }
}

/// Writes a run's record after the fact it records happened (a spawn, an
/// exit, a stop): a failure is logged, never a reason to undo what happened;
/// the next write of the record catches up.
pub(crate) fn keep_record(dir: &Path, rec: &RunRecord) {
    if let Err(e) = runners::write_record(dir, rec) {
        tracing::warn!(error = %e, "cannot write run.json");
    }
}

#[cfg(test)]
mod tests;
