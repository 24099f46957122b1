//! The writer: every file squadd writes goes through here (outputs, the
//! persisted state, summaries, inbox deliveries, temporary-file cleanup), so
//! how a write is made safe is decided in one place.
//!
//! Writes are atomic (temporary file in the same directory, fsync, rename,
//! fsync of the directory). Staged writes of the same path coalesce: the
//! latest content wins, and a batch is committed in parallel so the file
//! system can group the journal commits. The writer remembers the
//! fingerprint of what it wrote, so the watch event of its own write is
//! recognised without parsing the file again.

use super::core::RootId;
use crate::index::fingerprint;
use crate::safefs;
use squad_protocol::atomic::is_temp_name;
use squad_protocol::tree::parallel_map;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

/// Who a staged write is for, reported back with its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tag {
    /// Root index.
    pub root: RootId,
    /// Session directory name, when the output belongs to a session.
    pub session: Option<String>,
    /// The output's name in events (`session-status`, `shared-context`).
    pub output: &'static str,
}

/// The outcome of one committed write.
#[derive(Debug)]
pub(crate) struct Committed {
    /// The file.
    pub path: PathBuf,
    /// Who it was for.
    pub tag: Tag,
    /// What was written.
    pub bytes: Vec<u8>,
    /// Whether it was.
    pub result: io::Result<()>,
}

/// What the background writer reports back: (file, who for, outcome).
pub(crate) type Done = (PathBuf, Tag, io::Result<()>);

/// What the background writer is asked to do.
enum Job {
    /// Assemble a shared context file and write it if it changed.
    Context(super::context::Job),
}

/// The background writer's queue: (file, what to do, the roots).
type Queue = std::sync::mpsc::Sender<(PathBuf, Job, Vec<PathBuf>)>;

/// The writer.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    staged: BTreeMap<PathBuf, (Vec<u8>, Tag)>,
    own: HashMap<PathBuf, u64>,
    behind: Option<(Queue, std::thread::JoinHandle<()>)>,
    /// The roots: every write below one walks from it without following a
    /// link (see [`crate::safefs`]).
    roots: Vec<PathBuf>,
    /// Write and rename calls made (read by the benchmark through events).
    pub writes: u64,
    /// What was last written of each shared context file.
    contexts: super::context::Marks,
    /// Directories a group commit wrote into, not yet fsynced: see
    /// [`Writer::sync_group`].
    unsynced: BTreeMap<PathBuf, safefs::Dir>,
    /// The background writer's fence and finished writes: see
    /// [`Writer::fence_context`].
    behind_state: std::sync::Arc<std::sync::Mutex<Behind>>,
    /// The roots fenced, as last set here: the lock (which waits for a
    /// write under way) is taken only when that changes.
    fenced: std::collections::BTreeSet<RootId>,
}

/// What the background writer shares with the daemon's task, under one
/// lock held for the whole of each write.
#[derive(Debug, Default)]
struct Behind {
    /// Roots whose shared context may not be written (this host stopped
    /// leading their project).
    fenced: std::collections::BTreeSet<RootId>,
    /// Writes finished and not yet reported.
    done: Vec<Done>,
}

/// Writes `path` atomically below the root that holds it, never through a
/// link; a missing directory is created only with `create`, else the write
/// fails (NotFound) and nothing is recreated.
fn write_in(
    roots: &[PathBuf],
    path: &Path,
    bytes: &[u8],
    mode: u32,
    create: bool,
) -> io::Result<()> {
    let root = roots
        .iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
        .ok_or_else(|| io::Error::other(format!("{}: outside every root", path.display())))?;
    safefs::write_atomic_under(root, path, bytes, mode, create.then_some(0o777))
}

impl Writer {
    /// Starts the background writer for large outputs nothing waits for
    /// (the shared context): their fsyncs never hold up the daemon's task.
    /// Writes queued for the same path coalesce (the latest wins); outcomes
    /// come back on the returned channel.
    /// The returned channel says when finished writes wait in
    /// [`Writer::take_done`].
    pub(crate) fn start_behind(&mut self) -> io::Result<tokio::sync::mpsc::UnboundedReceiver<()>> {
        let (tx, rx) = std::sync::mpsc::channel::<(PathBuf, Job, Vec<PathBuf>)>();
        let (done_tx, done_rx) = tokio::sync::mpsc::unbounded_channel();
        let contexts = self.contexts.clone();
        let state = self.behind_state.clone();
        let thread = std::thread::Builder::new()
            .name("squadd-writer".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut batch = BTreeMap::new();
                    batch.insert(first.0, (first.1, first.2));
                    while let Ok((path, job, roots)) = rx.try_recv() {
                        batch.insert(path, (job, roots));
                    }
                    for (_path, (job, roots)) in batch {
                        // The same never-through-a-link write as the
                        // daemon's own thread.
                        let write =
                            |path: &Path, bytes: &[u8]| write_in(&roots, path, bytes, 0o666, true);
                        // The lock is held across the write: a fence set
                        // by the daemon's task waits for it to finish, and
                        // nothing is written for a fenced root after.
                        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                        let done = match job {
                            Job::Context(job) if state.fenced.contains(&job.tag.root) => None,
                            Job::Context(job) => contexts.run(job, write),
                        };
                        if let Some(done) = done {
                            state.done.push(done);
                            let _ = done_tx.send(());
                        }
                    }
                }
            })?;
        self.behind = Some((tx, thread));
        Ok(done_rx)
    }

    /// Assembles a shared context file from a snapshot of its fragments and
    /// writes it when it changed (see [`super::context`]): on the background
    /// writer, or now (`now`, or when it does not run), the outcome then
    /// returned. `None`: nothing to report yet, or nothing was written.
    pub(crate) fn write_context(&mut self, job: super::context::Job, now: bool) -> Option<Done> {
        self.writes += 1;
        let path = job.path.clone();
        match &self.behind {
            Some((tx, _)) if !now => match tx.send((path, Job::Context(job), self.roots.clone())) {
                Ok(()) => None,
                Err(std::sync::mpsc::SendError((path, job, _))) => self.run_now(path, job),
            },
            _ => self.run_now(path, Job::Context(job)),
        }
    }

    /// Does a background writer's job on the calling thread.
    fn run_now(&mut self, _path: PathBuf, job: Job) -> Option<Done> {
        match job {
            Job::Context(job) => {
                let contexts = self.contexts.clone();
                contexts.run(job, |path, bytes| self.write(path, bytes, true))
            }
        }
    }

    /// Fences (or opens again) the background writes of root `root`'s
    /// shared context: once this returns with `fenced`, no write of it is
    /// under way or will be made (one under way is waited for; its outcome
    /// is in [`Writer::take_done`]). A host that stops leading its project
    /// fences before the loss is stepped, so no write of its lands after
    /// it said it lost the lead (docs/cluster.md, one writer).
    pub(crate) fn fence_context(&mut self, root: RootId, fenced: bool) {
        if self.fenced.contains(&root) == fenced {
            return;
        }
        if fenced {
            self.fenced.insert(root);
        } else {
            self.fenced.remove(&root);
        }
        let mut state = self.behind_state.lock().unwrap_or_else(|e| e.into_inner());
        if fenced {
            state.fenced.insert(root);
        } else {
            state.fenced.remove(&root);
        }
    }

    /// The background writes finished and not yet reported.
    pub(crate) fn take_done(&self) -> Vec<Done> {
        let mut state = self.behind_state.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut state.done)
    }

    /// Finishes the queued background writes and stops the writer.
    pub(crate) fn finish_behind(&mut self) {
        if let Some((tx, thread)) = self.behind.take() {
            drop(tx);
            let _ = thread.join();
        }
    }

    /// Registers a root (canonical path): writes below it go through it.
    pub(crate) fn add_root(&mut self, root: &Path) {
        self.roots.push(root.to_path_buf());
    }

    /// Stages a write; a later stage of the same path replaces it.
    pub(crate) fn stage(&mut self, path: PathBuf, bytes: Vec<u8>, tag: Tag) {
        self.staged.insert(path, (bytes, tag));
    }

    /// Commits every staged write (in parallel) and returns each outcome.
    pub(crate) fn commit(&mut self) -> Vec<Committed> {
        if self.staged.is_empty() {
            return Vec::new();
        }
        let staged: Vec<(PathBuf, (Vec<u8>, Tag))> =
            std::mem::take(&mut self.staged).into_iter().collect();
        let threads = staged.len().min(8);
        let roots = &self.roots;
        // Outputs go into existing directories only: a session directory
        // that vanished (renamed, removed) is never recreated by a write.
        let results = parallel_map(&staged, threads, |(path, (bytes, _))| {
            write_in(roots, path, bytes, 0o666, false)
        });
        let mut out = Vec::with_capacity(staged.len());
        for ((path, (bytes, tag)), result) in staged.into_iter().zip(results) {
            self.writes += 1;
            if result.is_ok() {
                self.own.insert(path.clone(), fingerprint(&bytes));
            }
            out.push(Committed {
                path,
                tag,
                bytes,
                result,
            });
        }
        out
    }

    /// Writes a file now, creating its parent directory when missing.
    pub(crate) fn write(
        &mut self,
        path: &Path,
        bytes: &[u8],
        create_parent: bool,
    ) -> io::Result<()> {
        self.writes += 1;
        write_in(&self.roots, path, bytes, 0o666, create_parent)?;
        self.own.insert(path.to_path_buf(), fingerprint(bytes));
        Ok(())
    }

    /// Writes a file readable by its owner only (squadd's own state).
    pub(crate) fn write_private(&mut self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        self.writes += 1;
        write_in(&self.roots, path, bytes, 0o600, false)
    }

    #[cfg(test)]
    /// Whether `fingerprint` is what squadd last wrote at `path`.
    pub(crate) fn is_own(&self, path: &Path, fingerprint: u64) -> bool {
        self.own.get(path) == Some(&fingerprint)
    }

    /// Forgets what was written under a directory (it was removed).
    pub(crate) fn forget_under(&mut self, dir: &Path) {
        self.own.retain(|p, _| !p.starts_with(dir));
        self.staged.retain(|p, _| !p.starts_with(dir));
    }

    /// The root that holds `path` (the innermost).
    fn root_of(&self, path: &Path) -> io::Result<&PathBuf> {
        self.roots
            .iter()
            .filter(|r| path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .ok_or_else(|| io::Error::other(format!("{}: outside every root", path.display())))
    }

    /// Writes new files into existing directories, the first half of a
    /// group commit (see [`safefs::write_group_unsynced_under`]): each file
    /// complete on disk (temporary file, fsync, rename), its directory
    /// fsynced only by the next [`Self::sync_group`], together with the
    /// batch's inboxes, so the notices of a batch and their deliveries cost
    /// one fsync per directory. Returns each file's outcome in the order
    /// given; what was written is recognised as squadd's own.
    pub(crate) fn write_group_unsynced(
        &mut self,
        files: &[(PathBuf, Vec<u8>)],
    ) -> Vec<io::Result<()>> {
        let mut results: Vec<Option<io::Result<()>>> = files.iter().map(|_| None).collect();
        let mut by_root: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
        for (n, (path, _)) in files.iter().enumerate() {
            match self.root_of(path) {
                Ok(root) => by_root.entry(root.clone()).or_default().push(n),
                Err(e) => results[n] = Some(Err(e)),
            }
        }
        for (root, members) in by_root {
            let group: Vec<(PathBuf, &[u8])> = members
                .iter()
                .map(|&n| (files[n].0.clone(), files[n].1.as_slice()))
                .collect();
            let (done, dirs) = safefs::write_group_unsynced_under(&root, &group, 0o666, 8);
            for (dir, _) in dirs {
                self.unsynced.insert(dir.path().to_path_buf(), dir);
            }
            for (&n, result) in members.iter().zip(done) {
                self.writes += 1;
                if result.is_ok() {
                    self.own
                        .insert(files[n].0.clone(), fingerprint(&files[n].1));
                }
                results[n] = Some(result);
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(io::Error::other("not written"))))
            .collect()
    }

    /// The second half of a group commit: fsyncs `dirs` (the batch's
    /// inboxes) and every directory [`Self::write_group_unsynced`] wrote
    /// into since the last call, in parallel (the file system merges their
    /// journal commits). Once it returns, everything written into them is
    /// durable and may be announced. Returns the directories whose fsync
    /// failed, with the error.
    pub(crate) fn sync_group(
        &mut self,
        dirs: BTreeMap<PathBuf, safefs::Dir>,
    ) -> BTreeMap<PathBuf, String> {
        let mut all = std::mem::take(&mut self.unsynced);
        all.extend(dirs);
        if all.is_empty() {
            return BTreeMap::new();
        }
        let (paths, dirs): (Vec<PathBuf>, Vec<safefs::Dir>) = all.into_iter().unzip();
        let threads = dirs.len().min(8);
        paths
            .into_iter()
            .zip(safefs::sync_dirs(&dirs, threads))
            .filter_map(|(path, synced)| synced.err().map(|e| (path, e.to_string())))
            .collect()
    }

    /// Directories written into and not yet fsynced (see
    /// [`Self::sync_group`]).
    #[cfg(test)]
    pub(crate) fn unsynced(&self) -> Vec<&Path> {
        self.unsynced.keys().map(PathBuf::as_path).collect()
    }

    /// Delivers a message into an inbox, Maildir style (see
    /// [`crate::inbox::deliver_unsynced`]): `Ok(None)` when it was
    /// delivered before, else the fresh delivery: its inbox's `new/`
    /// directory, which the caller fsyncs once for every delivery of the
    /// batch into it, and its mark, removed once it is audited.
    pub(crate) fn deliver_unsynced(
        &mut self,
        session_dir: &Path,
        agent: &str,
        name: &str,
        bytes: &[u8],
    ) -> io::Result<Option<crate::inbox::Fresh>> {
        self.writes += 1;
        let root = self.root_of(session_dir)?;
        crate::inbox::deliver_unsynced(root, session_dir, agent, name, bytes)
    }

    /// Removes a session's temporary files (`*.tmp` and our own `.x.tmp.*`
    /// leftovers at its top level, and `artifacts/tmp/`); returns how many
    /// entries went. Links are removed, never followed.
    pub(crate) fn remove_temporary_files(&mut self, dir: &Path) -> usize {
        let mut removed = 0;
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.filter_map(Result::ok) {
                let name = e.file_name().to_string_lossy().into_owned();
                let is_file = e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink());
                if is_file
                    && (name.ends_with(".tmp") || is_temp_name(&name))
                    && std::fs::remove_file(e.path()).is_ok()
                {
                    removed += 1;
                }
            }
        }
        let tmp = dir.join("artifacts").join("tmp");
        if std::fs::symlink_metadata(&tmp).is_ok_and(|m| m.is_dir())
            && std::fs::remove_dir_all(&tmp).is_ok()
        {
            removed += 1;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag() -> Tag {
        Tag {
            root: RootId::nth(0),
            session: None,
            output: "x",
        }
    }

    /// The one-writer fence (regression: CI saw a deposed leader's shared
    /// context written 33 ms after its `leader-lost`): a fenced root's
    /// queued context is never written nor reported; opened again, it is.
    #[test]
    fn a_fenced_roots_shared_context_is_not_written_behind_until_opened_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let path = root.join("shared-context.json");
        let job = || crate::daemon::context::Job {
            path: path.clone(),
            fragments: std::sync::Arc::new(
                [(String::new(), (0, std::sync::Arc::new(Default::default())))].into(),
            ),
            tag: Tag {
                root: RootId::nth(0),
                session: None,
                output: "shared-context",
            },
        };
        let mut w = Writer::default();
        w.add_root(&root);
        let _rx = w.start_behind().unwrap();
        w.fence_context(RootId::nth(0), true);
        assert!(w.write_context(job(), false).is_none());
        w.finish_behind();
        assert!(!path.exists(), "written while fenced");
        assert!(w.take_done().is_empty());
        w.fence_context(RootId::nth(0), false);
        let _rx = w.start_behind().unwrap();
        assert!(w.write_context(job(), false).is_none());
        w.finish_behind();
        assert!(path.exists());
        let done = w.take_done();
        assert_eq!(done.len(), 1);
        assert!(done[0].2.is_ok());
    }

    #[test]
    fn staged_writes_of_one_path_coalesce_and_are_recognised_as_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.md");
        let mut w = Writer::default();
        w.add_root(dir.path());
        w.stage(path.clone(), b"first".to_vec(), tag());
        w.stage(path.clone(), b"second".to_vec(), tag());
        let done = w.commit();
        assert_eq!(done.len(), 1);
        assert!(done[0].result.is_ok());
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert!(w.is_own(&path, fingerprint(b"second")));
        assert!(!w.is_own(&path, fingerprint(b"first")));
        assert!(w.commit().is_empty());
    }

    #[test]
    fn a_group_commit_holds_its_directories_until_synced_with_the_inboxes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["s1", "s2", "s1/inbox/bob/new"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let mut w = Writer::default();
        w.add_root(&root);
        let files = vec![
            (root.join("s1/a.md"), b"a".to_vec()),
            (root.join("s2/b.md"), b"b".to_vec()),
            (root.join("gone/c.md"), b"c".to_vec()),
        ];
        let ok: Vec<bool> = w
            .write_group_unsynced(&files)
            .iter()
            .map(Result::is_ok)
            .collect();
        assert_eq!(ok, [true, true, false]);
        // Whole files in place, recognised as squadd's own; their
        // directories wait for the batch's one fsync each.
        assert_eq!(std::fs::read(root.join("s1/a.md")).unwrap(), b"a");
        assert!(w.is_own(&root.join("s2/b.md"), fingerprint(b"b")));
        assert_eq!(w.unsynced(), [root.join("s1"), root.join("s2")]);
        let inbox = root.join("s1/inbox/bob/new");
        let mut inboxes = BTreeMap::new();
        inboxes.insert(inbox.clone(), safefs::Dir::open_root(&inbox).unwrap());
        assert!(w.sync_group(inboxes).is_empty());
        assert!(w.unsynced().is_empty(), "every directory synced once");
        assert!(w.sync_group(BTreeMap::new()).is_empty());
    }

    #[test]
    fn writes_never_go_through_links_nor_recreate_vanished_directories() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let mut w = Writer::default();
        w.add_root(dir.path());
        std::os::unix::fs::symlink(outside.path(), dir.path().join("s")).unwrap();
        w.stage(dir.path().join("s/out.md"), b"x".to_vec(), tag());
        w.stage(dir.path().join("gone/out.md"), b"x".to_vec(), tag());
        for done in w.commit() {
            assert!(done.result.is_err(), "{}", done.path.display());
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(!dir.path().join("gone").exists());
        assert!(w.write(&dir.path().join("s/x"), b"x", true).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
