//! The shared context file, assembled and written off the daemon's task.
//!
//! The file spans every session of a root (thousands of task entries), so
//! concatenating it, comparing it with what is on disk and writing it costs
//! milliseconds however small the change was. The daemon's task only brings
//! the changed sessions' fragments up to date and hands a snapshot of them
//! (shared, not copied) to the background writer, which does the rest: a
//! change arriving meanwhile is never held up by it.

use super::writer::{Done, Tag};
use crate::outputs::{ContextFragment, MAX_CONTEXT_BYTES, assemble_context, existing_context};
use squad_protocol::fsx::read_regular;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One assembly of a shared context file from a snapshot of its fragments.
#[derive(Debug)]
pub(crate) struct Job {
    /// The file.
    pub path: PathBuf,
    /// Every session's fragment, by session name.
    pub fragments: crate::daemon::core::ContextParts,
    /// Who it is for, reported back with the outcome.
    pub tag: Tag,
}

/// What squadd remembers of a shared context file it wrote: while the file's
/// mark is unchanged it is not read again.
#[derive(Debug, Clone)]
struct Written {
    /// (inode, size, mtime in ns) after the write.
    mark: Option<(u64, u64, i128)>,
    /// The top-level object the text was assembled over.
    root: serde_json::Map<String, serde_json::Value>,
    /// The text's length and hash: what a new assembly is compared with.
    /// Not the text: it spans every task of the root (2.2 MB with 5,000
    /// tasks), and only the comparison needs it.
    text: (usize, u64),
}

/// What [`Written`] keeps of a text. The text is megabytes (every task of
/// the root) and is marked once per assembly, a moment after every change:
/// with foldhash, which reads it in wide words. The byte-at-a-time FNV of
/// [`crate::index::fingerprint`] cost about a millisecond per megabyte,
/// CPU the daemon's task was short of on 2 cores (docs/performance.md,
/// "After (wake …)").
fn text_mark(text: &str) -> (usize, u64) {
    use std::hash::BuildHasher;
    (
        text.len(),
        foldhash::quality::FixedState::default().hash_one(text.as_bytes()),
    )
}

/// What was last written of each shared context file, shared by the
/// background writer and a write made on the daemon's task (start-up,
/// shutdown), which never run at the same time for one root.
#[derive(Debug, Clone, Default)]
pub(crate) struct Marks(Arc<Mutex<HashMap<PathBuf, Written>>>);

/// A file's (inode, size, mtime): whether it is still what squadd wrote.
pub(crate) fn file_mark(path: &Path) -> Option<(u64, u64, i128)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((
        m.ino(),
        m.len(),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    ))
}

impl Marks {
    /// Assembles the job's file over the top-level object of the file as it
    /// is (read again only when its mark is not what squadd's own last write
    /// left) and writes it with `write` when the text differs. `None` when
    /// nothing was written.
    pub(crate) fn run(
        &self,
        job: Job,
        write: impl FnOnce(&Path, &[u8]) -> io::Result<()>,
    ) -> Option<Done> {
        // A poisoned lock only means a panic elsewhere: the map is still a
        // valid cache (at worst the file is read again).
        let mut marks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mark = file_mark(&job.path);
        let ours = marks
            .get(&job.path)
            .filter(|w| mark.is_some() && w.mark == mark);
        // What the file holds: squadd's last write (its length and hash),
        // or the text read from disk (compared byte for byte).
        let (base, last, read) = match ours {
            Some(w) => (w.root.clone(), Some(w.text), None),
            None => {
                let read = read_regular(&job.path, MAX_CONTEXT_BYTES)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok());
                (existing_context(read.as_deref()), None, read)
            }
        };
        let fragments: Vec<&ContextFragment> = job.fragments.values().map(|(_, f)| &**f).collect();
        let (text, root) = assemble_context(base, &fragments);
        let marked = text_mark(&text);
        let same = match (last, read) {
            (Some(last), _) => last == marked,
            (None, Some(on_disk)) => on_disk == text,
            (None, None) => false,
        };
        if same {
            let text = marked;
            marks.insert(job.path, Written { mark, root, text });
            return None;
        }
        let result = write(&job.path, text.as_bytes());
        let mark = if result.is_ok() {
            file_mark(&job.path)
        } else {
            None
        };
        let text = marked;
        marks.insert(job.path.clone(), Written { mark, root, text });
        Some((job.path, job.tag, result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(path: &Path) -> Job {
        Job {
            path: path.to_path_buf(),
            fragments: Arc::new(
                [(String::new(), (0, Arc::new(ContextFragment::default())))].into(),
            ),
            tag: Tag {
                root: crate::daemon::core::RootId::nth(0),
                session: None,
                output: "shared-context",
            },
        }
    }

    fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
        std::fs::write(path, bytes)
    }

    #[test]
    fn written_once_then_left_alone_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared-context.json");
        let marks = Marks::default();
        let done = marks.run(job(&path), write).expect("first write");
        assert!(done.2.is_ok());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"schema_version\": \"2.0.0\""), "{text}");
        // The same fragments over squadd's own file: no write at all.
        let none = marks.run(job(&path), |_, _| panic!("written again"));
        assert!(none.is_none());
    }

    #[test]
    fn a_foreign_edit_is_read_and_its_keys_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared-context.json");
        let marks = Marks::default();
        assert!(marks.run(job(&path), write).is_some_and(|d| d.2.is_ok()));
        // Another size, hence another mark: the file is read again.
        std::fs::write(&path, "{\"project\": \"kept\", \"tasks_pending\": [1]}\n").unwrap();
        let done = marks.run(job(&path), write).expect("rewritten");
        assert!(done.2.is_ok());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["project"], "kept");
        assert_eq!(v["tasks_pending"], serde_json::json!([]));
    }

    #[test]
    fn a_foreign_key_of_a_context_larger_than_a_protocol_file_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared-context.json");
        // 2 MB: larger than a protocol file may be (the old code could not
        // read it back and dropped `project`).
        let big = "x".repeat(2 * 1024 * 1024);
        std::fs::write(
            &path,
            format!("{{\"project\": \"kept\", \"notes\": \"{big}\"}}\n"),
        )
        .unwrap();
        let done = Marks::default().run(job(&path), write).expect("rewritten");
        assert!(done.2.is_ok());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["project"], "kept");
        assert_eq!(v["notes"].as_str().map(str::len), Some(big.len()));
    }

    #[test]
    fn a_failed_write_is_reported_and_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared-context.json");
        let marks = Marks::default();
        let done = marks
            .run(job(&path), |_, _| Err(io::Error::other("disk full")))
            .expect("reported");
        assert!(done.2.is_err());
        assert!(marks.run(job(&path), write).is_some_and(|d| d.2.is_ok()));
    }
}
