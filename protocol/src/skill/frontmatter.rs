//! Splitting a SKILL.md into its YAML front matter and markdown body.
//!
//! Total over every input: any `&str` gives a result, never a panic (a
//! property test feeds it arbitrary text). Reading a file for listing stops
//! at the closing `---`, so a long body is never read.

use crate::fsx::{self, ReadError};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The most front matter read from a SKILL.md (the standard's fields fit in a
/// few KiB; a larger block is refused rather than parsed).
pub const MAX_FRONT_MATTER_BYTES: u64 = 64 * 1024;

/// The most of a SKILL.md read when the whole file is wanted (`skills show`).
pub const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// The front matter of a SKILL.md, as found in its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontMatter<'a> {
    /// The YAML between the `---` lines (without them).
    pub yaml: &'a str,
    /// The 1-based line of the file on which `yaml` starts.
    pub first_line: u32,
    /// The markdown after the closing `---` line.
    pub body: &'a str,
}

/// Why a text has no usable front matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontMatterError {
    /// The first line is not `---` (this includes an empty file).
    Missing,
    /// The opening `---` has no closing `---` line.
    Unclosed,
}

/// Whether `line` (without its line break) is a `---` delimiter; trailing
/// blanks are tolerated as editors leave them.
fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches([' ', '\t', '\r']) == "---"
}

/// Splits `text` into front matter and body. A leading byte order mark is
/// skipped; `\r\n` line ends are accepted.
pub fn split(text: &str) -> Result<FrontMatter<'_>, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().ok_or(FrontMatterError::Missing)?;
    if !is_delimiter(first.trim_end_matches('\n')) {
        return Err(FrontMatterError::Missing);
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if is_delimiter(line.trim_end_matches('\n')) {
            return Ok(FrontMatter {
                yaml: text.get(start..offset).unwrap_or(""),
                first_line: 2,
                body: text.get(offset + line.len()..).unwrap_or(""),
            });
        }
        offset += line.len();
    }
    Err(FrontMatterError::Unclosed)
}

/// Lines read of a SKILL.md without front matter: its title and first
/// paragraph, which stand in for the description.
pub const HEAD_WITHOUT_FRONT_MATTER: usize = 40;

/// What reading a SKILL.md's front matter from disk gives.
#[derive(Debug)]
pub enum Head {
    /// The text up to and including the closing `---` line (or the whole file
    /// when it has no front matter), ready for [`split`].
    Text(String),
    /// The bytes are not UTF-8.
    NotUtf8,
    /// The front matter is longer than [`MAX_FRONT_MATTER_BYTES`].
    TooLarge,
}

/// Reads a SKILL.md only as far as its front matter (through `fsx`: no
/// symlink followed, no FIFO opened). A file without front matter yields
/// its first [`HEAD_WITHOUT_FRONT_MATTER`] lines (where Squad's skills
/// without front matter say what they are); the rest of a body is never read.
pub fn read_head(path: &Path) -> Result<Head, ReadError> {
    let file = fsx::open_regular(path)?;
    let mut reader = BufReader::new(file.take(MAX_FRONT_MATTER_BYTES + 1));
    let mut bytes = Vec::new();
    let mut line = Vec::new();
    let mut first = true;
    let mut without_front_matter = false;
    let mut lines = 0;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&line);
        if bytes.len() as u64 > MAX_FRONT_MATTER_BYTES {
            return Ok(Head::TooLarge);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_start_matches('\u{feff}').trim_end_matches('\n');
        lines += 1;
        if without_front_matter {
            if lines >= HEAD_WITHOUT_FRONT_MATTER {
                break;
            }
        } else if first {
            first = false;
            without_front_matter = !is_delimiter(text);
        } else if is_delimiter(text) {
            break;
        }
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(Head::Text(s)),
        Err(_) => Ok(Head::NotUtf8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_front_matter_and_body() {
        let fm = split("---\nname: a\n---\n# Body\n").unwrap();
        assert_eq!(fm.yaml, "name: a\n");
        assert_eq!(fm.first_line, 2);
        assert_eq!(fm.body, "# Body\n");
    }

    #[test]
    fn crlf_bom_and_trailing_blanks() {
        let fm = split("\u{feff}--- \r\nname: a\r\n---\r\nbody").unwrap();
        assert_eq!(fm.yaml, "name: a\r\n");
        assert_eq!(fm.body, "body");
    }

    #[test]
    fn empty_front_matter_and_no_body() {
        let fm = split("---\n---").unwrap();
        assert_eq!((fm.yaml, fm.body), ("", ""));
    }

    #[test]
    fn missing_and_unclosed() {
        assert_eq!(split(""), Err(FrontMatterError::Missing));
        assert_eq!(split("# Title\n---\n"), Err(FrontMatterError::Missing));
        assert_eq!(split("----\nx\n---\n"), Err(FrontMatterError::Missing));
        assert_eq!(split("---\nname: a\n"), Err(FrontMatterError::Unclosed));
        assert_eq!(split("---"), Err(FrontMatterError::Unclosed));
    }

    #[test]
    fn head_stops_at_the_closing_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("SKILL.md");
        std::fs::write(&p, "---\nname: a\n---\nbody that is never read\n").unwrap();
        match read_head(&p).unwrap() {
            Head::Text(t) => assert_eq!(t, "---\nname: a\n---\n"),
            other => panic!("{other:?}"),
        }
        std::fs::write(&p, "# no front matter\nmore\n").unwrap();
        match read_head(&p).unwrap() {
            Head::Text(t) => assert_eq!(t, "# no front matter\nmore\n"),
            other => panic!("{other:?}"),
        }
        // Without front matter only the first lines are read.
        std::fs::write(&p, "line\n".repeat(1000)).unwrap();
        match read_head(&p).unwrap() {
            Head::Text(t) => assert_eq!(t.lines().count(), HEAD_WITHOUT_FRONT_MATTER),
            other => panic!("{other:?}"),
        }
        std::fs::write(&p, format!("---\n{}", "x: y\n".repeat(20_000))).unwrap();
        assert!(matches!(read_head(&p).unwrap(), Head::TooLarge));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// The reader is total: no input panics, and what it returns is
        /// made of slices of the input in order.
        #[test]
        fn split_never_panics(text in ".*", prefix in prop::sample::select(vec!["", "---\n", "---\r\n", "\u{feff}---\n"])) {
            let input = format!("{prefix}{text}");
            if let Ok(fm) = split(&input) {
                prop_assert!(input.contains(fm.yaml));
                prop_assert!(input.ends_with(fm.body));
            }
        }

        /// Arbitrary bytes on disk (invalid UTF-8, NULs, huge lines) through
        /// the file reader and the check.
        #[test]
        fn check_file_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512), head in prop::sample::select(vec![&b""[..], b"---\n", b"---\nname: x\n"])) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("SKILL.md");
            let mut content = head.to_vec();
            content.extend_from_slice(&bytes);
            std::fs::write(&p, &content).unwrap();
            for strict in [false, true] {
                let _ = crate::skill::check_file(&p, strict);
            }
        }

        /// Arbitrary lines, with delimiters sprinkled in, through the whole
        /// SKILL.md check: diagnostics, never a panic.
        #[test]
        fn check_never_panics(lines in prop::collection::vec(prop_oneof![
            Just("---".to_string()),
            Just("name: x".to_string()),
            Just("description: [".to_string()),
            Just("metadata:\n  a: [1, {b: c}]".to_string()),
            ".{0,40}",
        ], 0..12)) {
            let text = lines.join("\n");
            for strict in [false, true] {
                let report = crate::skill::check_text(Path::new("x/SKILL.md"), &text, strict);
                for d in &report.diagnostics {
                    prop_assert!(d.rule.id().starts_with("skill-"));
                }
            }
        }
    }
}
