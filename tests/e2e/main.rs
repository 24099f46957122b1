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
mod retention;
mod runners;
mod skills;
mod support;
mod validate;
