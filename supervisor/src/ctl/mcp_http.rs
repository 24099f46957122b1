//! `squadctl mcp --http`: the MCP server on Streamable HTTP, loopback only,
//! for the holder of its bearer token (docs/mcp.md, docs/security.md).
//!
//! Every start makes a new token (32 random bytes, hex), written mode 0600
//! to `.squad/run/mcp/<agent>-<port>.token`: a request without
//! `Authorization: Bearer <token>` is answered 401 before it reaches the
//! MCP service, so another local user (who cannot read the file) cannot act
//! as the agent. The agent is the server's, fixed at start.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `--http` address: a socket address on a loopback interface.
pub(crate) fn loopback_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    let addr: std::net::SocketAddr = text.parse().map_err(|_| {
        format!(
            "mcp --http: `{}` is not an address and port; use e.g. 127.0.0.1:8765",
            crate::text::escape(text)
        )
    })?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "mcp --http: {addr} is not a loopback address: the server listens on 127.0.0.1 or ::1 only (use 127.0.0.1:{})",
            addr.port()
        ));
    }
    Ok(addr)
}

/// Where the token of `agent`'s server on `port` is kept.
pub(crate) fn token_path(root: &Path, agent: &str, port: u16) -> PathBuf {
    root.join(squad_protocol::tree::SQUAD_DIR)
        .join(squad_protocol::tree::RUN_DIR)
        .join("mcp")
        .join(format!("{agent}-{port}.token"))
}

/// A new token: 32 bytes of the kernel's randomness, hex.
pub(crate) fn new_token() -> Result<String, String> {
    let mut buf = [0u8; 32];
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: writes at most the rest of `buf`, which it points into.
        let n = unsafe {
            libc::getrandom(
                buf[filled..].as_mut_ptr().cast::<libc::c_void>(),
                buf.len() - filled,
                0,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("cannot make a token: {e}"));
        }
        filled += n as usize;
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `given` is the token, in time independent of where they differ.
pub(crate) fn same(given: &[u8], token: &[u8]) -> bool {
    given.len() == token.len() && given.iter().zip(token).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn authorized<B>(req: &hyper::Request<B>, token: &str) -> bool {
    req.headers()
        .get_all(hyper::header::AUTHORIZATION)
        .iter()
        .any(|v| {
            let v = v.as_bytes();
            v.len() > 7
                && v[..7].eq_ignore_ascii_case(b"bearer ")
                && same(v[7..].trim_ascii(), token.as_bytes())
        })
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// 401 with the reason and the place of the token.
fn unauthorized(hint: &str) -> hyper::Response<Body> {
    let mut res = hyper::Response::new(
        Full::new(Bytes::from(format!(
            "squadctl mcp: this server needs `Authorization: Bearer <token>`; the token is in {hint} (readable by its owner only, new at every start)\n"
        )))
        .boxed(),
    );
    *res.status_mut() = hyper::StatusCode::UNAUTHORIZED;
    res.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    res
}

/// Serves `server` (one per MCP session) on `addr` (loopback) until SIGINT
/// or SIGTERM, for the holder of a token made now and written under `root`
/// for `agent`.
pub(crate) async fn serve<S>(
    server: S,
    addr: std::net::SocketAddr,
    root: &Path,
    agent: &str,
) -> Result<(), String>
where
    S: rmcp::ServerHandler + Clone + Send + Sync + 'static,
{
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--http {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--http {addr}: {e}"))?;
    let token = new_token()?;
    let path = token_path(root, agent, bound.port());
    crate::safefs::write_atomic_under(
        root,
        &path,
        format!("{token}\n").as_bytes(),
        0o600,
        Some(0o700),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let token: Arc<str> = token.into();
    let hint: Arc<str> = path.display().to_string().into();
    // Loopback `Host` only (rmcp's default, against DNS rebinding) and no
    // browser origin at all: a web page must not drive an agent's tools.
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(["localhost", "127.0.0.1", "::1", "[::1]"])
        .enforce_origin_validation()
        // The stdio limit: a larger body is answered 413 naming it.
        .with_max_request_body_bytes(super::mcp_stdio::MAX_FRAME);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    super::eprint_text(&format!(
        "squadctl mcp: listening on http://{bound}/mcp (token in {hint})\n"
    ));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let result = loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // A failed accept (e.g. out of descriptors) drops that
                // connection, not the server.
                Err(e) => {
                    super::warn(format!("mcp --http: accept: {e}"));
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break Ok(()),
            _ = term.recv() => break Ok(()),
        };
        let inner = hyper_util::service::TowerToHyperService::new(service.clone());
        let (token, hint) = (token.clone(), hint.clone());
        let guarded =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let inner = inner.clone();
                let allowed = authorized(&req, &token);
                let hint = hint.clone();
                async move {
                    if !allowed {
                        return Ok::<_, std::convert::Infallible>(unauthorized(&hint));
                    }
                    use hyper::service::Service;
                    inner.call(req).await
                }
            });
        tokio::spawn(async move {
            // A client that hangs up mid-request ends its connection only.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), guarded)
                .await;
        });
    };
    // A stopped server's token opens nothing: it goes with it.
    let _ = std::fs::remove_file(&path);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        let token = "ab12";
        let req = |v: Option<&str>| {
            let mut b = hyper::Request::builder();
            if let Some(v) = v {
                b = b.header("Authorization", v);
            }
            b.body(()).unwrap()
        };
        assert!(authorized(&req(Some("Bearer ab12")), token));
        assert!(authorized(&req(Some("bearer ab12 ")), token));
        for bad in [
            None,
            Some("Bearer ab1"),
            Some("Bearer ab123"),
            Some("Basic ab12"),
            Some("ab12"),
            Some("Bearer "),
        ] {
            assert!(!authorized(&req(bad), token), "{bad:?}");
        }
    }

    #[test]
    fn tokens_are_new_each_time() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
