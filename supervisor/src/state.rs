//! The daemon's own small persistent state, `.squad/run/state.json`: what it
//! must remember across restarts to give the same answers (when each task was
//! first seen in progress, for timeouts).

use crate::derive::TaskStarts;
use serde::{Deserialize, Serialize};
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

/// Persistent daemon state of one root.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    /// Format version.
    #[serde(default)]
    pub version: u32,
    /// Per session directory name, when each task was first seen in progress.
    #[serde(default)]
    pub task_starts: BTreeMap<String, TaskStarts>,
    /// Per session directory name, overdue tasks already reported.
    #[serde(default)]
    pub overdue_reported: BTreeMap<String, BTreeSet<String>>,
    /// Per session directory name, messages already escalated.
    #[serde(default)]
    pub escalated: BTreeMap<String, BTreeSet<String>>,
    /// Per session directory name, overdue replies already reported.
    #[serde(default)]
    pub replies_overdue: BTreeMap<String, BTreeSet<String>>,
    /// Per session directory name, tasks that violated their dependencies
    /// (with the prerequisites unmet then), for the session's summary.
    #[serde(default)]
    pub violations: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Per agent with a presence record, the start of the last wait said
    /// (and its lead told): a wait is told once across restarts
    /// (`daemon/core/waiting.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub waits_told: BTreeMap<String, chrono::DateTime<chrono::Utc>>,
}

/// `<root>/.squad/run/state.json`.
pub(crate) fn state_path(root: &Path) -> PathBuf {
    root.join(SQUAD_DIR).join(RUN_DIR).join("state.json")
}

impl State {
    /// Loads the state; a missing or unreadable file is an empty state (the
    /// only cost is that timeouts restart from the current progress update).
    pub(crate) fn load(root: &Path) -> State {
        // Non-blocking, never through a link: anyone can plant a FIFO there.
        squad_protocol::fsx::read_regular(
            &state_path(root),
            squad_protocol::validate::MAX_FILE_BYTES,
        )
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
    }

    /// Forgets one session.
    pub(crate) fn forget(&mut self, session: &str) {
        self.retain(|name| name != session);
    }

    /// Keeps only the sessions `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.task_starts.retain(|k, _| keep(k));
        self.overdue_reported.retain(|k, _| keep(k));
        self.escalated.retain(|k, _| keep(k));
        self.replies_overdue.retain(|k, _| keep(k));
        self.violations.retain(|k, _| keep(k));
    }

    /// The file's bytes.
    pub(crate) fn encode(&self) -> io::Result<Vec<u8>> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
