//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod agents;
mod check;
pub mod daemon;
mod errors;
mod guard;
pub mod lock;
mod messages;
mod retention;
mod skills;
mod support;
mod validate;
