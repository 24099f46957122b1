//! Overlap of worktree runs told before merge (issue 44 item 4; the
//! watcher that gathers the facts is not written yet): which runs of one
//! session change the same files.

use std::collections::{BTreeMap, BTreeSet};

/// Two runs of one session that change the same files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The first task (in task order).
    pub a: String,
    /// The second task.
    pub b: String,
    /// The files both change, sorted.
    pub files: Vec<String>,
}

/// Every pair of runs (task, the files it changes: committed on its branch
/// since the merge base, and uncommitted in its worktree) that change a
/// file in common, each pair once, in task order.
pub fn overlaps(changes: &BTreeMap<String, BTreeSet<String>>) -> Vec<Overlap> {
    let runs: Vec<(&String, &BTreeSet<String>)> = changes.iter().collect();
    let mut out = Vec::new();
    for (i, (a, fa)) in runs.iter().enumerate() {
        for (b, fb) in &runs[i + 1..] {
            let files: Vec<String> = fa.intersection(fb).cloned().collect();
            if !files.is_empty() {
                out.push(Overlap {
                    a: (*a).clone(),
                    b: (*b).clone(),
                    files,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pair_sharing_a_file_is_one_overlap() {
        let set = |fs: &[&str]| fs.iter().map(|f| f.to_string()).collect::<BTreeSet<_>>();
        let changes: BTreeMap<String, BTreeSet<String>> = [
            ("task_1".to_string(), set(&["src/shared.txt", "src/a.txt"])),
            ("task_2".to_string(), set(&["src/shared.txt", "src/b.txt"])),
            ("task_3".to_string(), set(&["docs/x.md"])),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            overlaps(&changes),
            [Overlap {
                a: "task_1".into(),
                b: "task_2".into(),
                files: vec!["src/shared.txt".into()],
            }]
        );
        assert!(overlaps(&BTreeMap::new()).is_empty());
    }
}
