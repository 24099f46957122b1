//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod check;
pub mod daemon;
mod guard;
mod lock;
mod messages;
mod retention;
mod support;
mod validate;
