//! Keeps each area's documentation page true to the code: every rule of the
//! area's prefix has its row in the page's rules table (with its severity)
//! and its own `###` section, in `Rule::ALL` order; the page documents no
//! rule that does not exist; and each rule points at that page.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::Rule;

/// Rule-id prefix → the page that documents the rules of that prefix.
const AREAS: &[(&str, &str, &str)] = &[
    (
        "skill-",
        "docs/skills.md",
        include_str!("../../docs/skills.md"),
    ),
    (
        "memory-",
        "docs/memory.md",
        include_str!("../../docs/memory.md"),
    ),
    ("team-", "docs/team.md", include_str!("../../docs/team.md")),
];

fn rules(prefix: &str) -> Vec<Rule> {
    Rule::ALL
        .iter()
        .copied()
        .filter(|r| r.id().starts_with(prefix))
        .collect()
}

#[test]
fn every_rule_has_a_section_in_order() {
    for &(prefix, page, doc) in AREAS {
        let headings: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("### `")?.strip_suffix('`'))
            .collect();
        let ids: Vec<&str> = rules(prefix).iter().map(|r| r.id()).collect();
        assert!(!ids.is_empty(), "no {prefix}… rules");
        assert_eq!(headings, ids, "{page}");
    }
}

#[test]
fn every_rule_has_a_table_row_with_its_severity_and_points_at_its_page() {
    for &(prefix, page, doc) in AREAS {
        let row_start = format!("| [`{prefix}");
        let rows: Vec<(&str, &str)> = doc
            .lines()
            .filter(|l| l.starts_with(&row_start))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let id = cells[1].trim_start_matches("[`").split('`').next().unwrap();
                (id, cells[2])
            })
            .collect();
        let expected: Vec<(&str, &str)> = rules(prefix)
            .iter()
            .map(|r| (r.id(), r.severity().as_str()))
            .collect();
        assert_eq!(rows, expected, "{page}");
        for r in rules(prefix) {
            assert_eq!(r.doc_path(), page, "{}", r.id());
        }
    }
}
