//! The supervisor's own source files, read the way the structure tests
//! (`module_cycles.rs`, `core_door.rs`) judge them: one walk, one idea of
//! what counts as code.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::fs;
use std::path::Path;

/// The supervisor crate's `src/` directory.
pub(crate) const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// One `.rs` file under `src/`.
pub(crate) struct SourceFile {
    /// Its path under `src/` (`daemon/core/mail.rs`).
    pub(crate) rel: String,
    /// Its module path (`["daemon", "core", "mail"]`; `["bin"]` for a
    /// binary).
    pub(crate) module: Vec<String>,
    /// Its code without comments and without its inline test module.
    pub(crate) code: String,
}

impl SourceFile {
    /// Whether the file holds tests (`tests.rs`, `tests_*.rs`, or under a
    /// `tests/` folder), which the structure rules leave alone.
    pub(crate) fn is_test(&self) -> bool {
        let name = self.rel.rsplit('/').next().unwrap_or("");
        name == "tests.rs"
            || name.starts_with("tests_")
            || self.rel.split('/').any(|part| part == "tests")
    }
}

/// The code of a file without comments and without its inline test module.
pub(crate) fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `c` may be part of an identifier.
pub(crate) fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every `.rs` file under `src/`, in a stable order.
pub(crate) fn source_files() -> Vec<SourceFile> {
    let mut out = Vec::new();
    walk(Path::new(SRC), &mut Vec::new(), &mut out);
    out
}

fn walk(dir: &Path, rel: &mut Vec<String>, out: &mut Vec<SourceFile>) {
    let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(Result::unwrap).collect();
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            rel.push(name);
            walk(&entry.path(), rel, out);
            rel.pop();
            continue;
        }
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        let mut module = rel.clone();
        if rel.first().is_some_and(|r| r == "bin") {
            module = vec!["bin".into()];
        } else if stem != "mod" && stem != "lib" {
            module.push(stem.to_string());
        }
        let text = fs::read_to_string(entry.path()).unwrap();
        let mut path = rel.clone();
        path.push(name);
        out.push(SourceFile {
            rel: path.join("/"),
            module,
            code: code(&text),
        });
    }
}
