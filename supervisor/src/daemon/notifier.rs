//! squadd's notifier (`notify:`, docs/daemon.md "Notifications"): a thread
//! per root that looks at what needs attention (the model `squadctl
//! status` shows, built from the files) every [`LOOK_EVERY`], and a
//! sender thread that tells the lead of each new item: a desktop
//! notification and/or a webhook POST, each with a short timeout and
//! bounded retries. Neither thread is squadd's loop: a webhook that hangs
//! delays only the next notification, never a status write.

use crate::attention::{Facts, Item, needs_attention};
use crate::notify::{curl_config, grown, payload, redact, text};
use squad_policies::notify::NotifyPolicy;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

/// How often the notifier looks.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Notifications waiting for the sender at most; more are dropped (logged).
const QUEUE: usize = 64;

/// One notification to send.
struct Job {
    policy: NotifyPolicy,
    text: String,
    body: String,
}

/// Starts the notifier of `root` (its threads live as long as squadd).
pub(crate) fn start(root: PathBuf) {
    let (tx, rx) = sync_channel::<Job>(QUEUE);
    let spawned = std::thread::Builder::new()
        .name("squadd-notify-send".into())
        .spawn(move || send_all(rx))
        .and_then(|_| {
            std::thread::Builder::new()
                .name("squadd-notify".into())
                .spawn(move || watch(&root, &tx))
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the notifier; `notify:` is not carried out");
    }
}

/// What needs attention in `root`, as `squadctl status` would say with
/// squadd's view of the files.
fn items(root: &Path) -> Option<Vec<Item>> {
    let now = chrono::Utc::now();
    let report = crate::status::report_from_files(root, None, 1, now).ok()?;
    let report = crate::status::StatusReport {
        daemon: crate::status::DaemonReport::Down {
            reason: String::new(),
        },
        roots: vec![report],
    };
    let records = crate::runners::all_records(root);
    let branches = crate::attention::held_branches(root, &records);
    let runs: Vec<crate::runners::RunRecord> = records.into_iter().map(|(_, r)| r).collect();
    let errors = |(found, _): (Vec<squad_protocol::Diagnostic>, usize)| -> Vec<String> {
        found
            .iter()
            .filter(|d| d.is_error())
            .map(|d| format!("{}: {}: {}", d.path.display(), d.rule.id(), d.message))
            .collect()
    };
    let policy_errors = errors(crate::locks::policy_diagnostics(root));
    let config_errors = errors(crate::runners::config_diagnostics(root));
    let presence = crate::agent_presence::read_all(root);
    Some(needs_attention(&Facts {
        report: Some(&report),
        runs: &runs,
        policy_errors: &policy_errors,
        config_errors: &config_errors,
        session_budget: crate::locks::load_policy(root)
            .map(|p| p.runners.budget.session)
            .unwrap_or_default(),
        presence: &presence,
        config: Some(&crate::daemon::runs::load_config(root).0),
        branches: &branches,
    }))
}

/// The look loop. The first look with `notify:` on takes what needs
/// attention as known (what was there before is not news).
fn watch(root: &Path, tx: &SyncSender<Job>) {
    let mut seen: Option<BTreeSet<String>> = None;
    let shown = root.display().to_string();
    loop {
        let policy = crate::locks::load_policy(root)
            .map(|p| p.notify)
            .unwrap_or_default();
        if !policy.any() {
            seen = None;
        } else if let Some(now) = items(root) {
            match &seen {
                None => {
                    tracing::info!(
                        root = %shown,
                        known = now.len(),
                        "notifier watching what needs attention"
                    );
                    seen = Some(now.iter().map(crate::notify::key).collect());
                }
                Some(before) => {
                    let (new, keys) = grown(before, &now);
                    let at = chrono::Utc::now();
                    for item in new {
                        let job = Job {
                            policy: policy.clone(),
                            text: text(&shown, item),
                            body: payload(&shown, item, at).to_string(),
                        };
                        match tx.try_send(job) {
                            Ok(()) => {}
                            Err(TrySendError::Full(_)) => tracing::warn!(
                                kind = %item.kind,
                                "notifications are backed up (a slow webhook?); one dropped"
                            ),
                            Err(TrySendError::Disconnected(_)) => return,
                        }
                    }
                    seen = Some(keys);
                }
            }
        }
        // The notifier's own pace; it is not squadd's loop.
        std::thread::sleep(LOOK_EVERY);
    }
}

fn send_all(rx: Receiver<Job>) {
    for job in rx {
        if job.policy.desktop {
            desktop(&job.text, job.policy.timeout);
        }
        if let Some(url) = &job.policy.webhook {
            webhook(url, &job.body, &job.policy);
        }
    }
}

/// `program` on squadd's PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Runs `cmd` (the cleared environment) to its end within `limit`; its
/// exit code, or why not.
fn run_within(mut cmd: Command, stdin: Option<&str>, limit: Duration) -> Result<i32, String> {
    let mut env = crate::child_env::cleared(std::env::vars_os(), &[]);
    // A desktop notification needs the session's bus and display.
    for k in [
        "DBUS_SESSION_BUS_ADDRESS",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XDG_RUNTIME_DIR",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.insert(k.into(), v);
        }
    }
    let mut child = cmd
        .env_clear()
        .envs(env)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => {
                let mut said = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut said);
                }
                return match s.code() {
                    Some(0) => Ok(0),
                    Some(c) => Err(format!("exited {c}: {}", said.trim())),
                    None => Err("killed".into()),
                };
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {:?}", limit));
            }
        }
    }
}

fn desktop(text: &str, limit: Duration) {
    let cmd = if let Some(p) = on_path("notify-send") {
        let mut c = Command::new(p);
        c.args(["--app-name=squad", "squad: needs attention", text]);
        c
    } else if let Some(p) = on_path("osascript") {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut c = Command::new(p);
        c.arg("-e").arg(format!(
            "display notification \"{}\" with title \"squad: needs attention\"",
            esc(text)
        ));
        c
    } else {
        tracing::debug!("notify.desktop: neither notify-send nor osascript is on PATH");
        return;
    };
    if let Err(e) = run_within(cmd, None, limit) {
        tracing::warn!(error = %e, "desktop notification failed");
    }
}

/// POSTs `body` to `url`, trying again after 1 s, 2 s, … up to
/// `policy.retries` times. Only the URL's scheme and host are logged.
fn webhook(url: &str, body: &str, policy: &NotifyPolicy) {
    let shown = redact(url);
    for attempt in 0..=policy.retries {
        let result = if url.starts_with("http://") {
            post_http(url, body, policy.timeout)
        } else {
            post_curl(url, body, policy.timeout)
        };
        match result {
            Ok(()) => {
                tracing::info!(webhook = %shown, attempt, "notification sent");
                return;
            }
            Err(e) => {
                tracing::warn!(webhook = %shown, attempt, error = %e, "webhook failed");
            }
        }
        if attempt < policy.retries {
            std::thread::sleep(Duration::from_secs(1 << attempt.min(4)));
        }
    }
}

/// An `https://` POST through `curl` (the URL on its stdin).
fn post_curl(url: &str, body: &str, limit: Duration) -> Result<(), String> {
    let Some(curl) = on_path("curl") else {
        return Err("an https:// webhook needs `curl` on squadd's PATH".into());
    };
    let mut c = Command::new(curl);
    c.args(["--config", "-"]);
    let config = curl_config(url, body, limit.as_secs_f64());
    run_within(c, Some(&config), limit + Duration::from_secs(1)).map(drop)
}

/// An `http://` POST over a plain socket, every step within `limit`; a
/// 2xx answer is success. What the server says is never logged whole (an
/// error quotes its status line only).
fn post_http(url: &str, body: &str, limit: Duration) -> Result<(), String> {
    use std::net::{TcpStream, ToSocketAddrs};
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let with_port = if host
        .rsplit(':')
        .next()
        .is_some_and(|p| p.parse::<u16>().is_ok())
        && !host.ends_with(']')
    {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the host: {e}"))?
        .next()
        .ok_or("the host has no address")?;
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(limit))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: squadd/{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).map_err(|e| format!("no answer: {e}"))?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.lines().next().unwrap_or("").trim();
    match status.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(()),
        _ => Err(format!(
            "answered `{}`",
            crate::text::escape(status)
                .chars()
                .take(60)
                .collect::<String>()
        )),
    }
}
