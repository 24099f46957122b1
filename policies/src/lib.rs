//! # squad-policies
//!
//! The supervisor's decisions as pure functions of (policy, facts, now):
//! nothing here touches the file system, the clock or processes, so every rule
//! is testable with plain values.
