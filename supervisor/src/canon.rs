//! Canonical paths for the trust boundary (docs/guards.md, "The canonical
//! path"): a path is judged where the operating system would write it, not
//! only where its spelling says.
//!
//! The lexical reading (`..` taken off the spelling) and the physical one
//! differ once a symlink sits on the way: `backend/fe/../x` is `backend/x`
//! to the eye but `x` when `backend/fe` links to `../frontend`. Every
//! decision is made on both, and either refusing refuses.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The most symlinks followed in one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Where the operating system would put `path` (absolute, not normalized):
/// each existing component is resolved in order, a symlink replaced by
/// where it leads (a dangling one too, since writing through it creates
/// its target), `..` taken from the resolved directory; the part that does
/// not exist yet is appended as written. Never fails: an unreadable link
/// stays as it is spelled.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut pending: VecDeque<OsString> = parts(path).collect();
    let mut links = 0;
    let mut exists = true;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        if exists {
            match std::fs::symlink_metadata(&next) {
                Ok(m) if m.file_type().is_symlink() && links < MAX_LINKS => {
                    if let Ok(target) = std::fs::read_link(&next) {
                        links += 1;
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        for p in parts(&target).collect::<Vec<_>>().into_iter().rev() {
                            pending.push_front(p);
                        }
                        continue;
                    }
                }
                Ok(_) => {}
                Err(_) => exists = false,
            }
        }
        out.push(c);
    }
    out
}

/// The named components of a path, `..` kept as `..`, `.` and the root dropped.
fn parts(path: &Path) -> impl Iterator<Item = OsString> + '_ {
    path.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_os_string()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_followed_before_dot_dot_and_dangling_ones_too() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(root.join("backend")).unwrap();
        std::fs::create_dir_all(root.join("frontend/src")).unwrap();
        symlink("../frontend", root.join("backend/fe")).unwrap();
        symlink("/nonexistent/target", root.join("backend/dangling")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let cases: &[(&str, PathBuf)] = &[
            ("backend/fe/app.ts", root.join("frontend/app.ts")),
            (
                "backend/fe/src/new/x.ts",
                root.join("frontend/src/new/x.ts"),
            ),
            // `..` after the link climbs from where the link leads.
            ("backend/fe/../secret", root.join("secret")),
            ("backend/new/../x", root.join("backend/x")),
            ("backend/dangling", PathBuf::from("/nonexistent/target")),
            ("loop/x", root.join("loop/x")),
        ];
        for (rel, want) in cases {
            assert_eq!(canonical(&root.join(rel)), *want, "{rel}");
        }
    }
}
