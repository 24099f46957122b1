//! What becomes of a run's worktree branch (`squad/<task>`) when its task
//! completes: merged into the session's branch, or held with the reason the
//! lead is told (docs/worktrees.md). squadd gathers the facts (the branch the
//! main checkout is on, `check`'s findings on the run's diff) and carries
//! the decision out; a merge that then conflicts is held too.

use squad_protocol::Diagnostic;

/// The decision for a completed run's branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Merge the branch into the session's branch.
    Merge,
    /// Leave the branch (and its worktree) as it is; the reason goes to the
    /// lead.
    Hold(String),
}

/// What is known when a run's task completes.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The task.
    pub task: &'a str,
    /// The run's branch.
    pub branch: &'a str,
    /// The session's branch: the main checkout's branch when the run started.
    pub target: &'a str,
    /// The main checkout's branch now (`None`: a detached HEAD).
    pub current: Option<&'a str>,
    /// `squadctl check`'s findings on the branch's commits (base..branch).
    pub findings: &'a [Diagnostic],
    /// Whether the main checkout's index matches its HEAD (nothing staged,
    /// and its branch did not move under it).
    pub in_step: bool,
}

/// Where a completed run's worktree stands, before squadd commits what it
/// left: its HEAD must still name the run's own branch.
#[derive(Debug, Clone, Copy)]
pub struct TreeHead<'a> {
    /// The task.
    pub task: &'a str,
    /// The run's branch.
    pub branch: &'a str,
    /// The worktree's HEAD: the full ref it names (`None`: detached).
    pub head: Option<&'a str>,
    /// Commits the ref the HEAD names holds beyond the run's branch
    /// (`<short> <subject>`, newest first), when it names another branch;
    /// more than ten are quoted as ten and "… and more".
    pub landed: &'a [String],
    /// Their range, for `squadctl check` (`FORK..REF`).
    pub range: Option<&'a str>,
}

/// `Some(reason)` when the worktree's HEAD no longer names the run's branch:
/// what the run committed went somewhere squadd's check never looked, so
/// the branch is held and the lead told where the commits went.
pub fn left_its_branch(t: &TreeHead<'_>) -> Option<String> {
    let own = format!("refs/heads/{}", t.branch);
    if t.head == Some(own.as_str()) {
        return None;
    }
    let at = match t.head {
        Some(r) => format!("`{}`", r.strip_prefix("refs/heads/").unwrap_or(r)),
        None => "a detached HEAD".to_string(),
    };
    let mut reason = format!(
        "{} of {} is held, not merged: its worktree's HEAD names {at}, not {}, so what the run committed there was never checked by squadd.",
        t.branch, t.task, t.branch
    );
    if !t.landed.is_empty() {
        reason.push_str(&format!(" Commits on {at} not in {}:", t.branch));
        for c in t.landed.iter().take(QUOTED) {
            reason.push_str(&format!("\n- {c}"));
        }
        if t.landed.len() > QUOTED {
            reason.push_str("\n- … and more");
        }
    }
    if let Some(range) = t.range {
        reason.push_str(&format!(
            "\nCheck them with `squadctl check --base {} --head {}`; a main checkout on that branch no longer matches it (`git status`).",
            range.split_once("..").map_or(range, |(b, _)| b),
            range.split_once("..").map_or(range, |(_, h)| h)
        ));
    }
    Some(reason)
}

/// The largest number of findings quoted in a hold's reason.
const QUOTED: usize = 10;

/// Merge when the main checkout is still on the session's branch and the
/// diff breaks no rule of `check` (warnings do not hold a merge); else hold,
/// saying why.
pub fn decide(f: &Facts<'_>) -> Outcome {
    let errors: Vec<&Diagnostic> = f.findings.iter().filter(|d| d.is_error()).collect();
    if !errors.is_empty() {
        let mut reason = format!(
            "{} of {} is held, not merged into {}: `squadctl check` finds {} violation{} in its changes:",
            f.branch,
            f.task,
            f.target,
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        );
        for d in errors.iter().take(QUOTED) {
            reason.push_str(&format!(
                "\n- {} [{}]: {}",
                d.path.display(),
                d.rule,
                d.message
            ));
        }
        if errors.len() > QUOTED {
            reason.push_str(&format!("\n- … and {} more", errors.len() - QUOTED));
        }
        reason.push_str(&format!(
            "\nLook at it with `git diff {}...{}`; merge it by hand, or fix the plan and run the task again.",
            f.target, f.branch
        ));
        return Outcome::Hold(reason);
    }
    match f.current {
        Some(c) if c == f.target && !f.in_step => Outcome::Hold(format!(
            "{} of {} is held, not merged into {}: the main checkout's index does not match {}'s HEAD (changes staged there, or {} moved under the checkout by a commit made elsewhere: see `git status` and `git log -3 {}`). Merge it by hand once the checkout is in step.",
            f.branch, f.task, f.target, f.target, f.target, f.target
        )),
        Some(c) if c == f.target => Outcome::Merge,
        other => Outcome::Hold(format!(
            "{} of {} is held, not merged: the main checkout is on {} now, not on the session's branch {}. Merge it by hand (`git merge {}` on {}).",
            f.branch,
            f.task,
            other.map_or_else(|| "a detached HEAD".to_string(), |c| format!("branch {c}")),
            f.target,
            f.branch,
            f.target
        )),
    }
}

/// A hold's reason in a few words, for the lead's message subject
/// ("held at merge: 1 file outside the task's boundaries") and the lists
/// of `status`, `top` and `task show`; `None` when the facts merge.
pub fn hold_summary(f: &Facts<'_>) -> Option<String> {
    let errors: Vec<&Diagnostic> = f.findings.iter().filter(|d| d.is_error()).collect();
    if !errors.is_empty() {
        let outside: std::collections::BTreeSet<&std::path::Path> = errors
            .iter()
            .filter(|d| d.rule == squad_protocol::Rule::BoundaryViolation)
            .map(|d| d.path.as_path())
            .collect();
        let others = errors
            .iter()
            .filter(|d| d.rule != squad_protocol::Rule::BoundaryViolation)
            .count();
        let mut parts = Vec::new();
        if !outside.is_empty() {
            parts.push(format!(
                "{} file{} outside the task's boundaries",
                outside.len(),
                plural(outside.len())
            ));
        }
        if others > 0 {
            parts.push(format!("{others} violation{} of `check`", plural(others)));
        }
        return Some(parts.join(", "));
    }
    match f.current {
        Some(c) if c == f.target && !f.in_step => Some(format!(
            "the main checkout is out of step with {}",
            f.target
        )),
        Some(c) if c == f.target => None,
        Some(c) => Some(format!("the main checkout is on {c}, not on {}", f.target)),
        None => Some("the main checkout is on a detached HEAD".to_string()),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squad_protocol::{Rule, Severity};

    fn facts<'a>(current: Option<&'a str>, findings: &'a [Diagnostic]) -> Facts<'a> {
        Facts {
            task: "task_1",
            branch: "squad/task_1",
            target: "main",
            current,
            findings,
            in_step: true,
        }
    }

    #[test]
    fn a_checkout_out_of_step_holds_the_merge() {
        let mut f = facts(Some("main"), &[]);
        f.in_step = false;
        let Outcome::Hold(reason) = decide(&f) else {
            panic!("held");
        };
        assert!(reason.contains("index does not match"), "{reason}");
    }

    #[test]
    fn a_worktree_head_off_its_branch_is_held_naming_where_it_went() {
        let own = TreeHead {
            task: "task_1",
            branch: "squad/task_1",
            head: Some("refs/heads/squad/task_1"),
            landed: &[],
            range: None,
        };
        assert_eq!(left_its_branch(&own), None);
        let landed = ["abc1234 sneaky".to_string()];
        let moved = TreeHead {
            head: Some("refs/heads/main"),
            landed: &landed,
            range: Some("f00..main"),
            ..own
        };
        let reason = left_its_branch(&moved).unwrap();
        assert!(reason.contains("HEAD names `main`"), "{reason}");
        assert!(reason.contains("abc1234 sneaky"), "{reason}");
        assert!(reason.contains("check --base f00 --head main"), "{reason}");
        let detached = TreeHead { head: None, ..own };
        assert!(left_its_branch(&detached).unwrap().contains("detached"));
    }

    #[test]
    fn a_clean_diff_on_the_sessions_branch_is_merged() {
        assert_eq!(decide(&facts(Some("main"), &[])), Outcome::Merge);
    }

    #[test]
    fn a_violation_holds_the_branch_and_names_the_path_and_rule() {
        let d = Diagnostic::new(
            "secret/key.txt",
            Rule::BoundaryViolation,
            "outside task_1's boundaries",
            "",
        );
        let Outcome::Hold(reason) = decide(&facts(Some("main"), &[d])) else {
            panic!("held");
        };
        assert!(reason.contains("secret/key.txt"), "{reason}");
        assert!(reason.contains("1 violation in"), "{reason}");
    }

    #[test]
    fn warnings_do_not_hold_but_another_branch_does() {
        let mut d = Diagnostic::new("x", Rule::BoundaryViolation, "m", "");
        d.severity = Severity::Warning;
        assert_eq!(decide(&facts(Some("main"), &[d])), Outcome::Merge);
        assert!(
            matches!(decide(&facts(Some("other"), &[])), Outcome::Hold(r) if r.contains("branch other"))
        );
        assert!(matches!(decide(&facts(None, &[])), Outcome::Hold(r) if r.contains("detached")));
    }

    #[test]
    fn a_holds_summary_counts_the_files_outside_and_the_other_violations() {
        let d = |path: &str, rule| Diagnostic::new(path, rule, "m", "");
        let found = [
            d("secret.txt", Rule::BoundaryViolation),
            d("secret.txt", Rule::BoundaryViolation),
            d("other.txt", Rule::BoundaryViolation),
            d(".squad/x.md", Rule::OwnershipViolation),
        ];
        assert_eq!(
            hold_summary(&facts(Some("main"), &found[..1])).as_deref(),
            Some("1 file outside the task's boundaries")
        );
        assert_eq!(
            hold_summary(&facts(Some("main"), &found)).as_deref(),
            Some("2 files outside the task's boundaries, 1 violation of `check`")
        );
        assert_eq!(hold_summary(&facts(Some("main"), &[])), None);
        assert!(hold_summary(&facts(Some("dev"), &[])).is_some_and(|s| s.contains("on dev")));
        let mut f = facts(Some("main"), &[]);
        f.in_step = false;
        assert!(hold_summary(&f).is_some_and(|s| s.contains("out of step")));
    }
}
