//! A linear-time bound on YAML nesting, checked before any YAML is parsed.
//!
//! The YAML parser's cost grows with the square of the nesting depth (100 KB
//! of `[` took 22 s), and protocol files come from anyone who can write the
//! project. [`too_deep`] scans the text once, over-estimating the depth
//! (flow brackets, block indentation levels and compact `- ` entries), and
//! every parse of YAML someone else wrote refuses text past [`MAX_DEPTH`]
//! without parsing it.
//!
//! [`from_str`] and [`deserializer`] are the one entry point for parsing
//! such text: they make the check, so no caller can forget it (a unit test
//! below finds any other `serde_yaml` parse of text in the workspace).

/// The deepest nesting accepted in YAML (protocol files, policy, skill front
/// matter). Real files nest a handful of levels.
pub const MAX_DEPTH: usize = 64;

/// Why YAML text was not parsed into a value.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// The text nests deeper than [`MAX_DEPTH`] here (1-based); it was not
    /// parsed.
    #[error("nesting deeper than {MAX_DEPTH} levels at line {line} column {column} (not parsed)")]
    TooDeep {
        /// The line where the text passes the limit.
        line: usize,
        /// The column there.
        column: usize,
    },
    /// The parser refused the text.
    #[error("{0}")]
    Syntax(#[from] serde_yaml::Error),
}

/// Parses YAML someone else wrote, refusing it unparsed when it nests
/// deeper than [`MAX_DEPTH`]. Linear in the text before the parser runs.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    if let Some((line, column)) = too_deep(text) {
        return Err(YamlError::TooDeep { line, column });
    }
    Ok(serde_yaml::from_str(text)?)
}

/// A YAML deserializer over text someone else wrote, for callers that walk
/// it with their own seed; `Err((line, column))` where the text nests deeper
/// than [`MAX_DEPTH`] (then nothing is parsed).
pub fn deserializer(text: &str) -> Result<serde_yaml::Deserializer<'_>, (usize, usize)> {
    match too_deep(text) {
        Some(at) => Err(at),
        None => Ok(serde_yaml::Deserializer::from_str(text)),
    }
}

/// Where YAML `text` first nests deeper than [`MAX_DEPTH`]: `(line, column)`,
/// both 1-based, in `text`. `None` when it stays within the limit. Runs in
/// time linear in the text; never under-counts what the parser would nest
/// (it may over-count odd plain scalars, which only matters past 64 levels).
pub fn too_deep(text: &str) -> Option<(usize, usize)> {
    let mut flow = 0usize;
    // Indentation of each open block level (strictly increasing).
    let mut indents: Vec<usize> = Vec::new();
    // Inside a block scalar (`|`/`>`): the indentation of its parent line.
    let mut scalar_parent: Option<usize> = None;
    let mut quote: Option<char> = None;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        let blank = rest.trim().is_empty();
        if let Some(parent) = scalar_parent {
            if blank || indent > parent {
                continue;
            }
            scalar_parent = None;
        }
        if quote.is_none() && flow == 0 {
            if blank || rest.starts_with('#') {
                continue;
            }
            while indents.last().is_some_and(|&i| i >= indent) {
                indents.pop();
            }
            indents.push(indent);
        }
        let mut depth_here = indents.len();
        let mut prev = ' ';
        let mut token_start = true;
        let mut chars = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if let Some(q) = quote {
                if c == q {
                    if q == '\'' && chars.peek().is_some_and(|&(_, d)| d == '\'') {
                        chars.next();
                    } else {
                        quote = None;
                    }
                } else if c == '\\' && q == '"' {
                    chars.next();
                }
                prev = c;
                continue;
            }
            let at_start = token_start || prev == ' ' || prev == '\t';
            match c {
                '#' if at_start => break,
                '"' | '\'' if at_start || (flow > 0 && matches!(prev, '[' | '{' | ',')) => {
                    quote = Some(c)
                }
                '[' | '{' if flow > 0 || at_start => flow += 1,
                ']' | '}' if flow > 0 => flow -= 1,
                // A compact nested entry (`- - x`, `? x`) opens a level.
                '-' | '?' | ':'
                    if flow == 0 && at_start && chars.peek().is_none_or(|&(_, d)| d == ' ') =>
                {
                    depth_here += 1
                }
                '|' | '>' if flow == 0 && at_start => {
                    let tail = rest[i + 1..].split(" #").next().unwrap_or("");
                    if tail
                        .trim()
                        .chars()
                        .all(|d| d.is_ascii_digit() || d == '+' || d == '-')
                    {
                        scalar_parent = Some(indent);
                        break;
                    }
                }
                _ => {}
            }
            token_start = false;
            prev = c;
            if depth_here + flow > MAX_DEPTH {
                return Some((n + 1, rest[..i].chars().count() + indent + 1));
            }
        }
        if depth_here + flow > MAX_DEPTH {
            return Some((n + 1, indent + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_points_refuse_deep_text_unparsed() {
        let deep = format!("a: {}", "[".repeat(100_000));
        assert!(matches!(
            from_str::<serde_yaml::Value>(&deep),
            Err(YamlError::TooDeep { line: 1, .. })
        ));
        assert!(deserializer(&deep).is_err());
        assert!(from_str::<serde_yaml::Value>("a: [1, 2]").is_ok());
        assert!(matches!(
            from_str::<serde_yaml::Value>("a: [1"),
            Err(YamlError::Syntax(_))
        ));
    }

    /// Every parse of YAML text in the workspace's code goes through
    /// [`from_str`] / [`deserializer`]: a direct `serde_yaml` parse would skip
    /// the depth check (issue 26 item 9: squadd's field locator did, and one
    /// deep file stalled it for minutes). Tests and this file are exempt.
    #[test]
    fn no_code_parses_yaml_text_around_the_depth_check() {
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let mut offenders = Vec::new();
        let mut stack: Vec<std::path::PathBuf> = ["protocol/src", "policies/src", "supervisor/src"]
            .iter()
            .map(|d| workspace.join(d))
            .collect();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if !name.ends_with(".rs") || name == "depth.rs" || name == "tests.rs" {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                // Unit tests sit at the end of a file, in `mod tests`.
                let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or("");
                for (n, line) in code.lines().enumerate() {
                    let direct = [
                        "serde_yaml::from_str",
                        "serde_yaml::from_slice",
                        "serde_yaml::from_reader",
                        "Deserializer::from_str",
                    ];
                    if direct.iter().any(|d| line.contains(d)) {
                        offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "parse through squad_protocol::depth::from_str:\n{}",
            offenders.join("\n")
        );
    }

    #[test]
    fn ordinary_yaml_is_shallow() {
        let text = "meta:\n  task_id: task_1\n  list: [a, [b, {c: d}]]\nbody: |\n  [[[[[[\n        deep\n# [[[[[\nq: \"[[[[[\"\nr: 'it''s [['\ns: a[b[c\n- - - x\n";
        assert_eq!(too_deep(text), None);
    }

    #[test]
    fn deep_flow_nesting_is_found_where_it_passes_the_limit() {
        let text = format!("a: 1\nb: {}", "[".repeat(100_000));
        assert_eq!(too_deep(&text), Some((2, 4 + MAX_DEPTH - 1)));
        let ok = format!("b: {}{}", "[".repeat(60), "]".repeat(60));
        assert_eq!(too_deep(&ok), None);
    }

    #[test]
    fn deep_block_nesting_is_found() {
        let mut text = String::new();
        for i in 0..80 {
            text.push_str(&" ".repeat(i));
            text.push_str("k:\n");
        }
        assert_eq!(too_deep(&text).map(|p| p.0), Some(MAX_DEPTH + 1));
        let dashes = format!("{}x\n", "- ".repeat(80));
        assert!(too_deep(&dashes).is_some());
    }

    #[test]
    fn quotes_do_not_hide_brackets_the_parser_would_see() {
        // `a'` is a plain scalar: the quote does not open a string.
        let text = format!("x: a'\ny: {}\n", "[".repeat(100));
        assert!(too_deep(&text).is_some());
    }

    #[test]
    fn linear_time_on_a_large_input() {
        let text = "[".repeat(1 << 20);
        assert!(too_deep(&text).is_some());
        let mut flat = String::new();
        for _ in 0..50_000 {
            flat.push_str("[a, b], ");
        }
        assert_eq!(too_deep(&format!("x: [{flat}]")), None);
    }
}
