//! The supervisor crate's modules depend on each other in one direction.
//!
//! [`LAYERS`] is the map: the top-level modules of `src/` (and the
//! binaries), top to bottom. A module names modules of its own layer or of
//! a lower one, never of a higher one, and the top level has no cycle at
//! all (inside a layer the direction is what the code says; a cycle would
//! be two modules that cannot be read apart). Inside each folder module
//! (`daemon/`, `ctl/`, `cluster/`, …) no child depends on itself through
//! its siblings, except the cycles of [`KNOWN`].
//!
//! A dependency is a path written in code (comments, test modules and
//! files of `#[cfg(test)] mod x;` aside): `crate::a::…`, `super::…` and
//! `self::…` resolved against the file's own module path, each member of a
//! `use crate::{a, b::c}` group, and `squad_supervisor::a` in `src/bin/`.
//! Every path must name a module the walk found: a name that resolves to
//! nothing fails the test, so a dependency cannot hide as a dead end. A
//! call into a folder's `mod.rs` (`crate::ctl::quiet()`) is a dependency on
//! that folder. Inside a folder, its `mod.rs` declares and dispatches to
//! every child, so only child-to-child edges are checked there; what a
//! child takes from its `mod.rs`, and every edge that leaves the folder,
//! is in the top-level graph.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use std::collections::{BTreeMap, BTreeSet};

mod common {
    pub(crate) mod sources;
}
use common::sources::{SourceFile as File, is_ident, source_files};

/// The layers of `supervisor/src`, top to bottom, each with its top-level
/// modules (`bin` stands for `src/bin/`). CONTRIBUTING.md ("Layers")
/// draws the same map.
const LAYERS: &[(&str, &[&str])] = &[
    ("the binaries", &["bin"]),
    // `ctl` reads squadd's health checks and runner configuration
    // (`daemon::health`, `daemon::runs::load_config`) for `status` and
    // `runs`: the command line sits above the daemon, not beside it.
    ("the command line", &["ctl"]),
    ("the daemon", &["daemon"]),
    (
        "features both binaries run",
        &[
            "agent_presence",
            "attention",
            "cluster",
            "notify",
            "retention",
            "runners",
            "status",
            "worktree",
            "worktree_start",
        ],
    ),
    (
        "records squadd and squadctl share",
        &["changes", "control", "locks", "session_edit", "team"],
    ),
    (
        "the project's files read, derived and rendered",
        &[
            "audit",
            "derive",
            "events",
            "inbox",
            "index",
            "layout",
            "memory",
            "notice_ids",
            "outputs",
            "root",
            "skills",
            "state",
        ],
    ),
    (
        "base: files, text, process-wide flags",
        &["canon", "child_env", "exit", "safefs", "text", "verbosity"],
    ),
];

/// Cycles among the children of a folder module that predate this test,
/// each named by its sorted members. None may grow, and no other may
/// appear.
const KNOWN: [&[&str]; 3] = [
    &["cluster/leader", "cluster/replicate", "cluster/retire"],
    &["ctl/message", "ctl/target"],
    &["daemon/context", "daemon/writer"],
];

/// Module paths declared `#[cfg(test)] mod name;` (files that are tests).
fn test_modules(files: &[File]) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for f in files {
        let mut rest = f.code.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let decl = rest.trim_start();
            let decl = decl.strip_prefix("pub(crate) ").unwrap_or(decl);
            if let Some(decl) = decl.strip_prefix("mod ") {
                let name: String = decl.chars().take_while(|c| is_ident(*c)).collect();
                if decl[name.len()..].trim_start().starts_with(';') {
                    let mut m = f.module.clone();
                    m.push(name);
                    out.insert(m);
                }
            }
        }
    }
    out
}

/// The paths a `use`-tree text names below `base`: `a::b`, `{a, b::c}`,
/// `a::{b, c}` (nested groups too), each cut to `depth` segments.
fn expand(base: &[String], text: &str, depth: usize, out: &mut Vec<Vec<String>>) {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        // Split the group's members at its top-level commas.
        let mut level = 0usize;
        let mut start = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => level += 1,
                '}' if level == 0 => {
                    expand(base, &group[start..i], depth, out);
                    return;
                }
                '}' => level -= 1,
                ',' if level == 0 => {
                    expand(base, &group[start..i], depth, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let name: String = text.chars().take_while(|c| is_ident(*c)).collect();
    if name.is_empty() || name == "self" {
        out.push(base.to_vec());
        return;
    }
    let mut path = base.to_vec();
    path.push(name.clone());
    let rest = &text[name.len()..];
    match rest.strip_prefix("::") {
        Some(rest) if path.len() < depth => expand(&path, rest, depth, out),
        _ => out.push(path),
    }
}

/// The absolute module paths (at most three segments) `file` names.
fn references(file: &File) -> Vec<(Vec<String>, usize)> {
    let code = &file.code;
    let mut out = Vec::new();
    let prefixes: &[&str] = if file.module == ["bin"] {
        &["squad_supervisor::"]
    } else {
        &["crate::", "super::", "self::"]
    };
    for prefix in prefixes {
        for (at, _) in code.match_indices(prefix) {
            // A whole path's start: not `squad_crate::`, not `a::super::`.
            if code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
            {
                continue;
            }
            let line = code[..at].matches('\n').count() + 1;
            let mut base: Vec<String> = match *prefix {
                "super::" | "self::" => file.module.clone(),
                _ => Vec::new(),
            };
            let mut rest = &code[at..];
            if let Some(r) = rest.strip_prefix("squad_supervisor::") {
                rest = r;
            } else if let Some(r) = rest.strip_prefix("crate::") {
                rest = r;
            }
            loop {
                if let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("self::") {
                    rest = r;
                } else {
                    break;
                }
            }
            let mut paths = Vec::new();
            expand(&base, rest, (base.len() + 1).max(2), &mut paths);
            out.extend(paths.into_iter().map(|p| (p, line)));
        }
    }
    out
}

/// The graph: for each node, the nodes it names, each with one place
/// (`file:line`) that names it.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The top-level and the folder-level graphs of `src/`.
fn graphs() -> (Graph, Graph, BTreeSet<String>) {
    let mut files = source_files();
    let tests = test_modules(&files);
    files.retain(|f| !(1..=f.module.len()).any(|n| tests.contains(&f.module[..n])));
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let tops: BTreeSet<String> = modules.iter().filter_map(|m| m.first().cloned()).collect();
    let is_folder = |top: &str| modules.iter().any(|m| m.len() > 1 && m[0] == top);
    // The second-level node of a path: `folder/child`, or the top module.
    let node = |path: &[String]| -> String {
        match path {
            [top, child, ..]
                if modules
                    .iter()
                    .any(|m| m.starts_with(&[top.clone(), child.clone()])) =>
            {
                format!("{top}/{child}")
            }
            [top, ..] => top.clone(),
            [] => "lib".into(),
        }
    };
    let (mut top, mut inner) = (Graph::new(), Graph::new());
    for f in &files {
        let me = f.module.first().cloned().unwrap_or_else(|| "lib".into());
        let me_inner = node(&f.module);
        top.entry(me.clone()).or_default();
        for (path, line) in references(f) {
            let Some(to) = path.first() else {
                continue;
            };
            let at = format!("{}:{line}", f.rel);
            assert!(
                tops.contains(to),
                "{at} names `{}`, which is no module of src/",
                path.join("::")
            );
            if *to != me {
                top.entry(me.clone())
                    .or_default()
                    .entry(to.clone())
                    .or_insert(at);
                continue;
            }
            // Inside one folder: child to child (a mod.rs dispatching to
            // its children is how the folder is built, not a dependency).
            let to_inner = node(&path);
            if is_folder(&me) && me_inner != me && to_inner != me && to_inner != me_inner {
                inner
                    .entry(me_inner.clone())
                    .or_default()
                    .entry(to_inner)
                    .or_insert(at);
            }
        }
    }
    (top, inner, tops)
}

/// Strongly connected components with more than one member (Tarjan).
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
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
        for w in graph.get(v).into_iter().flat_map(BTreeMap::keys) {
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

/// The edges inside a set of nodes, with where each is written.
fn edges_within(graph: &Graph, members: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for from in members {
        for (to, at) in graph.get(from).into_iter().flatten() {
            if members.contains(to) {
                out.push(format!("{from} -> {to} ({at})"));
            }
        }
    }
    out
}

#[test]
fn every_top_level_module_has_one_layer() {
    let (_, _, tops) = graphs();
    let mut placed = BTreeMap::new();
    for (layer, members) in LAYERS {
        for m in *members {
            assert!(
                placed.insert(*m, *layer).is_none(),
                "{m} is in two layers of LAYERS"
            );
        }
    }
    let listed: BTreeSet<String> = placed.keys().map(|s| s.to_string()).collect();
    let missing: Vec<_> = tops.iter().filter(|t| !listed.contains(*t)).collect();
    let stale: Vec<_> = listed.iter().filter(|l| !tops.contains(*l)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "LAYERS is out of date: modules in no layer {missing:?}; entries naming no module {stale:?}"
    );
}

#[test]
fn modules_name_only_their_own_layer_or_lower_ones() {
    let (top, _, _) = graphs();
    let layer = |m: &str| LAYERS.iter().position(|(_, ms)| ms.contains(&m));
    let mut upward = Vec::new();
    for (from, tos) in &top {
        for (to, at) in tos {
            if let (Some(a), Some(b)) = (layer(from), layer(to))
                && b < a
            {
                upward.push(format!(
                    "{from} ({}) -> {to} ({}) at {at}",
                    LAYERS[a].0, LAYERS[b].0
                ));
            }
        }
    }
    assert!(upward.is_empty(), "edges up the layers: {upward:#?}");
}

#[test]
fn the_top_level_has_no_cycle() {
    let (top, _, _) = graphs();
    assert!(
        top.contains_key("daemon") && top.contains_key("safefs") && top.contains_key("bin"),
        "the walk found the modules: {:?}",
        top.keys().collect::<Vec<_>>()
    );
    let found: Vec<Vec<String>> = cycles(&top)
        .into_iter()
        .map(|c| edges_within(&top, &c))
        .collect();
    assert!(found.is_empty(), "top-level module cycles: {found:#?}");
}

#[test]
fn no_child_of_a_folder_depends_on_itself_through_its_siblings() {
    let (_, inner, _) = graphs();
    assert!(
        inner.contains_key("daemon/core") && inner.contains_key("ctl/check"),
        "the walk found the folders' children: {:?}",
        inner.keys().collect::<Vec<_>>()
    );
    let known: BTreeSet<Vec<String>> = KNOWN
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let new: Vec<Vec<String>> = cycles(&inner)
        .into_iter()
        .filter(|c| !known.contains(c))
        .map(|c| edges_within(&inner, &c))
        .collect();
    assert!(new.is_empty(), "module cycles: {new:#?}");
}
