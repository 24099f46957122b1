//! Who may ask what of `squadctl web`: a pure decision on a request's
//! method, path, query and headers (docs/web.md, "Security model").
//!
//! - `Host` must name the server itself (`127.0.0.1:PORT` or
//!   `localhost:PORT`): a DNS-rebinding page cannot reach it under its own
//!   name.
//! - An `Origin`, when sent, must be the server's own; a state-changing
//!   request (any method but GET/HEAD) must send one, and a
//!   `Sec-Fetch-Site` other than `same-origin` refuses it: no other site's
//!   page can act here, even with the cookie.
//! - The token: `?token=` on a GET (the printed URL) sets the cookie and
//!   redirects to the same page without it; every other request carries
//!   the cookie (HttpOnly, SameSite=Strict, named by the port).
//! - Path segments are names (`[A-Za-z0-9._-]`, not `.` or `..`): nothing
//!   in a URL reaches the file system as a path.

/// The parts of a request the decision needs.
#[derive(Debug, Clone, Default)]
pub(super) struct Request<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path, as sent (not decoded).
    pub path: &'a str,
    /// The query, as sent.
    pub query: Option<&'a str>,
    /// `Host`.
    pub host: Option<&'a str>,
    /// `Origin`.
    pub origin: Option<&'a str>,
    /// `Sec-Fetch-Site`.
    pub fetch_site: Option<&'a str>,
    /// Every `Cookie` header, joined.
    pub cookie: Option<&'a str>,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// Serve it.
    Serve,
    /// The token was in the query and is right: set the cookie and send
    /// the browser to this location (the path without the token).
    SetCookie {
        /// Where to.
        location: String,
    },
    /// 403 with the reason.
    Refuse(String),
}

/// The cookie's name: by port, as cookies do not tell ports apart.
pub(super) fn cookie_name(port: u16) -> String {
    format!("squad_web_{port}")
}

/// The `Set-Cookie` value keeping `token`.
pub(super) fn set_cookie(port: u16, token: &str) -> String {
    format!(
        "{}={token}; Path=/; HttpOnly; SameSite=Strict",
        cookie_name(port)
    )
}

/// The decision on `req` for the server on `port` holding `token`.
pub(super) fn decide(req: &Request<'_>, port: u16, token: &str) -> Decision {
    let Some(host) = req.host else {
        return Decision::Refuse("no Host header".into());
    };
    let own_hosts = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    if !own_hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Decision::Refuse(format!(
            "Host `{}` is not this server (http://127.0.0.1:{port})",
            crate::text::escape(host)
        ));
    }
    let safe = matches!(req.method, "GET" | "HEAD");
    match req.origin {
        Some(origin) if !origin.eq_ignore_ascii_case(&format!("http://{host}")) => {
            return Decision::Refuse(format!(
                "a request from another origin (`{}`)",
                crate::text::escape(origin)
            ));
        }
        None if !safe => {
            return Decision::Refuse("an action needs the page's own Origin".into());
        }
        _ => {}
    }
    if !safe && req.fetch_site.is_some_and(|s| s != "same-origin") {
        return Decision::Refuse("an action from another site".into());
    }
    if !path_ok(req.path) {
        return Decision::Refuse("not a path of this server".into());
    }
    let same = |given: &str| super::super::mcp_http::same(given.as_bytes(), token.as_bytes());
    if let Some(given) = query_param(req.query, "token").filter(|_| safe) {
        return if same(given) {
            Decision::SetCookie {
                location: req.path.to_string(),
            }
        } else {
            Decision::Refuse("wrong token".into())
        };
    }
    let name = cookie_name(port);
    let carried = req
        .cookie
        .into_iter()
        .flat_map(|c| c.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| k == name && same(v));
    if carried {
        Decision::Serve
    } else {
        Decision::Refuse(
            "no token: open the URL `squadctl web` printed (it holds the token of this start)"
                .into(),
        )
    }
}

/// Whether every segment of `path` is a name: `/`, or `/a/b` with each
/// segment of `[A-Za-z0-9._-]`, not `.` or `..`. Percent signs (encoded
/// dots and slashes), backslashes and empty segments are refused.
pub(super) fn path_ok(path: &str) -> bool {
    if path == "/" {
        return true;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    rest.split('/').all(segment_ok)
}

/// Whether `s` is a name a URL may carry.
pub(super) fn segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The value of `name` in a query string (not decoded: the values this
/// server reads are hex and digits).
pub(super) fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(path: &'a str, cookie: Option<&'a str>) -> Request<'a> {
        Request {
            method: "GET",
            path,
            host: Some("127.0.0.1:8642"),
            cookie,
            ..Request::default()
        }
    }

    #[test]
    fn the_cookie_or_the_query_token_admits_nothing_else_does() {
        let ok = Some("a=b; squad_web_8642=t0k");
        assert_eq!(decide(&get("/", ok), 8642, "t0k"), Decision::Serve);
        for bad in [
            None,
            Some("squad_web_8642=t0"),
            Some("squad_web_9999=t0k"),
            Some("squad_web_8642=t0kk"),
        ] {
            assert!(
                matches!(decide(&get("/", bad), 8642, "t0k"), Decision::Refuse(_)),
                "{bad:?}"
            );
        }
        let mut q = get("/s/x", None);
        q.query = Some("token=t0k");
        assert_eq!(
            decide(&q, 8642, "t0k"),
            Decision::SetCookie {
                location: "/s/x".into()
            }
        );
        q.query = Some("token=bad");
        assert!(matches!(decide(&q, 8642, "t0k"), Decision::Refuse(_)));
    }

    #[test]
    fn foreign_hosts_origins_and_cross_site_actions_are_refused() {
        let ok = Some("squad_web_8642=t");
        let mut r = get("/", ok);
        r.host = Some("evil.example:8642");
        assert!(matches!(decide(&r, 8642, "t"), Decision::Refuse(_)));
        r.host = Some("127.0.0.1:8643");
        assert!(matches!(decide(&r, 8642, "t"), Decision::Refuse(_)));
        let mut r = get("/", ok);
        r.origin = Some("http://evil.example");
        assert!(matches!(decide(&r, 8642, "t"), Decision::Refuse(_)));
        r.origin = Some("http://127.0.0.1:8642");
        assert_eq!(decide(&r, 8642, "t"), Decision::Serve);
        let mut post = get("/s/x/t/y/stop", ok);
        post.method = "POST";
        assert!(matches!(decide(&post, 8642, "t"), Decision::Refuse(_)));
        post.origin = Some("http://127.0.0.1:8642");
        assert_eq!(decide(&post, 8642, "t"), Decision::Serve);
        post.fetch_site = Some("cross-site");
        assert!(matches!(decide(&post, 8642, "t"), Decision::Refuse(_)));
        // The query token sets a cookie on a GET only.
        let mut post = get("/", None);
        post.method = "POST";
        post.origin = Some("http://127.0.0.1:8642");
        post.query = Some("token=t");
        assert!(matches!(decide(&post, 8642, "t"), Decision::Refuse(_)));
    }

    #[test]
    fn only_names_pass_as_path_segments() {
        for ok in ["/", "/s/2024-01-15-x/t/task_001", "/assets/style.css"] {
            assert!(path_ok(ok), "{ok}");
        }
        for bad in [
            "/s/../etc",
            "/s/./x",
            "/s/%2e%2e/x",
            "/s//x",
            "/s/a\\b",
            "relative",
            "/s/x/",
        ] {
            assert!(!path_ok(bad), "{bad}");
        }
    }
}
