//! Issue 10 (hardening): faults found by attacking squadd and squadctl, each
//! with its regression test through the real binaries.

use crate::support::*;
use std::fs;

/// 100 KB of nested `[` took 22 s to validate (the YAML parser is quadratic
/// in the depth): it is refused unparsed, at the place it passes 64 levels.
#[test]
fn deep_nesting_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let name = "role-plan-backend-task_1.md";
    let text = format!(
        "meta:\n  task_id: task_1\n  agent: backend\n  created_at: 2024-01-15T10:30:00Z\n  priority: high\ninstruction: {}\n",
        "[".repeat(100_000)
    );
    fs::write(dir.path().join(name), text).unwrap();
    let out = run(squadctl()
        .args(["validate", "--color", "never", name])
        .current_dir(dir.path()));
    let printed = stdout(&out);
    assert!(
        printed.contains(&format!(
            "{name}:6:77: error[yaml-syntax]: nesting deeper than 64 levels (not parsed)"
        )),
        "{printed}"
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
}
