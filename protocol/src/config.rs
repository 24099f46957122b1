//! `.squad/config.json`: the runtime configuration (models, the session
//! pool, MCP servers, model prices) in the shape of seed 003, with the keys real Squad
//! projects already keep there (`version`, `defaultModel`,
//! `agentModelOverrides`) read where they mean the same. Unknown keys are
//! kept (a warning), so a tool that writes the file back loses nothing.
//!
//! Diagnostics carry the line and column of the key (or of the JSON syntax
//! error) in the file; docs/runners.md lists the `config-…` rules.

use crate::diagnostic::{Diagnostic, Location, Rule};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;

mod prices;
pub use prices::Price;

/// The file's path under the team directory.
pub const CONFIG_FILE: &str = "config.json";

/// Top-level keys the Squad CLI (`@bradygaster/squad-cli` 0.10.0 and its
/// SDK) writes in the same file for itself: read by neither squadctl nor
/// squadd, kept as written, never reported as unknown (docs/runners.md
/// says whose each key is). `version`, `defaultModel` and
/// `agentModelOverrides` are the CLI's too, and squad-supervisor reads them.
pub const SQUAD_CLI_KEYS: &[&str] = &[
    "teamRoot",
    "projectKey",
    "stateLocation",
    "stateBackend",
    "economyMode",
    "defaultReasoningEffort",
    "agentReasoningEffortOverrides",
    "defaultContextTier",
    "memory",
    "consult",
    "sourceSquad",
    "extractionDisabled",
    "watch",
];

/// Top-level keys squad-supervisor reads (a key one edit from one of them,
/// or from a key of [`SQUAD_CLI_KEYS`], is taken for a typo of it).
const READ_KEYS: &[&str] = &[
    "version",
    "defaultModel",
    "agentModelOverrides",
    "models",
    "sessions",
    "mcp",
];

/// `models`. None is set unless config.json sets it: an agent CLI then
/// runs with its own default model, which its maintainers keep current (a
/// model name built in here would retire under every installed squadd;
/// docs/runners.md, "Models").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Models {
    /// Model of agents without an override (`None`: the CLI's own default).
    pub default: Option<String>,
    /// The cheaper model.
    #[serde(rename = "costOptimized")]
    pub cost_optimized: Option<String>,
    /// The stronger model.
    pub premium: Option<String>,
    /// Model by agent name.
    #[serde(rename = "roleOverrides")]
    pub role_overrides: BTreeMap<String, String>,
}

/// `sessions`: the agent pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sessions {
    /// A run's time limit when neither runner nor task sets one.
    #[serde(rename = "defaultTimeoutMs")]
    pub default_timeout_ms: u64,
    /// Runs at once.
    #[serde(rename = "maxConcurrent")]
    pub max_concurrent: u64,
    /// Passed through to runners that support it.
    #[serde(rename = "infiniteSessions")]
    pub infinite_sessions: bool,
    /// Passed through to runners that support it (0..=1).
    #[serde(rename = "compactionThreshold")]
    pub compaction_threshold: f64,
}

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServer {
    /// `local`, `stdio`, `http` or `sse`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Program of a local server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// URL of a remote server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Tools it offers.
    pub tools: Vec<String>,
}

/// The effective configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeConfig {
    /// `version` as written (real projects write 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Models.
    pub models: Models,
    /// The pool.
    pub sessions: Sessions,
    /// MCP servers by name.
    pub mcp: BTreeMap<String, McpServer>,
    /// Model prices by model id (`prices`; none built in).
    pub prices: BTreeMap<String, Price>,
    /// Where each effective value came from: `default`, or the key in the
    /// file (`config.json: defaultModel`), by dotted field.
    #[serde(skip)]
    pub provenance: BTreeMap<String, String>,
    /// The file as read (unknown keys included), for writing it back.
    #[serde(skip)]
    pub raw: Map<String, Value>,
}

/// `sessions.defaultTimeoutMs` when config.json does not set it: one hour,
/// the time limit of a run whose runner and task set none.
pub const DEFAULT_TIMEOUT_MS: u64 = 3_600_000;

impl Default for RuntimeConfig {
    fn default() -> Self {
        let mut c = RuntimeConfig {
            version: None,
            models: Models {
                default: None,
                cost_optimized: None,
                premium: None,
                role_overrides: BTreeMap::new(),
            },
            sessions: Sessions {
                // An hour, not seed 003's five minutes: a real LLM agent on
                // a multi-file task runs 10-45 minutes, and a run killed at
                // its limit loses its work (docs/runners.md, "Time limits").
                default_timeout_ms: DEFAULT_TIMEOUT_MS,
                max_concurrent: 8,
                infinite_sessions: true,
                compaction_threshold: 0.8,
            },
            mcp: BTreeMap::new(),
            prices: BTreeMap::new(),
            provenance: BTreeMap::new(),
            raw: Map::new(),
        };
        for f in FIELDS {
            c.provenance.insert((*f).into(), "default".into());
        }
        c
    }
}

/// The effective fields `config show` reports, dotted.
pub const FIELDS: &[&str] = &[
    "models.default",
    "models.costOptimized",
    "models.premium",
    "models.roleOverrides",
    "sessions.defaultTimeoutMs",
    "sessions.maxConcurrent",
    "sessions.infiniteSessions",
    "sessions.compactionThreshold",
    "mcp",
    "prices",
];

impl RuntimeConfig {
    /// The model of `agent`: its override, else the default; `None` when
    /// config.json names neither (the agent CLI's own default is used).
    pub fn model_for(&self, agent: &str) -> Option<&str> {
        self.models
            .role_overrides
            .get(agent)
            .or(self.models.default.as_ref())
            .map(String::as_str)
    }

    /// The effective values as JSON (seed 003's shape).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Where the quoted key `path[last]` is, found by following the keys in
/// order through the text (good enough for diagnostics: a key is named after
/// its parents).
fn locate(text: &str, path: &[&str]) -> Option<Location> {
    let mut from = 0;
    let mut at = None;
    for key in path {
        let needle = format!("\"{key}\"");
        let i = text[from..].find(&needle)? + from;
        at = Some(i);
        from = i + needle.len();
    }
    at.map(|i| offset_location(text, i))
}

fn offset_location(text: &str, offset: usize) -> Location {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Location {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: u32::try_from(column).unwrap_or(u32::MAX),
    }
}

struct Ctx<'a> {
    path: &'a Path,
    text: &'a str,
    diags: Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn push(&mut self, rule: Rule, at: &[&str], message: String, hint: &str) {
        let location = locate(self.text, at);
        self.diags
            .push(Diagnostic::new(self.path, rule, message, hint).at(location));
    }

    /// A key this version does not read, at `at`: one edit from a key of
    /// `known` that `object` lacks, a typo of it (`config-misspelled-key`,
    /// an error: what it holds would count for nothing); else kept as
    /// written (`config-unknown-key`, a warning, with `hint`).
    fn unknown_key(
        &mut self,
        at: &[&str],
        known: &[&str],
        object: &serde_json::Map<String, Value>,
        hint: &str,
    ) {
        let field = at.join(".");
        let key = at.last().copied().unwrap_or_default();
        let lacking = known.iter().copied().filter(|k| !object.contains_key(*k));
        match crate::suggest::closest(key, lacking, 1) {
            Some(meant) => self.push(
                Rule::ConfigMisspelledKey,
                at,
                format!("`{field}` is not a key squad-supervisor reads; did you mean `{meant}`?"),
                &format!("rename it to `{meant}`"),
            ),
            None => self.push(
                Rule::ConfigUnknownKey,
                at,
                format!("`{field}` is not a key squad-supervisor reads (kept as written)"),
                hint,
            ),
        }
    }

    fn bad_type(&mut self, at: &[&str], want: &str, got: &Value) {
        let field = at.join(".");
        self.push(
            Rule::ConfigBadType,
            at,
            format!("`{field}` must be {want}, not {}", kind_of(got)),
            "see `squadctl schema config` for the shape of config.json",
        );
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses config.json text: the effective configuration (defaults where
/// the file says nothing or something invalid) and the findings. Callers
/// that hot-reload keep their previous configuration when any finding is
/// an error.
pub fn parse(path: &Path, text: &str) -> (RuntimeConfig, Vec<Diagnostic>) {
    let mut c = RuntimeConfig::default();
    let mut cx = Ctx {
        path,
        text,
        diags: Vec::new(),
    };
    // An empty file (real projects have them) is the defaults.
    if text.trim().is_empty() {
        return (c, cx.diags);
    }
    if let Some((line, column)) = crate::depth::too_deep(text) {
        cx.diags.push(
            Diagnostic::new(
                path,
                Rule::ConfigInvalidJson,
                format!(
                    "nesting deeper than {} levels (not parsed)",
                    crate::depth::MAX_DEPTH
                ),
                "config.json is a shallow object; remove the nesting",
            )
            .at(Some(Location {
                line: u32::try_from(line).unwrap_or(u32::MAX),
                column: u32::try_from(column).unwrap_or(u32::MAX),
            })),
        );
        return (c, cx.diags);
    }
    // Strict: a key given twice is refused (JSON parsers disagree on which
    // one wins, so squadd and the Squad CLI would read different values).
    // A UTF-8 byte order mark (Windows editors write one) is not JSON's but
    // harmless.
    let json = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = match crate::team::json::parse_strict(json.as_bytes()) {
        Ok(v) => v,
        Err(e) => {
            let hint = if e.message.starts_with("duplicate key") {
                "keep one of the two (the JSON standard does not say which one counts)"
            } else {
                "fix the syntax (JSON has no comments and no trailing commas)"
            };
            cx.diags.push(
                Diagnostic::new(
                    path,
                    Rule::ConfigInvalidJson,
                    format!("not valid JSON: {}", e.message),
                    hint,
                )
                .at(Some(Location {
                    line: e.line,
                    column: e.column.max(1),
                })),
            );
            return (c, cx.diags);
        }
    };
    let Value::Object(top) = value else {
        cx.bad_type(&[], "an object", &value);
        return (c, cx.diags);
    };
    let file = |key: &str| format!("config.json: {key}");
    for (key, v) in &top {
        match key.as_str() {
            "version" => {
                if let Some(n) = whole_number(&mut cx, &["version"], v, (0, u64::MAX), "e.g. 1") {
                    c.version = Some(n);
                }
            }
            "defaultModel" => match v.as_str() {
                Some(s) if top.get("models").is_none_or(|m| m.get("default").is_none()) => {
                    c.models.default = Some(s.into());
                    c.provenance
                        .insert("models.default".into(), file("defaultModel"));
                }
                Some(_) => {}
                None => cx.bad_type(&["defaultModel"], "a string", v),
            },
            "agentModelOverrides" => match v.as_object() {
                Some(m) => {
                    for (agent, model) in m {
                        match model.as_str() {
                            Some(s) => {
                                c.models
                                    .role_overrides
                                    .entry(agent.clone())
                                    .or_insert_with(|| s.into());
                            }
                            None => cx.bad_type(&["agentModelOverrides", agent], "a string", model),
                        }
                    }
                    c.provenance
                        .insert("models.roleOverrides".into(), file("agentModelOverrides"));
                }
                None => cx.bad_type(&["agentModelOverrides"], "an object", v),
            },
            "models" => models(&mut cx, &mut c, v),
            "sessions" => sessions(&mut cx, &mut c, v),
            "mcp" => mcp(&mut cx, &mut c, v),
            "prices" => prices::read(&mut cx, &mut c, v),
            k if SQUAD_CLI_KEYS.contains(&k) => {}
            _ => {
                let known: Vec<&str> = READ_KEYS.iter().chain(SQUAD_CLI_KEYS).copied().collect();
                cx.unknown_key(
                    &[key],
                    &known,
                    &top,
                    "fine if another tool reads it; otherwise check the spelling",
                )
            }
        }
    }
    c.raw = top;
    (c, cx.diags)
}

/// A whole number of at least `min`, or a diagnostic that says what the
/// number must be: `-1` is below the minimum, `1e3` or `2.0` is written
/// with an exponent or a fraction (JSON numbers have no integer type, so
/// the file must spell it with digits only).
/// The longest `sessions.defaultTimeoutMs` accepted: ten years, the bound of
/// every duration in policy and task files, so a deadline computed from it
/// can never overflow the clock.
pub const MAX_TIMEOUT_MS: u64 = 3650 * 86_400 * 1000;

/// The most runs `sessions.maxConcurrent` may allow at once: far above any
/// machine's capacity, low enough that counting up to it cannot overflow.
pub const MAX_CONCURRENT: u64 = 100_000;

fn whole_number(
    cx: &mut Ctx<'_>,
    at: &[&str],
    v: &Value,
    (min, max): (u64, u64),
    example: &str,
) -> Option<u64> {
    let field = at.join(".");
    let Value::Number(n) = v else {
        cx.bad_type(at, "a whole number", v);
        return None;
    };
    let problem = if let Some(u) = n.as_u64() {
        if u > max {
            cx.push(
                Rule::ConfigBadValue,
                at,
                format!("`{field}` is {u}, above the maximum of {max}"),
                example,
            );
            return None;
        }
        if u >= min {
            return Some(u);
        }
        format!("`{field}` is {u}")
    } else if let Some(i) = n.as_i64() {
        format!("`{field}` is {i}, below zero")
    } else {
        format!("`{field}` is {n}, written with a fraction or an exponent (like 1e3)")
    };
    cx.push(
        Rule::ConfigBadValue,
        at,
        format!("{problem}: it must be a whole number of at least {min}, written in digits only"),
        example,
    );
    None
}

fn string_field(cx: &mut Ctx<'_>, at: &[&str], v: &Value, slot: &mut Option<String>) -> bool {
    match v.as_str() {
        Some(s) if !s.trim().is_empty() => {
            *slot = Some(s.into());
            true
        }
        Some(_) => {
            cx.push(
                Rule::ConfigBadValue,
                at,
                format!("`{}` is empty", at.join(".")),
                "name a model, or remove the key for the agent CLI's own default",
            );
            false
        }
        None => {
            cx.bad_type(at, "a string", v);
            false
        }
    }
}

fn models(cx: &mut Ctx<'_>, c: &mut RuntimeConfig, v: &Value) {
    let Some(m) = v.as_object() else {
        return cx.bad_type(&["models"], "an object", v);
    };
    for (key, v) in m {
        let at = ["models", key.as_str()];
        let ok = match key.as_str() {
            "default" => string_field(cx, &at, v, &mut c.models.default),
            "costOptimized" => string_field(cx, &at, v, &mut c.models.cost_optimized),
            "premium" => string_field(cx, &at, v, &mut c.models.premium),
            "roleOverrides" => match v.as_object() {
                Some(o) => {
                    for (agent, model) in o {
                        match model.as_str() {
                            Some(s) => {
                                c.models.role_overrides.insert(agent.clone(), s.into());
                            }
                            None => {
                                cx.bad_type(&["models", "roleOverrides", agent], "a string", model)
                            }
                        }
                    }
                    true
                }
                None => {
                    cx.bad_type(&at, "an object", v);
                    false
                }
            },
            _ => {
                cx.unknown_key(
                    &at,
                    &["default", "costOptimized", "premium", "roleOverrides"],
                    m,
                    "known: default, costOptimized, premium, roleOverrides",
                );
                false
            }
        };
        if ok {
            c.provenance.insert(
                format!("models.{key}"),
                format!("config.json: models.{key}"),
            );
        }
    }
}

fn sessions(cx: &mut Ctx<'_>, c: &mut RuntimeConfig, v: &Value) {
    let Some(m) = v.as_object() else {
        return cx.bad_type(&["sessions"], "an object", v);
    };
    for (key, v) in m {
        let at = ["sessions", key.as_str()];
        let ok = match key.as_str() {
            "defaultTimeoutMs" => match v.as_u64() {
                Some(0) => {
                    cx.push(
                        Rule::ConfigBadValue,
                        &at,
                        "`sessions.defaultTimeoutMs` is 0: every run would be killed at once"
                            .into(),
                        "give milliseconds, e.g. 300000 for five minutes",
                    );
                    false
                }
                _ => {
                    match whole_number(
                        cx,
                        &at,
                        v,
                        (1, MAX_TIMEOUT_MS),
                        "milliseconds (at most ten years), e.g. 300000 for five minutes",
                    ) {
                        Some(n) => {
                            c.sessions.default_timeout_ms = n;
                            true
                        }
                        None => false,
                    }
                }
            },
            "maxConcurrent" => match v.as_u64() {
                Some(0) => {
                    cx.push(
                        Rule::ConfigBadValue,
                        &at,
                        "`sessions.maxConcurrent` is 0: no agent could ever start".into(),
                        "give at least 1 (turn dispatch off in policies.yaml instead)",
                    );
                    false
                }
                _ => match whole_number(
                    cx,
                    &at,
                    v,
                    (1, MAX_CONCURRENT),
                    "runs at once (at most 100000), e.g. 8",
                ) {
                    Some(n) => {
                        c.sessions.max_concurrent = n;
                        true
                    }
                    None => false,
                },
            },
            "infiniteSessions" => match v.as_bool() {
                Some(b) => {
                    c.sessions.infinite_sessions = b;
                    true
                }
                None => {
                    cx.bad_type(&at, "a boolean", v);
                    false
                }
            },
            "compactionThreshold" => match v.as_f64() {
                Some(f) if (0.0..=1.0).contains(&f) => {
                    c.sessions.compaction_threshold = f;
                    true
                }
                Some(f) => {
                    cx.push(
                        Rule::ConfigBadValue,
                        &at,
                        format!("`sessions.compactionThreshold` is {f}, outside 0..1"),
                        "a fraction of the context window, e.g. 0.8",
                    );
                    false
                }
                None => {
                    cx.bad_type(&at, "a number", v);
                    false
                }
            },
            _ => {
                cx.unknown_key(
                    &at,
                    &[
                        "defaultTimeoutMs",
                        "maxConcurrent",
                        "infiniteSessions",
                        "compactionThreshold",
                    ],
                    m,
                    "known: defaultTimeoutMs, maxConcurrent, infiniteSessions, compactionThreshold",
                );
                false
            }
        };
        if ok {
            c.provenance.insert(
                format!("sessions.{key}"),
                format!("config.json: sessions.{key}"),
            );
        }
    }
}

fn strings(cx: &mut Ctx<'_>, at: &[&str], v: &Value) -> Vec<String> {
    match v.as_array() {
        Some(a) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect(),
        _ => {
            cx.bad_type(at, "an array of strings", v);
            Vec::new()
        }
    }
}

fn mcp(cx: &mut Ctx<'_>, c: &mut RuntimeConfig, v: &Value) {
    let Some(m) = v.as_object() else {
        return cx.bad_type(&["mcp"], "an object", v);
    };
    for (name, s) in m {
        let Some(o) = s.as_object() else {
            cx.bad_type(&["mcp", name], "an object", s);
            continue;
        };
        let mut server = McpServer {
            kind: "local".into(),
            command: None,
            args: Vec::new(),
            url: None,
            tools: Vec::new(),
        };
        for (key, v) in o {
            let at = ["mcp", name.as_str(), key.as_str()];
            match key.as_str() {
                "type" => match v.as_str() {
                    Some(t @ ("local" | "stdio" | "http" | "sse")) => server.kind = t.into(),
                    _ => cx.push(
                        Rule::ConfigBadValue,
                        &at,
                        format!("`mcp.{name}.type` is {v}"),
                        "one of local, stdio, http, sse",
                    ),
                },
                "command" => match v.as_str() {
                    Some(s) => server.command = Some(s.into()),
                    None => cx.bad_type(&at, "a string", v),
                },
                "url" => match v.as_str() {
                    Some(s) => server.url = Some(s.into()),
                    None => cx.bad_type(&at, "a string", v),
                },
                "args" => server.args = strings(cx, &at, v),
                "tools" => server.tools = strings(cx, &at, v),
                // env, headers, timeout: the seed's adapter passes them on.
                "env" | "headers" | "timeout" => {}
                _ => cx.unknown_key(
                    &at,
                    &[
                        "type", "command", "args", "url", "tools", "env", "headers", "timeout",
                    ],
                    o,
                    "known: type, command, args, url, tools, env, headers, timeout",
                ),
            }
        }
        let remote = matches!(server.kind.as_str(), "http" | "sse");
        if remote && server.url.is_none() {
            cx.push(
                Rule::ConfigBadValue,
                &["mcp", name],
                format!("`mcp.{name}` is a {} server without a `url`", server.kind),
                "add \"url\": \"https://…\"",
            );
        } else if !remote && server.command.is_none() {
            cx.push(
                Rule::ConfigBadValue,
                &["mcp", name],
                format!("`mcp.{name}` is a local server without a `command`"),
                "add \"command\": \"program\" (and \"args\")",
            );
        }
        c.mcp.insert(name.clone(), server);
    }
    c.provenance.insert("mcp".into(), "config.json: mcp".into());
}

/// The JSON Schema (draft-07) of config.json.
pub fn schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": ".squad/config.json",
        "description": "Squad runtime configuration: models, the agent pool, MCP servers (docs/runners.md).",
        "type": "object",
        "properties": {
            "version": {"type": "integer", "minimum": 0},
            "defaultModel": {"type": "string", "description": "Same as models.default (models.default wins)."},
            "agentModelOverrides": {"type": "object", "additionalProperties": {"type": "string"}},
            "models": {
                "type": "object",
                "properties": {
                    "default": {"type": "string", "minLength": 1},
                    "costOptimized": {"type": "string", "minLength": 1},
                    "premium": {"type": "string", "minLength": 1},
                    "roleOverrides": {"type": "object", "additionalProperties": {"type": "string"}}
                }
            },
            "sessions": {
                "type": "object",
                "properties": {
                    "defaultTimeoutMs": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS},
                    "maxConcurrent": {"type": "integer", "minimum": 1, "maximum": MAX_CONCURRENT},
                    "infiniteSessions": {"type": "boolean"},
                    "compactionThreshold": {"type": "number", "minimum": 0, "maximum": 1}
                }
            },
            "mcp": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["local", "stdio", "http", "sse"]},
                        "command": {"type": "string"},
                        "args": strings,
                        "url": {"type": "string"},
                        "tools": strings,
                        "env": {"type": "object", "additionalProperties": {"type": "string"}},
                        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                        "timeout": {"type": "number"}
                    }
                }
            },
            "prices": prices::schema()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> (RuntimeConfig, Vec<Diagnostic>) {
        parse(Path::new(".squad/config.json"), text)
    }

    #[test]
    fn defaults_are_the_seeds() {
        let (c, d) = p("");
        assert!(d.is_empty());
        assert_eq!(c.sessions.max_concurrent, 8);
        // The one departure from the seed: an hour, not five minutes.
        assert_eq!(c.sessions.default_timeout_ms, 3_600_000);
        // No model is built in: the agent CLI's own default is used.
        assert_eq!(c.models.default, None);
        assert_eq!(c.model_for("backend"), None);
        assert_eq!(c.provenance["sessions.maxConcurrent"], "default");
    }

    #[test]
    fn the_real_squad_keys_are_read_where_they_mean_the_same() {
        let (c, d) = p(
            "{\n  \"version\": 1,\n  \"defaultModel\": \"claude-sonnet-4.6\",\n  \"agentModelOverrides\": {\"fido\": \"gpt-5\"}\n}\n",
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.version, Some(1));
        assert_eq!(c.models.default.as_deref(), Some("claude-sonnet-4.6"));
        assert_eq!(c.model_for("fido"), Some("gpt-5"));
        assert_eq!(c.model_for("flight"), Some("claude-sonnet-4.6"));
        assert_eq!(c.provenance["models.default"], "config.json: defaultModel");
        // models.default wins over defaultModel.
        let (c, _) = p(r#"{"defaultModel": "a", "models": {"default": "b"}}"#);
        assert_eq!(c.models.default.as_deref(), Some("b"));
        assert_eq!(
            c.provenance["models.default"],
            "config.json: models.default"
        );
    }

    #[test]
    fn the_seed_shape_is_read() {
        let (c, d) = p(
            r#"{"models": {"premium": "opus"}, "sessions": {"maxConcurrent": 3, "defaultTimeoutMs": 1000},
            "mcp": {"gh": {"type": "local", "command": "gh-mcp", "args": ["--x"], "tools": ["issues"]}}}"#,
        );
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.sessions.max_concurrent, 3);
        assert_eq!(c.sessions.default_timeout_ms, 1000);
        assert_eq!(c.models.premium.as_deref(), Some("opus"));
        assert_eq!(c.mcp["gh"].tools, ["issues"]);
    }

    #[test]
    fn bad_values_have_line_column_rule_and_hint() {
        let text =
            "{\n  \"sessions\": {\n    \"maxConcurrent\": \"four\"\n  },\n  \"flavour\": {}\n}\n";
        let (c, d) = p(text);
        assert_eq!(c.sessions.max_concurrent, 8, "the default stays");
        let bad = d.iter().find(|d| d.rule == Rule::ConfigBadType).unwrap();
        assert_eq!(bad.location, Some(Location { line: 3, column: 5 }));
        assert!(
            bad.message.contains("sessions.maxConcurrent"),
            "{}",
            bad.message
        );
        assert!(!bad.hint.is_empty());
        let unknown = d.iter().find(|d| d.rule == Rule::ConfigUnknownKey).unwrap();
        assert!(!unknown.is_error());
        assert_eq!(unknown.location, Some(Location { line: 5, column: 3 }));
        let (_, d) = p("{\"sessions\": {\"maxConcurrent\": 0}}");
        assert_eq!(d[0].rule, Rule::ConfigBadValue);
        let (_, d) = p("{\n  \"version\": 1,\n}");
        assert_eq!(d[0].rule, Rule::ConfigInvalidJson);
        assert_eq!(d[0].location.unwrap().line, 3);
        let (_, d) = p("[1]");
        assert_eq!(d[0].rule, Rule::ConfigBadType);
        let (_, d) = p(r#"{"mcp": {"x": {"type": "http"}}}"#);
        assert_eq!(d[0].rule, Rule::ConfigBadValue);
    }

    #[test]
    fn a_key_one_edit_from_a_known_one_is_a_typo_naming_it() {
        let (c, d) = p(r#"{"modles": {"default": "x"}, "sessions": {"maxConcurent": 3}}"#);
        let typos: Vec<&Diagnostic> = d
            .iter()
            .filter(|d| d.rule == Rule::ConfigMisspelledKey)
            .collect();
        assert_eq!(typos.len(), 2, "{d:?}");
        assert!(typos.iter().all(|d| d.is_error()));
        assert!(
            typos[0].message.contains("`modles`")
                && typos[0].message.contains("did you mean `models`?"),
            "{}",
            typos[0].message
        );
        assert!(typos[1].message.contains("did you mean `maxConcurrent`?"));
        assert_eq!(c.sessions.max_concurrent, 8, "a typo is not read");
        // A key the object has already is no guess; nor is one far from all.
        let (_, d) = p(
            r#"{"models": {}, "modls": {}, "sessions": {"maxConcurrent": 2, "maxConcurent": 3}}"#,
        );
        assert!(d.iter().all(|d| d.rule == Rule::ConfigUnknownKey), "{d:?}");
    }

    #[test]
    fn unknown_keys_are_kept() {
        let (c, _) = p(r#"{"version": 1, "casting": {"universe": "x"}}"#);
        assert_eq!(c.raw["casting"]["universe"], "x");
    }

    #[test]
    fn the_squad_clis_own_keys_are_known_and_kept() {
        // What `squad init --state-backend`, `squad link`, `squad economy on`
        // and `squad externalize` leave in the file.
        let text = r#"{"version": 1, "teamRoot": "../team", "projectKey": null, "stateLocation": "external",
            "stateBackend": "two-layer", "economyMode": true, "defaultReasoningEffort": "high",
            "watch": {"interval": 5}}"#;
        let (c, d) = p(text);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.version, Some(1));
        assert_eq!(c.raw["teamRoot"], "../team");
    }

    #[test]
    fn duplicate_keys_are_refused_at_their_line() {
        let (c, d) = p(
            "{\n  \"sessions\": {\"maxConcurrent\": 2},\n  \"sessions\": {\"maxConcurrent\": 9}\n}\n",
        );
        assert_eq!(c.sessions.max_concurrent, 8, "neither value is taken");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].rule, Rule::ConfigInvalidJson);
        assert!(
            d[0].message.contains("duplicate key \"sessions\""),
            "{}",
            d[0].message
        );
        assert_eq!(d[0].location.map(|l| l.line), Some(3));
    }

    #[test]
    fn numbers_say_what_they_must_be() {
        for (v, says) in [
            (
                "-1",
                "is -1, below zero: it must be a whole number of at least 1",
            ),
            (
                "1e3",
                "written with a fraction or an exponent (like 1e3): it must be a whole number of at least 1, written in digits only",
            ),
            ("2.5", "written with a fraction or an exponent"),
        ] {
            let (c, d) = p(&format!("{{\"sessions\": {{\"maxConcurrent\": {v}}}}}"));
            assert_eq!(c.sessions.max_concurrent, 8);
            assert_eq!(d.len(), 1, "{v}: {d:?}");
            assert_eq!(d[0].rule, Rule::ConfigBadValue, "{v}");
            assert!(d[0].message.contains(says), "{v}: {}", d[0].message);
        }
        let (_, d) = p("{\"version\": -1}");
        assert!(
            d[0].message.contains("`version` is -1, below zero"),
            "{d:?}"
        );
        // A byte order mark is not an error.
        let (c, d) = p("\u{feff}{\"version\": 1}");
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.version, Some(1));
    }
}
