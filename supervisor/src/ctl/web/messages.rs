//! The Messages page (`/s/S/messages`): the session's messages as
//! threads with where each stands in its recipient's inbox.

use super::html;
use super::pages::{Loaded, page};
use chrono::Utc;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One message of the Messages page.
struct Shown {
    info: crate::index::MessageInfo,
    subject: String,
    body: String,
}

/// `/s/SESSION/messages`: the session's messages as threads (a message and
/// its replies), newest thread first, each with sender, recipient,
/// priority, type, reply deadline, and where it stands in the recipient's
/// inbox (not delivered, unread, read); a reply asked for and not given by
/// its deadline is marked overdue. Read-only: the lead replies with
/// `squadctl reply`.
pub(super) fn messages(root: &Path, session: &str) -> Result<Option<String>, super::WebError> {
    let Some(l) = Loaded::new(root, Some(session))? else {
        return Ok(None);
    };
    let Some(s) = l.sessions.get(session) else {
        return Ok(None);
    };
    let mut all: BTreeMap<String, Shown> = BTreeMap::new();
    for f in s.files.values() {
        let crate::index::Entry::Message(m) = &f.entry else {
            continue;
        };
        let text = squad_protocol::fsx::read_regular_to_string(
            &s.dir.join(&*f.name),
            squad_protocol::validate::MAX_FILE_BYTES,
        )
        .unwrap_or_default();
        let parsed = squad_protocol::payload::extract(&text).ok().and_then(|p| {
            squad_protocol::depth::from_str::<squad_protocol::model::Message>(p.yaml).ok()
        });
        let (subject, body) = parsed.map_or_else(
            || (String::from("(cannot be read)"), String::new()),
            |m| (m.subject, m.message),
        );
        all.insert(
            m.message_id.clone(),
            Shown {
                info: (**m).clone(),
                subject,
                body,
            },
        );
    }
    // The thread of a message: the first of its in_reply_to chain known here.
    let thread_of = |id: &str| {
        let mut at = id.to_string();
        for _ in 0..all.len() {
            match all.get(&at).and_then(|m| m.info.in_reply_to.clone()) {
                Some(up) if all.contains_key(&up) => at = up,
                _ => break,
            }
        }
        at
    };
    let mut threads: BTreeMap<String, Vec<&Shown>> = BTreeMap::new();
    for (id, m) in &all {
        threads.entry(thread_of(id)).or_default().push(m);
    }
    let mut threads: Vec<Vec<&Shown>> = threads.into_values().collect();
    for t in &mut threads {
        t.sort_by_key(|m| m.info.created_at);
    }
    threads.sort_by_key(|t| std::cmp::Reverse(t.last().map(|m| m.info.created_at)));
    let mut inboxes: BTreeMap<String, Vec<crate::inbox::Item>> = BTreeMap::new();
    let mut main = l.banner();
    let _ = writeln!(
        main,
        "<h1>{} <small>messages · <a href=\"/s/{n}\">board</a></small></h1>",
        html(session),
        n = html(session)
    );
    if threads.is_empty() {
        main.push_str("<p>No messages in this session.</p>\n");
    }
    for t in threads {
        main.push_str("<section class=\"thread\">\n");
        for m in t {
            let i = &m.info;
            let inbox = inboxes
                .entry(i.to_agent.clone())
                .or_insert_with(|| crate::inbox::list(&s.dir, &i.to_agent));
            let state = match inbox.iter().find(|e| e.message_id == i.message_id) {
                None => "not delivered",
                Some(e) if e.unread => "unread",
                Some(_) => "read",
            };
            let answered = all
                .values()
                .any(|o| o.info.in_reply_to.as_deref() == Some(i.message_id.as_str()));
            let overdue = i.response_needed
                && !answered
                && i.response_by
                    .is_some_and(|by| by.with_timezone(&Utc) < l.now);
            let due = match (i.response_needed, i.response_by) {
                (true, Some(by)) => format!(
                    " · reply by {}{}",
                    by.to_rfc3339(),
                    if overdue {
                        " <strong class=\"overdue\">overdue</strong>"
                    } else {
                        ""
                    }
                ),
                (true, None) => " · reply asked".into(),
                _ => String::new(),
            };
            let _ = writeln!(
                main,
                "<article class=\"msg prio-{p}\" id=\"m-{id}\" data-state=\"{state}\"><p class=\"meta\">{from} → {to} · <span class=\"prio prio-{p}\">{p}</span> · {kind} · <time>{at}</time> · <span class=\"inbox\">{state}</span>{due}</p><h2>{subject}</h2><pre class=\"body\">{body}</pre></article>",
                id = html(&i.message_id),
                p = i.priority.as_str(),
                from = html(&i.from_agent),
                to = html(&i.to_agent),
                kind = i.kind.as_str(),
                at = i.created_at.to_rfc3339(),
                subject = html(&m.subject),
                body = html(m.body.trim_end()),
            );
        }
        main.push_str("</section>\n");
    }
    Ok(Some(page(
        &format!("{session} messages"),
        &[
            (format!("/s/{}", html(session)), session.to_string()),
            (format!("/s/{}/messages", html(session)), "messages".into()),
        ],
        &main,
    )))
}
