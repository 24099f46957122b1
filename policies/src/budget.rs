//! `runners.budget` of the policy: tokens and money per run and per
//! session, and how far a run's or a session's usage is into one
//! (docs/runners.md, "Budgets"). Pure: the daemon's core stops a run past
//! its budget; `status` and `top` say a session is near or past its own.

use crate::usage::{Usage, Usd};
use serde::Deserialize;

/// A budget: tokens and/or money (either reached is over).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// All tokens (input, cached and output).
    pub tokens: Option<u64>,
    /// Money.
    pub usd: Option<Usd>,
}

impl Budget {
    /// Whether it limits anything.
    pub fn is_set(&self) -> bool {
        self.tokens.is_some() || self.usd.is_some()
    }
}

/// `runners.budget` of the policy: a limit per run and per session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budgets {
    /// Each run: a run past it is stopped and held.
    pub run: Budget,
    /// Each session, over all its runs: near it (80 %) or past it is a
    /// needs-attention item.
    pub session: Budget,
}

/// The share of a session's budget from which it needs attention.
pub const SESSION_NEAR: f64 = 0.8;

/// `runners.budget` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudgets {
    #[serde(default)]
    run: Option<RawBudget>,
    #[serde(default)]
    session: Option<RawBudget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    #[serde(default)]
    tokens: Option<u64>,
    #[serde(default)]
    usd: Option<f64>,
}

/// Reads `runners.budget`: `(field, message)` for a bad value.
pub(crate) fn budgets(raw: RawBudgets) -> Result<Budgets, (String, String)> {
    let one = |name: &str, b: Option<RawBudget>| -> Result<Budget, (String, String)> {
        let Some(b) = b else {
            return Ok(Budget::default());
        };
        let usd = match b.usd {
            Some(d) if d.is_finite() && d > 0.0 && d <= 1e9 => Some(Usd::from_dollars(d)),
            Some(d) => {
                return Err((
                    format!("runners.budget.{name}.usd"),
                    format!("`{d}` is not an amount of US dollars above 0 (e.g. 5 or 0.5)"),
                ));
            }
            None => None,
        };
        if b.tokens == Some(0) {
            return Err((
                format!("runners.budget.{name}.tokens"),
                "0 would stop every run at once; give a number of tokens, or leave it out".into(),
            ));
        }
        Ok(Budget {
            tokens: b.tokens,
            usd,
        })
    };
    Ok(Budgets {
        run: one("run", raw.run)?,
        session: one("session", raw.session)?,
    })
}

/// How far `used` is into `budget`: the figures above `share` of a limit
/// (`1.0`: past it; reaching it exactly is not past it), as text for the
/// lead (`12000 tokens of a 10000-token budget`); `None` when none is.
pub fn over_budget(budget: &Budget, used: &Usage, share: f64) -> Option<String> {
    let mut said = Vec::new();
    if let Some(limit) = budget.tokens {
        let n = used.total_tokens();
        if n as f64 > limit as f64 * share {
            said.push(format!("{n} tokens of a {limit}-token budget"));
        }
    }
    if let (Some(limit), Some(cost)) = (budget.usd, used.cost_usd)
        && cost.0 as f64 > limit.0 as f64 * share
    {
        said.push(format!("{cost} of a {limit} budget"));
    }
    (!said.is_empty()).then(|| said.join(" and "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_say_which_figure_passed_and_by_how_much() {
        let used = Usage {
            input_tokens: 8_000,
            cached_tokens: 1_000,
            output_tokens: 3_000,
            cost_usd: Some(Usd(1_500_000)),
            ..Usage::default()
        };
        let tokens = Budget {
            tokens: Some(10_000),
            usd: None,
        };
        assert_eq!(
            over_budget(&tokens, &used, 1.0).as_deref(),
            Some("12000 tokens of a 10000-token budget")
        );
        let money = Budget {
            tokens: Some(100_000),
            usd: Some(Usd(2_000_000)),
        };
        assert_eq!(over_budget(&money, &used, 1.0), None);
        assert_eq!(
            over_budget(&money, &used, 0.7).as_deref(),
            Some("$1.50 of a $2.00 budget")
        );
        // Reaching a limit exactly is not passing it.
        let exact = Budget {
            tokens: Some(12_000),
            usd: None,
        };
        assert_eq!(over_budget(&exact, &used, 1.0), None);
        // An unknown cost never passes a money budget (tokens still do).
        let unknown = Usage {
            cost_usd: None,
            ..used.clone()
        };
        assert_eq!(
            over_budget(&money, &unknown, 0.1).as_deref(),
            Some("12000 tokens of a 100000-token budget")
        );
    }
}
