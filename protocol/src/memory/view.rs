//! A memory file read without copying it: every entry's heading, title and
//! field values are slices of the source (a field value is copied only when
//! it spans lines ending in `\r\n`, where the owned reading joins them with
//! `\n`, or its first line ends in blanks the owned reading trims). What
//! [`super::parse`] reads, minus the legacy body text and the rendering;
//! for readers that only look, such as `squadctl memory query`, where
//! building a `String` for every field of every entry of a large
//! decisions.md was most of the cost (issue 43 item 4).
//!
//! Entry boundaries come from the same code as [`super::parse`]; the values
//! agree with it on every file (tested in `protocol/tests/memory_view.rs`).

use super::{
    Bounds, Line, RawBlock, Style, blocks_of, decision_title, field_line, heading, parse_moment,
    sem_heading, sem_shape, split_lines, split_timestamp, trailing_date,
};
use chrono::{DateTime, FixedOffset};
use std::borrow::Cow;
use std::ops::Range;

/// A parsed memory file borrowing from its source.
#[derive(Debug, Clone)]
pub struct View<'a> {
    source: &'a str,
    heads: Vec<Head<'a>>,
    /// The fields of every entry, in order; each entry holds its range.
    fields: Vec<FieldRef<'a>>,
}

/// A `**name:** value` field, borrowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRef<'a> {
    /// The name as written.
    pub name: &'a str,
    /// As [`super::Field::value`]: the lines joined with `\n`, trimmed.
    pub value: Cow<'a, str>,
    /// 1-based line of the field.
    pub line: usize,
}

#[derive(Debug, Clone)]
struct Head<'a> {
    style: Style,
    span: Range<usize>,
    line: usize,
    end_line: usize,
    level: usize,
    heading: &'a str,
    header_timestamp: Option<&'a str>,
    header_type: Option<&'a str>,
    title: &'a str,
    fields: Range<usize>,
    terminated: bool,
}

/// One entry of a [`View`]; the accessors answer as [`super::Entry`]'s
/// fields and methods of the same names.
#[derive(Debug, Clone, Copy)]
pub struct EntryRef<'v, 'a> {
    head: &'v Head<'a>,
    fields: &'v [FieldRef<'a>],
    source: &'a str,
}

/// Reads a memory file without copying it. Never fails: what is not an
/// entry is text (and not kept).
pub fn parse(src: &str) -> View<'_> {
    let lines = split_lines(src);
    let raw = blocks_of(src.len(), &lines);
    let mut heads = Vec::with_capacity(raw.len());
    let mut fields = Vec::new();
    for b in raw {
        if let RawBlock::Entry(b) = b {
            heads.push(head(src, &lines, b, &mut fields));
        }
    }
    View {
        source: src,
        heads,
        fields,
    }
}

impl<'a> View<'a> {
    /// The source text.
    pub fn source(&self) -> &'a str {
        self.source
    }

    /// The entries in order.
    pub fn entries(&self) -> impl Iterator<Item = EntryRef<'_, 'a>> {
        self.heads.iter().map(|h| EntryRef {
            head: h,
            fields: self.fields.get(h.fields.clone()).unwrap_or(&[]),
            source: self.source,
        })
    }
}

impl<'v, 'a> EntryRef<'v, 'a> {
    /// Its style.
    pub fn style(&self) -> Style {
        self.head.style
    }
    /// Byte range in the source, terminator included.
    pub fn span(&self) -> Range<usize> {
        self.head.span.clone()
    }
    /// 1-based first line (the heading).
    pub fn line(&self) -> usize {
        self.head.line
    }
    /// 1-based last line.
    pub fn end_line(&self) -> usize {
        self.head.end_line
    }
    /// Heading level (number of `#`).
    pub fn level(&self) -> usize {
        self.head.level
    }
    /// The heading text after the `#`s, trimmed.
    pub fn heading(&self) -> &'a str {
        self.head.heading
    }
    /// Timestamp text from the heading (SEM or legacy date), if any.
    pub fn header_timestamp(&self) -> Option<&'a str> {
        self.head.header_timestamp
    }
    /// Type from the SEM heading.
    pub fn header_type(&self) -> Option<&'a str> {
        self.head.header_type
    }
    /// Summary (SEM) or title (legacy) from the heading.
    pub fn title(&self) -> &'a str {
        self.head.title
    }
    /// Whether the entry ends with a `---` line.
    pub fn terminated(&self) -> bool {
        self.head.terminated
    }
    /// The fields in order.
    pub fn fields(&self) -> &'v [FieldRef<'a>] {
        self.fields
    }

    /// The entry's source text.
    pub fn text(&self) -> &'a str {
        self.source.get(self.head.span.clone()).unwrap_or("")
    }

    /// The value of a field by case-insensitive name.
    pub fn field(&self, name: &str) -> Option<&'v str> {
        self.fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.value.as_ref())
    }

    /// As [`super::Entry::kind`]; borrowed unless the `type` field has
    /// capitals to lower.
    pub fn kind(&self) -> Cow<'v, str> {
        match self.field("type").map(str::trim) {
            Some(t) if t.bytes().any(|b| b.is_ascii_uppercase()) => {
                Cow::Owned(t.to_ascii_lowercase())
            }
            Some(t) => Cow::Borrowed(t),
            None => Cow::Borrowed(self.head.header_type.unwrap_or("decision")),
        }
    }

    /// As [`super::Entry::timestamp_text`].
    pub fn timestamp_text(&self) -> Option<&'v str> {
        self.field("timestamp")
            .map(str::trim)
            .or(self.head.header_timestamp)
            .or_else(|| {
                self.field("date")
                    .map(|s| s.lines().next().unwrap_or("").trim())
            })
            .or_else(|| trailing_date(self.head.title))
    }

    /// As [`super::Entry::moment`]: the only place a date is parsed, so a
    /// reader that never asks pays no date parsing.
    pub fn moment(&self) -> Option<DateTime<FixedOffset>> {
        self.timestamp_text().and_then(|t| parse_moment(t, None))
    }

    /// As [`super::Entry::author`].
    pub fn author(&self) -> Option<&'v str> {
        ["author", "by"]
            .iter()
            .find_map(|n| self.field(n))
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// As [`super::Entry::summary`].
    pub fn summary(&self) -> &'v str {
        self.field("summary")
            .map(str::trim)
            .unwrap_or(self.head.title)
    }

    /// As [`super::Entry::tags`], without collecting them.
    pub fn tags(self) -> impl Iterator<Item = &'v str> + Clone {
        self.field("tags")
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }
}

/// Where `part` (a slice of `src`) starts in `src`.
fn offset(src: &str, part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(src.as_ptr() as usize)
}

/// A field being read: name, index of its line, index of its last line.
type Open<'a> = (&'a str, usize, usize);

fn head<'a>(
    src: &'a str,
    lines: &[Line<'a>],
    b: Bounds,
    fields: &mut Vec<FieldRef<'a>>,
) -> Head<'a> {
    let (_, text) = heading(lines[b.first].text).unwrap_or((b.level, ""));
    let (header_timestamp, header_type, title) = match b.style {
        Style::Sem => match sem_heading(text).or_else(|| sem_shape(text)) {
            Some((ts, ty, s)) => (Some(ts), Some(ty), s),
            None => (None, None, text),
        },
        Style::DatedHeading => match split_timestamp(text) {
            Some((ts, rest)) => (Some(ts), None, rest.trim()),
            None => (None, None, text),
        },
        Style::DecisionBlock => (None, None, decision_title(text).unwrap_or(text)),
        _ => (None, None, text),
    };
    let body_end = if b.terminated { b.end - 1 } else { b.end };
    let start = fields.len();
    let mut cur: Option<Open<'a>> = None;
    for (k, l) in lines.iter().enumerate().take(body_end).skip(b.first + 1) {
        let is_field = !l.fenced && field_line(l.text).is_some();
        if is_field {
            if let Some(open) = cur.take() {
                fields.push(close(src, lines, open));
            }
            let name = field_line(l.text).map_or("", |(n, _)| n);
            cur = Some((name, k, k));
        } else if let Some((_, _, last)) = &mut cur {
            *last = k;
        }
    }
    if let Some(open) = cur {
        fields.push(close(src, lines, open));
    }
    let span_end = lines.get(b.end).map_or(src.len(), |l| l.start);
    Head {
        style: b.style,
        span: lines[b.first].start..span_end,
        line: b.first + 1,
        end_line: b.end.max(b.first + 1),
        level: b.level,
        heading: text,
        header_timestamp,
        header_type,
        title,
        fields: start..fields.len(),
        terminated: b.terminated,
    }
}

/// The field opened at line `first` and running to line `last`: its value
/// is the rest of the field line and the lines after it joined with `\n`,
/// trimmed: a slice of the source when the lines between are `\n`-ended.
fn close<'a>(src: &'a str, lines: &[Line<'a>], (name, first, last): Open<'a>) -> FieldRef<'a> {
    let rest = field_line(lines[first].text).map_or("", |(_, r)| r);
    let from = offset(src, rest);
    let to = lines[last].start + lines[last].text.len();
    // The owned reading joins the field line's rest *trimmed*: the slice
    // equals the join when nothing was trimmed off the rest's end (or no
    // line follows) and every line between ends in a bare `\n`.
    let rest_ends_line = from + rest.len() == lines[first].start + lines[first].text.len();
    let value = match src.get(from..to) {
        Some(s) if (first == last || rest_ends_line) && !s.contains('\r') => {
            Cow::Borrowed(s.trim())
        }
        _ => {
            let mut v = rest.to_string();
            for l in &lines[first + 1..=last] {
                v.push('\n');
                v.push_str(l.text);
            }
            Cow::Owned(v.trim().to_string())
        }
    };
    FieldRef {
        name,
        value,
        line: first + 1,
    }
}
