//! Keeps docs/daemon.md's module tables ("Inside squadd") true to the
//! modules of `supervisor/src/daemon/` and of its `core/`: each table
//! follows a whole-line `<!-- modules: supervisor/src/DIR -->` marker, and
//! its first column names each module of DIR exactly once (`x` for `x.rs`,
//! the folder `x/`, or both; `mod` for `mod.rs`). Test modules (`tests`,
//! `tests_*`, `model_tests`) are not listed.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/daemon.md");
const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
/// The folders whose modules docs/daemon.md maps.
const DIRS: [&str; 2] = ["daemon", "daemon/core"];

/// The first-column entries of the table after `marker`.
fn documented(doc: &str, marker: &str) -> Vec<String> {
    let mut lines = doc.lines().skip_while(|l| l.trim() != marker).skip(1);
    let header = lines.next().unwrap_or_default();
    assert!(header.starts_with("| Module"), "no table after {marker}");
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

fn is_test(name: &str) -> bool {
    name == "tests" || name.starts_with("tests_") || name == "model_tests"
}

/// The modules of one folder: its files' stems and its subfolders.
fn modules(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let module = if entry.file_type().unwrap().is_dir() {
            name
        } else if let Some(stem) = name.strip_suffix(".rs") {
            stem.to_string()
        } else {
            continue;
        };
        if !is_test(&module) {
            out.insert(module);
        }
    }
    out
}

#[test]
fn the_module_tables_list_every_daemon_module_once() {
    let doc = fs::read_to_string(DOC).unwrap();
    for dir in DIRS {
        let rows = documented(&doc, &format!("<!-- modules: supervisor/src/{dir} -->"));
        let listed: BTreeSet<String> = rows.iter().cloned().collect();
        assert_eq!(
            listed.len(),
            rows.len(),
            "a module is listed twice: {rows:?}"
        );
        let on_disk = modules(&Path::new(SRC).join(dir));
        let missing: Vec<_> = on_disk.difference(&listed).collect();
        let stale: Vec<_> = listed.difference(&on_disk).collect();
        assert!(
            missing.is_empty() && stale.is_empty(),
            "docs/daemon.md's table of {dir}/ is out of date: modules not listed {missing:?}; rows naming no module {stale:?}"
        );
    }
}

#[test]
fn the_inside_part_stays_a_map() {
    // One short line per module: the detail belongs in each file's `//!`
    // comment, the history in docs/history/.
    let doc = fs::read_to_string(DOC).unwrap();
    let inside: Vec<&str> = doc
        .lines()
        .skip_while(|l| !l.starts_with("## Inside squadd"))
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    assert!(
        !inside.is_empty(),
        "docs/daemon.md has no \"Inside squadd\" part"
    );
    let long: Vec<&&str> = inside
        .iter()
        .filter(|l| l.starts_with('|') && l.chars().count() > 110)
        .collect();
    assert!(
        long.is_empty(),
        "module rows longer than 110 characters: {long:#?}"
    );
    assert!(
        inside.len() <= 100,
        "the \"Inside squadd\" part is {} lines; a map fits in 100",
        inside.len()
    );
}
