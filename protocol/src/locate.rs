//! Mapping a path in a YAML document (`meta.priority`, `blockers[0]`) back to a
//! line and column.
//!
//! The YAML library attaches the position of the node being deserialized to
//! any error a visitor raises. We walk the document with a deserializer seed
//! that follows the path and raises a marker error at the target node, then
//! read the position off that error. It costs one extra parse, so it runs only
//! for files that have a diagnostic to place; valid files never pay for it.

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One step of a path into a YAML document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PathSeg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Renders a path as `meta.priority` / `artifacts_created[0].path`.
pub fn display_path(path: &[PathSeg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathSeg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// What to point at: the node at the path, or the mapping key that leads to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The value node.
    Value,
    /// The key of the last path segment (falls back to the value for indexes).
    Key,
}

const MARKER: &str = "\u{0}squad-locate\u{0}";

/// The 1-based (line, column) of the node at `path` in `yaml`, or `None` when
/// the path does not exist or the YAML does not parse (or nests too deeply
/// to be parsed: see [`crate::depth`]).
pub fn locate(yaml: &str, path: &[PathSeg], target: Target) -> Option<(usize, usize)> {
    let de = crate::depth::deserializer(yaml).ok()?;
    match (Locate { path, target }).deserialize(de) {
        Ok(()) => None,
        Err(err) if err.to_string().contains(MARKER) => {
            err.location().map(|l| (l.line(), l.column()))
        }
        Err(_) => None,
    }
}

struct Locate<'p> {
    path: &'p [PathSeg],
    target: Target,
}

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.path.first() {
            None => d.deserialize_any(Found),
            Some(PathSeg::Key(_)) => d.deserialize_any(self),
            Some(PathSeg::Index(_)) => d.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a collection")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((PathSeg::Key(want), rest)) = self.path.split_first() else {
            return drain_map(map);
        };
        let key_is_target = rest.is_empty() && self.target == Target::Key;
        while let Some(matched) = map.next_key_seed(KeyProbe {
            want,
            raise: key_is_target,
        })? {
            if matched {
                return map.next_value_seed(Locate {
                    path: rest,
                    target: self.target,
                });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((PathSeg::Index(want), rest)) = self.path.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        for _ in 0..*want {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Locate {
            path: rest,
            target: self.target,
        })?;
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    // Scalars where a collection was expected: the path does not exist.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Ok(())
    }
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Deserializes a mapping key and says whether it is the wanted one; raises the
/// marker instead when the key itself is the target.
struct KeyProbe<'a> {
    want: &'a str,
    raise: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyProbe<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        if v == self.want {
            if self.raise {
                return Err(E::custom(MARKER));
            }
            return Ok(true);
        }
        Ok(false)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        self.visit_str("null")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        drain_map(map).map(|()| false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// Raises the marker at whatever node it is asked to deserialize.
struct Found;

impl<'de> Visitor<'de> for Found {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MARKER)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Err(E::custom(MARKER))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(MARKER))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(MARKER))
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom(MARKER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> PathSeg {
        PathSeg::Key(k.to_string())
    }

    const DOC: &str = "# Task Assignment\nmeta:\n  task_id: task_1\n  priority: urgent\nlist:\n  - a\n  - b: 1\n    c: 2\nflow: {x: 1, y: [1, 2]}\n";

    #[test]
    fn locates_values_and_keys() {
        type Case<'a> = (&'a [PathSeg], Target, Option<(usize, usize)>);
        let cases: &[Case<'_>] = &[
            (&[], Target::Value, Some((2, 1))),
            (&[key("meta")], Target::Key, Some((2, 1))),
            (&[key("meta")], Target::Value, Some((3, 3))),
            (
                &[key("meta"), key("priority")],
                Target::Value,
                Some((4, 13)),
            ),
            (&[key("meta"), key("priority")], Target::Key, Some((4, 3))),
            (
                &[key("list"), PathSeg::Index(1)],
                Target::Value,
                Some((7, 5)),
            ),
            (
                &[key("list"), PathSeg::Index(1), key("c")],
                Target::Key,
                Some((8, 5)),
            ),
            (
                &[key("flow"), key("y"), PathSeg::Index(1)],
                Target::Value,
                Some((9, 21)),
            ),
            (&[key("missing")], Target::Value, None),
            (&[key("list"), PathSeg::Index(9)], Target::Value, None),
            (
                &[key("meta"), key("task_id"), key("deeper")],
                Target::Value,
                None,
            ),
        ];
        for (path, target, expected) in cases {
            assert_eq!(
                locate(DOC, path, *target),
                *expected,
                "{} {target:?}",
                display_path(path)
            );
        }
    }

    #[test]
    fn invalid_yaml_does_not_panic() {
        for yaml in ["a: [", "a: b: c", "\t- x", "*unknown", "a: &x [*x]"] {
            let _ = locate(yaml, &[key("a"), PathSeg::Index(0)], Target::Key);
        }
    }

    #[test]
    fn path_display() {
        assert_eq!(
            display_path(&[key("a"), PathSeg::Index(0), key("b")]),
            "a[0].b"
        );
    }
}
