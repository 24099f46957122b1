//! Team memory over the real files of tests/corpora/squad.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::memory::{self, Outcome, Style};
use std::path::PathBuf;

fn corpus() -> Vec<(PathBuf, String)> {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad/squad-head/.squad");
    let mut files = vec![root.join("decisions.md")];
    let mut inbox: Vec<_> = std::fs::read_dir(root.join("decisions/inbox"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    inbox.sort();
    files.extend(inbox);
    for a in [
        "agents/fido",
        "agents/flight",
        "agents/scribe",
        "agents/_alumni/kobayashi",
    ] {
        files.push(root.join(a).join("history.md"));
    }
    files
        .into_iter()
        .map(|p| {
            let s = std::fs::read_to_string(&p).unwrap();
            (p, s)
        })
        .collect()
}

#[test]
fn real_files_parse_render_identity_and_entry_count() {
    let mut total = 0;
    for (path, src) in corpus() {
        let doc = memory::parse(&src);
        assert_eq!(doc.render(), src, "{}", path.display());
        let n = doc.entries().count();
        eprintln!("{}: {n} entries", path.display());
        total += n;
    }
    eprintln!("corpus: {total} entries");
    assert!(total >= 60, "{total}");
}

#[test]
fn real_decisions_styles_are_recognised() {
    let (_, src) = &corpus()[0];
    let doc = memory::parse(src);
    let styles: Vec<Style> = doc.entries().map(|e| e.style).collect();
    assert!(styles.contains(&Style::Undated));
    assert!(styles.contains(&Style::DecisionBlock));
    let pr = doc
        .entries()
        .find(|e| e.title.starts_with("PR Review Batch"))
        .unwrap();
    assert_eq!(pr.field("date"), Some("2026-03-25"));
    // `## Problem` and `### …` inside a `# Decision:` block belong to it.
    assert!(pr.text(src).contains("## Affected PRs"));
}

#[test]
fn real_files_convert_with_no_word_lost() {
    let tz = chrono::FixedOffset::east_opt(0).unwrap();
    let mut converted = 0;
    for (path, src) in corpus() {
        let agent = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .filter(|_| path.ends_with("history.md"));
        let c = memory::convert(&src, tz, agent);
        assert!(c.lost.is_empty(), "{}: lost {:?}", path.display(), c.lost);
        converted += c
            .entries
            .iter()
            .filter(|e| e.outcome == Outcome::Converted)
            .count();
        // SEM → parse → render is identical.
        assert_eq!(memory::parse(&c.output).render(), c.output);
        // Converting again changes nothing more: SEM entries are kept.
        let again = memory::convert(&c.output, tz, agent);
        assert!(again.lost.is_empty());
        for e in memory::parse(&c.output)
            .entries()
            .filter(|e| e.style == Style::Sem)
        {
            assert!(e.author().is_some());
        }
    }
    eprintln!("converted {converted} entries");
    assert!(converted > 10);
}
