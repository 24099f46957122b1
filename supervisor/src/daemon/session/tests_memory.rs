//! Memory measurements of [`super`] (issue 23 item 2): bytes counted by
//! the counting allocator (`counting.rs`), each with its budget.

use super::tests::{base, in_use, plan, progress};
use super::*;
use crate::index::index_bytes;
use chrono::Duration;

/// Issue 23 item 2's measurement: what sessions of 5 overdue tasks (a plan
/// and an in-progress update each, plus a status file: the start-up
/// benchmark's tree) hold in memory, the index and the session cores apart,
/// then each part of the cores (`--nocapture` prints them). The counting
/// allocator counts this thread's bytes alone, so it runs with the other
/// tests. Budgets, a session: the cores' 6,500 B failed with the parallel
/// `BTreeMap`s (9,405 B) and held with the sorted vectors (5,808 B by
/// `mallinfo2`, 5,711 B counted); 5,500 B failed while task starts and
/// overdue reports were a `BTreeMap` and a `BTreeSet` (5,231 B since); the
/// index's 8,600 B failed while a plan kept a second copy of its task id
/// and assignee (8,832 B; 7,872 B since), its 7,000 B while each
/// entry was inline as large as a message's (6,288 B since the variants
/// are boxed), its 6,100 B while plans and progress updates held their
/// lists as `Vec`s (5,968 B as boxed slices); the context fragment's 1,700 B
/// failed with a `BTreeMap` of pretty-printed texts with their spare
/// capacity (2,160 B; 1,328 B since).
#[test]
fn memory_of_a_thousand_sessions_of_five_overdue_tasks() {
    // The figures are a session's; 300 keep the test quick.
    const SESSIONS: usize = 300;
    let now = base() + Duration::days(365);
    let status = "session_id: s\nstatus: active\nphase: execution\nstarted_at: 2024-01-15T10:00:00Z\ntasks_total: 5\ntasks_completed: 0\nagents_active: []\n";
    // Where the cores will be (a root keeps them in its map): not counted.
    let mut cores = Vec::with_capacity(SESSIONS);
    let start = in_use();
    let mut indexes = Vec::with_capacity(SESSIONS);
    for s in 0..SESSIONS {
        let dir = PathBuf::from(format!("/p/.squad/sessions/20240115T100000Z-s{s:04}"));
        let mut index = SessionIndex::new(dir.clone());
        let mut add = |name: String, text: String| {
            let kind = squad_protocol::FileKind::from_file_name(&name).unwrap();
            let f = index_bytes(&dir.join(&name), kind, text.as_bytes());
            index.insert(name, f);
        };
        for t in 0..5u8 {
            add(
                format!("role-plan-dev-task_{t}.md"),
                plan(t, "dev", &[], &[], Some(5)),
            );
            add(
                format!("role-comm-dev-task_{t}.md"),
                progress(t, "dev", "in_progress", 5),
            );
        }
        add("session-status.md".into(), status.into());
        indexes.push(index);
    }
    let indexed = in_use();
    for index in indexes {
        let (core, _) = SessionCore::load(index, TaskStarts::new(), BTreeSet::new(), now);
        cores.push(core);
    }
    let loaded = in_use();
    assert!(cores.iter().all(|c| c.tasks().values().all(|t| t.overdue)));
    let per_core = loaded.saturating_sub(indexed) / SESSIONS;
    let per_index = indexed.saturating_sub(start) / SESSIONS;
    // Each session's part of the shared context, as the root keeps it.
    let mut fragments = Vec::with_capacity(SESSIONS);
    let unfragmented = in_use();
    for c in &cores {
        fragments.push(crate::outputs::context_fragment(c.index(), &c.view()));
    }
    let per_fragment = in_use().saturating_sub(unfragmented) / SESSIONS;
    drop(fragments);
    println!(
        "index {per_index} B/session, core beyond its index {per_core} B/session, context fragment {per_fragment} B/session ({SESSIONS} sessions)"
    );
    assert!(per_core <= 5500, "{per_core} B per session core");
    assert!(per_index <= 6100, "{per_index} B per session index");
    assert!(
        per_fragment <= 1700,
        "{per_fragment} B per context fragment"
    );
    // What each part of the cores holds: freed one part at a time.
    let mut before = in_use();
    let mut part = |what: &str, cores: &mut Vec<SessionCore>, free: &dyn Fn(&mut SessionCore)| {
        for c in cores.iter_mut() {
            free(c);
        }
        let now = in_use();
        println!(
            "  {what}: {} B/session",
            before.saturating_sub(now) / SESSIONS
        );
        before = now;
    };
    part("tasks", &mut cores, &|c| drop(std::mem::take(&mut c.tasks)));
    part("plan_files", &mut cores, &|c| {
        drop(std::mem::take(&mut c.plan_files))
    });
    part("report_files", &mut cores, &|c| {
        drop(std::mem::take(&mut c.report_files))
    });
    part("edges", &mut cores, &|c| {
        drop(std::mem::take(&mut c.prereqs));
        drop(std::mem::take(&mut c.dependents));
        drop(std::mem::take(&mut c.contributed));
    });
    part("active", &mut cores, &|c| {
        drop(std::mem::take(&mut c.active))
    });
    part("diags", &mut cores, &|c| {
        drop(std::mem::take(&mut c.graph_diags));
        drop(std::mem::take(&mut c.message_diags));
        drop(std::mem::take(&mut c.member_diags));
        drop(std::mem::take(&mut c.index.session_diagnostics));
    });
    part("message_ids", &mut cores, &|c| {
        drop(std::mem::take(&mut c.message_ids))
    });
    part("rule_plans", &mut cores, &|c| {
        drop(std::mem::take(&mut c.rule_plans))
    });
    part("task_members", &mut cores, &|c| {
        drop(std::mem::take(&mut c.task_members))
    });
    part("structural", &mut cores, &|c| {
        drop(std::mem::take(&mut c.structural))
    });
    part("dirty", &mut cores, &|c| drop(std::mem::take(&mut c.dirty)));
    part("decision_files", &mut cores, &|c| {
        drop(std::mem::take(&mut c.decision_files))
    });
    part("starts", &mut cores, &|c| {
        drop(std::mem::take(&mut c.starts))
    });
    part("overdue_reported", &mut cores, &|c| {
        drop(std::mem::take(&mut c.overdue_reported))
    });
    part("violations", &mut cores, &|c| {
        drop(std::mem::take(&mut c.violations))
    });
    part("index files", &mut cores, &|c| {
        drop(std::mem::take(&mut c.index.files))
    });
}
