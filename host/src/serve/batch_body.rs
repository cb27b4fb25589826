//! A `/v1/tool_calls` body read into only what a batch uses: the fields a
//! batch and its entries know, each entry's arguments kept as their JSON
//! text (parsed when the call runs, after its size check); unknown fields
//! are skipped without being built, and the small fields (ids, names) are
//! built only when they are scalars, so a body holds about its own size.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Longest text of a small field (ids, names, `type`, `session`,
/// `format`) that is read as JSON; a longer one is kept as its text (every
/// such field is refused past 256 bytes anyway).
const SMALL: usize = 4096;

#[derive(Deserialize)]
struct Batch<'a> {
    #[serde(borrow, default)]
    tool_calls: Option<&'a RawValue>,
    #[serde(borrow, default)]
    session: Option<&'a RawValue>,
    #[serde(borrow, default)]
    format: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "async")]
    run_async: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    call_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    function: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// `bytes` (valid JSON or not) as the batch value the dispatcher reads,
/// with only the fields it knows.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    // Anything not read as a batch below is checked to be JSON (without
    // being built): what is not JSON is refused as such, and the dispatcher
    // says what a batch is to the rest. A batch read below is JSON already.
    let not_a_batch = || serde_json::from_slice::<IgnoredAny>(bytes).map(|_| Value::Null);
    if !is_object(std::str::from_utf8(bytes).unwrap_or_default()) {
        return not_a_batch();
    }
    let Ok(batch) = serde_json::from_slice::<Batch<'_>>(bytes) else {
        return not_a_batch();
    };
    let mut out = Map::new();
    if let Some(calls) = batch.tool_calls {
        let calls = match serde_json::from_str::<Vec<&RawValue>>(calls.get()) {
            Ok(calls) => Value::Array(calls.into_iter().map(entry).collect()),
            Err(_) => Value::Bool(false),
        };
        out.insert("tool_calls".into(), calls);
    }
    put(&mut out, "session", batch.session.map(small));
    put(&mut out, "format", batch.format.map(small));
    put(&mut out, "async", batch.run_async.map(small));
    Ok(Value::Object(out))
}

/// One entry with its known fields; anything not an object stays one
/// (`null`), which the dispatcher refuses for that entry.
fn entry(raw: &RawValue) -> Value {
    if !is_object(raw.get()) {
        return Value::Null;
    }
    let Ok(entry) = serde_json::from_str::<Entry<'_>>(raw.get()) else {
        return Value::Null;
    };
    let mut out = Map::new();
    put(&mut out, "id", entry.id.map(small));
    put(&mut out, "call_id", entry.call_id.map(small));
    put(&mut out, "type", entry.kind.map(small));
    put(&mut out, "name", entry.name.map(small));
    put(&mut out, "arguments", entry.arguments.map(arguments));
    if let Some(function) = entry.function {
        let parsed = is_object(function.get())
            .then(|| serde_json::from_str::<Function<'_>>(function.get()).ok())
            .flatten();
        let function = match parsed {
            Some(function) => {
                let mut inner = Map::new();
                put(&mut inner, "name", function.name.map(small));
                put(&mut inner, "arguments", function.arguments.map(arguments));
                Value::Object(inner)
            }
            None => Value::Bool(false),
        };
        out.insert("function".into(), function);
    }
    Value::Object(out)
}

/// Whether JSON `text` is an object (structs would read arrays too).
fn is_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.into(), value);
    }
}

/// A small field as JSON when it is a scalar (a string, number, boolean or
/// null), or its text when it is long; an array or object, which no small
/// field may be, is never built: it reads as `false`, which the dispatcher
/// refuses where it looks at the field.
fn small(raw: &RawValue) -> Value {
    let text = raw.get();
    if text.starts_with(['[', '{']) {
        return Value::Bool(false);
    }
    if text.len() <= SMALL {
        serde_json::from_str(text).unwrap_or(Value::Null)
    } else {
        Value::String(text.to_string())
    }
}

/// Arguments as the JSON text the call parses: a string's content, or the
/// text of any other value.
fn arguments(raw: &RawValue) -> Value {
    let text = raw.get();
    if text == "null" {
        return Value::Null;
    }
    match serde_json::from_str::<String>(text) {
        Ok(decoded) => Value::String(decoded),
        Err(_) => Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_known_fields_are_kept_and_arguments_stay_text() {
        let body = json!({
            "tool_calls": [
                {"id": "1", "type": "function", "junk": [0, 0, 0],
                 "function": {"name": "echo", "arguments": {"text": "hi"}, "x": [0]}},
                {"type": "function_call", "call_id": "2", "name": "echo", "arguments": "{}"},
                5
            ],
            "session": "s",
            "junk": [0, 0, 0]
        });
        let parsed = parse(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            parsed,
            json!({
                "tool_calls": [
                    {"id": "1", "type": "function",
                     "function": {"name": "echo", "arguments": "{\"text\":\"hi\"}"}},
                    {"type": "function_call", "call_id": "2", "name": "echo", "arguments": "{}"},
                    null
                ],
                "session": "s"
            })
        );
        assert!(parse(b"{nope").is_err());
        assert_eq!(parse(b"[1]").unwrap(), Value::Null);
        // Not JSON inside a field the batch reads, or after the object.
        assert!(parse(br#"{"tool_calls": [1,]}"#).is_err());
        assert!(parse(br#"{"junk": [1,], "tool_calls": []}"#).is_err());
        assert!(parse(br#"{"tool_calls": []} x"#).is_err());
        assert!(parse(b"[1,]").is_err());
        // JSON, but not read as a batch (a field twice): for the dispatcher.
        assert_eq!(
            parse(br#"{"session": "a", "session": "b"}"#).unwrap(),
            Value::Null
        );
    }
}
