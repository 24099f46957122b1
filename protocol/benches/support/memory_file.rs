//! The 1 MB decisions.md the memory benchmarks read (protocol's in-process
//! parse and supervisor's `squadctl memory query`): SEM entries with fenced
//! `###` lines, interleaved with copies of the real corpus's legacy
//! decisions.md, to at least `bytes`.

/// The benchmark file's text.
pub(crate) fn decisions_md(bytes: usize) -> String {
    let legacy = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/corpora/squad/squad-head/.squad/decisions.md"
    ))
    .unwrap();
    let mut src = String::from("# Decisions\n\n");
    let mut i = 0;
    while src.len() < bytes {
        if i % 4 == 0 {
            src.push_str(&legacy);
            src.push('\n');
        }
        let ts = format!("2026-{:02}-{:02}T10:00:00-0800", 1 + i % 12, 1 + i % 28);
        src.push_str(&format!(
            "### {ts}: decision: Entry {i}\n\n**type:** decision\n**timestamp:** {ts}\n**author:** agent{}\n**scope:** team\n**tags:** a, b{}\n\n**summary:** Entry {i}\n\n**details:**\n\n{}\n```sh\n### not a heading\n```\n\n**rationale:** Because.\n\n---\n\n",
            i % 9,
            i % 5,
            "Some details text for the entry. ".repeat(8)
        ));
        i += 1;
    }
    src
}
