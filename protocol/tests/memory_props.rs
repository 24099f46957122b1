//! Property tests for team memory: random documents of entries in every
//! style, with code fences and preambles.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use proptest::prelude::*;
use squad_protocol::memory::{self, Outcome};
use std::collections::BTreeSet;

fn word() -> impl Strategy<Value = String> {
    "[a-z]{1,8}"
}

fn words(n: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(word(), 1..n).prop_map(|v| v.join(" "))
}

/// Body lines: prose, a fence holding heading and rule lines, nested headings.
fn body() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            words(8),
            words(4).prop_map(|w| format!("```\n### {w}\n---\n**By:** {w}\n```")),
            words(4).prop_map(|w| format!("#### {w}")),
            words(4).prop_map(|w| format!("- {w}")),
        ],
        0..4,
    )
    .prop_map(|v| v.join("\n\n"))
}

fn date() -> impl Strategy<Value = (u32, u32, u32, u32)> {
    (1u32..=12, 1u32..=28, 0u32..24, 0u32..60)
}

/// One entry in a random style, its text ending with a newline.
fn entry() -> impl Strategy<Value = String> {
    (0..6usize, date(), words(6), word(), body(), words(5)).prop_map(
        |(style, (mo, d, h, mi), title, author, body, why)| {
            let day = format!("2025-{mo:02}-{d:02}");
            let ts = format!("{day}T{h:02}:{mi:02}:00+0100");
            match style {
                0 => format!(
                    "### {ts}: decision: {title}\n\n**type:** decision\n**timestamp:** {ts}\n**author:** {author}\n**summary:** {title}\n\n**details:**\n\n{body}\n\n---\n"
                ),
                1 => format!("### {day}: {title}\n**By:** {author}\n**What:**\n{body}\n**Why:** {why}\n"),
                2 => format!("### {day}T{h:02}-{mi:02}: {title}\n\n{body}\n"),
                3 => format!("### {title}\n\n{body}\n"),
                4 => format!("## {title}\n\n**Date:** {day}\n**Author:** {author}\n\n{body}\n"),
                _ => format!(
                    "# Decision: {title}\n\n**By:** {author}\n**Date:** {day}\n\n## Context\n\n{body}\n\n## Why\n\n{why}\n\n---\n"
                ),
            }
        },
    )
}

fn document() -> impl Strategy<Value = (String, usize)> {
    (words(6), prop::collection::vec(entry(), 0..12)).prop_map(|(pre, entries)| {
        let n = entries.len();
        let mut s = format!("# Decisions\n\n{pre}\n\n");
        for e in entries {
            s.push_str(&e);
            s.push('\n');
        }
        (s, n)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn parse_render_is_identity_and_finds_every_entry((doc, n) in document()) {
        let parsed = memory::parse(&doc);
        prop_assert_eq!(parsed.render(), doc.clone());
        prop_assert_eq!(parsed.entries().count(), n);
    }

    #[test]
    fn convert_preserves_every_word((doc, n) in document()) {
        let tz = chrono::FixedOffset::east_opt(3600).unwrap();
        let c = memory::convert(&doc, tz, Some("agent"));
        prop_assert!(c.lost.is_empty(), "{:?}", c.lost);
        prop_assert_eq!(memory::parse(&c.output).entries().count(), n);
        // Text outside entries is untouched: the preamble is still first.
        prop_assert!(c.output.starts_with("# Decisions\n\n"));
        // Converting again converts nothing more except what needs review.
        let again = memory::convert(&c.output, tz, Some("agent"));
        prop_assert!(again.entries.iter().all(|e| e.outcome != Outcome::Converted));
    }

    #[test]
    fn archive_plus_live_is_the_original_entry_set((doc, _) in document(), seed in any::<u64>()) {
        let parsed = memory::parse(&doc);
        let moves: Vec<bool> = (0..parsed.entries().count()).map(|i| (seed >> (i % 64)) & 1 == 1).collect();
        let (archive, live, _) = memory::split_archive(&doc, "# Archive\n", &moves);
        // Identical entries are one entry: the archive keeps one copy.
        let ids = |s: &str| -> BTreeSet<String> {
            let d = memory::parse(s);
            d.entries().map(|e| e.identity(s)).collect()
        };
        let mut all = ids(&archive);
        all.extend(ids(&live));
        prop_assert_eq!(all, ids(&doc));
        // A second run (after a crash before the live file was rewritten)
        // appends nothing twice.
        let again = memory::split_archive(&doc, &archive, &moves);
        let n = memory::parse(&again.0).entries().count();
        prop_assert_eq!(n, memory::parse(&archive).entries().count());
    }
}
