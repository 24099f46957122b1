//! `hooks:` of the policy: how many notify commands run at once, and which
//! queued one starts next.

use squad_protocol::model::Priority;

/// The most notify commands a project may run at once.
pub const MAX_CONCURRENT_LIMIT: usize = 1024;

/// Notify commands started per CPU core when the policy says `auto`.
pub const PER_CORE: usize = 4;

/// `hooks:` of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HooksPolicy {
    /// At most this many notify commands run at once per project; `None`
    /// (`auto`): [`PER_CORE`] per CPU core.
    pub max_concurrent: Option<usize>,
}

impl HooksPolicy {
    /// The limit on a machine with `cores` cores (at least 1).
    pub fn limit(&self, cores: usize) -> usize {
        self.max_concurrent
            .unwrap_or_else(|| PER_CORE.saturating_mul(cores.max(1)))
            .clamp(1, MAX_CONCURRENT_LIMIT)
    }
}

/// Parses `hooks.max_concurrent`: `auto` or a whole number from 1 to
/// [`MAX_CONCURRENT_LIMIT`].
pub fn parse_max_concurrent(text: &str) -> Result<Option<usize>, String> {
    let t = text.trim();
    if t == "auto" {
        return Ok(None);
    }
    match t.parse::<usize>() {
        Ok(n) if (1..=MAX_CONCURRENT_LIMIT).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "`{t}` is not `auto` or a whole number from 1 to {MAX_CONCURRENT_LIMIT}"
        )),
    }
}

/// The order queued notify commands start in: critical first, then high,
/// medium, low; within a priority, first queued first.
pub fn start_order(priority: Priority, seq: u64) -> (u8, u64) {
    let rank = match priority {
        Priority::Critical => 0,
        Priority::High => 1,
        Priority::Medium => 2,
        Priority::Low => 3,
    };
    (rank, seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert_eq!(HooksPolicy::default().limit(2), 8);
        assert_eq!(HooksPolicy::default().limit(0), 4);
        let p = HooksPolicy {
            max_concurrent: Some(3),
        };
        assert_eq!(p.limit(64), 3);
        assert_eq!(parse_max_concurrent(" auto "), Ok(None));
        assert_eq!(parse_max_concurrent("16"), Ok(Some(16)));
        for bad in ["0", "-1", "many", "100000"] {
            assert!(parse_max_concurrent(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn critical_starts_first_then_in_queue_order() {
        let mut q = [
            start_order(Priority::Low, 0),
            start_order(Priority::Medium, 1),
            start_order(Priority::Critical, 2),
            start_order(Priority::Medium, 3),
            start_order(Priority::High, 4),
        ];
        q.sort();
        assert_eq!(q.map(|(_, s)| s), [2, 4, 1, 3, 0]);
    }
}
