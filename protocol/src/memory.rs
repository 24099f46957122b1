// Over 800 lines: one format (Squad Entry Markdown and the legacy decision
// styles) read, rendered, converted and validated over one block model
// whose types (Block, Line, Style) the four share. The split waiting is
// conversion and validation into memory/convert.rs and memory/validate.rs
// (issue 42), after issue 41's changes to this file land.
//! Team memory: Squad Entry Markdown (SEM) entries and the legacy decision styles.
//!
//! A memory file (`decisions.md`, `decisions/inbox/*.md`, an agent's
//! `history.md`, their `-archive` files) is a sequence of [`Block`]s: entries
//! and the text between them (a preamble, section headings). Every block keeps
//! its exact byte span, so [`Document::render`] gives back the source
//! byte for byte: parse → render is the identity by construction.
//!
//! Entry starts (outside code fences only):
//! - SEM: `### <RFC 3339 timestamp with offset>: <type>: <summary>`;
//! - legacy `### <date or date-time>: Title` and undated `### Title`;
//! - legacy `## 2026-02-15: Title` and `## Decision: Title` entries;
//! - legacy `## Title` blocks holding a `**Date:**`, `**Author:**` or `**By:**` line;
//! - legacy `# Decision: Title` blocks (`**By:**`, `**What:**`, `**Why:**`).
//!
//! An entry runs to its `---` terminator (included), a heading of its own
//! level or higher, a `###` entry heading (a `#` block nests undated `###`
//! and `##` sections, but ends at a heading carrying its own date or
//! author), or the end of the file. Deeper headings
//! (`####` in a `###` entry) and fenced code belong to the entry.

use chrono::{DateTime, FixedOffset, NaiveDate};
use std::ops::Range;

pub mod view;

/// A `(2026-03-10T14:13:00Z)` at the end of a legacy title (history files).
fn trailing_date(title: &str) -> Option<&str> {
    let inner = title.trim_end().strip_suffix(')')?;
    let open = inner.rfind('(')?;
    let d = &inner[open + 1..];
    parse_moment(d, None).map(|_| d)
}

/// The entry types of SEM.
pub const TYPES: &[&str] = &["decision", "memory", "note", "directive"];

/// How an entry is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Style {
    /// `### <timestamp>: <type>: <summary>` (SEM).
    Sem,
    /// `### <date>: Title` in one of the real date forms.
    DatedHeading,
    /// `### Title` without a date.
    Undated,
    /// `## Title` with `**Date:**` / `**Author:**` lines.
    TitleBlock,
    /// `# Decision: Title` with `**By:**` / `**What:**` / `**Why:**`.
    DecisionBlock,
}

impl Style {
    /// Whether the entry is in one of the legacy styles.
    pub fn is_legacy(self) -> bool {
        self != Style::Sem
    }
}

/// A `**name:** value` field of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The name as written.
    pub name: String,
    /// The value: the rest of the field line and the lines up to the next
    /// field or the terminator, trimmed.
    pub value: String,
    /// 1-based line of the field.
    pub line: usize,
}

/// One entry, with its exact place in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its style.
    pub style: Style,
    /// Byte range in the source, terminator included.
    pub span: Range<usize>,
    /// 1-based first line (the heading).
    pub line: usize,
    /// 1-based last line.
    pub end_line: usize,
    /// Heading level (number of `#`).
    pub level: usize,
    /// The heading text after the `#`s, trimmed.
    pub heading: String,
    /// Timestamp text from the heading (SEM or legacy date), if any.
    pub header_timestamp: Option<String>,
    /// Type from the SEM heading.
    pub header_type: Option<String>,
    /// Summary (SEM) or title (legacy) from the heading.
    pub title: String,
    /// The fields in order.
    pub fields: Vec<Field>,
    /// Text between the heading and the first field (legacy bodies).
    pub body: String,
    /// Whether the entry ends with a `---` line.
    pub terminated: bool,
}

impl Entry {
    /// The value of a field by case-insensitive name.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.value.as_str())
    }

    /// The entry's source text.
    pub fn text<'a>(&self, src: &'a str) -> &'a str {
        src.get(self.span.clone()).unwrap_or("")
    }

    /// The entry type: the `type` field, the SEM heading, or `decision` for
    /// legacy entries (they were all written as decisions or learnings).
    pub fn kind(&self) -> String {
        self.field("type")
            .map(|s| s.trim().to_ascii_lowercase())
            .or_else(|| self.header_type.clone())
            .unwrap_or_else(|| "decision".to_string())
    }

    /// The timestamp text: the field, else the heading, else `**Date:**`.
    pub fn timestamp_text(&self) -> Option<String> {
        self.field("timestamp")
            .map(|s| s.trim().to_string())
            .or_else(|| self.header_timestamp.clone())
            .or_else(|| {
                self.field("date")
                    .map(|s| s.lines().next().unwrap_or("").trim().to_string())
            })
            .or_else(|| trailing_date(&self.title).map(str::to_string))
    }

    /// The moment of the entry, where one can be read (date-only forms give
    /// midnight UTC).
    pub fn moment(&self) -> Option<DateTime<FixedOffset>> {
        self.timestamp_text().and_then(|t| parse_moment(&t, None))
    }

    /// The author: `author`, else legacy `By` / `Author`.
    pub fn author(&self) -> Option<String> {
        ["author", "by"]
            .iter()
            .find_map(|n| self.field(n))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// The summary: the field, else the heading's summary or title.
    pub fn summary(&self) -> String {
        self.field("summary")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| self.title.clone())
    }

    /// Tags from the comma-separated `tags` field.
    pub fn tags(&self) -> Vec<String> {
        self.field("tags")
            .map(|t| {
                t.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Identity for deduplication: the entry's text with trailing whitespace
    /// of each line and a trailing terminator ignored.
    pub fn identity(&self, src: &str) -> String {
        identity_of(self.text(src))
    }
}

/// The identity of an entry's text (see [`Entry::identity`]).
pub fn identity_of(text: &str) -> String {
    identity_lines(text).collect::<Vec<_>>().join("\n")
}

/// The lines of an entry's identity ([`identity_of`] joins them with
/// `\n`), without building it: for comparing or hashing many entries
/// without a copy of each.
pub fn identity_lines(text: &str) -> impl Iterator<Item = &str> + Clone {
    let keep = text
        .lines()
        .map(str::trim_end)
        .enumerate()
        .filter(|(_, l)| !(l.is_empty() || *l == "---"))
        .last()
        .map_or(0, |(i, _)| i + 1);
    text.lines().map(str::trim_end).take(keep)
}

/// Feeds an entry's identity ([`identity_lines`]) to a hasher in one pass
/// over the text: the lines that may be dropped at its end (blank, `---`)
/// are held back until a line follows them. Equal identities hash equally.
pub fn hash_identity(text: &str, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    // The held lines are one run of the text: where it starts (no list of
    // them to allocate for every entry of a large query).
    let mut held: Option<usize> = None;
    let mut pos = 0;
    for raw in text.split_inclusive('\n') {
        let l = raw.trim_end();
        if l.is_empty() || l == "---" {
            held.get_or_insert(pos);
        } else {
            if let Some(from) = held.take() {
                for x in text.get(from..pos).unwrap_or("").lines() {
                    x.trim_end().hash(h);
                }
            }
            l.hash(h);
        }
        pos += raw.len();
    }
}

/// Whether two entries' texts have the same identity ([`identity_of`]),
/// without building either: byte-identical texts (a duplicate copied
/// whole) are settled by one comparison.
pub fn same_identity(a: &str, b: &str) -> bool {
    a == b || identity_lines(a).eq(identity_lines(b))
}

/// A piece of a memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// Text that belongs to no entry: byte range and 1-based first line.
    Text(Range<usize>, usize),
    /// An entry.
    Entry(Entry),
}

/// A parsed memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The source text.
    pub source: String,
    /// The blocks, covering the source contiguously.
    pub blocks: Vec<Block>,
}

impl Document {
    /// The entries in order.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.blocks.iter().filter_map(|b| match b {
            Block::Entry(e) => Some(e),
            Block::Text(..) => None,
        })
    }

    /// The file again, from its blocks.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.source.len());
        for b in &self.blocks {
            let r = match b {
                Block::Text(r, _) => r.clone(),
                Block::Entry(e) => e.span.clone(),
            };
            out.push_str(self.source.get(r).unwrap_or(""));
        }
        out
    }
}

struct Line<'a> {
    start: usize,
    text: &'a str,
    fenced: bool, // inside a code fence or a fence line itself
}

fn split_lines(src: &str) -> Vec<Line<'_>> {
    scan_lines(src).0
}

/// The lines, and the 1-based line of a fence still open at the end.
fn scan_lines(src: &str) -> (Vec<Line<'_>>, Option<usize>) {
    // Sized once: growing a vector of a large file's lines copied it
    // several times over (page faults were most of a query's cost).
    let mut out = Vec::with_capacity(src.bytes().filter(|&b| b == b'\n').count() + 1);
    let mut opened_at = 0;
    let mut pos = 0;
    let mut fence: Option<(u8, usize)> = None;
    for raw in src.split_inclusive('\n') {
        let text = raw.trim_end_matches(['\n', '\r']);
        let t = text.trim_start_matches(' ');
        let indent = text.len() - t.len();
        let mut fenced = fence.is_some();
        if indent < 4 {
            for ch in [b'`', b'~'] {
                let n = t.bytes().take_while(|&b| b == ch).count();
                if n >= 3 {
                    match fence {
                        // A backtick fence's info string has no backtick.
                        None if ch == b'~' || !t[n..].contains('`') => {
                            fence = Some((ch, n));
                            fenced = true;
                            opened_at = out.len() + 1;
                        }
                        Some((c, m)) if c == ch && n >= m && t[n..].trim().is_empty() => {
                            fence = None;
                            fenced = true;
                        }
                        _ => {}
                    }
                }
            }
        }
        out.push(Line {
            start: pos,
            text,
            fenced,
        });
        pos += raw.len();
    }
    (out, fence.map(|_| opened_at))
}

/// The 1-based line of a code fence that never closes, if any: everything
/// after it is code, so the entries below it cannot be seen.
pub fn unclosed_fence(src: &str) -> Option<usize> {
    scan_lines(src).1
}

/// `(level, text)` of an ATX heading line.
fn heading(line: &str) -> Option<(usize, &str)> {
    let t = line.trim_start_matches(' ');
    if line.len() - t.len() > 3 {
        return None;
    }
    let n = t.bytes().take_while(|&b| b == b'#').count();
    if n == 0 || n > 6 {
        return None;
    }
    let rest = &t[n..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    Some((n, rest.trim()))
}

/// `(name, rest)` of a `**name:** rest` field line.
pub fn field_line(line: &str) -> Option<(&str, &str)> {
    let t = line.trim_start();
    let t = t.strip_prefix("- ").unwrap_or(t);
    let rest = t.strip_prefix("**")?;
    let close = rest.find(":**")?;
    let name = &rest[..close];
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ' ' || c == '-');
    ok.then(|| (name, rest[close + 3..].trim()))
}

fn is_terminator(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Splits a SEM heading `<ts>: <type>: <summary>`.
pub fn sem_heading(text: &str) -> Option<(&str, &str, &str)> {
    let (ts, rest) = split_timestamp(text)?;
    if !ts.contains('T') || parse_moment(ts, None).is_none() || !has_offset(ts) {
        return None;
    }
    let rest = rest.trim_start();
    let colon = rest.find(':')?;
    let ty = &rest[..colon];
    if !TYPES.contains(&ty) {
        return None;
    }
    let summary = rest[colon + 1..].trim();
    (!summary.is_empty()).then_some((ts, ty, summary))
}

/// Splits a heading shaped like SEM, `<date>T<time…>: <type>: <summary>`,
/// whether or not its timestamp is a real moment: such a heading was meant
/// as SEM, so a bad timestamp in it is an error, not a legacy title.
pub fn sem_shape(text: &str) -> Option<(&str, &str, &str)> {
    let b = text.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let date = digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10);
    if !date || b.get(10) != Some(&b'T') {
        return None;
    }
    let end = text.find(": ")?;
    let ts = &text[..end];
    if !ts[11..]
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b':' | b'-' | b'+' | b'.' | b'Z'))
    {
        return None;
    }
    let rest = &text[end + 2..];
    let colon = rest.find(':')?;
    let ty = &rest[..colon];
    let summary = rest[colon + 1..].trim();
    (TYPES.contains(&ty) && !summary.is_empty()).then_some((ts, ty, summary))
}

fn has_offset(ts: &str) -> bool {
    let tail = ts.rsplit('T').next().unwrap_or("");
    tail.ends_with('Z') || tail.contains('+') || tail.contains('-')
}

/// Splits `<date-ish>: rest` when the heading starts with a date; the
/// timestamp is the longest prefix of date characters before a `": "`.
fn split_timestamp(text: &str) -> Option<(&str, &str)> {
    let b = text.as_bytes();
    if b.len() < 10 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return None;
    }
    NaiveDate::parse_from_str(text.get(..10)?, "%Y-%m-%d").ok()?;
    // Find the `: ` (or `:` at the end) that ends the date: a colon followed
    // by a space or the end; colons inside times are followed by digits.
    let mut i = 10;
    while i < b.len() {
        if b[i] == b':' && (i + 1 == b.len() || b[i + 1] == b' ') {
            return Some((&text[..i], &text[i + 1..]));
        }
        if !(b[i].is_ascii_alphanumeric() || matches!(b[i], b':' | b'-' | b'+' | b'.')) {
            return None;
        }
        i += 1;
    }
    None
}

/// Reads a timestamp in SEM or one of the legacy forms. Date-only forms and
/// forms without an offset take `tz` (default UTC).
pub fn parse_moment(text: &str, tz: Option<FixedOffset>) -> Option<DateTime<FixedOffset>> {
    let t = text.trim();
    // SEM's own layout, read directly (format-string parsing was most of
    // the cost of dating every entry); anything else goes the long way.
    fixed_layout(t).or_else(|| general_moment(t, tz))
}

/// [`parse_moment`] without the fast path: every form, by chrono's format
/// strings (`t` trimmed). The fast path must agree with it on every text it
/// accepts (property-tested below).
fn general_moment(t: &str, tz: Option<FixedOffset>) -> Option<DateTime<FixedOffset>> {
    let utc = FixedOffset::east_opt(0)?;
    let tz = tz.unwrap_or(utc);
    for f in [
        "%Y-%m-%dT%H:%M:%S%z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M%z",
    ] {
        if let Ok(d) = DateTime::parse_from_str(t, f) {
            return Some(d);
        }
    }
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(d);
    }
    // `2026-03-27T21-42-00Z`, `2026-03-27T21-42`: dashes for colons.
    let fixed;
    let t = if let Some((d, time)) = t.split_once('T') {
        let z = time.ends_with('Z');
        let core = time.trim_end_matches('Z');
        if core.bytes().all(|c| c.is_ascii_digit() || c == b'-') {
            fixed = format!("{d}T{}{}", core.replace('-', ":"), if z { "Z" } else { "" });
            fixed.as_str()
        } else {
            t
        }
    } else {
        t
    };
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(d);
    }
    let naive = chrono::NaiveDateTime::parse_from_str(t.trim_end_matches('Z'), "%Y-%m-%dT%H:%M:%S")
        .or_else(|_| {
            chrono::NaiveDateTime::parse_from_str(t.trim_end_matches('Z'), "%Y-%m-%dT%H:%M")
        })
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(t.get(..10)?, "%Y-%m-%d")
                .ok()
                .filter(|_| t.len() == 10)
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })?;
    let off = if t.ends_with('Z') { utc } else { tz };
    naive.and_local_timezone(off).single()
}

/// `YYYY-MM-DDTHH:MM:SS[.f](Z|±HH:MM|±HHMM)` read byte by byte; `None` for
/// any other text (including impossible values and leap seconds, which the
/// general path judges). Public for the other readers of canonical
/// timestamps (the lock records' fast path in the supervisor).
pub fn fixed_layout(t: &str) -> Option<DateTime<FixedOffset>> {
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0u32, |n, c| n * 10 + u32::from(c - b'0')))
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut i = 19;
    let mut nanos = 0u32;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = i - start;
        if digits == 0 || digits > 9 {
            return None;
        }
        nanos = num(start..i)? * 10u32.pow(u32::try_from(9 - digits).ok()?);
    }
    let offset = match &b[i..] {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let (oh, om) = match rest {
                [_, _, b':', _, _] => (num(i + 1..i + 3)?, num(i + 4..i + 6)?),
                [_, _, _, _] => (num(i + 1..i + 3)?, num(i + 3..i + 5)?),
                _ => return None,
            };
            if oh >= 24 || om >= 60 {
                return None;
            }
            let secs = i32::try_from(oh * 3600 + om * 60).ok()?;
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return None,
    };
    let naive = NaiveDate::from_ymd_opt(i32::try_from(y).ok()?, mo, d)?
        .and_hms_nano_opt(h, mi, s, nanos)
        .filter(|_| s < 60)?;
    naive
        .and_local_timezone(FixedOffset::east_opt(offset)?)
        .single()
}

/// Whether a field names an entry's date or author (`**Date:**`,
/// `**Author:**`, `**By:**`): a heading followed by one carries its own.
fn dates_or_signs(name: &str) -> bool {
    ["date", "author", "by"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

/// The title of a `Decision: Title` heading text (case-insensitive, as
/// SquadUI reads it), trimmed.
fn decision_title(text: &str) -> Option<&str> {
    let head = text.get(..9)?;
    head.eq_ignore_ascii_case("decision:")
        .then(|| text[9..].trim())
}

/// Whether the entry heading at `idx` carries its own date or author: a
/// dated heading, or a `**Date:**`/`**Author:**`/`**By:**` line before the
/// next heading. Such a heading ends a `#` block above it (whose author is
/// not its author).
fn carries_own(lines: &[Line<'_>], idx: usize, style: Style) -> bool {
    matches!(style, Style::Sem | Style::DatedHeading | Style::TitleBlock)
        || signed_or_dated(lines, idx)
}

/// Whether a `**Date:**`, `**Author:**` or `**By:**` line follows the
/// heading at `idx` before any other heading or a `---`.
fn signed_or_dated(lines: &[Line<'_>], idx: usize) -> bool {
    for m in &lines[idx + 1..] {
        if m.fenced {
            continue;
        }
        if is_terminator(m.text) || heading(m.text).is_some() {
            break;
        }
        if field_line(m.text).is_some_and(|(name, _)| dates_or_signs(name)) {
            return true;
        }
    }
    false
}

/// What kind of entry a heading at `idx` starts, if any.
fn entry_start(lines: &[Line<'_>], idx: usize) -> Option<(Style, usize)> {
    let l = &lines[idx];
    if l.fenced {
        return None;
    }
    let (level, text) = heading(l.text)?;
    // A `# Title` or `## Title` block is an entry when its own Date/Author
    // lines come before any heading (Squad agents' inbox files are
    // `# Title`, `**Author:**`, `**Date:**`, `## Decision`, `## Impact`).
    let title_block =
        |level: usize| signed_or_dated(lines, idx).then_some((Style::TitleBlock, level));
    match level {
        1 | 2 => match decision_title(text) {
            // `# Decision: Title` and, as SquadUI reads them, `## Decision:`.
            Some(t) => (!t.is_empty()).then_some((Style::DecisionBlock, level)),
            // `## 2026-02-15: Title` (By/What/Why below), as `###` ones.
            None if level == 2 && split_timestamp(text).is_some() => Some((Style::DatedHeading, 2)),
            None if !text.is_empty() => title_block(level),
            None => None,
        },
        3 if !text.is_empty() => {
            if sem_heading(text).is_some() || sem_shape(text).is_some() {
                Some((Style::Sem, 3))
            } else if split_timestamp(text).is_some() {
                Some((Style::DatedHeading, 3))
            } else {
                Some((Style::Undated, 3))
            }
        }
        _ => None,
    }
}

/// Where an entry lies in the lines of its file, before its fields are read.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// Index of the heading line.
    first: usize,
    /// Index of the line after the entry (terminator included).
    end: usize,
    style: Style,
    level: usize,
    terminated: bool,
}

/// A block of a file as found by [`blocks_of`]: loose text (byte range,
/// 1-based first line) or an entry's bounds.
enum RawBlock {
    Text(Range<usize>, usize),
    Entry(Bounds),
}

/// The blocks of a file's lines, in order, covering it: the one reading of
/// entry boundaries that [`parse`] and [`view::parse`] share.
fn blocks_of(src_len: usize, lines: &[Line<'_>]) -> Vec<RawBlock> {
    let mut blocks = Vec::new();
    let mut text_start: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < lines.len() {
        let Some((style, level)) = entry_start(lines, i) else {
            if text_start.is_none() {
                text_start = Some((lines[i].start, i + 1));
            }
            i += 1;
            continue;
        };
        if let Some((s, line)) = text_start.take() {
            blocks.push(RawBlock::Text(s..lines[i].start, line));
        }
        // Find the end.
        let mut j = i + 1;
        let mut terminated = false;
        while j < lines.len() {
            let m = &lines[j];
            if !m.fenced {
                if is_terminator(m.text) {
                    terminated = true;
                    j += 1;
                    break;
                }
                if let Some((n, _)) = heading(m.text)
                    && (n <= level
                        || entry_start(lines, j).is_some_and(|(st, el)| {
                            // A `###` entry heading ends `###` and `## Title`
                            // entries; only `#` blocks nest them, and even
                            // those end at a heading with its own date or
                            // author (that entry is someone else's).
                            el <= level || level >= 2 || carries_own(lines, j, st)
                        }))
                {
                    break;
                }
            }
            j += 1;
        }
        blocks.push(RawBlock::Entry(Bounds {
            first: i,
            end: j,
            style,
            level,
            terminated,
        }));
        i = j;
    }
    if let Some((s, line)) = text_start {
        blocks.push(RawBlock::Text(s..src_len, line));
    }
    blocks
}

/// Parses a memory file. Never fails: what is not an entry is text.
///
/// Every entry owns its strings; a reader that only looks (a query) takes
/// [`view::parse`], which borrows them from `src`.
pub fn parse(src: &str) -> Document {
    let lines = split_lines(src);
    let blocks = blocks_of(src.len(), &lines)
        .into_iter()
        .map(|b| match b {
            RawBlock::Text(r, line) => Block::Text(r, line),
            RawBlock::Entry(b) => Block::Entry(build_entry(
                src,
                &lines,
                b.first,
                b.end,
                b.style,
                b.level,
                b.terminated,
            )),
        })
        .collect();
    Document {
        source: src.to_string(),
        blocks,
    }
}

fn build_entry(
    src: &str,
    lines: &[Line<'_>],
    first: usize,
    end: usize,
    style: Style,
    level: usize,
    terminated: bool,
) -> Entry {
    let (_, text) = heading(lines[first].text).unwrap_or((level, ""));
    let text = text.to_string();
    let (header_timestamp, header_type, title) = match style {
        Style::Sem => match sem_heading(&text).or_else(|| sem_shape(&text)) {
            Some((ts, ty, s)) => (Some(ts.to_string()), Some(ty.to_string()), s.to_string()),
            None => (None, None, text.clone()),
        },
        Style::DatedHeading => match split_timestamp(&text) {
            Some((ts, rest)) => (Some(ts.to_string()), None, rest.trim().to_string()),
            None => (None, None, text.clone()),
        },
        Style::DecisionBlock => (
            None,
            None,
            decision_title(&text).unwrap_or(&text).to_string(),
        ),
        _ => (None, None, text.clone()),
    };
    let body_end = if terminated { end - 1 } else { end };
    let mut fields: Vec<Field> = Vec::new();
    let mut cur: Option<(String, Vec<&str>, usize)> = None;
    let mut body: Vec<&str> = Vec::new();
    for (k, l) in lines.iter().enumerate().take(body_end).skip(first + 1) {
        let f = if l.fenced { None } else { field_line(l.text) };
        match f {
            Some((name, rest)) => {
                if let Some((n, v, line)) = cur.take() {
                    fields.push(Field {
                        name: n,
                        value: v.join("\n").trim().to_string(),
                        line,
                    });
                }
                cur = Some((name.to_string(), vec![rest], k + 1));
            }
            None => match &mut cur {
                Some((_, v, _)) => v.push(l.text),
                None => body.push(l.text),
            },
        }
    }
    if let Some((n, v, line)) = cur {
        fields.push(Field {
            name: n,
            value: v.join("\n").trim().to_string(),
            line,
        });
    }
    let span_end = lines.get(end).map_or(src.len(), |l| l.start);
    Entry {
        style,
        span: lines[first].start..span_end,
        line: first + 1,
        end_line: end.max(first + 1),
        level,
        heading: text,
        header_timestamp,
        header_type,
        title,
        fields,
        body: body.join("\n").trim().to_string(),
        terminated,
    }
}

/// The words of a text (whitespace-separated), for loss checks.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
}

/// Words of `original` missing from `output` (as a multiset).
pub fn missing_words(original: &str, output: &str) -> Vec<String> {
    let mut have: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for w in words(output) {
        *have.entry(w).or_default() += 1;
    }
    let mut missing = Vec::new();
    for w in words(original) {
        match have.get_mut(w) {
            Some(n) if *n > 0 => *n -= 1,
            _ => missing.push(w.to_string()),
        }
    }
    missing
}

/// Alphanumeric words of a text, the unit of the loss check: punctuation and
/// markup (`**`, `#`, `:`) may move, words may not disappear.
/// Runs of digits and runs of letters are separate words, so that
/// `2026-03-25` and `2026-03-25T00:00:00+0000` share theirs.
pub fn content_words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start: Option<(usize, bool)> = None;
    for (i, c) in text.char_indices() {
        let class = c.is_alphanumeric().then(|| c.is_numeric());
        match (start, class) {
            (Some((s, d)), Some(cd)) if d != cd => {
                out.push(&text[s..i]);
                start = Some((i, cd));
            }
            (Some(_), Some(_)) => {}
            (Some((s, _)), None) => {
                out.push(&text[s..i]);
                start = None;
            }
            (None, Some(cd)) => start = Some((i, cd)),
            (None, None) => {}
        }
    }
    if let Some((s, _)) = start {
        out.push(&text[s..]);
    }
    out
}

/// Multiset difference: words of `original` not in `output`.
pub fn lost_words(original: &str, output: &str) -> Vec<String> {
    // Case-insensitive: `# Decision: X` becomes `decision: X`.
    let mut have: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for w in content_words(output) {
        *have.entry(w.to_lowercase()).or_default() += 1;
    }
    let mut missing = Vec::new();
    for w in content_words(original) {
        match have.get_mut(&w.to_lowercase()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => missing.push(w.to_string()),
        }
    }
    missing
}

/// The outcome for one entry of a conversion.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Rewritten as SEM.
    Converted,
    /// Already SEM: unchanged.
    KeptAsIs,
    /// Left unchanged: the reason says what a human must supply.
    NeedsReview(String),
}

/// One line of a conversion report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConvertedEntry {
    /// 1-based line of the entry in the original.
    pub line: usize,
    /// Its title.
    pub title: String,
    /// What happened.
    pub outcome: Outcome,
}

/// A whole-file conversion, checked.
#[derive(Debug, Clone)]
pub struct Conversion {
    /// The new text.
    pub output: String,
    /// Per-entry report.
    pub entries: Vec<ConvertedEntry>,
    /// Words of original entries missing from the output (empty, or the
    /// conversion must not be written).
    pub lost: Vec<String>,
}

/// Field labels a conversion renames (their words are labels, not content).
const MAPPED: &[&str] = &["by", "author", "what", "why", "date", "timestamp"];

/// Converts one legacy entry to SEM text, or says why it cannot.
pub fn convert_entry(
    src: &str,
    e: &Entry,
    tz: FixedOffset,
    default_author: Option<&str>,
) -> Result<String, String> {
    let ts_text = e
        .timestamp_text()
        .ok_or_else(|| "no date: add a `**Date:**` line or a dated heading".to_string())?;
    let moment = parse_moment(&ts_text, Some(tz))
        .ok_or_else(|| format!("the date `{ts_text}` cannot be read"))?;
    let author = e
        .author()
        .or_else(|| e.field("reviewer").map(|s| s.trim().to_string()))
        .or_else(|| default_author.map(str::to_string))
        .ok_or_else(|| "no author: add a `**By:**` line".to_string())?;
    let author = author.lines().next().unwrap_or("").trim().to_string();
    // The heading's title is the summary; an entry's own `**Summary:**` text
    // (real legacy entries have one) stays in the details.
    let summary = match one_line(&e.title) {
        t if t.is_empty() => one_line(&e.summary()),
        t => t,
    };
    if summary.is_empty() {
        return Err("no title to use as summary".into());
    }
    // A summary has at most 120 characters: a longer title is cut at a word
    // and kept whole at the top of the details.
    let (summary, long_title) = match shorten(&summary, SUMMARY_MAX) {
        Some(short) => (short, Some(summary)),
        None => (summary, None),
    };
    // A `Z` stays a `Z` (its letter is a word of the entry's text).
    let zulu = ts_text.trim_end().ends_with('Z') && moment.offset().local_minus_utc() == 0;
    let ts = moment
        .format(if zulu {
            "%Y-%m-%dT%H:%M:%SZ"
        } else {
            "%Y-%m-%dT%H:%M:%S%z"
        })
        .to_string();
    let kind = e.kind();
    let kind = if TYPES.contains(&kind.as_str()) {
        kind
    } else {
        "decision".into()
    };
    let mut out = format!(
        "### {ts}: {kind}: {summary}\n\n**type:** {kind}\n**timestamp:** {ts}\n**Author:** {author}\n**summary:** {summary}\n"
    );
    // Everything else of the entry goes into details, in source order, with
    // headings demoted under the entry and rules spelled so they do not end it.
    let mut details = long_title.map_or_else(String::new, |t| format!("Title: {t}\n\n"));
    let mut rationale: Option<String> = None;
    let body_end = if e.terminated {
        // Drop the terminator line: the SEM text ends with its own.
        let t = e.text(src);
        let trimmed = t.trim_end_matches(['\n', '\r']);
        e.span.start + trimmed.rfind('\n').map_or(0, |p| p + 1)
    } else {
        e.span.end
    };
    let inner = src.get(e.span.start..body_end).unwrap_or("");
    let mut skip_field = false;
    let mut carried_once = std::collections::HashSet::new();
    for (k, l) in split_lines(inner).iter().enumerate() {
        let line = l.text;
        if k == 0 {
            continue; // the heading
        }
        if l.fenced {
            match &mut rationale {
                Some(r) if skip_field => {
                    r.push('\n');
                    r.push_str(line);
                }
                _ => {
                    details.push_str(line);
                    details.push('\n');
                }
            }
            continue;
        }
        if let Some((name, rest)) = field_line(line) {
            let lname = name.to_ascii_lowercase();
            skip_field = false;
            match lname.as_str() {
                "by" | "author" | "date" | "timestamp" | "type" | "summary" => {
                    // Carried in the header fields; extra words stay in details.
                    let carried = match lname.as_str() {
                        "by" | "author" => author.as_str(),
                        "summary" => summary.as_str(),
                        _ => "",
                    };
                    // A field carried once: a second `**Author:**` line
                    // (real entries repeat them) stays in the details.
                    let group = match lname.as_str() {
                        "by" | "author" => "author",
                        "date" | "timestamp" => "date",
                        other => other,
                    };
                    let first = carried_once.insert(group.to_string());
                    if !first || !lost_words(rest, &format!("{carried} {ts_text} {ts}")).is_empty()
                    {
                        // Plain, not `**name:**`: a SEM field name inside the
                        // details would start a second field of that name.
                        details.push_str(name);
                        details.push_str(": ");
                        details.push_str(rest);
                        details.push('\n');
                    }
                    continue;
                }
                "what" | "details" => {
                    details.push_str(rest);
                    details.push('\n');
                    continue;
                }
                "why" | "rationale" => {
                    rationale = Some(rest.to_string());
                    skip_field = true;
                    continue;
                }
                _ => {
                    // Text of the entry, not a field of the SEM entry: a
                    // `**Scope:** Cross-cutting …` line kept as a field
                    // would be an invalid `scope`.
                    details.push_str(&escape_field(line));
                    details.push('\n');
                    continue;
                }
            }
        }
        if skip_field {
            if let Some(r) = &mut rationale {
                r.push('\n');
                r.push_str(line);
            }
            continue;
        }
        if let Some((n, h)) = heading(line) {
            let n = n.max(4);
            details.push_str(&"#".repeat(n.min(6)));
            details.push(' ');
            details.push_str(h);
            details.push('\n');
            continue;
        }
        if is_terminator(line) {
            details.push_str("***\n");
            continue;
        }
        details.push_str(line);
        details.push('\n');
    }
    let details = details.trim();
    if !details.is_empty() {
        out.push_str("\n**details:**\n\n");
        out.push_str(details);
        out.push('\n');
    }
    if let Some(r) = rationale {
        out.push_str("\n**rationale:** ");
        out.push_str(r.trim());
        out.push('\n');
    }
    out.push_str("\n---\n");
    Ok(out)
}

/// The most characters a summary may have (`memory-summary-too-long`).
pub const SUMMARY_MAX: usize = 120;

/// `text` cut after a word to at most `max` characters, `…` included, when
/// it is longer.
fn shorten(text: &str, max: usize) -> Option<String> {
    if text.chars().count() <= max {
        return None;
    }
    let mut out = String::new();
    for w in text.split_whitespace() {
        let len = out.chars().count() + usize::from(!out.is_empty()) + w.chars().count();
        if len + 1 > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    if out.is_empty() {
        out = text.chars().take(max - 1).collect();
    }
    out.push('…');
    Some(out)
}

/// A `**Name:** text` line as `**Name**: text`: the same words and look,
/// no longer a field line ([`field_line`]).
fn escape_field(line: &str) -> String {
    let Some(start) = line.find("**").map(|i| i + 2) else {
        return line.to_string();
    };
    match line[start..].find(":**") {
        Some(k) => format!("{}**:{}", &line[..start + k], &line[start + k + 3..]),
        None => line.to_string(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Converts every legacy entry of a file to SEM, keeping all other text, and
/// checks the result: every word of every original entry must be in the
/// entry that replaces it, and the output must parse into the same number of
/// entries.
///
/// `default_author` is used for entries that name none (an agent's
/// `history.md` is written by that agent).
pub fn convert(src: &str, tz: FixedOffset, default_author: Option<&str>) -> Conversion {
    let doc = parse(src);
    let mut output = String::with_capacity(src.len() + src.len() / 4);
    let mut entries = Vec::new();
    let mut pairs: Vec<(String, usize)> = Vec::new(); // original text, index in output entries
    let mut n = 0;
    for b in &doc.blocks {
        match b {
            Block::Text(r, _) => output.push_str(src.get(r.clone()).unwrap_or("")),
            Block::Entry(e) => {
                let text = e.text(src);
                let outcome = if e.style.is_legacy() {
                    // An entry that would lose a word is left as it was.
                    let checked = convert_entry(src, e, tz, default_author).and_then(|sem| {
                        let lost = lost_words(&content_of(text), &sem);
                        let one = parse(&sem).entries().count() == 1;
                        match (lost.is_empty(), one, invalid(&sem)) {
                            (true, true, None) => Ok(sem),
                            (false, _, _) => Err(format!(
                                "kept as it was: converting it would lose {}",
                                lost.join(" ")
                            )),
                            (true, false, _) => {
                                Err("kept as it was: it would not read back as one entry".into())
                            }
                            (true, true, Some(why)) => Err(format!(
                                "kept as it was: it would not be a valid SEM entry ({why})"
                            )),
                        }
                    });
                    match checked {
                        Ok(sem) => {
                            output.push_str(&sem);
                            // Keep the blank lines that followed the entry.
                            let trailing =
                                text.len() - text.trim_end_matches(['\n', '\r', ' ']).len();
                            if !e.terminated && trailing > 1 {
                                output.push('\n');
                            }
                            Outcome::Converted
                        }
                        Err(why) => {
                            output.push_str(text);
                            Outcome::NeedsReview(why)
                        }
                    }
                } else {
                    output.push_str(text);
                    Outcome::KeptAsIs
                };
                pairs.push((content_of(text), n));
                n += 1;
                entries.push(ConvertedEntry {
                    line: e.line,
                    title: e.title.clone(),
                    outcome,
                });
            }
        }
    }
    let out_doc = parse(&output);
    let out_entries: Vec<&Entry> = out_doc.entries().collect();
    let mut lost = Vec::new();
    if out_entries.len() != pairs.len() {
        lost.push(format!(
            "<entry count changed: {} → {}>",
            pairs.len(),
            out_entries.len()
        ));
    }
    for (orig, i) in &pairs {
        let got = out_entries.get(*i).map_or("", |e| e.text(&output));
        lost.extend(lost_words(orig, got));
    }
    lost.sort();
    lost.dedup();
    Conversion {
        output,
        entries,
        lost,
    }
}

/// Why a converted entry would not validate, if it would not: a legacy
/// entry (never checked) must not become an error (references aside: they
/// are checked across files, and convert writes none of its own).
fn invalid(sem: &str) -> Option<String> {
    let epoch = DateTime::from_timestamp(0, 0)?.fixed_offset();
    let errors: Vec<String> = validate(
        std::path::Path::new(""),
        &parse(sem),
        &Known::default(),
        epoch,
        false,
    )
    .into_iter()
    .filter(|d| d.is_error() && d.rule != crate::Rule::MemoryUnresolvedReference)
    .map(|d| d.message)
    .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// An entry's text without the labels a conversion renames.
fn content_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match field_line(line) {
            Some((name, rest)) if MAPPED.contains(&name.to_ascii_lowercase().as_str()) => {
                out.push_str(rest);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Entry moments known across the files validated together, so that
/// `supersedes` and `related` references can be resolved.
#[derive(Debug, Default, Clone)]
pub struct Known {
    moments: std::collections::HashSet<i64>,
}

impl Known {
    /// Adds every entry of a document.
    pub fn add(&mut self, doc: &Document) {
        for e in doc.entries() {
            if let Some(m) = e.moment() {
                self.moments.insert(m.timestamp());
            }
        }
    }

    /// Whether an entry has this moment.
    pub fn has(&self, ts: &str) -> bool {
        parse_moment(ts, None).is_some_and(|m| self.moments.contains(&m.timestamp()))
    }
}

/// Whether a scope follows `team | project | agent:{name} | skill:{name}`.
pub fn valid_scope(s: &str) -> bool {
    let s = s.trim();
    if s == "team" || s == "project" {
        return true;
    }
    ["agent:", "skill:"].iter().any(|p| {
        s.strip_prefix(p).is_some_and(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
        })
    })
}

/// What is wrong with a timestamp that is not valid, in a few words.
pub fn timestamp_problem(s: &str) -> &'static str {
    let s = s.trim();
    let Some((date, time)) = s.split_once('T') else {
        return "no time part";
    };
    if NaiveDate::parse_from_str(date, "%Y-%m-%d").is_err() {
        return "no such date";
    }
    let core = time.trim_end_matches('Z');
    let (clock, offset) = match core.rfind(['+', '-']) {
        Some(i) => (&core[..i], Some(&core[i + 1..])),
        None => (core, None),
    };
    if chrono::NaiveTime::parse_from_str(clock, "%H:%M:%S%.f")
        .or_else(|_| chrono::NaiveTime::parse_from_str(clock, "%H:%M"))
        .is_err()
    {
        return "no such time of day";
    }
    match offset {
        None if !time.ends_with('Z') => "no offset",
        Some(o) => {
            let d: String = o.chars().filter(char::is_ascii_digit).collect();
            let ok = d.len() == 4
                && d[..2].parse::<u32>().is_ok_and(|h| h < 24)
                && d[2..].parse::<u32>().is_ok_and(|m| m < 60);
            if ok {
                "unreadable"
            } else {
                "offset out of range"
            }
        }
        None => "unreadable",
    }
}

/// Whether a timestamp is ISO 8601 with an explicit offset.
pub fn valid_timestamp(s: &str) -> bool {
    let s = s.trim();
    s.contains('T') && has_offset(s) && parse_moment(s, None).is_some()
}

/// Validates the entries of one memory file. `legacy` adds a notice per
/// legacy entry; `now` judges `expires`.
pub fn validate(
    path: &std::path::Path,
    doc: &Document,
    known: &Known,
    now: DateTime<FixedOffset>,
    legacy: bool,
) -> Vec<crate::Diagnostic> {
    use crate::{Diagnostic, Location, Rule};
    let mut out = Vec::new();
    let at = |line: usize| {
        Some(Location {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: 1,
        })
    };
    if let Some(line) = unclosed_fence(&doc.source) {
        out.push(
            Diagnostic::new(
                path,
                Rule::MemoryUnclosedFence,
                "this code fence never closes: every entry below it is read as code",
                "close the fence (the same ``` or ~~~ on a line of its own) where its code ends",
            )
            .at(at(line)),
        );
    }
    for e in doc.entries() {
        if e.style.is_legacy() {
            if legacy {
                out.push(
                    Diagnostic::new(
                        path,
                        Rule::MemoryLegacyEntry,
                        format!("`{}` is a legacy entry ({:?})", e.title, e.style),
                        format!("run `squadctl memory convert {}`", path.display()),
                    )
                    .at(at(e.line)),
                );
            }
            continue;
        }
        let line_of = |name: &str| line_of_field(e, name);
        for name in ["type", "timestamp", "author", "summary"] {
            if e.field(name).is_none_or(|v| v.trim().is_empty()) {
                out.push(
                    Diagnostic::new(
                        path,
                        Rule::MemoryMissingField,
                        format!("`{}`: the `{name}` field is missing", e.title),
                        format!("add a `**{name}:** …` line after the heading"),
                    )
                    .at(at(e.line)),
                );
            }
        }
        if let Some(t) = e.field("type") {
            let t = t.trim();
            if !TYPES.contains(&t) {
                out.push(
                    Diagnostic::new(
                        path,
                        Rule::MemoryBadType,
                        format!("type `{t}` is not one of decision, memory, note, directive"),
                        "use decision, memory, note or directive",
                    )
                    .at(at(line_of("type"))),
                );
            } else if e.header_type.as_deref().is_some_and(|h| h != t) {
                out.push(mismatch(path, e, "type", line_of("type")));
            }
        }
        out.extend(timestamp_findings(path, doc, e));
        if let Some(s) = e.field("summary") {
            let n = s.trim().chars().count();
            if n > SUMMARY_MAX {
                out.push(
                    Diagnostic::new(
                        path,
                        Rule::MemorySummaryTooLong,
                        format!("the summary has {n} characters"),
                        "shorten it to one sentence of at most 120 characters; move the rest to details",
                    )
                    .at(at(line_of("summary"))),
                );
            }
            if e.style == Style::Sem && one_line(s) != e.title {
                out.push(mismatch(path, e, "summary", line_of("summary")));
            }
        }
        if let Some(s) = e.field("scope")
            && !valid_scope(s)
        {
            out.push(
                Diagnostic::new(
                    path,
                    Rule::MemoryBadScope,
                    format!(
                        "scope `{}` is not team, project, agent:{{name}} or skill:{{name}}",
                        s.trim()
                    ),
                    "e.g. `team` or `agent:Hockney`",
                )
                .at(at(line_of("scope"))),
            );
        }
        out.extend(reference_findings(path, e, known));
        if let Some(x) = e.field("expires")
            && let Some(m) = parse_moment(x, None)
            && m < now
        {
            out.push(
                Diagnostic::new(
                    path,
                    Rule::MemoryExpired,
                    format!("`{}` expired at {}", e.title, x.trim()),
                    "review it: supersede it with a new entry or extend `expires`",
                )
                .at(at(line_of("expires"))),
            );
        }
    }
    out
}

/// The line of an entry's field `name` (the heading's when it has none).
fn line_of_field(e: &Entry, name: &str) -> usize {
    e.fields
        .iter()
        .find(|f| f.name.eq_ignore_ascii_case(name))
        .map_or(e.line, |f| f.line)
}

/// The timestamps of one entry (heading and field) checked: each valid,
/// and the two the same moment.
fn timestamp_findings(path: &std::path::Path, doc: &Document, e: &Entry) -> Vec<crate::Diagnostic> {
    use crate::{Diagnostic, Location, Rule};
    let mut out = Vec::new();
    let line_of = |name: &str| line_of_field(e, name);
    // The column of `needle` in 1-based line `line` of the source.
    let col_of = |line: usize, needle: &str| {
        let text = doc.source.lines().nth(line.saturating_sub(1)).unwrap_or("");
        let col = text
            .find(needle)
            .map_or(1, |i| text[..i].chars().count() + 1);
        Some(Location {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(col).unwrap_or(u32::MAX),
        })
    };
    let bad_ts = |ts: &str, loc| {
        Diagnostic::new(
            path,
            Rule::MemoryBadTimestamp,
            format!(
                "timestamp `{ts}` is not ISO 8601 with an offset ({})",
                timestamp_problem(ts)
            ),
            "write e.g. 2026-02-15T14:32:15-0800 (`date +%Y-%m-%dT%H:%M:%S%z`)",
        )
        .at(loc)
    };
    let heading_bad = e
        .header_timestamp
        .as_deref()
        .filter(|h| !valid_timestamp(h));
    if let Some(h) = heading_bad {
        out.push(bad_ts(h, col_of(e.line, h)));
    }
    if let Some(ts) = e.field("timestamp") {
        let ts = ts.trim();
        if !valid_timestamp(ts) {
            if heading_bad != Some(ts) {
                let line = line_of("timestamp");
                out.push(bad_ts(ts, col_of(line, ts)));
            }
        } else if heading_bad.is_some() {
        } else if let Some(h) = &e.header_timestamp
            && parse_moment(h, None) != parse_moment(ts, None)
        {
            out.push(mismatch(path, e, "timestamp", line_of("timestamp")));
        }
    }
    out
}

/// The references of one entry (`supersedes`, `related`) that name no
/// entry.
fn reference_findings(path: &std::path::Path, e: &Entry, known: &Known) -> Vec<crate::Diagnostic> {
    use crate::{Diagnostic, Location, Rule};
    let mut out = Vec::new();
    let line_of = |name: &str| line_of_field(e, name);
    let at = |line: usize| {
        Some(Location {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: 1,
        })
    };
    let mut refs: Vec<(String, usize)> = Vec::new();
    if let Some(s) = e.field("supersedes") {
        refs.push((s.trim().to_string(), line_of("supersedes")));
    }
    if let Some(r) = e.field("related") {
        for l in r.lines() {
            let l = l.trim().trim_start_matches(['-', '*']).trim();
            if let Some((kind, id)) = l.split_once(':')
                && matches!(kind.trim(), "decision" | "memory" | "note" | "directive")
            {
                refs.push((id.trim().to_string(), line_of("related")));
            }
        }
    }
    for (r, line) in refs {
        if !known.has(&r) {
            out.push(
                Diagnostic::new(
                    path,
                    Rule::MemoryUnresolvedReference,
                    format!("`{r}` names no entry"),
                    "reference an existing entry by its exact timestamp",
                )
                .at(at(line)),
            );
        }
    }
    out
}

fn mismatch(path: &std::path::Path, e: &Entry, what: &str, line: usize) -> crate::Diagnostic {
    crate::Diagnostic::new(
        path,
        crate::Rule::MemoryHeaderMismatch,
        format!("`{}`: the heading and the `{what}` field disagree", e.title),
        "make the heading `### <timestamp>: <type>: <summary>` repeat the fields",
    )
    .at(Some(crate::Location {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: 1,
    }))
}

/// The result of merging inbox files into a live file.
#[derive(Debug, Clone, Default)]
pub struct Merge {
    /// The new live text (the old text with entries appended).
    pub output: String,
    /// Entries appended.
    pub appended: usize,
    /// Entries already present (skipped).
    pub duplicates: usize,
    /// Appended entries that the result does not read back as entries (the
    /// merge must not be written).
    pub invisible: Vec<String>,
}

/// Appends the entries of `inbox` texts that `live` does not hold yet (by
/// [`Entry::identity`]), in timestamp order (undated last, in input order).
/// Append-only, so `.gitattributes merge=union` still merges the file, and
/// idempotent, so a run after a crash adds nothing twice.
pub fn merge(live: &str, inbox: &[&str]) -> Merge {
    let live_doc = parse(live);
    let mut seen: std::collections::HashSet<String> =
        live_doc.entries().map(|e| e.identity(live)).collect();
    let mut new: Vec<(Option<i64>, usize, String)> = Vec::new();
    let mut duplicates = 0;
    for src in inbox {
        for e in parse(src).entries() {
            let id = e.identity(src);
            if !seen.insert(id) {
                duplicates += 1;
                continue;
            }
            let n = new.len();
            let mut text = e.text(src).trim_end().to_string();
            // An entry without its `---` would run on into whatever is
            // appended after it (a `# Title` block takes every `## Title`
            // and undated `###` below it): end it, as SEM entries end.
            if !e.terminated {
                text.push_str("\n\n---");
            }
            new.push((e.moment().map(|m| m.timestamp()), n, text));
        }
    }
    new.sort_by_key(|(m, i, _)| (m.is_none(), *m, *i));
    let appended = new.len();
    let wanted: Vec<String> = new.iter().map(|(_, _, t)| identity_of(t)).collect();
    let output = append_entries(live, new.into_iter().map(|(_, _, t)| t));
    // Every appended entry must be an entry of the result, or the next merge
    // would not see it and append it again.
    let got: std::collections::HashSet<String> = {
        let d = parse(&output);
        d.entries().map(|e| e.identity(&output)).collect()
    };
    let invisible = wanted.into_iter().filter(|w| !got.contains(w)).collect();
    Merge {
        output,
        appended,
        duplicates,
        invisible,
    }
}

/// `live` with entry texts appended, each separated by a blank line and
/// ending with a newline.
pub fn append_entries(live: &str, texts: impl Iterator<Item = String>) -> String {
    let mut out = live.to_string();
    for t in texts {
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.ends_with("\n\n") {
                out.push('\n');
            }
        }
        out.push_str(t.trim_end_matches(['\n', '\r']));
        out.push('\n');
    }
    out
}

/// Whether a text holds anything besides entries (an inbox file with such
/// text is kept after a merge, so that nothing is lost).
pub fn has_loose_text(src: &str) -> bool {
    parse(src).blocks.iter().any(|b| match b {
        Block::Text(r, _) => src.get(r.clone()).is_some_and(|t| !t.trim().is_empty()),
        Block::Entry(_) => false,
    })
}

/// Splits a live file by a move plan: the archive text with the moved entries
/// appended (skipping those it holds already), and the live text without
/// them. Text outside entries stays in the live file.
pub fn split_archive(live: &str, archive: &str, moves: &[bool]) -> (String, String, usize) {
    let doc = parse(live);
    let arch_doc = parse(archive);
    let mut in_archive: std::collections::HashSet<String> =
        arch_doc.entries().map(|e| e.identity(archive)).collect();
    let mut moved = Vec::new();
    let mut kept = String::with_capacity(live.len());
    let mut i = 0;
    for b in &doc.blocks {
        match b {
            Block::Text(r, _) => kept.push_str(live.get(r.clone()).unwrap_or("")),
            Block::Entry(e) => {
                if moves.get(i).copied().unwrap_or(false) {
                    if in_archive.insert(e.identity(live)) {
                        moved.push(e.text(live).to_string());
                    }
                } else {
                    kept.push_str(e.text(live));
                }
                i += 1;
            }
        }
    }
    let n = moved.len();
    (append_entries(archive, moved.into_iter()), kept, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Texts at and around SEM's layout: digits in every field (also out of
    /// range), a fraction of 0-10 digits, every offset form, and a stray
    /// character now and then, so the fast path both accepts and refuses.
    fn near_layout() -> impl Strategy<Value = String> {
        let digits = |n: usize| proptest::collection::vec(0u8..10, n);
        (
            digits(4),
            (0u8..20, 0u8..40, 0u8..30, 0u8..70, 0u8..70),
            proptest::option::of(
                digits(0)
                    .prop_union(digits(1))
                    .or(digits(3))
                    .or(digits(9))
                    .or(digits(10)),
            ),
            prop_oneof![
                Just("Z".to_string()),
                (any::<bool>(), 0u8..30, 0u8..70, any::<bool>()).prop_map(|(neg, h, m, colon)| {
                    format!(
                        "{}{h:02}{}{m:02}",
                        if neg { '-' } else { '+' },
                        if colon { ":" } else { "" }
                    )
                }),
                "[+-]?[0-9:]{0,6}",
            ],
            proptest::option::of((0usize..26, "[0-9 :.TZ+x-]")),
        )
            .prop_map(|(y, (mo, d, h, mi, s), frac, off, stray)| {
                let y: String = y.iter().map(|c| char::from(b'0' + c)).collect();
                let mut t = format!("{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
                if let Some(f) = frac {
                    t.push('.');
                    t.extend(f.iter().map(|c| char::from(b'0' + c)));
                }
                t.push_str(&off);
                if let Some((at, c)) = stray
                    && t.is_char_boundary(at.min(t.len()))
                {
                    t.replace_range(at.min(t.len())..(at + 1).min(t.len()), &c);
                }
                t
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Whatever the fast path reads, the general parser reads the same
        /// instant with the same offset.
        #[test]
        fn the_fast_path_agrees_with_the_general_parser(t in near_layout()) {
            if let Some(fast) = fixed_layout(&t) {
                let slow = general_moment(&t, None);
                prop_assert_eq!(Some(fast), slow, "{}", t);
                prop_assert_eq!(
                    fast.offset().local_minus_utc(),
                    slow.map(|d| d.offset().local_minus_utc()).unwrap_or(i32::MIN)
                );
            }
        }
    }

    fn identity_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop::sample::select(vec!["", "---", "a", "a ", "b", " ", "--- ", "x---", "\r"]),
            0..8,
        )
        .prop_map(|ls| ls.join("\n"))
    }

    fn hash_of(f: impl FnOnce(&mut std::collections::hash_map::DefaultHasher)) -> u64 {
        use std::hash::Hasher;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        f(&mut h);
        h.finish()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The one-pass hash hashes exactly the identity's lines, and the
        /// comparison with its byte-equality shortcut says what comparing
        /// the identities says (seen failing with the held-back lines
        /// hashed at the end).
        #[test]
        fn the_identity_shortcuts_agree_with_the_identity(
            a in identity_text(),
            b in identity_text(),
        ) {
            use std::hash::Hash;
            prop_assert_eq!(
                hash_of(|h| hash_identity(&a, h)),
                hash_of(|h| identity_lines(&a).for_each(|l| l.hash(h)))
            );
            prop_assert_eq!(same_identity(&a, &b), identity_of(&a) == identity_of(&b));
            if identity_of(&a) == identity_of(&b) {
                prop_assert_eq!(hash_of(|h| hash_identity(&a, h)), hash_of(|h| hash_identity(&b, h)));
            }
        }
    }

    /// The fast path accepts the canonical layout at all (the property
    /// above would hold trivially for a fast path that refuses everything).
    #[test]
    fn the_fast_path_reads_canonical_timestamps() {
        for t in [
            "2026-02-15T14:32:15-0800",
            "2026-02-15T14:32:15+05:30",
            "2026-02-15T14:32:15Z",
            "2026-02-15T14:32:15.5Z",
        ] {
            assert!(fixed_layout(t).is_some(), "{t}");
        }
    }

    /// Every timestamp of the real Squad teams' memory files (vendored under
    /// tests/corpora/squad): where the fast path reads it, the general
    /// parser reads the same.
    #[test]
    fn the_fast_path_agrees_on_the_corpora_memory_files() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpora/squad");
        let mut files = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(root)];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "md") {
                    files.push(p);
                }
            }
        }
        let (mut dated, mut fast) = (0, 0);
        for f in &files {
            let src = std::fs::read_to_string(f).unwrap();
            for e in parse(&src).entries() {
                let Some(t) = e.timestamp_text() else {
                    continue;
                };
                dated += 1;
                let t = t.trim();
                if let Some(d) = fixed_layout(t) {
                    fast += 1;
                    assert_eq!(Some(d), general_moment(t, None), "{}: {t}", f.display());
                }
            }
        }
        assert!(dated > 20, "the corpora hold dated entries ({dated})");
        eprintln!(
            "corpora: {} files, {dated} dated entries, {fast} read by the fast path",
            files.len()
        );
    }
}
