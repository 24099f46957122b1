//! Text for people: names that come from the file system or from agents are
//! shown with their control characters escaped, so a directory named with an
//! escape sequence or a newline cannot rewrite the terminal or forge lines.
//! The one helper every human output of the workspace uses.

use std::borrow::Cow;

/// `text` with every control character (C0 but the tab, DEL, C1, and the
/// bidi overrides that reorder what a terminal shows) escaped as `\u{…}`
/// (`\n` and `\r` as such); borrowed when there is none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Every line of `text` escaped, the line breaks kept: for a block of human
/// output assembled from names (`status`, `validate`).
pub fn escape_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        out.push_str(&escape(body));
        out.push_str(newline);
    }
    out
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_control_characters_only() {
        let cases = [
            ("plain-name_1", "plain-name_1"),
            ("a\tb", "a\tb"),
            ("é and 日本", "é and 日本"),
            ("a\nb", "a\\nb"),
            ("\u{1b}[2J", "\\u{1b}[2J"),
            ("x\u{7f}y", "x\\u{7f}y"),
            ("\u{9b}31m", "\\u{9b}31m"),
            ("ab\u{202e}cd", "ab\\u{202e}cd"),
        ];
        for (input, want) in cases {
            assert_eq!(escape(input), want, "{input:?}");
        }
        assert!(matches!(escape("ok"), Cow::Borrowed(_)));
        assert_eq!(escape_lines("a\u{1b}\nb\n"), "a\\u{1b}\nb\n");
    }
}
