//! Tokens and money per run (docs/runners.md, "Tokens and cost"): what an
//! agent CLI's machine-readable output says it used, the cost from the
//! price table of config.json and the CLI's own model warnings. Pure:
//! squadd's shell feeds the run's output in as it drains it into run.log
//! ([`OutputScan`]); the daemon's core prices it and holds the run to its
//! budget ([`crate::budget`]).
//!
//! What each CLI reports (a line of JSON each; anything else is skipped):
//!
//! - Claude Code `--output-format stream-json --verbose`: `assistant`
//!   events carry each model response's `message.usage` (counted as they
//!   come, once per message id), the final `result` event the run's totals
//!   (`modelUsage` per model, with Claude Code's own cost estimate), which
//!   replace the running count; `--output-format json` prints the `result`
//!   only.
//! - Codex `exec --json`: `turn.completed` with `usage` per turn
//!   (`input_tokens` includes `cached_input_tokens`).
//! - Gemini CLI `--output-format stream-json`: the `result` event's
//!   `stats` (`input_tokens` includes `cached`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use squad_protocol::config::Price;
use std::collections::BTreeMap;

/// Money in millionths of a US dollar (exact sums, comparable budgets);
/// written in JSON as dollars (`0.000146`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Usd(pub u64);

impl Usd {
    /// From dollars (negative or not a number: zero).
    pub fn from_dollars(d: f64) -> Usd {
        if d.is_finite() && d > 0.0 {
            // Saturating: an absurd figure is the largest one, not a panic.
            Usd((d * 1e6).round().min(u64::MAX as f64) as u64)
        } else {
            Usd(0)
        }
    }

    /// In dollars.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

impl std::fmt::Display for Usd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.dollars();
        // Cents hide what small runs cost: four decimals below a dollar.
        if self.0 != 0 && d < 1.0 {
            write!(f, "${d:.4}")
        } else {
            write!(f, "${d:.2}")
        }
    }
}

impl Serialize for Usd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usd, D::Error> {
        f64::deserialize(d).map(Usd::from_dollars)
    }
}

/// Token counts. `input` is input not read from a cache (cache writes
/// included), `cached` input read from one, `output` everything generated
/// (reasoning included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens not read from a cache.
    pub input: u64,
    /// Input tokens read from a cache.
    pub cached: u64,
    /// Output tokens.
    pub output: u64,
}

impl Tokens {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.cached)
            .saturating_add(self.output)
    }

    fn add(&mut self, o: &Tokens) {
        self.input = self.input.saturating_add(o.input);
        self.cached = self.cached.saturating_add(o.cached);
        self.output = self.output.saturating_add(o.output);
    }
}

/// What a run's output said it used, per model (`""`: a CLI that does not
/// name the model it used), with the cost the CLI itself reported, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reported {
    /// Tokens by model.
    pub by_model: BTreeMap<String, Tokens>,
    /// The CLI's own cost figure per model (Claude Code's estimate).
    pub cli_cost: BTreeMap<String, Usd>,
}

impl Reported {
    /// Tokens over every model.
    pub fn tokens(&self) -> Tokens {
        let mut t = Tokens::default();
        for v in self.by_model.values() {
            t.add(v);
        }
        t
    }
}

/// Where a run's cost comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CostFrom {
    /// config.json's `prices` for every model the run used.
    Prices,
    /// The agent CLI's own estimate (for models without a price).
    Cli,
    /// Both: some models priced by the table, others by the CLI.
    PricesAndCli,
}

/// A run's usage as recorded in run.json and shown by `runs`, `status`,
/// `top`: the counts, the model (the one with the most tokens when it used
/// several), and the cost when every model it used has a price.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The model (`None`: the CLI did not say and none was configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input tokens not read from a cache.
    pub input_tokens: u64,
    /// Input tokens read from a cache.
    pub cached_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// The cost; `None` when a model it used has no price in config.json
    /// and the CLI reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
    /// Where the cost comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_from: Option<CostFrom>,
    /// Models used that have no price (say so rather than count them free).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
}

impl Usage {
    /// All tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cached_tokens)
            .saturating_add(self.output_tokens)
    }

    /// Adds another run's usage (a task's, an agent's, a session's sum):
    /// the cost stays known only while every part's is.
    pub fn add(&mut self, o: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(o.input_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(o.cached_tokens);
        self.output_tokens = self.output_tokens.saturating_add(o.output_tokens);
        self.cost_usd = match (self.cost_usd, o.cost_usd) {
            (Some(a), Some(b)) => Some(Usd(a.0.saturating_add(b.0))),
            _ => None,
        };
        for m in &o.unpriced {
            if !self.unpriced.contains(m) {
                self.unpriced.push(m.clone());
            }
        }
        if self.model != o.model {
            self.model = None;
        }
        self.cost_from = None;
    }

    /// `13 in, 3 cached, 7 out, $0.0001` (cost `?` when unknown).
    pub fn summary(&self) -> String {
        format!(
            "{} in, {} cached, {} out, {}",
            self.input_tokens,
            self.cached_tokens,
            self.output_tokens,
            self.cost_usd
                .map_or("cost ?".to_string(), |c| c.to_string())
        )
    }
}

/// The sum of several runs' usage (`None` parts skipped; `None` when all
/// are).
pub fn sum<'a>(parts: impl IntoIterator<Item = &'a Usage>) -> Option<Usage> {
    let mut it = parts.into_iter();
    let mut total = it.next()?.clone();
    for u in it {
        total.add(u);
    }
    Some(total)
}

/// The cost of `reported` by the price table (`prices`, by model id), the
/// CLI's own figure for a model without a price; `configured`: the model
/// config.json gave the run, used for a CLI that does not name one.
pub fn priced(
    reported: &Reported,
    prices: &BTreeMap<String, Price>,
    configured: Option<&str>,
) -> Usage {
    let t = reported.tokens();
    let name = |m: &str| -> Option<String> {
        if m.is_empty() {
            configured.map(str::to_string)
        } else {
            Some(m.to_string())
        }
    };
    let model = reported
        .by_model
        .iter()
        .max_by_key(|(_, t)| t.total())
        .and_then(|(m, _)| name(m))
        .or_else(|| configured.map(str::to_string));
    let mut cost = 0u64;
    let (mut table, mut cli) = (false, false);
    let mut unpriced = Vec::new();
    for (m, tokens) in &reported.by_model {
        let id = name(m);
        if let Some(p) = id.as_deref().and_then(|id| prices.get(id)) {
            let micros = tokens.input as f64 * p.input
                + tokens.cached as f64 * p.cached_input
                + tokens.output as f64 * p.output;
            cost = cost.saturating_add(Usd::from_dollars(micros / 1e6).0);
            table = true;
        } else if let Some(c) = reported.cli_cost.get(m) {
            cost = cost.saturating_add(c.0);
            cli = true;
        } else if tokens.total() > 0 {
            unpriced.push(id.unwrap_or_else(|| "(unnamed model)".into()));
        }
    }
    let cost_from = match (table, cli) {
        (true, true) => Some(CostFrom::PricesAndCli),
        (true, false) => Some(CostFrom::Prices),
        (false, true) => Some(CostFrom::Cli),
        (false, false) => None,
    };
    let known = unpriced.is_empty() && (cost_from.is_some() || t.total() == 0);
    Usage {
        model,
        input_tokens: t.input,
        cached_tokens: t.cached,
        output_tokens: t.output,
        cost_usd: known.then_some(Usd(cost)),
        cost_from,
        unpriced,
    }
}

/// The longest line kept whole while scanning (a stream-json line carries
/// whole tool results); a longer one is skipped.
pub const MAX_LINE: usize = 4 << 20;

/// Reads a run's output as it comes (any chunking), line by line, for
/// usage figures and the CLI's own model warnings.
#[derive(Debug, Clone, Default)]
pub struct OutputScan {
    partial: Vec<u8>,
    /// Skipping the rest of an overlong line.
    skipping: bool,
    /// Claude Code: each response's usage by message id, as streamed.
    messages: BTreeMap<String, (String, Tokens)>,
    /// Claude Code's `result`, or Gemini's: the run's totals so far.
    results: Vec<Reported>,
    /// Codex: turns completed.
    turns: Tokens,
    /// The model a CLI named at its start (Claude Code's `init`).
    init_model: Option<String>,
    warning: Option<String>,
    /// The CLI's own session (conversation) id, the latest said.
    conversation: Option<String>,
    changed: bool,
}

impl OutputScan {
    /// Feeds a chunk of output.
    pub fn feed(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (line, tail) = rest.split_at(nl);
            rest = &tail[1..];
            if self.skipping {
                self.skipping = false;
                self.partial.clear();
                continue;
            }
            if self.partial.is_empty() {
                self.line(line);
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole);
            }
        }
        if self.skipping {
            return;
        }
        if self.partial.len() + rest.len() > MAX_LINE {
            self.partial.clear();
            self.skipping = true;
        } else {
            self.partial.extend_from_slice(rest);
        }
    }

    /// Whether figures or a warning changed since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The CLI's warning that its model is deprecated or retiring.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// The agent CLI's own session id, as its output said it (Claude Code
    /// `session_id` in its `system`/`init` and `result` events; Codex
    /// `exec --json` `thread_id` in `thread.started`): what a later run
    /// resumes. Only an id of the shape [`conversation_id`] accepts.
    pub fn conversation(&self) -> Option<&str> {
        self.conversation.as_deref()
    }

    fn note_conversation(&mut self, id: Option<&str>) {
        if let Some(id) = id.and_then(conversation_id)
            && self.conversation.as_deref() != Some(id)
        {
            self.conversation = Some(id.to_string());
            self.changed = true;
        }
    }

    /// What the output has reported so far (`None`: nothing).
    pub fn reported(&self) -> Option<Reported> {
        let mut out = Reported::default();
        let mut any = false;
        // Claude's `result` holds the totals of every response before it:
        // responses streamed after the last result are added to it.
        for r in &self.results {
            any = true;
            for (m, t) in &r.by_model {
                out.by_model.entry(m.clone()).or_default().add(t);
            }
            for (m, c) in &r.cli_cost {
                let e = out.cli_cost.entry(m.clone()).or_default();
                e.0 = e.0.saturating_add(c.0);
            }
        }
        for (model, t) in self.messages.values() {
            any = true;
            out.by_model.entry(model.clone()).or_default().add(t);
        }
        if self.turns != Tokens::default() {
            any = true;
            out.by_model
                .entry(self.init_model.clone().unwrap_or_default())
                .or_default()
                .add(&self.turns);
        }
        any.then_some(out)
    }

    fn line(&mut self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.starts_with('{') {
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                self.event(&v);
            }
            return;
        }
        self.note_warning(text);
    }

    fn note_warning(&mut self, text: &str) {
        if self.warning.is_none() && model_warning(text) {
            self.warning = Some(text.chars().take(300).collect());
            self.changed = true;
        }
    }

    fn event(&mut self, v: &Value) {
        let u = |o: &Value, k: &str| o[k].as_u64().unwrap_or(0);
        match v["type"].as_str().unwrap_or("") {
            "system" if v["subtype"] == "init" => {
                if let Some(m) = v["model"].as_str() {
                    self.init_model = Some(m.to_string());
                }
                self.note_conversation(v["session_id"].as_str());
            }
            // Codex: the thread it runs (what `codex exec resume` takes).
            "thread.started" => self.note_conversation(v["thread_id"].as_str()),
            // Claude Code: one response's usage (repeated for each of its
            // content blocks: kept once per message id, the latest).
            "assistant" => {
                let m = &v["message"];
                let (Some(id), Some(usage)) = (m["id"].as_str(), m.get("usage")) else {
                    return;
                };
                let model = m["model"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| self.init_model.clone())
                    .unwrap_or_default();
                let t = Tokens {
                    input: u(usage, "input_tokens") + u(usage, "cache_creation_input_tokens"),
                    cached: u(usage, "cache_read_input_tokens"),
                    output: u(usage, "output_tokens"),
                };
                self.messages.insert(id.to_string(), (model, t));
                self.changed = true;
            }
            "result" => {
                if v.get("modelUsage").is_some() || v.get("total_cost_usd").is_some() {
                    self.note_conversation(v["session_id"].as_str());
                }
                if let Some(r) = claude_result(v).or_else(|| gemini_result(v)) {
                    // The responses counted so far are in the result.
                    self.messages.clear();
                    self.results.push(r);
                    self.changed = true;
                }
            }
            // Codex (`exec --json`) says a warning as an error item.
            "item.completed" if v["item"]["type"] == "error" => {
                if let Some(m) = v["item"]["message"].as_str() {
                    self.note_warning(m);
                }
            }
            // Codex: each turn's usage; input includes the cached part.
            "turn.completed" => {
                let usage = &v["usage"];
                let input = u(usage, "input_tokens");
                let cached = u(usage, "cached_input_tokens").min(input);
                self.turns.add(&Tokens {
                    input: input - cached,
                    cached,
                    output: u(usage, "output_tokens"),
                });
                self.changed = true;
            }
            _ => {}
        }
    }
}

/// Claude Code's `result` event: `modelUsage` per model (tokens and its
/// own cost), else `usage` and `total_cost_usd`.
fn claude_result(v: &Value) -> Option<Reported> {
    let u = |o: &Value, k: &str| o[k].as_u64().unwrap_or(0);
    let mut r = Reported::default();
    if let Some(models) = v["modelUsage"].as_object() {
        for (m, mu) in models {
            r.by_model.insert(
                m.clone(),
                Tokens {
                    input: u(mu, "inputTokens") + u(mu, "cacheCreationInputTokens"),
                    cached: u(mu, "cacheReadInputTokens"),
                    output: u(mu, "outputTokens"),
                },
            );
            if let Some(c) = mu["costUSD"].as_f64() {
                r.cli_cost.insert(m.clone(), Usd::from_dollars(c));
            }
        }
        return Some(r);
    }
    let usage = v.get("usage").filter(|u| u.is_object())?;
    v.get("total_cost_usd")?;
    r.by_model.insert(
        String::new(),
        Tokens {
            input: u(usage, "input_tokens") + u(usage, "cache_creation_input_tokens"),
            cached: u(usage, "cache_read_input_tokens"),
            output: u(usage, "output_tokens"),
        },
    );
    if let Some(c) = v["total_cost_usd"].as_f64() {
        r.cli_cost.insert(String::new(), Usd::from_dollars(c));
    }
    Some(r)
}

/// Gemini CLI's `result` event: `stats` with `models` per model (or the
/// totals alone); `input_tokens` includes `cached`.
fn gemini_result(v: &Value) -> Option<Reported> {
    let stats = v.get("stats").filter(|s| s.is_object())?;
    let u = |o: &Value, k: &str| o[k].as_u64().unwrap_or(0);
    let tokens = |s: &Value| {
        let input = u(s, "input_tokens").max(u(s, "input"));
        let cached = u(s, "cached").max(u(s, "cached_tokens")).min(input);
        Tokens {
            input: input - cached,
            cached,
            output: u(s, "output_tokens").max(u(s, "output")),
        }
    };
    let mut r = Reported::default();
    match stats["models"].as_object() {
        Some(models) if !models.is_empty() => {
            for (m, s) in models {
                r.by_model.insert(m.clone(), tokens(s));
            }
        }
        _ => {
            r.by_model.insert(String::new(), tokens(stats));
        }
    }
    Some(r)
}

/// `id` when it has the shape of an agent CLI's session id (a UUID, or a
/// short name of letters, digits, `-`, `_`, `.`; never starting with `-`):
/// it is put on a command line (`--resume ID`), and the output it came
/// from is the agent's, so nothing else passes.
pub fn conversation_id(id: &str) -> Option<&str> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with(['-', '.'])
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    ok.then_some(id)
}

/// Whether a line of a CLI's output is its warning that the model it runs
/// is deprecated or retiring (Claude Code 2.1.332: `⚠ Claude Sonnet 4.5
/// will be retired on November 30, 2026. Consider switching to a newer
/// model.`): it speaks of a model and of retirement, deprecation or end
/// of life.
pub fn model_warning(line: &str) -> bool {
    let l = line.to_lowercase();
    l.contains("model")
        && ["retire", "deprecat", "end of life", "end-of-life", "sunset"]
            .iter()
            .any(|w| l.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &str) -> OutputScan {
        let mut s = OutputScan::default();
        // Fed in awkward pieces: lines split anywhere.
        for chunk in text.as_bytes().chunks(7) {
            s.feed(chunk);
        }
        s
    }

    #[test]
    fn claude_stream_json_counts_responses_then_takes_the_results_totals() {
        let init = r#"{"type":"system","subtype":"init","model":"claude-sonnet-4-5"}"#;
        let a1 = r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":11,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":1}}}"#;
        let mut s = scan(&format!("{init}\n{a1}\n{a1}\n"));
        let r = s.reported().unwrap();
        assert_eq!(
            r.by_model["claude-sonnet-4-5"],
            Tokens {
                input: 13,
                cached: 3,
                output: 1
            },
            "a message's usage counted once"
        );
        assert!(s.take_changed());
        let result = r#"{"type":"result","total_cost_usd":0.0001464,"usage":{"input_tokens":11},"modelUsage":{"claude-sonnet-4-5":{"inputTokens":11,"outputTokens":7,"cacheReadInputTokens":3,"cacheCreationInputTokens":2,"costUSD":0.0001464}}}"#;
        s.feed(format!("{result}\n").as_bytes());
        let r = s.reported().unwrap();
        assert_eq!(
            r.by_model["claude-sonnet-4-5"],
            Tokens {
                input: 13,
                cached: 3,
                output: 7
            }
        );
        assert_eq!(r.cli_cost["claude-sonnet-4-5"], Usd(146));
    }

    #[test]
    fn codex_turns_are_summed_and_cached_input_taken_out_of_input() {
        let t = r#"{"type":"turn.completed","usage":{"input_tokens":13,"cached_input_tokens":5,"output_tokens":7,"reasoning_output_tokens":2}}"#;
        let s = scan(&format!("{{\"type\":\"thread.started\"}}\n{t}\n{t}\n"));
        let r = s.reported().unwrap();
        assert_eq!(
            r.by_model[""],
            Tokens {
                input: 16,
                cached: 10,
                output: 14
            }
        );
    }

    #[test]
    fn the_clis_own_session_id_is_taken_from_claude_and_codex_output() {
        // Captured from Claude Code 2.1.197 (`-p --output-format
        // stream-json --verbose`; the `tools`, `slash_commands`, `skills`
        // and `agents` lists cut short) and codex-cli 0.169.0 (`exec
        // --json`) running against the stub model.
        let claude_init = r#"{"type":"system","subtype":"init","cwd":"/tmp/.tmpGEt8b4/proj","session_id":"b43718b3-0374-4e13-8a51-986afaea3241","tools":["Task","Bash"],"mcp_servers":[],"model":"claude-opus-4-8[1m]","permissionMode":"acceptEdits","slash_commands":["review"],"apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197","output_style":"default","agents":["claude"],"skills":["verify"],"plugins":[],"analytics_disabled":true,"product_feedback_disabled":true,"uuid":"34e2225f-d622-462b-9b44-f0ac9a0aa282","fast_mode_state":"off"}"#;
        let claude_result = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"done","session_id":"b43718b3-0374-4e13-8a51-986afaea3241","total_cost_usd":0.001,"usage":{"input_tokens":1}}"#;
        let mut s = scan(&format!("{claude_init}\n"));
        assert_eq!(
            s.conversation(),
            Some("b43718b3-0374-4e13-8a51-986afaea3241")
        );
        assert!(s.take_changed());
        s.feed(format!("{claude_result}\n").as_bytes());
        assert_eq!(
            s.conversation(),
            Some("b43718b3-0374-4e13-8a51-986afaea3241")
        );
        let codex =
            r#"{"type":"thread.started","thread_id":"01a2283a-8645-7d21-9e58-29a2515898a0"}"#;
        let s = scan(&format!("{codex}\n"));
        assert_eq!(
            s.conversation(),
            Some("01a2283a-8645-7d21-9e58-29a2515898a0")
        );
        // An id that could pass for an option is never taken.
        let hostile =
            r#"{"type":"thread.started","thread_id":"--dangerously-bypass-approvals-and-sandbox"}"#;
        assert_eq!(scan(&format!("{hostile}\n")).conversation(), None);
        assert_eq!(scan("session_id: abc\n").conversation(), None);
    }

    #[test]
    fn gemini_result_stats_per_model() {
        let line = r#"{"type":"result","status":"success","stats":{"total_tokens":30,"input_tokens":20,"output_tokens":10,"cached":4,"models":{"gemini-2.5-pro":{"total_tokens":30,"input_tokens":20,"output_tokens":10,"cached":4}}}}"#;
        let r = scan(&format!("{line}\n")).reported().unwrap();
        assert_eq!(
            r.by_model["gemini-2.5-pro"],
            Tokens {
                input: 16,
                cached: 4,
                output: 10
            }
        );
    }

    #[test]
    fn text_output_reports_nothing_but_a_retirement_warning() {
        let s = scan(
            "done\n⚠ Claude Sonnet 4.5 will be retired on November 30, 2026. Consider switching to a newer model.\n",
        );
        assert_eq!(s.reported(), None);
        assert!(s.warning().unwrap().contains("will be retired"));
        for quiet in [
            "retiring the old cache",
            "the model wrote a file",
            "{\"type\":\"x\",\"text\":\"model deprecated\"}",
        ] {
            assert!(scan(&format!("{quiet}\n")).warning().is_none(), "{quiet}");
        }
        assert!(model_warning(
            "warning: model gpt-4o is deprecated and will be removed"
        ));
        let codex = r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"The model gpt-4o is deprecated."}}"#;
        assert_eq!(
            scan(&format!("{codex}\n")).warning(),
            Some("The model gpt-4o is deprecated.")
        );
    }

    #[test]
    fn an_overlong_line_is_skipped_whole_and_the_next_one_read() {
        let mut s = OutputScan::default();
        s.feed(&vec![b'x'; MAX_LINE + 10]);
        s.feed(b"xx still the long line model retired\n");
        s.feed(b"model will be retired\n");
        assert_eq!(s.warning(), Some("model will be retired"));
    }

    #[test]
    fn the_cost_comes_from_the_price_table_else_the_cli_else_is_unknown() {
        let mut r = Reported::default();
        r.by_model.insert(
            "claude-sonnet-4-5".into(),
            Tokens {
                input: 1_000,
                cached: 10_000,
                output: 2_000,
            },
        );
        r.cli_cost.insert("claude-sonnet-4-5".into(), Usd(999));
        let prices: BTreeMap<String, Price> = [(
            "claude-sonnet-4-5".to_string(),
            Price {
                input: 3.0,
                cached_input: 0.3,
                output: 15.0,
            },
        )]
        .into();
        let u = priced(&r, &prices, None);
        // 1000*3 + 10000*0.3 + 2000*15 = 36000 micro-dollars.
        assert_eq!(u.cost_usd, Some(Usd(36_000)));
        assert_eq!(u.cost_from, Some(CostFrom::Prices));
        assert_eq!(u.total_tokens(), 13_000);
        let u = priced(&r, &BTreeMap::new(), None);
        assert_eq!(
            (u.cost_usd, u.cost_from),
            (Some(Usd(999)), Some(CostFrom::Cli))
        );
        // A CLI that names no model: the configured one is priced.
        let mut codex = Reported::default();
        codex.by_model.insert(
            String::new(),
            Tokens {
                input: 8,
                cached: 5,
                output: 7,
            },
        );
        let u = priced(&codex, &BTreeMap::new(), Some("gpt-5.1-codex"));
        assert_eq!(u.cost_usd, None);
        assert_eq!(u.unpriced, ["gpt-5.1-codex"]);
        assert_eq!(u.model.as_deref(), Some("gpt-5.1-codex"));
        let mut table = BTreeMap::new();
        table.insert(
            "gpt-5.1-codex".to_string(),
            Price {
                input: 1.25,
                cached_input: 0.125,
                output: 10.0,
            },
        );
        // 8*1.25 + 5*0.125 + 7*10 = 80.625 -> 81 micro-dollars.
        assert_eq!(
            priced(&codex, &table, Some("gpt-5.1-codex")).cost_usd,
            Some(Usd(81))
        );
    }

    #[test]
    fn sums_keep_the_cost_only_while_every_part_has_one() {
        let a = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cost_usd: Some(Usd(10)),
            ..Usage::default()
        };
        let b = Usage {
            cached_tokens: 3,
            cost_usd: Some(Usd(5)),
            ..Usage::default()
        };
        let s = sum([&a, &b]).unwrap();
        assert_eq!((s.total_tokens(), s.cost_usd), (6, Some(Usd(15))));
        let one = Usage {
            cost_from: Some(CostFrom::Prices),
            ..a.clone()
        };
        assert_eq!(sum([&one]).unwrap(), one, "one part: as it is");
        let c = Usage::default();
        assert_eq!(sum([&a, &c]).unwrap().cost_usd, None);
        assert_eq!(sum(std::iter::empty::<&Usage>()), None);
    }
}
