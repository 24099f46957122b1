//! The markdown parts of a team directory, as pure functions of the text:
//! the roster table of `team.md`, its `## Project Context` section, a
//! charter's `- **Role:**` line, and the sections of a history.
//!
//! Headings inside fenced code blocks are not headings (real histories quote
//! markdown in fences).

/// A markdown heading outside fenced code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `#`, 2 for `##`, …
    pub level: usize,
    /// The text after the hashes, trimmed.
    pub title: String,
    /// 0-based line index.
    pub line: usize,
}

/// The lines of `text` (without line ends).
fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

/// Every heading of `text`, skipping fenced code blocks.
pub fn headings(text: &str) -> Vec<Heading> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let c = t.chars().next().unwrap_or(' ');
        if c == '`' || c == '~' {
            let n = t.chars().take_while(|x| *x == c).count();
            if n >= 3 {
                match fence {
                    None => fence = Some((c, n)),
                    Some((fc, fnum)) if fc == c && n >= fnum && t[n..].trim().is_empty() => {
                        fence = None
                    }
                    _ => {}
                }
                continue;
            }
        }
        if fence.is_some() || line.starts_with(' ') || line.starts_with('\t') {
            continue;
        }
        let level = line.chars().take_while(|x| *x == '#').count();
        if (1..=6).contains(&level) {
            let rest = &line[level..];
            if rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t') {
                out.push(Heading {
                    level,
                    title: rest.trim().trim_end_matches('#').trim().to_string(),
                    line: i,
                });
            }
        }
    }
    out
}

/// The line range `[start, end)` of the section a heading opens: up to the
/// next heading of the same or a higher level.
fn section_end(all: &[Heading], idx: usize, total_lines: usize) -> usize {
    let h = &all[idx];
    all[idx + 1..]
        .iter()
        .find(|n| n.level <= h.level)
        .map_or(total_lines, |n| n.line)
}

/// One row of the roster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Member {
    /// The `Name` cell, markdown emphasis removed.
    pub name: String,
    /// The `Role` cell.
    pub role: String,
    /// The `Charter` cell when the table has one (a path, or `—`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub charter: Option<String>,
    /// The `Status` cell when the table has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The agent folder this member's files live in (`agents/<folder>/`):
    /// from the charter path when it names one, else the lowercased name.
    pub folder: String,
    /// 1-based line of the row in team.md.
    pub line: u32,
}

impl Member {
    /// Whether the roster says this member has no charter (`—`, `-`,
    /// `none`, `n/a`): a monitor or an external agent, with no folder.
    pub fn has_no_charter(&self) -> bool {
        self.charter.as_deref().is_some_and(|c| {
            matches!(
                c.trim().to_ascii_lowercase().as_str(),
                "—" | "-" | "–" | "none" | "n/a" | ""
            )
        })
    }
}

/// A problem found in the roster: `(1-based line, 1-based column, what, kind)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RosterProblem {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// What is wrong.
    pub message: String,
    /// Which check.
    pub kind: RosterProblemKind,
}

/// The roster checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RosterProblemKind {
    /// No `## Members` (or `Roster`) section with a table.
    NoMembers,
    /// A row without a name or a role (or a table without those columns).
    Incomplete,
    /// Two rows with the same name.
    Duplicate,
}

/// The roster of a `team.md`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roster {
    /// The members, in table order.
    pub members: Vec<Member>,
    /// The heading the table was found under (`Members` or a `Roster`).
    pub section: Option<String>,
    /// 1-based line of the `## Project Context` heading, when present.
    pub project_context: Option<u32>,
    /// What is wrong.
    pub problems: Vec<RosterProblem>,
}

fn split_row(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(|c| c.trim().to_string()).collect()
}

fn is_separator(line: &str) -> bool {
    let cells = split_row(line);
    !cells.is_empty()
        && cells.iter().all(|c| {
            !c.is_empty() && c.chars().all(|x| matches!(x, '-' | ':' | ' ')) && c.contains('-')
        })
}

/// Removes markdown emphasis and code marks around a cell's text.
fn plain(cell: &str) -> String {
    cell.trim()
        .trim_matches(|c| c == '*' || c == '_' || c == '`')
        .trim()
        .to_string()
}

/// The folder named by a charter path such as `.squad/agents/fido/charter.md`.
fn folder_from_charter(cell: &str) -> Option<String> {
    let p = plain(cell);
    let mut parts: Vec<&str> = p.split('/').collect();
    if parts.last() != Some(&"charter.md") || parts.len() < 3 {
        return None;
    }
    parts.pop();
    let folder = parts.pop()?;
    (parts.last() == Some(&"agents") && !folder.is_empty()).then(|| folder.to_string())
}

/// Parses the roster of `team.md`: the first table under a `Members`
/// heading, else under a `Roster` heading (`## Roster`, `# Team Roster`).
pub fn parse_roster(text: &str) -> Roster {
    let all = headings(text);
    let ls = lines(text);
    let mut roster = Roster {
        project_context: project_context_heading(&all).map(|h| h.line as u32 + 1),
        ..Roster::default()
    };
    let find = |pred: &dyn Fn(&str) -> bool| {
        all.iter()
            .enumerate()
            .filter(|(_, h)| pred(&h.title.to_ascii_lowercase()))
            .find_map(|(i, h)| {
                let end = section_end(&all, i, ls.len());
                // The first table of the section, before any subsection.
                let stop = all[i + 1..]
                    .iter()
                    .map(|n| n.line)
                    .find(|l| *l < end)
                    .unwrap_or(end);
                (h.line + 1..stop)
                    .find(|&l| ls[l].trim_start().starts_with('|'))
                    .map(|l| (h.title.clone(), l))
            })
    };
    let found = find(&|t: &str| t == "members")
        .or_else(|| find(&|t: &str| t == "roster" || t.ends_with(" roster")));
    let Some((section, start)) = found else {
        roster.problems.push(RosterProblem {
            line: 1,
            column: 1,
            message: "team.md has no `## Members` table (nor a `Roster` section with one)".into(),
            kind: RosterProblemKind::NoMembers,
        });
        return roster;
    };
    roster.section = Some(section);
    let header = split_row(ls[start]);
    let col = |name: &str| {
        header
            .iter()
            .position(|h| plain(h).eq_ignore_ascii_case(name))
    };
    let (name_col, role_col) = (col("name"), col("role"));
    let (charter_col, status_col) = (col("charter"), col("status"));
    if name_col.is_none() || role_col.is_none() {
        roster.problems.push(RosterProblem {
            line: start as u32 + 1,
            column: 1,
            message: "the roster table has no `Name` and `Role` columns".into(),
            kind: RosterProblemKind::Incomplete,
        });
        return roster;
    }
    let mut seen: Vec<String> = Vec::new();
    for (l, line) in ls.iter().enumerate().skip(start + 1) {
        if !line.trim_start().starts_with('|') {
            break;
        }
        if is_separator(line) {
            continue;
        }
        let cells = split_row(line);
        let cell = |c: Option<usize>| c.and_then(|i| cells.get(i)).map(|s| plain(s));
        let name = cell(name_col).unwrap_or_default();
        let role = cell(role_col).unwrap_or_default();
        let line_no = l as u32 + 1;
        if name.is_empty() || role.is_empty() {
            let what = if name.is_empty() { "name" } else { "role" };
            roster.problems.push(RosterProblem {
                line: line_no,
                column: 1,
                message: format!("a roster row has no {what}"),
                kind: RosterProblemKind::Incomplete,
            });
            continue;
        }
        let key = name.to_lowercase();
        if seen.contains(&key) {
            roster.problems.push(RosterProblem {
                line: line_no,
                column: 1,
                message: format!("`{name}` is listed twice in the roster"),
                kind: RosterProblemKind::Duplicate,
            });
            continue;
        }
        seen.push(key.clone());
        let charter = cell(charter_col);
        let folder = charter
            .as_deref()
            .and_then(folder_from_charter)
            .unwrap_or(key);
        roster.members.push(Member {
            name,
            role,
            charter,
            status: cell(status_col),
            folder,
            line: line_no,
        });
    }
    roster
}

/// The roster's `## Project Context` heading (level 2: a `# Project
/// Context` would be the document's title, and its "section" everything).
fn project_context_heading(all: &[Heading]) -> Option<&Heading> {
    all.iter()
        .find(|h| h.level == 2 && h.title.eq_ignore_ascii_case("project context"))
}

/// Where a section of interest ends: at the next heading of level 2 or
/// higher, even under a level-1 heading (histories start with `# Project
/// Context` followed by `## Learnings`).
fn context_end(all: &[Heading], idx: usize, total_lines: usize) -> usize {
    let level = all[idx].level.max(2);
    all[idx + 1..]
        .iter()
        .find(|n| n.level <= level)
        .map_or(total_lines, |n| n.line)
}

/// `team.md` without its `## Project Context` section (only that section:
/// in some real rosters it comes before `## Members`), ending in one line
/// break. What an export carries.
pub fn strip_project_context(text: &str) -> String {
    let all = headings(text);
    let ls = lines(text);
    let mut out: Vec<&str> = ls.clone();
    if let Some(i) = all
        .iter()
        .position(|h| h.level == 2 && h.title.eq_ignore_ascii_case("project context"))
    {
        let end = context_end(&all, i, ls.len());
        out.drain(all[i].line..end);
    }
    let mut s = out.join("\n");
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}

/// The placeholder an imported roster gets: the new project's context is
/// filled on the team's first session here.
pub fn project_context_placeholder(date: &str) -> String {
    format!(
        "## Project Context\n\n- **Owner:** (to be filled on first session)\n- **Stack:** (to be filled on first session)\n- **Description:** (to be filled on first session)\n- **Created:** {date}\n"
    )
}

/// `team` (an exported roster) with the placeholder appended.
/// [`strip_project_context`] of the result gives `team` back (normalised).
pub fn with_project_context_placeholder(team: &str, date: &str) -> String {
    let stripped = strip_project_context(team);
    format!(
        "{}\n\n{}",
        stripped.trim_end(),
        project_context_placeholder(date)
    )
}

/// The role a charter declares in its `- **Role:**` line, with its 1-based
/// line.
pub fn charter_role(text: &str) -> Option<(String, u32)> {
    text.lines().enumerate().find_map(|(i, l)| {
        let t = l.trim_start().strip_prefix(['-', '*'])?.trim_start();
        let rest = t
            .strip_prefix("**Role:**")
            .or_else(|| t.strip_prefix("**Role**:"))?;
        let role = rest.trim();
        (!role.is_empty()).then(|| (role.to_string(), i as u32 + 1))
    })
}

/// The marker an export puts under a history heading it considers
/// project-specific, for the user to review before sharing.
pub const PROJECT_SPECIFIC_MARK: &str =
    "<!-- squad-export: project-specific section; review before sharing -->";

/// Whether a history heading names project-specific content: it starts
/// with `Project` (`Project Context`, `Project Learnings`) or `Core
/// Context`. A title such as `Flight — Project History` is the whole
/// file's, not a section's.
pub fn is_project_specific(title: &str) -> bool {
    let t = title.to_lowercase();
    let t = t.trim_start_matches(|c: char| !c.is_alphanumeric());
    t.starts_with("project") || t.starts_with("core context")
}

/// The project-specific sections of a history: `(1-based line, title,
/// number of lines)`.
pub fn project_sections(history: &str) -> Vec<(u32, String, usize)> {
    let all = headings(history);
    let total = history.lines().count();
    all.iter()
        .enumerate()
        .filter(|(_, h)| h.level <= 2 && is_project_specific(&h.title))
        .map(|(i, h)| {
            (
                h.line as u32 + 1,
                h.title.clone(),
                context_end(&all, i, total) - h.line,
            )
        })
        .collect()
}

/// `history` with [`PROJECT_SPECIFIC_MARK`] under each project-specific
/// heading that does not carry it yet (idempotent, so a re-export of an
/// imported team gives the same text).
pub fn mark_project_sections(history: &str) -> String {
    let marked: Vec<usize> = project_sections(history)
        .iter()
        .map(|(l, _, _)| *l as usize - 1)
        .collect();
    if marked.is_empty() {
        return history.to_string();
    }
    let ls = lines(history);
    let mut out = String::with_capacity(history.len() + marked.len() * 80);
    for (i, l) in ls.iter().enumerate() {
        out.push_str(l);
        out.push('\n');
        if marked.contains(&i) && ls.get(i + 1).map(|n| n.trim()) != Some(PROJECT_SPECIFIC_MARK) {
            out.push_str(PROJECT_SPECIFIC_MARK);
            out.push('\n');
        }
    }
    if !history.ends_with('\n') {
        out.pop();
    }
    out
}

/// The first-line banner of an imported history begins with this.
pub const IMPORT_BANNER_PREFIX: &str = "<!-- squad-import: ";

/// The banner an import puts on a history: where it came from.
pub fn import_banner(project: &str, exported_at: &str, imported_at: &str) -> String {
    let clean = |s: &str| s.replace("--", "- -").replace(['\n', '\r'], " ");
    format!(
        "{IMPORT_BANNER_PREFIX}imported from project \"{}\" (exported {}, imported {}); what the agent learned there follows -->\n",
        clean(project),
        clean(exported_at),
        clean(imported_at)
    )
}

/// `history` without an import banner on its first line (export strips it:
/// the provenance of an earlier import belongs to this project).
pub fn strip_import_banner(history: &str) -> &str {
    if history.starts_with(IMPORT_BANNER_PREFIX) {
        history.split_once('\n').map_or("", |(_, rest)| rest)
    } else {
        history
    }
}

/// The agents routing.md names: the first word of each part (split on `,`
/// `+` `/` `&`) of the cells of `Agent`, `Primary` and `Secondary` columns,
/// emoji and emphasis removed, with their 1-based line and column. `—`,
/// `@handles` and empty cells are not agents.
pub fn routing_agents(text: &str) -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    let mut columns: Vec<usize> = Vec::new();
    let mut in_table = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if !t.starts_with('|') {
            in_table = false;
            columns.clear();
            continue;
        }
        let cells = split_row(line);
        if !in_table {
            in_table = true;
            columns = cells
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    matches!(
                        plain(c).to_ascii_lowercase().as_str(),
                        "agent" | "agents" | "primary" | "secondary"
                    )
                })
                .map(|(n, _)| n)
                .collect();
            continue;
        }
        if is_separator(line) {
            continue;
        }
        // Byte offsets of the cells, for the column.
        let bars: Vec<usize> = line.match_indices('|').map(|(b, _)| b).collect();
        for &c in &columns {
            let (Some(cell), Some(&start)) = (cells.get(c), bars.get(c)) else {
                continue;
            };
            for part in cell.split([',', '+', '/', '&']) {
                let word = part.split_whitespace().next().unwrap_or("");
                let name: String = word
                    .trim_matches(|ch: char| {
                        !(ch.is_alphanumeric() || ch == '@' || ch == '-' || ch == '_')
                    })
                    .to_string();
                if name.is_empty() || name.starts_with('@') || name == "-" {
                    continue;
                }
                let offset = line[start..].find(word).map_or(start + 1, |o| start + o);
                let column = line[..offset].chars().count() as u32 + 1;
                out.push((name, i as u32 + 1, column));
            }
        }
    }
    out
}
