//! Readiness, status and watchdog notifications for systemd (`Type=notify`).
//! Every call is a no-op when `NOTIFY_SOCKET` is unset, and none blocks: a
//! manager that does not read its socket (the queue holds only
//! `net.unix.max_dgram_qlen` datagrams, 10 by default) must never freeze the
//! daemon.

use sd_notify::NotifyState;
use std::time::Duration;

/// Tells the service manager start-up is complete.
pub(crate) fn ready(status: &str) {
    let message = format!("{}\n{}\n", NotifyState::Ready, NotifyState::Status(status));
    if let Err(e) = send_nonblocking(&message) {
        tracing::warn!(error = %e, "sd_notify READY failed");
    }
}

/// Updates the one-line status systemctl shows (a dropped line is replaced
/// by the next one).
pub(crate) fn status(status: &str) {
    if let Err(e) = send_nonblocking(&format!("{}\n", NotifyState::Status(status))) {
        tracing::debug!(error = %e, "STATUS= not sent");
    }
}

fn send_nonblocking(message: &str) -> std::io::Result<()> {
    use std::os::unix::net::UnixDatagram;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let socket = UnixDatagram::unbound()?;
    socket.set_nonblocking(true)?;
    #[cfg(target_os = "linux")]
    if let Some(name) = path.as_encoded_bytes().strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        return socket.send_to_addr(message.as_bytes(), &addr).map(drop);
    }
    socket.send_to(message.as_bytes(), &path).map(drop)
}

/// Tells the service manager we are stopping.
pub(crate) fn stopping() {
    let _ = send_nonblocking(&format!("{}\n", NotifyState::Stopping));
}

/// Pings the watchdog.
pub(crate) fn watchdog() {
    let _ = send_nonblocking(&format!("{}\n", NotifyState::Watchdog));
}

/// The watchdog ping interval (half the configured timeout), when enabled.
pub(crate) fn watchdog_interval() -> Option<Duration> {
    // Capped: `Instant + Duration` panics past the clock's range, and
    // WATCHDOG_USEC may hold any u64.
    sd_notify::watchdog_enabled().map(|d| (d / 2).min(Duration::from_secs(86_400)))
}
