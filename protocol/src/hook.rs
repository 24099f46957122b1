//! Pre-tool-use hook inputs of the agent CLIs, and the paths a tool call
//! would write.
//!
//! Three documented contracts are read (one JSON object on stdin each):
//!
//! - Claude Code `PreToolUse`: `{session_id, transcript_path, cwd,
//!   permission_mode, hook_event_name, tool_name, tool_input, tool_use_id}`;
//!   `Write`/`Edit`/`MultiEdit` carry `tool_input.file_path`, `NotebookEdit`
//!   `tool_input.notebook_path`, `Bash` `tool_input.command`.
//! - OpenAI Codex CLI hooks: the same shape (plus `turn_id`, `model`);
//!   `tool_name` is `Bash` for shell calls and `apply_patch` for edits, whose
//!   `tool_input.command` holds the patch text.
//! - GitHub Copilot CLI `preToolUse`: `{sessionId, timestamp, cwd, toolName,
//!   toolArgs}` where `toolArgs` may be an object or a JSON string; `create`
//!   and `edit` carry `path`, `bash` carries `command`.
//!
//! Parsing is strict where a write is at stake (a write tool without a path is
//! an error, so the guard can fail closed) and lenient elsewhere (unknown
//! fields and unknown tools are accepted; unknown tools cannot be analysed).
//! The shell analysis is best effort by nature: see [`shell_targets`].

use serde_json::{Map, Value};
use std::fmt;

/// Which agent CLI's contract an input follows (and its answer must follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// GitHub Copilot CLI.
    Copilot,
}

impl Format {
    /// `claude`, `codex` or `copilot`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Claude => "claude",
            Format::Codex => "codex",
            Format::Copilot => "copilot",
        }
    }

    /// Parses `claude`, `codex` or `copilot`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "claude" => Some(Format::Claude),
            "codex" => Some(Format::Codex),
            "copilot" => Some(Format::Copilot),
            _ => None,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a hook input was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookError {
    /// Line and column in the input, when the JSON itself is bad.
    pub location: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: &'static str,
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Some((line, column)) => write!(f, "stdin:{line}:{column}: ")?,
            None => f.write_str("stdin: ")?,
        }
        write!(
            f,
            "{}: {} (hint: {})",
            crate::Rule::GuardBadInput.id(),
            self.message,
            self.hint
        )
    }
}

fn bad(message: impl Into<String>, hint: &'static str) -> HookError {
    HookError {
        location: None,
        message: message.into(),
        hint,
    }
}

const SHAPE_HINT: &str = "the guard reads one pre-tool-use hook event (Claude Code, Codex or Copilot CLI) as a JSON object on stdin; see docs/guards.md";

/// What a tool call does, as far as the guard is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Only reads (always allowed).
    Read,
    /// Writes these files (as the tool names them: absolute or relative to `cwd`).
    Edit {
        /// The paths.
        paths: Vec<String>,
    },
    /// Runs a shell command.
    Shell {
        /// The command line.
        command: String,
    },
    /// Applies a Codex patch.
    Patch {
        /// The patch text.
        patch: String,
    },
    /// A tool the guard cannot analyse (MCP tools, subagents, …): allowed.
    Unknown,
}

/// One parsed pre-tool-use event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The contract it followed.
    pub format: Format,
    /// The tool's name as sent.
    pub tool_name: String,
    /// The agent's working directory, when sent.
    pub cwd: Option<String>,
    /// What the call does.
    pub action: Action,
}

const READ_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "view",
    "glob",
    "grep",
    "web_fetch",
    "ask_user",
];

/// Guesses the format of a parsed input: Copilot's camelCase `toolName`, or
/// the snake_case `tool_name` of Claude Code and Codex (Codex adds `turn_id`
/// and names its edit tool `apply_patch`).
pub fn detect(object: &Map<String, Value>) -> Option<Format> {
    if object.contains_key("toolName") {
        Some(Format::Copilot)
    } else if object.contains_key("tool_name") {
        let codex = object.contains_key("turn_id")
            || object.get("tool_name").and_then(Value::as_str) == Some("apply_patch");
        Some(if codex { Format::Codex } else { Format::Claude })
    } else {
        None
    }
}

/// Parses one hook input. `format` forces the contract; `None` detects it.
pub fn parse(input: &[u8], format: Option<Format>) -> Result<ToolCall, HookError> {
    let value: Value = serde_json::from_slice(input).map_err(|e| HookError {
        location: Some((e.line(), e.column())),
        message: format!("not valid JSON: {e}"),
        hint: SHAPE_HINT,
    })?;
    let Value::Object(object) = value else {
        return Err(bad("the input is not a JSON object", SHAPE_HINT));
    };
    let detected = detect(&object);
    let format = match (format, detected) {
        (Some(f), _) => f,
        (None, Some(f)) => f,
        (None, None) => {
            return Err(bad(
                "neither `tool_name` (Claude Code, Codex) nor `toolName` (Copilot CLI) is present",
                SHAPE_HINT,
            ));
        }
    };
    // Copilot's VS Code-compatible payload (PascalCase event names) uses the
    // snake_case fields, so either spelling is read for any format.
    let (name_key, args_key) = match (format, detected) {
        (Format::Copilot, Some(Format::Copilot)) => ("toolName", "toolArgs"),
        (_, Some(Format::Copilot)) => {
            return Err(bad(
                format!("`toolName` is a Copilot CLI field, but --format {format} was given"),
                "install the hook with the matching --format, or leave it out to detect the format",
            ));
        }
        (_, _) => ("tool_name", "tool_input"),
    };
    let tool_name = match object.get(name_key) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => {
            return Err(bad(
                format!("`{name_key}` is not a non-empty string"),
                SHAPE_HINT,
            ));
        }
        None => return Err(bad(format!("`{name_key}` is missing"), SHAPE_HINT)),
    };
    let cwd = match object.get("cwd") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad("`cwd` is not a string", SHAPE_HINT)),
    };
    let action = action(&tool_name, object.get(args_key), args_key)?;
    Ok(ToolCall {
        format,
        tool_name,
        cwd,
        action,
    })
}

/// The tool's arguments as an object; a JSON string (Copilot's `toolArgs`)
/// is parsed first.
fn arguments(args: Option<&Value>, key: &str) -> Result<Map<String, Value>, HookError> {
    match args {
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(bad(
                format!("`{key}` holds JSON that is not an object"),
                SHAPE_HINT,
            )),
            Err(e) => Err(bad(
                format!("`{key}` is a string but not JSON: {e}"),
                SHAPE_HINT,
            )),
        },
        Some(_) => Err(bad(format!("`{key}` is not an object"), SHAPE_HINT)),
        None => Err(bad(format!("`{key}` is missing"), SHAPE_HINT)),
    }
}

fn string_field(args: &Map<String, Value>, keys: &[&str], tool: &str) -> Result<String, HookError> {
    for key in keys {
        match args.get(*key) {
            Some(Value::String(s)) if !s.is_empty() => return Ok(s.clone()),
            Some(Value::Null) | None => {}
            Some(_) => {
                return Err(bad(
                    format!("`{key}` of the {tool} call is not a non-empty string"),
                    SHAPE_HINT,
                ));
            }
        }
    }
    Err(bad(
        format!("the {tool} call names no `{}`", keys[0]),
        "a write whose target cannot be read is refused (the guard fails closed)",
    ))
}

fn action(tool: &str, args: Option<&Value>, key: &str) -> Result<Action, HookError> {
    if READ_TOOLS.contains(&tool) {
        return Ok(Action::Read);
    }
    let path_keys: &[&str] = match tool {
        "Write" | "Edit" | "MultiEdit" => &["file_path", "path"],
        "NotebookEdit" => &["notebook_path", "file_path", "path"],
        "create" | "edit" => &["path", "file_path"],
        "Bash" | "bash" => {
            let args = arguments(args, key)?;
            let command = string_field(&args, &["command"], tool)?;
            return Ok(Action::Shell { command });
        }
        "apply_patch" => {
            let patch = match args {
                // The freeform form may arrive as the bare patch text.
                Some(Value::String(s)) if s.trim_start().starts_with("*** Begin Patch") => {
                    s.clone()
                }
                _ => {
                    let args = arguments(args, key)?;
                    string_field(&args, &["command", "patch", "input"], tool)?
                }
            };
            return Ok(Action::Patch { patch });
        }
        _ => return Ok(Action::Unknown),
    };
    let args = arguments(args, key)?;
    let path = string_field(&args, path_keys, tool)?;
    Ok(Action::Edit { paths: vec![path] })
}

// ---------------------------------------------------------------------------
// Codex patches
// ---------------------------------------------------------------------------

/// The files a Codex `apply_patch` patch writes: every `*** Add File:`,
/// `*** Update File:`, `*** Delete File:` and `*** Move to:` path, in order.
pub fn patch_targets(patch: &str) -> Result<Vec<String>, HookError> {
    const HINT: &str = "a Codex patch starts with `*** Begin Patch` and names each file on an `*** Add File:`, `*** Update File:`, `*** Delete File:` or `*** Move to:` line";
    let mut lines = patch.lines().map(str::trim_end);
    let begun = lines.by_ref().any(|l| l.trim() == "*** Begin Patch");
    if !begun {
        return Err(bad("the patch has no `*** Begin Patch` line", HINT));
    }
    let mut out = Vec::new();
    for (i, line) in patch.lines().enumerate() {
        // Codex's own parser trims each line before it reads a marker, so
        // an indented header still names a file it will write.
        let line = line.trim();
        for marker in [
            "*** Add File:",
            "*** Update File:",
            "*** Delete File:",
            "*** Move to:",
        ] {
            if let Some(rest) = line.strip_prefix(marker) {
                let path = rest.trim();
                if path.is_empty() {
                    return Err(HookError {
                        location: None,
                        message: format!("line {} of the patch: `{marker}` names no file", i + 1),
                        hint: HINT,
                    });
                }
                out.push(path.to_string());
            }
        }
    }
    if out.is_empty() {
        // Nothing to judge is not the same as nothing written: a header the
        // guard does not read may still be one Codex applies.
        return Err(bad("the patch names no file it writes", HINT));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Shell commands (best effort)
// ---------------------------------------------------------------------------

/// A write a shell command would make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellTarget {
    /// A path (as written; may hold glob characters), and whether the
    /// command works recursively below it (`rm -r`, `git clean DIR`).
    Path {
        /// The path.
        path: String,
        /// Recursive below it.
        recursive: bool,
    },
    /// A git operation that rewrites the whole working tree (`git stash`,
    /// `git reset --hard`, `git checkout BRANCH`, `git clean` without paths…).
    WholeTree {
        /// The command, for messages.
        command: String,
    },
    /// A write the analysis found but cannot place (a relative path after
    /// `cd "$X"`, an `apply_patch` whose patch names no file): refused,
    /// since an unknown place may be any place.
    Unjudged {
        /// The path as written (or the command).
        path: String,
        /// Why it cannot be placed.
        reason: String,
    },
}

#[derive(Debug, Default)]
struct Simple {
    words: Vec<String>,
    redirect_targets: Vec<String>,
    heredoc: Option<String>,
}

#[derive(Debug, PartialEq)]
enum Piece {
    Word(String),
    Redirect(String),
    Separator,
    /// `(`: a subshell (or `$(`) starts; a `cd` inside stays inside.
    Open,
    /// `)`: it ends.
    Close,
}

/// A simple command, or the bounds of a subshell around some.
#[derive(Debug)]
enum Item {
    Command(Simple),
    Open,
    Close,
}

/// Splits a command line into pieces at unquoted operators, keeping each
/// word's quoting for `shlex` to undo; heredoc bodies are returned aside.
fn lex(command: &str) -> (Vec<Piece>, Vec<String>) {
    let chars: Vec<char> = command.chars().collect();
    let mut pieces = Vec::new();
    let mut bodies = Vec::new();
    let mut word = String::new();
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut expect_delim: Option<bool> = None;
    let mut i = 0;
    let flush = |word: &mut String,
                 pieces: &mut Vec<Piece>,
                 expect: &mut Option<bool>,
                 pending: &mut Vec<(String, bool)>| {
        if !word.is_empty() {
            if let Some(strip) = expect.take() {
                let delim = shlex::split(word)
                    .and_then(|w| w.into_iter().next())
                    .unwrap_or_default();
                pending.push((delim, strip));
            }
            pieces.push(Piece::Word(std::mem::take(word)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                word.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    word.push(n);
                    i += 1;
                }
            }
            '\'' => {
                word.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    word.push(chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    word.push('\'');
                }
            }
            '"' => {
                word.push(c);
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        word.push(chars[i]);
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    word.push('"');
                }
            }
            '#' if word.is_empty() => {
                while i + 1 < chars.len() && chars[i + 1] != '\n' {
                    i += 1;
                }
            }
            ' ' | '\t' => flush(&mut word, &mut pieces, &mut expect_delim, &mut pending),
            '\n' | ';' | '|' | '&' | '(' | ')' => {
                if c == '&' && chars.get(i + 1) == Some(&'>') {
                    // `&>` / `&>>`: stdout and stderr to a file.
                    flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
                    i += 1;
                    let mut op = String::from("&>");
                    if chars.get(i + 1) == Some(&'>') {
                        op.push('>');
                        i += 1;
                    }
                    pieces.push(Piece::Redirect(op));
                } else {
                    flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
                    pieces.push(match c {
                        '(' => Piece::Open,
                        ')' => Piece::Close,
                        _ => Piece::Separator,
                    });
                    if c == '\n' {
                        // Heredoc bodies start on the next line.
                        for (delim, strip) in pending.drain(..) {
                            let mut body = String::new();
                            i += 1;
                            while i < chars.len() {
                                let end = chars[i..]
                                    .iter()
                                    .position(|&x| x == '\n')
                                    .map_or(chars.len(), |p| i + p);
                                let line: String = chars[i..end].iter().collect();
                                let cmp = if strip {
                                    line.trim_start_matches('\t')
                                } else {
                                    line.as_str()
                                };
                                i = end;
                                if cmp == delim {
                                    break;
                                }
                                body.push_str(&line);
                                body.push('\n');
                                i += 1;
                            }
                            bodies.push(body);
                        }
                        // The newline that ends a delimiter line ends the
                        // command line after it too.
                        pieces.push(Piece::Separator);
                    }
                }
            }
            '>' | '<' => {
                // A word of digits right before is a file descriptor number.
                if !word.is_empty() && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                }
                flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
                let mut op = String::from(c);
                while let Some(&n) = chars.get(i + 1) {
                    if matches!(n, '>' | '<' | '|' | '&' | '-') && op.len() < 3 {
                        op.push(n);
                        i += 1;
                    } else {
                        break;
                    }
                }
                if op.starts_with("<<") && !op.starts_with("<<<") {
                    expect_delim = Some(op.ends_with('-'));
                }
                pieces.push(Piece::Redirect(op));
            }
            _ => word.push(c),
        }
        i += 1;
    }
    flush(&mut word, &mut pieces, &mut expect_delim, &mut pending);
    (pieces, bodies)
}

fn simple_commands(command: &str) -> Option<Vec<Item>> {
    let (pieces, mut bodies) = lex(command);
    bodies.reverse();
    let mut out = Vec::new();
    let mut cur = Simple::default();
    let mut iter = pieces.into_iter().peekable();
    while let Some(piece) = iter.next() {
        match piece {
            Piece::Separator | Piece::Open | Piece::Close => {
                if !cur.words.is_empty() || !cur.redirect_targets.is_empty() {
                    out.push(Item::Command(std::mem::take(&mut cur)));
                }
                match piece {
                    Piece::Open => out.push(Item::Open),
                    Piece::Close => out.push(Item::Close),
                    _ => {}
                }
            }
            Piece::Word(raw) => cur.words.push(unquote(&raw)?),
            Piece::Redirect(op) => {
                let target = match iter.peek() {
                    Some(Piece::Word(_)) => match iter.next() {
                        Some(Piece::Word(w)) => unquote(&w)?,
                        _ => continue,
                    },
                    _ => continue,
                };
                // `>&word` sends stdout and stderr to a file unless the word
                // is a descriptor number or `-` (`2>&1`, `>&-`).
                let writes = matches!(op.as_str(), ">" | ">>" | ">|" | "&>" | "&>>" | "<>")
                    || (op == ">&" && !is_descriptor(&target));
                if op.starts_with("<<") && !op.starts_with("<<<") {
                    cur.heredoc = bodies.pop();
                }
                if writes {
                    cur.redirect_targets.push(target);
                }
            }
        }
    }
    if !cur.words.is_empty() || !cur.redirect_targets.is_empty() {
        out.push(Item::Command(cur));
    }
    Some(out)
}

/// A redirection word naming a file descriptor (`1`, `2`, `-`, `3-`)
/// rather than a file.
fn is_descriptor(word: &str) -> bool {
    let digits = word.strip_suffix('-').unwrap_or(word);
    word == "-" || (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
}

/// Removes one word's quoting with `shlex` (POSIX rules); `None` when the
/// quoting is unbalanced.
fn unquote(raw: &str) -> Option<String> {
    let words = shlex::split(raw)?;
    Some(words.concat())
}

fn is_special_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || path.starts_with("/dev/fd/")
        // `tee -` writes to stdout; an all-digit name is a file (`> 123`).
        || path == "-"
}

/// A path the guard cannot judge statically: parameter expansion, command
/// substitution, a home directory.
fn is_dynamic(path: &str) -> bool {
    path.contains('$') || path.contains('`') || path.starts_with('~')
}

fn operands(args: &[String], with_value: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut flags = Vec::new();
    let mut ops = Vec::new();
    let mut i = 0;
    let mut end_of_options = false;
    while i < args.len() {
        let a = &args[i];
        if end_of_options || !a.starts_with('-') || a == "-" {
            ops.push(a.clone());
        } else if a == "--" {
            end_of_options = true;
        } else {
            flags.push(a.clone());
            if with_value.contains(&a.as_str()) {
                i += 1;
            }
        }
        i += 1;
    }
    (flags, ops)
}

fn has_short(flags: &[String], letter: char, long: &str) -> bool {
    flags.iter().any(|f| {
        f == long || (f.starts_with('-') && !f.starts_with("--") && f[1..].contains(letter))
    })
}

/// The write targets of a shell command line, best effort: redirections,
/// `tee`, `cp`/`mv`/`rm`/`touch`/`mkdir` (and `rmdir`, `ln`, `install`,
/// `truncate`), `sed -i`, a heredoc fed to `apply_patch`, and git operations
/// that rewrite the working tree (`git checkout -- …`, `git restore`,
/// `git stash`, `git reset --hard`, `git clean`, and friends).
///
/// Anything else (scripts, interpreters, `xargs`, `find -delete`, variables
/// in paths, command substitution) is not analysed and yields nothing; CI's
/// `squadctl check` remains the backstop. Unbalanced quoting yields nothing.
pub fn shell_targets(command: &str) -> Vec<ShellTarget> {
    let Some(items) = simple_commands(command) else {
        return Vec::new();
    };
    let mut all = Vec::new();
    // The directory relative paths are in, as `cd` moved it: "" where the
    // command started, `None` once it is unknown (`cd $X`, `cd -`, `cd`).
    let mut dir: Option<String> = Some(String::new());
    // `pushd`'s stack, and what a subshell's `(` saved (its `cd` ends at `)`).
    let mut pushed: Vec<Option<String>> = Vec::new();
    let mut saved: Vec<(Option<String>, Vec<Option<String>>)> = Vec::new();
    for item in &items {
        let simple = match item {
            Item::Open => {
                saved.push((dir.clone(), pushed.clone()));
                continue;
            }
            Item::Close => {
                if let Some((d, p)) = saved.pop() {
                    dir = d;
                    pushed = p;
                }
                continue;
            }
            Item::Command(simple) => simple,
        };
        let mut out = Vec::new();
        for t in &simple.redirect_targets {
            push_path(t, false, &mut out);
        }
        let (words, chdir) = strip_wrappers(&simple.words);
        let Some((program, args)) = words.split_first() else {
            place(out, dir.as_deref(), &mut all);
            continue;
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        match name {
            "cd" | "pushd" => {
                let (_, ops) = operands(args, &[]);
                let to = match ops.as_slice() {
                    [to] if to != "-" => moved(dir.as_deref(), to),
                    _ => None,
                };
                if name == "pushd" {
                    pushed.push(dir.clone());
                }
                dir = to;
                place(out, dir.as_deref(), &mut all);
                continue;
            }
            "popd" => {
                // An empty stack here may not be empty in the agent's shell.
                dir = pushed.pop().unwrap_or(None);
                place(out, dir.as_deref(), &mut all);
                continue;
            }
            _ => {}
        }
        command_targets(name, args, simple, &mut out);
        // `env -C DIR` runs this one command in DIR.
        let here = match &chdir {
            Some(to) => moved(dir.as_deref(), to),
            None => dir.clone(),
        };
        place(out, here.as_deref(), &mut all);
    }
    all
}

/// The directory after `cd to` from `dir` (`None`: unknown).
fn moved(dir: Option<&str>, to: &str) -> Option<String> {
    if is_dynamic(to) {
        return None;
    }
    if to.starts_with('/') {
        return Some(format!("{}/", to.trim_end_matches('/')));
    }
    dir.map(|d| format!("{d}{}/", to.trim_end_matches('/')))
}

/// Pushes a path target unless it is a device or built at run time.
fn push_path(path: &str, recursive: bool, out: &mut Vec<ShellTarget>) {
    if !path.is_empty() && !is_special_device(path) && !is_dynamic(path) {
        out.push(ShellTarget::Path {
            path: path.to_string(),
            recursive,
        });
    }
}

/// Moves one command's targets into `all`, relative paths taken in `dir`;
/// with the directory unknown they cannot be placed, so they are refused.
fn place(out: Vec<ShellTarget>, dir: Option<&str>, all: &mut Vec<ShellTarget>) {
    for t in out {
        match (t, dir) {
            (ShellTarget::Path { path, recursive }, Some(d)) if !path.starts_with('/') => {
                all.push(ShellTarget::Path {
                    path: format!("{d}{path}"),
                    recursive,
                })
            }
            (ShellTarget::Path { path, .. }, None) if !path.starts_with('/') => {
                all.push(ShellTarget::Unjudged {
                    reason: format!(
                        "`{path}` is relative to a working directory the guard cannot know (after `cd` to a variable, `cd -`, a bare `cd` or `popd`)"
                    ),
                    path,
                })
            }
            (t, _) => all.push(t),
        }
    }
}

/// The write targets of one command (its program `name`), relative to
/// where it runs.
fn command_targets(name: &str, args: &[String], simple: &Simple, out: &mut Vec<ShellTarget>) {
    match name {
        "tee" => {
            let (_, ops) = operands(args, &[]);
            ops.iter().for_each(|p| push_path(p, false, out));
        }
        "touch" | "mkdir" | "rmdir" | "unlink" | "truncate" | "shred" => {
            let (_, ops) = operands(args, &["-m", "-d", "-t", "-r", "-s", "--mode", "-n"]);
            ops.iter().for_each(|p| push_path(p, false, out));
        }
        "rm" => {
            let (flags, ops) = operands(args, &[]);
            let recursive =
                has_short(&flags, 'r', "--recursive") || has_short(&flags, 'R', "--recursive");
            ops.iter().for_each(|p| push_path(p, recursive, out));
        }
        "cp" | "mv" | "ln" | "install" => copy_targets(name, args, out),
        // `link FILE NAME`: a hard link shares the file, so writing either
        // name writes both.
        "link" => {
            let (_, ops) = operands(args, &[]);
            ops.iter().for_each(|p| push_path(p, false, out));
        }
        "sed" => sed_targets(args)
            .iter()
            .for_each(|p| push_path(p, false, out)),
        "apply_patch" | "applypatch" => {
            let text = simple.heredoc.clone().or_else(|| args.first().cloned());
            match text.map(|t| patch_targets(&t)) {
                Some(Ok(paths)) => paths.iter().for_each(|p| push_path(p, false, out)),
                Some(Err(e)) => out.push(ShellTarget::Unjudged {
                    path: name.to_string(),
                    reason: format!("its patch cannot be read ({})", e.message),
                }),
                None => out.push(ShellTarget::Unjudged {
                    path: name.to_string(),
                    reason: "it is given no patch the guard can read".into(),
                }),
            }
        }
        "git" => {
            // `GIT_WORK_TREE=DIR git …` (or `env GIT_WORK_TREE=DIR git …`)
            // moves the tree git writes, as `--work-tree` does.
            let env_tree = simple
                .words
                .iter()
                .take_while(|w| w.rsplit('/').next() != Some("git"))
                .filter_map(|w| w.strip_prefix("GIT_WORK_TREE="))
                .last()
                .map(str::to_string);
            let mut own = Vec::new();
            git_targets(args, &mut own);
            let tree = git_work_tree(args).or(env_tree);
            match tree {
                // What git writes lands in that tree, wherever it is: the
                // whole of it is judged.
                Some(dir) if !own.is_empty() => {
                    if is_dynamic(&dir) || dir.is_empty() {
                        out.push(ShellTarget::Unjudged {
                            path: dir.clone(),
                            reason: "git is given a working tree the guard cannot read".into(),
                        });
                    } else {
                        push_path(&dir, true, out);
                    }
                }
                _ => out.extend(own),
            }
        }
        _ => {}
    }
}

/// `cp`, `mv`, `ln` and `install`: the destination (`-t DIR`, `-tDIR`,
/// `--target-directory[=]DIR`, a cluster like `-Dt DIR`, else the last
/// operand; one-operand `ln` links into the working directory), the
/// sources `mv` takes away, and where a link (`ln`, `cp -s`, `cp -l`)
/// will lead: writing through it writes there.
fn copy_targets(name: &str, args: &[String], out: &mut Vec<ShellTarget>) {
    let valued: &[char] = if name == "install" {
        &['t', 'S', 'm', 'o', 'g']
    } else {
        &['t', 'S']
    };
    let mut flags: Vec<String> = Vec::new();
    let mut ops: Vec<String> = Vec::new();
    let mut target_dir: Option<String> = None;
    let mut i = 0;
    let mut end = false;
    while i < args.len() {
        let a = &args[i];
        if end || !a.starts_with('-') || a == "-" {
            ops.push(a.clone());
        } else if a == "--" {
            end = true;
        } else if let Some(long) = a.strip_prefix("--") {
            let (key, value) = match long.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (long, None),
            };
            let takes = matches!(
                key,
                "target-directory" | "suffix" | "mode" | "owner" | "group"
            );
            let value = match value {
                Some(v) => Some(v),
                None if takes => {
                    i += 1;
                    args.get(i).cloned()
                }
                None => None,
            };
            if key == "target-directory" {
                target_dir = value;
            }
            flags.push(format!("--{key}"));
        } else {
            // A short cluster: the first letter taking a value takes the
            // rest of the cluster, or the next word.
            let cluster = &a[1..];
            for (at, letter) in cluster.char_indices() {
                if valued.contains(&letter) {
                    let rest = &cluster[at + letter.len_utf8()..];
                    let value = if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned()
                    } else {
                        Some(rest.to_string())
                    };
                    if letter == 't' {
                        target_dir = value;
                    }
                    flags.push(format!("-{letter}"));
                    break;
                }
                flags.push(format!("-{letter}"));
            }
        }
        i += 1;
    }
    let flag = |short: &str, long: &str| flags.iter().any(|f| f == short || f == long);
    if name == "install" && flag("-d", "--directory") {
        ops.iter().for_each(|p| push_path(p, false, out));
        return;
    }
    let recursive = name == "cp"
        && (flag("-r", "--recursive") || flag("-R", "--recursive") || flag("-a", "--archive"));
    let (dest, sources): (Option<String>, &[String]) = match (&target_dir, ops.len()) {
        (Some(d), _) => (Some(d.clone()), &ops[..]),
        (None, 0) => (None, &[]),
        // `ln TARGET` makes a link named after it in the working directory.
        (None, 1) if name == "ln" => (Some(String::new()), &ops[..]),
        (None, 1) => (None, &[]),
        (None, n) => (Some(ops[n - 1].clone()), &ops[..n - 1]),
    };
    match &dest {
        Some(d) if target_dir.is_some() => push_path(d, true, out),
        Some(d) if d.is_empty() => {
            for s in sources {
                let base = s.trim_end_matches('/').rsplit('/').next().unwrap_or(s);
                push_path(base, false, out);
            }
        }
        Some(d) => push_path(d, recursive, out),
        None => {}
    }
    if name == "mv" {
        // Moving a file away changes its source too.
        sources.iter().for_each(|p| push_path(p, true, out));
    }
    let symbolic = (name == "ln" && flag("-s", "--symbolic"))
        || (name == "cp" && flag("-s", "--symbolic-link"));
    let hard = (name == "ln" && !symbolic) || (name == "cp" && flag("-l", "--link"));
    if symbolic {
        // A relative link target is read from the link's directory: DEST's
        // parent, or DEST itself when it is a directory (both judged).
        for s in sources {
            if s.starts_with('/') {
                push_path(s, true, out);
                continue;
            }
            let dirs: Vec<String> = match (&target_dir, &dest) {
                (Some(d), _) => vec![d.trim_end_matches('/').to_string()],
                (None, Some(d)) if d.is_empty() => vec![String::new()],
                (None, Some(d)) => {
                    let d = d.trim_end_matches('/');
                    let parent = d.rsplit_once('/').map_or("", |(p, _)| p);
                    vec![parent.to_string(), d.to_string()]
                }
                (None, None) => Vec::new(),
            };
            for d in dirs {
                let joined = if d.is_empty() {
                    s.clone()
                } else {
                    format!("{d}/{s}")
                };
                push_path(&joined, true, out);
            }
        }
    } else if hard {
        // A hard link shares the file: writing one writes the other.
        sources.iter().for_each(|p| push_path(p, recursive, out));
    }
}

/// Drops leading `VAR=value` assignments and transparent wrappers (`sudo`,
/// `env`, `command`, `nohup`, `time`, `exec`, `nice`); returns the command
/// and the directory `env -C DIR` / `env --chdir=DIR` runs it in.
fn strip_wrappers(words: &[String]) -> (Vec<String>, Option<String>) {
    let mut i = 0;
    let mut chdir = None;
    while i < words.len() {
        let w = &words[i];
        let assignment = w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit())
        });
        if assignment {
            i += 1;
            continue;
        }
        match w.as_str() {
            "sudo" | "env" | "command" | "nohup" | "time" | "exec" | "nice" | "builtin" => {
                let is_env = w == "env";
                i += 1;
                // Their own options (`sudo -u x`, `nice -n 5`) are skipped loosely.
                while i < words.len() && words[i].starts_with('-') {
                    let opt = words[i].as_str();
                    if is_env && let Some(d) = opt.strip_prefix("--chdir=") {
                        chdir = Some(d.to_string());
                    } else if is_env && (opt == "-C" || opt == "--chdir") {
                        chdir = words.get(i + 1).cloned();
                        i += 1;
                    } else if is_env && let Some(d) = opt.strip_prefix("-C") {
                        chdir = Some(d.to_string());
                    } else if matches!(opt, "-u" | "-g" | "-n" | "-C") {
                        i += 1;
                    }
                    i += 1;
                }
            }
            _ => break,
        }
    }
    (words[i.min(words.len())..].to_vec(), chdir)
}

fn sed_targets(args: &[String]) -> Vec<String> {
    let mut in_place = false;
    let mut script_given = false;
    let mut ops = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with("--in-place") {
            in_place = true;
        } else if a == "-e" || a == "-f" || a == "--expression" || a == "--file" {
            script_given = true;
            i += 1;
        } else if a.starts_with("--expression=") || a.starts_with("--file=") {
            script_given = true;
        } else if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 {
            // A cluster like `-ni` or `-i.bak`: an `i` turns in-place on (the
            // rest of the cluster is its suffix); a trailing `e`/`f` takes
            // the next word as the script.
            let cluster = &a[1..];
            if let Some(pos) = cluster.find('i') {
                in_place = true;
                let before = &cluster[..pos];
                if before.ends_with('e') || before.ends_with('f') {
                    script_given = true;
                }
            } else if cluster.ends_with('e') || cluster.ends_with('f') {
                script_given = true;
                i += 1;
            }
        } else if !a.starts_with('-') {
            ops.push(a.clone());
        }
        i += 1;
    }
    if !in_place {
        return Vec::new();
    }
    if !script_given && !ops.is_empty() {
        ops.remove(0);
    }
    ops
}

/// The working tree git is pointed at by `--work-tree DIR` or
/// `--work-tree=DIR` among its global options.
fn git_work_tree(args: &[String]) -> Option<String> {
    let mut tree = None;
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let a = args[i].as_str();
        if let Some(dir) = a.strip_prefix("--work-tree=") {
            tree = Some(dir.to_string());
        } else if a == "--work-tree" {
            tree = args.get(i + 1).cloned();
            i += 1;
        } else if matches!(a, "-C" | "-c" | "--git-dir" | "--namespace") {
            i += 1;
        }
        i += 1;
    }
    tree
}

fn git_targets(args: &[String], out: &mut Vec<ShellTarget>) {
    // Global options before the subcommand; `-C DIR` moves every path.
    let mut i = 0;
    let mut base = String::new();
    while i < args.len() && args[i].starts_with('-') {
        match args[i].as_str() {
            "-C" => {
                if let Some(dir) = args.get(i + 1) {
                    base = format!("{}/", dir.trim_end_matches('/'));
                }
                i += 1;
            }
            "-c" | "--git-dir" | "--work-tree" | "--namespace" => i += 1,
            _ => {}
        }
        i += 1;
    }
    let Some(sub) = args.get(i) else { return };
    let rest = &args[i + 1..];
    let command = format!("git {}", args[i..].join(" "));
    let whole = |out: &mut Vec<ShellTarget>| {
        out.push(ShellTarget::WholeTree {
            command: command.clone(),
        })
    };
    let paths = |ps: &[String], recursive: bool, out: &mut Vec<ShellTarget>| {
        for p in ps {
            let p = format!("{base}{p}");
            if p.trim_end_matches('/') == "." || p == "*" || p == ":/" {
                out.push(ShellTarget::WholeTree {
                    command: command.clone(),
                });
            } else if !is_dynamic(&p) {
                out.push(ShellTarget::Path { path: p, recursive });
            }
        }
    };
    // The named paths, or the whole tree when none are named.
    let scoped = |ps: &[String], out: &mut Vec<ShellTarget>| {
        if ps.is_empty() {
            whole(out)
        } else {
            paths(ps, true, out)
        }
    };
    let after_dashes = |rest: &[String]| -> Option<Vec<String>> {
        rest.iter()
            .position(|a| a == "--")
            .map(|p| rest[p + 1..].to_vec())
    };
    let flag = |names: &[&str]| rest.iter().any(|a| names.contains(&a.as_str()));
    match sub.as_str() {
        "checkout" => {
            if let Some(ps) = after_dashes(rest) {
                scoped(&ps, out)
            } else if flag(&["-b", "-B", "--orphan"]) {
                // A new branch at HEAD: the working tree stays as it is.
            } else if rest.iter().any(|a| !a.starts_with('-')) {
                // A branch switch, or a path restore without `--`: either
                // way possibly anything in the tree.
                whole(out)
            }
        }
        "switch" if !flag(&["-c", "-C", "--create", "--force-create"]) => whole(out),
        "restore" => {
            let staged_only = flag(&["--staged", "-S"]) && !flag(&["--worktree", "-W"]);
            if staged_only {
                return;
            }
            scoped(&operands(rest, &["-s", "--source"]).1, out)
        }
        "stash" => {
            let action = rest.first().map(String::as_str).unwrap_or("push");
            match action {
                "list" | "show" | "drop" | "clear" | "create" | "store" => {}
                "push"
                | "save"
                | "-p"
                | "--patch"
                | "-u"
                | "--include-untracked"
                | "-a"
                | "--all"
                | "-k"
                | "--keep-index"
                | "-m"
                | "--message"
                | "-q" => scoped(&after_dashes(rest).unwrap_or_default(), out),
                _ => whole(out),
            }
        }
        "reset" if flag(&["--hard", "--merge", "--keep"]) => whole(out),
        "clean" => {
            if flag(&["-n", "--dry-run"]) {
                return;
            }
            scoped(&operands(rest, &["-e", "--exclude"]).1, out)
        }
        "rm" | "mv" => {
            let (_, ops) = operands(rest, &[]);
            paths(&ops, sub == "rm", out)
        }
        "pull" => whole(out),
        "merge" | "rebase" | "cherry-pick" | "revert" | "am"
            if !flag(&[
                "--abort",
                "--quit",
                "--skip",
                "--continue",
                "--show-current-patch",
            ]) =>
        {
            whole(out)
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(command: &str) -> Vec<String> {
        shell_targets(command)
            .into_iter()
            .map(|t| match t {
                ShellTarget::Path { path, recursive } => {
                    if recursive {
                        format!("{path}/**")
                    } else {
                        path
                    }
                }
                ShellTarget::WholeTree { .. } => "<tree>".to_string(),
                ShellTarget::Unjudged { path, .. } => format!("?{path}"),
            })
            .collect()
    }

    #[test]
    fn shell_table() {
        let cases: &[(&str, &[&str])] = &[
            ("ls -la", &[]),
            ("cat a.txt", &[]),
            ("echo hi > out.txt", &["out.txt"]),
            ("echo hi>out.txt", &["out.txt"]),
            ("echo hi >> 'my file.txt'", &["my file.txt"]),
            ("cargo test 2>&1 | tee log.txt", &["log.txt"]),
            ("cmd &> all.log", &["all.log"]),
            ("cmd 2> err.log > /dev/null", &["err.log"]),
            ("echo '>' notafile", &[]),
            ("echo \"a > b\" c", &[]),
            ("cp a.txt b.txt", &["b.txt"]),
            ("cp -r src dst", &["dst/**"]),
            ("cp -t dir a b", &["dir/**"]),
            ("mv a.txt sub/b.txt", &["sub/b.txt", "a.txt/**"]),
            ("rm -rf build", &["build/**"]),
            ("rm a b", &["a", "b"]),
            ("touch x && mkdir -p d/e", &["x", "d/e"]),
            ("sed -i 's/a/b/' f.txt", &["f.txt"]),
            ("sed -i.bak -e 's/a/b/' f.txt g.txt", &["f.txt", "g.txt"]),
            ("sed 's/a/b/' f.txt", &[]),
            ("sed -n 1,5p f.txt", &[]),
            ("FOO=1 sudo -u me tee -a x.log", &["x.log"]),
            ("git status", &[]),
            ("git checkout -- a.rs b.rs", &["a.rs/**", "b.rs/**"]),
            ("git checkout main", &["<tree>"]),
            ("git checkout -b feature", &[]),
            ("git checkout .", &["<tree>"]),
            ("git restore src/a.rs", &["src/a.rs/**"]),
            ("git restore --staged src/a.rs", &[]),
            ("git restore .", &["<tree>"]),
            ("git stash", &["<tree>"]),
            ("git stash pop", &["<tree>"]),
            ("git stash list", &[]),
            ("git stash push -- a.rs", &["a.rs/**"]),
            ("git reset --hard HEAD~1", &["<tree>"]),
            ("git reset HEAD a.rs", &[]),
            ("git clean -fd", &["<tree>"]),
            ("git clean -n", &[]),
            ("git clean -fd build", &["build/**"]),
            ("git -C sub checkout -- x", &["sub/x/**"]),
            ("echo $HOME > $OUT", &[]),
            ("echo 'unbalanced", &[]),
            ("# just a comment > x", &[]),
            (
                "cat > f.txt <<'EOF'\nline > not.txt\nrm -rf /\nEOF\necho done > d.txt",
                &["f.txt", "d.txt"],
            ),
            (
                "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: new.rs\n+x\n*** End Patch\nEOF",
                &["new.rs"],
            ),
            ("python script.py", &[]),
            ("cat <<EOF\nx\nEOF\nrm -rf build", &["build/**"]),
            ("cat <<-A <<B\n\tx > y\n\tA\nz\nB\ntouch t", &["t"]),
            ("(cd x; echo a > y)", &["x/y"]),
            ("cd frontend && rm -rf src", &["frontend/src/**"]),
            ("cd /abs/dir && touch a", &["/abs/dir/a"]),
            ("cd $WORK && touch a && touch /x", &["?a", "/x"]),
            ("cd a; cd b/ ; echo > c", &["a/b/c"]),
            // Issue 24, item 7: forms inside the analysed set.
            ("echo x >&out.log", &["out.log"]),
            ("echo x >& out.log", &["out.log"]),
            ("cmd 2>&1 >&2", &[]),
            ("cmd &>all.log", &["all.log"]),
            ("cmd &>>all.log", &["all.log"]),
            ("echo x > 123", &["123"]),
            ("cp --target-directory=dir a", &["dir/**"]),
            ("cp --target-directory dir a", &["dir/**"]),
            ("cp -tdir a b", &["dir/**"]),
            ("install -Dt dir a", &["dir/**"]),
            ("install -m 644 a dir/b", &["dir/b"]),
            ("install -d x y", &["x", "y"]),
            ("(cd x; touch a); touch b", &["x/a", "b"]),
            ("(cd x); echo > y", &["y"]),
            ("pushd x; popd; touch a", &["a"]),
            ("pushd x && touch a && popd && touch b", &["x/a", "b"]),
            ("popd; touch a", &["?a"]),
            ("cd -; touch a", &["?a"]),
            ("cd \"$X\" && rm -rf src", &["?src"]),
            ("env -C dir touch a", &["dir/a"]),
            ("env --chdir=dir touch a", &["dir/a"]),
            ("env -C /abs touch a", &["/abs/a"]),
            ("env -C $D touch a", &["?a"]),
            ("ln -s ../frontend", &["frontend", "../frontend/**"]),
            (
                "ln -s ../frontend backend/fe",
                &[
                    "backend/fe",
                    "backend/../frontend/**",
                    "backend/fe/../frontend/**",
                ],
            ),
            ("ln a b", &["b", "a"]),
            ("link other/secret.md src/x", &["other/secret.md", "src/x"]),
            (
                "git --work-tree=../other checkout main -- a",
                &["../other/**"],
            ),
            ("git --work-tree ../other reset --hard", &["../other/**"]),
            (
                "GIT_WORK_TREE=/elsewhere git checkout .",
                &["/elsewhere/**"],
            ),
            ("env GIT_WORK_TREE=fe git stash pop", &["fe/**"]),
            ("git --work-tree=fe status", &[]),
            ("GIT_WORK_TREE=$X git checkout .", &["?$X"]),
            ("ln -s /etc etc", &["etc", "/etc/**"]),
            ("cp -s ../x y", &["y", "../x/**", "y/../x/**"]),
            (
                "cd sub && ln -s -t links ../a",
                &["sub/links/**", "sub/links/../a/**"],
            ),
            (
                "apply_patch <<'EOF'\n*** Begin Patch\n  *** Add File: x.rs\n+x\nEOF",
                &["x.rs"],
            ),
            (
                "apply_patch <<'EOF'\n*** Begin Patch\n*** End Patch\nEOF",
                &["?apply_patch"],
            ),
        ];
        for (command, want) in cases {
            assert_eq!(paths(command), *want, "{command:?}");
        }
    }

    proptest::proptest! {
        // Hostile command lines and inputs never panic the guard.
        #[test]
        fn never_panics(command in "[ -~\n\t\u{e9}]{0,80}") {
            let _ = shell_targets(&command);
            let _ = patch_targets(&command);
            let _ = parse(command.as_bytes(), None);
        }

        #[test]
        fn never_panics_on_shell_syntax(parts in proptest::collection::vec(
            proptest::sample::select(vec![
                ">", ">>", "<<", "<<-", "2>&1", "&>", "|", "||", "&&", ";", "\n", "'", "\"", "\\",
                "(", ")", "#", "$(", "`", "EOF", "cd", "git", "stash", "checkout", "--", "-i",
                "sed", "rm", "-rf", "cp", "mv", "tee", "x", "a/b", "/abs", "..", "=", "sudo",
            ]),
            0..24,
        )) {
            let _ = shell_targets(&parts.join(" "));
            let _ = shell_targets(&parts.concat());
        }
    }

    #[test]
    fn patches() {
        let p = "*** Begin Patch\n*** Add File: a/new.rs\n+fn x() {}\n*** Update File: b.rs\n*** Move to: c.rs\n@@\n-x\n+y\n*** Delete File: d.rs\n*** End Patch\n";
        assert_eq!(
            patch_targets(p).unwrap(),
            ["a/new.rs", "b.rs", "c.rs", "d.rs"]
        );
        assert!(patch_targets("*** Add File: x").is_err());
        // Codex trims each line: an indented header still names a file.
        let indented =
            "*** Begin Patch\n  *** Add File: a.rs\n+x\n\t*** Delete File: b.rs\n *** End Patch\n";
        assert_eq!(patch_targets(indented).unwrap(), ["a.rs", "b.rs"]);
        // A patch that names no file is refused, not allowed.
        let e = patch_targets("*** Begin Patch\n** Add File: a.rs\n*** End Patch\n").unwrap_err();
        assert!(e.message.contains("names no file"), "{e}");
        let e = patch_targets("*** Begin Patch\n*** Add File:   \n").unwrap_err();
        assert!(e.message.contains("line 2"), "{e}");
    }

    #[test]
    fn inputs_of_each_tool() {
        let claude = br#"{"session_id":"s","transcript_path":"/t","cwd":"/p","permission_mode":"default","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/p/a.rs","content":"x"},"tool_use_id":"t1"}"#;
        let call = parse(claude, None).unwrap();
        assert_eq!(call.format, Format::Claude);
        assert_eq!(call.cwd.as_deref(), Some("/p"));
        assert_eq!(
            call.action,
            Action::Edit {
                paths: vec!["/p/a.rs".into()]
            }
        );

        let codex = br#"{"session_id":"s","turn_id":"u","cwd":"/p","hook_event_name":"PreToolUse","model":"m","permission_mode":"default","tool_name":"apply_patch","tool_input":{"command":"*** Begin Patch\n*** End Patch"},"tool_use_id":"t","transcript_path":null}"#;
        let call = parse(codex, None).unwrap();
        assert_eq!(call.format, Format::Codex);
        assert!(matches!(call.action, Action::Patch { .. }));

        let copilot = br#"{"sessionId":"s","timestamp":1,"cwd":"/p","toolName":"edit","toolArgs":"{\"path\":\"a.rs\",\"old_str\":\"x\",\"new_str\":\"y\"}"}"#;
        let call = parse(copilot, None).unwrap();
        assert_eq!(call.format, Format::Copilot);
        assert_eq!(
            call.action,
            Action::Edit {
                paths: vec!["a.rs".into()]
            }
        );

        let obj = br#"{"toolName":"bash","toolArgs":{"command":"ls"}}"#;
        assert_eq!(
            parse(obj, Some(Format::Copilot)).unwrap().action,
            Action::Shell {
                command: "ls".into()
            }
        );
        let read = br#"{"tool_name":"Read","tool_input":{"file_path":"/x"}}"#;
        assert_eq!(parse(read, None).unwrap().action, Action::Read);
        let mcp = br#"{"tool_name":"mcp__github__create_issue","tool_input":{}}"#;
        assert_eq!(parse(mcp, None).unwrap().action, Action::Unknown);
    }

    #[test]
    fn malformed_inputs_are_errors_with_places() {
        let e = parse(b"{\n  \"tool_name\": ", None).unwrap_err();
        assert_eq!(e.location.map(|l| l.0), Some(2));
        assert!(e.to_string().starts_with("stdin:2:"), "{e}");
        let cases: &[(&[u8], Option<Format>, &str)] = &[
            (b"[]", None, "not a JSON object"),
            (b"{}", None, "neither `tool_name`"),
            (
                br#"{"tool_name":"Write","tool_input":{}}"#,
                None,
                "names no `file_path`",
            ),
            (
                br#"{"tool_name":"Write","tool_input":"{nope"}"#,
                None,
                "not JSON",
            ),
            (br#"{"tool_name":"Write"}"#, None, "`tool_input` is missing"),
            (br#"{"tool_name":7}"#, None, "not a non-empty string"),
            (
                br#"{"toolName":"create","toolArgs":"[1]"}"#,
                None,
                "not an object",
            ),
            (
                br#"{"toolName":"create","toolArgs":{}}"#,
                Some(Format::Claude),
                "--format claude",
            ),
            (
                br#"{"tool_name":"Bash","tool_input":{"command":5}}"#,
                None,
                "`command` of the Bash call",
            ),
        ];
        for (input, format, want) in cases {
            let e = parse(input, *format).unwrap_err();
            assert!(
                e.to_string().contains(want),
                "{}: {e}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
