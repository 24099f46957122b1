//! Keeps docs/daemon.md's module table ("Inside squadd") true to the files
//! of `supervisor/src/daemon/`: the table follows a whole-line
//! `<!-- modules: supervisor/src/daemon -->` marker, and its first column
//! names each file (relative to that folder) exactly once. Test modules
//! (`tests.rs`) are not listed.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/daemon.md");
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/daemon");
const MARKER: &str = "<!-- modules: supervisor/src/daemon -->";

/// The first-column entries of the table after the marker.
fn documented(doc: &str) -> Vec<String> {
    let mut lines = doc.lines().skip_while(|l| l.trim() != MARKER).skip(1);
    let header = lines.next().unwrap_or_default();
    assert!(header.starts_with("| Module"), "no table after the marker");
    // The separator row.
    lines.next();
    lines
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let first = line.split('|').nth(1).unwrap_or_default().trim();
            first.trim_matches('`').to_string()
        })
        .collect()
}

fn files(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if entry.file_type().unwrap().is_dir() {
            files(&entry.path(), &format!("{rel}/"), out);
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.insert(rel);
        }
    }
}

#[test]
fn the_module_table_lists_every_daemon_file_once() {
    let doc = fs::read_to_string(DOC).unwrap();
    let rows = documented(&doc);
    let listed: BTreeSet<String> = rows.iter().cloned().collect();
    assert_eq!(listed.len(), rows.len(), "a file is listed twice: {rows:?}");
    let mut on_disk = BTreeSet::new();
    files(Path::new(DIR), "", &mut on_disk);
    let missing: Vec<_> = on_disk.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&on_disk).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/daemon.md's module table is out of date: files not listed {missing:?}; rows naming no file {stale:?}"
    );
}
