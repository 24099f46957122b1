//! The policy: `policies/default.yaml` (embedded) overridden field by field by
//! a project's `.squad/policies.yaml`.

use crate::duration::parse_duration;
use serde::Deserialize;
use serde_yaml::Value;
use std::time::Duration;

/// The shipped defaults.
pub const DEFAULT_POLICY: &str = include_str!("../default.yaml");

/// What `squadctl check` does with changes no task claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unattributed {
    /// A violation: exit 1.
    Error,
    /// Reported as a warning.
    Warn,
    /// Not reported.
    Ignore,
}

/// The effective policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Project-wide forbidden globs.
    pub forbidden: Vec<String>,
    /// Lock TTL when none is given.
    pub lock_default_ttl: Duration,
    /// Longest lock TTL accepted.
    pub lock_max_ttl: Duration,
    /// `check` handling of unattributed changes.
    pub unattributed: Unattributed,
    /// Retention ages and schedule.
    pub retention: Retention,
    /// Message delivery, escalation and notification.
    pub messages: crate::messages::MessagePolicy,
    /// Skills presented to agents.
    pub skills: crate::skills::SkillsPolicy,
    /// `memory:` (squadd's merge and archive of team memory).
    pub memory: crate::memory::MemoryPolicy,
    /// `hooks:` (how many notify commands run at once).
    pub hooks: crate::hooks::HooksPolicy,
    /// `notices:` (squadd's messages to agents).
    pub notices: crate::notices::NoticePolicy,
    /// `runners:` (squadd starting agents; docs/runners.md).
    pub runners: crate::runners::RunnersPolicy,
    /// `notify:` (the lead told when "needs attention" grows).
    pub notify: crate::notify::NotifyPolicy,
    /// `cluster:` (docs/cluster.md): the NATS cluster joining the project's
    /// checkouts, or `None` for a single checkout.
    pub cluster: Option<crate::cluster::ClusterPolicy>,
}

/// `retention:` of the policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    /// Cron expression (validated).
    pub schedule: String,
    /// Completed sessions are archived this long after completion.
    pub archive_completed_after: Duration,
    /// Archives are deleted this long after archiving.
    pub delete_archived_after: Duration,
    /// Failed sessions are deleted this long after failing.
    pub delete_failed_after: Duration,
}

impl Retention {
    /// The parsed schedule.
    pub fn schedule(&self) -> Result<cron::Schedule, String> {
        parse_schedule(&self.schedule)
    }
}

/// Parses a cron expression (cron crate syntax, with a seconds field); a
/// 5-field crontab line is refused with the 6-field form to use instead.
pub fn parse_schedule(expr: &str) -> Result<cron::Schedule, String> {
    use std::str::FromStr;
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.len() == 5 {
        return Err(format!(
            "`{expr}` has 5 fields (crontab); this schedule has a seconds field first: write `0 {expr}`"
        ));
    }
    let schedule = cron::Schedule::from_str(expr).map_err(|e| {
        format!("`{expr}` is not a valid schedule ({e}); write e.g. `0 17 * * * *` (hourly at :17) or `@daily`")
    })?;
    if let Some(from) = gap_over_a_year(&schedule) {
        return Err(format!(
            "`{expr}` has no run within a year of {} (a date that never comes, such as 30 February, or one in only some years): retention would silently stop; write e.g. `0 17 * * * *` (hourly at :17) or `@daily`",
            from.format("%Y-%m-%d")
        ));
    }
    Ok(schedule)
}

/// The first of a fixed set of moments (every half year over eight years,
/// covering leap years) after which `schedule` does not fire within 366
/// days, if any. Fixed moments keep the check a pure function of the text:
/// a schedule that passes fires at least once in every year.
fn gap_over_a_year(schedule: &cron::Schedule) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::TimeZone;
    let year = chrono::Duration::days(366);
    (2024..2032)
        .flat_map(|y| [1, 7].map(|m| chrono::Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single()))
        .flatten()
        .find(|from| {
            schedule
                .after(from)
                .next()
                .is_none_or(|next| next - *from > year)
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    boundaries: RawBoundaries,
    locks: RawLocks,
    check: RawCheck,
    retention: RawRetention,
    messages: RawMessages,
    skills: RawSkills,
    memory: RawMemory,
    hooks: RawHooks,
    notices: crate::notices::RawNotices,
    #[serde(default)]
    runners: crate::runners::RawRunners,
    #[serde(default)]
    notify: crate::notify::RawNotify,
    #[serde(default)]
    cluster: Option<crate::cluster::RawCluster>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHooks {
    max_concurrent: serde_yaml::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    merge: bool,
    archive_older_than: String,
    archive_max_size: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSkills {
    prompt_budget_tokens: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMessages {
    deliver_within: RawWithin,
    low_max_wait: String,
    escalate_after: RawEscalate,
    notify: std::collections::BTreeMap<String, RawNotify>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWithin {
    critical: String,
    high: String,
    medium: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEscalate {
    critical: String,
    high: String,
    medium: String,
    low: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNotify {
    command: Vec<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    retries: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBoundaries {
    forbidden: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocks {
    default_ttl: String,
    max_ttl: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    unattributed: Unattributed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    schedule: String,
    archive_completed_after: String,
    delete_archived_after: String,
    delete_failed_after: String,
}

fn memory_policy(raw: &RawMemory) -> Result<crate::memory::MemoryPolicy, PolicyError> {
    let none = |t: &str| t.trim() == "none";
    let archive = if none(&raw.archive_older_than) {
        None
    } else {
        let older_than =
            parse_duration(&raw.archive_older_than).map_err(|message| PolicyError {
                field: "memory.archive_older_than".into(),
                message,
            })?;
        let max_size = if none(&raw.archive_max_size) {
            None
        } else {
            Some(
                crate::memory::parse_size(&raw.archive_max_size).map_err(|message| {
                    PolicyError {
                        field: "memory.archive_max_size".into(),
                        message,
                    }
                })?,
            )
        };
        Some(crate::memory::ArchiveRule {
            older_than,
            max_size,
        })
    };
    Ok(crate::memory::MemoryPolicy {
        merge: raw.merge,
        archive,
    })
}

/// Why a policy was refused; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy: {field}: {message}")]
pub struct PolicyError {
    /// Dotted field path, or `(file)`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

fn field_of(message: &str) -> String {
    // serde_yaml prefixes nested errors with the path: `locks.max_ttl: …`.
    message
        .split_once(": ")
        .map(|(p, _)| p)
        .filter(|p| !p.contains(' '))
        .unwrap_or("(file)")
        .to_string()
}

impl Policy {
    /// The lead agents the policy names (`runners.lead`, `notices.lead`),
    /// without repeats: with a human, the only writers of task assignments.
    pub fn leads(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for l in [&self.runners.lead, &self.notices.lead]
            .into_iter()
            .flatten()
        {
            if !out.contains(l) {
                out.push(l.clone());
            }
        }
        out
    }

    /// The shipped defaults: `policies/default.yaml` as a value, built
    /// without reading YAML (every squadctl command without a project policy,
    /// or with the commented-out one `squadctl init` writes, starts with it;
    /// parsing the embedded text and checking its schedule was a measurable
    /// part of a `guard` or `lock` start). The test
    /// `the_built_defaults_are_default_yaml` holds it to the file.
    pub fn defaults() -> Policy {
        Policy {
            forbidden: vec![
                ".env".into(),
                ".env.*".into(),
                ".git/**".into(),
                ".squad/policies.yaml".into(),
                ".squad/run/**".into(),
            ],
            lock_default_ttl: Duration::from_secs(15 * 60),
            lock_max_ttl: Duration::from_secs(24 * 3600),
            unattributed: Unattributed::Warn,
            skills: crate::skills::SkillsPolicy {
                prompt_budget_tokens: 2000,
            },
            memory: crate::memory::MemoryPolicy::default(),
            hooks: crate::hooks::HooksPolicy::default(),
            notices: crate::notices::NoticePolicy::default(),
            runners: crate::runners::RunnersPolicy::default(),
            notify: crate::notify::NotifyPolicy::default(),
            cluster: None,
            messages: crate::messages::MessagePolicy {
                deliver_within: [
                    Duration::ZERO,
                    Duration::from_secs(60),
                    Duration::from_secs(300),
                ],
                low_max_wait: Duration::from_secs(1800),
                escalate_after: [
                    Some(Duration::from_secs(120)),
                    Some(Duration::from_secs(600)),
                    Some(Duration::from_secs(1800)),
                    None,
                ],
                notify: std::collections::BTreeMap::new(),
            },
            retention: Retention {
                schedule: "0 17 * * * *".into(),
                archive_completed_after: Duration::from_secs(24 * 3600),
                delete_archived_after: Duration::from_secs(30 * 86_400),
                delete_failed_after: Duration::from_secs(7 * 86_400),
            },
        }
    }

    /// The defaults overridden by the text of a project's policies.yaml.
    pub fn parse(project: Option<&str>) -> Result<Policy, PolicyError> {
        match project {
            None => Ok(Self::defaults()),
            Some(text) => Self::merged(text),
        }
    }

    /// `policies/default.yaml` read as YAML (what [`Policy::defaults`]
    /// must equal).
    #[cfg(test)]
    fn default_yaml() -> Result<Policy, PolicyError> {
        let raw: Raw =
            squad_protocol::depth::from_str(DEFAULT_POLICY).map_err(|e| PolicyError {
                field: "(default.yaml)".into(),
                message: e.to_string(),
            })?;
        Self::from_raw(raw)
    }

    /// The defaults overridden by a project file, field by field.
    fn merged(text: &str) -> Result<Policy, PolicyError> {
        // A deep text is refused unparsed: "nesting deeper than 64
        // levels at line L column C (not parsed)".
        let over: Value = squad_protocol::depth::from_str(text).map_err(|e| PolicyError {
            field: "(file)".into(),
            message: e.to_string(),
        })?;
        let value: Value = match over {
            // Empty, or every line commented out (`squadctl init`'s file):
            // the defaults as they are.
            Value::Null => return Ok(Self::defaults()),
            Value::Mapping(_) => {
                let mut value: Value =
                    squad_protocol::depth::from_str(DEFAULT_POLICY).map_err(|e| PolicyError {
                        field: "(default.yaml)".into(),
                        message: e.to_string(),
                    })?;
                merge(&mut value, over);
                value
            }
            _ => {
                return Err(PolicyError {
                    field: "(file)".into(),
                    message: "policies.yaml must be a mapping".into(),
                });
            }
        };
        // Through text rather than `from_value`: errors then carry the path
        // of the offending field (`check.unattributed: unknown variant …`).
        let merged = serde_yaml::to_string(&value).map_err(|e| PolicyError {
            field: "(file)".into(),
            message: e.to_string(),
        })?;
        let raw: Raw = squad_protocol::depth::from_str(&merged).map_err(|e| {
            // Positions would point into the merged text, not the user's file.
            let message = e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_string();
            // The field is named once (`policy: locks.max_ttl: invalid
            // type…`), not again at the head of serde's message.
            let field = field_of(&message);
            let message = message
                .strip_prefix(&format!("{field}: "))
                .map_or_else(|| message.clone(), str::to_string);
            PolicyError { field, message }
        })?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: Raw) -> Result<Policy, PolicyError> {
        let ttl = |field: &str, text: &str| {
            parse_duration(text).map_err(|message| PolicyError {
                field: field.into(),
                message,
            })
        };
        parse_schedule(&raw.retention.schedule).map_err(|message| PolicyError {
            field: "retention.schedule".into(),
            message,
        })?;
        let retention = Retention {
            archive_completed_after: ttl(
                "retention.archive_completed_after",
                &raw.retention.archive_completed_after,
            )?,
            delete_archived_after: ttl(
                "retention.delete_archived_after",
                &raw.retention.delete_archived_after,
            )?,
            delete_failed_after: ttl(
                "retention.delete_failed_after",
                &raw.retention.delete_failed_after,
            )?,
            schedule: raw.retention.schedule,
        };
        let esc = |field: &str, text: &str| -> Result<Option<Duration>, PolicyError> {
            if text.trim() == "none" {
                Ok(None)
            } else {
                ttl(field, text).map(Some)
            }
        };
        let m = &raw.messages;
        let mut notify = std::collections::BTreeMap::new();
        for (agent, n) in &m.notify {
            let field = format!("messages.notify.{agent}");
            if agent != "*" && !squad_protocol::IdKind::Agent.matches(agent) {
                return Err(PolicyError {
                    field,
                    message: format!("`{agent}` is not an agent name (or `*`)"),
                });
            }
            if n.command.is_empty() || n.command[0].trim().is_empty() {
                return Err(PolicyError {
                    field: format!("{field}.command"),
                    message:
                        "an argv list with the program first, e.g. [\"notify-send\", \"{path}\"]"
                            .into(),
                });
            }
            notify.insert(
                agent.clone(),
                crate::messages::NotifyCommand {
                    command: n.command.clone(),
                    timeout: match &n.timeout {
                        Some(t) => ttl(&format!("{field}.timeout"), t)?,
                        None => Duration::from_secs(10),
                    },
                    retries: n.retries.unwrap_or(3),
                },
            );
        }
        let messages = crate::messages::MessagePolicy {
            deliver_within: [
                ttl(
                    "messages.deliver_within.critical",
                    &m.deliver_within.critical,
                )?,
                ttl("messages.deliver_within.high", &m.deliver_within.high)?,
                ttl("messages.deliver_within.medium", &m.deliver_within.medium)?,
            ],
            low_max_wait: ttl("messages.low_max_wait", &m.low_max_wait)?,
            escalate_after: [
                esc(
                    "messages.escalate_after.critical",
                    &m.escalate_after.critical,
                )?,
                esc("messages.escalate_after.high", &m.escalate_after.high)?,
                esc("messages.escalate_after.medium", &m.escalate_after.medium)?,
                esc("messages.escalate_after.low", &m.escalate_after.low)?,
            ],
            notify,
        };
        let policy = Policy {
            messages,
            retention,
            lock_default_ttl: ttl("locks.default_ttl", &raw.locks.default_ttl)?,
            lock_max_ttl: ttl("locks.max_ttl", &raw.locks.max_ttl)?,
            forbidden: raw.boundaries.forbidden,
            unattributed: raw.check.unattributed,
            skills: crate::skills::SkillsPolicy {
                prompt_budget_tokens: raw.skills.prompt_budget_tokens,
            },
            memory: memory_policy(&raw.memory)?,
            hooks: crate::hooks::HooksPolicy {
                max_concurrent: crate::hooks::parse_max_concurrent(
                    &match &raw.hooks.max_concurrent {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        other => format!("{other:?}"),
                    },
                )
                .map_err(|message| PolicyError {
                    field: "hooks.max_concurrent".into(),
                    message,
                })?,
            },
            notices: raw
                .notices
                .check()
                .map_err(|(field, message)| PolicyError { field, message })?,
            runners: crate::runners::runners_policy(raw.runners)?,
            notify: crate::notify::notify_policy(raw.notify)
                .map_err(|(field, message)| PolicyError { field, message })?,
            cluster: raw
                .cluster
                .map(crate::cluster::cluster_policy)
                .transpose()?,
        };
        for (i, g) in policy.forbidden.iter().enumerate() {
            crate::boundary::check_glob(g).map_err(|message| PolicyError {
                field: format!("boundaries.forbidden[{i}]"),
                message,
            })?;
        }
        if policy.lock_default_ttl.is_zero() || policy.lock_default_ttl > policy.lock_max_ttl {
            return Err(PolicyError {
                field: "locks.default_ttl".into(),
                message: "must be positive and at most locks.max_ttl".into(),
            });
        }
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are built, not read: they must be the shipped file
    /// (seen failing with a changed default in either place).
    #[test]
    fn the_built_defaults_are_default_yaml() {
        assert_eq!(Policy::defaults(), Policy::default_yaml().unwrap());
        // A project file with every line commented out is the defaults too.
        let commented: String = DEFAULT_POLICY.lines().map(|l| format!("# {l}\n")).collect();
        assert_eq!(Policy::parse(Some(&commented)).unwrap(), Policy::defaults());
    }

    #[test]
    fn defaults_parse() {
        let p = Policy::parse(None).unwrap();
        assert_eq!(p, Policy::defaults());
        assert!(p.forbidden.contains(&".git/**".to_string()));
        assert_eq!(p.lock_default_ttl, Duration::from_secs(900));
        assert_eq!(p.unattributed, Unattributed::Warn);
    }

    #[test]
    fn overrides_merge_field_by_field() {
        let p = Policy::parse(Some(
            "check:\n  unattributed: error\nlocks:\n  default_ttl: 5m\n",
        ))
        .unwrap();
        assert_eq!(p.unattributed, Unattributed::Error);
        assert_eq!(p.lock_default_ttl, Duration::from_secs(300));
        assert_eq!(p.lock_max_ttl, Duration::from_secs(86_400), "kept");
        assert_eq!(p.forbidden.len(), 5, "kept");
        let p = Policy::parse(Some("boundaries:\n  forbidden: [secrets/**]\n")).unwrap();
        assert_eq!(p.forbidden, ["secrets/**"], "lists replace");
        assert_eq!(Policy::parse(Some("")).unwrap(), Policy::defaults());
    }

    #[test]
    fn schedules() {
        assert!(parse_schedule("@hourly").is_ok());
        assert!(parse_schedule("0 0 3 * * *").is_ok());
        let e = parse_schedule("0 3 * * *").unwrap_err();
        assert!(e.contains("write `0 0 3 * * *`"), "{e}");
        for never in [
            "0 0 0 30 2 *",
            "0 0 0 31 4 *",
            "0 0 0 29 2 *",
            "0 0 0 1 1 * 2020",
        ] {
            let e = parse_schedule(never).unwrap_err();
            assert!(e.contains("has no run within a year"), "{never}: {e}");
        }
        assert!(
            parse_schedule("0 0 0 31 * *").is_ok(),
            "some months have a 31st"
        );
        assert!(parse_schedule("0 0 0 1 1 *").is_ok(), "yearly");
        assert_eq!(
            Policy::defaults().retention.archive_completed_after,
            Duration::from_secs(86_400)
        );
    }

    #[test]
    fn bad_policies_name_the_field() {
        let cases: &[(&str, &str)] = &[
            ("locks:\n  default_ttl: soon\n", "locks.default_ttl"),
            ("check:\n  unattributed: maybe\n", "check.unattributed"),
            (
                "boundaries:\n  forbidden: ['src/{a']\n",
                "boundaries.forbidden[0]",
            ),
            ("lcoks: {}\n", "(file)"),
            ("locks:\n  max_ttl: [1]\n", "locks.max_ttl"),
            ("locks:\n  default_ttl: 2d\n", "locks.default_ttl"),
            ("[1, 2]", "(file)"),
            (&"x: [".repeat(50_000), "(file)"),
            (
                "retention:\n  schedule: '0 3 * * *'\n",
                "retention.schedule",
            ),
            (
                "retention:\n  schedule: 'every day'\n",
                "retention.schedule",
            ),
            (
                "retention:\n  schedule: '0 0 0 30 2 *'\n",
                "retention.schedule",
            ),
            ("hooks:\n  max_concurrent: 0\n", "hooks.max_concurrent"),
            (
                "retention:\n  delete_failed_after: a week\n",
                "retention.delete_failed_after",
            ),
            (
                "messages:\n  deliver_within:\n    medium: 100000000d\n",
                "messages.deliver_within.medium",
            ),
            (
                "messages:\n  escalate_after:\n    high: 100000000d\n",
                "messages.escalate_after.high",
            ),
            ("locks:\n  max_ttl: 18446744073709551615\n", "locks.max_ttl"),
        ];
        for (text, field) in cases {
            let e = Policy::parse(Some(text)).unwrap_err();
            assert_eq!(&e.field, field, "{text}: {e}");
            assert_eq!(
                e.to_string().matches(field).count(),
                1,
                "the field is named once: {e}"
            );
        }
    }
}

/// One problem of a policies.yaml, with the position of the key it is
/// about (1-based line and column) when it can be found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFinding {
    /// The error.
    pub error: PolicyError,
    /// Where in the file.
    pub at: Option<(usize, usize)>,
}

/// Every problem of a policies.yaml text, not only the first: each leaf
/// key is tried on its own over the defaults (so one bad value does not
/// hide the next), then the whole file for the problems only a combination
/// shows. Empty when the file loads.
pub fn check(text: &str) -> Vec<PolicyFinding> {
    use squad_protocol::locate::{PathSeg, Target, locate};
    let whole = match Policy::parse(Some(text)) {
        Ok(_) => return Vec::new(),
        Err(e) => e,
    };
    let Ok(Value::Mapping(user)) = squad_protocol::depth::from_str::<Value>(text) else {
        // Not YAML, not a mapping, too deep: one finding, the parser's.
        return vec![PolicyFinding {
            error: whole,
            at: None,
        }];
    };
    fn leaves(map: &serde_yaml::Mapping, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (k, v) in map {
            let key = match k {
                Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            path.push(key);
            match v {
                // `cluster:` has required keys: it loads as one section,
                // its finding placed at the field the error names.
                Value::Mapping(_) if path.len() == 1 && path[0] == "cluster" => {
                    out.push(path.clone())
                }
                Value::Mapping(m) if !m.is_empty() => leaves(m, path, out),
                _ => out.push(path.clone()),
            }
            path.pop();
        }
    }
    fn only(user: &Value, path: &[String]) -> Value {
        let mut node = user;
        for k in path {
            node = node.get(k.as_str()).unwrap_or(&Value::Null);
        }
        path.iter().rev().fold(node.clone(), |inner, k| {
            let mut m = serde_yaml::Mapping::new();
            m.insert(Value::String(k.clone()), inner);
            Value::Mapping(m)
        })
    }
    let place = |path: &[String]| {
        let segs: Vec<PathSeg> = path.iter().map(|k| PathSeg::Key(k.clone())).collect();
        locate(text, &segs, Target::Key)
    };
    // `cluster.nats[0]` → the deepest of its prefixes found in the text.
    let place_field = |field: &str| {
        let mut segs = Vec::new();
        for part in field.split('.') {
            let (key, index) = match part.split_once('[') {
                Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
                None => (part, None),
            };
            segs.push(PathSeg::Key(key.to_string()));
            if let Some(i) = index {
                segs.push(PathSeg::Index(i));
            }
        }
        (1..=segs.len())
            .rev()
            .find_map(|n| locate(text, &segs[..n], Target::Key))
    };
    let mut paths = Vec::new();
    leaves(&user, &mut Vec::new(), &mut paths);
    let mut out: Vec<PolicyFinding> = Vec::new();
    let user = Value::Mapping(user);
    for path in paths {
        let one = serde_yaml::to_string(&only(&user, &path)).unwrap_or_default();
        if let Err(error) = Policy::parse(Some(&one))
            && !out.iter().any(|f| f.error == error)
        {
            let at = if path.first().is_some_and(|k| k == "cluster") {
                place_field(&error.field)
            } else {
                place(&path)
            };
            out.push(PolicyFinding { at, error });
        }
    }
    // Each key loads alone: the fault is in their combination.
    if out.is_empty() {
        let path: Vec<String> = whole.field.split('.').map(str::to_string).collect();
        out.push(PolicyFinding {
            at: place(&path),
            error: whole,
        });
    }
    out
}

#[cfg(test)]
mod check_tests {
    use super::check;

    #[test]
    fn every_bad_key_is_a_finding_at_its_line() {
        let text = "locks:\n  default_ttl: forever\nretention:\n  schedule: never\nbogus: 1\n";
        let f = check(text);
        let fields: Vec<(&str, Option<(usize, usize)>)> =
            f.iter().map(|f| (f.error.field.as_str(), f.at)).collect();
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(fields[0], ("locks.default_ttl", Some((2, 3))), "{f:?}");
        assert_eq!(fields[1].1, Some((4, 3)), "{f:?}");
        assert_eq!(fields[2].1, Some((5, 1)), "{f:?}");
    }

    #[test]
    fn a_valid_or_absent_policy_has_none_and_broken_yaml_has_one() {
        assert!(check("").is_empty());
        assert!(check("locks:\n  default_ttl: 10m\n").is_empty());
        assert_eq!(check("locks: [\n").len(), 1);
    }
}
