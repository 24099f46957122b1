//! The guard's verdicts on task assignments, cached under
//! `.squad/run/guard-plans/` so that a guard call whose plan has not changed
//! does not validate it again (issue 23 item 3).
//!
//! A task assignment's verdict (usable with these boundaries, or unusable
//! for this reason) is a pure function of its path and its bytes
//! ([`index_bytes`]). A cache entry therefore records both, and is used
//! only when the path and the bytes just read are exactly the ones it was
//! made from: the plan is still read on every call (a few hundred bytes),
//! only its parse and validation are skipped. A plan edited within the
//! file system's timestamp granularity and keeping its length, a replaced
//! file with a reused inode, a restored backup: all differ in their bytes,
//! so metadata (length, mtime, inode) is not what decides; the length and
//! an FNV-1a fingerprint only reject most misses before the comparison.
//!
//! Anything unexpected falls back to full validation and is never an
//! error: a missing, truncated, garbage, oversized or foreign entry, a
//! symlink planted at the entry or at any directory on the way (never
//! followed), a plan that cannot be read (then [`load_file`] decides, as
//! before). The cache is as trustworthy as `.squad/run/`, which the guard
//! refuses to every agent whatever the policy says (supervisor-owned,
//! `squad_policies::check::ownership`).

use crate::index::{Entry, fingerprint, index_bytes, load_file};
use crate::safefs;
use squad_protocol::FileKind;
use squad_protocol::tree::SQUAD_DIR;
use squad_protocol::validate::read_checked;
use std::path::{Path, PathBuf};

/// The cache directory below the project root.
const DIR: &str = "run/guard-plans";

/// Plans larger than this are validated every time (a plan is a few
/// hundred bytes; the entry holds a copy of it).
const MAX_PLAN: usize = 256 * 1024;

/// The largest entry read (a plan of [`MAX_PLAN`] bytes escaped as JSON).
const MAX_ENTRY: u64 = 8 * MAX_PLAN as u64;

/// At most this many entries are kept: past it, the directory is emptied
/// before the next entry is written (plans of ended sessions leave theirs).
const MAX_ENTRIES: usize = 512;

/// What a task assignment means to the guard.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Verdict {
    /// A valid assignment.
    Usable {
        /// `meta.task_id`.
        task_id: String,
        /// `meta.agent`.
        agent: String,
        /// `boundaries.allowed`.
        allowed: Vec<String>,
        /// `boundaries.forbidden`.
        forbidden: Vec<String>,
    },
    /// An assignment with errors: the error that makes it unusable (not a
    /// warning before it), as the guard quotes it.
    Unusable(String),
}

/// One cache entry, as stored.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    /// Layout version of the entry.
    format: u32,
    /// The plan's path as the guard named it.
    path: String,
    /// The plan's length in bytes.
    len: usize,
    /// FNV-1a of the plan's bytes.
    fnv: u64,
    /// The plan's bytes (UTF-8: other plans are not cached).
    plan: String,
    /// What validating exactly these bytes at this path gave.
    verdict: Verdict,
}

const FORMAT: u32 = 1;

/// The verdict on the task assignment at `path` (below `root`), as full
/// validation gives it; `Ok(None)` when the file is gone, `Err` for a
/// transient failure (no descriptors or memory), exactly as
/// [`load_file`]. Served from the cache when the bytes are the ones it
/// was made from, else validated and recorded.
pub(crate) fn verdict(root: &Path, path: &Path) -> std::io::Result<Option<Verdict>> {
    let Ok(bytes) = read_checked(path) else {
        // Refused (a link, not a file, too large) or gone: the uncached
        // path decides, with its own diagnostics.
        return uncached(path);
    };
    let key = Key::of(root, path, &bytes);
    if let Some(key) = &key
        && let Some(v) = lookup(key, &bytes)
    {
        return Ok(Some(v));
    }
    let v = of_file(index_bytes(path, FileKind::TaskAssignment, &bytes));
    if let Some(key) = &key {
        store(key, &bytes, &v);
    }
    Ok(Some(v))
}

/// The verdict by full validation, never cached (the guard before the
/// cache; the property tests compare against it).
pub(crate) fn uncached(path: &Path) -> std::io::Result<Option<Verdict>> {
    Ok(load_file(path, FileKind::TaskAssignment)?.map(of_file))
}

fn of_file(file: crate::index::IndexedFile) -> Verdict {
    match file.entry {
        Entry::Plan(plan) => Verdict::Usable {
            task_id: plan.task_id,
            agent: plan.agent,
            allowed: plan.allowed.into_vec(),
            forbidden: plan.forbidden.into_vec(),
        },
        _ => Verdict::Unusable(
            file.diagnostics
                .iter()
                .find(|d| d.is_error())
                .or_else(|| file.diagnostics.first())
                .map(|d| d.to_string())
                .unwrap_or_else(|| "invalid".into()),
        ),
    }
}

/// Where a plan's entry lives.
struct Key<'a> {
    root: &'a Path,
    path: &'a str,
    /// `.squad/run/guard-plans/<file>`, relative to `root`.
    entry: PathBuf,
}

impl<'a> Key<'a> {
    /// `None` for what is not cached (a non-UTF-8 path or plan, a large plan).
    fn of(root: &'a Path, path: &'a Path, bytes: &[u8]) -> Option<Key<'a>> {
        let path_str = path.to_str()?;
        if bytes.len() > MAX_PLAN || std::str::from_utf8(bytes).is_err() {
            return None;
        }
        let name = format!("{:016x}.json", fingerprint(path_str.as_bytes()));
        Some(Key {
            root,
            path: path_str,
            entry: Path::new(SQUAD_DIR).join(DIR).join(name),
        })
    }

    fn dir(&self) -> Option<safefs::Dir> {
        safefs::Dir::open_root(self.root)
            .ok()?
            .walk(&Path::new(SQUAD_DIR).join(DIR), None)
            .ok()
    }
}

/// The cached verdict for exactly these bytes at this path, if any.
fn lookup(key: &Key<'_>, bytes: &[u8]) -> Option<Verdict> {
    let name = key.entry.file_name()?.to_str()?;
    let raw = key.dir()?.read(name, MAX_ENTRY).ok()?;
    let stored: Stored = serde_json::from_slice(&raw).ok()?;
    let same = stored.format == FORMAT
        && stored.path == key.path
        && stored.len == bytes.len()
        && stored.fnv == fingerprint(bytes)
        && stored.plan.as_bytes() == bytes;
    same.then_some(stored.verdict)
}

/// Records a verdict; a failure only means the next call validates again.
fn store(key: &Key<'_>, bytes: &[u8], verdict: &Verdict) {
    let Ok(plan) = std::str::from_utf8(bytes) else {
        return;
    };
    let stored = Stored {
        format: FORMAT,
        path: key.path.to_string(),
        len: bytes.len(),
        fnv: fingerprint(bytes),
        plan: plan.to_string(),
        verdict: verdict.clone(),
    };
    let Ok(json) = serde_json::to_vec(&stored) else {
        return;
    };
    if let Some(dir) = key.dir()
        && dir.names().is_ok_and(|n| n.len() >= MAX_ENTRIES)
    {
        for name in dir.names().unwrap_or_default() {
            let _ = dir.unlink(&name);
        }
    }
    let _ = safefs::write_atomic_under(
        key.root,
        &key.root.join(&key.entry),
        &json,
        0o600,
        Some(0o700),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::fs;

    fn fixtures() -> Vec<(String, Vec<u8>)> {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let mut out = Vec::new();
        let mut stack = vec![base];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().filter_map(Result::ok) {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if p.is_dir() {
                    stack.push(p);
                } else if name.starts_with("role-plan-") && name.ends_with(".md") {
                    out.push((name, fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        assert!(out.len() >= 20, "the plan fixtures: {}", out.len());
        out
    }

    /// A project with one session; returns (root, the plan's path).
    fn project(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".squad/sessions/20240115T100000Z");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        fs::write(&path, bytes).unwrap();
        (tmp, path)
    }

    fn entry_of(root: &Path, path: &Path) -> PathBuf {
        let key = Key::of(root, path, b"").unwrap();
        root.join(key.entry)
    }

    /// Every plan fixture, valid or broken: the verdict with a cold cache,
    /// with a warm one, and without the cache are the same, and the warm
    /// one came from the cache.
    #[test]
    fn the_cache_gives_the_verdicts_of_full_validation_on_every_fixture() {
        let mut usable = 0;
        for (name, bytes) in fixtures() {
            let (tmp, path) = project(&name, &bytes);
            let want = uncached(&path).unwrap();
            let cold = verdict(tmp.path(), &path).unwrap();
            assert_eq!(cold, want, "{name}, cold");
            let cached = fs::metadata(entry_of(tmp.path(), &path)).is_ok();
            assert_eq!(
                cached,
                bytes.len() <= MAX_PLAN && std::str::from_utf8(&bytes).is_ok(),
                "{name}: entry written"
            );
            if cached {
                let key = Key::of(tmp.path(), &path, &bytes).unwrap();
                assert_eq!(lookup(&key, &bytes).as_ref(), want.as_ref(), "{name}");
            }
            assert_eq!(verdict(tmp.path(), &path).unwrap(), want, "{name}, warm");
            usable += usize::from(matches!(want, Some(Verdict::Usable { .. })));
        }
        assert!(usable >= 3, "usable fixtures: {usable}");
    }

    /// The regression the cache must not have: a plan rewritten in place
    /// with the same length and the same mtime (within one timestamp tick)
    /// is validated again.
    #[test]
    fn a_plan_edited_in_the_same_tick_with_the_same_length_is_validated_again() {
        let fixtures = fixtures();
        let (name, good) = fixtures
            .iter()
            .find(|(n, b)| {
                n == "role-plan-dev-task_1.md" && {
                    let (t, p) = project(n, b);
                    matches!(verdict(t.path(), &p).unwrap(), Some(Verdict::Usable { .. }))
                }
            })
            .cloned()
            .unwrap();
        let text = String::from_utf8(good).unwrap();
        let (tmp, path) = project(&name, text.as_bytes());
        let first = verdict(tmp.path(), &path).unwrap();
        let Some(Verdict::Usable { allowed, .. }) = &first else {
            panic!("{first:?}")
        };
        let glob = allowed.first().unwrap().clone();
        // Same length: one letter of the first allowed glob changed; then
        // an unusable plan of the same length.
        let widened = glob.replacen(|c: char| c.is_ascii_lowercase(), "z", 1);
        assert_ne!(widened, glob);
        let edits = [
            text.replacen(&glob, &widened, 1),
            text.replacen("meta:", "mcta:", 1),
        ];
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        for edited in edits {
            assert_eq!(edited.len(), text.len());
            fs::write(&path, &edited).unwrap();
            fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(mtime)
                .unwrap();
            let got = verdict(tmp.path(), &path).unwrap();
            assert_eq!(got, uncached(&path).unwrap());
            assert_ne!(got, first, "{edited}");
        }
    }

    /// Garbage, a truncated entry, a lying entry (valid, made for other
    /// bytes or another path) and links planted at the entry or at the
    /// cache directory: ignored, the plan validated, nothing followed.
    #[test]
    fn a_broken_or_planted_entry_is_ignored() {
        let fixtures = fixtures();
        let (name, bytes) = fixtures
            .iter()
            .find(|(n, _)| n == "role-plan-dev-task_1.md")
            .unwrap();
        let (tmp, path) = project(name, bytes);
        let root = tmp.path();
        let want = uncached(&path).unwrap();
        verdict(root, &path).unwrap();
        let entry = entry_of(root, &path);
        let good = fs::read(&entry).unwrap();
        let lie = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
            v["verdict"] = serde_json::json!({"Usable": {"task_id": "task_1", "agent": "dev",
                "allowed": ["**"], "forbidden": []}});
            f(&mut v);
            serde_json::to_vec(&v).unwrap()
        };
        let planted: Vec<(&str, Vec<u8>)> = vec![
            ("garbage", b"\x00\xffnot json".to_vec()),
            ("truncated", good[..good.len() / 2].to_vec()),
            ("empty", Vec::new()),
            (
                "other bytes",
                lie(&|v| v["plan"] = serde_json::json!("meta: {}\n")),
            ),
            (
                "other path",
                lie(&|v| v["path"] = serde_json::json!("/elsewhere/role-plan-dev-task_1.md")),
            ),
            ("other format", lie(&|v| v["format"] = serde_json::json!(2))),
            ("wrong length", lie(&|v| v["len"] = serde_json::json!(1))),
        ];
        for (what, content) in planted {
            fs::write(&entry, &content).unwrap();
            assert_eq!(verdict(root, &path).unwrap(), want, "{what}");
            // Rewritten with the true verdict.
            assert_eq!(fs::read(&entry).unwrap(), good, "{what}");
        }
        // A link at the entry, to a lying entry elsewhere: not followed,
        // replaced (the link itself), its target untouched.
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("lie.json");
        fs::write(&target, lie(&|_| {})).unwrap();
        fs::remove_file(&entry).unwrap();
        std::os::unix::fs::symlink(&target, &entry).unwrap();
        assert_eq!(verdict(root, &path).unwrap(), want, "a link at the entry");
        assert_eq!(fs::read(&target).unwrap(), lie(&|_| {}));
        assert!(!fs::symlink_metadata(&entry).unwrap().is_symlink());
        // A link in place of the cache directory, to a directory of lies.
        let dir = entry.parent().unwrap();
        fs::rename(dir, outside.path().join("lies")).unwrap();
        fs::write(
            outside.path().join("lies").join(entry.file_name().unwrap()),
            lie(&|_| {}),
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path().join("lies"), dir).unwrap();
        assert_eq!(verdict(root, &path).unwrap(), want, "a linked directory");
        assert_eq!(
            fs::read(outside.path().join("lies").join(entry.file_name().unwrap())).unwrap(),
            lie(&|_| {}),
            "nothing written through the link"
        );
    }

    /// Without a cache hit the path is the uncached one, so a plan that
    /// cannot be read (a link, gone) gets the same answer as before.
    #[test]
    fn an_unreadable_or_gone_plan_is_answered_as_without_the_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".squad/sessions/s");
        fs::create_dir_all(&dir).unwrap();
        let gone = dir.join("role-plan-dev-task_1.md");
        assert_eq!(verdict(tmp.path(), &gone).unwrap(), None);
        let link = dir.join("role-plan-dev-task_2.md");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let got = verdict(tmp.path(), &link).unwrap();
        assert!(matches!(&got, Some(Verdict::Unusable(_))), "{got:?}");
        assert_eq!(got, uncached(&link).unwrap());
        assert!(!tmp.path().join(".squad/run/guard-plans").exists());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        /// Any edit of any fixture (a byte replaced, a cut, an insertion),
        /// asked with a warm cache of the original and of itself: the
        /// verdict of full validation.
        #[test]
        fn edited_fixtures_get_the_verdict_of_full_validation(
            pick in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            how in 0..3u8,
        ) {
            let fixtures = fixtures();
            let (name, bytes) = &fixtures[pick.index(fixtures.len())];
            let (tmp, path) = project(name, bytes);
            verdict(tmp.path(), &path).unwrap();
            let mut edited = bytes.clone();
            let i = at.index(edited.len() + 1);
            match how {
                0 if i < edited.len() => edited[i] = byte,
                1 => edited.truncate(i),
                _ => edited.insert(i, byte),
            }
            fs::write(&path, &edited).unwrap();
            let want = uncached(&path).unwrap();
            prop_assert_eq!(&verdict(tmp.path(), &path).unwrap(), &want);
            prop_assert_eq!(&verdict(tmp.path(), &path).unwrap(), &want);
        }
    }
}
