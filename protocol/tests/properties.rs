//! Property tests for the protocol crate.
//!
//! 1. Robustness: arbitrary bytes and YAML-ish text never make `check_bytes`,
//!    `payload::extract` or `locate::locate` panic, and every diagnostic is
//!    well formed (non-empty message and hint, 1-based positions).
//! 2. Round trip: every structurally valid document of the five kinds, written
//!    with `Document::to_file_text` (and embedded as front matter or as a fenced
//!    block), validates without a single diagnostic and reads back as the same
//!    document.
//!
//! Case counts are moderate so `cargo test --workspace` stays fast; set
//! `PROPTEST_CASES` to run more, e.g. `PROPTEST_CASES=20000 cargo test -p
//! squad-protocol --test properties --release`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use chrono::{DateTime, FixedOffset, NaiveDate};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use serde_yaml::value::{Tag, TaggedValue};
use serde_yaml::{Mapping, Value};
use squad_protocol::locate::{PathSeg, Target, locate};
use squad_protocol::model::{
    Artifact, Blocker, Boundaries, Decision, Dependencies, ErrorDetail, ErrorReport, ErrorSeverity,
    Gate, Message, MessageContext, MessageMeta, MessageType, Phase, Priority, ProgressMeta,
    ProgressUpdate, SessionState, SessionStatus, TaskAssignment, TaskMeta, TaskStatus, Timestamp,
    ValidationGates, ValidationResult, ValidationStatus,
};
use squad_protocol::payload::{Encoding, extract};
use squad_protocol::{Document, FileKind, FileReport, check_bytes, check_text};
use std::path::Path;

/// `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        // Minimal failing inputs are pinned as named tests at the bottom of
        // this file rather than in a regression directory next to it.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Shared checks
// ---------------------------------------------------------------------------

fn assert_well_formed(report: &FileReport, text: &str) -> Result<(), TestCaseError> {
    // An upper bound for any line number: every character some reader takes
    // for a line break counts (the YAML parser also breaks lines at a lone
    // `\r`, U+0085, U+2028 and U+2029), plus the line after the last break,
    // plus one: at the end of a text without a final newline the parser
    // reports the line after the last one. Both are pinned by ignored tests
    // (`positions_count_only_newlines_as_line_breaks`,
    // `syntax_errors_at_the_end_point_into_the_file`).
    let breaks = text
        .chars()
        .filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'))
        .count();
    let max_line = u32::try_from(breaks + 2).unwrap_or(u32::MAX);
    for d in &report.diagnostics {
        prop_assert!(!d.message.trim().is_empty(), "empty message: {d:?}");
        prop_assert!(!d.hint.trim().is_empty(), "empty hint: {d:?}");
        if let Some(l) = d.location {
            prop_assert!(l.line >= 1 && l.column >= 1, "bad location: {d:?}");
            prop_assert!(l.line <= max_line, "line past the end ({max_line}): {d:?}");
        }
    }
    if report.document.is_some() {
        prop_assert!(
            !report.has_errors(),
            "a document despite errors: {report:?}"
        );
    }
    Ok(())
}

fn check_all_kinds(bytes: &[u8]) -> Result<(), TestCaseError> {
    for kind in FileKind::ALL {
        let name = match kind {
            FileKind::SessionStatus => "session-status.md",
            FileKind::TaskAssignment => "role-plan-backend-task_1.md",
            FileKind::ProgressUpdate => "role-comm-backend-task_1.md",
            FileKind::Message => "role-comm-a-to-b-msg_1.md",
            FileKind::ErrorReport => "error-backend-20240115T103800Z.md",
        };
        let report = check_bytes(Path::new(name), kind, bytes);
        prop_assert_eq!(report.kind, kind);
        assert_well_formed(&report, &String::from_utf8_lossy(bytes))?;
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        // The payload is a run of whole lines of the text.
        if let Ok(p) = extract(text) {
            let stripped = text.strip_prefix('\u{feff}').unwrap_or(text);
            prop_assert!(stripped.contains(p.yaml));
            if p.encoding == Encoding::PlainYaml {
                prop_assert_eq!(p.line_offset, 0);
            }
        }
    }
    Ok(())
}

/// Renders the document, validates it and compares; prints the text and the
/// diagnostics on failure.
fn assert_round_trip(doc: &Document, text: &str) -> Result<(), TestCaseError> {
    let name = doc.file_name();
    let report = check_text(Path::new(&name), doc.kind(), text);
    prop_assert!(
        report.diagnostics.is_empty(),
        "{name}: unexpected diagnostics:\n{}\n--- text ---\n{text}",
        report
            .diagnostics
            .iter()
            .map(|d| format!("  {d}\n    hint: {}", d.hint))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    prop_assert!(
        report.document.as_ref() == Some(doc),
        "{name}: read back a different document\n--- text ---\n{text}\n--- wrote ---\n{doc:#?}\n--- read ---\n{:#?}",
        report.document
    );
    Ok(())
}

/// Whether the YAML can be embedded in markdown by appending a closing line.
///
/// Not when it does not end with `\n`: a text that ends in `\n` then U+2028
/// or U+2029 is written as a `|+` block whose last line break is that
/// character, and nothing can follow it on the same line without changing the
/// text. `file_text_ends_with_a_newline` pins this bug; the embedding
/// properties skip such documents (rare with these strategies).
fn embeddable(yaml: &str) -> bool {
    yaml.ends_with('\n')
}

fn file_text(doc: &Document) -> Result<String, TestCaseError> {
    doc.to_file_text()
        .map_err(|e| TestCaseError::fail(format!("to_file_text failed: {e}\n{doc:#?}")))
}

// ---------------------------------------------------------------------------
// Strategies: robustness inputs
// ---------------------------------------------------------------------------

/// Pieces of text that tend to reach the interesting corners of YAML parsing,
/// payload extraction and the field rules.
const FRAGMENTS: &[&str] = &[
    ":",
    ": ",
    "-",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "&a ",
    "*a",
    "&a [*a, *a]",
    "!!",
    "!!str ",
    "!!binary ",
    "!!map ",
    "!!int ",
    "!tag ",
    "? ",
    "|",
    "|-\n",
    ">\n",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "  ",
    "    ",
    "---\n",
    "---",
    "...\n",
    "```yaml\n",
    "```\n",
    "~~~yml\n",
    "````\n",
    "\"",
    "'",
    "\\",
    "#",
    " # c",
    "%YAML 1.2\n",
    "<<: ",
    "null",
    "~",
    "yes",
    "123",
    "-7",
    "1e400",
    "0x1F",
    ".nan",
    "2024-01-15T10:30:00Z",
    "2024-01-15T10:30:00+05:30",
    "é",
    "日本",
    "🦀",
    "\u{feff}",
    "\u{85}",
    "\u{2028}",
    "\u{0}",
    "meta",
    "meta:\n  ",
    "task_id",
    "task_1",
    "agent",
    "backend",
    "created_at",
    "priority",
    "urgent",
    "high",
    "instruction",
    "boundaries",
    "allowed",
    "/etc/**",
    "../x",
    "[a-",
    "status",
    "blockers",
    "decisions",
    "validation_results",
    "coverage",
    "session_id",
    "tasks_total",
    "tasks_completed",
    "response_by",
    "error_id",
    "err_1_a",
    "requires_intervention: true\n",
    "dependencies",
    "requires",
    "outputs",
    "type",
    "message",
];

fn yamlish_text() -> impl Strategy<Value = String> {
    vec(
        prop_oneof![
            6 => select(FRAGMENTS).prop_map(str::to_string),
            2 => "[a-z_]{1,12}",
            1 => "[ -~]{0,8}",
            1 => any::<char>().prop_map(String::from),
        ],
        0..400,
    )
    .prop_map(|parts| parts.concat())
}

/// A valid document's text with a few random edits: near-valid files produce
/// many findings whose positions all have to be placed.
fn mutated_document_text() -> impl Strategy<Value = String> {
    let edit = (any::<prop::sample::Index>(), 0usize..8, select(FRAGMENTS));
    (document(), vec(edit, 1..6), 0usize..3).prop_map(|(doc, edits, wrap)| {
        let mut text = wrap_text(&doc, wrap);
        for (at, delete, insert) in edits {
            let mut i = at.index(text.len() + 1);
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            let mut j = (i + delete).min(text.len());
            while !text.is_char_boundary(j) {
                j += 1;
            }
            text.replace_range(i..j, insert);
        }
        text
    })
}

fn path_seg() -> impl Strategy<Value = PathSeg> {
    prop_oneof![
        select(
            &[
                "meta",
                "priority",
                "task_id",
                "status",
                "artifacts_created",
                "decisions",
                "data",
                "a",
                "x",
                "",
            ][..]
        )
        .prop_map(|k| PathSeg::Key(k.to_string())),
        "\\PC{0,4}".prop_map(PathSeg::Key),
        (0usize..4).prop_map(PathSeg::Index),
    ]
}

// ---------------------------------------------------------------------------
// Strategies: valid documents
// ---------------------------------------------------------------------------

fn agent() -> BoxedStrategy<String> {
    prop_oneof![
        select(
            &[
                "backend",
                "frontend-dev",
                "qa",
                "a",
                "0",
                "backend-system-architect"
            ][..]
        )
        .prop_map(str::to_string),
        "[a-z0-9]{1,8}(-[a-z0-9]{1,6}){0,3}",
    ]
    .boxed()
}

fn id(prefix: &'static str) -> BoxedStrategy<String> {
    prop_oneof![
        "[A-Za-z0-9_]{1,24}",
        // The seed's shape: a timestamp, then a hash or sequence.
        "[0-9]{8}T[0-9]{6}Z_[a-f0-9]{4}",
        "[0-9]{3}",
        Just("_".to_string()),
    ]
    .prop_map(move |rest| format!("{prefix}{rest}"))
    .boxed()
}

fn task_id() -> BoxedStrategy<String> {
    id("task_").boxed()
}

fn offset() -> BoxedStrategy<FixedOffset> {
    prop_oneof![
        2 => select(&[
            0,
            5 * 3600 + 30 * 60,
            -8 * 3600,
            3600,
            -(9 * 3600 + 30 * 60),
            5 * 3600 + 45 * 60,
            14 * 3600,
            -12 * 3600,
        ][..]),
        1 => (-(23 * 60 + 59)..=(23 * 60 + 59)).prop_map(|minutes: i32| minutes * 60),
    ]
    .prop_map(|seconds| FixedOffset::east_opt(seconds).expect("offset within a day"))
    .boxed()
}

fn epoch(year: i32, month: u32, day: u32) -> i64 {
    NaiveDate::from_ymd_opt(year, month, day)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .expect("valid date")
        .and_utc()
        .timestamp()
}

/// Whole-second instants: mostly around now, sometimes anywhere in the
/// four-digit years RFC 3339 can write (a day of margin for the offset, and
/// room for `response_by` to be later).
fn timestamp() -> BoxedStrategy<Timestamp> {
    (
        prop_oneof![
            3 => epoch(2020, 1, 1)..epoch(2030, 1, 1),
            1 => epoch(0, 1, 2)..epoch(9990, 1, 1),
        ],
        offset(),
    )
        .prop_map(|(secs, offset)| at(secs, offset))
        .boxed()
}

fn at(secs: i64, offset: FixedOffset) -> Timestamp {
    DateTime::from_timestamp(secs, 0)
        .expect("in chrono's range")
        .with_timezone(&offset)
}

/// Free text, including strings YAML would read as something else unquoted.
const TRICKY_TEXT: &[&str] = &[
    "",
    " ",
    "yes",
    "no",
    "Yes",
    "NO",
    "on",
    "Off",
    "y",
    "n",
    "true",
    "False",
    "null",
    "Null",
    "NULL",
    "~",
    "123",
    "-1",
    "+1",
    "1_000",
    "0x1F",
    "0o17",
    "0b101",
    "1e3",
    ".5",
    "00",
    "007",
    "-007",
    ".inf",
    "-.Inf",
    ".nan",
    "NaN",
    "1.0",
    ": x",
    "a: b",
    "a:b",
    "# y",
    "a # y",
    "a#b",
    "- x",
    "-",
    "--",
    "---",
    "...",
    "--- x",
    "? x",
    "?",
    "!x",
    "!!str x",
    "&a",
    "*a",
    "%YAML",
    "@x",
    "`x`",
    "```yaml",
    "~~~yml",
    "'",
    "\"",
    "''",
    "'quoted'",
    "\"dq\"",
    "{a: 1}",
    "[1, 2]",
    "<<",
    "=",
    "|",
    ">",
    "|-",
    "a\nb",
    "a\n",
    "\n",
    "\n\n",
    "line1\n\nline3\n\n",
    "  leading",
    "trailing  ",
    " both ",
    "\tTab",
    "tab\tinside",
    "trailing tab\t",
    "  \n  indented\n",
    " \n",
    "x\n ",
    "a\n  b\n c",
    "\n  leading newline",
    "---\nkey: v\n...\n",
    "```yaml\nmeta: {}\n```\n",
    "é",
    "日本語",
    "🦀 crab",
    "zero\u{200b}width",
    "\u{a0}nbsp",
    "2024-01-15",
    "2024-01-15T10:30:00Z",
    "12:30:00",
    "1:20",
    "\\",
    "\\n",
    "a\\",
    "C:\\x",
];

/// Characters YAML reads as line breaks or that need escapes.
const TRICKY_CHARS: &[char] = &[
    '\n',
    '\r',
    '\t',
    '\u{0}',
    '\u{7}',
    '\u{1b}',
    '\u{7f}',
    '\u{85}',
    '\u{a0}',
    '\u{2028}',
    '\u{2029}',
    '\u{feff}',
    '\u{fffe}',
    '\u{ffff}',
    '\u{1F980}',
    'é',
    ' ',
    '#',
    ':',
    '-',
    '\'',
    '"',
    '\\',
    '`',
];

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => select(TRICKY_TEXT).prop_map(str::to_string),
        2 => "\\PC{0,40}",
        2 => vec(select(TRICKY_TEXT), 1..4).prop_map(|parts| parts.concat()),
        1 => vec(
            prop_oneof![select(TRICKY_CHARS), any::<char>(), Just('a')],
            0..12
        )
        .prop_map(|chars| chars.into_iter().collect()),
        // Longer than the 1024 characters YAML allows for an implicit key.
        1 => ("[a-z]{1,3}", 1000usize..1100).prop_map(|(word, len)| word.repeat(len / word.len())),
    ]
    .boxed()
}

/// A project-relative path: relative, no `..` segment, not a drive path.
fn rel_path() -> BoxedStrategy<String> {
    let segment = prop_oneof![
        "[A-Za-z0-9_.-]{1,10}",
        "[a-z]{1,4}[ éü日#:*?]{1,2}[a-z]{0,3}",
        Just(".".to_string()),
        Just("...".to_string()),
        Just("**".to_string()),
        Just("yes".to_string()),
        Just("null".to_string()),
        Just("123".to_string()),
    ]
    .prop_filter("no `..`", |s| s != "..");
    (vec(segment, 1..5), any::<bool>())
        .prop_map(|(segments, trailing_slash)| {
            let mut path = segments.join("/");
            if trailing_slash {
                path.push('/');
            }
            path
        })
        // `c:…` reads as a Windows drive path, which the protocol refuses.
        .prop_filter("no drive prefix", |p| p.as_bytes().get(1) != Some(&b':'))
        .boxed()
}

/// A boundary glob that compiles: whole-segment `**`, `*`, `?`, classes and
/// alternations; relative, no `..`.
fn glob() -> BoxedStrategy<String> {
    let segment = prop_oneof![
        3 => "[A-Za-z0-9_.-]{1,10}".prop_filter("no `..`", |s| s != ".."),
        1 => Just("**".to_string()),
        1 => Just("*".to_string()),
        1 => "[a-z]{0,3}\\*\\.[a-z]{1,3}",
        1 => "[a-z]{1,3}\\?",
        1 => Just("{src,tests}".to_string()),
        1 => Just("*.{rs,toml}".to_string()),
        1 => Just("[abc]x".to_string()),
        1 => Just("[!x]y".to_string()),
    ];
    vec(segment, 1..5)
        .prop_map(|segments| segments.join("/"))
        .boxed()
}

fn yaml_value() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop_oneof![
            any::<f64>(),
            Just(0.5),
            Just(-0.0),
            Just(1e20),
            Just(f64::INFINITY),
            Just(f64::NAN),
        ]
        .prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        let key = prop_oneof![
            4 => text().prop_map(Value::String),
            1 => any::<i64>().prop_map(Value::from),
            1 => any::<bool>().prop_map(Value::Bool),
            1 => Just(Value::Null),
            1 => any::<f64>().prop_map(Value::from),
            // Complex keys: `? [a, b]\n: value`. Non-empty mappings and
            // tagged values as keys cannot be written (see the ignored
            // `*_key_in_data_is_writable` tests below), so they are left out.
            1 => vec(inner.clone(), 0..3).prop_map(Value::Sequence),
            1 => Just(Value::Mapping(Mapping::new())),
        ];
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Sequence),
            vec((key, inner.clone()), 0..4)
                .prop_map(|entries| Value::Mapping(entries.into_iter().collect::<Mapping>())),
            // A YAML node carries at most one tag: `!a !b x` is not YAML, so a
            // tagged value never directly holds another one.
            ("[a-z][a-z0-9]{0,6}", inner).prop_map(|(tag, value)| {
                let value = match value {
                    Value::Tagged(tagged) => tagged.value,
                    other => other,
                };
                Value::Tagged(Box::new(TaggedValue {
                    tag: Tag::new(tag),
                    value,
                }))
            }),
        ]
    })
    .boxed()
}

/// `data` of a decision: any value but null, since `data: null` reads back as
/// an absent field (the two are the same file).
fn data_value() -> BoxedStrategy<Value> {
    yaml_value()
        .prop_filter("data: null reads back as None", |v| !v.is_null())
        .boxed()
}

fn session_status() -> BoxedStrategy<SessionStatus> {
    let gates = (
        option::of(select(Gate::ALL)),
        option::of(select(Gate::ALL)),
        option::of(select(Gate::ALL)),
        option::of(select(Gate::ALL)),
    )
        .prop_map(
            |(requirements, design, implementation, quality)| ValidationGates {
                requirements,
                design,
                implementation,
                quality,
            },
        );
    let counters = prop_oneof![
        (option::of(any::<u64>()), option::of(any::<u64>())),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| (Some(a.max(b)), Some(a.min(b)))),
        (0u64..50, 0u64..50).prop_map(|(a, b)| (Some(a.max(b)), Some(a.min(b)))),
    ]
    .prop_map(|(total, done)| match (total, done) {
        (Some(t), Some(d)) if d > t => (Some(d), Some(t)),
        other => other,
    });
    (
        id("sess_"),
        timestamp(),
        select(SessionState::ALL),
        option::of(select(Phase::ALL)),
        option::of(vec(agent(), 0..4)),
        counters,
        option::of(gates),
        option::of(timestamp()),
        option::of(timestamp()),
        option::of(text()),
        option::of(timestamp()),
    )
        .prop_map(
            |(
                session_id,
                started_at,
                status,
                phase,
                agents_active,
                (tasks_total, tasks_completed),
                validation_gates,
                completed_at,
                failed_at,
                failure_reason,
                archived_at,
            )| SessionStatus {
                session_id,
                started_at,
                status,
                phase,
                agents_active,
                tasks_total,
                tasks_completed,
                validation_gates,
                completed_at,
                failed_at,
                failure_reason,
                archived_at,
            },
        )
        .boxed()
}

fn task_assignment() -> BoxedStrategy<TaskAssignment> {
    let meta = (
        task_id(),
        agent(),
        timestamp(),
        select(Priority::ALL),
        // The range validation accepts (3650 days).
        option::of(1u64..=315_360_000),
    )
        .prop_map(|(task_id, agent, created_at, priority, timeout)| TaskMeta {
            task_id,
            agent,
            created_at,
            priority,
            timeout,
            merge: None,
        });
    let dependencies = (
        option::of(vec(task_id(), 0..4)),
        option::of(vec(task_id(), 0..4)),
    )
        .prop_map(|(requires, blocks)| Dependencies { requires, blocks });
    let boundaries = (option::of(vec(glob(), 0..4)), option::of(vec(glob(), 0..3)))
        .prop_map(|(allowed, forbidden)| Boundaries { allowed, forbidden });
    (
        meta,
        option::of(dependencies),
        text(),
        option::of(boundaries),
        option::of(btree_map(text(), rel_path(), 0..4)),
        option::of(vec(text(), 0..4)),
    )
        .prop_map(
            |(meta, dependencies, instruction, boundaries, outputs, success_criteria)| {
                TaskAssignment {
                    meta,
                    dependencies,
                    instruction,
                    boundaries,
                    outputs,
                    success_criteria,
                }
            },
        )
        .boxed()
}

fn progress_update() -> BoxedStrategy<ProgressUpdate> {
    let meta =
        (task_id(), agent(), timestamp()).prop_map(|(task_id, agent, updated_at)| ProgressMeta {
            task_id,
            agent,
            updated_at,
        });
    let artifact = (rel_path(), option::of(any::<u64>()), option::of(text())).prop_map(
        |(path, lines, status)| Artifact {
            path,
            lines,
            status,
        },
    );
    let coverage = prop_oneof![
        Just(0.0),
        Just(100.0),
        Just(87.5),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        0.0..=100.0f64,
    ];
    let result = (
        select(ValidationStatus::ALL),
        option::of(any::<u64>()),
        option::of(any::<u64>()),
        option::of(coverage),
    )
        .prop_map(|(status, errors, warnings, coverage)| ValidationResult {
            status,
            errors,
            warnings,
            coverage,
        });
    let blocker = (text(), option::of(timestamp()), option::of(agent())).prop_map(
        |(description, blocking_since, requires_agent)| Blocker {
            description,
            blocking_since,
            requires_agent,
        },
    );
    let decision =
        (text(), text(), option::of(data_value())).prop_map(|(kind, description, data)| Decision {
            kind,
            description,
            data,
        });
    (
        (
            meta,
            select(TaskStatus::ALL),
            option::of(0u8..=100),
            option::of(text()),
            option::of(vec(text(), 0..4)),
            option::of(vec(text(), 0..4)),
        ),
        (
            option::of(vec(artifact, 0..4)),
            option::of(btree_map(text(), result, 0..4)),
            option::of(vec(blocker, 0..3)),
            option::of(any::<u64>()),
            option::of(vec(decision, 0..3)),
            option::of(timestamp()),
        ),
    )
        .prop_map(
            |(
                (
                    meta,
                    status,
                    progress_percentage,
                    current_action,
                    completed_steps,
                    remaining_steps,
                ),
                (
                    artifacts_created,
                    validation_results,
                    blockers,
                    time_spent,
                    decisions,
                    completed_at,
                ),
            )| ProgressUpdate {
                meta,
                status,
                progress_percentage,
                current_action,
                completed_steps,
                remaining_steps,
                artifacts_created,
                validation_results,
                blockers,
                time_spent,
                decisions,
                completed_at,
            },
        )
        .boxed()
}

fn message() -> BoxedStrategy<Message> {
    let meta = (
        id("msg_"),
        agent(),
        agent(),
        timestamp(),
        select(Priority::ALL),
    );
    let context = (
        option::of(task_id()),
        option::of(text()),
        option::of(rel_path()),
    )
        .prop_map(|(task_id, component, file)| MessageContext {
            task_id,
            component,
            file,
        });
    // Seconds after `created_at`: often exactly then, otherwise up to ten years.
    let due_after = option::of(prop_oneof![Just(0i64), 0i64..=10 * 366 * 86_400]);
    (
        meta,
        select(MessageType::ALL),
        text(),
        text(),
        option::of(context),
        option::of(any::<bool>()),
        (due_after, offset()),
        option::of(id("msg_")),
    )
        .prop_map(
            |(
                (message_id, from_agent, to_agent, created_at, priority),
                kind,
                subject,
                message,
                context,
                response_needed,
                (due_after, due_offset),
                in_reply_to,
            )| Message {
                response_by: due_after.map(|secs| at(created_at.timestamp() + secs, due_offset)),
                meta: MessageMeta {
                    message_id,
                    from_agent,
                    to_agent,
                    created_at,
                    priority,
                },
                kind,
                subject,
                message,
                context,
                response_needed,
                in_reply_to,
            },
        )
        .boxed()
}

fn error_report() -> BoxedStrategy<ErrorReport> {
    let detail = (
        text(),
        text(),
        option::of(rel_path()),
        // The range validation accepts (3650 days).
        option::of(1u64..=315_360_000),
        // The range validation accepts (3650 days).
        option::of(1u64..=315_360_000),
    )
        .prop_map(|(kind, message, file, line, column)| ErrorDetail {
            kind,
            message,
            file,
            line,
            column,
        });
    (
        id("err_"),
        agent(),
        option::of(task_id()),
        select(ErrorSeverity::ALL),
        timestamp(),
        detail,
        option::of(vec(yaml_value(), 0..4)),
        option::of(any::<bool>()),
        option::of(agent()),
        agent(),
    )
        .prop_map(
            |(
                error_id,
                agent,
                task_id,
                severity,
                occurred_at,
                error,
                attempted_fixes,
                requires_intervention,
                suggested_agent,
                fallback,
            )| {
                // `requires_intervention: true` needs someone to route to.
                let suggested_agent = match requires_intervention {
                    Some(true) => suggested_agent.or(Some(fallback)),
                    _ => suggested_agent,
                };
                ErrorReport {
                    error_id,
                    agent,
                    task_id,
                    severity,
                    occurred_at,
                    error,
                    attempted_fixes,
                    requires_intervention,
                    suggested_agent,
                }
            },
        )
        .boxed()
}

fn document() -> BoxedStrategy<Document> {
    prop_oneof![
        session_status().prop_map(Document::SessionStatus),
        task_assignment().prop_map(Document::TaskAssignment),
        progress_update().prop_map(Document::ProgressUpdate),
        message().prop_map(Document::Message),
        error_report().prop_map(Document::ErrorReport),
    ]
    .boxed()
}

/// The file text of `doc` in one of the three encodings: 0 plain YAML, 1 front
/// matter, 2 a fenced block in markdown.
fn wrap_text(doc: &Document, encoding: usize) -> String {
    let yaml = doc.to_file_text().unwrap_or_default();
    match encoding {
        0 => yaml,
        1 => format!("---\n{yaml}---\n# notes\n"),
        _ => format!("# Title\n\n```yaml\n{yaml}```\n"),
    }
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop_oneof![
            vec(any::<u8>(), 0..4096),
            // Valid UTF-8 gets past the encoding check.
            vec(any::<char>(), 0..1024).prop_map(|c| c.into_iter().collect::<String>().into_bytes()),
        ]
    ) {
        check_all_kinds(&bytes)?;
    }

    #[test]
    fn yamlish_text_never_panics(text in yamlish_text()) {
        check_all_kinds(text.as_bytes())?;
    }

    #[test]
    fn mutated_documents_never_panic(text in mutated_document_text()) {
        check_all_kinds(text.as_bytes())?;
    }

    #[test]
    fn extract_and_locate_never_panic(
        text in prop_oneof![
            yamlish_text(),
            mutated_document_text(),
            "\\PC{0,200}",
            any::<String>(),
        ],
        path in vec(path_seg(), 0..4),
        key in any::<bool>(),
    ) {
        let _ = extract(&text);
        let target = if key { Target::Key } else { Target::Value };
        if let Some((line, column)) = locate(&text, &path, target) {
            prop_assert!(line >= 1 && column >= 1, "{line}:{column}");
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn valid_documents_round_trip(doc in document()) {
        let text = file_text(&doc)?;
        assert_round_trip(&doc, &text)?;
        // The same through the bytes entry point.
        let report = check_bytes(Path::new(&doc.file_name()), doc.kind(), text.as_bytes());
        prop_assert!(report.diagnostics.is_empty() && report.document.as_ref() == Some(&doc));
    }

    #[test]
    fn valid_documents_round_trip_as_front_matter(doc in document()) {
        let yaml = file_text(&doc)?;
        prop_assume!(embeddable(&yaml));
        assert_round_trip(&doc, &format!("---\n{yaml}---\n# notes\n"))?;
    }

    #[test]
    fn valid_documents_round_trip_as_fenced_block(doc in document()) {
        let yaml = file_text(&doc)?;
        prop_assume!(embeddable(&yaml));
        assert_round_trip(&doc, &format!("# Title\n\n```yaml\n{yaml}```\n"))?;
    }

    /// Editors on Windows save CRLF and sometimes a byte order mark; neither
    /// changes what the file says.
    #[test]
    fn valid_documents_round_trip_with_crlf_and_bom(
        doc in document(),
        encoding in 0usize..3,
        // Bit 0: CRLF line ends; bit 1: a byte order mark.
        variant in 1u8..4,
    ) {
        let (crlf, bom) = (variant & 1 != 0, variant & 2 != 0);
        prop_assume!(encoding == 0 || embeddable(&file_text(&doc)?));
        let mut text = wrap_text(&doc, encoding);
        if crlf {
            text = text.replace('\n', "\r\n");
        }
        if bom {
            text.insert(0, '\u{feff}');
        }
        assert_round_trip(&doc, &text)?;
    }
}

// ---------------------------------------------------------------------------
// Minimal failing inputs found by the properties, pinned. The ignored ones
// are open bugs; run them with `cargo test -p squad-protocol --test
// properties -- --ignored`.
// ---------------------------------------------------------------------------

fn task_with_instruction(instruction: &str) -> Document {
    Document::TaskAssignment(TaskAssignment {
        meta: TaskMeta {
            task_id: "task_1".into(),
            agent: "backend".into(),
            created_at: DateTime::parse_from_rfc3339("2024-01-15T10:30:00Z").unwrap(),
            priority: Priority::High,
            timeout: None,
            merge: None,
        },
        dependencies: None,
        instruction: instruction.into(),
        boundaries: None,
        outputs: None,
        success_criteria: None,
    })
}

const ERROR_REPORT_HEAD: &str = "error_id: err_20240115T103800Z_a1\nagent: backend\nseverity: error\noccurred_at: 2024-01-15T10:38:00Z\nerror:\n  type: T\n  message: m\n";

/// Reads an error report whose `attempted_fixes` holds `fixes` (a YAML list,
/// column 0), checks it is valid, and writes it back.
fn read_then_write_error_report(fixes: &str) -> (Document, Result<String, serde_yaml::Error>) {
    let text = format!("{ERROR_REPORT_HEAD}attempted_fixes:\n{fixes}");
    let report = check_text(
        Path::new("error-backend-20240115T103800Z.md"),
        FileKind::ErrorReport,
        &text,
    );
    assert!(report.diagnostics.is_empty(), "{:?}", report.diagnostics);
    let doc = report.document.expect("a valid document");
    let written = doc.to_file_text();
    (doc, written)
}

#[test]
fn plain_file_text_round_trips_a_trailing_line_separator() {
    // The part of the bug below that works: the plain file itself.
    let doc = task_with_instruction("a\n\u{2028}");
    let text = doc.to_file_text().unwrap();
    let report = check_text(Path::new(&doc.file_name()), doc.kind(), &text);
    assert!(report.diagnostics.is_empty(), "{:?}", report.diagnostics);
    assert_eq!(report.document, Some(doc));
}

#[test]
#[ignore = "bug: for a text ending in `\\n` + U+2028/U+2029 the YAML emitter (YAML 1.1 line breaks) ends the `|+` block with that character, so to_file_text has no final newline and cannot be embedded as front matter or a fenced block"]
fn file_text_ends_with_a_newline() {
    let doc = task_with_instruction("a\n\u{2028}");
    let text = doc.to_file_text().unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    for wrapped in [
        format!("---\n{text}---\n# notes\n"),
        format!("# Title\n\n```yaml\n{text}```\n"),
    ] {
        let report = check_text(Path::new(&doc.file_name()), doc.kind(), &wrapped);
        assert!(report.diagnostics.is_empty(), "{:?}", report.diagnostics);
        assert_eq!(report.document.as_ref(), Some(&doc));
    }
}

#[test]
fn sequence_key_in_data_round_trips() {
    let (doc, written) = read_then_write_error_report("- ? [a, b]\n  : x\n");
    let text = written.unwrap();
    let report = check_text(Path::new(&doc.file_name()), doc.kind(), &text);
    assert_eq!(report.document, Some(doc));
}

#[test]
#[ignore = "bug: yaml_serde cannot serialize a non-empty mapping used as a key, so a valid document read from a file cannot be written back (to_file_text: \"expected DOCUMENT-START or STREAM-END\")"]
fn mapping_key_in_data_is_writable() {
    let (_, written) = read_then_write_error_report("- ? {a: 1}\n  : x\n");
    written.unwrap();
}

#[test]
#[ignore = "bug: yaml_serde cannot serialize a tagged value used as a key, so a valid document read from a file cannot be written back (to_file_text: \"expected DOCUMENT-START or STREAM-END\")"]
fn tagged_key_in_data_is_writable() {
    let (_, written) = read_then_write_error_report("- !t a: x\n");
    written.unwrap();
}

#[test]
#[ignore = "bug: positions use the YAML parser's line count, which also breaks lines at U+2028, U+2029, U+0085 and a lone CR; editors and the payload offset count `\\n` only"]
fn positions_count_only_newlines_as_line_breaks() {
    let text = "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nfailure_reason: 'a\u{2028}b'\nstatus: bogus\n";
    let report = check_text(
        Path::new("session-status.md"),
        FileKind::SessionStatus,
        text,
    );
    let d = &report.diagnostics[0];
    assert_eq!(d.rule, squad_protocol::Rule::BadEnum);
    let l = d.location.unwrap();
    assert_eq!((l.line, l.column), (4, 9), "{d}");
}

#[test]
fn syntax_errors_at_the_end_point_into_the_file() {
    let text = "session_id: sess_1\nstatus: [";
    let report = check_text(
        Path::new("session-status.md"),
        FileKind::SessionStatus,
        text,
    );
    let d = &report.diagnostics[0];
    assert_eq!(d.rule, squad_protocol::Rule::YamlSyntax);
    let l = d.location.unwrap();
    assert!(l.line <= 2, "{d}");
}
