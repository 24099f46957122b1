//! Keeps docs/security.md honest: every test its "may not" tables name
//! (`` `file::test_name` ``, a file of `tests/e2e/`) exists, so a "may
//! not" never points at a test that was renamed or never written.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed run

use std::fs;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md");
const E2E: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e");

/// The `file::name` spans in backticks of `text`.
fn named_tests(text: &str) -> Vec<(String, String)> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| {
            let (file, name) = span.split_once("::")?;
            let ident = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            };
            (ident(file) && ident(name)).then(|| (file.to_string(), name.to_string()))
        })
        .collect()
}

#[test]
fn every_test_the_threat_model_names_exists() {
    let doc = fs::read_to_string(DOC).unwrap();
    let named = named_tests(&doc);
    assert!(named.len() >= 20, "the tables name tests: {named:?}");
    let missing: Vec<String> = named
        .iter()
        .filter(|(file, name)| {
            fs::read_to_string(format!("{E2E}/{file}.rs"))
                .map_or(true, |code| !code.contains(&format!("fn {name}(")))
        })
        .map(|(file, name)| format!("{file}::{name}"))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/security.md names tests that do not exist in tests/e2e/: {missing:?}"
    );
}
