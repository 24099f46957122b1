//! Root upkeep's I/O only: the lock table (read for the core, which decides
//! expiry; release at session end), the retention job and the team memory
//! merge and upkeep (the core decides when, which parts, and what a busy
//! lock means: `core/upkeep.rs`). Each returns what it found or caused;
//! the wiring hands it to the core.

use super::core::Root;
use super::core::outputs::{LockTable, RetentionRun};
use super::core::upkeep::MemoryMerge;
use crate::cluster::replicate::Report;
use crate::cluster::retire::Record;
use crate::events::EventKind;
use crate::retention::Outcome;
use chrono::{DateTime, Utc};
use squad_policies::memory::MemoryPolicy;
use squad_policies::retention::{Action, Place, Plan, Verb};
use squad_protocol::tree::sessions_dir;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Locks the lock table without waiting and reads it: the guard (held
/// while the core's answer is carried out) and the table for the core
/// (busy when a command holds it; a record directory that cannot be read
/// is an empty table, as before).
pub(crate) fn read_locks(r: &Root) -> (Option<crate::locks::TableGuard>, LockTable) {
    let guard = match crate::locks::try_lock_table(&r.root) {
        Ok(Some(g)) => g,
        Ok(None) => return (None, LockTable::Busy),
        Err(e) => {
            tracing::warn!(error = %e, "cannot lock the lock table");
            return (None, LockTable::Failed);
        }
    };
    let entries = match crate::locks::load(&r.root, r.policy.lock_default_ttl) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read lock records");
            Vec::new()
        }
    };
    (Some(guard), LockTable::Read(entries))
}

/// The scheduled retention job: the same plan and execution as `squadctl
/// gc`, leaving alone `busy` sessions (files still being processed). When
/// to run next is the core's ([`RetentionRun`]).
pub(crate) fn run_retention(
    r: &Root,
    busy: &BTreeSet<String>,
    wall: DateTime<Utc>,
) -> RetentionRun {
    // One gc at a time: when `squadctl gc` holds the lock, the core tries
    // again later rather than act on what it is changing.
    let guard = match crate::retention::try_gc_lock(&r.root) {
        Ok(Some(g)) => g,
        Ok(None) => {
            tracing::info!("another gc holds the gc lock; retention retried later");
            return RetentionRun::LockBusy;
        }
        Err(e) => return RetentionRun::LockFailed(e.to_string()),
    };
    let mut out = Vec::new();
    match crate::retention::Places::open(&r.root) {
        Ok(mut places) => {
            let facts = crate::retention::gather(&places, wall, busy);
            let plan = squad_policies::retention::plan(&r.policy.retention, &facts, wall);
            for (session, path, outcome) in crate::retention::execute(&mut places, &plan, wall) {
                match outcome {
                    Outcome::Done(kind) | Outcome::Failed(kind) => {
                        out.push((Some(session), Some(path), kind))
                    }
                    Outcome::AlreadyDone => {}
                }
            }
        }
        Err(e) => out.push((
            None,
            None,
            EventKind::RetentionFailed {
                error: e.to_string(),
            },
        )),
    }
    // A kill -9 of squadd or squadctl since the last run left these.
    crate::safefs::sweep_squadd_temporaries(&r.root, None);
    drop(guard);
    // The team memory upkeep that follows is the core's to ask for.
    RetentionRun::Ran(out)
}

/// Merges the root's decisions inbox into decisions.md (the core asks when
/// the inbox changed and the policy merges). A busy memory lock (a
/// `squadctl memory` command) is reported, never waited on; a root without
/// a team, or a failure (logged), is done.
pub(crate) fn merge_memory_inbox(root: &Path) -> MemoryMerge {
    let Some(team) = squad_protocol::teamdir::locate(root) else {
        return MemoryMerge::Done;
    };
    let lock = match crate::memory::lock(&team.path, "squadd", false) {
        Ok(Some(l)) => l,
        Ok(None) => return MemoryMerge::LockBusy,
        Err(e) => {
            tracing::warn!(error = %e, "cannot take the memory lock");
            return MemoryMerge::Done;
        }
    };
    crate::memory::sweep_temps(&team.path, &lock);
    match crate::memory::merge_inbox(&team.path, false, &lock) {
        Ok(m) if m.appended > 0 || !m.removed.is_empty() => {
            tracing::info!(
                appended = m.appended,
                removed = m.removed.len(),
                "merged the decisions inbox"
            )
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot merge the decisions inbox"),
    }
    MemoryMerge::Done
}

/// Team memory upkeep on the retention schedule, the parts the core asks
/// for ([`super::core::Effect::MemoryUpkeep`]): the same merge and archive
/// as `squadctl memory merge` / `archive` (crash-safe and idempotent, so a
/// run cut short is completed by the next). Skipped while a `squadctl
/// memory` command holds the memory lock (the next schedule runs it).
pub(crate) fn run_memory(root: &Path, memory: MemoryPolicy, wall: DateTime<Utc>) {
    let Some(team) = squad_protocol::teamdir::locate(root) else {
        return;
    };
    let lock = match crate::memory::lock(&team.path, "squadd", false) {
        Ok(Some(l)) => l,
        Ok(None) => {
            tracing::info!("team memory upkeep skipped: the memory lock is held");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot take the memory lock");
            return;
        }
    };
    crate::memory::sweep_temps(&team.path, &lock);
    if memory.merge {
        match crate::memory::merge_inbox(&team.path, false, &lock) {
            Ok(m) if m.appended > 0 || !m.removed.is_empty() => {
                tracing::info!(
                    appended = m.appended,
                    removed = m.removed.len(),
                    "merged the decisions inbox"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot merge the decisions inbox"),
        }
    }
    if let Some(rule) = memory.archive {
        match crate::memory::archive_team(&team.path, rule, wall, false, &lock) {
            Ok(reports) => {
                let moved: usize = reports.iter().map(|a| a.moved).sum();
                if moved > 0 {
                    tracing::info!(moved, "archived team memory entries")
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot archive team memory"),
        }
    }
}

/// How long applying a leader's removal waits for a `squadctl gc` to
/// finish before it is tried again at the removal task's next tick.
const GC_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Carries out one removal the cluster's leader made
/// ([`crate::cluster::retire::CarryOut`]): the session's locks released, then the
/// same execution as retention (under the gc lock); the events, with
/// `by`. `Err` when the gc lock stayed busy or could not be taken (tried
/// again later).
pub(crate) fn carry_out_removal(
    root: &Path,
    r: &Record,
    verb: Verb,
    place: Place,
) -> Result<Vec<Report>, String> {
    let guard = match crate::retention::gc_lock(root, GC_WAIT) {
        Ok(Some(g)) => g,
        Ok(None) => return Err("another gc holds the gc lock".into()),
        Err(e) => return Err(format!("cannot take the gc lock: {e}")),
    };
    let mut reports = Vec::new();
    let report = |session: String, path: PathBuf, kind: EventKind| Report {
        root: root.to_path_buf(),
        session,
        path,
        kind,
    };
    if place == Place::Sessions {
        let dir = sessions_dir(root).join(&r.session);
        let reason = format!("session {:?} by the leader {}", r.action, r.leader).to_lowercase();
        for (session, path, kind) in crate::locks::release_ended_session(root, &dir, &reason) {
            reports.push(report(session, path, kind));
        }
    }
    let mut places = crate::retention::Places::open(root).map_err(|e| e.to_string())?;
    let plan = Plan {
        actions: vec![Action {
            name: r.session.clone(),
            place,
            verb,
            rule: "cluster",
            age_secs: r.age_secs,
            since: r.at,
            since_source: "cluster",
        }],
        ..Plan::default()
    };
    for (session, path, outcome) in crate::retention::execute(&mut places, &plan, Utc::now()) {
        let kind = match outcome {
            Outcome::AlreadyDone => continue,
            Outcome::Failed(kind) => kind,
            Outcome::Done(EventKind::SessionArchived { .. }) => EventKind::SessionArchived {
                rule: r.rule.clone(),
                age_secs: r.age_secs,
                since_source: r.since_source.clone(),
                by: Some(r.leader.clone()),
            },
            Outcome::Done(_) => EventKind::SessionDeleted {
                rule: r.rule.clone(),
                age_secs: r.age_secs,
                since_source: r.since_source.clone(),
                by: Some(r.leader.clone()),
            },
        };
        reports.push(report(session, path, kind));
    }
    drop(guard);
    Ok(reports)
}
