//! Exit codes shared by every command.

/// Success: nothing wrong.
pub(crate) const OK: u8 = 0;
/// The command worked and found problems (validation errors, violations, conflicts).
pub(crate) const PROBLEMS: u8 = 1;
/// Usage error or I/O failure: the command could not do its job.
pub(crate) const FAILURE: u8 = 2;
