//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod check;
mod core;
pub mod daemon;
mod lock;
mod messages;
mod retention;
mod support;
mod validate;
