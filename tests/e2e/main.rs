//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod check;
mod daemon;
mod lock;
mod support;
mod validate;
