//! Boundary decisions: may this path be changed by this task?
//!
//! Pure: paths are strings relative to the project root; whether a path
//! resolves through a symlink out of the project is a fact the caller
//! establishes (it needs the file system) and passes in.

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::Serialize;
use std::fmt;
use std::sync::OnceLock;

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

/// A boundary glob, parsed once and matched as globset matches it
/// (`literal_separator(true)`), without building a regex
/// where the glob's shape makes that unnecessary: most boundary globs are a
/// literal path or `<dir>/**`, and the command-line start of the guard and
/// of `lock` was paying a regex compilation for every glob of the policy and
/// the task (docs/performance.md, issue 23). Other globs are compiled on
/// their first path that starts with their literal prefix, once.
pub struct Pattern {
    glob: Glob,
    shape: Shape,
    /// Built on first need. A one-glob set rather than `compile_matcher`,
    /// which panics where a set returns an error (a regex over its size
    /// limit): such a glob matches nothing, as a set that failed to build
    /// did before.
    matcher: OnceLock<Option<globset::GlobSet>>,
}

/// What can be decided about a glob from its text alone.
enum Shape {
    /// No metacharacter: matches exactly itself.
    Literal,
    /// `<literal>/**` (globset: `^<literal>/.*$`): every path starting with
    /// `<literal>/` (the field holds it, slash included).
    Under(String),
    /// `**`: every path.
    Everything,
    /// Anything else: a path must start with the literal prefix (a cheap
    /// refusal), then the compiled matcher decides.
    Compiled,
}

impl Pattern {
    /// Parses a glob (errors as [`compile_glob`] words them).
    pub fn new(pattern: &str) -> Result<Pattern, String> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("invalid glob `{pattern}`: {}", e.kind()))?;
        let shape = if !is_glob(pattern) {
            Shape::Literal
        } else if pattern == "**" {
            Shape::Everything
        } else {
            match pattern.strip_suffix("**") {
                Some(dir) if dir.len() > 1 && dir.ends_with('/') && !is_glob(dir) => {
                    Shape::Under(dir.to_string())
                }
                _ => Shape::Compiled,
            }
        };
        Ok(Pattern {
            glob,
            shape,
            matcher: OnceLock::new(),
        })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        self.glob.glob()
    }

    /// Whether `path` matches, as a globset `GlobSet` of this one glob says
    /// (and, on a normalized path, [`compile_glob`]'s matcher).
    pub fn is_match(&self, path: &str) -> bool {
        match &self.shape {
            Shape::Literal => path == self.glob.glob(),
            Shape::Under(dir) => path.starts_with(dir.as_str()),
            Shape::Everything => true,
            // Every path the glob matches starts with its literal prefix:
            // the tokens before the first metacharacter are literals (a `/`
            // folded into a following `**` token still matches a `/`).
            Shape::Compiled => {
                path.starts_with(literal_prefix(self.glob.glob()))
                    && self
                        .matcher
                        .get_or_init(|| {
                            let mut set = globset::GlobSetBuilder::new();
                            set.add(self.glob.clone());
                            set.build().ok()
                        })
                        .as_ref()
                        .is_some_and(|m| m.is_match(path))
            }
        }
    }
}

/// Whether a glob matches a path, as [`compile_glob`]'s matcher would say;
/// `false` for a glob that does not parse.
pub fn glob_matches(pattern: &str, path: &str) -> bool {
    Pattern::new(pattern).is_ok_and(|p| p.is_match(path))
}

/// One list of globs, asked in list order (the first match is the rule
/// that decided), remembering which entry each one is.
struct List {
    rules: Vec<RuleRef>,
    patterns: Vec<Pattern>,
}

impl List {
    fn new(lists: &[(Source, &[String])], errors: &mut Vec<String>) -> List {
        let mut rules = Vec::new();
        let mut patterns = Vec::new();
        for (source, globs) in lists {
            for (index, glob) in globs.iter().enumerate() {
                match Pattern::new(glob) {
                    Ok(p) => {
                        patterns.push(p);
                        rules.push(RuleRef {
                            source: *source,
                            index,
                            glob: glob.clone(),
                        });
                    }
                    Err(e) => errors.push(format!("{source}[{index}]: {e}")),
                }
            }
        }
        List { rules, patterns }
    }

    /// The first rule (in list order) matching `path`.
    fn first_match(&self, path: &str) -> Option<&RuleRef> {
        self.patterns
            .iter()
            .position(|p| p.is_match(path))
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

    use proptest::strategy::Strategy;

    /// The references: a globset `GlobSet` of the one glob (what the
    /// boundaries matched with before) and, on normalized paths (the only
    /// ones asked: a lock target, a path a call writes), the `GlobMatcher`
    /// of [`compile_glob`] (what lock targets matched with). The two differ
    /// on paths no caller asks about (`*/..`).
    fn reference(pattern: &str, path: &str) -> Option<bool> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .ok()?;
        let mut set = globset::GlobSetBuilder::new();
        set.add(glob);
        Some(set.build().ok()?.is_match(path))
    }

    fn agrees(pattern: &str, path: &str) -> Result<(), String> {
        let ours = Pattern::new(pattern).ok().map(|p| p.is_match(path));
        let set = reference(pattern, path);
        let matcher = compile_glob(pattern).ok().map(|m| m.is_match(path));
        let normalized = normalize(path).is_ok_and(|n| n == path);
        if ours == set && (!normalized || ours == matcher) {
            Ok(())
        } else {
            Err(format!(
                "`{pattern}` on `{path}`: ours {ours:?}, GlobSet {set:?}, GlobMatcher {matcher:?}"
            ))
        }
    }

    /// Pieces of globs and paths around the shapes the matcher decides
    /// without a regex (literals, `<dir>/**`, `**`) and the ones that trip
    /// a prefix test (`a/**` against `a`, `**/`, escapes, classes).
    fn glob_piece() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            proptest::sample::select(vec![
                "a", "b", "ab", ".", ".env", "/", "//", "*", "**", "?", "[ab]", "[!a]", "[/]",
                "{a,b}", "{a,b/**}", "/**", "a/**", "/**/", "\\*", "\\a", "}", ",", "-", "x.rs",
            ])
            .prop_map(str::to_string),
            "[a-c/.]{0,3}",
        ]
    }

    fn path_piece() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            proptest::sample::select(vec![
                "a", "b", "ab", ".env", "/", "*", "{a,b}", "x.rs", "\\", "\n",
            ])
            .prop_map(str::to_string),
            "[a-c/.]{0,3}",
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(512))]

        /// Wherever globset reads a glob, the matcher reads it the same:
        /// parsed or refused alike, and the same verdict on every path
        /// (seen failing with `<dir>/**` matching `<dir>` itself, and with
        /// the prefix test taking the `/` of `a/**` as optional).
        #[test]
        fn the_matcher_agrees_with_globset(
            glob in proptest::collection::vec(glob_piece(), 0..5),
            path in proptest::collection::vec(path_piece(), 0..6),
        ) {
            let (glob, path) = (glob.concat(), path.concat());
            let r = agrees(&glob, &path);
            proptest::prop_assert!(r.is_ok(), "{}", r.err().unwrap_or_default());
            // And every prefix of the glob, as a glob on the path and as a
            // path for the glob (`a/**` on `a`, `a/`), also with its stars
            // spelled out: paths near the glob's own text are where a
            // shortcut goes wrong.
            let spelled = glob.replace('*', "x");
            for cut in 0..=glob.len() {
                for (g, p) in [
                    (glob.get(..cut), Some(path.as_str())),
                    (Some(glob.as_str()), glob.get(..cut)),
                    (Some(glob.as_str()), spelled.get(..cut)),
                ] {
                    if let (Some(g), Some(p)) = (g, p) {
                        let r = agrees(g, p);
                        proptest::prop_assert!(r.is_ok(), "{}", r.err().unwrap_or_default());
                    }
                }
            }
        }
    }

    /// Every boundary and forbidden glob of the vendored fixtures, the
    /// shipped policy and the docs' examples, against every file of the
    /// vendored corpora (and each of its directories), as globset says.
    #[test]
    fn the_matcher_agrees_with_globset_on_the_corpora() {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut globs: Vec<String> = vec![
            "**".into(),
            "**/*.rs".into(),
            "src/*.rs".into(),
            "docs/*.md".into(),
            "tests/corpora/**".into(),
            "tests/corpora/squad/**/*.md".into(),
            "tests/{corpora,fixtures}/**".into(),
            "tests/corpora/squad".into(),
            "tests/corpora/squad/**".into(),
            "tests/corpora/squad/README.md".into(),
            "*/corpora/**".into(),
            "tests/corpora/**/README.md".into(),
            "tests/corpora/skills/[a-c]*/**".into(),
        ];
        let policy = crate::Policy::defaults();
        globs.extend(policy.forbidden.iter().cloned());
        let mut texts = Vec::new();
        let mut stack = vec![repo.join("tests/fixtures"), repo.join("docs")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "md") {
                    texts.push(std::fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
        for t in &texts {
            for line in t.lines() {
                let item = line.trim_start().strip_prefix("- ").unwrap_or("").trim();
                let item = item.trim_matches(|c| c == '"' || c == '\'' || c == '`');
                if !item.is_empty() && !item.contains(' ') && item.len() < 80 {
                    globs.push(item.to_string());
                }
            }
        }
        globs.sort();
        globs.dedup();
        assert!(globs.len() > 40, "only {} globs found", globs.len());
        assert!(
            globs.iter().any(|g| g == "src/**"),
            "the fixtures' globs were not read"
        );
        let mut paths: Vec<String> = Vec::new();
        let mut stack = vec![repo.join("tests/corpora")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                if let Ok(rel) = p.strip_prefix(&repo) {
                    paths.push(rel.to_string_lossy().into_owned());
                }
                if p.is_dir() {
                    stack.push(p);
                }
            }
        }
        assert!(paths.len() > 500, "only {} paths found", paths.len());
        let (mut checked, mut matched) = (0, 0);
        for g in &globs {
            let Ok(ours) = Pattern::new(g) else {
                assert!(compile_glob(g).is_err(), "`{g}` refused by ours only");
                continue;
            };
            for p in &paths {
                if let Err(e) = agrees(g, p) {
                    panic!("{e}");
                }
                checked += 1;
                matched += usize::from(ours.is_match(p));
            }
        }
        // So that the agreement is not met by nothing ever matching.
        assert!(matched > 1000, "{matched} matches of {checked}");
    }

    #[test]
    fn the_matcher_decides_common_shapes_without_a_regex() {
        for (g, path, want) in [
            ("src/a.rs", "src/a.rs", true),
            ("src/a.rs", "src/a.rs/x", false),
            ("src/**", "src/a/b.rs", true),
            ("src/**", "src", false),
            ("src/**", "srcx/a", false),
            ("**", "anything/at/all", true),
        ] {
            let p = Pattern::new(g).unwrap();
            assert_eq!(p.is_match(path), want, "`{g}` on `{path}`");
            assert!(p.matcher.get().is_none(), "`{g}` compiled a regex");
        }
        // A glob whose literal prefix the path lacks is refused uncompiled.
        let p = Pattern::new(".env.*").unwrap();
        assert!(!p.is_match("src/a.rs"));
        assert!(p.matcher.get().is_none());
        assert!(p.is_match(".env.local"));
        assert!(p.matcher.get().is_some());
    }
}
