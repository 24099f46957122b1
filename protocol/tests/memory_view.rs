//! The borrowed reading of a memory file (`memory::view`) agrees with the
//! owned one (`memory::parse`) on every entry: boundaries, heading parts,
//! fields and the derived values `memory query` shows and filters on. Over
//! the real corpus, hostile random documents (CRLF, stray `\r`, fences,
//! undated entries) and a huge entry.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use proptest::prelude::*;
use squad_protocol::memory::{self, view};
use std::borrow::Cow;
use std::path::PathBuf;

/// Asserts that both readings of `src` see the same entries.
fn agree(src: &str) {
    let doc = memory::parse(src);
    let v = view::parse(src);
    let owned: Vec<_> = doc.entries().collect();
    let borrowed: Vec<_> = v.entries().collect();
    assert_eq!(owned.len(), borrowed.len(), "entry count of {src:?}");
    for (e, b) in owned.iter().zip(&borrowed) {
        assert_eq!(e.style, b.style());
        assert_eq!(e.span, b.span());
        assert_eq!(
            (e.line, e.end_line, e.level),
            (b.line(), b.end_line(), b.level())
        );
        assert_eq!(e.heading, b.heading());
        assert_eq!(e.header_timestamp.as_deref(), b.header_timestamp());
        assert_eq!(e.header_type.as_deref(), b.header_type());
        assert_eq!(e.title, b.title());
        assert_eq!(e.terminated, b.terminated());
        assert_eq!(e.text(src), b.text());
        let fields: Vec<_> = b
            .fields()
            .iter()
            .map(|f| (f.name, f.value.as_ref(), f.line))
            .collect();
        let want: Vec<_> = e
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.value.as_str(), f.line))
            .collect();
        assert_eq!(want, fields, "fields of {:?}", e.text(src));
        assert_eq!(e.kind(), b.kind());
        assert_eq!(e.timestamp_text().as_deref(), b.timestamp_text());
        assert_eq!(e.moment(), b.moment());
        assert_eq!(e.author().as_deref(), b.author());
        assert_eq!(e.summary(), b.summary());
        assert_eq!(e.tags(), b.tags().collect::<Vec<_>>());
        for name in ["scope", "supersedes", "Type", "missing"] {
            assert_eq!(e.field(name), b.field(name));
        }
    }
}

#[test]
fn agrees_on_the_real_memory_files() {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad/squad-head/.squad");
    let mut files = vec![root.join("decisions.md")];
    for d in [
        "decisions/inbox",
        "agents/fido",
        "agents/flight",
        "agents/scribe",
    ] {
        for e in std::fs::read_dir(root.join(d)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    for p in files {
        let src = std::fs::read_to_string(&p).unwrap();
        agree(&src);
        // The same file with Windows line ends.
        agree(&src.replace('\n', "\r\n"));
    }
}

#[test]
fn crlf_multi_line_values_are_joined_with_newlines_as_the_owned_reading_does() {
    let src = "### 2026-01-02T10:00:00Z: decision: Use CRLF\r\n\r\n**type:** Decision\r\n\
               **author:** ann\r\n**tags:** a,  b ,\r\n**summary:** one\r\ntwo\r\n\r\n\
               **details:**\r\n\r\nx\ry\r\n---\r\n";
    agree(src);
    let v = view::parse(src);
    let e = v.entries().next().unwrap();
    assert_eq!(e.summary(), "one\ntwo");
    assert_eq!(e.field("details"), Some("x\ry"));
    assert_eq!(e.kind(), "decision");
    assert_eq!(e.tags().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(e.timestamp_text(), Some("2026-01-02T10:00:00Z"));
}

#[test]
fn undated_entries_have_no_moment_and_a_trailing_date_is_read() {
    let src = "### Plain title\n\n**By:** bo\n\nbody\n\n### Learned a thing (2026-03-10T14:13:00Z)\n\ntext\n\n## Block\n\n**Author:** cy\n**Date:** 2026-02-03\nmore\n";
    agree(src);
    let v = view::parse(src);
    let got: Vec<_> = v.entries().map(|e| e.timestamp_text()).collect();
    assert_eq!(
        got,
        [None, Some("2026-03-10T14:13:00Z"), Some("2026-02-03")]
    );
    assert_eq!(v.entries().next().unwrap().moment(), None);
}

#[test]
fn a_huge_entry_is_borrowed_not_copied() {
    let details = "word ".repeat(400_000);
    let src = format!(
        "### 2026-01-02T10:00:00Z: note: Big\n\n**summary:** Big\n**details:**\n\n{details}\n{details}\n\n---\n"
    );
    agree(&src);
    let v = view::parse(&src);
    let e = v.entries().next().unwrap();
    let f = e.fields().iter().find(|f| f.name == "details").unwrap();
    assert!(matches!(f.value, Cow::Borrowed(_)));
    assert_eq!(f.value.len(), details.len() * 2 + 1 - 1);
}

/// A line of a hostile memory file.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("---".to_string()),
        Just("```".to_string()),
        Just("~~~".to_string()),
        Just(String::new()),
        Just("### 2026-01-02T10:00:00+01:00: decision: S".to_string()),
        Just("### 2026-13-02T10:00:00Z: memory: bad month".to_string()),
        Just("### 2026-01-02: Dated".to_string()),
        Just("## 2026-01-02: Two".to_string()),
        Just("# Decision: Big".to_string()),
        Just("## Title".to_string()),
        Just("### Undated".to_string()),
        Just("#### deeper".to_string()),
        "\\*\\*(type|Type|author|By|Date|tags|summary|timestamp|scope):\\*\\* [ a-zA-Z0-9:,-]{0,12}",
        "- \\*\\*[a-z]{1,6}:\\*\\*[ a-z]{0,6}",
        "[ a-z\r#*:]{0,16}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn agrees_on_hostile_documents(
        lines in prop::collection::vec((line(), 0..3usize), 0..40),
        last_newline in any::<bool>(),
    ) {
        let mut src = String::new();
        for (l, end) in &lines {
            src.push_str(l);
            src.push_str(["\n", "\r\n", "\r\r\n"][*end]);
        }
        if !last_newline && src.ends_with('\n') {
            src.pop();
        }
        agree(&src);
    }
}
