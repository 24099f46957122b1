//! Fuzzes the whole read path of one protocol file.
//!
//! The first byte picks the file kind, the rest is the file. For every input:
//! `check_bytes` and `payload::extract` must not panic, diagnostics must be
//! well formed, and a file that validates must survive the write-then-read
//! round trip (`to_file_text` → `check_text` → the same document).

#![no_main]

use libfuzzer_sys::fuzz_target;
use squad_protocol::{FileKind, check_bytes, check_text, payload};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    let kind = FileKind::ALL[usize::from(selector) % FileKind::ALL.len()];
    let name = match kind {
        FileKind::SessionStatus => "session-status.md",
        FileKind::TaskAssignment => "role-plan-backend-task_1.md",
        FileKind::ProgressUpdate => "role-comm-backend-task_1.md",
        FileKind::Message => "role-comm-a-to-b-msg_1.md",
        FileKind::ErrorReport => "error-backend-1.md",
    };

    let mut report = check_bytes(Path::new(name), kind, bytes);
    check_diagnostics(&report);
    // A file whose only problem is its name never yields a document; check it
    // again under the name its content asks for, so the round trip below is
    // reached for every valid content.
    if let Some(canonical) = canonical_name(&report)
        && canonical != name
    {
        report = check_bytes(Path::new(&canonical), kind, bytes);
        check_diagnostics(&report);
    }

    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = payload::extract(text);
    }

    if let Some(doc) = report.document {
        assert!(!report.diagnostics.iter().any(|d| d.is_error()));
        let Ok(text) = doc.to_file_text() else {
            // Known: some valid `data` values cannot be serialized (a
            // non-empty mapping or a tagged value as a mapping key).
            return;
        };
        let again = check_text(Path::new(&doc.file_name()), doc.kind(), &text);
        assert!(
            again.diagnostics.is_empty(),
            "written file has diagnostics: {:?}\n{text}",
            again.diagnostics
        );
        assert_eq!(again.document.as_ref(), Some(&doc), "\n{text}");
    }
});

fn check_diagnostics(report: &squad_protocol::FileReport) {
    for d in &report.diagnostics {
        assert!(!d.message.trim().is_empty(), "{d:?}");
        assert!(!d.hint.trim().is_empty(), "{d:?}");
        if let Some(l) = d.location {
            assert!(l.line >= 1 && l.column >= 1, "{d:?}");
        }
    }
}

/// The name the content asks for, when the file got far enough to say.
fn canonical_name(report: &squad_protocol::FileReport) -> Option<String> {
    use squad_protocol::Rule;
    report
        .diagnostics
        .iter()
        .find(|d| d.rule == Rule::FilenameMismatch)
        .and_then(|d| d.hint.split('`').nth(1))
        .map(str::to_string)
}
