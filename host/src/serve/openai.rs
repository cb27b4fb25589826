//! The OpenAI shapes: a batch `{"tool_calls": [...]}` (entries as Chat
//! Completions or Responses give them) turned into calls and their outcomes
//! into `{"tool_results": [...]}` in the batch's `format`, and tools as the
//! function-calling `tools` array (optionally in strict mode).

use serde_json::{Map, Value, json};

use crate::caller::Caller;
use crate::contract::CallOutput;
use crate::contract::spec::ToolSpec;
use crate::error::{CallError, ErrorKind};
use crate::host::Host;
use crate::host::{Arguments, CallRequest};
use crate::serve::content::{Format, chat_content, responses_output};
use crate::toolsets::Selection;

/// Runs a batch in the OpenAI shape,
/// `{"tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}`
/// (or Responses' `{"type": "function_call", "call_id", "name",
/// "arguments"}` entries), with at most the host's batch concurrency in
/// flight, and returns `{"tool_results": [...]}` in request order: one
/// result per call, whatever happens to the others. Each result is a
/// Chat Completions tool message, `{"tool_call_id", "role": "tool",
/// "name", "content"}`, or with `"format": "responses"` a
/// `{"type": "function_call_output", "call_id", "output"}` item.
/// `session` applies to every call of the batch.
pub async fn dispatch_batch(host: &Host, batch: &Value, session: Option<&str>) -> Value {
    let caller = host.caller();
    dispatch_batch_as(host, &caller, batch, session).await
}

/// [`dispatch_batch`] as `caller`.
pub async fn dispatch_batch_as(
    host: &Host,
    caller: &Caller,
    batch: &Value,
    session: Option<&str>,
) -> Value {
    let admit: crate::host::call::Admit = std::sync::Arc::new(|outcome| outcome);
    dispatch_batch_admitting(host, caller, batch, session, admit)
        .await
        .into_value()
}

/// [`dispatch_batch_as`], each outcome passed through `admit` as
/// its call finishes.
pub(crate) async fn dispatch_batch_admitting(
    host: &Host,
    caller: &Caller,
    batch: &Value,
    session: Option<&str>,
    admit: crate::host::call::Admit,
) -> BatchAnswer {
    let refused = |problem: &str| {
        BatchAnswer::Refused(CallError::new(ErrorKind::InvalidRequest, problem).model_text())
    };
    let Some(calls) = batch.get("tool_calls").and_then(Value::as_array) else {
        return refused("a batch is an object with a \"tool_calls\" array");
    };
    let format = match batch.get("format") {
        None | Some(Value::Null) => Format::default(),
        Some(Value::String(name)) => match Format::parse(name) {
            Ok(format) => format,
            Err(problem) => return refused(&problem),
        },
        Some(_) => return refused("\"format\" must be a string"),
    };
    // Every entry is parsed here, once: the well-formed ones run, the
    // others are answered with why.
    let mut requests = Vec::with_capacity(calls.len());
    let mut malformed = Vec::with_capacity(calls.len());
    for (index, call) in calls.iter().enumerate() {
        match batch_request(index, call, session) {
            Ok(request) => {
                requests.push(request);
                malformed.push(None);
            }
            Err(error) => malformed.push(Some(error_content(&error))),
        }
    }
    // `dispatch_many` answers every request, in order.
    let mut outcomes = host
        .dispatch_admitting(caller, requests, admit)
        .await
        .into_iter()
        .map(|outcome| match outcome {
            Ok(output) => content_of(&output, format),
            Err(error) => error_content(&error),
        });
    let results = calls
        .iter()
        .zip(malformed)
        .map(|(call, malformed)| {
            let content = malformed.or_else(|| outcomes.next()).unwrap_or_default();
            tool_result(call, content, format)
        })
        .collect();
    BatchAnswer::Results(results)
}

/// A batch's answer: `{"error": TEXT}` when the batch itself is refused,
/// otherwise `{"tool_results": [...]}`, one result per call in request
/// order. Written as JSON straight from here (the keys in the order a
/// [`Value`] would write them), without a map built for each result.
pub(crate) enum BatchAnswer {
    Refused(String),
    Results(Vec<ToolResult>),
}

impl BatchAnswer {
    /// Why the batch was refused, if it was.
    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            Self::Refused(error) => Some(error),
            Self::Results(_) => None,
        }
    }

    /// The results (none when the batch was refused).
    pub(crate) fn results(&self) -> &[ToolResult] {
        match self {
            Self::Refused(_) => &[],
            Self::Results(results) => results,
        }
    }

    /// The answer as a JSON value (as it is written).
    pub(crate) fn into_value(self) -> Value {
        // Strings and values only: writing them cannot fail.
        serde_json::to_value(&self).unwrap_or_default()
    }
}

impl serde::Serialize for BatchAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            Self::Refused(error) => map.serialize_entry("error", error)?,
            Self::Results(results) => map.serialize_entry("tool_results", results)?,
        }
        map.end()
    }
}

#[cfg(test)]
impl BatchAnswer {
    /// Chat Completions results with these contents, for tests.
    pub(crate) fn of_contents(contents: impl IntoIterator<Item = Value>) -> Self {
        let result = |content| tool_result(&Value::Null, content, Format::Chat);
        Self::Results(contents.into_iter().map(result).collect())
    }
}

/// One entry of `tool_results`: a Chat Completions tool message, or a
/// Responses `function_call_output` item.
pub(crate) struct ToolResult {
    format: Format,
    /// The id the model gave the call (a string or a number), or null.
    id: Value,
    /// The function's name as the call gave it (Chat Completions only).
    name: Value,
    content: Value,
}

impl ToolResult {
    /// The result's `content` (Chat Completions) or `output` (Responses).
    pub(crate) fn content(&self) -> &Value {
        &self.content
    }
}

impl serde::Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        // Keys in sorted order, as a JSON value's map writes them.
        match self.format {
            Format::Chat => {
                let mut map = serializer.serialize_map(Some(4))?;
                map.serialize_entry("content", &self.content)?;
                map.serialize_entry("name", &self.name)?;
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", &self.id)?;
                map.end()
            }
            Format::Responses => {
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("call_id", &self.id)?;
                map.serialize_entry("output", &self.content)?;
                map.serialize_entry("type", "function_call_output")?;
                map.end()
            }
        }
    }
}

/// The OpenAI `tools` array for a selection; `strict` rewrites schemas for
/// strict mode where they allow it.
pub fn tools(host: &Host, selection: &Selection, strict: bool) -> Result<Value, String> {
    tools_for(host, &host.caller(), selection, strict)
}

/// [`tools`] for `caller`.
pub fn tools_for(
    host: &Host,
    caller: &Caller,
    selection: &Selection,
    strict: bool,
) -> Result<Value, String> {
    let tools = host.select_for(caller, selection)?;
    Ok(Value::Array(
        tools.iter().map(|t| openai_tool(t, strict)).collect(),
    ))
}
/// A batch entry as a [`CallRequest`] in `session`, or why it is malformed.
fn batch_request(
    index: usize,
    call: &Value,
    session: Option<&str>,
) -> Result<CallRequest, CallError> {
    let malformed = |what: &str| {
        CallError::new(
            ErrorKind::InvalidRequest,
            format!("tool_calls[{index}] {what}"),
        )
    };
    // Chat Completions' entries carry a `function` object; Responses' are
    // `function_call` items with the name and arguments at the top.
    let function = match call.get("function") {
        Some(function) => function
            .as_object()
            .ok_or_else(|| malformed("has a \"function\" that is not an object"))?,
        None if call.get("type").and_then(Value::as_str) == Some("function_call") => call
            .as_object()
            .ok_or_else(|| malformed("is not an object"))?,
        None => {
            return Err(malformed(
                "has no \"function\" object (nor is it a Responses \"function_call\" item)",
            ));
        }
    };
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("has no function name"))?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Arguments::Text(String::new()),
        Some(Value::String(text)) => Arguments::Text(text.clone()),
        Some(value) => Arguments::Value(value.clone()),
    };
    if call_id(call).is_some_and(|id| !(id.is_string() || id.is_number() || id.is_null())) {
        return Err(malformed(
            "has an id that is not a string; give each call a string id (\"call_1\")",
        ));
    }
    let mut request = CallRequest::new(name, arguments);
    request.call_id = call_id(call).and_then(Value::as_str).map(String::from);
    request.session = session.map(String::from);
    Ok(request)
}

/// The id the model gave a call: Chat Completions' `id`, or Responses'
/// `call_id`.
fn call_id(call: &Value) -> Option<&Value> {
    call.get("call_id").or_else(|| call.get("id"))
}

/// One entry of `tool_results` in `format`, answering the batch entry
/// `call` with `content`.
fn tool_result(call: &Value, content: Value, format: Format) -> ToolResult {
    // Only an id a call may have (a string or a number) is echoed.
    let id = call_id(call)
        .filter(|id| id.is_string() || id.is_number())
        .cloned()
        .unwrap_or(Value::Null);
    // Only a name a call may have (a string) is echoed.
    let name = match format {
        Format::Chat => call
            .get("function")
            .and_then(|function| function.get("name"))
            .or_else(|| call.get("name"))
            .filter(|name| name.is_string())
            .cloned()
            .unwrap_or(Value::Null),
        Format::Responses => Value::Null,
    };
    ToolResult {
        format,
        id,
        name,
        content,
    }
}

/// A call's output as a result's `content` (or `output`) in `format`.
fn content_of(output: &CallOutput, format: Format) -> Value {
    match format {
        Format::Chat => chat_content(output),
        Format::Responses => responses_output(output),
    }
}

/// A failed call's `content`: its error as JSON text.
fn error_content(error: &CallError) -> Value {
    Value::String(error.to_json().to_string())
}

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

    /// The answer written straight from its results is what the results
    /// built as JSON values (a map for each) wrote: the same keys, in the
    /// same order, for every shape of entry.
    #[test]
    fn a_batch_answer_is_written_as_maps_of_its_results_would_be() {
        let calls = [
            json!({"id": "call_1", "type": "function", "function": {"name": "echo"}}),
            json!({"call_id": 7, "type": "function_call", "name": "grep"}),
            json!({"id": {"no": 1}, "function": {"name": ["x"]}}),
            json!({"id": null, "name": "\u{7f}\u{202e}"}),
            json!("not an object"),
            json!({"function": "name"}),
        ];
        let contents = [
            json!("{\"text\":\"hi\"}"),
            json!([{"type": "text", "text": "a"}]),
            Value::Null,
        ];
        for format in [Format::Chat, Format::Responses] {
            let results: Vec<ToolResult> = calls
                .iter()
                .zip(contents.iter().cycle())
                .map(|(call, content)| tool_result(call, content.clone(), format))
                .collect();
            let maps: Vec<Value> = results
                .iter()
                .map(|result| match format {
                    Format::Chat => json!({
                        "tool_call_id": result.id,
                        "role": "tool",
                        "name": result.name,
                        "content": result.content,
                    }),
                    Format::Responses => json!({
                        "type": "function_call_output",
                        "call_id": result.id,
                        "output": result.content,
                    }),
                })
                .collect();
            let written = serde_json::to_string_pretty(&BatchAnswer::Results(results)).unwrap();
            let expected = json!({ "tool_results": maps });
            assert_eq!(written, serde_json::to_string_pretty(&expected).unwrap());
            assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), expected);
        }
        let refused = BatchAnswer::Refused("invalid_request: no".into());
        assert_eq!(
            serde_json::to_string(&refused).unwrap(),
            r#"{"error":"invalid_request: no"}"#
        );
        assert_eq!(refused.error(), Some("invalid_request: no"));
        assert!(refused.results().is_empty());
        assert_eq!(
            refused.into_value(),
            json!({"error": "invalid_request: no"})
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
