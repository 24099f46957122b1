//! Who a message may be sent to (issue 40 item 3): an agent the project
//! knows. A recipient nobody knows is most often a typo (`fronted` for
//! `frontend`), whose message would wait in an inbox nobody reads; `send`
//! refuses it, naming the agent meant, unless `--new-agent` says the
//! agent is new on purpose.

use squad_protocol::tree::session_dirs;
use std::collections::BTreeSet;
use std::path::Path;

/// Every agent the project knows: the assignees of every session's task
/// assignments and the senders of its messages, the members of the team
/// (roster names and agent folders), the policy's leads and runner
/// entries, and `lead` (the name the needs-attention commands use).
pub(crate) fn known_agents(root: &Path) -> BTreeSet<String> {
    let mut known = BTreeSet::from(["lead".to_string()]);
    for dir in session_dirs(root).unwrap_or_default() {
        let Ok(index) = crate::index::scan_session(&dir) else {
            continue;
        };
        for f in index.files.values() {
            match &f.entry {
                crate::index::Entry::Plan(p) => {
                    known.insert(p.agent.clone());
                }
                crate::index::Entry::Message(m) => {
                    known.insert(m.from_agent.clone());
                }
                _ => {}
            }
        }
    }
    if let Some(dir) = squad_protocol::teamdir::locate(root) {
        let team = squad_protocol::team::read_team(&dir);
        for m in &team.roster.members {
            known.insert(m.name.to_lowercase());
            known.insert(m.folder.clone());
        }
        known.extend(team.agents.keys().cloned());
    }
    if let Ok(policy) = crate::locks::load_policy(root) {
        known.extend(policy.leads());
        known.extend(policy.runners.agents.keys().filter(|a| *a != "*").cloned());
    }
    known
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
