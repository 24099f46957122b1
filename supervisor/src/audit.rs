//! `.squad/audit.jsonl`: one JSON line per supervisor action or finding.
//!
//! Appended with `O_APPEND` and one `write` per line, so concurrent writers
//! never interleave within a line; a crash can at worst leave the last line
//! partial, which readers skip.

use crate::events::Event;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// The audit log of one root.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Option<File>,
}

impl AuditLog {
    /// The audit log at `<root>/.squad/audit.jsonl` (opened on first append).
    pub fn new(root: &Path) -> Self {
        AuditLog {
            path: root
                .join(squad_protocol::tree::SQUAD_DIR)
                .join("audit.jsonl"),
            file: None,
        }
    }

    /// Appends one event as a line.
    pub fn append(&mut self, event: &Event) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?,
            );
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

/// Reads the events of an audit log, skipping lines that do not parse (a
/// partial last line after a crash, or lines from a newer version).
pub fn read_events(root: &Path) -> io::Result<Vec<Event>> {
    let path = root
        .join(squad_protocol::tree::SQUAD_DIR)
        .join("audit.jsonl");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect())
}
