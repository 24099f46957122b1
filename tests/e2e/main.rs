//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod agents;
mod check;
mod core;
pub mod daemon;
mod errors;
mod guard;
mod hardening;
pub mod lock;
mod memory;
mod messages;
mod notices;
mod retention;
mod session_edit;
mod skills;
mod support;
mod validate;
