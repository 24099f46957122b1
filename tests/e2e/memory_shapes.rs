//! Issue 41.3 and 41.4 through the real binary: convert leaves `squadctl
//! validate` and `memory validate` as they were on every team directory of
//! the corpus, and `memory query` lists the entries SquadUI lists.

use crate::support::{code, copy_tree, ctl_root, run, stdout};
use std::path::{Path, PathBuf};

/// Every team directory of tests/corpora/squad: (project, team dir name).
fn corpus_teams() -> Vec<(PathBuf, String)> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad");
    let mut out = Vec::new();
    let mut stack = vec![base];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if !p.is_dir() {
                continue;
            }
            match p.file_name().and_then(|n| n.to_str()) {
                Some(n @ (".squad" | ".ai-team")) => out.push((d.clone(), n.to_string())),
                _ => stack.push(p),
            }
        }
    }
    out.sort();
    out
}

#[test]
fn convert_leaves_validate_as_it_was_on_every_corpus_team() {
    // Issue 41.3: a legacy entry's `**Scope:** Cross-cutting — affects PRDs
    // 1, 4, 5` became an invalid SEM scope: `squadctl validate` went from
    // exit 0 to exit 1 on the project after convert.
    let teams = corpus_teams();
    assert!(teams.len() >= 8, "{teams:?}");
    for (project, team) in teams {
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&project.join(&team), &tmp.path().join(&team));
        let root = tmp.path();
        let codes = || {
            let v = run(ctl_root(root).args(["validate", "--format", "json"]));
            let m = run(ctl_root(root).args(["memory", "validate", "--format", "json"]));
            let errors = |out: &std::process::Output| {
                // No report at all (a command that refuses the project)
                // counts by its exit status alone.
                let doc: serde_json::Value = serde_json::from_str(&stdout(out)).unwrap_or_default();
                let mut rules: Vec<String> = doc["diagnostics"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .filter(|d| d["severity"] == "error")
                    .map(|d| d["rule"].as_str().unwrap_or("").to_string())
                    .collect();
                rules.sort();
                rules
            };
            (code(&v), code(&m), errors(&v), errors(&m))
        };
        let before = codes();
        let out = run(ctl_root(root).args(["memory", "convert"]));
        assert!(
            code(&out) == 0,
            "{}: {}",
            project.display(),
            crate::support::stderr(&out)
        );
        let after = codes();
        eprintln!(
            "{}/{team}: validate {} → {}, memory validate {} → {}",
            project.display(),
            before.0,
            after.0,
            before.1,
            after.1
        );
        assert_eq!(after, before, "{}/{team}", project.display());
    }
}

#[test]
fn query_lists_level_2_and_decision_entries_with_their_authors() {
    // Issue 41.4: `## 2026-02-15: Title` and `## Decision: Title` entries
    // were in no entry, and a `# Title` block took the `##` entry below it,
    // another author's, as its own.
    let (project, team) = corpus_teams()
        .into_iter()
        .find(|(p, _)| p.ends_with("shapes"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&project.join(&team), &tmp.path().join(&team));
    let out = run(ctl_root(tmp.path()).args(["memory", "query", "--json"]));
    assert_eq!(code(&out), 0);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let listed: Vec<(String, String, String)> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["summary"].as_str().unwrap().to_string(),
                e["author"].as_str().unwrap_or("").to_string(),
                e["timestamp"]
                    .as_str()
                    .unwrap_or("")
                    .get(..10)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    for (title, author, date) in [
        ("Adopt the new build cache", "Rosa", "2026-02-15"),
        ("Keep the API versioned", "Theo", "2026-02-16"),
        ("Release train", "Mona", "2026-02-17"),
        ("Hotfix window", "Karl", "2026-02-18"),
    ] {
        assert!(
            listed.contains(&(title.into(), author.into(), date.into())),
            "`{title}` by {author} on {date} not in {listed:?}"
        );
    }
    let out = run(ctl_root(tmp.path()).args(["memory", "query", "--author", "Karl"]));
    assert!(stdout(&out).contains("1 entry"), "{}", stdout(&out));
}
