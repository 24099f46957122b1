//! `squadctl mcp` on stdio: JSON-RPC messages one per line, each at most
//! [`MAX_FRAME`] bytes (docs/mcp.md). A longer line is never buffered: its
//! first bytes are kept to find its request id, the rest is skipped, and it
//! is answered with a JSON-RPC error naming the limit, so the client is
//! not left waiting. When the client closes stdin the server's work ends
//! with it (see [`Stdio::new`]'s `closing`).

use rmcp::RoleServer;
use rmcp::model::{ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};

/// The largest message the server reads (4 MiB; a protocol file is at most
/// 1 MiB, so no tool's arguments need more). The HTTP transport has the
/// same limit on a request's body.
pub(crate) const MAX_FRAME: usize = 4 * 1024 * 1024;

/// How much of an over-large line is kept to find its `id`: clients write
/// `jsonrpc` and `id` before `params`.
const ID_PREFIX: usize = 64 * 1024;

/// The stdio transport: bounded lines in, rmcp's framing out.
pub(crate) struct Stdio<R, W: AsyncWrite + Send + Unpin + 'static> {
    read: BufReader<R>,
    /// The line read so far (never more than [`MAX_FRAME`]).
    line: Vec<u8>,
    /// While skipping an over-large line: its first bytes and its length.
    over: Option<(Vec<u8>, usize)>,
    /// The writer (rmcp's, so answers and responses never interleave).
    out: AsyncRwTransport<RoleServer, tokio::io::Empty, W>,
    /// Told when the client has gone (end of input).
    closing: Arc<tokio::sync::watch::Sender<bool>>,
    /// Answers being written (waited for before closing).
    answers: tokio::task::JoinSet<Result<(), std::io::Error>>,
}

/// What one read of a line gave.
enum Frame {
    /// A whole line is in `line`.
    Line,
    /// A line over the limit ended: its first bytes and its length.
    Over(Vec<u8>, usize),
    /// The client closed its end (or reading failed).
    End,
}

impl<R, W> Stdio<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Reads from `read`, writes to `write`; sends `true` on `closing` when
    /// the input ends, so work in flight for the gone client stops.
    pub(crate) fn new(read: R, write: W, closing: Arc<tokio::sync::watch::Sender<bool>>) -> Self {
        Stdio {
            read: BufReader::new(read),
            line: Vec::new(),
            over: None,
            out: AsyncRwTransport::new(tokio::io::empty(), write),
            closing,
            answers: tokio::task::JoinSet::new(),
        }
    }

    /// Reads up to the end of a line. Cancel-safe (the service polls it in
    /// a `select!`): what was read is kept in `self` between calls.
    async fn frame(&mut self) -> Frame {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) | Err(_) => return Frame::End,
                Ok(a) => a,
            };
            let end = available.iter().position(|b| *b == b'\n');
            let take = end.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            match &mut self.over {
                Some((prefix, len)) => {
                    let room = ID_PREFIX.saturating_sub(prefix.len()).min(chunk.len());
                    prefix.extend_from_slice(&chunk[..room]);
                    *len += chunk.len();
                }
                None if self.line.len() + chunk.len() > MAX_FRAME => {
                    let mut prefix = std::mem::take(&mut self.line);
                    let len = prefix.len() + chunk.len();
                    prefix.truncate(ID_PREFIX);
                    let room = ID_PREFIX.saturating_sub(prefix.len()).min(chunk.len());
                    prefix.extend_from_slice(&chunk[..room]);
                    self.over = Some((prefix, len));
                }
                None => self.line.extend_from_slice(chunk),
            }
            self.read.consume(take);
            if end.is_some() {
                return match self.over.take() {
                    Some((prefix, len)) => Frame::Over(prefix, len),
                    None => Frame::Line,
                };
            }
        }
    }

    /// Sends `error` for request `id` on its own task: an answer the
    /// service did not ask for must not be lost to a cancelled read.
    fn answer(&mut self, id: Option<RequestId>, error: ErrorData) {
        while self.answers.try_join_next().is_some() {}
        self.answers.spawn(
            self.out
                .send(TxJsonRpcMessage::<RoleServer>::error(error, id)),
        );
    }
}

/// The `id` of the JSON-RPC request whose text starts with `prefix`, when
/// it comes before anything that is cut off.
fn leading_id(prefix: &[u8]) -> Option<RequestId> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct FindId<'a>(&'a mut Option<RequestId>);
    impl<'de> Visitor<'de> for FindId<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON-RPC message")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "id" {
                    *self.0 = Some(map.next_value::<RequestId>()?);
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut found = None;
    // The rest of the text is cut off: the error that follows the id is
    // expected.
    let _ = serde_json::Deserializer::from_slice(prefix).deserialize_map(FindId(&mut found));
    found
}

/// What to do with one line: the message, or the answer to give instead
/// (none for a line that is not JSON or a notification this server cannot
/// read: it has no id to answer).
fn parse(line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, Option<(RequestId, ErrorData)>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    serde_json::from_slice(line).map_err(|e| {
        let value: serde_json::Value = serde_json::from_slice(line).ok()?;
        let id = serde_json::from_value::<RequestId>(value.get("id")?.clone()).ok()?;
        Some((
            id,
            ErrorData::invalid_request(format!("not a request this server takes: {e}"), None),
        ))
    })
}

impl<R, W> Transport<RoleServer> for Stdio<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.out.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.frame().await {
                Frame::End => {
                    self.closing.send_replace(true);
                    return None;
                }
                Frame::Over(prefix, len) => {
                    let error = ErrorData::invalid_request(
                        format!(
                            "message too large: {len} bytes, over the limit of {MAX_FRAME} bytes"
                        ),
                        None,
                    );
                    self.answer(leading_id(&prefix), error);
                }
                Frame::Line => {
                    let line = std::mem::take(&mut self.line);
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match parse(&line) {
                        Ok(message) => return Some(message),
                        Err(Some((id, error))) => self.answer(Some(id), error),
                        Err(None) => {}
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        while self.answers.join_next().await.is_some() {}
        self.out.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn the_id_is_found_in_the_first_bytes() {
        let id = |t: &str| leading_id(t.as_bytes());
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":"xx"#),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            id(r#"{"method":"x","params":{"id":1},"id":"a\"b","params2":"#),
            Some(RequestId::String("a\"b".into()))
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","params":{"x":"cut"#), None);
        assert_eq!(id("not json"), None);
    }

    /// Lines over the limit are answered with an error for their id, the
    /// next message is read as usual, and the end of input is told.
    #[test]
    fn an_over_large_line_is_answered_and_the_next_one_read() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut client, server_in) = tokio::io::duplex(64 * 1024);
            let (server_out, mut answers) = tokio::io::duplex(64 * 1024);
            let closing = Arc::new(tokio::sync::watch::channel(false).0);
            let mut t = Stdio::new(server_in, server_out, closing.clone());
            let big = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}\n",
                "a".repeat(MAX_FRAME)
            );
            let writer = tokio::spawn(async move {
                client.write_all(big.as_bytes()).await.unwrap();
                client
                    .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}\n")
                    .await
                    .unwrap();
                client.write_all(b"[1,\n").await.unwrap();
            });
            let next = t.receive().await.unwrap();
            assert!(format!("{next:?}").contains("Ping"), "{next:?}");
            assert!(t.receive().await.is_none());
            assert!(*closing.borrow());
            writer.await.unwrap();
            t.close().await.unwrap();
            let mut text = String::new();
            tokio::io::AsyncReadExt::read_to_string(&mut answers, &mut text)
                .await
                .unwrap();
            assert!(text.contains("\"id\":9"), "{text}");
            assert!(text.contains(&format!("over the limit of {MAX_FRAME} bytes")));
        });
    }
}
