//! Keeps `docs/protocol.md` true to the code.
//!
//! The document marks the parts the code must agree with by whole-line HTML
//! comments (invisible when rendered):
//!
//! - `<!-- fields: KIND -->` before a field table: the table lists exactly the
//!   fields of `spec::fields(KIND)`, depth first, with the type, required flag,
//!   allowed values and extension marking the spec gives them.
//! - `<!-- example: NAME [standalone] -->` before a fenced block: a complete
//!   example, which must validate without a single diagnostic under its file
//!   name. All non-standalone examples together form one valid session.
//! - `<!-- file: NAME -->` before a fenced block: one file of a (usually bad)
//!   example, and `<!-- output [session=DIR] [status] [format=F] -->` before a
//!   fenced block: exactly what `squadctl validate` prints for the files shown
//!   since the previous output (as loose files, or as the only files of session
//!   DIR of a project, plus the example `session-status.md` with `status`).
//!
//! Field paths are written `meta.task_id` (mapping), `artifacts_created[].path`
//! (entries of a list) and `validation_results.<name>.status` (values of a map).

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::report::{Format, Totals, render};
use squad_protocol::session::check_session;
use squad_protocol::spec::{self, Field, Ty};
use squad_protocol::tree::{Scope, validate_scopes};
use squad_protocol::{FileKind, Rule, check_text};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");

/// The session all non-standalone complete examples form together.
const EXAMPLE_SESSION: &str = "20240115T100000Z-user-search";

fn doc() -> String {
    fs::read_to_string(DOC).unwrap_or_else(|e| panic!("cannot read {DOC}: {e}"))
}

// ---------------------------------------------------------------------------
// Parsing the document
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Marker {
    Example {
        name: String,
        standalone: bool,
    },
    File {
        name: String,
    },
    Output {
        session: Option<String>,
        status: bool,
        format: Format,
    },
    Fields(FileKind),
}

#[derive(Debug, Clone)]
struct Item {
    /// 1-based line of the marker.
    line: usize,
    marker: Marker,
    /// Content of the fenced block after the marker (all but `Fields`).
    content: String,
    /// Rows of the table after the marker (`Fields` only), cells trimmed.
    rows: Vec<Vec<String>>,
}

/// The parts of the document outside fenced blocks, and the markers.
struct Doc {
    /// `(1-based line, text)` of every line outside fenced blocks.
    prose: Vec<(usize, String)>,
    items: Vec<Item>,
}

/// `(fence char, fence length, info string)` of an opening fence.
fn fence_open(line: &str) -> Option<(char, usize, String)> {
    let c = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|x| *x == c).count();
    (len >= 3).then(|| (c, len, line[len..].trim().to_string()))
}

fn fence_closes(line: &str, c: char, len: usize) -> bool {
    let t = line.trim_end();
    t.chars().count() >= len && t.chars().all(|x| x == c)
}

fn parse_marker(line: &str, at: usize) -> Option<Marker> {
    let inner = line.strip_prefix("<!--")?.strip_suffix("-->")?.trim();
    let (word, rest) = inner.split_once(' ').unwrap_or((inner, ""));
    let args: Vec<&str> = rest.split_whitespace().collect();
    let marker = match word {
        "example:" => {
            let (name, flags) = args
                .split_first()
                .unwrap_or_else(|| panic!("line {at}: `example:` needs a file name"));
            assert!(
                flags.iter().all(|f| *f == "standalone"),
                "line {at}: unknown example flags {flags:?}"
            );
            Marker::Example {
                name: (*name).to_string(),
                standalone: !flags.is_empty(),
            }
        }
        "file:" => {
            assert_eq!(args.len(), 1, "line {at}: `file:` takes one file name");
            Marker::File {
                name: args[0].to_string(),
            }
        }
        "output" => {
            let mut session = None;
            let mut status = false;
            let mut format = Format::Human;
            for arg in args {
                if let Some(dir) = arg.strip_prefix("session=") {
                    session = Some(dir.to_string());
                } else if arg == "status" {
                    status = true;
                } else if let Some(f) = arg.strip_prefix("format=") {
                    format = match f {
                        "human" => Format::Human,
                        "json" => Format::Json,
                        "github" => Format::Github,
                        other => panic!("line {at}: unsupported output format `{other}`"),
                    };
                } else {
                    panic!("line {at}: unknown output argument `{arg}`");
                }
            }
            assert!(
                !status || session.is_some(),
                "line {at}: `status` needs `session=`"
            );
            Marker::Output {
                session,
                status,
                format,
            }
        }
        "fields:" => {
            assert_eq!(args.len(), 1, "line {at}: `fields:` takes one kind");
            Marker::Fields(
                FileKind::from_name(args[0])
                    .unwrap_or_else(|| panic!("line {at}: unknown kind `{}`", args[0])),
            )
        }
        other => panic!("line {at}: unknown marker `<!-- {other} … -->`"),
    };
    Some(marker)
}

fn parse(text: &str) -> Doc {
    let lines: Vec<&str> = text.lines().collect();
    let mut prose = Vec::new();
    let mut items = Vec::new();
    let mut pending: Option<(usize, Marker)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some((c, len, _info)) = fence_open(line) {
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && !fence_closes(lines[end], c, len) {
                end += 1;
            }
            assert!(end < lines.len(), "line {}: unclosed fence", i + 1);
            let content: String = lines[start..end].iter().map(|l| format!("{l}\n")).collect();
            if let Some((at, marker)) = pending.take() {
                items.push(Item {
                    line: at,
                    marker,
                    content,
                    rows: Vec::new(),
                });
            }
            i = end + 1;
            continue;
        }
        prose.push((i + 1, line.to_string()));
        let trimmed = line.trim();
        if let Some(marker) = parse_marker(trimmed, i + 1) {
            assert!(
                pending.is_none(),
                "line {}: a marker must be followed by its fenced block",
                i + 1
            );
            if let Marker::Fields(_) = marker {
                let mut rows = Vec::new();
                let mut j = i + 1;
                while j < lines.len() && lines[j].trim_start().starts_with('|') {
                    let row = lines[j].trim();
                    let cells: Vec<String> = row
                        .strip_prefix('|')
                        .and_then(|r| r.strip_suffix('|'))
                        .unwrap_or_else(|| panic!("line {}: malformed table row", j + 1))
                        .split('|')
                        .map(|c| c.trim().to_string())
                        .collect();
                    rows.push(cells);
                    prose.push((j + 1, lines[j].to_string()));
                    j += 1;
                }
                assert!(rows.len() > 2, "line {}: no table after the marker", i + 1);
                items.push(Item {
                    line: i + 1,
                    marker,
                    content: String::new(),
                    rows,
                });
                i = j;
                continue;
            }
            pending = Some((i + 1, marker));
        } else if trimmed.starts_with("<!--") {
            panic!("line {}: malformed marker `{trimmed}`", i + 1);
        } else if !trimmed.is_empty()
            && let Some((at, _)) = &pending
        {
            panic!("line {at}: the marker must be followed directly by a fenced block");
        }
        i += 1;
    }
    assert!(pending.is_none(), "a marker at the end has no fenced block");
    Doc { prose, items }
}

fn kind_of(name: &str, line: usize) -> FileKind {
    FileKind::from_file_name(name)
        .unwrap_or_else(|| panic!("line {line}: `{name}` is not a protocol file name"))
}

// ---------------------------------------------------------------------------
// (a) Rules
// ---------------------------------------------------------------------------

/// The `## Rules` section: `(heading line, heading, body)` per `###` subsection.
fn rule_sections(doc: &Doc) -> Vec<(usize, String, String)> {
    let start = doc
        .prose
        .iter()
        .position(|(_, l)| l == "## Rules")
        .expect("a `## Rules` section");
    let mut sections: Vec<(usize, String, String)> = Vec::new();
    for (n, line) in &doc.prose[start + 1..] {
        if line.starts_with("## ") {
            break;
        }
        if let Some(h) = line.strip_prefix("### ") {
            sections.push((*n, h.to_string(), String::new()));
        } else if let Some((_, _, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
}

#[test]
fn every_rule_has_a_section_in_documentation_order() {
    let text = doc();
    let doc = parse(&text);
    let sections = rule_sections(&doc);
    let headings: Vec<String> = sections.iter().map(|(_, h, _)| h.clone()).collect();
    let expected: Vec<String> = protocol_rules()
        .iter()
        .map(|r| format!("`{}`", r.id()))
        .collect();
    assert_eq!(
        headings, expected,
        "the `###` headings of `## Rules` must be exactly `### \\`<rule-id>\\`` for every rule, in Rule::ALL order"
    );

    for (rule, (line, _, body)) in protocol_rules().iter().zip(&sections) {
        let severity = rule.severity();
        // Every text that ends up in this section, fenced blocks included.
        let full = section_text(&text, *line);
        assert!(
            body.contains(&format!("**Severity:** {severity}\n")),
            "line {line}: `{}` must say `**Severity:** {severity}`",
            rule.id()
        );
        assert!(
            full.contains(&format!("{severity}[{}]", rule.id())),
            "line {line}: `{}` must show a diagnostic `{severity}[{}]`",
            rule.id(),
            rule.id()
        );
    }
}

/// The raw text of the `###` section whose heading is on `line`, up to the next
/// `##`/`###` heading outside fenced blocks.
fn section_text(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut fence: Option<(char, usize)> = None;
    for l in &lines[line..] {
        match fence {
            Some((c, len)) => {
                if fence_closes(l, c, len) {
                    fence = None;
                }
            }
            None => {
                if l.starts_with("## ") || l.starts_with("### ") {
                    break;
                }
                if let Some((c, len, _)) = fence_open(l) {
                    fence = Some((c, len));
                }
            }
        }
        out.push_str(l);
        out.push('\n');
    }
    out
}

#[test]
fn rule_summary_table_matches_the_code() {
    let text = doc();
    for rule in &protocol_rules() {
        let row = format!(
            "| [`{id}`](#{id}) | {} | {} |",
            rule.severity(),
            rule.title(),
            id = rule.id()
        );
        assert!(
            text.lines().any(|l| l == row),
            "the rule summary table needs the row\n{row}"
        );
    }
}

// ---------------------------------------------------------------------------
// (b) Fields
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct Row {
    path: String,
    ty: Ty,
    required: bool,
    /// The field or one of its ancestors is an extension.
    extension: bool,
}

fn walk(fields: &[Field], prefix: &str, in_extension: bool, out: &mut Vec<Row>) {
    for f in fields {
        let path = if prefix.is_empty() {
            f.name.to_string()
        } else {
            format!("{prefix}.{}", f.name)
        };
        let extension = in_extension || f.extension;
        out.push(Row {
            path: path.clone(),
            ty: f.ty,
            required: f.required,
            extension,
        });
        match f.ty {
            Ty::Object(inner) => walk(inner, &path, extension, out),
            Ty::List(Ty::Object(inner)) => walk(inner, &format!("{path}[]"), extension, out),
            Ty::Map(Ty::Object(inner)) => walk(inner, &format!("{path}.<name>"), extension, out),
            _ => {}
        }
    }
}

fn spec_rows(kind: FileKind) -> Vec<Row> {
    let mut rows = Vec::new();
    walk(spec::fields(kind), "", false, &mut rows);
    rows
}

fn type_name(ty: &Ty) -> String {
    match ty {
        Ty::Text => "string".into(),
        Ty::Id(kind) => kind.to_string(),
        Ty::Enum(_) => "enum".into(),
        Ty::Timestamp => "timestamp".into(),
        Ty::Int { .. } => "integer".into(),
        Ty::Number { .. } => "number".into(),
        Ty::Bool => "boolean".into(),
        Ty::Glob => "glob".into(),
        Ty::RelPath => "path".into(),
        Ty::List(item) => format!("list of {}", plural(item)),
        Ty::Object(_) => "mapping".into(),
        Ty::Map(item) => format!("map of {}", plural(item)),
        Ty::Any => "any".into(),
    }
}

fn plural(ty: &Ty) -> String {
    match ty {
        Ty::Any => "any values".into(),
        other => format!("{}s", type_name(other)),
    }
}

fn allowed(ty: &Ty) -> String {
    match ty {
        Ty::Enum(values) => values
            .iter()
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
            .join(", "),
        Ty::Id(kind) => format!("`{}`", kind.pattern()),
        Ty::Int {
            min,
            max: Some(max),
        } => format!("{min} to {max}"),
        Ty::Int { min, max: None } => format!("≥ {min}"),
        Ty::Number { min, max } => format!("{min} to {max}"),
        Ty::Timestamp => "RFC 3339 with offset".into(),
        Ty::Bool => "`true`, `false`".into(),
        Ty::Glob => "relative glob, no `..`".into(),
        Ty::RelPath => "relative, no `..`".into(),
        Ty::List(item) | Ty::Map(item) => allowed(item),
        Ty::Text | Ty::Object(_) | Ty::Any => "—".into(),
    }
}

#[test]
fn every_field_is_documented_exactly() {
    let text = doc();
    let doc = parse(&text);
    let mut seen: BTreeSet<FileKind> = BTreeSet::new();
    for item in &doc.items {
        let Marker::Fields(kind) = item.marker else {
            continue;
        };
        assert!(
            seen.insert(kind),
            "line {}: a second field table for {kind}",
            item.line
        );
        let header = &item.rows[0];
        assert_eq!(
            header,
            &["Field", "Type", "Required", "Allowed", "Description"],
            "line {}: table header",
            item.line
        );
        let rows = &item.rows[2..];
        let expected = spec_rows(kind);
        let documented: Vec<String> = rows.iter().map(|r| r[0].clone()).collect();
        let wanted: Vec<String> = expected.iter().map(|r| format!("`{}`", r.path)).collect();
        assert_eq!(
            documented, wanted,
            "line {}: the {kind} table must list exactly the spec's fields, depth first",
            item.line
        );
        for (cells, row) in rows.iter().zip(&expected) {
            let at = format!("line {}, {kind} field `{}`", item.line, row.path);
            assert_eq!(cells.len(), 5, "{at}: five cells");
            assert_eq!(cells[1], type_name(&row.ty), "{at}: type");
            let required = if row.required { "required" } else { "optional" };
            assert_eq!(cells[2], required, "{at}: required");
            assert_eq!(cells[3], allowed(&row.ty), "{at}: allowed values");
            assert_eq!(
                cells[4].starts_with("**Extension"),
                row.extension,
                "{at}: extensions (and fields inside them) start their description with **Extension"
            );
            assert!(
                row.extension || !cells[4].contains("**Extension"),
                "{at}: not an extension"
            );
        }
        // Every path also appears in backticks, as readers search for it.
        for row in &expected {
            assert!(text.contains(&format!("`{}`", row.path)), "{}", row.path);
        }
    }
    for kind in FileKind::ALL {
        assert!(
            seen.contains(&kind),
            "no `<!-- fields: {kind} -->` table in the document"
        );
    }
}

// ---------------------------------------------------------------------------
// (c) Complete examples
// ---------------------------------------------------------------------------

#[test]
fn complete_examples_are_valid() {
    let text = doc();
    let doc = parse(&text);
    let session = Path::new(".squad/sessions").join(EXAMPLE_SESSION);
    let mut kinds: BTreeSet<FileKind> = BTreeSet::new();
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut reports = Vec::new();
    for item in &doc.items {
        let Marker::Example { name, standalone } = &item.marker else {
            continue;
        };
        let kind = kind_of(name, item.line);
        kinds.insert(kind);
        let report = check_text(Path::new(name), kind, &item.content);
        let found: Vec<String> = report.diagnostics.iter().map(|d| d.to_string()).collect();
        assert!(
            found.is_empty(),
            "line {}: the example `{name}` must validate cleanly, found:\n{}",
            item.line,
            found.join("\n")
        );
        assert!(report.document.is_some(), "line {}: no document", item.line);
        if !standalone {
            assert!(
                names.insert(name.clone()),
                "line {}: a second session example named `{name}`; mark one `standalone`",
                item.line
            );
            reports.push(check_text(&session.join(name), kind, &item.content));
        }
    }
    for kind in FileKind::ALL {
        assert!(kinds.contains(&kind), "no complete example of {kind}");
    }

    // Together the examples form one valid session.
    let findings = check_session(&session, &reports);
    let found: Vec<String> = findings
        .iter()
        .map(|f| {
            format!(
                "{}: {}: {}",
                f.path.display(),
                f.finding.rule,
                f.finding.message
            )
        })
        .collect();
    assert!(
        found.is_empty(),
        "the examples must form a valid session, found:\n{}",
        found.join("\n")
    );
    let summary = format!(
        "0 errors, 0 warnings in {} files (1 session)",
        reports.len()
    );
    assert!(
        text.contains(&summary),
        "the document shows the example session validating as `{summary}`"
    );
}

// ---------------------------------------------------------------------------
// Documented diagnostics are what squadctl prints
// ---------------------------------------------------------------------------

fn status_example(doc: &Doc) -> String {
    doc.items
        .iter()
        .find_map(|item| match &item.marker {
            Marker::Example { name, standalone } if name == "session-status.md" && !standalone => {
                Some(item.content.clone())
            }
            _ => None,
        })
        .expect("a session-status.md example")
}

/// What `squadctl validate` prints for `files`, run where the paths are relative.
fn run(
    files: &[(String, String)],
    session: Option<&str>,
    status: Option<&str>,
    format: Format,
) -> String {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let root = tmp.path();
    let scopes = match session {
        Some(dir) => {
            let dir = root.join(".squad/sessions").join(dir);
            fs::create_dir_all(&dir).unwrap();
            if let Some(status) = status {
                fs::write(dir.join("session-status.md"), status).unwrap();
            }
            for (name, content) in files {
                fs::write(dir.join(name), content).unwrap();
            }
            vec![Scope::Root(root.to_path_buf())]
        }
        None => files
            .iter()
            .map(|(name, content)| {
                let path = root.join(name);
                fs::write(&path, content).unwrap();
                Scope::File(path, kind_of(name, 0))
            })
            .collect(),
    };
    let mut validation = validate_scopes(&scopes, 1).expect("validation runs");
    for d in &mut validation.diagnostics {
        let relative: PathBuf = d.path.strip_prefix(root).unwrap().to_path_buf();
        d.path = relative;
    }
    render(
        format,
        &validation.diagnostics,
        Totals {
            files: validation.files_checked,
            sessions: validation.sessions_checked,
        },
        env!("CARGO_PKG_VERSION"),
        false,
    )
}

#[test]
fn documented_diagnostics_are_what_squadctl_prints() {
    let text = doc();
    let doc = parse(&text);
    let status = status_example(&doc);
    let mut files: Vec<(String, String)> = Vec::new();
    let mut consumed = false;
    let mut outputs = 0;
    let mut rules_shown: BTreeSet<&str> = BTreeSet::new();
    for item in &doc.items {
        match &item.marker {
            Marker::File { name } => {
                if consumed {
                    files.clear();
                    consumed = false;
                }
                files.push((name.clone(), item.content.clone()));
            }
            Marker::Output {
                session,
                status: with_status,
                format,
            } => {
                assert!(
                    !files.is_empty() || session.is_some(),
                    "line {}: an output without files",
                    item.line
                );
                let actual = run(
                    &files,
                    session.as_deref(),
                    with_status.then_some(status.as_str()),
                    *format,
                );
                assert_eq!(
                    item.content, actual,
                    "line {}: the documented output differs from what squadctl prints",
                    item.line
                );
                for rule in &protocol_rules() {
                    if actual.contains(&format!("[{}]", rule.id())) {
                        rules_shown.insert(rule.id());
                    }
                }
                consumed = true;
                outputs += 1;
            }
            _ => {}
        }
    }
    assert!(outputs > 0, "no checked outputs");
    // Only rules that need a file system state (unreadable files, directories,
    // huge or non-UTF-8 files) may go without a checked example.
    let unchecked: BTreeSet<&str> = ["unreadable", "not-a-file", "file-too-large", "invalid-utf8"]
        .into_iter()
        .collect();
    for rule in &protocol_rules() {
        assert!(
            rules_shown.contains(rule.id()) || unchecked.contains(rule.id()),
            "`{}` has no checked `<!-- output -->` example",
            rule.id()
        );
    }
}

// ---------------------------------------------------------------------------
// Internal links
// ---------------------------------------------------------------------------

/// GitHub's heading anchors: lowercase, punctuation other than `-` and `_`
/// dropped, spaces as dashes, `-1`, `-2`… for repeats.
fn anchors(doc: &Doc) -> BTreeSet<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in &doc.prose {
        let Some(title) = line
            .strip_prefix('#')
            .map(|t| t.trim_start_matches('#'))
            .and_then(|t| t.strip_prefix(' '))
        else {
            continue;
        };
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = counts.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

#[test]
fn internal_links_resolve() {
    let text = doc();
    let doc = parse(&text);
    let anchors = anchors(&doc);
    for rule in &protocol_rules() {
        assert!(anchors.contains(rule.id()), "no anchor #{}", rule.id());
    }
    for (n, line) in &doc.prose {
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](#") {
            rest = &rest[i + 3..];
            let end = rest.find(')').unwrap_or(rest.len());
            let target = &rest[..end];
            assert!(
                anchors.contains(target),
                "line {n}: link to #{target}, which no heading defines"
            );
        }
    }
}

/// The rules docs/protocol.md documents (the CI rules of `squadctl check`
/// live in docs/ci.md).
fn protocol_rules() -> Vec<Rule> {
    Rule::ALL
        .iter()
        .copied()
        .filter(|r| !r.is_ci())
        .filter(|r| !r.id().starts_with("guard-"))
        .filter(|r| !r.id().starts_with("skill-")) // docs/skills.md
        .filter(|r| !r.id().starts_with("memory-")) // docs/memory.md
        .filter(|r| !r.id().starts_with("team-")) // docs/team.md
        .filter(|r| !r.id().starts_with("config-")) // docs/runners.md
        .filter(|r| !r.id().starts_with("policy-")) // docs/daemon.md
        .collect()
}

#[test]
fn runners_page_documents_every_config_rule() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runners.md"),
    )
    .unwrap();
    for rule in Rule::ALL.iter().filter(|r| r.id().starts_with("config-")) {
        assert!(
            page.contains(&format!("`{}`", rule.id())),
            "docs/runners.md does not document `{}`",
            rule.id()
        );
    }
}

#[test]
fn daemon_page_documents_every_policy_rule() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/daemon.md"),
    )
    .unwrap();
    for rule in Rule::ALL.iter().filter(|r| r.id().starts_with("policy-")) {
        assert!(
            page.contains(&format!("`{}`", rule.id())),
            "docs/daemon.md does not document `{}`",
            rule.id()
        );
    }
}
