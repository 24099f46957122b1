//! `.squad/audit.jsonl`: one JSON line per supervisor action or finding.
//!
//! Appended with `O_APPEND` and one `write` per line, so concurrent writers
//! never interleave within a line; a crash can at worst leave the last line
//! partial, which readers skip.

use crate::events::Event;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// The audit log of one root.
#[derive(Debug)]
pub(crate) struct AuditLog {
    root: PathBuf,
    path: PathBuf,
    file: Option<File>,
}

impl AuditLog {
    /// The audit log at `<root>/.squad/audit.jsonl` (opened on first append).
    pub(crate) fn new(root: &Path) -> Self {
        AuditLog {
            root: root.to_path_buf(),
            path: root
                .join(squad_protocol::tree::SQUAD_DIR)
                .join("audit.jsonl"),
            file: None,
        }
    }

    /// Appends one event as a line.
    pub(crate) fn append(&mut self, event: &Event) -> io::Result<()> {
        if self.file.is_none() {
            // Never through a link: an `audit.jsonl` (or `.squad`) that is
            // a symlink would aim squadd's appends at any file.
            let (dir, name) = crate::safefs::parent_of(&self.root, &self.path, None)?;
            self.file = Some(dir.open_file(
                &name,
                libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT,
                0o644,
            )?);
        }
        let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
        line.push(b'\n');
        let result = match &mut self.file {
            Some(f) => f.write_all(&line),
            None => Ok(()),
        };
        if result.is_err() {
            // Reopen next time (the file may have been rotated or removed).
            self.file = None;
        }
        result
    }
}

/// The audit log of `root` opened for reading, `None` when there is none:
/// non-blocking, never through a link (a FIFO there must not hang us).
fn open_log(root: &Path) -> io::Result<Option<File>> {
    let path = root
        .join(squad_protocol::tree::SQUAD_DIR)
        .join("audit.jsonl");
    match squad_protocol::fsx::open_regular(&path) {
        Ok(f) => Ok(Some(f)),
        Err(squad_protocol::fsx::ReadError::NotFound) => Ok(None),
        Err(squad_protocol::fsx::ReadError::Io(e)) => Err(e),
        Err(e) => Err(io::Error::other(format!("{}: {e}", path.display()))),
    }
}

/// Reads the events of an audit log, skipping lines that do not parse (a
/// partial last line after a crash, or lines from a newer version).
pub(crate) fn read_events(root: &Path) -> io::Result<Vec<Event>> {
    let Some(file) = open_log(root)? else {
        return Ok(Vec::new());
    };
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect())
}

/// A delivery as the audit log says it: (session, recipient, message id).
pub(crate) type SaidDelivery = (String, String, String);

/// The deliveries the audit log of `root` says were made (its
/// `message-delivered` lines; a line a crash cut short says nothing). An
/// absent log says none.
pub(crate) fn delivered_messages(
    root: &Path,
) -> io::Result<std::collections::HashSet<SaidDelivery>> {
    let Some(file) = open_log(root)? else {
        return Ok(Default::default());
    };
    let mut out = std::collections::HashSet::new();
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        // Only these lines are parsed: the log holds every other event too.
        if !line.contains("\"message-delivered\"") {
            continue;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let field = |k: &str| v[k].as_str().map(str::to_string);
        if v["kind"] == "message-delivered"
            && let (Some(s), Some(to), Some(id)) =
                (field("session"), field("to"), field("message_id"))
        {
            out.insert((s, to, id));
        }
    }
    Ok(out)
}
