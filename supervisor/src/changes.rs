//! A change set judged against the task assignments: the changes git gives
//! for a range (trailers read), the plans committed at a revision, the
//! facts of the project's session files, and the decision of the boundary,
//! ownership and plan-edit rules (`squad_policies::check`).
//!
//! Shared by `squadctl check` (`ctl/check.rs`) and squadd's merge of a
//! worktree run (`worktree.rs`), so both decide alike; it sits below both
//! (the layer table of `supervisor/tests/module_cycles.rs`).

use crate::index::{Entry, scan_root};
use crate::locks::escapes_root;
use squad_policies::boundary::normalize;
use squad_policies::check::{
    Change, Facts, LinkTarget, PlanEdit, Task, check_changes, link_target, widening,
};
use squad_protocol::tree::{SQUAD_DIR, default_threads};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// git's all-zero object name: a ref that does not exist (pre-push input),
/// and for `check --base`, "from the first commit".
pub(crate) const NULL_SHA: &str = "0000000000000000000000000000000000000000";

/// Whether `sha` is git's null object name (any length of zeros).
pub(crate) fn is_null(sha: &str) -> bool {
    !sha.is_empty() && sha.chars().all(|c| c == '0')
}

/// git's raw output. Listings are read with `-z`: without it git C-quotes a
/// name holding `"`, a tab, a newline or a backslash, and the quoted name no
/// longer matches the globs it should.
pub(crate) fn git_bytes(root: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = crate::child_env::git()
        .current_dir(root)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out.stdout)
}

/// Values of the `key:` trailers of a commit message (comma or space
/// separated).
fn trailer_values(body: &str, key: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| {
            let (k, value) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(key).then_some(value)
        })
        .flat_map(|v| v.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()))
        .map(str::to_string)
        .collect()
}

/// `Squad-Task:` trailer values of a commit message.
pub(crate) fn trailer_tasks(body: &str) -> Vec<String> {
    trailer_values(body, "squad-task")
}

/// The committing agent a message names (`Squad-Agent:`, written by the
/// commit-msg hook from SQUAD_AGENT), when exactly one is named.
pub(crate) fn trailer_agent(body: &str) -> Option<String> {
    let mut agents = trailer_values(body, "squad-agent");
    agents.dedup();
    (agents.len() == 1).then(|| agents.remove(0))
}

/// Parses a `-z --name-status` listing: `(status, paths)` per entry, a
/// rename or copy carrying its two paths. `next_commit` sees each token
/// that starts a new commit (marked by `\x01`) instead.
pub(crate) fn name_status(
    tokens: &mut std::iter::Peekable<std::slice::Split<'_, u8, impl FnMut(&u8) -> bool>>,
) -> Vec<(char, Vec<String>)> {
    let mut out = Vec::new();
    while let Some(t) = tokens.peek() {
        if t.first() == Some(&0x01) {
            break;
        }
        let t = tokens.next().unwrap_or_default();
        // git separates a commit's header from its listing with a newline.
        let status = String::from_utf8_lossy(t)
            .trim_start_matches('\n')
            .to_string();
        let Some(letter) = status.chars().next() else {
            continue;
        };
        let n = if matches!(letter, 'R' | 'C') { 2 } else { 1 };
        let paths: Vec<String> = tokens
            .by_ref()
            .take(n)
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        out.push((letter, paths));
    }
    out
}

/// The changes of BASE..HEAD, one per (commit, path); renames give both
/// sides; a merge counts for what it changed against its first parent.
pub(crate) fn git_changes(root: &Path, base: &str, head: &str) -> Result<Vec<Change>, String> {
    // A null base (a first push) takes every commit up to HEAD.
    let range = if is_null(base) {
        head.to_string()
    } else {
        format!("{base}..{head}")
    };
    // Messages first (a message holds no NUL, so `-z` splits them).
    let logs = git_bytes(root, &["log", "-z", "--format=%H%x00%B", &range])?;
    let mut bodies = std::collections::HashMap::new();
    let mut parts = logs.split(|&b| b == 0);
    while let (Some(hash), Some(body)) = (parts.next(), parts.next()) {
        let hash = String::from_utf8_lossy(hash).trim().to_string();
        bodies.insert(hash, String::from_utf8_lossy(body).into_owned());
    }
    let listing = git_bytes(
        root,
        &[
            "log",
            "--reverse",
            "--relative",
            "-M",
            "-z",
            "--name-status",
            // `git log` lists nothing for a merge by default: what was
            // changed while concluding one is checked against its first
            // parent, and attributed by the merge commit's own trailers.
            "--diff-merges=first-parent",
            "--format=%x01%H",
            &range,
        ],
    )?;
    let mut changes = Vec::new();
    let mut tokens = listing.split(|&b| b == 0).peekable();
    while let Some(t) = tokens.next() {
        let Some(hash) = t.strip_prefix(&[0x01]) else {
            continue;
        };
        let hash = String::from_utf8_lossy(hash).trim().to_string();
        let body = bodies.get(&hash).map(String::as_str).unwrap_or_default();
        let tasks = trailer_tasks(body);
        let agent = trailer_agent(body);
        for (status, paths) in name_status(&mut tokens) {
            for path in paths {
                changes.push(Change {
                    path,
                    status,
                    commit: Some(hash.clone()),
                    trailer_tasks: tasks.clone(),
                    agent: agent.clone(),
                });
            }
        }
    }
    Ok(changes)
}

/// The task assignments committed at `rev`, with their root-relative paths
/// (`None` when `rev` does not exist, as `HEAD` before the first commit, or
/// tracks no task assignment at all). CI judges by these, never by the
/// plans under review.
pub(crate) fn plans_at(root: &Path, rev: &str) -> Result<Option<Vec<(String, Task)>>, String> {
    let probe = format!("{rev}^{{commit}}");
    if git_bytes(root, &["rev-parse", "-q", "--verify", &probe]).is_err() {
        return Ok(None);
    }
    let dir = format!("{SQUAD_DIR}/sessions/");
    let list = git_bytes(
        root,
        &["ls-tree", "-r", "-z", "--name-only", rev, "--", &dir],
    )?;
    let names: Vec<String> = list
        .split(|&b| b == 0)
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .filter(|rel| plan_session(rel).is_some())
        .collect();
    if names.is_empty() {
        // The team keeps its plans out of git (docs/ci.md): the working
        // tree's (restored in CI, guarded at edit time) are all there is.
        return Ok(None);
    }
    let specs: Vec<(&str, &str)> = names.iter().map(|n| (rev, n.as_str())).collect();
    let blobs = blobs(root, &specs)?;
    Ok(Some(
        names
            .iter()
            .zip(blobs)
            .filter_map(|(rel, bytes)| Some((rel.clone(), parse_plan(rel, &bytes?)?)))
            .collect(),
    ))
}

/// The contents of `rev:path` for each spec (`""` for the index; paths
/// relative to `root`), in one `git cat-file --batch`; `None` where absent.
fn blobs(root: &Path, specs: &[(&str, &str)]) -> Result<Vec<Option<Vec<u8>>>, String> {
    use std::io::{BufRead, Read, Write};
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let prefix = git_bytes(root, &["rev-parse", "--show-prefix"])?;
    let prefix = String::from_utf8_lossy(&prefix).trim().to_string();
    let mut input = String::new();
    for (rev, path) in specs {
        // A name with a newline cannot be asked for on one line: asking
        // for the directory instead answers "not a file", read as absent.
        let path = if path.contains('\n') { "" } else { path };
        input.push_str(&format!("{rev}:{prefix}{path}\n"));
    }
    let mut child = crate::child_env::git()
        .current_dir(root)
        .args(["cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("git cat-file: no stdin")?;
    // Written from a thread: git answers while it reads, and a full pipe
    // either way would stall both.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let stdout = child.stdout.take().ok_or("git cat-file: no stdout")?;
    let mut reader = std::io::BufReader::new(stdout);
    let mut out = Vec::with_capacity(specs.len());
    for _ in specs {
        let mut header = String::new();
        reader
            .read_line(&mut header)
            .map_err(|e| format!("git cat-file: {e}"))?;
        let mut fields = header.split_whitespace();
        let (_, kind, size) = (fields.next(), fields.next(), fields.next());
        match (kind, size.and_then(|s| s.parse::<u64>().ok())) {
            (Some("blob"), Some(size)) if size <= squad_protocol::MAX_FILE_BYTES => {
                let mut body = Vec::new();
                (&mut reader)
                    .take(size + 1)
                    .read_to_end(&mut body)
                    .map_err(|e| format!("git cat-file: {e}"))?;
                body.truncate(size as usize);
                out.push(Some(body));
            }
            (Some(_), Some(size)) => {
                // Too large to be a plan, or not a file: skipped unread.
                std::io::copy(&mut (&mut reader).take(size + 1), &mut std::io::sink())
                    .map_err(|e| format!("git cat-file: {e}"))?;
                out.push(None);
            }
            _ => out.push(None),
        }
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(out)
}

/// The session of a root-relative path that names a task assignment
/// (`.squad/sessions/<session>/role-plan-….md`).
fn plan_session(rel: &str) -> Option<&str> {
    let mut parts = rel.split('/');
    let (Some(_), Some(_), Some(session), Some(file), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    (squad_protocol::FileKind::from_file_name(file)
        == Some(squad_protocol::FileKind::TaskAssignment))
    .then_some(session)
}

/// The task a task assignment's bytes assign, when they validate.
fn parse_plan(rel: &str, bytes: &[u8]) -> Option<Task> {
    let session = plan_session(rel)?;
    let indexed = crate::index::index_bytes(
        Path::new(rel),
        squad_protocol::FileKind::TaskAssignment,
        bytes,
    );
    match indexed.entry {
        Entry::Plan(p) => Some(Task {
            task_id: p.task_id,
            agent: p.agent,
            session: session.to_string(),
            allowed: p.allowed.into_vec(),
            forbidden: p.forbidden.into_vec(),
        }),
        _ => None,
    }
}

/// What each changed task assignment widened, against the plans CI judges
/// by (`before`), read at the commit that changed it (the index when staged).
fn plan_edits(
    root: &Path,
    before: &[(String, Task)],
    changes: &[Change],
) -> Result<HashMap<(String, String), PlanEdit>, String> {
    let edits: Vec<(String, String)> = changes
        .iter()
        .filter_map(|c| {
            let path = normalize(&c.path).ok()?;
            plan_session(&path)?;
            Some((c.commit.clone().unwrap_or_default(), path))
        })
        .collect();
    let specs: Vec<(&str, &str)> = edits
        .iter()
        .map(|(rev, path)| (rev.as_str(), path.as_str()))
        .collect();
    let after = blobs(root, &specs)?;
    let mut out = HashMap::new();
    for ((rev, path), bytes) in edits.into_iter().zip(after) {
        let after = bytes.and_then(|b| parse_plan(&path, &b));
        let old = before.iter().find(|(p, _)| *p == path).map(|(_, t)| t);
        let task_id = after
            .as_ref()
            .or(old)
            .map(|t| t.task_id.clone())
            .unwrap_or_else(|| path.rsplit('/').next().unwrap_or(&path).to_string());
        let widened = widening(old, after.as_ref());
        out.insert((rev, path), PlanEdit { task_id, widened });
    }
    Ok(out)
}

/// Tasks, artifacts and owners from the project's session files (under the
/// team root `root`); links and escapes of the changed paths in the checkout
/// `tree` they were changed in (the root, or a linked worktree of it).
fn facts(
    root: &Path,
    tree: &Path,
    changes: &[Change],
    judged_by: Option<&[(String, Task)]>,
) -> std::io::Result<(Facts, usize)> {
    let sessions = scan_root(root, default_threads())?;
    let mut facts = Facts::default();
    for (name, s) in &sessions {
        for f in s.files.values() {
            let path = f.path_in(&s.dir);
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            let rel = normalize(&rel).unwrap_or(rel);
            match &f.entry {
                Entry::Plan(_) if judged_by.is_some() => {}
                Entry::Plan(p) => facts.tasks.push(Task {
                    task_id: p.task_id.clone(),
                    agent: p.agent.clone(),
                    session: name.clone(),
                    allowed: p.allowed.to_vec(),
                    forbidden: p.forbidden.to_vec(),
                }),
                Entry::Progress(p) => {
                    for a in &p.artifacts {
                        if let Ok(a) = normalize(a) {
                            facts
                                .artifacts
                                .entry(a)
                                .or_default()
                                .push(p.task_id.clone());
                        }
                    }
                    facts.owners.insert(rel, p.agent.clone());
                }
                Entry::Message(m) => {
                    facts.owners.insert(rel, m.from_agent.clone());
                }
                Entry::Error(e) => {
                    facts.owners.insert(rel, e.agent.clone());
                }
                Entry::Status(_) | Entry::Invalid => {}
            }
        }
    }
    if let Some(plans) = judged_by {
        facts.tasks = plans.iter().map(|(_, t)| t.clone()).collect();
    }
    let root_real = std::fs::canonicalize(tree)?;
    for c in changes {
        let Ok(p) = normalize(&c.path) else { continue };
        if let Some(to) = escapes_root(tree, &p) {
            facts.escapes.insert(p, to);
            continue;
        }
        // A link that stays inside: judged where it leads too.
        let here = tree.join(&p);
        // A hard link: git commits it as a copy, so only the checkout
        // shows it (docs/ci.md, "Links").
        if let Ok(meta) = std::fs::symlink_metadata(&here)
            && meta.is_file()
            && meta.nlink() > 1
        {
            facts.hard_links.insert(p.clone(), meta.nlink());
        }
        if std::fs::symlink_metadata(&here).is_ok_and(|m| m.file_type().is_symlink())
            && let Ok(target) =
                crate::canon::canonical(&root_real.join(&p)).strip_prefix(&root_real)
            && let Ok(target) = normalize(&target.to_string_lossy())
            && target != p
        {
            facts.links.insert(p, target);
        }
    }
    Ok((facts, sessions.len()))
}

/// The changed paths that are symlinks in the tree of `rev`, and where each
/// leads, read from the commit: a link merged or pushed is judged by what
/// it is, not by whether the checkout happens to hold it.
fn committed_links(
    root: &Path,
    tree: &Path,
    rev: &str,
    changes: &[Change],
) -> Result<Vec<(String, LinkTarget)>, String> {
    let changed: std::collections::HashSet<&str> =
        changes.iter().map(|c| c.path.as_str()).collect();
    let listing = git_bytes(tree, &["ls-tree", "-r", "-z", rev])?;
    let links: Vec<String> = listing
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (meta, path) = entry.split_once('\t')?;
            (meta.starts_with("120000 ") && changed.contains(path)).then(|| path.to_string())
        })
        .collect();
    let specs: Vec<(&str, &str)> = links.iter().map(|p| (rev, p.as_str())).collect();
    let targets = blobs(tree, &specs)?;
    let mut roots = Vec::new();
    for dir in [root, tree] {
        roots.push(dir.display().to_string());
        if let Ok(real) = std::fs::canonicalize(dir) {
            roots.push(real.display().to_string());
        }
    }
    let roots: Vec<&str> = roots.iter().map(String::as_str).collect();
    Ok(links
        .into_iter()
        .zip(targets)
        .filter_map(|(path, target)| {
            let target = String::from_utf8_lossy(&target?).into_owned();
            let to = link_target(&path, &target, &roots);
            Some((path, to))
        })
        .collect())
}

/// `check`'s decision on a change set: the changes kept (runtime state
/// dropped) and the findings of the boundary, ownership and plan-edit
/// rules, judged by the plans committed at `judged_rev` (the working tree's
/// when `None` or when that revision tracks none); and the number of
/// sessions. Shared by `squadctl check` and squadd's merge of a worktree
/// run (docs/worktrees.md), so both decide alike. `root` is the team root
/// (sessions, policy); `tree` the checkout whose git revisions and files
/// are judged (the root itself, or a linked worktree of it); `head` the
/// revision under review, whose symlinks are judged by their committed
/// targets (with those of the checkout: either refusing refuses).
pub(crate) fn judge(
    root: &Path,
    tree: &Path,
    policy: &squad_policies::Policy,
    changes: Vec<Change>,
    judged_rev: Option<&str>,
    head: Option<&str>,
) -> Result<(Vec<Change>, Vec<squad_protocol::Diagnostic>, usize), String> {
    // Runtime state (.squad/.gitignore) is not the agents' work to check.
    let changes: Vec<Change> = changes
        .into_iter()
        .filter(|c| !crate::layout::is_runtime_path(&c.path))
        .collect();
    let judged_by = judged_rev
        .map(|rev| plans_at(tree, rev))
        .transpose()?
        .flatten();
    let (mut facts, sessions) =
        facts(root, tree, &changes, judged_by.as_deref()).map_err(|e| e.to_string())?;
    facts.leads = policy.leads();
    if let Some(head) = head {
        for (path, to) in committed_links(root, tree, head, &changes)? {
            let Ok(path) = normalize(&path) else { continue };
            match to {
                LinkTarget::Outside(target) => {
                    facts.escapes.insert(path, target);
                }
                LinkTarget::Inside(target) if target != path => {
                    facts.links.insert(path, target);
                }
                LinkTarget::Inside(_) => {}
            }
        }
    }
    if let Some(before) = &judged_by {
        facts.plan_edits = plan_edits(tree, before, &changes)?;
    }
    let diagnostics = check_changes(policy, &facts, &changes);
    Ok((changes, diagnostics, sessions))
}

/// The findings of `squadctl check --base BASE --head HEAD` in the checkout
/// `root`, for the branch of `task`'s own worktree run by `agent`: every
/// change is the run's, judged by the task the run was started for,
/// whatever the commits' trailers claim (an agent writes its trailers; the
/// run is squadd's own fact).
pub(crate) fn judge_branch(
    root: &Path,
    policy: &squad_policies::Policy,
    base: &str,
    head: &str,
    task: &str,
    agent: &str,
) -> Result<Vec<squad_protocol::Diagnostic>, String> {
    let mut changes = git_changes(root, base, head)?;
    for c in &mut changes {
        c.trailer_tasks = vec![task.to_string()];
        c.agent = Some(agent.to_string());
    }
    judge(root, root, policy, changes, Some(base), Some(head)).map(|(_, d, _)| d)
}
