//! # squad-protocol
//!
//! The squad file protocol (docs/protocol.md): the five file kinds, how they
//! are read from `.md` files, every validation rule with a stable id, and the
//! atomic write every supervisor output goes through.
//!
//! No daemon, no async runtime: pure functions over bytes and paths, so every
//! consumer (the daemon, `squadctl`, CI) gets the same answers.
//!
//! ```
//! use squad_protocol::{check_text, FileKind, Rule};
//! use std::path::Path;
//!
//! let text = "meta:\n  task_id: task_1\n  agent: backend\n  created_at: 2024-01-15T10:30:00Z\n  priority: urgent\ninstruction: Build it\n";
//! let report = check_text(Path::new("role-plan-backend-task_1.md"), FileKind::TaskAssignment, text);
//! let d = &report.diagnostics[0];
//! assert_eq!(d.rule, Rule::BadEnum);
//! assert_eq!((d.location.unwrap().line, d.location.unwrap().column), (5, 13));
//! ```

#![warn(missing_docs)]

pub mod atomic;
pub mod config;
pub mod depth;
pub mod diagnostic;
pub mod fsx;
pub mod hook;
pub mod ids;
pub mod kind;
pub mod locate;
pub mod memory;
pub mod model;
pub mod payload;
pub mod report;
pub mod schema;
pub mod session;
pub mod skill;
pub mod spec;
pub mod suggest;
pub mod team;
pub mod teamdir;
pub mod text;
pub mod tree;
pub mod validate;

pub use atomic::{write_atomic, write_atomic_with};
pub use diagnostic::{Diagnostic, Location, Rule, Severity};
pub use ids::IdKind;
pub use kind::FileKind;
pub use model::Document;
pub use validate::{FileReport, MAX_FILE_BYTES, check_bytes, check_file, check_text};
