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

pub(crate) mod agent_presence;
pub(crate) mod attention;
pub(crate) mod audit;
pub(crate) mod canon;
pub(crate) mod changes;
pub(crate) mod child_env;
pub(crate) mod cluster;
pub(crate) mod control;
pub mod ctl;
pub mod daemon;
pub(crate) mod derive;
pub(crate) mod events;
pub(crate) mod exit;
pub(crate) mod inbox;
pub(crate) mod index;
pub(crate) mod layout;
pub(crate) mod locks;
pub(crate) mod memory;
pub(crate) mod notice_ids;
pub(crate) mod notify;
pub(crate) mod outputs;
pub(crate) mod retention;
pub mod root;
pub(crate) mod runners;
pub(crate) mod safefs;
pub(crate) mod session_edit;
pub mod skills;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod team;
pub(crate) mod text;
pub(crate) mod verbosity;
pub(crate) mod worktree;
pub(crate) mod worktree_start;
