//! End-to-end tests: the real `squadd` and `squadctl` binaries on temporary
//! project roots.

// A test crate: a failed unwrap is a failed test, and its helpers are
// documented where they need it, not by rule.
#![allow(clippy::unwrap_used, missing_docs)]
// Nothing outside this test crate reaches its helpers: `pub` in them is
// no public surface (the workspace's unreachable_pub is for libraries).
#![allow(unreachable_pub)]

mod agents;
mod answers;
mod attention;
mod audit_deliveries;
mod beside;
mod campaign;
mod check;
mod ci_links;
mod cluster;
mod cluster_outputs;
mod core;
pub mod daemon;
mod defaults;
mod errors;
mod first_day;
mod first_hour;
mod flat;
mod gc;
mod git_hooks;
mod guard;
mod guard_doctor;
mod handover;
mod hardening;
mod hardening3;
mod held;
pub mod hooks;
mod hostile;
mod inbox_people;
mod inotify_limits;
mod interop;
mod legacy;
pub mod lock;
mod mailbox;
pub mod mcp;
mod mcp_docs;
mod mcp_http;
mod mcp_stdio;
mod memory;
mod memory_appends;
mod memory_shapes;
mod messages;
mod names;
mod notices;
mod notify;
mod overlap;
mod presence;
mod real_clis;
mod real_clis_gemini;
mod real_clis_worktree;
mod removals;
mod resolve;
mod retention;
mod review;
mod review_resume;
mod runners;
mod security;
mod session_edit;
mod session_locks;
mod skills;
mod stub_model;
mod support;
mod team;
mod team_files;
mod trust;
mod typos;
mod usage;
mod validate;
mod web;
mod web_browser;
mod worktree;
mod worktree_guard;
mod worktree_setup;
