//! `notify:` of the policy (docs/daemon.md, "Notifications"): how the lead
//! is told that "needs attention" grew: a desktop notification and/or a
//! webhook.

use crate::duration::parse_duration;
use serde::Deserialize;
use std::time::Duration;

/// `notify:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNotify {
    #[serde(default)]
    desktop: bool,
    #[serde(default)]
    webhook: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    retries: Option<u32>,
}

/// `notify:` of the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyPolicy {
    /// An OS notification (`notify-send`, or `osascript` on macOS) when the
    /// program is on PATH.
    pub desktop: bool,
    /// `http://` or `https://` URL a JSON event is POSTed to.
    pub webhook: Option<String>,
    /// How long one POST may take.
    pub timeout: Duration,
    /// Further attempts after a failed POST (at most 5).
    pub retries: u32,
}

impl Default for NotifyPolicy {
    fn default() -> Self {
        NotifyPolicy {
            desktop: false,
            webhook: None,
            timeout: Duration::from_secs(5),
            retries: 2,
        }
    }
}

impl NotifyPolicy {
    /// Whether anything is to be sent at all.
    pub fn any(&self) -> bool {
        self.desktop || self.webhook.is_some()
    }
}

/// Checks `notify:`: (field, message) of the first error.
pub(crate) fn notify_policy(raw: RawNotify) -> Result<NotifyPolicy, (String, String)> {
    let d = NotifyPolicy::default();
    let webhook = match raw.webhook.map(|w| w.trim().to_string()) {
        Some(w) if w.is_empty() => None,
        Some(w) => {
            let rest = w
                .strip_prefix("http://")
                .or_else(|| w.strip_prefix("https://"));
            if rest.is_none_or(|r| r.is_empty() || r.starts_with('/'))
                || w.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err((
                    "notify.webhook".into(),
                    "an http:// or https:// URL with a host, e.g. https://hooks.slack.com/services/…"
                        .into(),
                ));
            }
            Some(w)
        }
        None => None,
    };
    let timeout = match raw.timeout {
        Some(t) => parse_duration(&t).map_err(|m| ("notify.timeout".to_string(), m))?,
        None => d.timeout,
    };
    if timeout.is_zero() || timeout > Duration::from_secs(60) {
        return Err((
            "notify.timeout".into(),
            "between 1ms and 60s (a webhook is told within a short time or not at all)".into(),
        ));
    }
    let retries = raw.retries.unwrap_or(d.retries);
    if retries > 5 {
        return Err(("notify.retries".into(), "at most 5".into()));
    }
    Ok(NotifyPolicy {
        desktop: raw.desktop,
        webhook,
        timeout,
        retries,
    })
}

#[cfg(test)]
mod tests {
    use crate::Policy;
    use std::time::Duration;

    #[test]
    fn notify_is_read_and_bad_values_refused_naming_the_field() {
        let p = Policy::parse(Some(
            "notify:\n  desktop: true\n  webhook: https://hooks.example.com/T/B/secret\n  timeout: 2s\n  retries: 1\n",
        ))
        .unwrap()
        .notify;
        assert!(p.desktop && p.any());
        assert_eq!(
            p.webhook.as_deref(),
            Some("https://hooks.example.com/T/B/secret")
        );
        assert_eq!((p.timeout, p.retries), (Duration::from_secs(2), 1));
        let d = Policy::defaults().notify;
        assert!(!d.any());
        for (yaml, field) in [
            ("notify:\n  webhook: ftp://x\n", "notify.webhook"),
            ("notify:\n  webhook: \"https://\"\n", "notify.webhook"),
            ("notify:\n  timeout: 5m\n", "notify.timeout"),
            ("notify:\n  timeout: soon\n", "notify.timeout"),
            ("notify:\n  retries: 50\n", "notify.retries"),
        ] {
            let e = Policy::parse(Some(yaml)).unwrap_err();
            assert_eq!(e.field, field, "{yaml}: {e}");
        }
    }
}
