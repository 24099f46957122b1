//! `prices` of config.json: what each model costs, in US dollars per
//! million tokens, so squadd can put a price on every run's tokens
//! (docs/runners.md, "Tokens and cost"). Edited by the user: model prices
//! change and differ between providers and contracts, so none is built in.
//!
//! ```json
//! "prices": {
//!   "claude-sonnet-4-5": {"input": 3, "cachedInput": 0.3, "output": 15},
//!   "gpt-5.1-codex": {"input": 1.25, "cachedInput": 0.125, "output": 10}
//! }
//! ```

use super::{Ctx, RuntimeConfig};
use crate::diagnostic::Rule;
use serde::Serialize;
use serde_json::{Value, json};

/// One model's price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Price {
    /// Input not read from a cache (cache writes included).
    pub input: f64,
    /// Input read from a cache; the input price when not given.
    #[serde(rename = "cachedInput")]
    pub cached_input: f64,
    /// Output (reasoning included).
    pub output: f64,
}

/// The highest price accepted per million tokens: far above any model's,
/// low enough that no run's cost can overflow.
pub(super) const MAX_PRICE: f64 = 1_000_000.0;

/// Reads `prices` into `c.prices`; a model with a bad entry is left out
/// (its runs' cost is then unknown, never zero).
pub(super) fn read(cx: &mut Ctx<'_>, c: &mut RuntimeConfig, v: &Value) {
    let Some(m) = v.as_object() else {
        return cx.bad_type(&["prices"], "an object", v);
    };
    for (model, entry) in m {
        let Some(o) = entry.as_object() else {
            cx.bad_type(&["prices", model], "an object", entry);
            continue;
        };
        let mut get = |key: &str| -> Result<Option<f64>, ()> {
            let at = ["prices", model.as_str(), key];
            match o.get(key) {
                None => Ok(None),
                Some(n) => match n.as_f64() {
                    Some(f) if (0.0..=MAX_PRICE).contains(&f) => Ok(Some(f)),
                    Some(f) => {
                        cx.push(
                            Rule::ConfigBadValue,
                            &at,
                            format!("`prices.{model}.{key}` is {f}, outside 0..{MAX_PRICE}"),
                            "US dollars per million tokens, e.g. 3 or 0.3",
                        );
                        Err(())
                    }
                    None => {
                        cx.bad_type(&at, "a number (US dollars per million tokens)", n);
                        Err(())
                    }
                },
            }
        };
        let (input, cached, output) = (get("input"), get("cachedInput"), get("output"));
        for key in o.keys() {
            if !["input", "cachedInput", "output"].contains(&key.as_str()) {
                cx.push(
                    Rule::ConfigUnknownKey,
                    &["prices", model, key],
                    format!("`prices.{model}.{key}` is not a key squad-supervisor reads (kept as written)"),
                    "known: input, cachedInput, output (US dollars per million tokens)",
                );
            }
        }
        let (Ok(input), Ok(cached), Ok(output)) = (input, cached, output) else {
            continue;
        };
        let (Some(input), Some(output)) = (input, output) else {
            cx.push(
                Rule::ConfigBadValue,
                &["prices", model],
                format!("`prices.{model}` needs both `input` and `output`"),
                "e.g. {\"input\": 3, \"cachedInput\": 0.3, \"output\": 15}",
            );
            continue;
        };
        c.prices.insert(
            model.clone(),
            Price {
                input,
                cached_input: cached.unwrap_or(input),
                output,
            },
        );
    }
    c.provenance
        .insert("prices".into(), "config.json: prices".into());
}

/// The schema of `prices`.
pub(super) fn schema() -> Value {
    let n = json!({"type": "number", "minimum": 0, "maximum": MAX_PRICE});
    json!({
        "type": "object",
        "description": "US dollars per million tokens, by model id (docs/runners.md, Tokens and cost).",
        "additionalProperties": {
            "type": "object",
            "required": ["input", "output"],
            "properties": {"input": n, "cachedInput": n, "output": n}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use crate::diagnostic::Rule;
    use std::path::Path;

    #[test]
    fn prices_are_read_per_model_and_bad_ones_left_out() {
        let (c, d) = parse(
            Path::new("config.json"),
            r#"{"prices": {"a": {"input": 3, "cachedInput": 0.3, "output": 15}, "b": {"input": 1, "output": 2},
               "c": {"input": -1, "output": 2}, "d": {"input": 1}, "e": {"input": "x", "output": 1}}}"#,
        );
        assert_eq!(c.prices["a"].cached_input, 0.3);
        assert_eq!(
            c.prices["b"].cached_input, 1.0,
            "the input price by default"
        );
        assert!(
            !c.prices.contains_key("c")
                && !c.prices.contains_key("d")
                && !c.prices.contains_key("e")
        );
        let rules: Vec<Rule> = d.iter().map(|d| d.rule).collect();
        assert_eq!(
            rules,
            [
                Rule::ConfigBadValue,
                Rule::ConfigBadValue,
                Rule::ConfigBadType
            ],
            "{d:?}"
        );
        assert_eq!(c.provenance["prices"], "config.json: prices");
    }
}
