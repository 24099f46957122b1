//! The YAML test suite's 402 cases (inputs no one here wrote): the parser
//! must survive every one of them, in every encoding and as every file kind.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::locate::{PathSeg, Target, locate};
use squad_protocol::{FileKind, Rule, check_bytes};
use std::fs;
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SQUAD_YAML_CORPUS") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/yaml-test-suite")
}

/// Every `in.yaml` under the corpus, with whether the suite marks it invalid.
fn cases() -> Vec<(PathBuf, bool)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, bool)>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.file_name().is_some_and(|n| n == "in.yaml") {
                out.push((path.clone(), dir.join("error").exists()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&corpus_dir(), &mut out);
    out.sort();
    out
}

#[test]
fn every_case_parses_or_fails_cleanly_in_every_encoding_and_kind() {
    let cases = cases();
    // Vendored from the team's shared corpora (MIT, see its LICENSE); a
    // missing corpus must fail, never pass silently.
    assert!(
        !cases.is_empty(),
        "YAML test suite not found at {}; set SQUAD_YAML_CORPUS",
        corpus_dir().display()
    );
    assert_eq!(cases.len(), 402, "the suite has 402 cases");
    let mut invalid_detected = 0;
    let mut invalid_total = 0;
    for (path, invalid) in &cases {
        let yaml = fs::read(path).unwrap();
        let text = String::from_utf8_lossy(&yaml);
        let encodings = [
            yaml.clone(),
            format!("---\n{text}\n---\n# notes\n").into_bytes(),
            format!("# Title\n\n```yaml\n{text}\n```\n").into_bytes(),
        ];
        for (e, bytes) in encodings.iter().enumerate() {
            for kind in FileKind::ALL {
                let report = check_bytes(Path::new(kind.file_pattern()), kind, bytes);
                for d in &report.diagnostics {
                    assert!(
                        !d.message.is_empty() && !d.hint.is_empty(),
                        "{}: {d:?}",
                        path.display()
                    );
                    if let Some(l) = d.location {
                        assert!(l.line >= 1 && l.column >= 1, "{}: {d:?}", path.display());
                    }
                }
                if e == 0 && kind == FileKind::TaskAssignment && *invalid {
                    invalid_total += 1;
                    if report
                        .diagnostics
                        .iter()
                        .any(|d| d.rule == Rule::YamlSyntax)
                    {
                        invalid_detected += 1;
                    }
                }
            }
        }
        for seg in [
            vec![PathSeg::Index(0)],
            vec![PathSeg::Key("a".into()), PathSeg::Index(1)],
        ] {
            let _ = locate(&text, &seg, Target::Key);
        }
    }
    // libyaml is not a perfect YAML 1.2 parser; record how close it is so a
    // regression (say, a parser swap that accepts garbage) shows up.
    eprintln!("invalid cases reported as yaml-syntax: {invalid_detected}/{invalid_total}");
    assert!(
        invalid_detected * 10 >= invalid_total * 8,
        "only {invalid_detected}/{invalid_total} invalid cases rejected"
    );
}
