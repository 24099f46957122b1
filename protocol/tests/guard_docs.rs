//! Keeps docs/guards.md true to the code: every `guard-…` rule has its
//! section, marked `<!-- rule: ID -->` before a `### \`ID\`` heading.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::Rule;

#[test]
fn guards_md_documents_every_guard_rule() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guards.md"))
        .expect("docs/guards.md is readable");
    let rules: Vec<Rule> = Rule::ALL
        .iter()
        .copied()
        .filter(|r| r.id().starts_with("guard-"))
        .collect();
    assert!(!rules.is_empty());
    for rule in rules {
        let id = rule.id();
        let section = format!("<!-- rule: {id} -->\n### `{id}`\n");
        assert!(
            doc.contains(&section),
            "docs/guards.md lacks the section of {id}"
        );
        assert_eq!(rule.doc_path(), "docs/guards.md");
    }
}
