//! Issue 26 (hardening III): faults found by attacking squadd and squadctl,
//! each with its regression test through the real binaries.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;

const S: &str = "20240115T100000Z-harden3";

/// Issue 26 item 9: squadd re-parsed a file's raw text to place its
/// anchored fields (`meta.task_id`, `meta.agent`) at index time, skipping
/// the depth check the validator makes: one 100 KB deeply nested progress
/// file stopped the socket for minutes. Now it is refused unparsed there
/// too, and a critical message written right after it is delivered while
/// the status request answers.
#[test]
fn a_deeply_nested_progress_file_does_not_stall_delivery() {
    let (tmp, s) = quiet_two_agent_project(S);
    let root = tmp.path();
    let _d = Daemon::start(root);
    fs::write(
        s.join("role-comm-alice-task_alice.md"),
        format!(
            "meta:\n  task_id: task_alice\n  agent: alice\n  updated_at: 2024-01-15T11:00:00Z\nstatus: in_progress\nnotes: {}\n",
            "[".repeat(100_000)
        ),
    )
    .unwrap();
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification("msg_1", "critical", "2024-01-15T10:00:00Z", "s", "m"),
    );
    let inbox = s.join("inbox/bob/new");
    eventually("the critical message delivered", || {
        fs::read_dir(&inbox)
            .ok()?
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with("msg_1.md"))
            .then_some(())
    });
    // The deep file is reported where it passes 64 levels, unparsed.
    let v = status_json(root);
    let text = v.to_string();
    assert!(
        text.contains("nesting deeper than 64 levels (not parsed)"),
        "{text}"
    );
}
