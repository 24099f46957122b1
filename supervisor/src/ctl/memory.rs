// Over 800 lines: `squadctl memory`'s seven subcommands (validate, query,
// convert, merge, archive, add, show) over shared file discovery and
// locking. The split waiting is query and its rendering into their own
// file (issue 42), after issue 41's changes here land.
//! `squadctl memory`: team memory (SEM entries in decisions and histories).

use super::validate::OutputArgs;
use crate::exit;
use crate::memory::{self as mem, FileKind, MemoryFile};
use chrono::{DateTime, FixedOffset, Utc};
use squad_protocol::memory::{self, Known, Outcome, view};

use squad_protocol::report;
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::Hasher;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// A line to stdout (or to the MCP capture); a closed pipe (`| head`) ends
/// output quietly instead of panicking like `println!`.
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = super::print(&format!("{}\n", format_args!($($t)*)));
    }};
}

/// Team memory: validate, query, convert, merge, archive and add SEM entries.
///
/// Memory files are the team directory's decisions.md, decisions-archive.md,
/// decisions/inbox/*.md and every agent's history.md and history-archive.md.
/// Entries are Squad Entry Markdown (`### <timestamp>: <type>: <summary>`,
/// `**field:**` lines, `---`); legacy styles are read too. See docs/memory.md.
///
/// convert, merge, archive and add hold the team's memory lock
/// (`<team>/.memory.lock`, shared with squadd): a second one waits, saying
/// who holds it.
#[derive(Debug, clap::Subcommand)]
pub enum MemoryCommand {
    /// Check entries: required fields, types, scopes, references, expiry.
    ///
    /// Exit status: 0 when no errors, 1 when any error, 2 on I/O failure.
    Validate(ValidateArgs),
    /// Search entries of every memory file, legacy ones included.
    Query(QueryArgs),
    /// Rewrite legacy entries as SEM, losing no word (checked before writing).
    ///
    /// Each entry is checked on its own: one that would lose a word is left
    /// as it was and named. Originals are kept under the team's
    /// `.memory-backups/` (never in decisions/inbox/, where Squad's own merge
    /// would take them); an identical backup is not written twice.
    Convert(ConvertArgs),
    /// Append decisions/inbox/*.md entries to decisions.md, then remove them.
    ///
    /// Each inbox file is renamed aside before it is read and removed only if
    /// it still holds exactly what was merged; one that grew goes back. A
    /// decisions.md with an unclosed code fence is refused (its line named).
    Merge(MergeArgs),
    /// Move old entries to decisions-archive.md / history-archive.md.
    Archive(ArchiveArgs),
    /// Write one SEM entry into decisions/inbox/.
    Add(AddArgs),
}

/// Arguments of `memory validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Memory files (default: every memory file of the team directory).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[allow(missing_docs)]
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Arguments of `memory query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    /// Only this type (decision, memory, note, directive).
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: Option<String>,
    /// Only entries by this author (case-insensitive).
    #[arg(long)]
    pub author: Option<String>,
    /// Only this scope (e.g. `team`, `agent:flight`).
    #[arg(long)]
    pub scope: Option<String>,
    /// Only entries with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Only entries at or after this date or timestamp.
    #[arg(long, value_name = "WHEN")]
    pub after: Option<String>,
    /// Only entries before this date or timestamp.
    #[arg(long, value_name = "WHEN")]
    pub before: Option<String>,
    /// Only entries whose text contains this (case-insensitive).
    #[arg(long)]
    pub text: Option<String>,
    /// Only this agent's history files.
    #[arg(long)]
    pub agent: Option<String>,
    /// Show chains of entries linked by `supersedes`, newest first.
    #[arg(long)]
    pub supersede_chains: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `memory convert`.
#[derive(Debug, clap::Args)]
pub struct ConvertArgs {
    /// Files to convert (default: decisions.md, the inbox and every history.md).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Report what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Offset for dates without one (`+01:00`, `-0800`, `Z`); default UTC.
    #[arg(long, value_name = "OFFSET", allow_hyphen_values = true)]
    pub tz: Option<String>,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `memory merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// Report what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `memory archive`.
#[derive(Debug, clap::Args)]
pub struct ArchiveArgs {
    /// Entries older than this move (`30d`, `12h`).
    #[arg(long, value_name = "AGE")]
    pub older_than: String,
    /// Then move the oldest entries while a live file is larger (`20KB`).
    #[arg(long, value_name = "SIZE")]
    pub max_size: Option<String>,
    /// Report what would move; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `memory add`.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// decision, memory, note or directive.
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: String,
    /// One sentence, at most 120 characters.
    #[arg(long)]
    pub summary: String,
    /// Author (default: $SQUAD_AGENT).
    #[arg(long, env = "SQUAD_AGENT")]
    pub author: String,
    /// team, project, agent:{name} or skill:{name}.
    #[arg(long)]
    pub scope: Option<String>,
    /// Comma-separated tags.
    #[arg(long)]
    pub tags: Option<String>,
    /// Details text.
    #[arg(long, conflicts_with = "details_file")]
    pub details: Option<String>,
    /// Read the details from this file (`-` for stdin).
    #[arg(long, value_name = "FILE")]
    pub details_file: Option<PathBuf>,
    /// Why.
    #[arg(long)]
    pub rationale: Option<String>,
    /// Timestamp of the entry this one replaces.
    #[arg(long, value_name = "TIMESTAMP")]
    pub supersedes: Option<String>,
    /// `type: identifier` links, repeatable (e.g. `issue: #18`).
    #[arg(long, value_name = "LINK")]
    pub related: Vec<String>,
    /// When to review this entry (ISO 8601 with offset).
    #[arg(long, value_name = "TIMESTAMP")]
    pub expires: Option<String>,
}

/// Runs `squadctl memory …`.
pub(crate) fn run(root: Option<&Path>, cmd: MemoryCommand) -> u8 {
    let result = match cmd {
        MemoryCommand::Validate(a) => validate(root, a),
        MemoryCommand::Query(a) => query(root, a),
        MemoryCommand::Convert(a) => convert(root, a),
        MemoryCommand::Merge(a) => merge(root, a),
        MemoryCommand::Archive(a) => archive(root, a),
        MemoryCommand::Add(a) => add(root, a),
    };
    result.unwrap_or_else(super::fail)
}

/// The team directory: `.squad/` (or legacy `.ai-team/`) of the project.
fn team_dir(root: Option<&Path>) -> Result<PathBuf, String> {
    let start = match root {
        Some(r) => r.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    let mut dir = Some(start.as_path());
    while let Some(d) = dir {
        if let Some(t) = squad_protocol::teamdir::locate(d) {
            return Ok(t.path);
        }
        if root.is_some() {
            break;
        }
        dir = d.parent();
    }
    Err(format!(
        "{}: no team directory (.squad/ or .ai-team/) here or above; pass --root",
        start.display()
    ))
}

/// Takes the team's memory lock for a command that writes memory files,
/// waiting for another holder (and saying who it is), and sweeps the
/// temporaries killed memory writers left.
fn take_lock(team: &Path, what: &str) -> Result<mem::MemoryLock, String> {
    let lock = mem::lock(team, what, true)?
        .ok_or_else(|| format!("{}: the memory lock is held", team.display()))?;
    mem::sweep_temps(team, &lock);
    Ok(lock)
}

/// Whether two paths name the same directory (one may be relative).
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!((std::fs::canonicalize(a), std::fs::canonicalize(b)), (Ok(x), Ok(y)) if x == y)
}

fn files_or_discover(root: Option<&Path>, files: &[PathBuf]) -> Result<Vec<MemoryFile>, String> {
    if files.is_empty() {
        Ok(mem::discover(&team_dir(root)?))
    } else {
        Ok(files.iter().map(|p| mem::classify(p)).collect())
    }
}

fn validate(root: Option<&Path>, a: ValidateArgs) -> Result<u8, String> {
    let files = files_or_discover(root, &a.files)?;
    let diags = mem::diagnostics(&files, true);
    let totals = report::Totals {
        files: files.len(),
        sessions: 0,
    };
    let text = report::render(
        a.output.format(),
        &diags,
        totals,
        env!("CARGO_PKG_VERSION"),
        a.output.color(),
    );
    if super::print(&text) != exit::OK {
        return Ok(exit::FAILURE);
    }
    Ok(if diags.iter().any(|d| d.is_error()) {
        exit::PROBLEMS
    } else {
        exit::OK
    })
}

/// One entry as `query --json` shows it, borrowed from the files read.
#[derive(Debug, serde::Serialize)]
struct Shown<'a> {
    file: &'a str,
    line: usize,
    end_line: usize,
    style: memory::Style,
    #[serde(rename = "type")]
    kind: Cow<'a, str>,
    timestamp: Option<&'a str>,
    author: Option<&'a str>,
    scope: Option<&'a str>,
    tags: Tags<'a>,
    summary: &'a str,
    supersedes: Option<&'a str>,
    agent: Option<&'a str>,
}

/// An entry's comma-separated `tags` field, shown as a list of names.
#[derive(Debug)]
struct Tags<'a>(Option<&'a str>);

impl serde::Serialize for Tags<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.0
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty()),
        )
    }
}

/// The document `query --json` prints (keys in this order).
#[derive(serde::Serialize)]
struct Listing<'a> {
    count: usize,
    entries: &'a [Shown<'a>],
}

/// The document `query --supersede-chains --json` prints.
#[derive(serde::Serialize)]
struct Chains<'a> {
    chains: &'a [Vec<&'a Shown<'a>>],
}

fn parse_when(s: &str) -> Result<DateTime<FixedOffset>, String> {
    memory::parse_moment(s, None)
        .ok_or_else(|| format!("`{s}` is not a date (YYYY-MM-DD) or timestamp"))
}

/// A memory file as `query` reads it: its name as shown, its agent, its text.
struct Read {
    name: String,
    agent: Option<String>,
    text: String,
}

/// The memory files `query` looks at (`--agent` narrows them), read; one
/// that cannot be read is a warning.
fn read_for_query(team: &Path, agent: Option<&str>) -> Vec<Read> {
    let mut out = Vec::new();
    for f in mem::discover(team) {
        if let Some(agent) = agent
            && !f
                .agent
                .as_deref()
                .is_some_and(|x| x.eq_ignore_ascii_case(agent))
        {
            continue;
        }
        match mem::read(&f.path) {
            Ok(text) => out.push(Read {
                name: f.path.display().to_string(),
                agent: f.agent,
                text,
            }),
            Err(e) => super::eprint_text(&format!(
                "squadctl: warning: {}\n",
                crate::text::escape(&e.to_string())
            )),
        }
    }
    out
}

/// Entries already taken, by the hash of their identity (file index and
/// span), so that an entry in both a live file and its archive (a crash
/// between the two writes of an archive run) is shown once. Hashing the
/// identity's lines instead of keeping a copy of each entry's text keeps a
/// large query from touching twice its memory; a hash shared by different
/// identities (all but never) goes to the overflow list.
#[derive(Default)]
struct Taken {
    first: HashMap<u64, (usize, Range<usize>)>,
    more: Vec<(u64, usize, Range<usize>)>,
}

impl Taken {
    /// Takes the entry `span` of file `file` unless one with its identity
    /// was taken; whether it was taken now.
    fn take(&mut self, files: &[Read], file: usize, span: Range<usize>) -> bool {
        let text_of = |i: usize, span: &Range<usize>| {
            files
                .get(i)
                .and_then(|f| f.text.get(span.clone()))
                .unwrap_or("")
        };
        let text = text_of(file, &span);
        let mut h = std::collections::hash_map::DefaultHasher::new();
        memory::hash_identity(text, &mut h);
        let key = h.finish();
        match self.first.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((file, span));
                true
            }
            std::collections::hash_map::Entry::Occupied(o) => {
                let (i, s) = o.get();
                let same = |i: usize, s: &Range<usize>| memory::same_identity(text, text_of(i, s));
                if same(*i, s) || self.more.iter().any(|(k, i, s)| *k == key && same(*i, s)) {
                    return false;
                }
                self.more.push((key, file, span));
                true
            }
        }
    }
}

fn query(root: Option<&Path>, a: QueryArgs) -> Result<u8, String> {
    let team = team_dir(root)?;
    let when = (
        a.after.as_deref().map(parse_when).transpose()?,
        a.before.as_deref().map(parse_when).transpose()?,
    );
    let filter = Filter::new(&a, when);
    let files = read_for_query(&team, a.agent.as_deref());
    // Every file is read before any is parsed, so the entries shown borrow
    // from the texts and the views without a copy of any field.
    let views: Vec<view::View<'_>> = files.iter().map(|f| view::parse(&f.text)).collect();
    let mut taken = Taken::default();
    let mut shown = Vec::new();
    for (i, (f, v)) in files.iter().zip(&views).enumerate() {
        for e in v.entries() {
            if !taken.take(&files, i, e.span()) || !filter.matches(e) {
                continue;
            }
            shown.push(Shown {
                file: &f.name,
                line: e.line(),
                end_line: e.end_line(),
                style: e.style(),
                kind: e.kind(),
                timestamp: e.timestamp_text(),
                author: e.author().or(f.agent.as_deref()),
                scope: e.field("scope").map(str::trim),
                tags: Tags(e.field("tags")),
                summary: e.summary(),
                supersedes: e.field("supersedes").map(str::trim),
                agent: f.agent.as_deref(),
            });
        }
    }
    if a.supersede_chains {
        return print_chains(&shown, a.json);
    }
    if a.json {
        let listing = Listing {
            count: shown.len(),
            entries: &shown,
        };
        return print_json(&listing);
    }
    // One write for the whole listing, not one per entry (stdout is line
    // buffered: a write system call per line was most of a large query).
    let mut out = String::with_capacity(shown.len() * 96 + 32);
    for s in &shown {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "{}:{}: {} {} {} — {}",
            crate::text::escape(s.file),
            s.line,
            s.timestamp.unwrap_or("(undated)"),
            s.kind,
            crate::text::escape(s.author.unwrap_or("?")),
            crate::text::escape(s.summary)
        );
    }
    out.push_str(&crate::text::count(shown.len(), "entry", "entries"));
    out.push('\n');
    let _ = super::print(&out);
    Ok(exit::OK)
}

/// `query`'s filters, their arguments prepared once.
struct Filter<'q> {
    kind: Option<&'q str>,
    author: Option<String>,
    scope: Option<&'q str>,
    tag: Option<&'q str>,
    after: Option<DateTime<FixedOffset>>,
    before: Option<DateTime<FixedOffset>>,
    text: Option<String>,
}

impl<'q> Filter<'q> {
    /// The filter of `a`, with its `--after`/`--before` already parsed
    /// (`when`), so that a bad date is refused before any file is read.
    fn new(
        a: &'q QueryArgs,
        (after, before): (Option<DateTime<FixedOffset>>, Option<DateTime<FixedOffset>>),
    ) -> Self {
        Filter {
            kind: a.kind.as_deref(),
            author: a.author.as_deref().map(str::to_lowercase),
            scope: a.scope.as_deref(),
            tag: a.tag.as_deref(),
            after,
            before,
            text: a.text.as_deref().map(str::to_lowercase),
        }
    }

    /// Whether the entry passes every filter given. Its date is read only
    /// when `--after` or `--before` asks (dating every entry was a third of
    /// a plain query's parse).
    fn matches(&self, e: view::EntryRef<'_, '_>) -> bool {
        let ci = |x: &str, y: &str| x.trim().eq_ignore_ascii_case(y.trim());
        if self.kind.is_some_and(|k| !ci(&e.kind(), k)) {
            return false;
        }
        if self
            .author
            .as_deref()
            .is_some_and(|au| !e.author().is_some_and(|x| x.to_lowercase().contains(au)))
        {
            return false;
        }
        if self
            .scope
            .is_some_and(|s| !e.field("scope").is_some_and(|x| ci(x, s)))
        {
            return false;
        }
        if self.tag.is_some_and(|t| !e.tags().any(|x| ci(x, t))) {
            return false;
        }
        if self.after.is_some() || self.before.is_some() {
            let m = e.moment();
            if self.after.is_some_and(|w| m.is_none_or(|m| m < w)) {
                return false;
            }
            if self.before.is_some_and(|w| m.is_none_or(|m| m >= w)) {
                return false;
            }
        }
        if self
            .text
            .as_deref()
            .is_some_and(|t| !e.text().to_lowercase().contains(t))
        {
            return false;
        }
        true
    }
}

fn print_chains(shown: &[Shown], json: bool) -> Result<u8, String> {
    // moment → index; a chain starts at an entry nothing supersedes.
    let key = |t: &Option<&str>| {
        t.and_then(|t| memory::parse_moment(t, None))
            .map(|m| m.timestamp())
    };
    let by_moment: std::collections::HashMap<i64, usize> = shown
        .iter()
        .enumerate()
        .filter_map(|(i, s)| key(&s.timestamp).map(|k| (k, i)))
        .collect();
    let superseded: std::collections::HashSet<i64> =
        shown.iter().filter_map(|s| key(&s.supersedes)).collect();
    let mut chains: Vec<Vec<&Shown>> = Vec::new();
    for s in shown {
        if s.supersedes.is_none() || key(&s.timestamp).is_some_and(|k| superseded.contains(&k)) {
            continue;
        }
        let mut chain = vec![s];
        let mut cur = s;
        let mut guard = 0;
        while let Some(i) = key(&cur.supersedes).and_then(|k| by_moment.get(&k)) {
            cur = &shown[*i];
            chain.push(cur);
            guard += 1;
            if guard > shown.len() {
                break; // a cycle
            }
        }
        chains.push(chain);
    }
    if json {
        return print_json(&Chains { chains: &chains });
    } else {
        for c in &chains {
            let parts: Vec<String> = c
                .iter()
                .map(|s| {
                    format!(
                        "{} {}",
                        s.timestamp.unwrap_or("?"),
                        crate::text::escape(s.summary)
                    )
                })
                .collect();
            say!("{}", parts.join("\n  supersedes "));
        }
        say!("{}", crate::text::count(chains.len(), "chain", "chains"));
    }
    Ok(exit::OK)
}

/// Prints `value` as pretty JSON and a line break, in one write.
///
/// Serialised straight from the typed value into one buffer: going through
/// a `serde_json::Value` first copied every field of every entry into a map
/// of its own, the most of what `query --json` cost beyond the plain
/// listing on a large file (docs/performance.md). The bytes are the same:
/// the types' fields are declared in the order the keys were printed.
fn print_json(value: &impl serde::Serialize) -> Result<u8, String> {
    let _ = super::print(&pretty_json(value)?);
    Ok(exit::OK)
}

/// `value` as pretty JSON with a final line break.
fn pretty_json(value: &impl serde::Serialize) -> Result<String, String> {
    let mut out = Vec::with_capacity(64 * 1024);
    serde_json::to_writer_pretty(&mut out, value).map_err(|e| e.to_string())?;
    out.push(b'\n');
    // serde_json writes UTF-8 only.
    String::from_utf8(out).map_err(|e| e.to_string())
}

fn parse_tz(s: Option<&str>) -> Result<FixedOffset, String> {
    let Some(s) = s else {
        return FixedOffset::east_opt(0).ok_or_else(|| "UTC".to_string());
    };
    let probe = format!("2000-01-01T00:00:00{}", if s == "Z" { "+00:00" } else { s });
    DateTime::parse_from_str(&probe, "%Y-%m-%dT%H:%M:%S%z")
        .or_else(|_| DateTime::parse_from_str(&probe, "%Y-%m-%dT%H:%M:%S%:z"))
        .map(|d| *d.offset())
        .map_err(|_| format!("--tz `{s}`: give an offset such as +01:00, -0800 or Z"))
}

fn convert(root: Option<&Path>, a: ConvertArgs) -> Result<u8, String> {
    let tz = parse_tz(a.tz.as_deref())?;
    // One lock per team directory the files belong to, held to the end; the
    // team's own files are listed under its lock (a merge may have just
    // removed an inbox file).
    let mut locks: Vec<(PathBuf, mem::MemoryLock)> = Vec::new();
    if a.files.is_empty() && !a.dry_run {
        let team = team_dir(root)?;
        let lock = take_lock(&team, "squadctl memory convert")?;
        locks.push((team, lock));
    }
    let files: Vec<MemoryFile> = files_or_discover(root, &a.files)?
        .into_iter()
        .filter(|f| {
            !a.files.is_empty()
                || !matches!(
                    f.kind,
                    FileKind::DecisionsArchive | FileKind::HistoryArchive
                )
        })
        .collect();
    let mut reports = Vec::new();
    let mut refused = false;
    for f in &files {
        let team = mem::team_of(&f.path);
        if !a.dry_run
            && let Some(t) = &team
            && !locks.iter().any(|(p, _)| same_dir(p, t))
        {
            locks.push((t.clone(), take_lock(t, "squadctl memory convert")?));
        }
        let mut written = false;
        let mut backup = None;
        let mut carried = 0;
        let c = if a.dry_run {
            memory::convert(&mem::read(&f.path)?, tz, f.agent.as_deref())
        } else {
            // Converted from the file as it is when written (agents and the
            // Scribe append without the memory lock); what they append after
            // that is carried over verbatim (docs/memory.md).
            let mut last = None;
            let r = mem::rewrite(&f.path, |src| {
                let c = memory::convert(src, tz, f.agent.as_deref());
                let write =
                    c.lost.is_empty() && c.entries.iter().any(|e| e.outcome == Outcome::Converted);
                if write {
                    backup = Some(mem::backup(team.as_deref(), &f.path, src)?);
                }
                let out = write.then(|| c.output.clone());
                last = Some(c);
                Ok(out)
            })
            .map_err(|e| e.to_string())?;
            written = r.text.is_some();
            carried = r.carried;
            last.ok_or_else(|| format!("{}: not read", f.path.display()))?
        };
        let backup = backup.filter(|_| written).map(|b| b.display().to_string());
        let converted = c
            .entries
            .iter()
            .filter(|e| e.outcome == Outcome::Converted)
            .count();
        if !c.lost.is_empty() {
            refused = true;
        }
        reports.push(serde_json::json!({
            "file": f.path.display().to_string(),
            "entries": c.entries,
            "converted": converted,
            "lost_words": c.lost,
            "written": written,
            "backup": backup,
            "carried_over_bytes": carried,
        }));
        if !a.json {
            say!("{}:", crate::text::escape(&f.path.display().to_string()));
            for e in &c.entries {
                let what = match &e.outcome {
                    Outcome::Converted => "converted".to_string(),
                    Outcome::KeptAsIs => "kept as is (SEM)".to_string(),
                    Outcome::NeedsReview(why) => format!("needs review: {why}"),
                };
                say!(
                    "  line {}: {} — {}",
                    e.line,
                    crate::text::escape(&e.title),
                    what
                );
            }
            if !c.lost.is_empty() {
                say!(
                    "  REFUSED: the conversion would lose words: {}",
                    c.lost.join(" ")
                );
            } else if written {
                say!("  written; backup: {}", backup.as_deref().unwrap_or(""));
            } else if a.dry_run {
                say!("  dry run: nothing written");
            }
            if carried > 0 {
                say!(
                    "  {carried} bytes another writer appended meanwhile: kept, after the converted text (convert again to convert them)"
                );
            }
        }
    }
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "files": reports }))
                .map_err(|e| e.to_string())?
        );
    }
    Ok(if refused { exit::PROBLEMS } else { exit::OK })
}

fn merge(root: Option<&Path>, a: MergeArgs) -> Result<u8, String> {
    let team = team_dir(root)?;
    let lock = take_lock(&team, "squadctl memory merge")?;
    let r = mem::merge_inbox(&team, a.dry_run, &lock)?;
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        say!(
            "{} from {}: {} appended, {} already present{}",
            crate::text::count(r.appended + r.duplicates, "entry", "entries"),
            crate::text::count(r.inbox_files, "inbox file", "inbox files"),
            r.appended,
            r.duplicates,
            if a.dry_run { " (dry run)" } else { "" }
        );
        for p in &r.removed {
            say!(
                "  removed {}",
                crate::text::escape(&p.display().to_string())
            );
        }
        for (p, why) in &r.kept {
            say!(
                "  kept {}: {}",
                crate::text::escape(&p.display().to_string()),
                crate::text::escape(why)
            );
        }
    }
    Ok(exit::OK)
}

fn archive(root: Option<&Path>, a: ArchiveArgs) -> Result<u8, String> {
    let team = team_dir(root)?;
    let older_than = squad_policies::duration::parse_duration(&a.older_than)
        .map_err(|e| format!("--older-than: {e}"))?;
    let max_size = a
        .max_size
        .as_deref()
        .map(squad_policies::memory::parse_size)
        .transpose()
        .map_err(|e| format!("--max-size: {e}"))?;
    let rule = squad_policies::memory::ArchiveRule {
        older_than,
        max_size,
    };
    let lock = take_lock(&team, "squadctl memory archive")?;
    let reports = mem::archive_team(&team, rule, Utc::now(), a.dry_run, &lock)?;
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?
        );
    } else {
        for r in &reports {
            say!(
                "{}: {} to {}{}",
                crate::text::escape(&r.file.display().to_string()),
                crate::text::count(r.moved, "entry moves", "entries move"),
                crate::text::escape(&r.archive.display().to_string()),
                if a.dry_run { " (dry run)" } else { "" }
            );
        }
    }
    Ok(exit::OK)
}

/// The SEM text of a new entry.
pub(crate) fn render_entry(a: &AddArgs, ts: &str, details: Option<&str>) -> String {
    let mut s = format!(
        "### {ts}: {}: {}\n\n**type:** {}\n**timestamp:** {ts}\n**Author:** {}\n",
        a.kind, a.summary, a.kind, a.author
    );
    if let Some(x) = &a.scope {
        s.push_str(&format!("**scope:** {x}\n"));
    }
    if let Some(x) = &a.tags {
        s.push_str(&format!("**tags:** {x}\n"));
    }
    s.push_str(&format!("\n**summary:** {}\n", a.summary));
    if let Some(d) = details.map(str::trim).filter(|d| !d.is_empty()) {
        s.push_str(&format!("\n**details:**\n\n{d}\n"));
    }
    if let Some(x) = &a.rationale {
        s.push_str(&format!("\n**rationale:** {}\n", x.trim()));
    }
    if !a.related.is_empty() {
        s.push_str("\n**related:**\n");
        for r in &a.related {
            s.push_str(&format!("- {}\n", r.trim()));
        }
    }
    if let Some(x) = &a.supersedes {
        s.push_str(&format!("\n**supersedes:** {}\n", x.trim()));
    }
    if let Some(x) = &a.expires {
        s.push_str(&format!("**expires:** {}\n", x.trim()));
    }
    s.push_str("\n---\n");
    s
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 48 {
            break;
        }
    }
    let t = out.trim_matches('-').to_string();
    if t.is_empty() { "entry".into() } else { t }
}

fn add(root: Option<&Path>, a: AddArgs) -> Result<u8, String> {
    let team = team_dir(root)?;
    let check = |bad: bool, msg: String| if bad { Err(msg) } else { Ok(()) };
    check(
        !memory::TYPES.contains(&a.kind.as_str()),
        format!(
            "--type `{}`: use decision, memory, note or directive",
            a.kind
        ),
    )?;
    check(
        a.summary.trim().is_empty() || a.summary.contains('\n'),
        "--summary is one non-empty line".into(),
    )?;
    check(
        a.summary.chars().count() > 120,
        format!(
            "--summary has {} characters; at most 120 (put the rest in --details)",
            a.summary.chars().count()
        ),
    )?;
    check(
        a.author.trim().is_empty() || a.author.contains('\n'),
        "--author is one non-empty line".into(),
    )?;
    if let Some(s) = &a.scope {
        check(
            !memory::valid_scope(s),
            format!("--scope `{s}`: use team, project, agent:NAME or skill:NAME"),
        )?;
    }
    for t in [&a.supersedes, &a.expires].into_iter().flatten() {
        check(
            !memory::valid_timestamp(t),
            format!("`{t}` is not ISO 8601 with an offset"),
        )?;
    }
    let details = match &a.details_file {
        Some(p) if p.as_os_str() == "-" => {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                .map_err(|e| format!("stdin: {e}"))?;
            Some(s)
        }
        Some(p) => Some(mem::read(p)?),
        None => a.details.clone(),
    };
    let ts = Utc::now()
        .fixed_offset()
        .format("%Y-%m-%dT%H:%M:%S%z")
        .to_string();
    let text = render_entry(&a, &ts, details.as_deref());
    // The entry must read back as exactly one valid SEM entry.
    let doc = memory::parse(&text);
    let problems: Vec<String> = memory::validate(
        Path::new("new entry"),
        &doc,
        &Known::default(),
        Utc::now().fixed_offset(),
        true,
    )
    .into_iter()
    .filter(|d| d.is_error() && d.rule != squad_protocol::Rule::MemoryUnresolvedReference)
    .map(|d| d.message)
    .collect();
    if doc.entries().count() != 1 || !problems.is_empty() {
        return Err(format!(
            "the entry would not read back as one SEM entry ({}); check --details for `---` lines or `### ` headings",
            problems.join("; ")
        ));
    }
    if let Some(line) = memory::unclosed_fence(&text) {
        return Err(format!(
            "the entry's code fence at its line {line} never closes: everything after it, \
             and every entry merged after it, would be code; close it in --details"
        ));
    }
    let _lock = take_lock(&team, "squadctl memory add")?;
    let inbox = team.join("decisions").join("inbox");
    let base = format!("{}-{}", slug(&a.author), slug(&a.summary));
    let mut path = inbox.join(format!("{base}.md"));
    let mut n = 2;
    while std::fs::symlink_metadata(&path).is_ok() {
        path = inbox.join(format!("{base}-{n}.md"));
        n += 1;
    }
    // The inbox is made, and the entry written, without following a link
    // below the project root.
    crate::safefs::write_project_file(&path, text.as_bytes(), Some(0o777))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    say!("{}", path.display());
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `query --json` prints the bytes it printed through
    /// `serde_json::Value` (keys in the same order, same escaping).
    #[test]
    fn typed_json_is_byte_for_byte_the_value_json() {
        let shown = vec![
            Shown {
                file: "/p/.squad/decisions.md",
                line: 3,
                end_line: 9,
                style: memory::Style::Sem,
                kind: "decision".into(),
                timestamp: Some("2026-01-02T10:00:00Z"),
                author: Some("alice \"a\" \\ ü\u{1}"),
                scope: None,
                tags: Tags(Some("db, infra ,")),
                summary: "use postgres\n",
                supersedes: Some("2026-01-01T00:00:00Z"),
                agent: None,
            },
            Shown {
                file: "x",
                line: 1,
                end_line: 1,
                style: memory::Style::Sem,
                kind: "".into(),
                timestamp: None,
                author: None,
                scope: Some("backend"),
                tags: Tags(None),
                summary: "",
                supersedes: None,
                agent: Some("bob"),
            },
        ];
        let value = serde_json::json!({ "count": shown.len(), "entries": shown });
        assert_eq!(
            value["entries"][0]["tags"],
            serde_json::json!(["db", "infra"])
        );
        assert_eq!(value["entries"][1]["tags"], serde_json::json!([]));
        assert_eq!(
            pretty_json(&Listing {
                count: shown.len(),
                entries: &shown
            })
            .unwrap(),
            serde_json::to_string_pretty(&value).unwrap() + "\n"
        );
        let chains = vec![vec![&shown[0], &shown[1]]];
        let value = serde_json::json!({ "chains": chains });
        assert_eq!(
            pretty_json(&Chains { chains: &chains }).unwrap(),
            serde_json::to_string_pretty(&value).unwrap() + "\n"
        );
    }
}
