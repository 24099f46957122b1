//! # squad-supervisor
//!
//! `squadd`, the supervisor daemon, and `squadctl`, the command line for
//! agents, humans and CI. The binaries are thin: each command is a module of
//! [`ctl`] whose `run` takes parsed arguments and returns an exit code.

pub mod ctl;
pub mod exit;
pub mod root;
