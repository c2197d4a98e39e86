//! `x-mcp-header` annotations (reference §6.5): which tool arguments are
//! mirrored into `Mcp-Param-*` headers, checked when the tool is added.

use serde_json::{Map, Value};

/// One argument mirrored into an `Mcp-Param-*` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeaderParam {
    /// Property names from the root of `arguments` to the annotated property.
    pub path: Vec<String>,
    /// The annotation value (e.g. `Region` → header `Mcp-Param-Region`).
    pub name: String,
}

/// Whether `s` is a non-empty RFC 9110 token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Keywords whose value is a map of name → subschema (the map itself is not a schema).
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Counts the `x-mcp-header` keys anywhere in the schema tree.
fn count_annotations(schema: &Value) -> usize {
    match schema {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                if k == "x-mcp-header" {
                    1
                } else if SCHEMA_MAPS.contains(&k.as_str()) {
                    match v {
                        Value::Object(children) => children.values().map(count_annotations).sum(),
                        other => count_annotations(other),
                    }
                } else if k == "const" || k == "enum" || k == "default" || k == "examples" {
                    0
                } else {
                    count_annotations(v)
                }
            })
            .sum(),
        Value::Array(items) => items.iter().map(count_annotations).sum(),
        _ => 0,
    }
}

/// The `x-mcp-header` annotations reachable through `properties` chains, checked
/// against §6.5: non-empty token, unique (case-insensitively), only on `string`,
/// `integer` or `boolean` properties, and nowhere else in the schema.
pub(crate) fn header_params(schema: &Value) -> Result<Vec<HeaderParam>, String> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found)?;
    let total = count_annotations(schema);
    if total != found.len() {
        return Err(format!(
            "{} x-mcp-header annotation(s) are not reachable through properties alone (items, anyOf/oneOf/allOf/not, if/then/else, $ref and $defs are not allowed)",
            total - found.len()
        ));
    }
    for (i, a) in found.iter().enumerate() {
        if found[..i]
            .iter()
            .any(|b| b.name.eq_ignore_ascii_case(&a.name))
        {
            return Err(format!(
                "header name {:?} is used more than once (names are case-insensitive)",
                a.name
            ));
        }
    }
    Ok(found)
}

fn collect(
    schema: &Value,
    path: &mut Vec<String>,
    out: &mut Vec<HeaderParam>,
) -> Result<(), String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (name, prop) in props {
        path.push(name.clone());
        if let Some(annotation) = prop.get("x-mcp-header") {
            let where_ = path.join(".");
            let header = annotation
                .as_str()
                .ok_or_else(|| format!("property {where_}: the annotation must be a string"))?;
            if !is_token(header) {
                return Err(format!(
                    "property {where_}: {header:?} is not a non-empty RFC 9110 token"
                ));
            }
            match prop.get("type").and_then(Value::as_str) {
                Some("string" | "integer" | "boolean") => {}
                _ => {
                    return Err(format!(
                        "property {where_}: only string, integer and boolean properties may carry x-mcp-header"
                    ));
                }
            }
            out.push(HeaderParam {
                path: path.clone(),
                name: header.to_owned(),
            });
        }
        collect(prop, path, out)?;
        path.pop();
    }
    Ok(())
}

/// The value at `path` in `arguments`, if present.
pub(crate) fn lookup<'a>(arguments: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = arguments.get(first)?;
    for key in rest {
        value = value.as_object()?.get(key)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::schemas::schema::{CompiledSchema, ToolError};
    use serde_json::json;

    #[test]
    fn valid_annotations_are_collected_in_order() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "Count"}}},
            "plain": {"type": "number"}
        }});
        let h = header_params(&schema).unwrap();
        assert_eq!(
            h,
            vec![
                HeaderParam {
                    path: vec!["region".into()],
                    name: "Region".into()
                },
                HeaderParam {
                    path: vec!["opts".into(), "n".into()],
                    name: "Count".into()
                },
            ]
        );
        let args = json!({"opts": {"n": 3}}).as_object().unwrap().clone();
        assert_eq!(lookup(&args, &h[1].path), Some(&json!(3)));
        assert_eq!(lookup(&args, &h[0].path), None);
    }

    #[test]
    fn invalid_annotations_are_refused() {
        let bad = [
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Re gion"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": 5}}}),
            json!({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"type": "object", "properties": {"a": {"x-mcp-header": "A"}}}),
            json!({"type": "object", "properties": {
                "a": {"type": "string", "x-mcp-header": "Dup"},
                "b": {"type": "string", "x-mcp-header": "dup"}}}),
            json!({"type": "object", "properties": {
                "a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
            json!({"type": "object", "$defs": {"x": {"type": "string", "x-mcp-header": "A"}},
                "properties": {"a": {"$ref": "#/$defs/x"}}}),
        ];
        for schema in bad {
            assert!(header_params(&schema).is_err(), "{schema}");
            assert!(matches!(
                CompiledSchema::compile("t", &schema, None),
                Err(ToolError::InvalidHeaderAnnotation { .. })
            ));
        }
        // A property literally named x-mcp-header is not an annotation.
        let ok = json!({"type": "object", "properties": {"x-mcp-header": {"type": "object"}}});
        assert_eq!(header_params(&ok).unwrap(), vec![]);
    }
}
