//! Text for people: control characters escaped (the workspace's one helper,
//! in `squad_protocol::text`), counts with their nouns in the right number.

pub use squad_protocol::text::{escape, escape_lines};

/// `1 session`, `2 sessions`: a count with its noun in the right number.
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_in_number() {
        assert_eq!(count(1, "session", "sessions"), "1 session");
        assert_eq!(count(0, "session", "sessions"), "0 sessions");
        assert_eq!(count(2, "error", "errors"), "2 errors");
    }
}
