//! No module of the supervisor crate depends, through others, on itself.
//!
//! A module here is a top-level module of `src/` (`status`, `safefs`,
//! `locks`, …), or a second-level one under `daemon/`, `ctl/` and
//! `runners/` (`daemon/runs`, `ctl/status`, …); its files are the module's
//! file and everything below it. A dependency is a path written in code
//! (comments and test modules aside): `crate::a::b` or, from a second-level
//! module, `super::b`. A parent's own `mod` declarations and its children's
//! `super::*` do not count: that is how Rust nests modules, not a
//! dependency.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const NESTED: [&str; 3] = ["daemon", "ctl", "runners"];

/// Cycles that predate this test, each named by its sorted members. None
/// may grow, and no other may appear.
const KNOWN: [&[&str]; 2] = [
    &["ctl/message", "ctl/target"],
    &["daemon/context", "daemon/writer"],
];

fn node(parts: &[&str]) -> String {
    match parts {
        [top, second, ..] if NESTED.contains(top) => format!("{top}/{second}"),
        [top, ..] => (*top).to_string(),
        [] => "lib".into(),
    }
}

/// The code of a file without comments and without its inline test module.
fn code(text: &str) -> String {
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

/// Module paths named in `code` after `prefix` (`crate::` or `super::`):
/// the first one or two segments, lower case (a module, not a type).
fn paths<'a>(code: &'a str, prefix: &str) -> Vec<(&'a str, Option<&'a str>)> {
    let ident = |s: &'a str| {
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        &s[..end]
    };
    code.match_indices(prefix)
        .filter(|(at, _)| {
            // A whole segment: `crate::`, not `squad_crate::`.
            code[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
        })
        .map(|(at, _)| {
            let rest = &code[at + prefix.len()..];
            let first = ident(rest);
            let second = rest[first.len()..]
                .strip_prefix("::")
                .map(ident)
                .filter(|s| s.starts_with(|c: char| c.is_ascii_lowercase()));
            (first, second)
        })
        .filter(|(first, _)| first.starts_with(|c: char| c.is_ascii_lowercase()))
        .collect()
}

fn walk(dir: &Path, rel: &mut Vec<String>, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            if rel.is_empty() && name == "bin" {
                continue;
            }
            rel.push(name);
            walk(&entry.path(), rel, graph);
            rel.pop();
            continue;
        }
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if stem == "tests" {
            continue;
        }
        let mut parts: Vec<&str> = rel.iter().map(String::as_str).collect();
        if stem != "mod" && stem != "lib" {
            parts.push(stem);
        }
        let me = node(&parts);
        let text = code(&fs::read_to_string(entry.path()).unwrap());
        let mut deps = BTreeSet::new();
        for (first, second) in paths(&text, "crate::") {
            let mut to = vec![first];
            to.extend(second);
            deps.insert(node(&to));
        }
        // `super::x` from a second-level module names its sibling.
        if parts.len() == 2 && NESTED.contains(&parts[0]) {
            for (first, _) in paths(&text, "super::") {
                deps.insert(node(&[parts[0], first]));
            }
        }
        deps.remove(&me);
        // The parent module itself (`daemon`, `ctl`) is where its children
        // are declared: a child naming it is nesting, not a dependency.
        deps.retain(|d| !NESTED.contains(&d.as_str()));
        graph.entry(me).or_default().extend(deps);
    }
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let Some((w, _)) = graph.get_key_value(w) else {
                continue;
            };
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_depends_on_itself_through_others() {
    let mut graph = BTreeMap::new();
    walk(Path::new(SRC), &mut Vec::new(), &mut graph);
    assert!(
        graph.contains_key("daemon/runs") && graph.contains_key("safefs"),
        "the walk found the modules: {:?}",
        graph.keys().collect::<Vec<_>>()
    );
    let known: BTreeSet<Vec<String>> = KNOWN
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let new: Vec<Vec<String>> = cycles(&graph)
        .into_iter()
        .filter(|c| !known.contains(c))
        .collect();
    assert!(new.is_empty(), "module cycles: {new:?}");
}
