//! The team directory of seeds 000–002 (`.squad/`, legacy `.ai-team/`): the
//! roster (`team.md`), routing, ceremonies, each agent's charter and
//! history, the casting state and the alumni; and the portable export file
//! that carries a team from one project to another (docs/team.md).
//!
//! - [`markdown`]: the pure text parts (roster table, `## Project Context`,
//!   charter role, history sections);
//! - [`json`]: strict JSON (duplicate keys refused, nesting bounded, errors
//!   with line and column);
//! - [`read`]: reading and validating a team directory ([`read::read_team`]);
//! - [`bundle`]: the export file in both shapes, and the one name check
//!   ([`bundle::check_name`]) every name that becomes a path goes through.

pub mod bundle;
pub mod json;
pub mod markdown;
pub mod read;

#[cfg(test)]
mod tests;

pub use read::{Agent, Team, Texts, read_team, read_team_with};

/// The largest team file read (a charter, a history, a casting file):
/// real `decisions.md` files reach 300 KB; 16 MiB leaves room and bounds
/// memory.
pub const MAX_TEAM_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The largest export file imported, checked before parsing.
pub const MAX_BUNDLE_BYTES: u64 = 16 * 1024 * 1024;
