//! Diagnostics: what is wrong, where, by which rule, and how to fix it.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// How serious a diagnostic is. Errors fail `squadctl validate`; warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file breaks the protocol; consumers must not rely on it.
    Error,
    /// The file is usable but something deserves attention (usually forward compatibility).
    Warning,
}

impl Severity {
    /// `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! rules {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $sev:ident, $title:literal; )*) => {
        /// Every validation rule, each with a stable id that CI output and docs refer to.
        ///
        /// Ids never change meaning once released; `docs/protocol.md` lists them all.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Rule {
            $( $(#[$doc])* $variant, )*
        }

        impl Rule {
            /// All rules, in documentation order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant),*];

            /// The stable id, e.g. `missing-field`.
            pub fn id(self) -> &'static str {
                match self { $(Rule::$variant => $id,)* }
            }

            /// The severity diagnostics of this rule carry.
            pub fn severity(self) -> Severity {
                match self { $(Rule::$variant => Severity::$sev,)* }
            }

            /// One line describing what the rule checks.
            pub fn title(self) -> &'static str {
                match self { $(Rule::$variant => $title,)* }
            }

            /// Looks a rule up by its id.
            pub fn from_id(id: &str) -> Option<Rule> {
                match id { $($id => Some(Rule::$variant),)* _ => None }
            }
        }
    };
}

rules! {
    /// The file could not be read.
    Unreadable = "unreadable", Error, "the file could not be read";
    /// A directory or special file carries a protocol file name.
    NotAFile = "not-a-file", Error, "a protocol file name must name a regular file";
    /// The file exceeds the 1 MiB limit and was not read.
    FileTooLarge = "file-too-large", Error, "protocol files are at most 1 MiB";
    /// The bytes are not UTF-8.
    InvalidUtf8 = "invalid-utf8", Error, "protocol files are UTF-8 text";
    /// No YAML payload at all.
    EmptyFile = "empty-file", Error, "the file holds no YAML payload";
    /// More than one fenced yaml block in a markdown file.
    MultipleYamlBlocks = "multiple-yaml-blocks", Error, "a markdown file holds exactly one fenced yaml block";
    /// The YAML does not parse.
    YamlSyntax = "yaml-syntax", Error, "the payload must be well-formed YAML";
    /// The payload is not a mapping.
    NotAMapping = "not-a-mapping", Error, "the payload must be a YAML mapping";
    /// A required field is absent.
    MissingField = "missing-field", Error, "a required field is missing";
    /// A field holds the wrong type of value.
    WrongType = "wrong-type", Error, "a field has the wrong type";
    /// A value is not one of the allowed enumeration values.
    BadEnum = "bad-enum", Error, "a value is not one of the allowed values";
    /// An identifier does not follow its grammar.
    BadId = "bad-id", Error, "an identifier does not follow its grammar";
    /// A timestamp is not RFC 3339 with an offset.
    BadTimestamp = "bad-timestamp", Error, "timestamps are RFC 3339 with an offset";
    /// A number is outside its allowed range.
    OutOfRange = "out-of-range", Error, "a number is outside its allowed range";
    /// A boundary glob does not compile.
    BadGlob = "bad-glob", Error, "a boundary glob has invalid syntax";
    /// A path is absolute or climbs out of the project with `..`.
    UnsafePath = "unsafe-path", Error, "paths are relative to the project and never contain `..`";
    /// `response_by` is earlier than `created_at`.
    ResponseBeforeCreated = "response-before-created", Error, "a response cannot be due before the message was created";
    /// The file name is not the canonical name built from the content.
    FilenameMismatch = "filename-mismatch", Error, "the file name must be the canonical name built from the content";
    /// A field this version does not know.
    UnknownField = "unknown-field", Warning, "a field is not part of the protocol (kept for forward compatibility)";
    /// A field one edit from a protocol field: taken for a typo of it.
    MisspelledField = "misspelled-field", Error, "a field one edit from a protocol field is a typo of it";
    /// Two task assignments share a task id.
    DuplicateTask = "duplicate-task", Error, "task ids are unique within a session";
    /// A reference to a task that has no task assignment in the session.
    UnknownTask = "unknown-task", Error, "referenced tasks must have a task assignment in the session";
    /// The dependency graph has a cycle.
    DependencyCycle = "dependency-cycle", Error, "task dependencies must not form a cycle";
    /// Two declarations order the same pair of tasks both ways.
    DependencyContradiction = "dependency-contradiction", Error, "`requires` and `blocks` must not contradict each other";
    /// A progress update written by an agent other than the assignee.
    AgentMismatch = "agent-mismatch", Error, "progress updates come from the agent the task is assigned to";
    /// More than one session status file in a session.
    DuplicateSessionStatus = "duplicate-session-status", Error, "a session has exactly one session-status.md";
    /// A session directory without session-status.md.
    MissingSessionStatus = "missing-session-status", Warning, "a session has a session-status.md";
    /// A session directory whose name is not `YYYYMMDDTHHMMSSZ[-slug]`.
    BadSessionName = "bad-session-name", Warning, "session directories are named YYYYMMDDTHHMMSSZ[-slug]";
    /// CI: a changed file outside its task's boundaries or in the project-wide forbidden set.
    BoundaryViolation = "boundary-violation", Error, "a change lies outside its task's boundaries";
    /// CI: a changed file no task claims.
    UnattributedChange = "unattributed-change", Warning, "every change is attributed to a task";
    /// CI: a protocol file or supervisor output changed by someone who does not own it.
    OwnershipViolation = "ownership-violation", Error, "agents change only their own protocol files";
    /// CI: a `Squad-Task` trailer naming a task with no task assignment.
    UnknownTrailerTask = "unknown-trailer-task", Error, "a Squad-Task trailer names an assigned task";
    /// CI: a task assignment changed by an agent that is not a lead.
    PlanChangedByAgent = "plan-changed-by-agent", Error, "task assignments are changed by the lead (or a human) only";
    /// CI: a `Squad-Task` trailer naming a task of another agent than the committing one.
    ForeignTaskTrailer = "foreign-task-trailer", Error, "an agent attributes its commits to its own tasks only";
    // Skills (SKILL.md, the Agent Skills standard; docs/skills.md). Severities
    // are those of lenient loading; `--strict` makes every one an error.
    /// A SKILL.md that does not start with a `---` front matter block (a
    /// warning when it has text: loaded under its folder's name, as Squad does).
    SkillNoFrontMatter = "skill-no-front-matter", Error, "a SKILL.md starts with YAML front matter between `---` lines";
    /// The front matter's closing `---` is missing.
    SkillUnclosedFrontMatter = "skill-unclosed-front-matter", Error, "the front matter ends with a `---` line";
    /// The front matter is not well-formed YAML.
    SkillYamlSyntax = "skill-yaml-syntax", Error, "the front matter must be well-formed YAML";
    /// The front matter is not a YAML mapping.
    SkillNotAMapping = "skill-not-a-mapping", Error, "the front matter must be a YAML mapping";
    /// `description` is missing, empty or not a string.
    SkillMissingDescription = "skill-missing-description", Error, "a skill has a non-empty `description`";
    /// `name` is missing, empty or not a string.
    SkillMissingName = "skill-missing-name", Warning, "a skill has a non-empty `name`";
    /// `name` breaks the naming rules.
    SkillNameFormat = "skill-name-format", Warning, "`name` is 1-64 lowercase letters, digits and single hyphens, not starting or ending with a hyphen";
    /// `name` differs from the skill's folder name.
    SkillNameMismatch = "skill-name-mismatch", Warning, "`name` equals the skill's folder name";
    /// `description` is longer than 1,024 characters.
    SkillDescriptionTooLong = "skill-description-too-long", Warning, "`description` is at most 1,024 characters";
    /// `description` contains `<` or `>`.
    SkillDescriptionAngle = "skill-description-angle", Warning, "`description` contains no `<` or `>`";
    /// Invisible or reordering characters in a skill's description.
    SkillInvisibleText = "skill-invisible-text", Warning, "a skill's description holds no invisible characters (tag characters, bidirectional controls, zero-width)";
    /// `compatibility` is longer than 500 characters.
    SkillCompatibilityTooLong = "skill-compatibility-too-long", Warning, "`compatibility` is at most 500 characters";
    /// A field of the standard holds the wrong type of value.
    SkillFieldType = "skill-field-type", Warning, "`license` and `compatibility` are strings, `metadata` a mapping";
    /// A `metadata` value that is not a string.
    SkillMetadataValue = "skill-metadata-value", Warning, "`metadata` maps strings to strings";
    /// `allowed-tools` is not a space-separated string.
    SkillAllowedTools = "skill-allowed-tools", Warning, "`allowed-tools` is one space-separated string";
    /// A front matter field the standard does not define (Squad's own fields are known).
    SkillUnknownField = "skill-unknown-field", Warning, "front matter holds only name, description, license, compatibility, metadata, allowed-tools";
    /// A folder in a skills directory without a SKILL.md.
    SkillMissingFile = "skill-missing-file", Warning, "every folder in a skills directory holds a SKILL.md";
    /// A skill folder or SKILL.md that is a symlink, a FIFO or another non-regular entry.
    SkillNotRegular = "skill-not-regular", Warning, "skill folders and SKILL.md files are real directories and regular files (symlinks are not followed)";
    /// A skill hidden by a skill of the same name in a place of higher precedence.
    SkillShadowed = "skill-shadowed", Warning, "skill names are unique across the skill directories";
    // Edit-time guard (squadctl guard; documented in docs/guards.md).
    /// Guard: a pre-tool-use hook input that cannot be read (the call is denied).
    GuardBadInput = "guard-bad-input", Error, "a hook input is one well-formed pre-tool-use event";
    // Hardening (issue 10; protocol files, documented in docs/protocol.md).
    /// Two messages in one session share a message id.
    DuplicateMessageId = "duplicate-message-id", Error, "message ids are unique within a session";
    // Team memory (SEM entries in decisions.md, inbox and history files; docs/memory.md).
    /// A SEM entry without type, timestamp, author or summary.
    MemoryMissingField = "memory-missing-field", Error, "a SEM entry has type, timestamp, author and summary";
    /// A SEM timestamp that is not ISO 8601 with an offset.
    MemoryBadTimestamp = "memory-bad-timestamp", Error, "SEM timestamps are ISO 8601 with a time zone offset";
    /// A type outside decision, memory, note, directive.
    MemoryBadType = "memory-bad-type", Error, "the type is decision, memory, note or directive";
    /// A summary longer than 120 characters.
    MemorySummaryTooLong = "memory-summary-too-long", Error, "a summary is at most 120 characters";
    /// A scope outside `team`, `project`, `agent:{name}`, `skill:{name}`.
    MemoryBadScope = "memory-bad-scope", Error, "scope is team, project, agent:{name} or skill:{name}";
    /// `supersedes` or a `related` decision/memory that names no entry.
    MemoryUnresolvedReference = "memory-unresolved-reference", Error, "supersedes and related entries name the timestamp of an existing entry";
    /// The heading and the fields disagree on timestamp, type or summary.
    MemoryHeaderMismatch = "memory-header-mismatch", Error, "the heading repeats the entry's timestamp, type and summary";
    /// An entry past its `expires` moment.
    MemoryExpired = "memory-expired", Warning, "an entry past `expires` is due for review";
    /// An entry in a legacy style (shown by `squadctl memory validate`).
    MemoryLegacyEntry = "memory-legacy-entry", Warning, "entries are written in SEM (`squadctl memory convert` rewrites legacy ones)";
    /// A code fence in a memory file that never closes (every entry below it is hidden).
    MemoryUnclosedFence = "memory-unclosed-fence", Error, "every code fence of a memory file closes";
    // Team directory (team.md, routing, charters, histories, casting; docs/team.md).
    /// A team file that cannot be read (a symlink, a FIFO, too large, not UTF-8).
    TeamUnreadable = "team-unreadable", Error, "team files are regular UTF-8 files of at most 16 MiB (symlinks are not followed)";
    /// A team directory without team.md.
    TeamNoTeamMd = "team-no-team-md", Error, "a team directory holds team.md, the roster";
    /// team.md without a `## Members` (or `Roster`) table.
    TeamNoMembers = "team-no-members", Error, "team.md has a `## Members` table (or a `Roster` section with one)";
    /// A roster row without a name or a role.
    TeamMemberIncomplete = "team-member-incomplete", Error, "every roster member has a name and a role";
    /// Two roster rows with the same name.
    TeamDuplicateMember = "team-duplicate-member", Warning, "roster names are unique";
    /// team.md without a `## Project Context` section.
    TeamNoProjectContext = "team-no-project-context", Warning, "team.md has a `## Project Context` section";
    /// A roster member without an agent folder.
    TeamMemberWithoutAgent = "team-member-without-agent", Warning, "every roster member with a charter has a folder under agents/";
    /// An agent folder whose agent is not in the roster.
    TeamAgentNotInRoster = "team-agent-not-in-roster", Warning, "every folder under agents/ (but _alumni) belongs to a roster member";
    /// A charter without a `- **Role:**` line.
    TeamCharterNoRole = "team-charter-no-role", Warning, "a charter declares its role in a `- **Role:**` line";
    /// An expected team file is missing (routing.md, an agent's charter.md).
    TeamMissingFile = "team-missing-file", Warning, "a team has routing.md and every agent folder a charter.md";
    /// A casting file that is not well-formed JSON.
    TeamInvalidJson = "team-invalid-json", Error, "casting files are well-formed JSON without duplicate keys";
    /// A casting file whose top level is not a JSON object.
    TeamJsonType = "team-json-type", Error, "a casting file holds one JSON object";
    /// routing.md sends work to an agent who is not in the roster.
    TeamRoutingUnknownAgent = "team-routing-unknown-agent", Warning, "routing.md names only roster members";
    // runners (issue 17): .squad/config.json; documented in docs/runners.md.
    /// config.json is not JSON (or nests absurdly deep).
    ConfigInvalidJson = "config-invalid-json", Error, "config.json is one JSON object";
    /// A key of config.json holds the wrong JSON type.
    ConfigBadType = "config-bad-type", Error, "each config.json key holds the type its schema gives";
    /// A key of config.json holds a value out of range.
    ConfigBadValue = "config-bad-value", Error, "config.json values are in range (maxConcurrent >= 1, …)";
    /// A key squad-supervisor does not read (kept as written).
    ConfigUnknownKey = "config-unknown-key", Warning, "unknown config.json keys are kept, not read";
    /// A config.json key one edit from a key squad-supervisor reads.
    ConfigMisspelledKey = "config-misspelled-key", Error, "a config.json key one edit from a known key is a typo of it";
    // issue 28: .squad/policies.yaml; documented in docs/daemon.md.
    /// policies.yaml does not load: not YAML, an unknown key, a bad value.
    PolicyInvalid = "policy-invalid", Error, "policies.yaml holds only known keys with valid values";
}

impl Rule {
    /// Whether the rule belongs to `squadctl check` (CI, documented in
    /// docs/ci.md) rather than to protocol files (docs/protocol.md).
    pub fn is_ci(self) -> bool {
        matches!(
            self,
            Rule::BoundaryViolation
                | Rule::UnattributedChange
                | Rule::OwnershipViolation
                | Rule::UnknownTrailerTask
                | Rule::PlanChangedByAgent
                | Rule::ForeignTaskTrailer
        )
    }

    /// Where the rule is documented (an anchor in the repository's docs).
    pub fn doc_path(self) -> &'static str {
        if self.id().starts_with("guard-") {
            "docs/guards.md"
        } else if self.id().starts_with("skill-") {
            "docs/skills.md"
        } else if self.id().starts_with("memory-") {
            "docs/memory.md"
        } else if self.id().starts_with("team-") {
            "docs/team.md"
        } else if self.id().starts_with("config-") {
            "docs/runners.md"
        } else if self.id().starts_with("policy-") {
            "docs/daemon.md"
        } else if self.is_ci() {
            "docs/ci.md"
        } else {
            "docs/protocol.md"
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// A 1-based line and column in the file as it is on disk (the `.md` file,
/// not the YAML extracted from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Location {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

/// One finding about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file (or session directory) the finding is about.
    pub path: PathBuf,
    /// Where in the file, when the finding has a position.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Error or warning; normally the rule's own severity.
    pub severity: Severity,
    /// The rule that produced the finding.
    pub rule: Rule,
    /// What is wrong, naming the field and the value.
    pub message: String,
    /// How to fix it.
    pub hint: String,
}

impl Diagnostic {
    /// A diagnostic with the rule's own severity and no position.
    pub fn new(
        path: impl Into<PathBuf>,
        rule: Rule,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Diagnostic {
            path: path.into(),
            location: None,
            severity: rule.severity(),
            rule,
            message: message.into(),
            hint: hint.into(),
        }
    }

    /// Sets the position.
    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    /// Whether this diagnostic is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `path:line:col` (or `path` without a position), as editors and terminals link it.
    pub fn position(&self) -> String {
        position(&self.path, self.location)
    }
}

pub(crate) fn position(path: &Path, location: Option<Location>) -> String {
    match location {
        Some(l) => format!("{}:{}:{}", path.display(), l.line, l.column),
        None => path.display().to_string(),
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}[{}]: {}",
            self.position(),
            self.severity,
            self.rule,
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_ids_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &rule in Rule::ALL {
            assert!(seen.insert(rule.id()), "duplicate id {}", rule.id());
            assert_eq!(Rule::from_id(rule.id()), Some(rule));
            assert!(
                rule.id()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{}",
                rule.id()
            );
        }
    }

    #[test]
    fn display_is_compiler_style() {
        let d = Diagnostic::new(
            "a.md",
            Rule::MissingField,
            "`meta.agent` is missing",
            "add it",
        )
        .at(Some(Location { line: 3, column: 5 }));
        assert_eq!(
            d.to_string(),
            "a.md:3:5: error[missing-field]: `meta.agent` is missing"
        );
    }
}
