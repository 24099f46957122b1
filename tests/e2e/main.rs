//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod agents;
mod answers;
mod attention;
mod check;
mod core;
pub mod daemon;
mod errors;
mod gc;
mod guard;
mod hardening;
mod held;
mod hooks;
mod hostile;
mod interop;
pub mod lock;
mod mailbox;
mod memory;
mod messages;
mod notices;
mod removals;
mod retention;
mod runners;
mod session_edit;
mod session_locks;
mod skills;
mod support;
mod team;
mod trust;
mod validate;
