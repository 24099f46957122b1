//! Overlap of worktree runs told before merge (issue 44 item 4,
//! docs/worktrees.md "Overlap told before merge"): which unmerged runs of
//! one session change the same files, which of those pairs (and which
//! conflicts with the session's branch) are news to the lead, and what the
//! lead is told. squadd gathers the facts (git, at the edge) and keeps
//! what was told (its core); the decisions are these pure functions.

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

/// The overlaps of `now` the lead was not told of yet: a pair (`a`, `b`)
/// is told once, whatever files it comes to share later (the
/// needs-attention item shows the files as they are).
pub fn untold<'a>(now: &'a [Overlap], told: &BTreeSet<(String, String)>) -> Vec<&'a Overlap> {
    now.iter()
        .filter(|o| !told.contains(&(o.a.clone(), o.b.clone())))
        .collect()
}

/// Whether a run's conflict with the session's branch is news: it
/// conflicts now and was not told since it last did not.
pub fn conflict_untold(conflicts: &[String], told: bool) -> bool {
    !conflicts.is_empty() && !told
}

/// The files named in a subject: the first two, then how many more.
fn some_files(files: &[String]) -> String {
    match files {
        [] => String::new(),
        [one] => one.clone(),
        [one, two] => format!("{one} and {two}"),
        [one, two, rest @ ..] => format!("{one}, {two} and {} more", rest.len()),
    }
}

/// The lead's message about an overlap: (subject, text).
pub fn overlap_message(session: &str, o: &Overlap) -> (String, String) {
    let subject = format!(
        "overlap: {} and {} both change {}",
        o.a,
        o.b,
        some_files(&o.files)
    );
    let text = format!(
        "The runs of {a} and {b} in session {session} both change, on branches not merged yet: {files}.\n\nWhichever merges second may conflict (held at merge) or undo the other's work. Tell one of them to wait or to leave these files alone (a message), or stop one: `squadctl stop {b} --session {session}`. Once decided: `squadctl status --ack ID` with the id of this `branch-overlap` item in `squadctl status`. You are told once per pair; the item follows the files.",
        a = o.a,
        b = o.b,
        files = o.files.join(", "),
    );
    (subject, text)
}

/// The lead's message about a run whose branch would conflict with the
/// session's branch `target` on `files`: (subject, text).
pub fn conflict_message(
    session: &str,
    task: &str,
    target: &str,
    files: &[String],
) -> (String, String) {
    let subject = format!(
        "conflict ahead: {task} and {target} both change {}",
        some_files(files)
    );
    let text = format!(
        "The branch squad/{task} (session {session}) would conflict with {target} if merged now (`git merge-tree`): {}.\n\nIts merge will be held when the task completes. Tell its agent to bring {target} in and resolve it (a message), or stop it: `squadctl stop {task} --session {session}`. Once decided: `squadctl status --ack ID` with the id of this `branch-overlap` item in `squadctl status`.",
        files.join(", ")
    );
    (subject, text)
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

    #[test]
    fn a_pair_is_news_once_and_a_conflict_until_told() {
        let o = |a: &str, b: &str| Overlap {
            a: a.into(),
            b: b.into(),
            files: vec!["src/shared.txt".into()],
        };
        let now = [o("task_1", "task_2"), o("task_1", "task_3")];
        let told: BTreeSet<(String, String)> = [("task_1".to_string(), "task_2".to_string())]
            .into_iter()
            .collect();
        assert_eq!(untold(&now, &told), [&now[1]]);
        assert_eq!(untold(&now, &BTreeSet::new()).len(), 2);
        assert!(conflict_untold(&["a".into()], false));
        assert!(!conflict_untold(&["a".into()], true));
        assert!(!conflict_untold(&[], false));
    }

    #[test]
    fn messages_name_both_tasks_and_the_files() {
        let o = Overlap {
            a: "task_1".into(),
            b: "task_2".into(),
            files: vec!["a".into(), "b".into(), "c".into()],
        };
        let (subject, text) = overlap_message("s1", &o);
        assert_eq!(
            subject,
            "overlap: task_1 and task_2 both change a, b and 1 more"
        );
        assert!(text.contains("a, b, c"), "{text}");
        assert!(text.contains("squadctl stop task_2 --session s1"), "{text}");
        let (subject, text) = conflict_message("s1", "task_2", "main", &["x".into()]);
        assert_eq!(subject, "conflict ahead: task_2 and main both change x");
        assert!(text.contains("squad/task_2"), "{text}");
    }
}
