//! Helpers shared by the end-to-end tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `squadctl` binary under test, with an environment that cannot leak
/// the developer's settings into the test.
pub fn squadctl() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_squadctl"));
    cmd.env_remove("SQUAD_ROOT").env_remove("NO_COLOR");
    cmd
}

/// `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// Runs a command and returns its output, failing the test if it could not start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the binary starts")
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The exit code (-1 when killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Copies a directory tree (fixtures into temporary roots).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A project with one active session `session` in which `alice` and `bob`
/// each have one high-priority task (`task_alice`, `task_bob`); returns the
/// session directory.
pub fn two_agent_session(root: &Path, session: &str) -> PathBuf {
    let s = root.join(".squad/sessions").join(session);
    std::fs::create_dir_all(&s).unwrap();
    std::fs::create_dir_all(root.join(".squad/run")).unwrap();
    std::fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for agent in ["alice", "bob"] {
        std::fs::write(
            s.join(format!("role-plan-{agent}-task_{agent}.md")),
            format!("meta:\n  task_id: task_{agent}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\n"),
        )
        .unwrap();
    }
    s
}

/// A policy turning off every notice squadd sends agents, for tests that
/// count what inboxes hold (notices are tested in notices.rs).
pub const NO_NOTICES: &str = "notices:\n  task_ready: false\n  task_overdue: false\n  file_invalid: false\n  dependency_violation: false\n";

/// squadctl in `root`, with none of the agent environment (`SQUAD_AGENT`,
/// `SQUAD_TASK`, `SQUAD_SESSION`) leaking in from the test's own.
pub fn ctl(root: &Path) -> Command {
    let mut c = squadctl();
    c.current_dir(root)
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .env_remove("SQUAD_SESSION");
    c
}

/// The stdout of a command that must have succeeded (exit 0); its output
/// is in the failure message otherwise.
pub fn ok(out: Output) -> String {
    assert_eq!(
        code(&out),
        0,
        "stdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}
