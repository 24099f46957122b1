//! Readiness, status and watchdog notifications for systemd (`Type=notify`).
//! Every call is a no-op when `NOTIFY_SOCKET` is unset.

use sd_notify::NotifyState;
use std::time::Duration;

/// Tells the service manager start-up is complete.
pub fn ready(status: &str) {
    if let Err(e) = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)]) {
        tracing::warn!(error = %e, "sd_notify READY failed");
    }
}

/// Updates the one-line status systemctl shows.
pub fn status(status: &str) {
    let _ = sd_notify::notify(&[NotifyState::Status(status)]);
}

/// Tells the service manager we are stopping.
pub fn stopping() {
    let _ = sd_notify::notify(&[NotifyState::Stopping]);
}

/// Pings the watchdog.
pub fn watchdog() {
    let _ = sd_notify::notify(&[NotifyState::Watchdog]);
}

/// The watchdog ping interval (half the configured timeout), when enabled.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().map(|d| d / 2)
}
