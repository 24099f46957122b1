//! The HTTP side: hyper 1 on 127.0.0.1, every request through
//! [`super::auth::decide`] first, then routed to a page, an asset or the
//! event stream. Pages are rendered off the runtime's thread (they read
//! files and ask squadd).

use super::auth;
use super::live::{CatchUp, Feed};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use std::convert::Infallible;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/live.js");

/// What every request needs.
struct Shared {
    root: PathBuf,
    token: String,
    port: u16,
    feed: Feed,
}

/// Serves until Ctrl-C or SIGTERM.
pub(super) async fn serve(root: PathBuf, port: u16, open: bool) -> Result<(), super::WebError> {
    let io = |e: std::io::Error| super::WebError::Io(e.to_string());
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|source| super::WebError::Bind { port, source })?;
    let bound = listener.local_addr().map_err(io)?;
    let token = super::super::mcp_http::new_token().map_err(super::WebError::Io)?;
    let feed = Feed::new();
    feed.start(root.clone());
    let url = format!("http://127.0.0.1:{}/?token={token}", bound.port());
    // The address is the output (a script or test reads it); it goes out
    // before the first request can be answered.
    super::super::print(&format!("squadctl web: serving {url}\n"));
    if open {
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        if let Err(e) = std::process::Command::new(opener)
            .arg(&url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        {
            super::super::warn(format!(
                "--open: cannot run {opener}: {e}; open the URL yourself"
            ));
        }
    }
    let shared = Arc::new(Shared {
        root,
        token,
        port: bound.port(),
        feed,
    });
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(io)?;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    super::super::warn(format!("web: accept: {e}"));
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
        };
        let shared = shared.clone();
        let service = hyper::service::service_fn(move |req| {
            let shared = shared.clone();
            async move { Ok::<_, Infallible>(handle(&shared, req).await) }
        });
        tokio::spawn(async move {
            // A client that hangs up ends its connection only.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

fn header<B>(req: &hyper::Request<B>, name: hyper::header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// An answer with the security headers every answer carries.
fn answer(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut res = Response::new(Full::new(body.into()).boxed());
    *res.status_mut() = status;
    let h = res.headers_mut();
    let set = |h: &mut hyper::HeaderMap, k: &'static str, v: &str| {
        if let Ok(v) = hyper::header::HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    set(h, "content-type", content_type);
    set(
        h,
        "content-security-policy",
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(h, "x-content-type-options", "nosniff");
    // Not `no-referrer`: under it a browser's form POST carries
    // `Origin: null`, which the same-origin check (rightly) refuses; with
    // `same-origin` no address leaves for another site, and the page's own
    // forms carry its Origin.
    set(h, "referrer-policy", "same-origin");
    set(h, "cache-control", "no-store");
    res
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    answer(status, "text/plain; charset=utf-8", body)
}

fn html(status: StatusCode, body: String) -> Response<Body> {
    answer(status, "text/html; charset=utf-8", body)
}

async fn handle(shared: &Shared, req: hyper::Request<hyper::body::Incoming>) -> Response<Body> {
    use hyper::header::{COOKIE, HOST, ORIGIN};
    let cookies: Vec<&str> = req
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let cookie = cookies.join("; ");
    let path = req.uri().path().to_string();
    let decision = auth::decide(
        &auth::Request {
            method: req.method().as_str(),
            path: &path,
            query: req.uri().query(),
            host: header(&req, HOST),
            origin: header(&req, ORIGIN),
            fetch_site: header(
                &req,
                hyper::header::HeaderName::from_static("sec-fetch-site"),
            ),
            cookie: (!cookies.is_empty()).then_some(cookie.as_str()),
        },
        shared.port,
        &shared.token,
    );
    match decision {
        auth::Decision::Refuse(why) => {
            return text(
                StatusCode::FORBIDDEN,
                format!("squadctl web: refused: {why}\n"),
            );
        }
        auth::Decision::SetCookie { location } => {
            let mut res = text(StatusCode::SEE_OTHER, String::new());
            let h = res.headers_mut();
            for (k, v) in [
                ("set-cookie", auth::set_cookie(shared.port, &shared.token)),
                ("location", location),
            ] {
                if let Ok(v) = hyper::header::HeaderValue::from_str(&v) {
                    h.insert(k, v);
                }
            }
            return res;
        }
        auth::Decision::Serve => {}
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let method = req.method().as_str();
    if method == "POST" {
        let target = match segments.as_slice() {
            [
                "s",
                session,
                "t",
                task,
                "do",
                action @ ("approve" | "changes" | "reject"),
            ] => Some((session.to_string(), task.to_string(), action.to_string())),
            _ => None,
        };
        let Some((session, task, action)) = target else {
            return text(
                StatusCode::NOT_FOUND,
                "squadctl web: no such action\n".into(),
            );
        };
        return review_action(shared, req, session, task, action).await;
    }
    if !matches!(method, "GET" | "HEAD") {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "squadctl web: only GET, and POST for actions\n".into(),
        );
    }
    let root = shared.root.clone();
    let owned: Vec<String> = segments.iter().map(|s| s.to_string()).collect();
    let render = move || -> Result<Option<(String, &'static str)>, super::WebError> {
        let html_ = |p: Option<String>| p.map(|b| (b, "text/html; charset=utf-8"));
        let s: Vec<&str> = owned.iter().map(String::as_str).collect();
        Ok(match s.as_slice() {
            [] => html_(Some(super::pages::index(&root)?)),
            ["s", session] => html_(super::pages::board(&root, session)?),
            ["s", session, "graph"] => html_(super::pages::graph(&root, session, false)?),
            ["s", session, "graph.svg"] => super::pages::graph(&root, session, true)?
                .map(|b| (b, "image/svg+xml; charset=utf-8")),
            ["s", session, "t", task] => html_(super::pages::task(&root, session, task)?),
            ["s", session, "messages"] => html_(super::messages::messages(&root, session)?),
            _ => None,
        })
    };
    match segments.as_slice() {
        ["assets", "style.css"] => return answer(StatusCode::OK, "text/css; charset=utf-8", STYLE),
        ["assets", "live.js"] => {
            return answer(StatusCode::OK, "text/javascript; charset=utf-8", SCRIPT);
        }
        ["events"] => return events(shared, &req),
        ["s", _, "t", _, "do", _] => {
            return text(
                StatusCode::FORBIDDEN,
                "squadctl web: refused: an action needs a POST from the page (a GET never acts)\n"
                    .into(),
            );
        }
        _ => {}
    }
    match tokio::task::spawn_blocking(render).await {
        Ok(Ok(Some((body, kind)))) => answer(StatusCode::OK, kind, body),
        Ok(Ok(None)) => html(
            StatusCode::NOT_FOUND,
            super::pages::not_found(&format!("nothing at {path}")),
        ),
        Ok(Err(e)) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("squadctl web: {e}\n"),
        ),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("squadctl web: the page failed: {e}\n"),
        ),
    }
}

/// The most bytes an action's form may send (a comment).
const FORM_LIMIT: usize = 64 * 1024;

/// `POST /s/SESSION/t/TASK/do/ACTION` (approve, changes, reject), already
/// admitted by [`auth::decide`] (token, same origin): the review gate's
/// action through the one path `squadctl review` takes
/// ([`crate::ctl::review::act_on`]), this server acting as the lead who
/// started it. Done: 303 back to the task page; not done: a page saying
/// why, never a redirect.
async fn review_action(
    shared: &Shared,
    req: hyper::Request<hyper::body::Incoming>,
    session: String,
    task: String,
    action: String,
) -> Response<Body> {
    let back = format!("/s/{session}/t/{task}");
    let failed = |status: StatusCode, why: String| {
        html(
            status,
            super::pages::action_failed(&session, &task, &action, &why),
        )
    };
    let body = match http_body_util::Limited::new(req.into_body(), FORM_LIMIT)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return failed(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the form could not be read ({e})"),
            );
        }
    };
    let comment = super::form_value(&body, "comment")
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty());
    let root = shared.root.clone();
    let (s, t, a) = (session.clone(), task.clone(), action.clone());
    let done = tokio::task::spawn_blocking(move || {
        crate::ctl::review::act_on(&root, &a, &t, Some(s), comment)
    })
    .await;
    use crate::ctl::review::ActError;
    match done {
        Ok(Ok(_)) => {
            let mut res = text(StatusCode::SEE_OTHER, String::new());
            if let Ok(v) = hyper::header::HeaderValue::from_str(&back) {
                res.headers_mut().insert("location", v);
            }
            res
        }
        Ok(Err(e @ ActError::NotLead(_))) => failed(StatusCode::FORBIDDEN, e.to_string()),
        Ok(Err(e @ ActError::NotRunning)) => failed(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Ok(Err(e @ ActError::Call(_))) => failed(StatusCode::CONFLICT, e.to_string()),
        Err(e) => failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the action failed: {e}"),
        ),
    }
}

/// `GET /events`: the server-sent event stream of changes, caught up from
/// `Last-Event-ID`.
fn events<B>(shared: &Shared, req: &hyper::Request<B>) -> Response<Body> {
    let last = header(req, hyper::header::HeaderName::from_static("last-event-id"))
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (mut rx, catch_up) = shared.feed.subscribe(last);
    let (tx, out) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        // The browser retries after a second when the stream breaks.
        if tx
            .send(Bytes::from_static(b"retry: 1000\n\n"))
            .await
            .is_err()
        {
            return;
        }
        let mut seen = last.unwrap_or(0);
        match catch_up {
            CatchUp::Missed(changes) => {
                for c in changes {
                    seen = seen.max(c.id);
                    if tx.send(c.frame()).await.is_err() {
                        return;
                    }
                }
            }
            CatchUp::Reload => {
                if tx
                    .send(Bytes::from_static(b"event: reload\ndata: {}\n\n"))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
        let mut keepalive = tokio::time::interval(std::time::Duration::from_secs(15));
        loop {
            let frame = tokio::select! {
                got = rx.recv() => match got {
                    Ok(c) if c.id <= seen => continue,
                    Ok(c) => { seen = c.id; c.frame() }
                    // Too slow a reader: it reloads rather than miss changes.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        Bytes::from_static(b"event: reload\ndata: {}\n\n")
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                _ = keepalive.tick() => Bytes::from_static(b": keep-alive\n\n"),
            };
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    let mut res = answer(StatusCode::OK, "text/event-stream", Bytes::new());
    *res.body_mut() = Stream(out).boxed();
    res
}

/// A body of the frames a channel carries, ended when its sender goes.
struct Stream(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Stream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}
