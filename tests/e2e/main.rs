//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

mod daemon;
mod support;
mod validate;
