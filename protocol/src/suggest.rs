//! "Did you mean": the known word closest to a mistyped one (issue 40 item
//! 3). A name one edit from a known name is taken for a typo of it; the
//! callers turn that into an error with the suggestion, where an unknown
//! name further away stays what it was (a warning, or a new agent).

/// The optimal-string-alignment distance between `a` and `b`: insertions,
/// deletions, substitutions and swaps of two neighbours, each one edit.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows of the table: two back (for swaps), the last, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

/// The known word within `max` edits of `word` (and not `word` itself),
/// nearest first, then first in `known`'s order; `None` when there is none
/// or two are equally near and differ (no guess between them).
pub fn closest<'a>(
    word: &str,
    known: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Option<&'a str> {
    let mut best: Option<(usize, &'a str)> = None;
    let mut tie = false;
    for k in known {
        if k == word {
            continue;
        }
        let d = edit_distance(word, k);
        if d > max {
            continue;
        }
        match best {
            Some((b, w)) if d == b && w != k => tie = true,
            Some((b, _)) if d >= b => {}
            _ => {
                best = Some((d, k));
                tie = false;
            }
        }
    }
    best.filter(|_| !tie).map(|(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_edit_of_each_kind() {
        assert_eq!(edit_distance("boundries", "boundaries"), 1);
        assert_eq!(edit_distance("fronted", "frontend"), 1);
        assert_eq!(edit_distance("frontedn", "frontend"), 1);
        assert_eq!(edit_distance("backand", "backend"), 1);
        assert_eq!(edit_distance("backend", "backend"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("alice", "bob"), 5);
    }

    #[test]
    fn the_nearest_wins_and_a_tie_is_no_guess() {
        let known = ["frontend", "backend", "qa"];
        assert_eq!(closest("fronted", known, 1), Some("frontend"));
        assert_eq!(closest("frontend", known, 1), None);
        assert_eq!(closest("design", known, 2), None);
        assert_eq!(closest("ab", ["aa", "bb"], 1), None);
        assert_eq!(closest("abc", ["abd", "xyz"], 1), Some("abd"));
        assert_eq!(closest("abc", ["abd", "abcd"], 1), None);
    }
}
