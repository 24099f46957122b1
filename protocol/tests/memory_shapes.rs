//! Issue 41.3 and 41.4: entries read as Squad and SquadUI read them, and a
//! conversion that keeps a valid file valid, on every decisions file of
//! tests/corpora/squad (the real ones and `shapes/`, the shapes found in
//! teams the corpus does not hold).

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed run

use squad_protocol::memory::{self, Outcome, Style};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad")
}

/// What SquadUI's own parser reads from each corpus decisions file
/// (`tests/corpora/squad/squadui-reading.json`, written by running its
/// DecisionService.ts under node: tests/interop/squadui/reading.mjs).
fn squadui_reading() -> Vec<(String, Vec<serde_json::Value>)> {
    let text = std::fs::read_to_string(corpus().join("squadui-reading.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_array().unwrap().clone()))
        .collect()
}

/// The date (`YYYY-MM-DD`) an entry is read with.
fn date_of(e: &memory::Entry) -> Option<String> {
    e.timestamp_text()
        .and_then(|t| t.get(..10).map(str::to_string))
}

#[test]
fn authors_and_dates_agree_with_squadui_on_every_corpus_file() {
    // Issue 41.4: `## 2026-02-15: Title` and `## Decision:` entries were no
    // entries, and a `# Title` block took the `##` entry below it (another
    // author's) as its own.
    let reading = squadui_reading();
    assert!(reading.len() >= 3);
    let mut compared = 0;
    for (file, ui) in reading {
        let src = std::fs::read_to_string(corpus().join(&file)).unwrap();
        let lines: Vec<&str> = src.lines().collect();
        let doc = memory::parse(&src);
        for d in &ui {
            let title = d["title"].as_str().unwrap();
            let line = d["line"].as_u64().unwrap() as usize + 1;
            // SquadUI reads a heading's author and date from the 19 lines
            // below it, through deeper headings: a section heading gets the
            // author of the first entry inside it. Compared here is what a
            // heading carries itself: its title's date, the lines up to the
            // next heading.
            let own: Vec<&str> = lines[line..]
                .iter()
                .take_while(|l| !l.trim_start().starts_with('#'))
                .copied()
                .collect();
            let has = |tag: &str| own.iter().any(|l| l.contains(tag));
            let author = d["author"]
                .as_str()
                .filter(|_| has("**Author:**") || has("**By:**"));
            let dated_title = lines[line - 1]
                .trim_start_matches(['#', ' '])
                .starts_with(|c: char| c.is_ascii_digit());
            let date = d["date"]
                .as_str()
                .filter(|_| dated_title || has("**Date:**"));
            if author.is_none() && date.is_none() {
                continue; // a section heading, not an entry
            }
            let e = doc
                .entries()
                .find(|e| e.line == line)
                .unwrap_or_else(|| panic!("{file}:{line}: SquadUI lists `{title}`; no entry here"));
            if let Some(a) = author {
                assert_eq!(e.author().as_deref(), Some(a), "{file}:{line} `{title}`");
            }
            if let Some(d) = date {
                assert_eq!(date_of(e).as_deref(), Some(d), "{file}:{line} `{title}`");
            }
            compared += 1;
        }
    }
    eprintln!("{compared} entries agree with SquadUI on author and date");
    assert!(compared >= 40, "{compared}");
}

#[test]
fn level_2_dated_and_decision_entries_are_entries() {
    let src = std::fs::read_to_string(corpus().join("shapes/.squad/decisions.md")).unwrap();
    let doc = memory::parse(&src);
    assert_eq!(doc.render(), src);
    let got: Vec<(Style, String, Option<String>, Option<String>)> = doc
        .entries()
        .map(|e| (e.style, e.title.clone(), e.author(), date_of(e)))
        .collect();
    let want = |st, t: &str, a: &str, d: &str| (st, t.to_string(), Some(a.into()), Some(d.into()));
    assert_eq!(
        got[..4],
        [
            want(
                Style::DatedHeading,
                "Adopt the new build cache",
                "Rosa",
                "2026-02-15"
            ),
            want(
                Style::DecisionBlock,
                "Keep the API versioned",
                "Theo",
                "2026-02-16"
            ),
            want(Style::TitleBlock, "Release train", "Mona", "2026-02-17"),
            want(Style::TitleBlock, "Hotfix window", "Karl", "2026-02-18"),
        ]
    );
    // The `# Release train` block keeps its own `## Decision` and `## Impact`.
    let train = doc.entries().nth(2).unwrap().text(&src);
    assert!(
        train.contains("## Impact") && !train.contains("Hotfix"),
        "{train}"
    );
}

/// Errors of a memory text, as (rule, message), sorted.
fn errors(src: &str) -> Vec<(String, String)> {
    let doc = memory::parse(src);
    let mut known = memory::Known::default();
    known.add(&doc);
    let now = chrono::Utc::now().fixed_offset();
    let mut v: Vec<(String, String)> = memory::validate(Path::new("x"), &doc, &known, now, false)
        .into_iter()
        .filter(|d| d.is_error())
        .map(|d| (format!("{:?}", d.rule), d.message))
        .collect();
    v.sort();
    v
}

/// Every memory file of the corpus teams (and the shapes file).
fn memory_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![corpus()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md")
                && (p.to_string_lossy().contains("/decisions")
                    || p.file_name().is_some_and(|n| n == "history.md"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn convert_adds_no_error_to_any_corpus_file() {
    // Issue 41.3: `**Scope:** Cross-cutting — affects PRDs 1, 4, 5` in a
    // legacy entry became an invalid SEM `scope` (5 errors on one real
    // file): validate went from exit 0 to exit 1 after convert.
    let tz = chrono::FixedOffset::east_opt(0).unwrap();
    let files = memory_files();
    assert!(files.len() >= 10, "{files:?}");
    for p in files {
        let src = std::fs::read_to_string(&p).unwrap();
        let agent = p
            .parent()
            .and_then(|d| d.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        let c = memory::convert(&src, tz, agent.as_deref());
        assert!(c.lost.is_empty(), "{}: {:?}", p.display(), c.lost);
        assert_eq!(errors(&c.output), errors(&src), "{}", p.display());
    }
}

#[test]
fn field_like_lines_in_an_entry_stay_text_and_long_titles_fit() {
    let src = std::fs::read_to_string(corpus().join("shapes/.squad/decisions.md")).unwrap();
    let tz = chrono::FixedOffset::east_opt(0).unwrap();
    let c = memory::convert(&src, tz, None);
    assert!(c.lost.is_empty(), "{:?}", c.lost);
    assert!(errors(&src).is_empty());
    assert_eq!(errors(&c.output), Vec::new(), "{}", c.output);
    let out = memory::parse(&c.output);
    let budget = out
        .entries()
        .find(|e| e.title == "Cross-cutting budget rule")
        .unwrap();
    assert_eq!(budget.style, Style::Sem);
    for f in ["scope", "related", "tags", "supersedes"] {
        assert_eq!(budget.field(f), None, "{f}");
    }
    let details = budget.field("details").unwrap();
    assert!(
        details.contains("**Scope**: Cross-cutting — affects PRDs 1, 4, 5"),
        "{details}"
    );
    let long = out
        .entries()
        .find(|e| e.title.starts_with("Every service"))
        .unwrap();
    assert_eq!(long.style, Style::Sem);
    assert!(long.summary().chars().count() <= memory::SUMMARY_MAX);
    assert!(long.summary().ends_with('…'));
    assert!(
        long.field("details")
            .unwrap()
            .contains("alerts after the third failure in an hour")
    );
    // Every legacy entry of the file converts.
    assert!(
        c.entries.iter().all(|e| e.outcome == Outcome::Converted),
        "{:?}",
        c.entries
    );
}

#[test]
fn the_checked_in_squadui_reading_is_what_squadui_reads_today() {
    // Where node and the pinned `typescript` are installed (`npm ci` in
    // tests/interop/squadui/), SquadUI's parser is run again on the corpus
    // and must read what squadui-reading.json says; elsewhere it is skipped
    // (loudly): the file is what the other tests compare with.
    let interop = corpus().join("../../interop/squadui");
    let node = std::env::var_os("SQUADUI_NODE").unwrap_or_else(|| "node".into());
    if !interop.join("node_modules/typescript").is_dir() {
        eprintln!(
            "\n!!! SKIPPED: no tests/interop/squadui/node_modules (npm ci there to run SquadUI's parser)\n"
        );
        return;
    }
    let files: Vec<String> = squadui_reading().into_iter().map(|(f, _)| f).collect();
    let out = std::process::Command::new(&node)
        .arg(interop.join("reading.mjs"))
        .args(&files)
        .current_dir(corpus())
        .output();
    let Ok(out) = out else {
        eprintln!("\n!!! SKIPPED: node is not installed\n");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let now: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checked_in: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(corpus().join("squadui-reading.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        now, checked_in,
        "regenerate squadui-reading.json (see reading.mjs)"
    );
}
