//! Who a message may be sent to (issue 40 item 3): an agent the project
//! knows. A recipient nobody knows is most often a typo (`fronted` for
//! `frontend`), whose message would wait in an inbox nobody reads; `send`
//! refuses it, naming the agent meant, unless `--new-agent` says the
//! agent is new on purpose.
//!
//! The check costs the same however many messages the sessions hold
//! (issue 43 item 1): names are taken from file and directory *names*
//! (task assignments, messages, inboxes), never by reading every message,
//! and the look stops at the first source that knows the recipient.

use squad_protocol::FileKind;
use squad_protocol::tree::session_dirs;
use std::collections::BTreeSet;
use std::path::Path;

/// Why `to` is refused as a recipient (see [`refusal`]), or `None` when
/// the project knows it. Sources are looked at cheapest first: `lead`, the
/// team, the policy, the sessions' inboxes, then the sessions' files
/// newest first; every source is read only when the ones before did not
/// name `to`.
pub(crate) fn check(root: &Path, to: &str) -> Option<String> {
    let mut known = BTreeSet::from(["lead".to_string()]);
    if known.contains(to) {
        return None;
    }
    team_names(root, &mut known);
    policy_names(root, &mut known);
    if known.contains(to) {
        return None;
    }
    let sessions = session_dirs(root).unwrap_or_default();
    // Inboxes first: a few entries each, where a session's own listing
    // holds every message.
    for dir in sessions.iter().rev() {
        inbox_names(dir, &mut known);
    }
    if known.contains(to) {
        return None;
    }
    for dir in sessions.iter().rev() {
        session_names(dir, &mut known);
        if known.contains(to) {
            return None;
        }
    }
    refusal(to, &known)
}

/// The team's members: roster names (lower-cased) and folders from
/// team.md, and the agent folders under `agents/` (but `_alumni`). Only
/// those are read, not the team's charters, histories or decisions.
fn team_names(root: &Path, known: &mut BTreeSet<String>) {
    let Some(team) = squad_protocol::teamdir::locate(root) else {
        return;
    };
    if let Ok(text) = squad_protocol::fsx::read_regular_to_string(
        &team.path.join("team.md"),
        squad_protocol::team::MAX_TEAM_FILE_BYTES,
    ) {
        for m in squad_protocol::team::markdown::parse_roster(&text).members {
            known.insert(m.name.to_lowercase());
            known.insert(m.folder);
        }
    }
    let Ok(entries) = std::fs::read_dir(team.path.join("agents")) else {
        return;
    };
    for e in entries.flatten() {
        let Some(name) = e.file_name().to_str().map(str::to_string) else {
            continue;
        };
        // A real directory, as the team reader counts agents (a link is
        // never followed).
        if !name.starts_with('.') && name != "_alumni" && e.file_type().is_ok_and(|t| t.is_dir()) {
            known.insert(name);
        }
    }
}

/// The policy's leads and runner entries.
fn policy_names(root: &Path, known: &mut BTreeSet<String>) {
    if let Ok(policy) = crate::locks::load_policy(root) {
        known.extend(policy.leads());
        known.extend(policy.runners.agents.keys().filter(|a| *a != "*").cloned());
    }
}

/// The agents a session has inboxes for (`inbox/<agent>`).
fn inbox_names(dir: &Path, known: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir.join("inbox")) else {
        return;
    };
    for e in entries.flatten() {
        if let Some(name) = e.file_name().to_str()
            && squad_protocol::IdKind::Agent.matches(name)
            && e.file_type().is_ok_and(|t| t.is_dir())
        {
            known.insert(name.to_string());
        }
    }
}

/// The agents a session's file names name: the assignees of its task
/// assignments (`role-plan-<agent>-<task>.md`) and the senders of its
/// messages (`role-comm-<from>-to-…`; a name that leaves the sender
/// ambiguous, with `-to-` in an agent's name, is read).
fn session_names(dir: &Path, known: &mut BTreeSet<String>) {
    let is_agent = |a: &str| squad_protocol::IdKind::Agent.matches(a);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let agent = match FileKind::from_file_name(name) {
            Some(FileKind::TaskAssignment) => {
                squad_policies::notices::writer_of(name).map(str::to_string)
            }
            Some(FileKind::Message) => squad_policies::check::owner_from_name(name)
                .or_else(|| (name.matches("-to-").count() > 1).then(|| sender_read(&e.path()))?),
            _ => None,
        };
        if let Some(agent) = agent.filter(|a| is_agent(a)) {
            known.insert(agent);
        }
    }
}

/// The sender a message file names in its content (valid files only).
fn sender_read(path: &Path) -> Option<String> {
    match crate::index::load_file(path, FileKind::Message)
        .ok()??
        .entry
    {
        crate::index::Entry::Message(m) => Some(m.from_agent),
        _ => None,
    }
}

/// Why `to` is refused as a recipient, or `None` when the project knows it.
pub(crate) fn refusal(to: &str, known: &BTreeSet<String>) -> Option<String> {
    if known.contains(to) {
        return None;
    }
    let to_esc = crate::text::escape(to);
    let names: Vec<&str> = known.iter().map(String::as_str).collect();
    Some(
        match squad_protocol::suggest::closest(to, names.iter().copied(), 2) {
            Some(meant) => format!(
                "--to `{to_esc}`: no task assignment, message, team file or policy names this agent; did you mean `{meant}`? (`--new-agent` sends to a new agent anyway)"
            ),
            None => format!(
                "--to `{to_esc}`: no task assignment, message, team file or policy names this agent (known: {}); `--new-agent` sends to a new agent anyway",
                names.join(", ")
            ),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_agent_passes_and_a_typo_names_the_one_meant() {
        let known: BTreeSet<String> = ["frontend", "backend", "lead"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(refusal("frontend", &known), None);
        let why = refusal("fronted", &known).unwrap_or_default();
        assert!(why.contains("did you mean `frontend`?"), "{why}");
        assert!(why.contains("--new-agent"), "{why}");
        let why = refusal("designer", &known).unwrap_or_default();
        assert!(why.contains("known: backend, frontend, lead"), "{why}");
    }
}
