//! Maildir-style inboxes: `<session>/inbox/<agent>/{tmp,new,cur}`.
//!
//! Delivery writes the message into `tmp/`, fsyncs it and renames it into
//! `new/`; acknowledging moves it to `cur/`. The delivered file is the record
//! of delivery: a message whose inbox name exists in `new/` or `cur/` has been
//! delivered, so a restart never delivers twice and never skips.

use squad_policies::messages::parse_inbox_name;
use squad_protocol::model::Priority;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The inbox directory of an agent in a session.
pub(crate) fn inbox_dir(session_dir: &Path, agent: &str) -> PathBuf {
    session_dir.join("inbox").join(agent)
}

/// Delivers `bytes` under `name` (written into `tmp/`, fsynced, linked
/// into `new/`), without the fsync of `new/`: the message is complete on
/// disk and in `new/`, durable once the caller fsyncs the returned `new/`
/// directory (one fsync per inbox for a group of deliveries); `None` when
/// it was delivered before. The `tmp/` name stays, a second name of the
/// message, until its delivery is audited ([`Fresh::marker`]): a squadd
/// killed in between leaves it, and the next one says the delivery
/// ([`unaudited`]). Walks from `root` to the session directory
/// without following a link (an `inbox` or `inbox/<agent>` that is a
/// symlink is refused) and never recreating a session directory that
/// vanished; the inbox's own directories are created when missing.
pub(crate) fn deliver_unsynced(
    root: &Path,
    session_dir: &Path,
    agent: &str,
    name: &str,
    bytes: &[u8],
) -> io::Result<Option<Fresh>> {
    use crate::safefs::Dir;
    use std::ffi::OsStr;
    let rel = session_dir
        .strip_prefix(root)
        .map_err(|_| io::Error::other("session outside its root"))?;
    let session = Dir::open_root(root)?.walk(rel, None)?;
    let inbox = session
        .create_dir(OsStr::new("inbox"), 0o777)?
        .create_dir(OsStr::new(agent), 0o777)?;
    let tmp = inbox.create_dir(OsStr::new("tmp"), 0o777)?;
    let new = inbox.create_dir(OsStr::new("new"), 0o777)?;
    let cur = inbox.create_dir(OsStr::new("cur"), 0o777)?;
    if new.contains(name) || cur.contains(name) {
        return Ok(None);
    }
    let temp = format!("{name}.{}", std::process::id());
    let mut f = tmp.open_file(&temp, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o666)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    tmp.link_into(&temp, &new, name)?;
    Ok(Some(Fresh {
        new,
        tmp,
        marker: temp,
    }))
}

/// A fresh delivery ([`deliver_unsynced`]): its inbox's `new/` (to fsync)
/// and its mark of not yet audited, `tmp/<name>.<pid>` (to remove once its
/// audit line is written).
#[derive(Debug)]
pub(crate) struct Fresh {
    /// The inbox's `new/`.
    pub new: crate::safefs::Dir,
    /// The inbox's `tmp/`.
    pub tmp: crate::safefs::Dir,
    /// The mark's name in `tmp/`.
    pub marker: String,
}

/// The deliveries of `agent`'s inbox (in `inbox_dir`) that were never
/// audited: the inbox names whose `tmp/<name>.<pid>` mark is still a second
/// name of the message in `new/` or `cur/` (a squadd killed between the
/// delivery and its audit line). Each with its mark's name.
pub(crate) fn unaudited(inbox_dir: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::MetadataExt as _;
    let tmp = inbox_dir.join("tmp");
    if !std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir()) {
        return Vec::new(); // none, or a link: never read through
    }
    let Ok(marks) = std::fs::read_dir(&tmp) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in marks.flatten() {
        let mark = m.file_name().to_string_lossy().into_owned();
        let Some((name, pid)) = mark.rsplit_once('.') else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(m.path()) else {
            continue;
        };
        if !pid.bytes().all(|b| b.is_ascii_digit()) || meta.nlink() < 2 || !meta.is_file() {
            continue;
        }
        let same = |sub: &str| {
            std::fs::symlink_metadata(inbox_dir.join(sub).join(name))
                .is_ok_and(|c| c.ino() == meta.ino() && c.dev() == meta.dev())
        };
        if same("new") || same("cur") {
            out.push((name.to_string(), mark));
        }
    }
    out.sort();
    out
}

/// One delivered message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Item {
    /// The session directory name.
    pub session: String,
    /// The inbox file name.
    pub name: String,
    /// Its path.
    pub path: PathBuf,
    /// Priority (from the name).
    pub priority: Priority,
    /// Message id (from the name).
    pub message_id: String,
    /// Still in `new/` (unacknowledged).
    pub unread: bool,
    /// When it was delivered (the file's modification time).
    #[serde(skip)]
    pub delivered_at: Option<SystemTime>,
}

/// The messages in an agent's inbox of one session, sorted as delivered
/// (priority, then time), unread ones first.
pub(crate) fn list(session_dir: &Path, agent: &str) -> Vec<Item> {
    let session = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = inbox_dir(session_dir, agent);
    let mut items = Vec::new();
    for (sub, unread) in [("new", true), ("cur", false)] {
        let Ok(entries) = fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some((priority, message_id)) = parse_inbox_name(&name) else {
                continue;
            };
            items.push(Item {
                session: session.clone(),
                path: e.path(),
                delivered_at: e.metadata().and_then(|m| m.modified()).ok(),
                name,
                priority,
                message_id,
                unread,
            });
        }
    }
    items.sort_by(|a, b| (!a.unread, &a.name).cmp(&(!b.unread, &b.name)));
    items
}

/// Every unread message of a session, in every agent's inbox.
pub(crate) fn unread(session_dir: &Path) -> Vec<(String, Item)> {
    let agents: Vec<String> = fs::read_dir(session_dir.join("inbox"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    agents
        .into_iter()
        .flat_map(|agent| {
            list(session_dir, &agent)
                .into_iter()
                .filter(|i| i.unread)
                .map(move |i| (agent.clone(), i))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Acknowledges a delivered message: `new/` → `cur/`.
pub(crate) fn ack(item: &Item) -> io::Result<PathBuf> {
    let dir = item
        .path
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| io::Error::other("inbox item outside an inbox"))?;
    let from = item
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::other("inbox item without a name"))?;
    // Relative to the agent's inbox reached from the project root without
    // following a link: a `cur/` (or `new/`) planted as a link is refused.
    let (agent, cur_name) = crate::safefs::project_parent(&dir.join("cur"), None)?;
    let cur = agent.create_dir(std::ffi::OsStr::new(&cur_name), 0o777)?;
    let new = agent.open_dir(std::ffi::OsStr::new("new"))?;
    new.rename(from, &cur, &item.name)?;
    Ok(dir.join("cur").join(&item.name))
}
