//! Finding the YAML payload inside a `.md` protocol file.
//!
//! Three encodings are accepted (docs/protocol.md, "Encodings"):
//!
//! 1. **Front matter**: the file starts with a `---` line and a later line is
//!    `---` or `...`; the YAML is what lies between, the rest is free markdown.
//! 2. **Fenced block**: a line at column 0 opens a fence (```` ``` ```` or `~~~`)
//!    whose info string is `yaml` or `yml`; the YAML is the block's content.
//!    Exactly one such block is allowed. A plain YAML file can never hold such a
//!    line (a backtick cannot start a plain scalar, and block scalars are
//!    indented), so the test is unambiguous.
//! 3. **Plain YAML**: otherwise the whole file is YAML, as in the seed, where
//!    `# Task Assignment` is a YAML comment.
//!
//! The payload is always a run of whole lines, so a position in it maps back to
//! the file by adding [`Payload::line_offset`] to the line; columns are unchanged.

use serde::Serialize;

/// How the YAML payload was embedded in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// The whole file is YAML.
    PlainYaml,
    /// YAML front matter between `---` lines, then markdown.
    FrontMatter,
    /// Markdown holding one fenced yaml block.
    FencedBlock,
}

/// The YAML part of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload<'a> {
    /// The YAML text.
    pub yaml: &'a str,
    /// Number of file lines before the payload's first line.
    pub line_offset: usize,
    /// Which encoding the file used.
    pub encoding: Encoding,
}

/// Why no payload could be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadError {
    /// More than one fenced yaml block; carries the 1-based line of the second one.
    MultipleFencedBlocks {
        /// Line of the second opening fence.
        second_line: usize,
    },
}

/// Extracts the YAML payload from the text of a protocol file.
pub fn extract(text: &str) -> Result<Payload<'_>, PayloadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(p) = front_matter(text) {
        return Ok(p);
    }
    if let Some(p) = fenced_block(text)? {
        return Ok(p);
    }
    Ok(Payload {
        yaml: text,
        line_offset: 0,
        encoding: Encoding::PlainYaml,
    })
}

/// Lines with their start and end byte offsets (the end is the start of the
/// next line); the line text excludes `\n` / `\r\n`.
fn lines_with_offsets(text: &str) -> impl Iterator<Item = (usize, &str, usize)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |raw| {
        let start = offset;
        offset += raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        (start, line.strip_suffix('\r').unwrap_or(line), offset)
    })
}

fn front_matter(text: &str) -> Option<Payload<'_>> {
    let mut lines = lines_with_offsets(text);
    let (_, first, body_start) = lines.next()?;
    if first.trim_end() != "---" {
        return None;
    }
    lines
        .find(|(_, line, _)| matches!(line.trim_end(), "---" | "..."))
        .map(|(start, _, _)| Payload {
            yaml: &text[body_start..start],
            line_offset: 1,
            encoding: Encoding::FrontMatter,
        })
}

fn fence_opening(line: &str) -> Option<(char, usize, bool)> {
    let fence_char = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.chars().take_while(|c| *c == fence_char).count();
    if len < 3 {
        return None;
    }
    let info = line[len..].trim();
    let lang = info.split_whitespace().next().unwrap_or("");
    let is_yaml = lang.eq_ignore_ascii_case("yaml") || lang.eq_ignore_ascii_case("yml");
    Some((fence_char, len, is_yaml))
}

fn fenced_block(text: &str) -> Result<Option<Payload<'_>>, PayloadError> {
    let mut found: Option<Payload<'_>> = None;
    // (fence char, fence length, is yaml, content start byte, content start line)
    let mut open: Option<(char, usize, bool, usize, usize)> = None;
    for (index, (start, line, end)) in lines_with_offsets(text).enumerate() {
        match open {
            None => {
                if let Some((c, len, is_yaml)) = fence_opening(line) {
                    if is_yaml && found.is_some() {
                        return Err(PayloadError::MultipleFencedBlocks {
                            second_line: index + 1,
                        });
                    }
                    open = Some((c, len, is_yaml, end, index + 1));
                }
            }
            Some((c, len, is_yaml, content_start, content_line)) => {
                let closing = line.chars().take_while(|ch| *ch == c).count() >= len
                    && line.trim_start_matches(c).trim().is_empty();
                if closing {
                    if is_yaml {
                        found = Some(Payload {
                            yaml: &text[content_start..start],
                            line_offset: content_line,
                            encoding: Encoding::FencedBlock,
                        });
                    }
                    open = None;
                }
            }
        }
    }
    // An unclosed yaml fence runs to the end of the file, as in CommonMark.
    if let Some((_, _, true, content_start, content_line)) = open {
        if found.is_some() {
            return Err(PayloadError::MultipleFencedBlocks {
                second_line: content_line,
            });
        }
        found = Some(Payload {
            yaml: &text[content_start..],
            line_offset: content_line,
            encoding: Encoding::FencedBlock,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_yaml() {
        let p = extract("# Task Assignment\nmeta:\n  a: 1\n").unwrap();
        assert_eq!(p.encoding, Encoding::PlainYaml);
        assert_eq!(p.line_offset, 0);
        assert_eq!(p.yaml, "# Task Assignment\nmeta:\n  a: 1\n");
    }

    #[test]
    fn front_matter_then_markdown() {
        let text = "---\nstatus: active\n---\n# Notes\n\nfree text: not yaml: at all\n";
        let p = extract(text).unwrap();
        assert_eq!(p.encoding, Encoding::FrontMatter);
        assert_eq!(p.yaml, "status: active\n");
        assert_eq!(p.line_offset, 1);
    }

    #[test]
    fn document_start_marker_without_end_is_plain_yaml() {
        let p = extract("---\nstatus: active\n").unwrap();
        assert_eq!(p.encoding, Encoding::PlainYaml);
    }

    #[test]
    fn fenced_block() {
        let text =
            "# Progress\n\nSome words.\n\n```yaml\nstatus: done\n```\n\n```ts\nlet x = 1;\n```\n";
        let p = extract(text).unwrap();
        assert_eq!(p.encoding, Encoding::FencedBlock);
        assert_eq!(p.yaml, "status: done\n");
        assert_eq!(p.line_offset, 5);
    }

    #[test]
    fn fenced_block_crlf_and_tilde() {
        let text = "# T\r\n~~~~ yml\r\na: 1\r\n~~~~\r\n";
        let p = extract(text).unwrap();
        assert_eq!(p.yaml, "a: 1\r\n");
        assert_eq!(p.line_offset, 2);
    }

    #[test]
    fn indented_fence_inside_block_scalar_is_not_a_fence() {
        let text = "instruction: |\n  ```yaml\n  a: 1\n  ```\nmeta: {}\n";
        assert_eq!(extract(text).unwrap().encoding, Encoding::PlainYaml);
    }

    #[test]
    fn two_yaml_blocks_are_refused() {
        let text = "```yaml\na: 1\n```\n\n```yml\nb: 2\n```\n";
        assert_eq!(
            extract(text),
            Err(PayloadError::MultipleFencedBlocks { second_line: 5 })
        );
    }

    #[test]
    fn unclosed_fence_runs_to_end() {
        let p = extract("```yaml\na: 1\n").unwrap();
        assert_eq!(p.yaml, "a: 1\n");
    }

    #[test]
    fn bom_is_skipped() {
        let p = extract("\u{feff}a: 1\n").unwrap();
        assert_eq!(p.yaml, "a: 1\n");
    }
}
