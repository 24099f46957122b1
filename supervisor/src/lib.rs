//! # squad-supervisor
//!
//! `squadd`, the supervisor daemon, and `squadctl`, the command line for
//! agents, humans and CI. The binaries are thin: each `squadctl` command is a
//! module of [`ctl`] whose `run` takes parsed arguments and returns an exit
//! code; the daemon is [`daemon::run`].
//!
//! Data flows one way: files → [`index`] (pure per file) → [`derive`] (pure
//! per session) → [`outputs`] (pure rendering) → atomic writes, [`events`]
//! and the [`audit`] log.

// An item is `pub` only where the binaries or tests can reach it.
#![warn(unreachable_pub)]

pub mod attention;
pub mod audit;
pub mod cluster;
pub mod control;
pub mod ctl;
pub mod daemon;
pub mod derive;
pub mod events;
pub mod exit;
pub mod inbox;
pub mod index;
pub mod layout;
pub mod locks;
pub mod memory;
pub mod outputs;
pub mod retention;
pub mod root;
pub mod runners;
pub mod safefs;
pub mod session_edit;
pub mod skills;
pub mod state;
pub mod status;
pub mod team;
pub mod text;
pub mod worktree;
