//! Overlap told before merge (issue 44 item 4, docs/worktrees.md): what
//! the session's unmerged worktree runs change, kept here as squadd last
//! looked, and the lead told once per overlapping pair and once per
//! conflict with the session's branch, before either merges.
//!
//! When squadd looks ([`Effect::LookAtTree`], carried out by the shell
//! with git): at each progress update of a live worktree run (its own
//! branch only: the work is one run's diff, whatever the session's size),
//! and once a branch merged, at the session's other unmerged live runs
//! (the session's branch moved: their conflicts with it may have changed).
//! The pairing and the news are `squad_policies::overlap`'s; the result is
//! recorded in each run's run.json (`overlaps`), which `status` reads.

use super::handover::Handover;
use super::{RunKey, record, tell_lead_about};
use crate::daemon::core::{Effect, Root, RootId};
use crate::events::EventKind;
use crate::runners::{Overlaps, RunRecord};
use crate::worktree::TreeChanges;
use squad_policies::overlap::{self, Overlap};
use std::collections::{BTreeMap, BTreeSet};

/// What squadd knows of its sessions' unmerged branches, and told.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    /// Each unmerged worktree run looked at: the files it changes.
    changed: BTreeMap<RunKey, BTreeSet<String>>,
    /// Each run whose branch conflicts with its session's branch: (that
    /// branch, the files).
    conflicts: BTreeMap<RunKey, (String, Vec<String>)>,
    /// Pairs the lead was told of, by session: (a, b).
    told: BTreeMap<String, BTreeSet<(String, String)>>,
    /// Runs whose conflict the lead was told of (forgotten once it merges
    /// cleanly again, so a new conflict is told).
    told_conflicts: BTreeSet<RunKey>,
}

/// Whether `run` is a worktree run whose branch is not merged yet.
fn unmerged(root: &Root, run: &RunKey) -> bool {
    root.runs.trees.get(run).is_some_and(|h| !h.settled())
}

/// A look at one run's branch, for the shell.
fn look(root: &Root, id: RootId, run: &RunKey) -> Effect {
    Effect::LookAtTree {
        root: id,
        run: run.clone(),
        dir: crate::runners::run_dir(&root.session_dir(&run.0), &run.1),
    }
}

/// A progress file of `task` changed: if it is a live worktree run still
/// working on its branch, its branch is looked at.
pub(crate) fn progress(root: &Root, id: RootId, session: &str, task: &str) -> Vec<Effect> {
    let run = (session.to_string(), task.to_string());
    let working = matches!(root.runs.trees.get(&run), Some(Handover::Working));
    if working && root.runs.live.contains_key(&run) {
        vec![look(root, id, &run)]
    } else {
        Vec::new()
    }
}

/// A branch of `session` merged: the session's other unmerged live runs
/// are looked at (their conflicts with the moved session branch).
pub(crate) fn after_merge(root: &Root, id: RootId, session: &str) -> Vec<Effect> {
    root.runs
        .live
        .keys()
        .filter(|k| k.0 == session && unmerged(root, k))
        .map(|k| look(root, id, k))
        .collect()
}

/// What the shell found on a run's branch (`None`: nothing to say: no
/// active worktree, or git failed): kept, and what is new told.
pub(crate) fn looked(
    root: &mut Root,
    id: RootId,
    run: &RunKey,
    found: Option<TreeChanges>,
) -> Vec<Effect> {
    let Some(found) = found.filter(|_| unmerged(root, run)) else {
        return Vec::new();
    };
    let seen = &mut root.runs.seen;
    seen.changed.insert(run.clone(), found.files);
    if found.conflicts.is_empty() {
        seen.conflicts.remove(run);
        seen.told_conflicts.remove(run);
    } else {
        seen.conflicts
            .insert(run.clone(), (found.target, found.conflicts));
    }
    refresh(root, id, &run.0)
}

/// A run's branch merged or was dropped: it overlaps nothing any more.
pub(crate) fn settled(root: &mut Root, id: RootId, run: &RunKey) -> Vec<Effect> {
    let seen = &mut root.runs.seen;
    let changed = seen.changed.remove(run).is_some();
    let conflicted = seen.conflicts.remove(run).is_some();
    seen.told_conflicts.remove(run);
    let known = changed || conflicted;
    if known {
        refresh(root, id, &run.0)
    } else {
        Vec::new()
    }
}

/// The session's overlaps as they stand: the news told (a message and a
/// `branch-overlap` event each), and every run record whose overlaps
/// changed written again.
fn refresh(root: &mut Root, id: RootId, session: &str) -> Vec<Effect> {
    let changes: BTreeMap<String, BTreeSet<String>> = root
        .runs
        .seen
        .changed
        .iter()
        .filter(|(k, _)| k.0 == session && unmerged(root, k))
        .map(|(k, f)| (k.1.clone(), f.clone()))
        .collect();
    let now = overlap::overlaps(&changes);
    let conflicts: BTreeMap<String, (String, Vec<String>)> = root
        .runs
        .seen
        .conflicts
        .iter()
        .filter(|(k, _)| k.0 == session && unmerged(root, k))
        .map(|(k, c)| (k.1.clone(), c.clone()))
        .collect();
    let mut out = Vec::new();
    let told = root.runs.seen.told.entry(session.to_string()).or_default();
    let news: Vec<Overlap> = overlap::untold(&now, told).into_iter().cloned().collect();
    told.extend(news.iter().map(|o| (o.a.clone(), o.b.clone())));
    for o in news {
        let (subject, text) = overlap::overlap_message(session, &o);
        out.push(event(root, id, session, &o.a, Some(&o.b), &o.files));
        out.push(tell_lead_about(id, session, &o.a, subject, text));
    }
    for (task, (target, files)) in &conflicts {
        let run = (session.to_string(), task.clone());
        let told = root.runs.seen.told_conflicts.contains(&run);
        if overlap::conflict_untold(files, told) {
            root.runs.seen.told_conflicts.insert(run);
            let (subject, text) = overlap::conflict_message(session, task, target, files);
            out.push(event(root, id, session, task, None, files));
            out.push(tell_lead_about(id, session, task, subject, text));
        }
    }
    out.extend(write_records(root, session, &now, &conflicts));
    out
}

/// A `branch-overlap` event: `task` shares `files` with `other`, or (none)
/// would conflict on them with the session's branch.
fn event(
    root: &Root,
    id: RootId,
    session: &str,
    task: &str,
    other: Option<&str>,
    files: &[String],
) -> Effect {
    Effect::Emit {
        root: id,
        session: Some(session.to_string()),
        path: Some(crate::runners::run_dir(&root.session_dir(session), task)),
        kind: EventKind::BranchOverlap {
            task_id: task.to_string(),
            other: other.map(str::to_string),
            files: files.to_vec(),
        },
    }
}

/// Each run of `session` (live or ended) whose recorded overlaps differ
/// from what stands now: recorded again.
fn write_records(
    root: &mut Root,
    session: &str,
    now: &[Overlap],
    conflicts: &BTreeMap<String, (String, Vec<String>)>,
) -> Vec<Effect> {
    let should = |task: &str| {
        let mut o = Overlaps::default();
        for p in now {
            if p.a == task {
                o.with.insert(p.b.clone(), p.files.clone());
            } else if p.b == task {
                o.with.insert(p.a.clone(), p.files.clone());
            }
        }
        if let Some((target, files)) = conflicts.get(task) {
            o.target = Some(target.clone());
            o.conflicts = files.clone();
        }
        o
    };
    let session_dir = root.session_dir(session);
    let mut out = Vec::new();
    let update = |rec: &mut RunRecord| {
        let o = should(&rec.task);
        (rec.overlaps != o).then(|| {
            rec.overlaps = o;
        })
    };
    for live in root.runs.live.values_mut() {
        if live.rec.session == session && update(&mut live.rec).is_some() {
            out.push(record(&live.dir, &live.rec));
        }
    }
    for (k, rec) in root.runs.past.iter_mut().filter(|(k, _)| k.0 == session) {
        if update(rec).is_some() {
            out.push(record(&crate::runners::run_dir(&session_dir, &k.1), rec));
        }
    }
    out
}
