//! `squadctl web`: the team in a browser (docs/web.md). A local web server
//! beside squadd, bound to 127.0.0.1, for the holder of a token made at
//! every start: the board of each session, the task graph as SVG, each
//! task's plan, progress, run log and diff, the session's messages, updated
//! live from squadd's
//! event stream (or from file changes while squadd is down).
//!
//! One room per job: `auth` decides who may ask what (pure), `server`
//! carries requests, `pages` renders HTML, `graph` lays out and draws the
//! task graph, `live` follows squadd and feeds the pages' event streams.

mod auth;
mod graph;
mod live;
mod messages;
mod pages;
mod server;

use std::path::Path;

/// Why the web console could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebError {
    /// The address could not be bound.
    #[error(
        "cannot listen on 127.0.0.1:{port}: {source} (choose another with --port, or --port 0 for any free one)"
    )]
    Bind {
        /// The port asked for.
        port: u16,
        /// Why.
        source: std::io::Error,
    },
    /// Other I/O: the runtime, a signal handler, the token.
    #[error("{0}")]
    Io(String),
}

/// The team on one page in the browser: a live board per session, the task
/// graph as a picture, each task's plan, progress, run log and diff.
///
/// Serves http://127.0.0.1:PORT/ only (never another interface) and prints
/// its address with a token made at this start, as Jupyter does: open that
/// URL; the token is then kept in a cookie (HttpOnly, SameSite=Strict) and
/// leaves the address bar. A request without the token, naming another
/// Host, or sent from another origin is refused (403); a GET never acts.
/// Pages update live from squadd's events; with squadd down they are read
/// from the files (the page says so) and follow file changes. Stop with
/// Ctrl-C. Pages: / (sessions and what needs you), /s/SESSION (board),
/// /s/SESSION/graph (task graph), /s/SESSION/t/TASK (task),
/// /s/SESSION/messages (message threads). See docs/web.md.
///
/// Examples: `squadctl web --open` (the default port, opened in the
/// browser); `squadctl web --port 0` (any free port; the address is
/// printed).
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// The port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 8642, value_name = "N")]
    pub port: u16,
    /// Open the address in the default browser (xdg-open, or open on macOS).
    #[arg(long)]
    pub open: bool,
}

/// Runs `squadctl web` until Ctrl-C or SIGTERM.
pub(crate) fn run(root_arg: Option<&Path>, args: WebArgs) -> u8 {
    let root = match crate::root::resolve(root_arg) {
        Ok(r) => crate::root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return super::fail(format!("cannot start the runtime: {e}")),
    };
    match runtime.block_on(server::serve(root, args.port, args.open)) {
        Ok(()) => crate::exit::OK,
        Err(e) => super::fail(e),
    }
}

/// `s` with the five characters HTML gives meaning to escaped, for text and
/// attribute values alike (attributes are always double-quoted here), and
/// control characters shown as `\u{…}`: every text from a file or an agent
/// reaches a page through this one function.
pub(super) fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The value of `name` in an `application/x-www-form-urlencoded` body,
/// decoded (`+` is a space, `%XX` a byte); `None` when absent or not UTF-8.
pub(super) fn form_value(body: &[u8], name: &str) -> Option<String> {
    let decode = |s: &[u8]| -> Option<String> {
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            match s[i] {
                b'+' => out.push(b' '),
                b'%' => {
                    let hex = s.get(i + 1..i + 3)?;
                    let hex = std::str::from_utf8(hex).ok()?;
                    out.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 2;
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8(out).ok()
    };
    body.split(|b| *b == b'&').find_map(|pair| {
        let (k, v) = match pair.iter().position(|b| *b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &[][..]),
        };
        (decode(k)? == name).then(|| decode(v)).flatten()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn form_values_are_decoded_and_bad_encodings_refused() {
        let body = b"go=1&comment=add+tests%3A+%C3%A9%26more&empty=";
        assert_eq!(
            super::form_value(body, "comment").as_deref(),
            Some("add tests: \u{e9}&more")
        );
        assert_eq!(super::form_value(body, "empty").as_deref(), Some(""));
        assert_eq!(super::form_value(body, "none"), None);
        assert_eq!(super::form_value(b"comment=%zz", "comment"), None);
        assert_eq!(super::form_value(b"comment=%4", "comment"), None);
        assert_eq!(super::form_value(b"comment=%ff", "comment"), None);
    }

    #[test]
    fn html_escapes_markup_quotes_and_controls() {
        assert_eq!(
            super::html("<a href=\"x\" onclick='y'>&\u{1b}[2J</a>"),
            "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;\\u{1b}[2J&lt;/a&gt;"
        );
    }
}
