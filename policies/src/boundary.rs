//! Boundary decisions: may this path be changed by this task?
//!
//! Pure: paths are strings relative to the project root; whether a path
//! resolves through a symlink out of the project is a fact the caller
//! establishes (it needs the file system) and passes in.

use globset::{GlobBuilder, GlobMatcher};
use serde::Serialize;
use std::fmt;

/// The longest path accepted (Linux PATH_MAX).
pub const MAX_PATH_LEN: usize = 4096;

/// Why a path is refused before any glob is consulted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Refusal {
    /// Empty.
    Empty,
    /// Longer than [`MAX_PATH_LEN`].
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Holds a NUL byte.
    Nul,
    /// Starts at the file-system root (or a drive).
    Absolute,
    /// Climbs with `..`.
    ParentDir,
    /// Resolves through a symlink to outside the project.
    SymlinkOutside {
        /// Where it leads.
        target: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Empty => f.write_str("the path is empty"),
            Refusal::TooLong { len } => {
                write!(f, "the path is {len} bytes long (limit {MAX_PATH_LEN})")
            }
            Refusal::Nul => f.write_str("the path contains a NUL byte"),
            Refusal::Absolute => {
                f.write_str("the path is absolute; paths are relative to the project root")
            }
            Refusal::ParentDir => f.write_str("the path contains `..`"),
            Refusal::SymlinkOutside { target } => {
                write!(
                    f,
                    "the path resolves through a symlink to {target}, outside the project"
                )
            }
        }
    }
}

/// Normalizes a project-relative path: `./a//b/` → `a/b`. Absolute paths,
/// `..`, NUL bytes, empty and overlong paths are refused.
pub fn normalize(path: &str) -> Result<String, Refusal> {
    if path.len() > MAX_PATH_LEN {
        return Err(Refusal::TooLong { len: path.len() });
    }
    if path.contains('\0') {
        return Err(Refusal::Nul);
    }
    let b = path.as_bytes();
    if path.starts_with('/')
        || path.starts_with('\\')
        || (b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic())
    {
        return Err(Refusal::Absolute);
    }
    let mut parts = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(Refusal::ParentDir),
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return Err(Refusal::Empty);
    }
    Ok(parts.join("/"))
}

/// Compiles a boundary glob the way every boundary is matched:
/// `literal_separator(true)`, so `*` never crosses `/`.
pub fn compile_glob(pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid glob `{pattern}`: {}", e.kind()))
}

/// Checks that a glob parses, without compiling its matcher (building the
/// regex is most of a glob's cost; validation does not need it).
pub fn check_glob(pattern: &str) -> Result<(), String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(drop)
        .map_err(|e| format!("invalid glob `{pattern}`: {}", e.kind()))
}

/// The literal prefix of a glob: everything before its first metacharacter
/// (`src/api/*.rs` → `src/api/`, `.env.*` → `.env.`). Every path the glob
/// matches starts with it. A pattern without metacharacters is its own prefix.
pub fn literal_prefix(pattern: &str) -> &str {
    match pattern.find(['*', '?', '[', '{', '\\']) {
        None => pattern,
        Some(i) => &pattern[..i],
    }
}

/// Whether a pattern holds glob metacharacters.
pub fn is_glob(pattern: &str) -> bool {
    literal_prefix(pattern).len() != pattern.len()
}

/// Which list a glob came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The task's `boundaries.allowed`.
    TaskAllowed,
    /// The task's `boundaries.forbidden`.
    TaskForbidden,
    /// The policy's project-wide `boundaries.forbidden`.
    ProjectForbidden,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::TaskAllowed => "boundaries.allowed",
            Source::TaskForbidden => "boundaries.forbidden",
            Source::ProjectForbidden => "policy boundaries.forbidden",
        })
    }
}

/// The rule that decided: which list, which entry, which glob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleRef {
    /// The list.
    pub source: Source,
    /// Index in the list.
    pub index: usize,
    /// The glob.
    pub glob: String,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}] `{}`", self.source, self.index, self.glob)
    }
}

/// The decision about one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum Decision {
    /// Inside the task's boundaries.
    Allowed {
        /// The allowed glob that matched.
        rule: RuleRef,
    },
    /// Matched a forbidden glob (forbidden beats allowed).
    Forbidden {
        /// The forbidden glob that matched.
        rule: RuleRef,
    },
    /// No allowed glob matches (an empty `allowed` list allows nothing).
    NotAllowed {
        /// How many allowed globs the task has.
        allowed: usize,
    },
    /// Refused before matching.
    Refused {
        /// Why.
        refusal: Refusal,
    },
}

impl Decision {
    /// Whether the change may happen.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed { .. })
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Allowed { rule } => write!(f, "allowed by {rule}"),
            Decision::Forbidden { rule } => write!(f, "forbidden by {rule}"),
            Decision::NotAllowed { allowed: 0 } => f.write_str(
                "not allowed: the task's boundaries.allowed is empty (nothing is allowed)",
            ),
            Decision::NotAllowed { allowed } => write!(
                f,
                "not allowed: none of the task's {allowed} boundaries.allowed globs matches"
            ),
            Decision::Refused { refusal } => write!(f, "refused: {refusal}"),
        }
    }
}

/// One list of globs, matched as a single set (one pass per path, however
/// many globs), remembering which entry each index is.
struct List {
    rules: Vec<RuleRef>,
    set: globset::GlobSet,
}

impl List {
    fn new(lists: &[(Source, &[String])], errors: &mut Vec<String>) -> List {
        let mut builder = globset::GlobSetBuilder::new();
        let mut rules = Vec::new();
        for (source, globs) in lists {
            for (index, glob) in globs.iter().enumerate() {
                match GlobBuilder::new(glob).literal_separator(true).build() {
                    Ok(g) => {
                        builder.add(g);
                        rules.push(RuleRef {
                            source: *source,
                            index,
                            glob: glob.clone(),
                        });
                    }
                    Err(e) => errors.push(format!(
                        "{source}[{index}]: invalid glob `{glob}`: {}",
                        e.kind()
                    )),
                }
            }
        }
        let set = builder.build().unwrap_or_else(|e| {
            errors.push(format!("cannot build the glob set: {e}"));
            globset::GlobSet::empty()
        });
        List { rules, set }
    }

    /// The first rule (in list order) matching `path`.
    fn first_match(&self, path: &str) -> Option<&RuleRef> {
        self.set
            .matches(path)
            .into_iter()
            .min()
            .and_then(|i| self.rules.get(i))
    }
}

/// A task's boundaries plus the project-wide forbidden set, compiled once
/// and asked about many paths.
pub struct Boundaries {
    allowed: List,
    forbidden: List,
    /// Globs that did not compile (the task file would fail validation too);
    /// they match nothing, which errs on the side of refusing.
    pub errors: Vec<String>,
}

impl Boundaries {
    /// Compiles a task's `allowed`/`forbidden` and the policy's forbidden globs.
    pub fn new(allowed: &[String], forbidden: &[String], project_forbidden: &[String]) -> Self {
        let mut errors = Vec::new();
        let allowed = List::new(&[(Source::TaskAllowed, allowed)], &mut errors);
        // Project-wide rules come first: they are the stronger reason.
        let forbidden = List::new(
            &[
                (Source::ProjectForbidden, project_forbidden),
                (Source::TaskForbidden, forbidden),
            ],
            &mut errors,
        );
        Boundaries {
            allowed,
            forbidden,
            errors,
        }
    }

    /// Only the project-wide forbidden set (for changes no task claims).
    pub fn project_only(project_forbidden: &[String]) -> Self {
        Boundaries::new(&[], &[], project_forbidden)
    }

    /// The project-wide or task forbidden glob matching a normalized path.
    pub fn forbidden_by(&self, normalized: &str) -> Option<&RuleRef> {
        self.forbidden.first_match(normalized)
    }

    /// Decides about `path` (as written); `escapes_to` is where it leads when
    /// it resolves through a symlink out of the project.
    pub fn decide(&self, path: &str, escapes_to: Option<&str>) -> Decision {
        let normalized = match normalize(path) {
            Ok(p) => p,
            Err(refusal) => return Decision::Refused { refusal },
        };
        if let Some(target) = escapes_to {
            return Decision::Refused {
                refusal: Refusal::SymlinkOutside {
                    target: target.to_string(),
                },
            };
        }
        if let Some(rule) = self.forbidden_by(&normalized) {
            return Decision::Forbidden { rule: rule.clone() };
        }
        match self.allowed.first_match(&normalized) {
            Some(rule) => Decision::Allowed { rule: rule.clone() },
            None => Decision::NotAllowed {
                allowed: self.allowed.rules.len(),
            },
        }
    }

    /// Decides whether a lock target (path or glob) lies inside the
    /// boundaries. A path is decided as by [`Boundaries::decide`]. A glob is
    /// inside when it equals an allowed glob, or its literal prefix lies under
    /// an allowed `<dir>/**`; it is refused when its literal prefix nests with
    /// a forbidden glob's (conservative: it could match a forbidden path).
    pub fn decide_target(&self, target: &str) -> Decision {
        if !is_glob(target) {
            return self.decide(target, None);
        }
        let prefix = literal_prefix(target);
        // Forbidden areas inside an allowed glob stay forbidden (a lock grants
        // no right to change them); the glob is refused when its own literal
        // prefix already lies in a forbidden area.
        let anchor = prefix.trim_end_matches('/');
        if !anchor.is_empty()
            && let Some(rule) = self.forbidden.first_match(anchor)
        {
            return Decision::Forbidden { rule: rule.clone() };
        }
        for rule in &self.forbidden.rules {
            let in_forbidden_dir = rule
                .glob
                .strip_suffix("/**")
                .filter(|dir| !is_glob(dir))
                .is_some_and(|dir| prefix.starts_with(&format!("{dir}/")) || anchor == dir);
            if in_forbidden_dir {
                return Decision::Forbidden { rule: rule.clone() };
            }
        }
        for rule in &self.allowed.rules {
            let g = &rule.glob;
            let under_dir = g
                .strip_suffix("/**")
                .filter(|dir| !is_glob(dir))
                .is_some_and(|dir| prefix.starts_with(&format!("{dir}/")));
            if g == target || under_dir || g == "**" {
                return Decision::Allowed { rule: rule.clone() };
            }
        }
        Decision::NotAllowed {
            allowed: self.allowed.rules.len(),
        }
    }
}

/// Whether two literal prefixes nest (one starts with the other). Since every
/// match of a glob starts with its literal prefix, globs whose prefixes do not
/// nest can never match the same path; the empty prefix nests with all.
pub fn prefixes_nest(a: &str, b: &str) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn normalize_table() {
        let cases: &[(&str, Result<&str, Refusal>)] = &[
            ("src/a.rs", Ok("src/a.rs")),
            ("./src//a.rs", Ok("src/a.rs")),
            ("src/./a.rs/", Ok("src/a.rs")),
            ("", Err(Refusal::Empty)),
            (".", Err(Refusal::Empty)),
            ("/etc/passwd", Err(Refusal::Absolute)),
            ("C:/x", Err(Refusal::Absolute)),
            ("\\\\server\\x", Err(Refusal::Absolute)),
            ("../x", Err(Refusal::ParentDir)),
            ("a/../../x", Err(Refusal::ParentDir)),
            ("a\0b", Err(Refusal::Nul)),
        ];
        for (input, want) in cases {
            assert_eq!(
                normalize(input).as_deref().map_err(|e| e.clone()),
                want.clone(),
                "{input:?}"
            );
        }
        let long = "a/".repeat(5000);
        assert!(matches!(normalize(&long), Err(Refusal::TooLong { .. })));
    }

    #[test]
    fn decisions_say_which_rule_decided() {
        let b = Boundaries::new(
            &s(&["backend/src/**", "docs/*.md"]),
            &s(&["backend/src/secret/**"]),
            &s(&[".env", ".git/**"]),
        );
        let cases: &[(&str, &str)] = &[
            (
                "backend/src/routes/users.ts",
                "allowed by boundaries.allowed[0] `backend/src/**`",
            ),
            (
                "docs/api.md",
                "allowed by boundaries.allowed[1] `docs/*.md`",
            ),
            (
                "docs/sub/api.md",
                "not allowed: none of the task's 2 boundaries.allowed globs matches",
            ),
            (
                "backend/src/secret/key.pem",
                "forbidden by boundaries.forbidden[0] `backend/src/secret/**`",
            ),
            (".env", "forbidden by policy boundaries.forbidden[0] `.env`"),
            (
                ".git/config",
                "forbidden by policy boundaries.forbidden[1] `.git/**`",
            ),
            ("../x", "refused: the path contains `..`"),
            (
                "/etc/passwd",
                "refused: the path is absolute; paths are relative to the project root",
            ),
        ];
        for (path, want) in cases {
            assert_eq!(b.decide(path, None).to_string(), *want, "{path}");
        }
        assert_eq!(
            b.decide("backend/src/link", Some("/etc")).to_string(),
            "refused: the path resolves through a symlink to /etc, outside the project"
        );
        let nothing = Boundaries::new(&[], &[], &[]);
        assert_eq!(
            nothing.decide("src/a.rs", None).to_string(),
            "not allowed: the task's boundaries.allowed is empty (nothing is allowed)"
        );
    }

    #[test]
    fn star_does_not_cross_directories() {
        let b = Boundaries::new(&s(&["src/*.rs"]), &[], &[]);
        assert!(b.decide("src/a.rs", None).is_allowed());
        assert!(!b.decide("src/x/a.rs", None).is_allowed());
    }

    #[test]
    fn literal_prefixes() {
        assert_eq!(literal_prefix("src/api/*.rs"), "src/api/");
        assert_eq!(literal_prefix("src/a.rs"), "src/a.rs");
        assert_eq!(literal_prefix("**/*.rs"), "");
        assert_eq!(literal_prefix("*.md"), "");
        assert_eq!(literal_prefix("src/{a,b}/x"), "src/");
        assert_eq!(literal_prefix(".env.*"), ".env.");
        assert!(prefixes_nest("src/", "src/api/"));
        assert!(prefixes_nest("src/a.rs", "src/"));
        assert!(prefixes_nest("", "anything/"));
        assert!(!prefixes_nest("src/", "srcx/"));
        assert!(prefixes_nest("src/a", "src/ab"), "src/a* may match src/ab");
        assert!(!prefixes_nest("backend/", ".env."));
        assert!(prefixes_nest("src/a", "src/a/b"));
    }

    #[test]
    fn lock_targets_inside_boundaries() {
        let b = Boundaries::new(
            &s(&["backend/**", "docs/*.md"]),
            &[],
            &s(&[".env", ".git/**"]),
        );
        let cases: &[(&str, bool)] = &[
            ("backend/src/*.rs", true),
            ("backend/**", true),
            ("docs/*.md", true),
            ("docs/**", false),
            ("**/*.rs", false),
            ("frontend/*.ts", false),
            ("backend/a.rs", true),
        ];
        for (target, want) in cases {
            assert_eq!(
                b.decide_target(target).is_allowed(),
                *want,
                "{target}: {}",
                b.decide_target(target)
            );
        }
        assert!(matches!(
            b.decide_target(".git/*"),
            Decision::Forbidden { .. }
        ));
        assert!(matches!(
            b.decide_target(".env*"),
            Decision::Forbidden { .. }
        ));
        // A forbidden area inside an allowed directory does not make the
        // directory unlockable.
        let b = Boundaries::new(&s(&["shared/**"]), &s(&["shared/secret/**"]), &[]);
        assert!(b.decide_target("shared/**").is_allowed());
        assert!(b.decide_target("shared/*.md").is_allowed());
        assert!(!b.decide_target("shared/secret/*.pem").is_allowed());
    }
}
