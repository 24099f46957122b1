//! The control socket: accepts connections, checks the peer's uid, reads
//! JSON-line requests with a size limit and a timeout, and hands them to the
//! supervisor task.

use super::core::RootId;
use crate::control::{MAX_LINE, Method, REQUEST_TIMEOUT, Response, parse_request};
use crate::events::Event;
use std::path::Path;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, oneshot};

/// What the supervisor answers a request with.
pub(crate) enum Reply {
    /// One response line.
    Once(Response),
    /// Backlog lines, then one line per new event until the client leaves.
    Stream {
        /// Recent events.
        backlog: Vec<Event>,
        /// New events of every root.
        events: broadcast::Receiver<Event>,
        /// The root whose events the client asked for (others are skipped).
        root: String,
    },
    /// One response line, answered later by another task (the cluster's).
    Later(oneshot::Receiver<Response>),
}

/// A request on its way to the supervisor task.
pub(crate) struct Call {
    /// Index of the root whose socket received it.
    pub root: RootId,
    /// The request.
    pub method: Method,
    /// Where to send the reply.
    pub reply: oneshot::Sender<Reply>,
}

/// The way a follower's session edit, forwarded to this host as the
/// leader, enters the loop as a call of root `root` (docs/cluster.md,
/// "Session edits on a follower"): answered as a local edit is.
pub(crate) fn forwarded_edits(
    root: RootId,
    calls: mpsc::Sender<Call>,
) -> crate::cluster::edits::ToLoop {
    std::sync::Arc::new(move |session, edit, epoch| {
        let (tx, rx) = oneshot::channel();
        let calls = calls.clone();
        tokio::spawn(async move {
            let (reply, answer) = oneshot::channel();
            let method = Method::ForwardedEdit {
                session,
                edit,
                epoch,
            };
            let call = Call {
                root,
                method,
                reply,
            };
            let r = match calls.send(call).await {
                Err(_) => Response::error("squadd is shutting down"),
                Ok(()) => match answer.await {
                    Ok(Reply::Once(r)) => r,
                    Ok(Reply::Later(later)) => later
                        .await
                        .unwrap_or_else(|_| Response::error("squadd is shutting down")),
                    Ok(Reply::Stream { .. }) | Err(_) => Response::error("squadd is shutting down"),
                },
            };
            let _ = tx.send(r);
        });
        rx
    })
}

/// Binds the socket `path` below `root` (replacing a stale one: the caller
/// holds the root's pid lock, so no live daemon owns it) with mode 0600.
/// The directory is reached without following links and the socket is
/// made through its descriptor, so a `.squad/run` swapped for a symlink
/// cannot place (or chmod) it elsewhere.
pub(crate) fn bind(root: &Path, path: &Path) -> std::io::Result<UnixListener> {
    let (dir, name) = crate::safefs::parent_of(root, path, None)?;
    match dir.unlink(&name) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let at = dir.fd_path(&name);
    let listener = UnixListener::bind(&at)?;
    if dir.stat(&name)?.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(std::io::Error::other(format!(
            "{}: replaced while binding; not used",
            path.display()
        )));
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// A root's control socket as bound: its accept loop, and the identity of
/// the socket file it listens on.
pub(crate) struct Bound {
    task: tokio::task::JoinHandle<()>,
    id: (u64, u64),
}

impl Bound {
    /// Binds `path` below `root` and serves it on its own task (calls go to
    /// the supervisor as root `i`).
    pub(crate) fn start(
        root: &Path,
        path: &Path,
        i: RootId,
        calls: mpsc::Sender<Call>,
    ) -> std::io::Result<Bound> {
        let listener = bind(root, path)?;
        let id = file_id(path)?;
        Ok(Bound {
            task: tokio::spawn(accept_loop(listener, i, calls)),
            id,
        })
    }

    /// Whether `path` is still the socket this listener is bound to (it
    /// may have been removed, or replaced along with `.squad/`).
    pub(crate) fn is_at(&self, path: &Path) -> bool {
        file_id(path).is_ok_and(|id| id == self.id)
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        // The listener closes with its task.
        self.task.abort();
    }
}

/// (device, inode) of a path, not following a link.
fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Accepts connections forever.
pub(crate) async fn accept_loop(listener: UnixListener, root: RootId, calls: mpsc::Sender<Call>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let calls = calls.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, root, calls).await {
                        tracing::debug!(error = %e, "control connection ended");
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// The most `events --follow` clients served at once (each holds a file
/// descriptor for as long as it follows); more are refused with an error.
pub(crate) const MAX_FOLLOWERS: usize = 64;

static FOLLOWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of the [`MAX_FOLLOWERS`] places, given back when dropped.
struct FollowerSlot;

impl FollowerSlot {
    fn take() -> Option<FollowerSlot> {
        use std::sync::atomic::Ordering;
        FOLLOWERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_FOLLOWERS).then_some(n + 1)
            })
            .ok()
            .map(|_| FollowerSlot)
    }
}

impl Drop for FollowerSlot {
    fn drop(&mut self) {
        FOLLOWERS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

fn our_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

async fn write_line(w: &mut tokio::net::unix::OwnedWriteHalf, r: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line).await
}

async fn serve(stream: UnixStream, root: RootId, calls: mpsc::Sender<Call>) -> std::io::Result<()> {
    let peer = stream.peer_cred()?.uid();
    let (read, mut write) = stream.into_split();
    if peer != our_uid() {
        tracing::warn!(
            peer_uid = peer,
            "refused a control connection from another user"
        );
        let r = Response::error("permission denied: squadd only answers its own user");
        return write_line(&mut write, &r).await;
    }
    let mut reader = BufReader::new(read);
    loop {
        let mut line = String::new();
        let read = tokio::time::timeout(
            REQUEST_TIMEOUT,
            (&mut reader).take(MAX_LINE as u64 + 1).read_line(&mut line),
        )
        .await;
        let n = match read {
            Err(_) => {
                let r = Response::error("timed out waiting for a request line");
                return write_line(&mut write, &r).await;
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                let r = Response::error("request is not UTF-8 text");
                return write_line(&mut write, &r).await;
            }
            Ok(r) => r?,
        };
        if n == 0 {
            return Ok(());
        }
        if line.len() > MAX_LINE || !line.ends_with('\n') && n > MAX_LINE {
            let r = Response::error(format!("request line longer than {MAX_LINE} bytes"));
            return write_line(&mut write, &r).await;
        }
        let method = match parse_request(line.trim_end()) {
            Ok(req) => req.method,
            Err(r) => {
                write_line(&mut write, &r).await?;
                continue;
            }
        };
        let (tx, rx) = oneshot::channel();
        if calls
            .send(Call {
                root,
                method,
                reply: tx,
            })
            .await
            .is_err()
        {
            return write_line(&mut write, &Response::error("squadd is shutting down")).await;
        }
        match rx.await {
            Ok(Reply::Once(r)) => write_line(&mut write, &r).await?,
            Ok(Reply::Later(rx)) => {
                let r = rx
                    .await
                    .unwrap_or_else(|_| Response::error("squadd's cluster task ended"));
                write_line(&mut write, &r).await?
            }
            Ok(Reply::Stream {
                backlog,
                mut events,
                root,
            }) => {
                let Some(_slot) = FollowerSlot::take() else {
                    let r = Response::error(format!(
                        "too many event followers ({MAX_FOLLOWERS}); try again later"
                    ));
                    return write_line(&mut write, &r).await;
                };
                for e in backlog {
                    write_line(&mut write, &Response::ok(serde_json::json!(e))).await?;
                }
                let mut scratch = [0u8; 512];
                loop {
                    tokio::select! {
                        // A follower that leaves is noticed at once (EOF or
                        // an error on its side), not at the next event: an
                        // idle daemon must not collect dead connections.
                        n = reader.read(&mut scratch) => match n {
                            Ok(0) | Err(_) => return Ok(()),
                            Ok(_) => {}
                        },
                        ev = events.recv() => match ev {
                            Ok(e) if e.root != root => {}
                            Ok(e) => {
                                write_line(&mut write, &Response::ok(serde_json::json!(e))).await?
                            }
                            Err(broadcast::error::RecvError::Lagged(n)) => {
                                tracing::warn!(skipped = n, "event follower lagged");
                            }
                            Err(broadcast::error::RecvError::Closed) => return Ok(()),
                        },
                    }
                }
            }
            Err(_) => {
                return write_line(&mut write, &Response::error("squadd is shutting down")).await;
            }
        }
    }
}
