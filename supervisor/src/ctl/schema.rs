//! `squadctl schema`.

use crate::exit;
use squad_protocol::FileKind;
use squad_protocol::schema::{all_schemas, schema};
use std::path::PathBuf;

/// A kind of file with a schema: a protocol file kind, or `config`
/// (`.squad/config.json`, docs/runners.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    /// A protocol file kind.
    File(FileKind),
    /// `.squad/config.json`.
    Config,
}

fn parse_kind(s: &str) -> Result<SchemaKind, String> {
    if s == "config" {
        return Ok(SchemaKind::Config);
    }
    FileKind::from_name(s).map(SchemaKind::File).ok_or_else(|| {
        let names: Vec<&str> = FileKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("unknown kind `{s}`; kinds: {}, config", names.join(", "))
    })
}

/// Print the JSON Schema (draft-07) of a protocol file kind.
///
/// Kinds: session-status, task-assignment (alias role-plan), progress-update
/// (alias role-comm), message, error-report (alias error), and config
/// (`.squad/config.json`, not a protocol file). Without KIND, prints
/// one object holding every kind's schema.
///
/// With the YAML language server, point a glob at a schema file, e.g. in VS
/// Code settings: "yaml.schemas": {"./schemas/task-assignment.json":
/// ".squad/sessions/*/role-plan-*.md"}.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The kind; omit for all kinds.
    #[arg(value_name = "KIND", value_parser = parse_kind)]
    pub kind: Option<SchemaKind>,

    /// Write one `<kind>.json` file per kind into DIR instead of printing.
    #[arg(long, value_name = "DIR", conflicts_with = "kind")]
    pub out_dir: Option<PathBuf>,
}

/// Runs `squadctl schema`.
pub(crate) fn run(args: Args) -> u8 {
    if let Some(dir) = args.out_dir {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return super::fail(format!("{}: {e}", dir.display()));
        }
        for kind in FileKind::ALL {
            let path = dir.join(format!("{kind}.json"));
            let text = format!("{:#}\n", schema(kind));
            if let Err(e) = squad_protocol::write_atomic(&path, text.as_bytes()) {
                return super::fail(format!("{}: {e}", path.display()));
            }
            if super::print(&format!("{}\n", path.display())) != exit::OK {
                return exit::FAILURE;
            }
        }
        return exit::OK;
    }
    let value = match args.kind {
        Some(SchemaKind::File(kind)) => schema(kind),
        Some(SchemaKind::Config) => squad_protocol::config::schema(),
        None => all_schemas(),
    };
    super::print(&format!("{value:#}\n"))
}
