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
//! - Gemini CLI `BeforeTool`: `{session_id, transcript_path, cwd,
//!   hook_event_name: "BeforeTool", timestamp, tool_name, tool_input}`;
//!   `write_file` and `replace` carry `tool_input.file_path`,
//!   `run_shell_command` `tool_input.command`.
//!
//! Parsing is strict where a write is at stake (a write tool without a path is
//! an error, so the guard can fail closed) and lenient elsewhere (unknown
//! fields and unknown tools are accepted; unknown tools cannot be analysed).
//! The shell analysis is best effort by nature: see [`shell_targets`].

use serde_json::{Map, Value};
use std::fmt;

mod lex;
mod shell;
pub use shell::{ShellTarget, shell_targets};

/// Which agent CLI's contract an input follows (and its answer must follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// GitHub Copilot CLI.
    Copilot,
    /// Gemini CLI.
    Gemini,
}

impl Format {
    /// `claude`, `codex`, `copilot` or `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Claude => "claude",
            Format::Codex => "codex",
            Format::Copilot => "copilot",
            Format::Gemini => "gemini",
        }
    }

    /// Parses `claude`, `codex`, `copilot` or `gemini`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "claude" => Some(Format::Claude),
            "codex" => Some(Format::Codex),
            "copilot" => Some(Format::Copilot),
            "gemini" => Some(Format::Gemini),
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
    // Gemini CLI.
    "read_file",
    "read_many_files",
    "list_directory",
    "search_file_content",
    "grep_search",
    "google_web_search",
];

/// Guesses the format of a parsed input: Copilot's camelCase `toolName`, or
/// the snake_case `tool_name` of Claude Code, Codex and Gemini CLI (Codex
/// adds `turn_id` and names its edit tool `apply_patch`; Gemini CLI's event
/// is `BeforeTool`).
pub fn detect(object: &Map<String, Value>) -> Option<Format> {
    if object.contains_key("toolName") {
        Some(Format::Copilot)
    } else if object.get("hook_event_name").and_then(Value::as_str) == Some("BeforeTool") {
        Some(Format::Gemini)
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
        // Gemini CLI.
        "write_file" | "replace" => &["file_path", "path"],
        "Bash" | "bash" | "run_shell_command" => {
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

        // Gemini CLI 0.61.0's BeforeTool, as its hook received it.
        let gemini = br#"{"session_id":"s","transcript_path":"/t.jsonl","cwd":"/p","hook_event_name":"BeforeTool","timestamp":"2026-11-29T07:48:11.951Z","tool_name":"write_file","tool_input":{"file_path":"/p/frontend/x.txt","content":"nope"}}"#;
        let call = parse(gemini, None).unwrap();
        assert_eq!(call.format, Format::Gemini);
        assert_eq!(
            call.action,
            Action::Edit {
                paths: vec!["/p/frontend/x.txt".into()]
            }
        );
        let shell = br#"{"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"echo x > y"}}"#;
        assert_eq!(
            parse(shell, None).unwrap().action,
            Action::Shell {
                command: "echo x > y".into()
            }
        );
        let read = br#"{"hook_event_name":"BeforeTool","tool_name":"read_file","tool_input":{"file_path":"/p/a"}}"#;
        assert_eq!(parse(read, None).unwrap().action, Action::Read);
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
