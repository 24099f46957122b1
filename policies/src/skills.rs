//! Skills decisions: the prompt budget, and what `squadctl skills upgrade`
//! does with each built-in skill.

/// `skills:` of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkillsPolicy {
    /// Estimated tokens the skills part of a prompt may take.
    pub prompt_budget_tokens: usize,
}

/// A warning when the skills part of a prompt exceeds the budget.
pub fn budget_warning(policy: &SkillsPolicy, tokens: usize, skills: usize) -> Option<String> {
    (tokens > policy.prompt_budget_tokens).then(|| {
        format!(
            "the skills block is about {tokens} tokens for {skills} skills, over the budget of {} (policy skills.prompt_budget_tokens); give agents fewer or shorter-described skills, or raise the budget in .squad/policies.yaml",
            policy.prompt_budget_tokens
        )
    })
}

/// What is installed where a built-in skill goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// Nothing: no skill folder of that name.
    Missing,
    /// A skill of that name squadctl did not install (no install record):
    /// a learned or hand-written skill.
    NotOurs,
    /// A built-in squadctl installed.
    Ours {
        /// The version recorded at install.
        version: String,
        /// Whether the file's hash still equals the one recorded at install.
        unmodified: bool,
    },
}

/// What to do with one built-in skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upgrade {
    /// Write it: it is missing.
    Install,
    /// Replace the installed, unmodified, older version.
    Replace {
        /// The installed version.
        from: String,
    },
    /// The installed version is current (or newer).
    UpToDate,
    /// The user changed the installed file: leave it alone, say so.
    KeepModified {
        /// The version installed before the user's change.
        version: String,
    },
    /// A skill of the same name that is not a built-in: never touched.
    KeepNotOurs,
}

/// Compares dotted versions numerically (`1.10` > `1.9`); a part that is
/// not a number compares as text.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts =
        |v: &str| -> Vec<String> { v.trim().split(['.', '-']).map(str::to_string).collect() };
    let (pa, pb) = (parts(a), parts(b));
    for i in 0..pa.len().max(pb.len()) {
        let x = pa.get(i).map_or("0", String::as_str);
        let y = pb.get(i).map_or("0", String::as_str);
        let ord = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => x.cmp(y),
        };
        if ord.is_ne() {
            return ord;
        }
    }
    std::cmp::Ordering::Equal
}

/// The upgrade decision for one built-in skill shipped at `shipped` version.
pub fn upgrade(installed: &Installed, shipped: &str) -> Upgrade {
    match installed {
        Installed::Missing => Upgrade::Install,
        Installed::NotOurs => Upgrade::KeepNotOurs,
        Installed::Ours {
            version,
            unmodified: false,
        } => Upgrade::KeepModified {
            version: version.clone(),
        },
        Installed::Ours { version, .. } => {
            if compare_versions(version, shipped).is_lt() {
                Upgrade::Replace {
                    from: version.clone(),
                }
            } else {
                Upgrade::UpToDate
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    #[test]
    fn versions() {
        assert_eq!(compare_versions("1.10", "1.9"), Greater);
        assert_eq!(compare_versions("1.0", "1"), Equal);
        assert_eq!(compare_versions("0.9", "1.0"), Less);
        assert_eq!(compare_versions("2", "10"), Less);
    }

    #[test]
    fn upgrade_table() {
        let ours = |v: &str, unmodified| Installed::Ours {
            version: v.into(),
            unmodified,
        };
        assert_eq!(upgrade(&Installed::Missing, "1.0"), Upgrade::Install);
        assert_eq!(upgrade(&Installed::NotOurs, "9.0"), Upgrade::KeepNotOurs);
        assert_eq!(
            upgrade(&ours("1.0", true), "1.1"),
            Upgrade::Replace { from: "1.0".into() }
        );
        assert_eq!(upgrade(&ours("1.1", true), "1.1"), Upgrade::UpToDate);
        assert_eq!(upgrade(&ours("2.0", true), "1.1"), Upgrade::UpToDate);
        assert_eq!(
            upgrade(&ours("1.0", false), "1.1"),
            Upgrade::KeepModified {
                version: "1.0".into()
            }
        );
    }

    #[test]
    fn budget() {
        let p = SkillsPolicy {
            prompt_budget_tokens: 100,
        };
        assert!(budget_warning(&p, 100, 2).is_none());
        assert!(
            budget_warning(&p, 101, 2)
                .unwrap()
                .contains("over the budget of 100")
        );
    }
}
