//! The messages addressed to an agent that squadd has not delivered yet,
//! as `inbox list` shows them, found by name: only files whose name
//! addresses the agent and whose id is not delivered are read, never the
//! session's other messages and notices (issue 43 item 1).

use crate::inbox::Item;
use crate::index::{Entry, load_file};
use squad_protocol::FileKind;
use squad_protocol::model::Priority;
use std::path::PathBuf;

/// A message addressed to an agent that is not in its inbox yet.
pub(super) struct Undelivered {
    /// The session directory name.
    pub session: String,
    /// `meta.message_id`.
    pub message_id: String,
    /// `meta.priority`.
    pub priority: Priority,
    /// `meta.from_agent`.
    pub from: String,
    /// The message file.
    pub path: PathBuf,
}

/// The message id in a message file's name when the name may address
/// `agent` (`role-comm-<from>-to-<agent>-<message_id>.md`). A valid
/// message's name is built from its content and message ids hold no `-`,
/// so every valid message to `agent` passes; a name that passes is read to
/// be sure (`-to-` may be part of an agent's name).
fn addressed_by_name<'a>(name: &'a str, agent: &str) -> Option<&'a str> {
    let stem = name.strip_prefix("role-comm-")?.strip_suffix(".md")?;
    let (pair, id) = stem.rsplit_once('-')?;
    let from = pair.strip_suffix(agent)?.strip_suffix("-to-")?;
    (!from.is_empty()).then_some(id)
}

/// The messages in the sessions `dirs` addressed to `agent` whose ids are not
/// among `delivered` (squadd has not delivered them: it is down, or a low
/// priority message is waiting for its turn). Names decide which files are
/// read: only those addressed to `agent` and not delivered, never the
/// session's other messages and notices (issue 43 item 1).
pub(super) fn undelivered(dirs: &[PathBuf], agent: &str, delivered: &[Item]) -> Vec<Undelivered> {
    let delivered: std::collections::BTreeSet<(&str, &str)> = delivered
        .iter()
        .map(|i| (i.session.as_str(), i.message_id.as_str()))
        .collect();
    let mut out = Vec::new();
    for dir in dirs {
        let session = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if FileKind::from_file_name(name) != Some(FileKind::Message) {
                continue;
            }
            match addressed_by_name(name, agent) {
                Some(id) if !delivered.contains(&(session.as_str(), id)) => {}
                _ => continue,
            }
            let Ok(Some(f)) = load_file(&e.path(), FileKind::Message) else {
                continue;
            };
            let Entry::Message(m) = f.entry else {
                continue;
            };
            if m.to_agent == agent && !delivered.contains(&(session.as_str(), &m.message_id)) {
                out.push(Undelivered {
                    session: session.clone(),
                    message_id: m.message_id,
                    priority: m.priority,
                    from: m.from_agent,
                    path: e.path(),
                });
            }
        }
    }
    out.sort_by(|a, b| (a.priority, &a.message_id).cmp(&(b.priority, &b.message_id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_addresses_its_recipient_and_gives_the_id() {
        let to_bob = "role-comm-alice-to-bob-msg_20240115T103600Z_a1b2.md";
        assert_eq!(
            addressed_by_name(to_bob, "bob"),
            Some("msg_20240115T103600Z_a1b2")
        );
        assert_eq!(addressed_by_name(to_bob, "ob"), None);
        assert_eq!(addressed_by_name(to_bob, "alice"), None);
        // `-to-` inside a name: both readings pass, the content decides.
        let odd = "role-comm-go-to-market-to-bob-msg_1.md";
        assert_eq!(addressed_by_name(odd, "bob"), Some("msg_1"));
        assert_eq!(addressed_by_name(odd, "market-to-bob"), Some("msg_1"));
        assert_eq!(addressed_by_name("role-comm-to-bob-msg_1.md", "bob"), None);
        assert_eq!(addressed_by_name("role-comm-bob-task_1.md", "bob"), None);
    }
}
