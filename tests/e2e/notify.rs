//! `notify:` (issue 44 item 6, docs/daemon.md "Notifications"): squadd
//! POSTs a JSON event to a webhook when "needs attention" grows; a webhook
//! that never answers does not delay squadd's status writes; the secret in
//! the URL never reaches squadd's log.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};

const SECRET: &str = "T000-SECRET-b4d";

/// A project whose runner cannot start (a held run: "needs attention"),
/// told through a webhook at `port`.
fn project(port: u16, timeout: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    init_session(&root, "notify");
    write_policy(
        &root,
        format!(
            "runners:\n  dispatch: true\n  retry_backoff: 1h\n  agents:\n    \"*\":\n      command: [\"/nonexistent/agent-program\"]\n      max_retries: 0\nnotify:\n  webhook: \"http://127.0.0.1:{port}/hooks/{SECRET}?token={SECRET}\"\n  timeout: {timeout}\n  retries: 0\n"
        ),
    );
    (tmp, root)
}

/// Reads one HTTP request: (request line, JSON body).
fn read_request(s: &mut TcpStream) -> (String, Value) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "the request ended early: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap();
            if buf.len() >= end + 4 + length {
                let body = serde_json::from_slice(&buf[end + 4..end + 4 + length]).unwrap();
                return (text.lines().next().unwrap().to_string(), body);
            }
        }
    }
}

fn wait_for_watch(d: &Daemon) {
    eventually("the notifier watches", || {
        d.log().contains("notifier watching").then_some(())
    });
}

fn held_task(root: &Path, id: &str) {
    ok(task_new(
        root,
        &["--id", id, "--agent", "backend", "--instruction", "x"],
    ));
}

#[test]
fn a_loopback_webhook_receives_the_json_event_of_a_held_run() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let mut s = s.unwrap();
            let got = read_request(&mut s);
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
            if tx.send(got).is_err() {
                return;
            }
        }
    });
    let (_tmp, root) = project(port, "5s");
    let d = Daemon::start(&root);
    wait_for_watch(&d);
    held_task(&root, "task_1");
    let (line, body) = eventually("the webhook is told", || {
        rx.recv_timeout(std::time::Duration::from_millis(200)).ok()
    });
    assert_eq!(
        line,
        format!("POST /hooks/{SECRET}?token={SECRET} HTTP/1.1"),
        "{body:#}"
    );
    assert_eq!(body["event"], "needs-attention", "{body:#}");
    assert_eq!(body["kind"], "run-held", "{body:#}");
    assert_eq!(body["task"], "task_1", "{body:#}");
    for k in ["text", "content", "message"] {
        let t = body[k].as_str().unwrap_or_default();
        assert!(
            t.contains("task_1") && t.contains("squadctl"),
            "{k}: {body:#}"
        );
    }
    // One event per new item: the same held run is not told again.
    // Stays: two more looks of the notifier (1 s apart) must not send it
    // again, and an absence has no event to wait for.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(rx.try_recv().is_err(), "told twice");
    let log = d.log();
    assert!(log.contains("notification sent"), "{log}");
    assert!(log.contains("http://127.0.0.1"), "{log}");
    assert!(
        !log.contains(SECRET),
        "the URL's secret is in squadd's log:\n{log}"
    );
}

/// A webhook that accepts and never answers: squadd's status writes go on.
#[test]
fn a_webhook_that_never_answers_does_not_delay_status_writes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx): (_, Receiver<()>) = channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            // Accepted, read, never answered, never closed.
            held.push(s.unwrap());
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    let (_tmp, root) = project(port, "60s");
    let d = Daemon::start(&root);
    wait_for_watch(&d);
    held_task(&root, "task_1");
    eventually("the webhook hangs on the first event", || {
        rx.recv_timeout(std::time::Duration::from_millis(200)).ok()
    });
    // While it hangs (60 s allowed), squadd writes the session's status
    // for a new task.
    let t = std::time::Instant::now();
    held_task(&root, "task_2");
    let session = crate::worktree::walk(&root.join(".squad/sessions"))
        .into_iter()
        .find(|f| f.ends_with("session-status.md"))
        .and_then(|f| f.parent().map(Path::to_path_buf))
        .unwrap();
    eventually("session-status.md counts task_2", || {
        crate::daemon::counters(&session).filter(|(_, total, _)| *total == 2)
    });
    assert!(
        t.elapsed() < std::time::Duration::from_secs(30),
        "the status write waited for the webhook"
    );
    assert!(!d.log().contains("notification sent"));
}
