// Over 800 lines: the one per-file pipeline (bytes, payload, YAML, rules,
// typed document) with the `Walker` of the field rules it drives. The
// split waiting is the Walker and the cross-field rules into
// validate/rules.rs (issue 42), after issue 40's changes here land.
//! Per-file validation: bytes → payload → YAML → rules → typed document.

use crate::diagnostic::{Diagnostic, Location, Rule, Severity};
use crate::ids::IdKind;
use crate::kind::{FileKind, SESSION_STATUS_FILE};
use crate::locate::{PathSeg, Target, display_path, locate};
use crate::model::{Document, canonical_file_name};
use crate::payload::{Encoding, PayloadError, extract};
use crate::spec::{self, Field, Ty};
use chrono::DateTime;
use serde_yaml::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// Protocol files larger than this are refused without being read.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Locating a diagnostic costs a parse; a file with more findings than this
/// gets the rest without positions rather than a quadratic bill.
const MAX_LOCATED: usize = 64;

/// A rule violation inside one file, addressed by its path in the YAML.
/// Turned into a [`Diagnostic`] once its position is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule.
    pub rule: Rule,
    /// Where in the document.
    pub field: Vec<PathSeg>,
    /// Whether to point at the key or the value.
    pub target: Target,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

/// Identity facts about a file, extracted even when the file has errors, so
/// session rules can reason about every file that names a task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// The task the file is about (plan/progress `meta.task_id`, message
    /// `context.task_id`, error report `task_id`).
    pub task_id: Option<String>,
    /// The writing agent (plan: the assignee; message: the sender).
    pub agent: Option<String>,
    /// `dependencies.requires` entries with their list index (plans only).
    pub requires: Vec<(usize, String)>,
    /// `dependencies.blocks` entries with their list index (plans only).
    pub blocks: Vec<(usize, String)>,
    /// `meta.message_id` (messages only): unique within a session, since the
    /// inbox name a message is delivered under is built from it.
    pub message_id: Option<String>,
}

/// The outcome of validating one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file.
    pub path: PathBuf,
    /// Its kind, from the file name.
    pub kind: FileKind,
    /// How the YAML was embedded, when a payload was found.
    pub encoding: Option<Encoding>,
    /// The typed document, present only when there are no errors.
    pub document: Option<Document>,
    /// Identity facts for session rules.
    pub facts: Facts,
    /// Everything found, errors and warnings.
    pub diagnostics: Vec<Diagnostic>,
}

impl FileReport {
    fn failed(path: &Path, kind: FileKind, diagnostic: Diagnostic) -> Self {
        FileReport {
            path: path.to_path_buf(),
            kind,
            encoding: None,
            document: None,
            facts: Facts::default(),
            diagnostics: vec![diagnostic],
        }
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Reads and validates one file whose name classifies it as `kind`.
///
/// Never panics and never reads more than [`MAX_FILE_BYTES`] + 1 bytes;
/// directories, FIFOs and devices are refused without being opened.
pub fn check_file(path: &Path, kind: FileKind) -> FileReport {
    match read_limited(path) {
        Ok(bytes) => check_bytes(path, kind, &bytes),
        Err(diagnostic) => FileReport::failed(path, kind, diagnostic),
    }
}

/// Why a protocol file was not read.
#[derive(Debug)]
pub enum ReadFailure {
    /// The machine's fault (out of file descriptors, interrupted): retry;
    /// never recorded against the file.
    Transient(std::io::Error),
    /// The file's fault, as its diagnostic.
    Refused(Diagnostic),
}

/// Reads a protocol file, refusing anything that is not a regular file of at
/// most [`MAX_FILE_BYTES`].
pub fn read_limited(path: &Path) -> Result<Vec<u8>, Diagnostic> {
    read_checked(path).map_err(|f| match f {
        ReadFailure::Refused(d) => d,
        ReadFailure::Transient(e) => Diagnostic::new(
            path,
            Rule::Unreadable,
            format!("cannot read the file: {e}"),
            "try again; the system ran short of a resource (file descriptors, memory)",
        ),
    })
}

/// Like [`read_limited`], telling a transient failure (retry) from the
/// file's own fault.
pub fn read_checked(path: &Path) -> Result<Vec<u8>, ReadFailure> {
    use crate::fsx::ReadError;
    let transient = |e: std::io::Error| -> ReadFailure {
        if crate::fsx::is_transient_io(&e) {
            ReadFailure::Transient(e)
        } else {
            ReadFailure::Refused(Diagnostic::new(
                path,
                Rule::Unreadable,
                format!("cannot read the file: {e}"),
                "check that the file exists and is readable by this user",
            ))
        }
    };
    // Not followed: a protocol file that is a symlink could make the
    // supervisor read (and quote in diagnostics) a file outside the project.
    let meta = fs::symlink_metadata(path).map_err(transient)?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else if meta.file_type().is_symlink() {
            "a symbolic link"
        } else {
            "not a regular file"
        };
        return Err(ReadFailure::Refused(Diagnostic::new(
            path,
            Rule::NotAFile,
            format!("this protocol file name names {what}"),
            "protocol names are reserved for regular files; rename it",
        )));
    }
    let too_large = |size: u64| {
        Diagnostic::new(
            path,
            Rule::FileTooLarge,
            format!("the file is {size} bytes; the limit is {MAX_FILE_BYTES} bytes (1 MiB)"),
            "move bulky content into artifacts/ and reference it by path",
        )
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(ReadFailure::Refused(too_large(meta.len())));
    }
    // Opened non-blocking and without following a link, checked again on
    // the descriptor: the path may have been swapped for a FIFO or a link
    // since the stat above (a blocking open of a FIFO hangs for good).
    let not_a_file = |what: &str| {
        Diagnostic::new(
            path,
            Rule::NotAFile,
            format!("this protocol file name names {what}"),
            "protocol names are reserved for regular files; rename it",
        )
    };
    let bytes = match crate::fsx::read_regular(path, MAX_FILE_BYTES) {
        Ok(bytes) => bytes,
        Err(ReadError::TooLarge { size, .. }) => {
            return Err(ReadFailure::Refused(too_large(size)));
        }
        Err(ReadError::Symlink) => {
            return Err(ReadFailure::Refused(not_a_file("a symbolic link")));
        }
        Err(ReadError::NotRegular(_)) => {
            return Err(ReadFailure::Refused(not_a_file("not a regular file")));
        }
        Err(ReadError::NotFound) => return Err(transient(std::io::ErrorKind::NotFound.into())),
        Err(ReadError::Io(e)) => return Err(transient(e)),
    };
    Ok(bytes)
}

/// Validates the bytes of a file named `path` of kind `kind`.
pub fn check_bytes(path: &Path, kind: FileKind, bytes: &[u8]) -> FileReport {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return FileReport::failed(
            path,
            kind,
            Diagnostic::new(
                path,
                Rule::FileTooLarge,
                format!(
                    "the file is {} bytes; the limit is {MAX_FILE_BYTES} bytes (1 MiB)",
                    bytes.len()
                ),
                "move bulky content into artifacts/ and reference it by path",
            ),
        );
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => check_text(path, kind, text),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
            let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            let column = String::from_utf8_lossy(&valid[line_start..])
                .chars()
                .count()
                + 1;
            FileReport::failed(
                path,
                kind,
                Diagnostic::new(
                    path,
                    Rule::InvalidUtf8,
                    format!("invalid UTF-8 at byte {}", e.valid_up_to()),
                    "save the file as UTF-8 text; binary content belongs in artifacts/",
                )
                .at(Some(location(line, column))),
            )
        }
    }
}

fn location(line: usize, column: usize) -> Location {
    Location {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: u32::try_from(column).unwrap_or(u32::MAX),
    }
}

/// Validates the text of a file named `path` of kind `kind`.
pub fn check_text(path: &Path, kind: FileKind, text: &str) -> FileReport {
    let payload = match extract(text) {
        Ok(p) => p,
        Err(PayloadError::MultipleFencedBlocks { second_line }) => {
            return FileReport::failed(
                path,
                kind,
                Diagnostic::new(
                    path,
                    Rule::MultipleYamlBlocks,
                    "a second fenced yaml block starts here",
                    "keep exactly one ```yaml block; show other YAML with a different info string",
                )
                .at(Some(location(second_line, 1))),
            );
        }
    };
    let mut report = FileReport {
        path: path.to_path_buf(),
        kind,
        encoding: Some(payload.encoding),
        document: None,
        facts: Facts::default(),
        diagnostics: Vec::new(),
    };
    let offset = payload.line_offset;
    let value: Value = match crate::depth::from_str(payload.yaml) {
        Ok(v) => v,
        Err(crate::depth::YamlError::TooDeep { line, column }) => {
            report.diagnostics.push(
                Diagnostic::new(
                    path,
                    Rule::YamlSyntax,
                    format!(
                        "nesting deeper than {} levels (not parsed)",
                        crate::depth::MAX_DEPTH
                    ),
                    "flatten the YAML; protocol payloads nest a few levels",
                )
                .at(Some(location(line + offset, column))),
            );
            return report;
        }
        Err(crate::depth::YamlError::Syntax(e)) => {
            // The parser may place an error at the end of input, one line
            // past a file without a final newline; keep it inside the file.
            let last_line = text.lines().count().max(1);
            let at = e.location().map(|l| {
                let line = l.line() + offset;
                if line > last_line {
                    let last = text.lines().last().unwrap_or("");
                    location(last_line, last.chars().count() + 1)
                } else {
                    location(line, l.column())
                }
            });
            report
                .diagnostics
                .push(yaml_error(path, payload.yaml, offset, &e).at(at));
            return report;
        }
    };
    let Value::Mapping(_) = value else {
        let d = if value.is_null() {
            Diagnostic::new(
                path,
                Rule::EmptyFile,
                "the file holds no YAML payload",
                format!(
                    "write the {} fields; `squadctl schema {}` lists them",
                    kind.title(),
                    kind
                ),
            )
        } else {
            Diagnostic::new(
                path,
                Rule::NotAMapping,
                format!("the payload is {}, not a mapping", describe(&value)),
                "a protocol file is a YAML mapping of `field: value` lines",
            )
            .at(Some(location(offset + 1, 1)))
        };
        report.diagnostics.push(d);
        return report;
    };

    let mut walker = Walker::default();
    walker.object(&value, spec::fields(kind));
    let mut findings = walker.findings;
    cross_field_rules(path, kind, &value, &mut findings);
    report.facts = facts(kind, &value);

    if !findings
        .iter()
        .any(|f| f.rule.severity() == Severity::Error)
    {
        match typed(kind, value) {
            Ok(doc) => report.document = Some(doc),
            Err(e) => findings.push(Finding {
                rule: Rule::WrongType,
                field: Vec::new(),
                target: Target::Value,
                message: format!("the document does not fit its kind: {e}"),
                hint: format!("compare with `squadctl schema {kind}`"),
            }),
        }
    }
    report.diagnostics = place(path, payload.yaml, offset, findings);
    report
}

/// Turns findings into diagnostics with positions in the file.
pub fn place(
    path: &Path,
    yaml: &str,
    line_offset: usize,
    findings: Vec<Finding>,
) -> Vec<Diagnostic> {
    findings
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            let at = if i < MAX_LOCATED {
                locate(yaml, &f.field, f.target)
                    .or_else(|| {
                        // A missing field points at its parent mapping.
                        f.field
                            .split_last()
                            .and_then(|(_, parent)| locate(yaml, parent, Target::Value))
                    })
                    .map(|(l, c)| location(l + line_offset, c))
            } else {
                None
            };
            Diagnostic::new(path, f.rule, f.message, f.hint).at(at)
        })
        .collect()
}

fn yaml_error(path: &Path, yaml: &str, line_offset: usize, e: &serde_yaml::Error) -> Diagnostic {
    let message = yaml_message(&e.to_string(), line_offset);
    if let Some(d) = integer_too_large(path, &message) {
        return d;
    }
    let line_text = e
        .location()
        .and_then(|l| yaml.lines().nth(l.line().saturating_sub(1)))
        .unwrap_or("");
    let hint = if message.contains("repetition limit") || message.contains("recursion limit") {
        "the document expands aliases or nests too deeply to be a protocol file; write the values out"
    } else if line_text.contains('\t') || message.contains("tab") {
        "YAML forbids tabs for indentation; indent with spaces"
    } else if message.contains("duplicate") {
        "each key may appear once per mapping; remove or rename the duplicate"
    } else {
        "fix the YAML syntax here; quote values that contain `: `, `#` or start with a special character"
    };
    Diagnostic::new(path, Rule::YamlSyntax, message, hint)
}

/// The parser reports an integer past 64 bits as a type error ("invalid
/// type: integer `…` as u128"); it is a number out of range, said so.
fn integer_too_large(path: &Path, message: &str) -> Option<Diagnostic> {
    let (field, rest) = message.split_once(": invalid type: integer `")?;
    let (number, rest) = rest.split_once('`')?;
    if !rest.starts_with(" as u128") && !rest.starts_with(" as i128") {
        return None;
    }
    Some(Diagnostic::new(
        path,
        Rule::OutOfRange,
        format!("`{field}` is {number}, past the largest integer a field can hold (2^64 - 1)"),
        "use a number in the field's range (see the format reference)",
    ))
}

/// The parser's message without its own position (reported separately), with
/// any further positions ("while parsing a flow sequence at line 3 column 10")
/// moved from payload lines to file lines.
fn yaml_message(raw: &str, line_offset: usize) -> String {
    const AT: &str = " at line ";
    let mut out = String::new();
    let mut rest = raw;
    let mut first = true;
    while let Some(i) = rest.find(AT) {
        out.push_str(&rest[..i]);
        let after = &rest[i + AT.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let (Ok(line), Some(tail)) = (
            after[..digits].parse::<usize>(),
            after[digits..].strip_prefix(" column "),
        ) else {
            out.push_str(AT);
            rest = after;
            continue;
        };
        let col_digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if !first {
            out.push_str(&format!(
                "{AT}{} column {}",
                line + line_offset,
                &tail[..col_digits]
            ));
        }
        first = false;
        rest = &tail[col_digits..];
    }
    out.push_str(rest);
    out
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

fn expected(ty: &Ty) -> &'static str {
    match ty {
        Ty::Text | Ty::Id(_) | Ty::Enum(_) | Ty::Timestamp | Ty::Glob | Ty::RelPath => "a string",
        Ty::Int { .. } => "an integer",
        Ty::Number { .. } => "a number",
        Ty::Bool => "a boolean (true or false)",
        Ty::List(_) => "a list",
        Ty::Object(_) | Ty::Map(_) => "a mapping",
        Ty::Any => "any value",
    }
}

#[derive(Default)]
struct Walker {
    path: Vec<PathSeg>,
    findings: Vec<Finding>,
}

impl Walker {
    fn here(&self) -> String {
        display_path(&self.path)
    }

    fn push(&mut self, rule: Rule, target: Target, message: String, hint: String) {
        self.findings.push(Finding {
            rule,
            field: self.path.clone(),
            target,
            message,
            hint,
        });
    }

    fn value(&mut self, v: &Value, ty: &Ty) {
        match (ty, v) {
            (Ty::Any, _) => {}
            (Ty::Text, Value::String(_)) => {}
            (Ty::Id(kind), Value::String(s)) => {
                if !kind.matches(s) {
                    self.push(
                        Rule::BadId,
                        Target::Value,
                        format!("`{}` is `{s}`, not a valid {kind}", self.here()),
                        format!("use `{}`, e.g. `{}`", kind.pattern(), kind.example()),
                    );
                }
            }
            (Ty::Enum(allowed), Value::String(s)) => {
                if !allowed.contains(&s.as_str()) {
                    self.push(
                        Rule::BadEnum,
                        Target::Value,
                        format!(
                            "`{}` is `{s}`; allowed: {}",
                            self.here(),
                            allowed.join(", ")
                        ),
                        format!("use one of: {}", allowed.join("|")),
                    );
                }
            }
            (Ty::Timestamp, Value::String(s)) => {
                if DateTime::parse_from_rfc3339(s).is_err() {
                    self.push(
                        Rule::BadTimestamp,
                        Target::Value,
                        format!(
                            "`{}` is `{s}`, not an RFC 3339 timestamp with an offset",
                            self.here()
                        ),
                        "write date, time and offset, e.g. `2024-01-15T10:30:00Z` or `2024-01-15T11:30:00+01:00`".into(),
                    );
                }
            }
            (Ty::Glob, Value::String(s)) => {
                if !self.safe_path(s) {
                    return;
                }
                if let Err(e) = globset::GlobBuilder::new(s).literal_separator(true).build() {
                    self.push(
                        Rule::BadGlob,
                        Target::Value,
                        format!("`{}` is not a valid glob: {}", self.here(), e.kind()),
                        "globs use `*` within a path segment, `**` across segments, `?`, `[abc]` and `{a,b}`; escape literal metacharacters with `[ ]`".into(),
                    );
                }
            }
            (Ty::RelPath, Value::String(s)) => {
                self.safe_path(s);
            }
            (Ty::Int { min, max }, Value::Number(n)) if !n.is_f64() => {
                let n = n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
                    .unwrap_or(i128::MAX);
                let below = n < i128::from(*min);
                let above = max.is_some_and(|m| n > i128::from(m));
                if below || above {
                    let range = match max {
                        Some(m) => format!("{min} to {m}"),
                        None if *min == 1 => "a positive integer".to_string(),
                        None => format!("at least {min}"),
                    };
                    self.push(
                        Rule::OutOfRange,
                        Target::Value,
                        format!("`{}` is {n}; it must be {range}", self.here()),
                        format!("use {range}"),
                    );
                }
            }
            (Ty::Number { min, max }, Value::Number(n)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                if !x.is_finite() || x < *min || x > *max {
                    self.push(
                        Rule::OutOfRange,
                        Target::Value,
                        format!("`{}` is {n}; it must be {min} to {max}", self.here()),
                        format!("use a number from {min} to {max}"),
                    );
                }
            }
            (Ty::Bool, Value::Bool(_)) => {}
            (Ty::List(item), Value::Sequence(items)) => {
                for (i, v) in items.iter().enumerate() {
                    self.path.push(PathSeg::Index(i));
                    self.value(v, item);
                    self.path.pop();
                }
            }
            (Ty::Object(fields), Value::Mapping(_)) => self.object(v, fields),
            (Ty::Map(item), Value::Mapping(m)) => {
                for (k, v) in m {
                    let Some(k) = self.key(k) else { continue };
                    self.path.push(PathSeg::Key(k));
                    self.value(v, item);
                    self.path.pop();
                }
            }
            (ty, v) => self.wrong_type(ty, v),
        }
    }

    fn wrong_type(&mut self, ty: &Ty, v: &Value) {
        let hint = match (ty, v) {
            (Ty::List(_), Value::Null) => {
                "write `[]` for an empty list, or remove the field".to_string()
            }
            (Ty::Object(_) | Ty::Map(_), Value::Null) => {
                "write `{}` for an empty mapping, or remove the field".to_string()
            }
            (
                Ty::Text | Ty::Id(_) | Ty::Enum(_) | Ty::Timestamp | Ty::Glob | Ty::RelPath,
                Value::Number(_) | Value::Bool(_) | Value::Null,
            ) => "quote the value to make it a string".to_string(),
            (Ty::Int { .. } | Ty::Number { .. } | Ty::Bool, Value::String(_)) => {
                "remove the quotes around the value".to_string()
            }
            (Ty::List(_), _) => "write one `- item` per line".to_string(),
            _ => format!("write {} here", expected(ty)),
        };
        let found = match v {
            Value::String(s) if s.len() <= 40 => format!("a string (`{s}`)"),
            _ => describe(v).to_string(),
        };
        self.push(
            Rule::WrongType,
            Target::Value,
            format!(
                "`{}` should be {}, found {found}",
                self.here(),
                expected(ty)
            ),
            hint,
        );
    }

    /// Checks a project-relative path; returns whether it is safe.
    fn safe_path(&mut self, s: &str) -> bool {
        let reason = if s.is_empty() {
            Some("is empty")
        } else if s.starts_with('/')
            || s.starts_with('\\')
            || (s.len() >= 2 && s.as_bytes()[1] == b':' && s.as_bytes()[0].is_ascii_alphabetic())
        {
            Some("is absolute")
        } else if s.split(['/', '\\']).any(|seg| seg == "..") {
            Some("contains `..`")
        } else {
            None
        };
        match reason {
            Some(why) => {
                self.push(
                    Rule::UnsafePath,
                    Target::Value,
                    format!("`{}` is `{s}`, which {why}", self.here()),
                    "paths are relative to the project root and stay inside it, e.g. `backend/src/**`".into(),
                );
                false
            }
            None => true,
        }
    }

    fn key(&mut self, k: &Value) -> Option<String> {
        match k {
            Value::String(s) => Some(s.clone()),
            other => {
                self.push(
                    Rule::WrongType,
                    Target::Value,
                    format!(
                        "a key in `{}` is {}, not a string",
                        self.here(),
                        describe(other)
                    ),
                    "quote the key".into(),
                );
                None
            }
        }
    }

    fn object(&mut self, v: &Value, fields: &[Field]) {
        let Value::Mapping(m) = v else { return };
        for (k, val) in m {
            let Some(k) = self.key(k) else { continue };
            let field = fields.iter().find(|f| f.name == k);
            self.path.push(PathSeg::Key(k));
            match field {
                Some(field) => self.value(val, &field.ty),
                None => {
                    let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
                    // One edit from a field of this mapping: a typo of it,
                    // whose value would otherwise count for nothing (a
                    // task's `boundries:` left it allowed nothing).
                    if let Some(meant) = crate::suggest::closest(
                        &display_key(&self.path),
                        known.iter().copied().filter(|k| !m.contains_key(*k)),
                        1,
                    ) {
                        self.push(
                            Rule::MisspelledField,
                            Target::Key,
                            format!(
                                "`{}` is not a protocol field; did you mean `{meant}`?",
                                self.here()
                            ),
                            format!("rename it to `{meant}`"),
                        );
                        self.path.pop();
                        continue;
                    }
                    self.push(
                        Rule::UnknownField,
                        Target::Key,
                        format!("`{}` is not a protocol field", self.here()),
                        format!(
                            "known fields here: {}; check the spelling, or ignore this if a newer tool wrote it",
                            known.join(", ")
                        ),
                    );
                }
            }
            self.path.pop();
        }
        for field in fields.iter().filter(|f| f.required) {
            if !m.contains_key(field.name) {
                self.path.push(PathSeg::Key(field.name.into()));
                self.push(
                    Rule::MissingField,
                    Target::Value,
                    format!("required field `{}` is missing", self.here()),
                    format!("add `{}:` ({})", field.name, field.doc),
                );
                self.path.pop();
            }
        }
    }
}

/// The last key of a path (the field being looked at).
fn display_key(path: &[PathSeg]) -> String {
    match path.last() {
        Some(PathSeg::Key(k)) => k.clone(),
        _ => String::new(),
    }
}

fn get<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

fn get_str<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    get(v, path).and_then(Value::as_str)
}

fn field_path(path: &[&str]) -> Vec<PathSeg> {
    path.iter()
        .map(|k| PathSeg::Key((*k).to_string()))
        .collect()
}

/// Where a kind's file names the task it is about.
pub fn task_ref_field(kind: FileKind) -> &'static [&'static str] {
    match kind {
        FileKind::SessionStatus => &[],
        FileKind::TaskAssignment | FileKind::ProgressUpdate => &["meta", "task_id"],
        FileKind::Message => &["context", "task_id"],
        FileKind::ErrorReport => &["task_id"],
    }
}

fn facts(kind: FileKind, v: &Value) -> Facts {
    // Only well-formed ids count: a malformed one already has its `bad-id`
    // diagnostic, and session rules would only repeat it.
    let id = |path: &[&str], grammar: IdKind| {
        (!path.is_empty())
            .then(|| get_str(v, path))
            .flatten()
            .filter(|s| grammar.matches(s))
            .map(str::to_string)
    };
    let agent_field: &[&str] = match kind {
        FileKind::SessionStatus => &[],
        FileKind::TaskAssignment | FileKind::ProgressUpdate => &["meta", "agent"],
        FileKind::Message => &["meta", "from_agent"],
        FileKind::ErrorReport => &["agent"],
    };
    let list = |key: &str| -> Vec<(usize, String)> {
        match (kind, get(v, &["dependencies", key])) {
            (FileKind::TaskAssignment, Some(Value::Sequence(items))) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| item.as_str().map(|s| (i, s)))
                .filter(|(_, s)| IdKind::Task.matches(s))
                .map(|(i, s)| (i, s.to_string()))
                .collect(),
            _ => Vec::new(),
        }
    };
    Facts {
        task_id: id(task_ref_field(kind), IdKind::Task),
        agent: id(agent_field, IdKind::Agent),
        requires: list("requires"),
        blocks: list("blocks"),
        message_id: match kind {
            FileKind::Message => id(&["meta", "message_id"], IdKind::Message),
            _ => None,
        },
    }
}

/// Rules that look at more than one field.
fn cross_field_rules(path: &Path, kind: FileKind, v: &Value, findings: &mut Vec<Finding>) {
    let timestamp = |p: &[&str]| get_str(v, p).and_then(|s| DateTime::parse_from_rfc3339(s).ok());

    // The content is authoritative; the name must be built from it. Only
    // checked when the naming fields are valid ids, or the expected name would
    // repeat their own errors.
    let id = |p: &[&str], kind: IdKind| get_str(v, p).filter(|s| kind.matches(s));
    let actual = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let (expected, id_field): (Option<String>, &[&str]) = match kind {
        FileKind::SessionStatus => (Some(SESSION_STATUS_FILE.to_string()), &[]),
        FileKind::TaskAssignment | FileKind::ProgressUpdate => (
            id(&["meta", "agent"], IdKind::Agent)
                .zip(id(&["meta", "task_id"], IdKind::Task))
                .map(|(a, t)| canonical_file_name(kind, a, t, "")),
            &["meta", "task_id"],
        ),
        FileKind::Message => (
            id(&["meta", "from_agent"], IdKind::Agent)
                .zip(id(&["meta", "to_agent"], IdKind::Agent))
                .zip(id(&["meta", "message_id"], IdKind::Message))
                .map(|((f, t), m)| canonical_file_name(kind, f, m, t)),
            &["meta", "message_id"],
        ),
        FileKind::ErrorReport => (
            id(&["agent"], IdKind::Agent)
                .zip(id(&["error_id"], IdKind::Error))
                .map(|(a, id)| canonical_file_name(kind, a, id, "")),
            &["error_id"],
        ),
    };
    if let (Some(expected), Some(actual)) = (expected, actual)
        && expected != actual
    {
        findings.push(Finding {
            rule: Rule::FilenameMismatch,
            field: field_path(id_field),
            target: Target::Value,
            message: format!(
                "file name `{actual}` does not match the content, which names `{expected}`"
            ),
            hint: format!("rename the file to `{expected}` (the content is authoritative)"),
        });
    }

    if kind == FileKind::Message
        && let (Some(created), Some(due)) = (
            timestamp(&["meta", "created_at"]),
            timestamp(&["response_by"]),
        )
        && due < created
    {
        findings.push(Finding {
            rule: Rule::ResponseBeforeCreated,
            field: field_path(&["response_by"]),
            target: Target::Value,
            message: format!(
                "`response_by` ({}) is before `meta.created_at` ({})",
                due.to_rfc3339(),
                created.to_rfc3339()
            ),
            hint: "set `response_by` to a time after the message is written".into(),
        });
    }

    if kind == FileKind::SessionStatus
        && let (Some(done), Some(total)) = (
            get(v, &["tasks_completed"]).and_then(Value::as_u64),
            get(v, &["tasks_total"]).and_then(Value::as_u64),
        )
        && done > total
    {
        findings.push(Finding {
            rule: Rule::OutOfRange,
            field: field_path(&["tasks_completed"]),
            target: Target::Value,
            message: format!("`tasks_completed` ({done}) exceeds `tasks_total` ({total})"),
            hint: "the supervisor derives both counters; let it rewrite them".into(),
        });
    }

    if kind == FileKind::ErrorReport
        && get(v, &["requires_intervention"]).and_then(Value::as_bool) == Some(true)
        && get(v, &["suggested_agent"]).is_none()
    {
        findings.push(Finding {
            rule: Rule::MissingField,
            field: field_path(&["suggested_agent"]),
            target: Target::Value,
            message: "`requires_intervention` is true but `suggested_agent` is missing".into(),
            hint: "name the agent who should step in, so the supervisor can route the report"
                .into(),
        });
    }
}

fn typed(kind: FileKind, v: Value) -> Result<Document, serde_yaml::Error> {
    Ok(match kind {
        FileKind::SessionStatus => Document::SessionStatus(serde_yaml::from_value(v)?),
        FileKind::TaskAssignment => Document::TaskAssignment(serde_yaml::from_value(v)?),
        FileKind::ProgressUpdate => Document::ProgressUpdate(serde_yaml::from_value(v)?),
        FileKind::Message => Document::Message(serde_yaml::from_value(v)?),
        FileKind::ErrorReport => Document::ErrorReport(serde_yaml::from_value(v)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_messages_drop_own_position_and_shift_context_positions() {
        let raw = "did not find expected ',' or ']' at line 4 column 11, while parsing a flow sequence at line 3 column 10";
        assert_eq!(
            yaml_message(raw, 5),
            "did not find expected ',' or ']', while parsing a flow sequence at line 8 column 10"
        );
        assert_eq!(yaml_message("plain", 3), "plain");
        assert_eq!(yaml_message("odd at line x", 3), "odd at line x");
    }

    /// -1, 2^63 and 2^64 as a plan's timeout are all `out-of-range` at the
    /// value (2^64 was a `yaml-syntax` error about u128; 2^63 passed and
    /// made a task that could never be overdue).
    #[test]
    fn absurd_timeouts_are_out_of_range() {
        for v in ["-1", "0", "9223372036854775808", "18446744073709551616"] {
            let text = format!(
                "meta:\n  task_id: task_1\n  agent: a\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n  timeout: {v}\ninstruction: x\n"
            );
            let r = check_text(
                Path::new("role-plan-a-task_1.md"),
                FileKind::TaskAssignment,
                &text,
            );
            let rules: Vec<_> = r.diagnostics.iter().map(|d| d.rule).collect();
            assert_eq!(rules, [Rule::OutOfRange], "{v}: {:?}", r.diagnostics);
            let d = &r.diagnostics[0];
            assert!(d.message.contains(v), "{}", d.message);
            assert_eq!(d.location.as_ref().map(|l| l.line), Some(6), "{v}");
        }
        let ok = "meta:\n  task_id: task_1\n  agent: a\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\n  timeout: 315360000\ninstruction: x\n";
        let r = check_text(
            Path::new("role-plan-a-task_1.md"),
            FileKind::TaskAssignment,
            ok,
        );
        assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    }
}
