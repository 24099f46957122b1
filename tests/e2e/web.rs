//! `squadctl web` (issue 45, docs/web.md): the real binary on a temp root,
//! asked over raw HTTP as a browser (or a hostile page, or another local
//! program) would ask. Security first: no token, a wrong one, a foreign
//! Host or Origin, a GET meant to act, a path climbing out — all 403, and
//! the socket is on 127.0.0.1 only. Then what the pages show and that a
//! change reaches the event stream, with squadd running and without.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// A running `squadctl web --port 0`; stopped when dropped.
struct Web {
    child: std::process::Child,
    port: u16,
    token: String,
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Web {
    fn start(root: &Path) -> Web {
        let mut child = ctl_root(root)
            .args(["web", "--port", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().map(|l| l.unwrap()).unwrap_or_default();
        std::thread::spawn(move || lines.for_each(drop));
        let url = first
            .strip_prefix("squadctl web: serving ")
            .unwrap_or_else(|| panic!("no URL announced: {first:?}"))
            .to_string();
        let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
        let (port, token) = rest.split_once("/?token=").unwrap();
        assert_eq!(token.len(), 64, "{url}");
        Web {
            child,
            port: port.parse().unwrap(),
            token: token.to_string(),
        }
    }

    fn cookie(&self) -> String {
        format!("Cookie: squad_web_{}={}\r\n", self.port, self.token)
    }

    fn host(&self) -> String {
        format!("Host: 127.0.0.1:{}\r\n", self.port)
    }

    /// The raw answer to `method path` with exactly `headers` (plus
    /// `Connection: close`).
    fn raw(&self, method: &str, path: &str, headers: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\n{headers}Connection: close\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// The raw answer to a form POST of `body` to `path` with `headers`.
    fn post(&self, path: &str, headers: &str, body: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.1\r\n{headers}Connection: close\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// The status code of `raw`.
    fn status(&self, method: &str, path: &str, headers: &str) -> u16 {
        let answer = self.raw(method, path, headers);
        answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status: {answer}"))
    }

    /// The body of a GET with the cookie, asserting 200.
    fn page(&self, path: &str) -> String {
        let answer = self.raw("GET", path, &format!("{}{}", self.host(), self.cookie()));
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default()
    }

    /// An open event stream, after `last` when given.
    fn events(&self, last: Option<u64>) -> Events {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let last = last.map_or(String::new(), |l| format!("Last-Event-ID: {l}\r\n"));
        write!(
            s,
            "GET /events HTTP/1.1\r\n{}{}{last}Accept: text/event-stream\r\n\r\n",
            self.host(),
            self.cookie()
        )
        .unwrap();
        Events {
            stream: s,
            seen: String::new(),
        }
    }
}

/// An event stream being read.
struct Events {
    stream: TcpStream,
    seen: String,
}

impl Events {
    /// Reads until `what` has come (or 30 s passed); returns everything
    /// read so far.
    fn until(&mut self, what: &str) -> String {
        let start = Instant::now();
        while !self.seen.contains(what) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no {what:?} in the stream: {}",
                self.seen
            );
            let mut buf = [0u8; 4096];
            match self.stream.read(&mut buf) {
                Ok(0) => panic!("the stream ended: {}", self.seen),
                Ok(n) => self.seen.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(_) => {} // the read timeout: look again
            }
        }
        self.seen.clone()
    }

    /// The ids of the change events read so far.
    fn ids(&self) -> Vec<u64> {
        self.seen
            .lines()
            .filter_map(|l| l.strip_prefix("id: ")?.trim().parse().ok())
            .collect()
    }
}

/// The session of [`project`].
const S: &str = "20240115T100000Z-demo";

/// A root with session [`S`]: `task_a` (alice), `task_b` (bob) waiting for
/// it.
fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    ctl_ok(&root, &["init"]);
    let s = root.join(".squad/sessions").join(S);
    std::fs::create_dir_all(&s).unwrap();
    std::fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    write_plan(&s, "task_a", "alice", "");
    write_plan(&s, "task_b", "bob", "dependencies:\n  requires: [task_a]\n");
    (tmp, root)
}

/// The column the board shows `task`'s card in.
fn column_of(board: &str, task: &str) -> Option<String> {
    let at = board.find(&format!("id=\"card-{task}\""))?;
    let rest = &board[at..];
    let col = rest.split("data-column=\"").nth(1)?;
    Some(col.split('"').next()?.to_string())
}

fn progress(root: &Path, agent: &str, task: &str, status: &str) {
    ok(run(ctl(root)
        .env("SQUAD_AGENT", agent)
        .args(["progress", "--task", task, "--status", status])));
}

#[test]
fn web_refuses_requests_without_the_token_from_other_hosts_or_origins_and_gets_that_act() {
    let (_tmp, root) = project();
    let web = Web::start(&root);
    let (host, cookie) = (web.host(), web.cookie());
    // No token, a wrong token, a wrong cookie: 403.
    assert_eq!(web.status("GET", "/", &host), 403);
    assert_eq!(web.status("GET", &format!("/s/{S}"), &host), 403);
    assert_eq!(web.status("GET", "/events", &host), 403);
    assert_eq!(web.status("GET", "/?token=00", &host), 403);
    assert_eq!(
        web.status(
            "GET",
            "/",
            &format!("{host}Cookie: squad_web_{}=00\r\n", web.port)
        ),
        403
    );
    // The printed URL sets the cookie and leaves the address bar clean.
    let first = web.raw("GET", &format!("/s/{S}?token={}", web.token), &host);
    assert!(first.starts_with("HTTP/1.1 303"), "{first}");
    assert!(first.contains(&format!("location: /s/{S}\r\n")), "{first}");
    let set = first
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("{first}"));
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    assert_eq!(web.status("GET", "/", &format!("{host}{cookie}")), 200);
    // Another Host (DNS rebinding) or Origin (a page elsewhere): 403.
    for bad in [
        format!("Host: evil.example:{}\r\n{cookie}", web.port),
        format!("Host: 127.0.0.1:1\r\n{cookie}"),
        format!("{host}{cookie}Origin: http://evil.example\r\n"),
        format!("{host}{cookie}Origin: null\r\n"),
        cookie.clone(),
    ] {
        assert_eq!(web.status("GET", "/", &bad), 403, "{bad}");
    }
    // An action: never by GET, and by POST only from the page's origin.
    let before = snapshot(&root.join(".squad"));
    assert_eq!(
        web.status(
            "GET",
            &format!("/s/{S}/t/task_a/do/stop"),
            &format!("{host}{cookie}")
        ),
        403
    );
    assert_eq!(
        web.status(
            "POST",
            &format!("/s/{S}/t/task_a/do/stop"),
            &format!("{host}{cookie}")
        ),
        403
    );
    assert_eq!(
        web.status(
            "POST",
            &format!("/s/{S}/t/task_a/do/stop"),
            &format!("{host}{cookie}Origin: http://evil.example\r\n")
        ),
        403
    );
    assert_eq!(
        web.status(
            "POST",
            &format!("/s/{S}/t/task_a/do/stop"),
            &format!(
                "{host}{cookie}Origin: http://127.0.0.1:{}\r\nSec-Fetch-Site: cross-site\r\n",
                web.port
            )
        ),
        403
    );
    assert_eq!(
        web.status(
            "POST",
            &format!("/?token={}", web.token),
            &format!("{host}Origin: http://127.0.0.1:{}\r\n", web.port)
        ),
        403
    );
    // A path out of the tree, plain or encoded: 403 before any file is read.
    for path in [
        "/s/../../etc/passwd".to_string(),
        "/s/%2e%2e/t/x".into(),
        format!("/s/{S}/t/..%2f..%2fpolicies.yaml"),
        "/assets/../assets/style.css".into(),
    ] {
        assert_eq!(
            web.status("GET", &path, &format!("{host}{cookie}")),
            403,
            "{path}"
        );
    }
    assert_eq!(
        web.status("GET", "/s/nosuch", &format!("{host}{cookie}")),
        404
    );
    assert_eq!(
        snapshot(&root.join(".squad")),
        before,
        "a refused request changed nothing"
    );
    // Listening on 127.0.0.1 only: its one listening socket is loopback's.
    let hex = format!(":{:04X}", web.port);
    let listening: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 3 && w[1].ends_with(&hex) && w[3] == "0A"
        })
        .collect();
    assert_eq!(listening.len(), 1, "{listening:?}");
    assert!(
        listening[0].split_whitespace().nth(1) == Some(&format!("0100007F{hex}")),
        "{listening:?}"
    );
}

#[test]
fn web_board_graph_and_task_pages_show_the_session() {
    let (_tmp, root) = project();
    let web = Web::start(&root);
    let index = web.page("/");
    assert!(index.contains(&format!("href=\"/s/{S}\"")), "{index}");
    assert!(index.contains("squadd is down"), "{index}");
    let board = web.page(&format!("/s/{S}"));
    assert_eq!(
        column_of(&board, "task_a").as_deref(),
        Some("ready"),
        "{board}"
    );
    assert_eq!(
        column_of(&board, "task_b").as_deref(),
        Some("pending"),
        "{board}"
    );
    for col in [
        "pending", "ready", "running", "review", "held", "done", "failed",
    ] {
        assert!(
            board.contains(&format!("data-column=\"{col}\" aria")),
            "{col}"
        );
    }
    let svg = web.page(&format!("/s/{S}/graph.svg"));
    assert_eq!(svg.matches("class=\"node ").count(), 2, "{svg}");
    let blocked: Vec<&str> = svg
        .lines()
        .filter(|l| l.contains("data-blocked=\"true\""))
        .collect();
    assert_eq!(blocked.len(), 1, "{svg}");
    assert!(
        blocked[0].contains("data-from=\"task_a\" data-to=\"task_b\""),
        "{svg}"
    );
    assert!(svg.contains(&format!("href=\"/s/{S}/t/task_b\"")), "{svg}");
    assert!(web.page(&format!("/s/{S}/graph")).contains("<svg"));
    let task = web.page(&format!("/s/{S}/t/task_b"));
    assert!(
        task.contains("<pre class=\"instruction\">x</pre>"),
        "{task}"
    );
    assert!(
        task.contains(&format!("href=\"/s/{S}/t/task_a\"")),
        "{task}"
    );
    // What an agent wrote is text on the page, never markup.
    progress(&root, "alice", "task_a", "in_progress");
    let s = root.join(".squad/sessions").join(S);
    write_plan(&s, "task_c", "carol", "");
    std::fs::write(
        s.join("role-plan-carol-task_c.md"),
        plan_text("task_c", "carol", "").replace(
            "instruction: x",
            "instruction: \"<script>alert(1)</script>\"",
        ),
    )
    .unwrap();
    let task = web.page(&format!("/s/{S}/t/task_c"));
    assert!(!task.contains("<script>alert"), "{task}");
    assert!(task.contains("&lt;script&gt;alert(1)"), "{task}");
    let board = web.page(&format!("/s/{S}"));
    assert_eq!(
        column_of(&board, "task_a").as_deref(),
        Some("running"),
        "{board}"
    );
}

#[test]
fn web_streams_squadds_events_and_a_reconnect_resumes_from_its_last_id() {
    let (_tmp, root) = project();
    let _d = Daemon::start(&root);
    let web = Web::start(&root);
    assert!(web.page(&format!("/s/{S}")).contains("squadd running"));
    let mut events = web.events(None);
    events.until("retry: 1000");
    progress(&root, "alice", "task_a", "completed");
    let seen = events.until(&format!("\"session\":\"{S}\""));
    let board = eventually("the board shows task_a done", || {
        let b = web.page(&format!("/s/{S}"));
        (column_of(&b, "task_a").as_deref() == Some("done")).then_some(b)
    });
    assert_eq!(
        column_of(&board, "task_b").as_deref(),
        Some("ready"),
        "{board}"
    );
    let ids = events.ids();
    assert!(!ids.is_empty(), "{seen}");
    // A reconnect after the first id gets the ones after it again.
    let first = ids[0];
    let mut again = web.events(Some(first));
    if let Some(&second) = ids.get(1) {
        again.until(&format!("id: {second}\n"));
        assert!(!again.ids().contains(&first), "{}", again.seen);
    }
    // An id this start never gave: the page is told to reload.
    web.events(Some(first + 1_000_000)).until("event: reload");
}

#[test]
fn web_with_squadd_down_follows_the_files_and_says_so() {
    let (_tmp, root) = project();
    let web = Web::start(&root);
    let board = web.page(&format!("/s/{S}"));
    assert!(board.contains("squadd is down"), "{board}");
    let pid = web.child.id();
    eventually("squadctl web watches the files", || {
        watching(pid).then_some(())
    });
    assert!(board.contains("read-only from the files"), "{board}");
    let mut events = web.events(None);
    events.until("retry: 1000");
    let start = Instant::now();
    progress(&root, "alice", "task_a", "in_progress");
    events.until(&format!("\"kind\":\"changed\",\"session\":\"{S}\""));
    eprintln!("file change to event: {:?}", start.elapsed());
    assert_eq!(
        column_of(&web.page(&format!("/s/{S}")), "task_a").as_deref(),
        Some("running")
    );
}

#[test]
fn web_messages_show_threads_with_their_inbox_state_as_text() {
    let (_tmp, root) = project();
    let s = root.join(".squad/sessions").join(S);
    write_alice_to_bob(
        &s,
        "msg_1",
        &notification(
            "msg_1",
            "high",
            "2024-01-15T10:00:00Z",
            "\"api <shape>?\"",
            "\"which <b>fields</b>\"",
        ),
    );
    let web = Web::start(&root);
    let page = web.page(&format!("/s/{S}/messages"));
    assert!(page.contains("id=\"m-msg_1\""), "{page}");
    assert!(page.contains("alice → bob"), "{page}");
    assert!(page.contains("api &lt;shape&gt;?"), "{page}");
    assert!(!page.contains("<b>fields"), "{page}");
    // squadd is down: nothing delivered it to bob's inbox.
    assert!(page.contains("data-state=\"not delivered\""), "{page}");
    assert!(
        web.page(&format!("/s/{S}"))
            .contains(&format!("href=\"/s/{S}/messages\""))
    );
}

/// The review gate from the task page (issue 44 item 3, docs/web.md): a
/// branch waiting for review shows Approve / Request changes / Reject as
/// plain forms; a GET to the action, a POST without the token or from a
/// foreign origin, and `changes` without a comment change nothing; the
/// page's POST approves through the same path as `squadctl review approve`
/// (one `review` `approved` event, the file on main), answers 303 back to
/// the task page, which then shows no buttons; with squadd down an action
/// is answered with a page saying it was not done.
#[test]
fn web_review_buttons_approve_a_waiting_branch_and_refuse_forged_requests() {
    use crate::review::{on_main, review_events, review_project, task, tree_state, waits};
    if !crate::worktree::git_or_skip() {
        return;
    }
    let p = review_project("review");
    let d = Daemon::start(&p.root);
    task(&p.root, "task_a", "alpha", None, false);
    waits(&p.root, "task_a", 1);
    batch_finished(&p.root);
    assert_eq!(tree_state(&p.session, "task_a"), "review");
    let s = p.session.file_name().unwrap().to_str().unwrap().to_string();
    let web = Web::start(&p.root);
    let (host, cookie) = (web.host(), web.cookie());
    let origin = format!("Origin: http://127.0.0.1:{}\r\n", web.port);
    let page = format!("/s/{s}/t/task_a");
    let approve = format!("{page}/do/approve");
    let body = web.page(&page);
    assert!(body.contains("id=\"review-approve\""), "{body}");
    assert!(
        body.contains(&format!("<form method=\"post\" action=\"{approve}\"")),
        "{body}"
    );
    assert!(body.contains(&format!("action=\"{page}/do/changes\"")));
    assert!(body.contains("<textarea name=\"comment\" required"));
    assert!(body.contains(&format!("action=\"{page}/do/reject\"")));

    // Forged: a GET, no token, a foreign origin, cross-site; and `changes`
    // without its comment. Nothing happens.
    let status = |answer: &str| answer.split(' ').nth(1).unwrap_or_default().to_string();
    assert_eq!(web.status("GET", &approve, &format!("{host}{cookie}")), 403);
    for headers in [
        format!("{host}{origin}"),
        format!("{host}{cookie}"),
        format!("{host}{cookie}Origin: http://evil.example\r\n"),
        format!("{host}{cookie}{origin}Sec-Fetch-Site: cross-site\r\n"),
        format!(
            "{host}Cookie: squad_web_{}={}{}\r\n{origin}",
            web.port,
            if web.token.starts_with('0') { '1' } else { '0' },
            &web.token[1..]
        ),
    ] {
        let answer = web.post(&approve, &headers, "");
        assert_eq!(status(&answer), "403", "{headers}: {answer}");
    }
    let answer = web.post(
        &format!("{page}/do/changes"),
        &format!("{host}{cookie}{origin}"),
        "comment=+++",
    );
    assert_eq!(status(&answer), "409", "{answer}");
    assert!(answer.contains("Not done"), "{answer}");
    let answer = web.post(
        &format!("{page}/do/merge"),
        &format!("{host}{cookie}{origin}"),
        "",
    );
    assert_eq!(status(&answer), "404", "{answer}");
    batch_finished(&p.root);
    assert_eq!(tree_state(&p.session, "task_a"), "review");
    assert!(!on_main(&p.root, "src/task_a.txt"));
    for action in ["approved", "changes", "rejected"] {
        assert!(
            review_events(&p.root, "task_a", action).is_empty(),
            "{action}"
        );
    }

    // The page's form: approved, as `squadctl review approve` does it.
    let answer = web.post(&approve, &format!("{host}{cookie}{origin}"), "");
    assert_eq!(status(&answer), "303", "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains(&format!("location: {}\r\n", page.to_ascii_lowercase())),
        "{answer}"
    );
    assert!(on_main(&p.root, "src/task_a.txt"));
    assert_eq!(tree_state(&p.session, "task_a"), "merged");
    let approved = review_events(&p.root, "task_a", "approved");
    assert_eq!(approved.len(), 1, "{approved:#?}");
    let audit = std::fs::read_to_string(p.root.join(".squad/audit.jsonl")).unwrap();
    assert_eq!(
        audit
            .lines()
            .filter(|l| l.contains("\"approved\"") && l.contains("task_a"))
            .count(),
        1,
        "{audit}"
    );
    let body = web.page(&page);
    assert!(!body.contains("review-approve"), "{body}");
    assert!(body.contains("data-column=\"done\""), "{body}");

    // squadd down: not done, and the page says why (no redirect).
    d.terminate();
    let answer = web.post(&approve, &format!("{host}{cookie}{origin}"), "");
    assert_eq!(status(&answer), "503", "{answer}");
    assert!(answer.contains("squadd is not running"), "{answer}");
}
