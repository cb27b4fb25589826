//! Tool definitions as models see them: the OpenAI function-calling `tools`
//! array (optionally in strict mode) and the MCP `tools/list` entries.

use serde_json::{Map, Value, json};

use crate::contract::spec::ToolSpec;

/// One tool in the OpenAI `tools` shape. With `strict`, the parameters are
/// rewritten for OpenAI's strict mode when the schema allows it (otherwise the
/// tool is given non-strict).
pub fn openai_tool(spec: &ToolSpec, strict: bool) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), json!(spec.name));
    function.insert("description".into(), json!(spec.description));
    match strict.then(|| strict_schema(&spec.parameters)).flatten() {
        Some(parameters) => {
            function.insert("parameters".into(), parameters);
            function.insert("strict".into(), json!(true));
        }
        None => {
            function.insert("parameters".into(), spec.parameters.clone());
        }
    }
    json!({ "type": "function", "function": function })
}

/// One tool in the MCP `tools/list` shape: its `title` and `outputSchema`
/// when it declares them, and annotations from the hints (whose `title`,
/// for clients older than `title`, has the emoji in front).
pub fn mcp_tool(spec: &ToolSpec) -> Value {
    let shown = spec.title.as_deref().unwrap_or(&spec.name);
    let annotated = match &spec.emoji {
        Some(emoji) => format!("{emoji} {shown}"),
        None => shown.to_string(),
    };
    let mut tool = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.parameters,
        "annotations": {
            "title": annotated,
            "readOnlyHint": spec.read_only,
            "destructiveHint": spec.destructive,
            "openWorldHint": spec.permissions.iter().any(|p| p.starts_with("network:")),
        },
    });
    if let Some(title) = &spec.title {
        tool["title"] = json!(title);
    }
    if let Some(schema) = &spec.output_schema {
        tool["outputSchema"] = schema.clone();
    }
    tool
}

/// Keywords OpenAI strict mode accepts in a schema.
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "description",
    "title",
    "anyOf",
    "$defs",
    "$ref",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Rewrites a schema for OpenAI strict mode: every object closed
/// (`additionalProperties: false`) with every property required, optional
/// properties made nullable, defaults dropped. `None` when the schema uses
/// something strict mode cannot express (open maps, `oneOf`, `not`, ...).
pub fn strict_schema(schema: &Value) -> Option<Value> {
    let object = schema.as_object()?;
    let mut out = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "default" | "examples" | "$schema" | "$id" | "readOnly" | "writeOnly" => {}
            "properties" => {
                let mut properties = Map::new();
                for (name, property) in value.as_object()? {
                    properties.insert(name.clone(), strict_schema(property)?);
                }
                out.insert(key.clone(), Value::Object(properties));
            }
            "items" => {
                out.insert(key.clone(), strict_schema(value)?);
            }
            "anyOf" => {
                let variants = value
                    .as_array()?
                    .iter()
                    .map(strict_schema)
                    .collect::<Option<Vec<_>>>()?;
                out.insert(key.clone(), Value::Array(variants));
            }
            "$defs" => {
                let mut defs = Map::new();
                for (name, def) in value.as_object()? {
                    defs.insert(name.clone(), strict_schema(def)?);
                }
                out.insert(key.clone(), Value::Object(defs));
            }
            "additionalProperties" if value != &Value::Bool(false) => return None,
            k if STRICT_KEYWORDS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            _ => return None,
        }
    }
    let is_object = match out.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => out.contains_key("properties"),
    };
    if is_object {
        let required: Vec<String> = out
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let mut properties = match out.remove("properties") {
            Some(Value::Object(p)) => p,
            _ => Map::new(),
        };
        for (name, property) in properties.iter_mut() {
            if !required.contains(name) {
                *property = nullable(std::mem::take(property));
            }
        }
        let names: Vec<Value> = properties.keys().map(|k| json!(k)).collect();
        out.insert("properties".into(), Value::Object(properties));
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), json!(false));
    }
    Some(Value::Object(out))
}

/// `{"type": "string"}` → `{"type": ["string", "null"]}`; other shapes are
/// wrapped in `anyOf` with null.
fn nullable(mut schema: Value) -> Value {
    let null = json!("null");
    if let Some(object) = schema.as_object_mut() {
        match object.get_mut("type") {
            Some(Value::String(t)) if t != "null" => {
                let t = std::mem::take(t);
                object.insert("type".into(), json!([t, "null"]));
                if let Some(Value::Array(values)) = object.get_mut("enum")
                    && !values.contains(&Value::Null)
                {
                    values.push(Value::Null);
                }
                return schema;
            }
            Some(Value::Array(types)) => {
                if !types.contains(&null) {
                    types.push(null);
                }
                return schema;
            }
            _ => {}
        }
    }
    json!({ "anyOf": [schema, { "type": "null" }] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_closes_objects_and_makes_optional_fields_nullable() {
        let schema = json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "t"},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "nested": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            },
            "required": ["text"],
        });
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "t"},
                    "mode": {"type": ["string", "null"], "enum": ["a", "b", null]},
                    "nested": {
                        "type": ["object", "null"],
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"],
                        "additionalProperties": false,
                    },
                },
                "required": ["mode", "nested", "text"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn open_maps_and_unsupported_keywords_are_not_strict() {
        let open = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(strict_schema(&open), None);
        let one_of =
            json!({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}});
        assert_eq!(strict_schema(&one_of), None);
    }
}
