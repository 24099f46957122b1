//! JSON Schema (draft-07) for each file kind, generated from [`crate::spec`],
//! so editors (the YAML language server) validate files as people type.

use crate::kind::FileKind;
use crate::spec::{self, Field, Ty};
use serde_json::{Map, Value, json};

/// Regular expression (ECMA 262) for a project-relative path: not absolute,
/// no `..` segment.
const REL_PATH_PATTERN: &str = r"^(?![/\\])(?![A-Za-z]:)(?!(.*[/\\])?\.\.([/\\]|$)).+$";

/// The JSON Schema of one kind.
pub fn schema(kind: FileKind) -> Value {
    let mut root = object(spec::fields(kind));
    if let Value::Object(m) = &mut root {
        m.insert(
            "$schema".into(),
            json!("http://json-schema.org/draft-07/schema#"),
        );
        m.insert(
            "title".into(),
            json!(format!("squad {} ({})", kind.title(), kind.file_pattern())),
        );
    }
    root
}

/// Every kind's schema, keyed by kind name.
pub fn all_schemas() -> Value {
    Value::Object(
        FileKind::ALL
            .iter()
            .map(|k| (k.as_str().to_string(), schema(*k)))
            .collect(),
    )
}

fn object(fields: &[Field]) -> Value {
    let mut properties = Map::new();
    for f in fields {
        let mut s = ty(&f.ty);
        if let Value::Object(m) = &mut s {
            let doc = if f.extension {
                format!("{} (extension)", f.doc)
            } else {
                f.doc.to_string()
            };
            m.insert("description".into(), json!(doc));
        }
        properties.insert(f.name.into(), s);
    }
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    // Unknown fields are warnings, never errors: keep the schema open.
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": true,
    })
}

fn ty(t: &Ty) -> Value {
    match t {
        Ty::Text => json!({"type": "string"}),
        Ty::Id(kind) => json!({"type": "string", "pattern": kind.pattern()}),
        Ty::Enum(values) => json!({"type": "string", "enum": values}),
        Ty::Timestamp => json!({"type": "string", "format": "date-time"}),
        Ty::Int { min, max } => {
            let mut s = json!({"type": "integer", "minimum": min});
            if let (Some(max), Value::Object(m)) = (max, &mut s) {
                m.insert("maximum".into(), json!(max));
            }
            s
        }
        Ty::Number { min, max } => json!({"type": "number", "minimum": min, "maximum": max}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Glob | Ty::RelPath => json!({"type": "string", "pattern": REL_PATH_PATTERN}),
        Ty::List(item) => json!({"type": "array", "items": ty(item)}),
        Ty::Object(fields) => object(fields),
        Ty::Map(item) => json!({"type": "object", "additionalProperties": ty(item)}),
        Ty::Any => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_assignment_schema_has_required_fields_and_enums() {
        let s = schema(FileKind::TaskAssignment);
        assert_eq!(s["required"], json!(["meta", "instruction"]));
        assert_eq!(
            s["properties"]["meta"]["properties"]["priority"]["enum"],
            json!(["critical", "high", "medium", "low"])
        );
        assert_eq!(
            s["properties"]["meta"]["properties"]["task_id"]["pattern"],
            json!("^task_[A-Za-z0-9_]+$")
        );
        assert_eq!(s["additionalProperties"], json!(true));
    }

    #[test]
    fn every_kind_has_a_schema() {
        let all = all_schemas();
        for kind in FileKind::ALL {
            assert_eq!(all[kind.as_str()]["type"], json!("object"), "{kind}");
        }
    }
}
