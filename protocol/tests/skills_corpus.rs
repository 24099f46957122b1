//! The 15 real SKILL.md files of tests/corpora/skills/ (vendored from
//! anthropics/skills, openai/skills and github/awesome-copilot with their
//! licences): strict checking gives the standard's reference verdict recorded
//! in VALIDATION.tsv, lenient loading loads every one of them.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::skill::check_file;
use std::path::Path;

#[test]
fn corpus_verdicts_equal_validation_tsv() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/skills");
    let table = std::fs::read_to_string(root.join("VALIDATION.tsv")).unwrap();
    let mut seen = 0;
    for line in table.lines().filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (folder, verdict) = (cols[0], cols[1]);
        let path = root.join(folder).join("SKILL.md");
        let strict = check_file(&path, true);
        let ours = if strict.has_errors() { "FAIL" } else { "PASS" };
        assert_eq!(
            ours,
            verdict,
            "{folder}: expected {verdict} ({}), got {:#?}",
            cols.get(2).unwrap_or(&""),
            strict.diagnostics
        );
        // Lenient loading uses every real skill, failing ones included.
        let lenient = check_file(&path, false);
        let skill = lenient
            .skill
            .as_ref()
            .unwrap_or_else(|| panic!("{folder} skipped"));
        assert!(
            !lenient.has_errors(),
            "{folder}: {:#?}",
            lenient.diagnostics
        );
        assert_eq!(skill.name, folder);
        // desc_len=N is the standard's character count.
        let desc_len: usize = cols[4].trim_start_matches("desc_len=").parse().unwrap();
        assert_eq!(skill.description.chars().count(), desc_len, "{folder}");
        seen += 1;
    }
    assert_eq!(seen, 15);
}

#[test]
fn failing_corpus_skills_name_the_reference_reasons() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/skills");
    let ids = |folder: &str| -> Vec<&'static str> {
        check_file(&root.join(folder).join("SKILL.md"), true)
            .diagnostics
            .iter()
            .map(|d| d.rule.id())
            .collect()
    };
    assert_eq!(ids("claude-api"), ["skill-description-too-long"]);
    assert_eq!(
        ids("acquire-codebase-knowledge"),
        ["skill-metadata-value", "skill-unknown-field"]
    );
}
