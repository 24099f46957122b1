//! # squad-policies
//!
//! The supervisor's decisions as pure functions of (policy, facts, now):
//! nothing here touches the file system, the clock or processes, so every rule
//! is testable with plain values. The I/O that gathers the facts lives in
//! `squad-supervisor`.
//!
//! - [`policy`]: `default.yaml` (embedded) overridden by a project's
//!   `.squad/policies.yaml`;
//! - [`boundary`]: may this path be changed by this task, and which rule says so;
//! - [`locks`]: lock targets, conflicts, staleness;
//! - [`guard`]: the edit-time guard's allow/deny for one tool call;
//! - [`duration`]: `15m`-style durations;
//! - [`skills`]: the skills prompt budget and built-in skill upgrades;
//! - [`memory`]: which team-memory entries an archive moves;
//! - [`hooks`]: how many notify commands run at once, and in which order;
//! - [`session_edit`]: what `session complete|fail|phase|gate` set;
//! - [`notices`]: which notices squadd sends agents for which facts.
//! - [`runners`]: which ready tasks squadd starts, retries and time limits.
//! - [`worktree`]: whether a completed run's worktree branch is merged or held.
//! - [`usage`]: tokens and cost per run from an agent CLI's output;
//! - [`budget`]: `runners.budget`, and how far usage is into one.

#![warn(missing_docs)]

pub mod boundary;
pub mod budget;
pub mod check;
pub mod cluster;
pub mod duration;
pub mod guard;
pub mod guard_doctor;
pub mod hooks;
pub mod locks;
pub mod memory;
pub mod messages;
pub mod notices;
pub mod notify;
pub mod overlap;
pub mod policy;
pub mod retention;
pub mod runners;
pub mod session_edit;
pub mod skills;
pub mod usage;
pub mod worktree;

pub use boundary::{Boundaries, Decision};
pub use policy::Policy;
