//! Team memory over the real files of tests/corpora/squad.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::memory::{self, Outcome, Style};
use std::path::PathBuf;

fn corpus() -> Vec<(PathBuf, String)> {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad/squad-head/.squad");
    decisions_and_inbox(
        &root,
        &[
            "agents/fido",
            "agents/flight",
            "agents/scribe",
            "agents/_alumni/kobayashi",
        ],
    )
}

/// A team's decisions.md, its inbox files (sorted) and the histories of
/// `agents`, with their text.
fn decisions_and_inbox(root: &std::path::Path, agents: &[&str]) -> Vec<(PathBuf, String)> {
    let mut files = vec![root.join("decisions.md")];
    let mut inbox: Vec<_> = std::fs::read_dir(root.join("decisions/inbox"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    inbox.sort();
    files.extend(inbox);
    for a in agents {
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

/// SquadUI's own `.ai-team/` memory (tests/corpora/squad/squadui-ai-team, MIT).
fn squadui_corpus() -> Vec<(PathBuf, String)> {
    decisions_and_inbox(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/corpora/squad/squadui-ai-team/.ai-team"),
        &[],
    )
}

#[test]
fn squadui_team_memory_parses_renders_and_converts_losing_no_word() {
    let tz = chrono::FixedOffset::east_opt(0).unwrap();
    for (path, src) in squadui_corpus() {
        let doc = memory::parse(&src);
        assert_eq!(doc.render(), src, "{}", path.display());
        assert_eq!(memory::unclosed_fence(&src), None, "{}", path.display());
        let c = memory::convert(&src, tz, None);
        assert!(c.lost.is_empty(), "{}: lost {:?}", path.display(), c.lost);
        if path.to_string_lossy().contains("inbox") {
            // A real inbox file is one entry (`# Title` with Author/Date too).
            assert_eq!(doc.entries().count(), 1, "{}", path.display());
            assert!(
                c.entries.iter().all(|e| e.outcome == Outcome::Converted),
                "{}: {:?}",
                path.display(),
                c.entries
            );
        }
    }
}

#[test]
fn unclosed_fences_are_found_with_their_line() {
    assert_eq!(memory::unclosed_fence("a\n```\nx\n```\nb\n"), None);
    assert_eq!(memory::unclosed_fence("a\n\n```sh\nx\n"), Some(3));
    assert_eq!(memory::unclosed_fence("~~~\n```\n~~~\n````\n"), Some(4));
    // A shorter closing fence does not close a longer one.
    assert_eq!(memory::unclosed_fence("````\nx\n```\n"), Some(1));
}

#[test]
fn sem_shaped_headings_with_impossible_timestamps_are_sem() {
    for ts in [
        "2026-02-30T25:61:61-9999",
        "2026-02-15T14:32:15+2400",
        "2026-02-15T14:32:15",
    ] {
        let src = format!("### {ts}: decision: Odd\n\n**type:** decision\n\n---\n");
        let doc = memory::parse(&src);
        let e = doc.entries().next().unwrap();
        assert_eq!(e.style, Style::Sem, "{ts}");
        assert_eq!(e.header_timestamp.as_deref(), Some(ts));
        assert!(!memory::valid_timestamp(ts));
    }
    assert_eq!(
        memory::timestamp_problem("2026-02-30T10:00:00Z"),
        "no such date"
    );
    assert_eq!(
        memory::timestamp_problem("2026-02-15T25:61:61-0800"),
        "no such time of day"
    );
    assert_eq!(
        memory::timestamp_problem("2026-02-15T14:32:15+2400"),
        "offset out of range"
    );
    // Legacy dated headings stay legacy.
    let doc = memory::parse("### 2026-03-27T21-42: Title\n**By:** k\n");
    assert_eq!(doc.entries().next().unwrap().style, Style::DatedHeading);
}

#[test]
fn the_fixed_layout_reads_as_the_general_parser_does() {
    // parse_moment reads SEM's layout directly; the result must be chrono's.
    for t in [
        "2026-02-15T14:32:15-0800",
        "2026-02-15T14:32:15-08:00",
        "2026-02-15T14:32:15Z",
        "2026-02-15T14:32:15.250+0530",
        "2026-02-15T14:32:15.123456789+00:00",
        "2024-02-29T00:00:00+0000",
    ] {
        let fast = memory::parse_moment(t, None);
        let slow = chrono::DateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f%z")
            .or_else(|_| chrono::DateTime::parse_from_rfc3339(t))
            .ok();
        assert!(fast.is_some(), "{t}");
        assert_eq!(fast, slow, "{t}");
        assert_eq!(
            fast.map(|d| d.offset().local_minus_utc()),
            slow.map(|d| d.offset().local_minus_utc())
        );
    }
    for t in [
        "2026-02-30T10:00:00Z",
        "2026-02-15T25:61:61-9999",
        "2026-02-15T14:32:15+2400",
        "2026-02-15T14:32:15+0060",
        "2023-02-29T00:00:00Z",
    ] {
        assert_eq!(memory::parse_moment(t, None), None, "{t}");
    }
}
