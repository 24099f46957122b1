//! Hard links, for the guard: a file with more than one name is written
//! under all of them at once, so a write to one name is judged at every
//! other (docs/guards.md). An agent may not rewrite a file outside its
//! boundaries through a hard link it made, or found, inside them.

use squad_policies::boundary::normalize;
use squad_policies::guard::{Candidate, Place};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// How many directory entries the guard looks at to find a file's other
/// names; a name not found by then counts as outside the project.
const LOOK: usize = 200_000;

/// The other names of `file` (as the call named it: `shown`) in the
/// checkout `tree`, as candidates to judge, when the file has more than
/// one name. Names the checkout does not hold (outside it, in `.git`, or
/// past [`LOOK`]) are one candidate outside the project: refused.
pub(crate) fn other_names(tree: &Path, file: &Path, shown: &str) -> Vec<Candidate> {
    let Ok(meta) = std::fs::metadata(file) else {
        return Vec::new();
    };
    if !meta.is_file() || meta.nlink() < 2 {
        return Vec::new();
    }
    let found = find(tree, meta.dev(), meta.ino());
    let mut out: Vec<Candidate> = found
        .iter()
        .filter_map(|p| p.strip_prefix(tree).ok())
        .map(|rel| {
            let rel = rel.to_string_lossy();
            let place = match normalize(&rel) {
                Ok(p) => Place::Inside(p),
                Err(refusal) => Place::Refused(refusal),
            };
            Candidate::Path {
                shown: format!("{shown}` (a hard link of `{rel}"),
                place,
                recursive: false,
            }
        })
        .collect();
    let missing = meta.nlink().saturating_sub(found.len() as u64);
    if missing > 0 {
        out.push(Candidate::Path {
            shown: format!("{shown}` (a file with {} names", meta.nlink()),
            place: Place::Outside {
                resolved: format!("{missing} hard link(s) the project does not hold"),
            },
            recursive: false,
        });
    }
    out
}

/// The paths under `tree` (not in `.git`) of the file `(dev, ino)`.
fn find(tree: &Path, dev: u64, ino: u64) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![tree.to_path_buf()];
    let mut looked = 0usize;
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            looked += 1;
            if looked > LOOK {
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if entry.file_name() != ".git" {
                    dirs.push(entry.path());
                }
            } else if kind.is_file()
                && entry
                    .metadata()
                    .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
            {
                found.push(entry.path());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_a_linked_file_is_a_candidate() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::create_dir_all(tree.join("other")).unwrap();
        std::fs::write(tree.join("other/secret.md"), "x").unwrap();
        let mine = tree.join("src/mine.md");
        std::fs::write(&mine, "y").unwrap();
        assert!(other_names(&tree, &mine, "src/mine.md").is_empty());
        std::fs::hard_link(tree.join("other/secret.md"), tree.join("src/link.md")).unwrap();
        let places: Vec<Place> = other_names(&tree, &tree.join("src/link.md"), "src/link.md")
            .into_iter()
            .map(|c| match c {
                Candidate::Path { place, .. } => place,
                Candidate::WholeTree { .. } => unreachable!(),
            })
            .collect();
        assert!(places.contains(&Place::Inside("other/secret.md".into())));
        // A name outside the checkout counts as outside.
        let outside = tempfile::tempdir().unwrap();
        std::fs::hard_link(&mine, outside.path().join("away")).unwrap();
        let c = other_names(&tree, &mine, "src/mine.md");
        assert!(
            c.iter().any(|c| matches!(
                c,
                Candidate::Path {
                    place: Place::Outside { .. },
                    ..
                }
            )),
            "{c:?}"
        );
    }
}
