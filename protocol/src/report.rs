//! Rendering diagnostics for people and machines: human (compiler style),
//! JSON, GitHub workflow commands and SARIF 2.1.0.

use crate::diagnostic::{Diagnostic, Rule, Severity};
use crate::text::escape;
use serde_json::{Value, json};
use std::fmt::Write as _;

/// An output format for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `path:line:col: error[rule-id]: message` plus a hint line.
    Human,
    /// One JSON object with counts and diagnostics.
    Json,
    /// GitHub Actions workflow commands (`::error file=…::…`).
    Github,
    /// SARIF 2.1.0, for code scanning.
    Sarif,
}

/// What was examined, for summary lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    /// Files examined.
    pub files: usize,
    /// Session directories examined.
    pub sessions: usize,
}

const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const BOLD: &str = "\x1b[1m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// Renders diagnostics in `format`. `color` applies to the human format only.
pub fn render(
    format: Format,
    diagnostics: &[Diagnostic],
    totals: Totals,
    tool_version: &str,
    color: bool,
) -> String {
    match format {
        Format::Human => human(diagnostics, totals, color),
        Format::Json => json_report(diagnostics, totals),
        Format::Github => github(diagnostics),
        Format::Sarif => sarif(diagnostics, tool_version),
    }
}

fn human(diagnostics: &[Diagnostic], totals: Totals, color: bool) -> String {
    let paint = |code: &'static str| if color { code } else { "" };
    let mut out = String::new();
    for d in diagnostics {
        let sev_color = match d.severity {
            Severity::Error => RED,
            Severity::Warning => YELLOW,
        };
        let _ = writeln!(
            out,
            "{}{}{}: {}{}[{}]{}: {}",
            paint(BOLD),
            escape(&d.position()),
            paint(RESET),
            paint(sev_color),
            d.severity,
            d.rule,
            paint(RESET),
            escape(&d.message)
        );
        if !d.hint.is_empty() {
            let _ = writeln!(
                out,
                "  {}= hint:{} {}",
                paint(CYAN),
                paint(RESET),
                escape(&d.hint)
            );
        }
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    let _ = writeln!(
        out,
        "{} {}, {} {} in {} {} ({} {})",
        errors,
        plural(errors, "error", "errors"),
        warnings,
        plural(warnings, "warning", "warnings"),
        totals.files,
        plural(totals.files, "file", "files"),
        totals.sessions,
        plural(totals.sessions, "session", "sessions"),
    );
    out
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

fn json_report(diagnostics: &[Diagnostic], totals: Totals) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let v = json!({
        "files_checked": totals.files,
        "sessions_checked": totals.sessions,
        "errors": errors,
        "warnings": diagnostics.len() - errors,
        "diagnostics": diagnostics,
    });
    format!("{v:#}\n")
}

/// Escapes workflow-command data (`%`, CR, LF).
fn gh_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes workflow-command property values (also `:` and `,`).
fn gh_property(s: &str) -> String {
    gh_data(s).replace(':', "%3A").replace(',', "%2C")
}

fn github(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let level = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut props = format!("file={}", gh_property(&d.path.to_string_lossy()));
        if let Some(l) = d.location {
            let _ = write!(props, ",line={},col={}", l.line, l.column);
        }
        let _ = write!(props, ",title={}", gh_property(d.rule.id()));
        let _ = writeln!(
            out,
            "::{level} {props}::{}",
            gh_data(&format!("{} (hint: {})", d.message, d.hint))
        );
    }
    out
}

fn sarif_level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

fn sarif(diagnostics: &[Diagnostic], tool_version: &str) -> String {
    let rules: Vec<Value> = Rule::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.id(),
                "name": r.id(),
                "shortDescription": {"text": r.title()},
                "defaultConfiguration": {"level": sarif_level(r.severity())},
                "helpUri": format!("https://github.com/squad-supervisor/squad-supervisor/blob/main/{}#{}", r.doc_path(), r.id()),
            })
        })
        .collect();
    let results: Vec<Value> = diagnostics
        .iter()
        .map(|d| {
            let rule_index = Rule::ALL.iter().position(|r| *r == d.rule).unwrap_or(0);
            let mut physical = json!({
                "artifactLocation": {"uri": uri(&d.path.to_string_lossy())},
            });
            if let (Some(l), Value::Object(m)) = (d.location, &mut physical) {
                m.insert(
                    "region".into(),
                    json!({"startLine": l.line, "startColumn": l.column}),
                );
            }
            json!({
                "ruleId": d.rule.id(),
                "ruleIndex": rule_index,
                "level": sarif_level(d.severity),
                "message": {"text": format!("{} (hint: {})", d.message, d.hint)},
                "locations": [{"physicalLocation": physical}],
            })
        })
        .collect();
    let v = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "squadctl",
                "version": tool_version,
                "informationUri": "https://github.com/squad-supervisor/squad-supervisor",
                "rules": rules,
            }},
            "results": results,
        }],
    });
    format!("{v:#}\n")
}

/// A relative path as a SARIF URI reference: forward slashes, spaces and
/// other reserved characters percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::new();
    for b in path.replace('\\', "/").bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostic::Location;

    fn sample() -> Vec<Diagnostic> {
        vec![
            Diagnostic::new(
                ".squad/sessions/s/role-plan-a-task_1.md",
                Rule::BadEnum,
                "`meta.priority` is `urgent`; allowed: critical, high, medium, low",
                "use one of: critical|high|medium|low",
            )
            .at(Some(Location {
                line: 6,
                column: 13,
            })),
            Diagnostic::new(
                "dir with space/x.md",
                Rule::UnknownField,
                "50% done, ok: yes",
                "h",
            ),
        ]
    }

    #[test]
    fn human_plain() {
        let out = render(
            Format::Human,
            &sample(),
            Totals {
                files: 2,
                sessions: 1,
            },
            "0",
            false,
        );
        assert!(out.starts_with(".squad/sessions/s/role-plan-a-task_1.md:6:13: error[bad-enum]: `meta.priority` is `urgent`"), "{out}");
        assert!(out.contains("\n  = hint: use one of"), "{out}");
        assert!(
            out.ends_with("1 error, 1 warning in 2 files (1 session)\n"),
            "{out}"
        );
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn human_colored() {
        let out = render(Format::Human, &sample(), Totals::default(), "0", true);
        assert!(out.contains(RED));
    }

    #[test]
    fn github_escapes() {
        let out = render(Format::Github, &sample(), Totals::default(), "0", false);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("::error file=.squad/sessions/s/role-plan-a-task_1.md,line=6,col=13,title=bad-enum::"), "{}", lines[0]);
        assert!(
            lines[1].starts_with(
                "::warning file=dir with space/x.md,title=unknown-field::50%25 done, ok: yes"
            ),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn sarif_shape() {
        let out = render(Format::Sarif, &sample(), Totals::default(), "9.9", false);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["version"], "2.1.0");
        let run = &v["runs"][0];
        assert_eq!(
            run["tool"]["driver"]["rules"].as_array().unwrap().len(),
            Rule::ALL.len()
        );
        let r0 = &run["results"][0];
        assert_eq!(r0["ruleId"], "bad-enum");
        let idx = r0["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(run["tool"]["driver"]["rules"][idx]["id"], "bad-enum");
        assert_eq!(
            r0["locations"][0]["physicalLocation"]["region"]["startLine"],
            6
        );
        assert_eq!(
            run["results"][1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "dir%20with%20space/x.md"
        );
    }

    #[test]
    fn json_counts() {
        let out = render(
            Format::Json,
            &sample(),
            Totals {
                files: 2,
                sessions: 1,
            },
            "0",
            false,
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["errors"], 1);
        assert_eq!(v["warnings"], 1);
        assert_eq!(v["diagnostics"][0]["rule"], "bad-enum");
        assert_eq!(v["diagnostics"][0]["line"], 6);
        assert_eq!(v["diagnostics"][0]["severity"], "error");
        assert!(v["diagnostics"][1].get("line").is_none());
    }
}
