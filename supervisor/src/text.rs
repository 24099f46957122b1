//! Text for people: control characters escaped (the workspace's one helper,
//! in `squad_protocol::text`), counts with their nouns in the right number.

pub(crate) use squad_protocol::text::{escape, escape_lines};

/// `1 session`, `2 sessions`: a count with its noun in the right number.
pub(crate) fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// Every string inside a serializable value escaped ([`escape`]): for a
/// report assembled from names that is rendered for people, so that a name
/// cannot break a line of the rendering.
pub(crate) fn escape_all<T: serde::Serialize + serde::de::DeserializeOwned>(
    value: &T,
) -> Option<T> {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                if let std::borrow::Cow::Owned(e) = escape(s) {
                    *s = e;
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            serde_json::Value::Object(o) => o.values_mut().for_each(walk),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(value).ok()?;
    walk(&mut v);
    serde_json::from_value(v).ok()
}

/// `5s`, `3m`, `2h`, `4d`: an age for people.
pub(crate) fn human_age(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
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
