//! The control socket protocol: JSON lines over `.squad/run/squadd.sock`.
//!
//! Each request is one line, each response one line (an `events` request with
//! `follow` gets one line per event until the client hangs up). Every line
//! carries `protocol_version`; a daemon and a client that disagree answer with
//! an error that says which versions met, never a hang.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use squad_protocol::tree::{RUN_DIR, SQUAD_DIR};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The protocol version this build speaks.
pub(crate) const PROTOCOL_VERSION: u32 = 1;

/// The longest line either side accepts.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// How long the daemon waits for a request line before hanging up.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// `<root>/.squad/run/squadd.sock`.
pub(crate) fn socket_path(root: &Path) -> PathBuf {
    root.join(SQUAD_DIR).join(RUN_DIR).join("squadd.sock")
}

/// A request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Request {
    /// Must equal [`PROTOCOL_VERSION`].
    pub protocol_version: u32,
    /// What is asked.
    #[serde(flatten)]
    pub method: Method,
}

/// The methods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub(crate) enum Method {
    /// Liveness.
    Ping,
    /// The status report.
    Status {
        /// Only this session.
        #[serde(default)]
        session: Option<String>,
    },
    /// Recent events, and with `follow` every new one.
    Events {
        /// Keep the connection open and stream.
        #[serde(default)]
        follow: bool,
    },
    /// Resource usage with verdicts.
    Health,
    /// Events squadctl made (lock changes), for squadd to number, audit and
    /// stream like its own. squadd accepts only lock events here.
    Record {
        /// The events; `seq`, `at` and `root` are squadd's to set.
        events: Vec<crate::events::Event>,
    },
    /// An explicit change to a session's supervisor-owned fields, applied by
    /// squadd itself so it never races squadd's own rewrite of the file.
    /// Answers an [`crate::session_edit::EditOutcome`], or `{"refused": …}`
    /// when a rule refuses the edit.
    SessionEdit {
        /// The session directory name.
        session: String,
        /// The change.
        #[serde(flatten)]
        edit: squad_policies::session_edit::SessionEdit,
    },
    /// A session edit a follower forwarded to this host's squadd as the
    /// leader it was under `epoch` (docs/cluster.md, "Session edits on a
    /// follower"): applied as [`Method::SessionEdit`] is, only while this
    /// host still leads with that epoch. squadd's own, never on the socket.
    #[serde(skip)]
    ForwardedEdit {
        /// The session directory name.
        session: String,
        /// The change.
        edit: squad_policies::session_edit::SessionEdit,
        /// The lease it was received under.
        epoch: u64,
    },
    /// Agent runs (docs/runners.md): `list`, `run` (start one by hand) or
    /// `stop` one.
    Runs {
        /// `list`, `run` or `stop`.
        action: String,
        /// The session, when the task id is ambiguous.
        #[serde(default)]
        session: Option<String>,
        /// The task (`run`, `stop`).
        #[serde(default)]
        task: Option<String>,
        /// The lead's comment (`changes`, `reject`; docs/review.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The cluster (docs/cluster.md): `acquire` / `release` cluster-wide
    /// locks, `list` them, or `status`. Answered by the root's cluster task.
    Cluster {
        /// `acquire`, `release`, `list` or `status`.
        action: String,
        /// Normalized lock targets.
        #[serde(default)]
        targets: Vec<String>,
        /// The holder agent.
        #[serde(default)]
        agent: String,
        /// The holder's task.
        #[serde(default)]
        task: String,
        /// The holder's session.
        #[serde(default)]
        session: String,
    },
}

/// A response line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Response {
    /// The daemon's [`PROTOCOL_VERSION`].
    pub protocol_version: u32,
    /// Whether the request succeeded.
    pub ok: bool,
    /// The result, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Json>,
    /// What went wrong, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Response {
    /// A success.
    pub(crate) fn ok(result: Json) -> Self {
        Response {
            protocol_version: PROTOCOL_VERSION,
            ok: true,
            result: Some(result),
            error: None,
        }
    }

    /// A failure.
    pub(crate) fn error(message: impl Into<String>) -> Self {
        Response {
            protocol_version: PROTOCOL_VERSION,
            ok: false,
            result: None,
            error: Some(message.into()),
        }
    }
}

/// Parses a request line, answering version mismatches and garbage with the
/// error response to send back.
pub(crate) fn parse_request(line: &str) -> Result<Request, Response> {
    let value: Json = serde_json::from_str(line)
        .map_err(|e| Response::error(format!("request is not JSON: {e}")))?;
    let version = value.get("protocol_version").and_then(Json::as_u64);
    match version {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Err(Response::error(format!(
                "protocol version mismatch: the client speaks {v}, squadd speaks {PROTOCOL_VERSION}; use the squadctl that came with this squadd"
            )));
        }
        None => {
            return Err(Response::error(
                "missing `protocol_version`; every request line carries it",
            ));
        }
    }
    serde_json::from_value(value).map_err(|e| Response::error(format!("bad request: {e}")))
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// No daemon listens on the root (socket missing or refused).
    #[error("squadd is not running for this root ({0})")]
    NotRunning(String),
    /// The daemon answered with an error.
    #[error("squadd: {0}")]
    Daemon(String),
    /// squadd took the request but gave no answer within the read timeout
    /// (a timed-out read surfaces as EAGAIN, "Resource temporarily
    /// unavailable", which says nothing to a user).
    #[error(
        "squadd did not answer within {:.1} s: it may be overloaded or stuck (`squadctl health` tells); try again",
        .0.as_secs_f64()
    )]
    NoAnswer(Duration),
    /// Anything else on the wire.
    #[error("control socket: {0}")]
    Io(#[from] io::Error),
}

/// A connection to a daemon.
pub(crate) struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// The read timeout in force, to name it when it runs out.
    read_timeout: Option<Duration>,
}

impl Client {
    /// Connects to the daemon of `root`, with `timeout` for each read and write.
    pub(crate) fn connect(root: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let path = socket_path(root);
        let stream = UnixStream::connect(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                ClientError::NotRunning(format!("{}: {e}", path.display()))
            }
            _ => ClientError::Io(e),
        })?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let writer = stream.try_clone()?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
            read_timeout: Some(timeout),
        })
    }

    /// Sends one request.
    pub(crate) fn send(&mut self, method: Method) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(&Request {
            protocol_version: PROTOCOL_VERSION,
            method,
        })
        .map_err(io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        Ok(())
    }

    /// Reads one response line; `Ok(None)` when the daemon closed the connection.
    pub(crate) fn read(&mut self) -> Result<Option<Json>, ClientError> {
        let mut line = String::new();
        let n = (&mut self.reader)
            .take(MAX_LINE as u64 * 64)
            .read_line(&mut line)
            .map_err(|e| match (e.kind(), self.read_timeout) {
                (io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut, Some(t)) => {
                    ClientError::NoAnswer(t)
                }
                _ => ClientError::Io(e),
            })?;
        if n == 0 {
            return Ok(None);
        }
        let response: Response = serde_json::from_str(&line)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if response.protocol_version != PROTOCOL_VERSION {
            return Err(ClientError::Daemon(format!(
                "protocol version mismatch: squadd speaks {}, this squadctl speaks {PROTOCOL_VERSION}; use the squadctl that came with this squadd",
                response.protocol_version
            )));
        }
        match (response.ok, response.result, response.error) {
            (true, Some(r), _) => Ok(Some(r)),
            (true, None, _) => Ok(Some(Json::Null)),
            (false, _, e) => Err(ClientError::Daemon(
                e.unwrap_or_else(|| "unspecified error".into()),
            )),
        }
    }

    /// Sends one request and reads its response.
    pub(crate) fn call(&mut self, method: Method) -> Result<Json, ClientError> {
        match self.send(method) {
            Ok(()) => {}
            // A squadd that refuses the connection (another user) answers
            // and closes without reading: the request meets a closed pipe,
            // and the answer is still there to read.
            Err(ClientError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                return match self.read() {
                    Ok(Some(answer)) => Ok(answer),
                    Err(ClientError::Daemon(refusal)) => Err(ClientError::Daemon(refusal)),
                    _ => Err(ClientError::Io(e)),
                };
            }
            Err(e) => return Err(e),
        }
        self.read()?.ok_or_else(|| {
            ClientError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "squadd closed the connection without answering",
            ))
        })
    }

    /// Changes the read timeout (None: wait forever, for `events --follow`).
    pub(crate) fn set_read_timeout(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<(), ClientError> {
        self.reader.get_ref().set_read_timeout(timeout)?;
        self.read_timeout = timeout;
        Ok(())
    }
}

/// How long squadctl waits for squadd to take its events.
const RECORD_TIMEOUT: Duration = Duration::from_secs(2);

/// Hands events made by squadctl to the daemon of `root`; `false` when no
/// daemon took them (not running, or too old to know the method), so the
/// caller writes them to the audit log itself. A daemon that took the
/// request but did not answer in time counts as having taken them: writing
/// them again could record them twice.
pub(crate) fn record_events(root: &Path, events: &[crate::events::Event]) -> bool {
    let Ok(mut client) = Client::connect(root, RECORD_TIMEOUT) else {
        return false;
    };
    match client.call(Method::Record {
        events: events.to_vec(),
    }) {
        Ok(_) => true,
        Err(ClientError::Daemon(_)) => false,
        Err(ClientError::NotRunning(_)) => false,
        Err(ClientError::Io(_) | ClientError::NoAnswer(_)) => true,
    }
}

/// How long squadctl waits for squadd to apply a session edit.
const EDIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks the daemon of `root` to apply a session edit. `None` when no daemon
/// takes it (not running, or too old to know the method): the caller
/// applies it to the file under the session lock.
pub(crate) fn session_edit(
    root: &Path,
    session: &str,
    edit: &squad_policies::session_edit::SessionEdit,
) -> Option<Result<crate::session_edit::EditOutcome, crate::session_edit::EditError>> {
    use crate::session_edit::EditError;
    let mut client = Client::connect(root, EDIT_TIMEOUT).ok()?;
    let method = Method::SessionEdit {
        session: session.to_string(),
        edit: edit.clone(),
    };
    Some(match client.call(method) {
        Ok(v) => match v.get("refused").and_then(Json::as_str) {
            Some(why) => Err(EditError::Refused(why.to_string())),
            None => serde_json::from_value(v)
                .map_err(|e| EditError::Failed(format!("squadd answered oddly: {e}"))),
        },
        // An older squadd does not know the method.
        Err(ClientError::Daemon(e)) if e.starts_with("bad request") => return None,
        Err(ClientError::NotRunning(_)) => return None,
        Err(e) => Err(EditError::Failed(e.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a squadd too busy to answer in time gave "control
    /// socket: Resource temporarily unavailable (os error 11)".
    #[test]
    fn a_daemon_that_does_not_answer_in_time_is_named_as_such() {
        let tmp = tempfile::tempdir().unwrap();
        let path = socket_path(tmp.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut client = Client::connect(tmp.path(), Duration::from_millis(50)).unwrap();
        // Accepted (the backlog holds it) but never answered.
        let err = client.call(Method::Health).unwrap_err();
        assert!(matches!(err, ClientError::NoAnswer(_)), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("squadd did not answer within 0.1 s"),
            "{err}"
        );
        drop(listener);
    }

    #[test]
    fn requests_round_trip() {
        let r = Request {
            protocol_version: PROTOCOL_VERSION,
            method: Method::Status {
                session: Some("s".into()),
            },
        };
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(
            line,
            r#"{"protocol_version":1,"method":"status","session":"s"}"#
        );
        assert_eq!(parse_request(&line), Ok(r));
    }

    #[test]
    fn recorded_events_round_trip() {
        let line = r#"{"protocol_version":1,"method":"record","events":[{"seq":0,"at":"2024-01-15T10:00:00Z","root":"/p","session":"s","path":".squad/sessions/s/locks/a.json","kind":"lock-acquired","targets":["src/a.rs"],"mode":"exclusive","agent":"a","task_id":"task_1"}]}"#;
        let Method::Record { events } = parse_request(line).unwrap().method else {
            panic!("a record request");
        };
        assert_eq!(events.len(), 1);
        assert!(events[0].kind.is_lock());
        assert_eq!(events[0].session.as_deref(), Some("s"));
    }

    #[test]
    fn session_edits_round_trip() {
        let line = r#"{"protocol_version":1,"method":"session-edit","session":"s","edit":"complete","force":true}"#;
        let Method::SessionEdit { session, edit } = parse_request(line).unwrap().method else {
            panic!("a session edit");
        };
        assert_eq!(session, "s");
        assert_eq!(
            edit,
            squad_policies::session_edit::SessionEdit::Complete { force: true }
        );
    }

    #[test]
    fn mismatches_and_garbage_get_actionable_errors() {
        let e = parse_request(r#"{"protocol_version":99,"method":"ping"}"#).unwrap_err();
        assert!(
            e.error
                .unwrap()
                .contains("client speaks 99, squadd speaks 1")
        );
        let e = parse_request(r#"{"method":"ping"}"#).unwrap_err();
        assert!(e.error.unwrap().contains("protocol_version"));
        let e = parse_request("not json").unwrap_err();
        assert!(!e.ok);
        let e = parse_request(r#"{"protocol_version":1,"method":"reboot"}"#).unwrap_err();
        assert!(e.error.unwrap().contains("bad request"));
    }
}
