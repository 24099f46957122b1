//! The daemon's core has one door (docs/daemon.md, "Inside squadd").
//!
//! Outside `supervisor/src/daemon/core/`, code names the core only through
//! its door: [`DOORS`] (`Core::new(..).step(input, now)` for one root,
//! `Batch` for the stages of a batch, which spans every root) and the types
//! the door's inputs and effects carry (`Input`, `Effect`, `Timer`,
//! `RootId`, `FileRef`, …: data). A function, a constant or a module of
//! the core named by the shell is a decision taken outside the door, and a
//! method of a core type other than a door's is one too (`Root::new`).
//!
//! A path is read as written in code (comments and test modules aside):
//! `self::core::…`, `super::core::…`, `crate::daemon::core::…`, and a bare
//! `core::…` in a file that imports the core module itself; each member of
//! a `use …::core::{a, b::c}` group counts on its own.
//!
//! [`KNOWN`] lists the decisions still taken outside the door, each with
//! what is left to do; the list only shrinks: an entry that no longer
//! occurs fails the test too, so that it is removed when the door closes.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::collections::BTreeSet;

mod common {
    pub(crate) mod sources;
}
use common::sources::{is_ident, source_files};

/// The core's doors: types whose methods the shell may call.
const DOORS: &[&str] = &[
    // One root's door: `Core::new(id, root).step(input, now)`.
    "Core",
    // What spans every root: a batch's stages, in its order
    // (`core/batch.rs`).
    "Batch",
];

/// Decisions still taken outside the door: (file under `src/`, the path
/// named after `core::`, what is left). Issue 42 item 2.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "daemon/eventlog.rs",
        "notices::wanted",
        "which events are tapped for notices: the event log asks the core directly",
    ),
    (
        "daemon/intake.rs",
        "paths::classify",
        "what a path is, asked by the intake before it becomes an input",
    ),
    (
        "daemon/intake.rs",
        "paths::follows",
        "whether squadd follows a path, asked by the intake",
    ),
    (
        "daemon/mail.rs",
        "batch::outbox_order",
        "the outbox's order: the shell sorts it with the core's rule",
    ),
    (
        "daemon/notices.rs",
        "notices::NOTICE_BATCH",
        "how many tapped events a batch of notices takes: the shell reads the core's size",
    ),
    (
        "daemon/notices.rs",
        "notices::STARTUP_NOTICES",
        "the start-up batch of notices: the shell reads the core's size",
    ),
    (
        "daemon/runs/start.rs",
        "runs::new_record",
        "a run's record built by the shell: the spawn effect should carry it",
    ),
];

/// Reads one path (or a `{…}` group of them) at the start of `s`, under
/// `prefix`; pushes each whole path to `out`, returns the rest of `s`.
fn path<'a>(mut s: &'a str, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> &'a str {
    loop {
        s = s.trim_start();
        if let Some(mut rest) = s.strip_prefix('{') {
            loop {
                rest = rest.trim_start();
                if let Some(r) = rest.strip_prefix('}') {
                    return r;
                }
                let before = rest.len();
                rest = path(rest, prefix.clone(), out).trim_start();
                // `Name as Alias`
                if let Some(r) = rest.strip_prefix("as ") {
                    let r = r.trim_start();
                    rest = &r[r.find(|c: char| !is_ident(c)).unwrap_or(r.len())..];
                    rest = rest.trim_start();
                }
                rest = rest.strip_prefix(',').unwrap_or(rest);
                if rest.len() == before {
                    return rest;
                }
            }
        }
        let end = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
        if end == 0 {
            // `core::x::*`: the module.
            out.push(prefix);
            return s;
        }
        prefix.push(s[..end].to_string());
        s = &s[end..];
        match s.strip_prefix("::") {
            Some(rest) => s = rest,
            None => {
                out.push(prefix);
                return s;
            }
        }
    }
}

/// Every core path a file names (the segments after `core::`).
fn core_paths(code: &str) -> Vec<Vec<String>> {
    // A bare `core::` is the daemon's core only where the file imports
    // the module itself (`use super::core::{self, …}`); elsewhere it is
    // the language's `core` crate.
    let imports_core = code.contains("core::{self")
        || code.contains("use super::core;")
        || code.contains("use self::core;");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("core::") {
        let at = from + at;
        from = at + "core::".len();
        let before = &code[..at];
        let qualified = ["self::", "super::", "daemon::"]
            .iter()
            .any(|q| before.ends_with(q));
        let bare = !before.ends_with(|c: char| is_ident(c) || c == ':');
        if qualified || (bare && imports_core) {
            path(&code[from..], Vec::new(), &mut out);
        }
    }
    out
}

/// A type (CamelCase), not a function, module or constant.
fn is_type(segment: &str) -> bool {
    segment.starts_with(|c: char| c.is_ascii_uppercase())
        && segment.chars().any(|c| c.is_ascii_lowercase())
}

/// Whether naming `path` is a decision taken outside the door.
fn outside_the_door(path: &[String]) -> bool {
    if path.is_empty() || path == ["self"] {
        // The module itself, for `core::Core`, `core::Input` below.
        return false;
    }
    let Some(t) = path.iter().position(|s| is_type(s)) else {
        // A function, a constant or a module.
        return true;
    };
    // After the type: its variants, or a door's methods.
    path[t + 1..]
        .iter()
        .any(|s| !is_type(s) && !DOORS.contains(&path[t].as_str()))
}

#[test]
fn the_shell_names_the_core_only_through_its_door() {
    // The shell: every file outside the core, test files aside.
    let files: Vec<_> = source_files()
        .into_iter()
        .filter(|f| !f.rel.starts_with("daemon/core/") && !f.is_test())
        .collect();
    let mut found: BTreeSet<(String, String)> = BTreeSet::new();
    let mut seen = 0;
    for f in &files {
        for p in core_paths(&f.code) {
            seen += 1;
            if outside_the_door(&p) {
                found.insert((f.rel.clone(), p.join("::")));
            }
        }
    }
    // The walk saw the shell's steps (a parse that finds nothing passes
    // nothing).
    assert!(seen > 50, "only {seen} core paths found outside the core");
    let known: BTreeSet<(String, String)> = KNOWN
        .iter()
        .map(|(f, p, _)| (f.to_string(), p.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    assert!(
        new.is_empty(),
        "decisions of the core named outside its door (step an Input, or \
         carry an Effect, instead): {new:#?}"
    );
    let closed: Vec<_> = known.difference(&found).collect();
    assert!(
        closed.is_empty(),
        "no longer named outside the door: remove from KNOWN: {closed:#?}"
    );
}

#[test]
fn the_reading_of_paths_finds_groups_methods_and_functions() {
    let code = "use super::core::{self, Effect, files::FileRef, notices::{wanted, NOTICE_BATCH}};\n\
                let x = core::timer::fire(t);\n\
                let c = core::Core::new(i, r).step(core::Input::Rescanned, now);\n\
                let r = self::core::Root::new(p);\n\
                let n = core::mem::take(&mut v);";
    let paths: Vec<String> = core_paths(code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "self",
            "Effect",
            "files::FileRef",
            "notices::wanted",
            "notices::NOTICE_BATCH",
            "timer::fire",
            "Core::new",
            "Input::Rescanned",
            "Root::new",
            "mem::take",
        ]
    );
    let outside: Vec<&String> = paths
        .iter()
        .filter(|p| outside_the_door(&p.split("::").map(String::from).collect::<Vec<_>>()))
        .collect();
    assert_eq!(
        outside,
        [
            "notices::wanted",
            "notices::NOTICE_BATCH",
            "timer::fire",
            "Root::new",
            "mem::take"
        ]
    );
}
