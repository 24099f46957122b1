//! What `squadctl init` writes besides the layout: the commented default
//! policy, and with `--example` a small runnable example (docs/console.md,
//! "A guided first hour").

use super::write::TaskNewArgs;
use crate::root;
use squad_protocol::model::Priority;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The first lines of `.squad/policies.yaml` as `init` writes it.
const POLICY_HEADER: &str = "\
# .squad/policies.yaml: this project's policy, read by squadd and squadctl.
# Written by `squadctl init`.
#
# Every setting is listed below with its shipped default, commented out: as
# written, this file changes nothing. To change a setting, remove the `#` in
# the first column of its line and of its section's line (`#locks:` and
# `#  default_ttl: 15m` become `locks:` and `  default_ttl: 15m`), then edit
# the value.
#
# Mappings merge with the defaults key by key; lists and single values
# replace them. Unknown keys are refused. squadd reloads the file when it
# changes (an invalid edit is refused and the previous policy stays);
# `squadctl validate` checks it. Agents may not change this file.
";

/// The shipped default policy with every setting commented out, under
/// [`POLICY_HEADER`]: valid as it is (it sets nothing), and equal to the
/// defaults once every setting line is uncommented (see [`uncomment`]).
/// Derived from the embedded default, so it never drifts from it.
pub(crate) fn commented_default_policy() -> String {
    let mut out = String::from(POLICY_HEADER);
    // The default's own header (up to the first blank line) is replaced.
    let body = squad_policies::policy::DEFAULT_POLICY
        .split_once("\n\n")
        .map_or(squad_policies::policy::DEFAULT_POLICY, |(_, b)| b);
    out.push('\n');
    for line in body.lines() {
        let t = line.trim_start();
        if t.is_empty() {
            out.push('\n');
        } else if t.starts_with('#') {
            // Explanations stay as they are (indented, so never in column 1
            // as a setting's `#` is, except the top-level ones).
            if let Some(rest) = line.strip_prefix('#') {
                out.push_str("##");
                out.push_str(rest);
            } else {
                out.push_str(line);
            }
            out.push('\n');
        } else {
            let _ = writeln!(out, "#{line}");
        }
    }
    out
}

/// Uncomments the setting lines of [`commented_default_policy`]: a line
/// whose first column is `#` followed by a letter (a section) or by two
/// spaces (a setting inside one). Explanations start with `##` or are
/// indented. Only the test of the example policy needs it.
#[cfg(test)]
fn uncomment(text: &str) -> String {
    text.lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest)
                if rest.starts_with("  ")
                    || rest.starts_with(|c: char| c.is_ascii_alphabetic()) =>
            {
                rest
            }
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The example's fake agent: what a real agent does, by script.
const AGENT_SCRIPT: &str = r#"#!/bin/sh
# The fake agent of `squadctl init --example`. squadd starts it for each ready
# task, with SQUAD_AGENT, SQUAD_TASK, SQUAD_SESSION, SQUAD_ROOT and
# SQUAD_PROMPT_FILE set (docs/runners.md); a real team runs claude, codex or
# copilot here. It reports with squadctl as a real agent would: in progress,
# writes its file (inside the task's boundaries), completed.
# SQUAD_EXAMPLE_PACE: seconds per step (default 4).
set -u
squadctl=${SQUADCTL:-squadctl}
pace=${SQUAD_EXAMPLE_PACE:-4}
out="example/out/$SQUAD_TASK.txt"
"$squadctl" progress --status in_progress --percent 10 --action "reading $SQUAD_PROMPT_FILE" -q || exit 4
sleep "$pace"
mkdir -p "$SQUAD_ROOT/example/out"
echo "$SQUAD_TASK, done by $SQUAD_AGENT (pace ${pace}s)" > "$SQUAD_ROOT/$out"
"$squadctl" progress --status in_progress --percent 60 --action "wrote $out" --artifact "$out" -q || exit 5
sleep "$pace"
"$squadctl" progress --status completed --percent 100 --action "done" -q || exit 6
"#;

/// The example's tasks: id, agent, what, the task it requires.
const TASKS: [(&str, &str, &str, Option<&str>); 3] = [
    (
        "task_001",
        "ada",
        "Design the greeting: write example/out/task_001.txt.",
        None,
    ),
    (
        "task_002",
        "bob",
        "Build the greeting from the design: write example/out/task_002.txt.",
        Some("task_001"),
    ),
    (
        "task_003",
        "cy",
        "Test the greeting: write example/out/task_003.txt.",
        Some("task_002"),
    ),
];

/// Why `init --example` made nothing (or stopped half-way on an I/O error).
#[derive(Debug)]
pub(crate) enum Refused {
    /// The project is not one to lay the example out in (exit 1).
    Refused(String),
    /// A file could not be read or written (exit 2).
    Failed(String),
}

impl From<String> for Refused {
    fn from(s: String) -> Self {
        Refused::Failed(s)
    }
}

/// What `init --example` made.
pub(crate) struct Example {
    /// The files written.
    pub created: Vec<PathBuf>,
    /// The session directory.
    pub session: PathBuf,
}

/// Lays out the example in an initialized project: the fake agent
/// (`example/agent.sh`), a policy whose runner starts it for every agent,
/// a session and three dependent tasks with boundaries. Refuses a project
/// whose policy was edited (it would be replaced) or that has sessions
/// already, before writing anything.
pub(crate) fn lay_out(root: &Path) -> Result<Example, Refused> {
    let root = std::fs::canonicalize(root::fs_path(root))
        .map_err(|e| format!("{}: {e}", root.display()))?;
    let sessions = squad_protocol::tree::session_dirs(&root).unwrap_or_default();
    if !sessions.is_empty() {
        return Err(Refused::Refused(format!(
            "{} has sessions already; make the example in an empty directory (`mkdir demo && cd demo && squadctl init --example`)",
            root.display()
        )));
    }
    let policy = root.join(".squad").join("policies.yaml");
    match squad_protocol::fsx::read_regular_to_string(&policy, 1 << 20) {
        Ok(t) if t == commented_default_policy() => {}
        Ok(_) => {
            return Err(Refused::Refused(format!(
                "{} was edited; --example would replace it. Make the example in an empty directory (`mkdir demo && cd demo && squadctl init --example`)",
                policy.display()
            )));
        }
        Err(squad_protocol::fsx::ReadError::NotFound) => {}
        Err(e) => return Err(Refused::Failed(format!("{}: {e}", policy.display()))),
    }
    let mut created = Vec::new();
    let script = root.join("example").join("agent.sh");
    let (dir, name) = crate::safefs::parent_of(&root, &script, Some(0o755))
        .map_err(|e| format!("{}: {e}", script.display()))?;
    dir.write_atomic(&name, AGENT_SCRIPT.as_bytes(), 0o777)
        .map_err(|e| format!("{}: {e}", script.display()))?;
    created.push(script.clone());
    // squadctl by its own path: the example runs before it is on PATH.
    let squadctl = std::env::current_exe()
        .ok()
        .map_or_else(|| "squadctl".to_string(), |p| p.display().to_string());
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    let text = format!(
        "{}\n\
         # The example (`squadctl init --example`): squadd starts example/agent.sh\n\
         # for each ready task. Delete this section to stop it; docs/runners.md\n\
         # shows entries for claude, codex and copilot.\n\
         # squadd's SQUAD_EXAMPLE_PACE (seconds per step of the fake agent) reaches it.\n\
         runners:\n  dispatch: true\n  pass_env: [SQUAD_EXAMPLE_PACE]\n  agents:\n    \"*\":\n      command: [{}, \"{{prompt_file}}\"]\n      env:\n        SQUADCTL: {}\n      timeout: 5m\n      max_retries: 0\n",
        commented_default_policy(),
        quote(&script.display().to_string()),
        quote(&squadctl)
    );
    crate::safefs::write_atomic(&policy, text.as_bytes())
        .map_err(|e| format!("{}: {e}", policy.display()))?;
    // The policy is not listed: `init` created it just before (or an
    // earlier `init` did, unedited).
    let session = super::session_dir::create_session(&root, Some("example"))?;
    for (id, agent, instruction, requires) in TASKS {
        let args = TaskNewArgs {
            session: Some(session.name.clone()),
            agent: Some(agent.into()),
            id: Some(id.into()),
            instruction: Some(instruction.into()),
            instruction_file: None,
            requires: requires.map(|r| vec![r.to_string()]).unwrap_or_default(),
            blocks: Vec::new(),
            allow: vec![format!("example/out/{id}.txt")],
            forbid: Vec::new(),
            priority: Priority::Medium,
            timeout: Some("5m".into()),
            review: false,
            output: vec![format!("greeting=example/out/{id}.txt")],
            criterion: vec![format!("example/out/{id}.txt exists")],
            file: None,
            json: false,
        };
        let (_, path) = super::write::assign(&root, &args)?;
        created.push(path);
    }
    Ok(Example {
        created,
        session: session.dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use squad_policies::policy::{DEFAULT_POLICY, Policy};

    #[test]
    fn the_commented_policy_is_valid_and_sets_nothing() {
        let text = commented_default_policy();
        assert!(Policy::parse(Some(&text)).is_ok());
        let value: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert!(value.is_null(), "every setting is commented out");
    }

    #[test]
    fn uncommented_it_is_the_shipped_default_every_field() {
        let text = uncomment(&commented_default_policy());
        let ours: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let shipped: serde_yaml::Value = serde_yaml::from_str(DEFAULT_POLICY).unwrap();
        assert_eq!(ours, shipped);
        assert!(Policy::parse(Some(&text)).is_ok());
    }
}
