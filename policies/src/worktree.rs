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
        }
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
}
