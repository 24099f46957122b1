//! The command line's documentation, kept true (issue 28 item 7):
//!
//! - every `--help` (squadctl, each of its subcommands at every depth, and
//!   squadd) is compared with its snapshot under `tests/snapshots/help/`;
//! - every `squadctl …` line in README.md's code blocks parses with the
//!   real command line definition, and the Quick start and "Using
//!   squadctl" commands run against a scratch project.
//!
//! After an intended change of a help text, update the snapshots with
//!
//! ```sh
//! SNAPSHOTS=overwrite cargo test -p squad-supervisor --test cli_docs
//! ```
//!
//! and review the diff (CONTRIBUTING.md).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use clap::CommandFactory;
use snapbox::{Assert, Data};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn snapshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/help")
}

fn overwrite() -> bool {
    std::env::var("SNAPSHOTS").as_deref() == Ok("overwrite")
}

/// The snapshot file `name`; when overwriting, a new command's is created
/// (snapbox overwrites only a file it could read).
fn snapshot(name: &str) -> Data {
    let path = snapshots().join(name);
    if overwrite() && !path.exists() {
        std::fs::create_dir_all(snapshots()).unwrap();
        std::fs::write(&path, "").unwrap();
    }
    Data::read_from(&path, None)
}

/// A binary with a clean, fixed environment: no SQUAD_* variable (clap
/// prints an `env` argument's current value in the help), 100 columns.
fn bin(exe: &str) -> Command {
    let mut c = Command::new(exe);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("COLUMNS", "100")
        .env("LINES", "50");
    c
}

/// Every subcommand path of squadctl (`[]` is squadctl itself).
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        out.push(path.clone());
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            path.push(sub.get_name().to_string());
            walk(sub, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(
        &squad_supervisor::ctl::Cli::command(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "--help failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn every_help_text_matches_its_snapshot() {
    let assert = Assert::new().action_env("SNAPSHOTS");
    let dir = snapshots();
    let mut expected = Vec::new();
    for path in command_paths() {
        let name = std::iter::once("squadctl".to_string())
            .chain(path.iter().cloned())
            .collect::<Vec<_>>()
            .join("-")
            + ".txt";
        let actual = text(
            &bin(env!("CARGO_BIN_EXE_squadctl"))
                .args(&path)
                .arg("--help")
                .output()
                .unwrap(),
        );
        assert.eq(actual, snapshot(&name));
        expected.push(name);
    }
    let actual = text(
        &bin(env!("CARGO_BIN_EXE_squadd"))
            .arg("--help")
            .output()
            .unwrap(),
    );
    assert.eq(actual, snapshot("squadd.txt"));
    expected.push("squadd.txt".into());
    // No snapshot of a command that is gone.
    let stale: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !expected
                .iter()
                .any(|n| p.file_name().is_some_and(|f| f == n.as_str()))
        })
        .collect();
    if overwrite() {
        for p in &stale {
            std::fs::remove_file(p).unwrap();
        }
    } else {
        assert!(
            stale.is_empty(),
            "snapshots of commands that no longer exist: {stale:?} (SNAPSHOTS=overwrite removes them)"
        );
    }
}

/// The `squadctl …` lines of README.md's code blocks, comments removed, with
/// the heading of the section each is in.
fn readme_commands() -> Vec<(String, String)> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let mut out = Vec::new();
    let (mut in_code, mut section) = (false, String::new());
    for line in readme.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            if let Some(h) = line.strip_prefix("## ") {
                section = h.to_string();
            }
            continue;
        }
        let l = line.trim();
        if l.starts_with("squadctl ") {
            out.push((section.clone(), l.to_string()));
        }
    }
    out
}

/// The command line without its environment fallbacks (`SQUAD_AGENT`
/// would stand in for a flag README's example must show).
fn without_env(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.env(clap::builder::Resettable::Reset))
        .mut_subcommands(without_env)
}

#[test]
fn every_squadctl_line_of_the_readme_parses() {
    let lines = readme_commands();
    assert!(lines.len() > 30, "{lines:?}");
    let cli = without_env(squad_supervisor::ctl::Cli::command());
    let mut bad = Vec::new();
    for (_, line) in &lines {
        let words = shlex::split(line).unwrap_or_else(|| panic!("not shell words: {line}"));
        if let Err(e) = cli.clone().try_get_matches_from(&words)
            && !matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            )
        {
            bad.push(format!("{line}\n  {}", e.render().to_string().trim()));
        }
    }
    assert!(
        bad.is_empty(),
        "README commands that squadctl refuses:\n{}",
        bad.join("\n")
    );
}

/// README commands not run here, and why (each is run by an e2e test).
const NOT_RUN: &[(&str, &str)] = &[
    (
        "squadctl top",
        "interactive; tests/e2e/attention.rs runs it in tmux",
    ),
    (
        "squadctl events --follow",
        "never ends; tests/e2e/daemon.rs follows events",
    ),
    (
        "squadctl inbox next backend --wait",
        "waits for squadd's delivery; tests/e2e/mailbox.rs",
    ),
    (
        "squadctl --root . service install",
        "writes into the user's systemd directory; tests/e2e/defaults.rs",
    ),
    (
        "squadctl check --base",
        "needs a git history with origin/main; tests/e2e/check.rs",
    ),
    (
        "squadctl health",
        "asks a running squadd; tests/e2e/daemon.rs",
    ),
    (
        "squadctl hooks install",
        "needs a git repository; tests/e2e/hooks.rs",
    ),
    (
        "squadctl web",
        "serves until stopped (and --open starts a browser); tests/e2e/web.rs",
    ),
];

/// The Quick start and "Using squadctl" commands, in order, each section
/// in its own scratch project (`init --example`, which wants an empty
/// directory, in one of its own): none fails as a usage or I/O error
/// (exit 2) but where README's example names (sessions from 2024) are not
/// in the scratch project, none panics.
#[test]
fn the_readme_commands_run() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let mut ran = 0;
    for (section, line) in readme_commands() {
        if section != "Quick start" && section != "Using squadctl" {
            continue;
        }
        if NOT_RUN.iter().any(|(p, _)| line.starts_with(p)) {
            continue;
        }
        let root = if line.starts_with("squadctl init --example") {
            base.join(format!("example-{ran}"))
        } else {
            base.join(section.replace(' ', "-"))
        };
        std::fs::create_dir_all(&root).unwrap();
        let mut words = shlex::split(&line).unwrap();
        words.remove(0);
        // The Quick start's project is the scratch directory.
        let words: Vec<String> = words
            .into_iter()
            .map(|w| w.replace("/path/to/project", &root.display().to_string()))
            .collect();
        let out = bin(env!("CARGO_BIN_EXE_squadctl"))
            .env("HOME", base.join("home"))
            .current_dir(&root)
            .args(&words)
            .output()
            .unwrap();
        let code = out.status.code();
        let explained = line.contains("20240115T100000Z");
        assert!(
            matches!(code, Some(0 | 1)) || (explained && code == Some(2)),
            "{line}: exit {code:?}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran > 20, "{ran}");
}
