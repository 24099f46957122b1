//! What the lead is told when "needs attention" grows (`notify:` of the
//! policy, docs/daemon.md "Notifications"): which items are new since the
//! last look, and the event sent for each. Pure: the looking and the
//! sending are squadd's notifier (daemon/notifier.rs).

use crate::attention::Item;
use chrono::{DateTime, SecondsFormat, Utc};
use std::collections::BTreeSet;

/// An item's identity across looks: its kind, session and task (and its
/// summary when it has no task), so that a summary that changes as time
/// passes ("overdue by 5m", "by 6m") is not news.
pub(crate) fn key(item: &Item) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}",
        item.kind,
        item.session.as_deref().unwrap_or(""),
        item.task.as_deref().unwrap_or(&item.summary)
    )
}

/// The items of `now` not in `seen` (the keys of the last look), and the
/// keys of `now` (the next look's `seen`): an item that went away and
/// comes back is news again.
pub(crate) fn grown<'a>(
    seen: &BTreeSet<String>,
    now: &'a [Item],
) -> (Vec<&'a Item>, BTreeSet<String>) {
    let keys: BTreeSet<String> = now.iter().map(key).collect();
    let mut told = BTreeSet::new();
    let new = now
        .iter()
        .filter(|i| {
            let k = key(i);
            !seen.contains(&k) && told.insert(k)
        })
        .collect();
    (new, keys)
}

/// The one-line text of an item, for people (a chat message, a desktop
/// notification's body).
pub(crate) fn text(root: &str, item: &Item) -> String {
    let place = match (&item.session, &item.task) {
        (Some(s), Some(t)) => format!(" [{s} {t}]"),
        (Some(s), None) => format!(" [{s}]"),
        _ => String::new(),
    };
    format!(
        "squad needs you ({}, {}){place}: {} — run: {} (in {root})",
        item.severity, item.kind, item.summary, item.command
    )
}

/// The webhook's JSON event for one new item: `text` (Slack), `content`
/// (Discord), `message` and `title` (ntfy's JSON publishing, Matrix
/// bridges), and the structured fields.
pub(crate) fn payload(root: &str, item: &Item, at: DateTime<Utc>) -> serde_json::Value {
    let text = text(root, item);
    serde_json::json!({
        "text": text,
        "content": text.chars().take(2000).collect::<String>(),
        "title": "squad: needs attention",
        "message": text,
        "event": "needs-attention",
        "kind": item.kind,
        "severity": item.severity,
        "session": item.session,
        "task": item.task,
        "summary": item.summary,
        "command": item.command,
        "root": root,
        "at": at.to_rfc3339_opts(SecondsFormat::Millis, true),
    })
}

/// A webhook URL as it may be logged: its scheme and host, never its path
/// or query (where Slack, Discord and ntfy keep the secret), nor a
/// `user:password@`.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let more = if rest.len() > authority.len() {
        "/…"
    } else {
        ""
    };
    format!("{scheme}://{host}{more}")
}

/// `curl --config -` text POSTing `body` to `url`: the URL reaches curl on
/// its stdin, never its command line (which every local user can read).
pub(crate) fn curl_config(url: &str, body: &str, timeout_secs: f64) -> String {
    let quoted = |s: &str| {
        let mut q = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                '\n' => q.push_str("\\n"),
                '\r' => q.push_str("\\r"),
                '\t' => q.push_str("\\t"),
                c => q.push(c),
            }
        }
        q.push('"');
        q
    };
    format!(
        "url = {}\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\ndata-binary = {}\nmax-time = {timeout_secs:.3}\nsilent\nshow-error\nfail\noutput = \"/dev/null\"\n",
        quoted(url),
        quoted(body)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::Kind;

    fn item(kind: Kind, task: Option<&str>, summary: &str) -> Item {
        Item {
            id: String::new(),
            kind,
            severity: "error".into(),
            session: Some("s1".into()),
            task: task.map(str::to_string),
            summary: summary.into(),
            command: "squadctl runs".into(),
        }
    }

    #[test]
    fn only_new_items_are_news_and_a_changed_summary_is_not() {
        let first = [item(Kind::RunHeld, Some("task_1"), "held")];
        let (new, seen) = grown(&BTreeSet::new(), &first);
        assert_eq!(new.len(), 1);
        let second = [
            item(Kind::RunHeld, Some("task_1"), "held, still"),
            item(Kind::OverdueReply, Some("task_2"), "overdue by 5m"),
        ];
        let (new, seen) = grown(&seen, &second);
        assert_eq!(new.len(), 1);
        assert_eq!(new[0].kind, Kind::OverdueReply);
        // Gone, then back: news again.
        let (new, seen) = grown(&seen, &[]);
        assert!(new.is_empty() && seen.is_empty());
        let (new, _) = grown(&seen, &first);
        assert_eq!(new.len(), 1);
    }

    #[test]
    fn the_payload_speaks_slack_discord_and_ntfy_and_the_url_is_redacted() {
        let i = item(Kind::RunHeld, Some("task_1"), "a run is held");
        let at = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
            .unwrap()
            .with_timezone(&Utc);
        let v = payload("/src/shop", &i, at);
        for k in ["text", "content", "message"] {
            assert!(v[k].as_str().unwrap().contains("a run is held"), "{v}");
        }
        assert_eq!(v["kind"], "run-held");
        assert_eq!(v["task"], "task_1");
        assert_eq!(v["at"], "2026-01-02T03:04:05.000Z");
        assert_eq!(
            redact("https://hooks.slack.com/services/T0/B0/SECRET?x=1"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(
            redact("http://u:pw@127.0.0.1:8080/t"),
            "http://127.0.0.1:8080/…"
        );
        let c = curl_config("https://h/x?a=\"b\"", "{\"t\":\"a\\nb\"}", 5.0);
        assert!(c.contains("url = \"https://h/x?a=\\\"b\\\"\"\n"), "{c}");
        assert!(
            c.contains("data-binary = \"{\\\"t\\\":\\\"a\\\\nb\\\"}\"\n"),
            "{c}"
        );
    }
}
