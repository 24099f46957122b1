//! The ids of squadd's notices to agents, and which of them are moot: a
//! pure rule both squadd's core (escalations, its status answer) and
//! `squadctl status` reading the files apply, so it sits below both (the
//! layer table of `supervisor/tests/module_cycles.rs`).

use squad_policies::notices::{Fact, Notice, SENDER, notices, writer_of};
use std::collections::BTreeSet;

/// A notice's message id: stable for (session, fact, recipient).
pub(crate) fn notice_id(session: &str, n: &Notice) -> String {
    let hash = crate::index::fingerprint(format!("{session}|{}", n.key).as_bytes());
    format!("msg_{SENDER}_{}_{hash:016x}", n.kind.as_str())
}

/// The ids of the notices the session's standing facts call for now (every
/// kind on, whatever the policy says): ready, overdue and violating tasks,
/// and each file's current bytes (a file-invalid or message-refused notice
/// names them). A notice of squadd's whose id is not among them is moot:
/// its task started or completed, its file was fixed or removed (issue 40
/// item 4). Pure: the daemon passes its tasks, `status` the derived ones.
pub(crate) fn live_notice_ids<'a>(
    session: &str,
    index: &crate::index::SessionIndex,
    tasks: impl IntoIterator<Item = &'a crate::derive::TaskView>,
    lead: Option<&str>,
) -> BTreeSet<String> {
    let all_on = squad_policies::notices::NoticePolicy {
        lead: lead.map(str::to_string),
        ..Default::default()
    };
    let mut live = BTreeSet::new();
    let mut add = |fact: &Fact<'_>| {
        live.extend(notices(&all_on, fact).iter().map(|n| notice_id(session, n)));
    };
    for t in tasks {
        let (task, agent) = (t.task_id.as_str(), t.agent.as_str());
        if t.ready {
            add(&Fact::TaskReady { task, agent });
        }
        if t.overdue {
            add(&Fact::TaskOverdue { task, agent });
        }
        if t.violation {
            add(&Fact::DependencyViolation {
                task,
                agent,
                unmet: &t.unmet,
            });
        }
    }
    for (file, f) in index.files.iter() {
        if let Some(agent) = writer_of(file) {
            add(&Fact::FileInvalid {
                file,
                agent,
                fingerprint: f.fingerprint,
            });
        }
    }
    live
}

/// Whether `message_id` is a notice of squadd's that is not among `live`
/// ([`live_notice_ids`]): moot, never escalated, not an overdue reply.
pub(crate) fn is_moot(message_id: &str, live: &BTreeSet<String>) -> bool {
    message_id.starts_with(&format!("msg_{SENDER}_")) && !live.contains(message_id)
}
