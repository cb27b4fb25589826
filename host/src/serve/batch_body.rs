//! A `/v1/tool_calls` body (and a `call --batch` file) read into only what
//! a batch uses: the fields a batch and its entries know, each entry's
//! arguments kept as their JSON text (parsed when the call runs, after its
//! size check); unknown fields are skipped without being built, so a body
//! holds about its own size. A key given twice counts once, its last value,
//! as a JSON value reads it.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A field's JSON text when the field is there, `null` included (a field
/// read as an `Option` is absent when `null`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

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
    /// Kept when `null` too: a `function` that is not an object is refused
    /// as such.
    #[serde(borrow, default, deserialize_with = "present")]
    function: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// The fields of an object that a reader knows, each the last value of its
/// key; the rest are skipped without being built (a key with escapes is
/// unescaped, then dropped).
struct Fields<'a> {
    keys: &'static [&'static str],
    values: Vec<Option<&'a RawValue>>,
}

impl<'a> Fields<'a> {
    /// The object `text`'s fields named `keys`, or `None` when `text` is not
    /// an object.
    fn read(text: &'a str, keys: &'static [&'static str]) -> Option<Self> {
        let mut reader = serde_json::Deserializer::from_str(text);
        let fields = Deserializer::deserialize_map(&mut reader, Known(keys)).ok()?;
        reader.end().ok()?;
        Some(fields)
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        let at = self.keys.iter().position(|known| *known == key)?;
        self.values[at]
    }
}

/// Reads an object's fields named by its keys.
struct Known(&'static [&'static str]);

impl<'de> serde::de::Visitor<'de> for Known {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Fields<'de>, M::Error> {
        let mut values = vec![None; self.0.len()];
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().position(|known| *known == key) {
                Some(at) => values[at] = Some(map.next_value::<&'de RawValue>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Fields {
            keys: self.0,
            values,
        })
    }
}

/// The object `text` read as `T`; when a key is given twice (which `T`
/// refuses), read by `from` from its fields named `keys`, each key's last
/// value.
fn object<'a, T: Deserialize<'a>>(
    text: &'a str,
    keys: &'static [&'static str],
    from: fn(&Fields<'a>) -> T,
) -> Option<T> {
    if !is_object(text) {
        return None;
    }
    serde_json::from_str::<T>(text)
        .ok()
        .or_else(|| Some(from(&Fields::read(text, keys)?)))
}

/// A field as the structs read it: absent when `null`.
fn field<'a>(fields: &Fields<'a>, key: &str) -> Option<&'a RawValue> {
    fields.get(key).filter(|raw| raw.get() != "null")
}

impl<'a> Batch<'a> {
    const KEYS: &'static [&'static str] = &["tool_calls", "session", "format", "async"];

    fn from_fields(fields: &Fields<'a>) -> Self {
        Self {
            tool_calls: field(fields, "tool_calls"),
            session: field(fields, "session"),
            format: field(fields, "format"),
            run_async: field(fields, "async"),
        }
    }
}

impl<'a> Entry<'a> {
    const KEYS: &'static [&'static str] =
        &["id", "call_id", "type", "name", "arguments", "function"];

    fn from_fields(fields: &Fields<'a>) -> Self {
        Self {
            id: field(fields, "id"),
            call_id: field(fields, "call_id"),
            kind: field(fields, "type"),
            name: field(fields, "name"),
            arguments: field(fields, "arguments"),
            function: fields.get("function"),
        }
    }
}

impl<'a> Function<'a> {
    const KEYS: &'static [&'static str] = &["name", "arguments"];

    fn from_fields(fields: &Fields<'a>) -> Self {
        Self {
            name: field(fields, "name"),
            arguments: field(fields, "arguments"),
        }
    }
}

/// `bytes` (valid JSON or not) as the batch value the dispatcher reads,
/// with only the fields it knows, and how many entries its `tool_calls`
/// has. Past `most` entries none is built (the batch is to be refused for
/// its count): an entry costs more built than in the body.
pub(crate) fn parse(bytes: &[u8], most: usize) -> Result<(Value, usize), serde_json::Error> {
    // Anything not read as a batch below is checked to be JSON (without
    // being built): what is not JSON is refused as such, and the dispatcher
    // says what a batch is to the rest. A batch read below is JSON already.
    let not_a_batch = || serde_json::from_slice::<IgnoredAny>(bytes).map(|_| (Value::Null, 0));
    let Ok(text) = std::str::from_utf8(bytes) else {
        return not_a_batch();
    };
    let Some(batch) = object(text, Batch::KEYS, Batch::from_fields) else {
        return not_a_batch();
    };
    let mut out = Map::new();
    let mut count = 0;
    if let Some(calls) = batch.tool_calls {
        let mut reader = serde_json::Deserializer::from_str(calls.get());
        let read = Deserializer::deserialize_seq(&mut reader, Entries(most))
            .and_then(|entries| reader.end().map(|()| entries));
        let calls = match read {
            Ok((entries, all)) => {
                count = all;
                Value::Array(entries.into_iter().map(entry).collect())
            }
            Err(_) => Value::Bool(false),
        };
        out.insert("tool_calls".into(), calls);
    }
    put(&mut out, "session", batch.session.map(small));
    put(&mut out, "format", batch.format.map(small));
    put(&mut out, "async", batch.run_async.map(small));
    Ok((Value::Object(out), count))
}

/// Reads an array's entries as their text when there are at most its
/// number of them (none otherwise), and counts them.
struct Entries(usize);

impl<'de> serde::de::Visitor<'de> for Entries {
    type Value = (Vec<&'de RawValue>, usize);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<Self::Value, S::Error> {
        let mut entries = Vec::new();
        while entries.len() <= self.0 {
            match seq.next_element::<&'de RawValue>()? {
                Some(entry) => entries.push(entry),
                None => {
                    let count = entries.len();
                    return Ok((entries, count));
                }
            }
        }
        let mut count = entries.len();
        while seq.next_element::<IgnoredAny>()?.is_some() {
            count += 1;
        }
        Ok((Vec::new(), count))
    }
}

/// One entry with its known fields; anything not an object stays one
/// (`null`), which the dispatcher refuses for that entry.
fn entry(raw: &RawValue) -> Value {
    let Some(entry) = object(raw.get(), Entry::KEYS, Entry::from_fields) else {
        return Value::Null;
    };
    let mut out = Map::new();
    put(&mut out, "id", entry.id.map(small));
    put(&mut out, "call_id", entry.call_id.map(small));
    put(&mut out, "type", entry.kind.map(small));
    put(&mut out, "name", entry.name.map(small));
    put(&mut out, "arguments", entry.arguments.map(arguments));
    if let Some(function) = entry.function {
        let function = match object(function.get(), Function::KEYS, Function::from_fields) {
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

/// A small field (ids, names, `type`, `session`, `format`, `async`) as
/// JSON when it is a scalar (a string of any length, a number, a boolean or
/// null). An array or object, which no small field may be, is never built,
/// and neither is a scalar that does not read as one (a lone surrogate, a
/// number out of range): each reads as `false`, which the dispatcher
/// refuses where it looks at the field.
fn small(raw: &RawValue) -> Value {
    let text = raw.get();
    if text.starts_with(['[', '{']) {
        return Value::Bool(false);
    }
    serde_json::from_str(text).unwrap_or(Value::Bool(false))
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

    fn read(bytes: &[u8]) -> Result<Value, serde_json::Error> {
        parse(bytes, 1024).map(|(batch, _)| batch)
    }

    /// Entries are counted, and built only up to the most a batch may have.
    #[test]
    fn entries_past_the_most_are_counted_not_built() {
        let body = |n: usize| {
            let entries = vec![r#"{"id": "a", "function": {"name": "echo"}}"#; n];
            format!(
                r#"{{"tool_calls": [{}], "session": "s"}}"#,
                entries.join(",")
            )
        };
        let (batch, count) = parse(body(3).as_bytes(), 3).unwrap();
        assert_eq!(count, 3);
        assert_eq!(batch["tool_calls"].as_array().unwrap().len(), 3);
        assert_eq!(batch["tool_calls"][2]["function"]["name"], "echo");
        let (batch, count) = parse(body(4).as_bytes(), 3).unwrap();
        assert_eq!(count, 4);
        assert_eq!(batch["tool_calls"], json!([]));
        assert_eq!(batch["session"], "s");
        let (_, count) = parse(body(0).as_bytes(), 3).unwrap();
        assert_eq!(count, 0);
        // Past the most, what follows is still checked to be JSON.
        assert!(parse(br#"{"tool_calls": [1, 2, 3, 4, }"#, 3).is_err());
        assert!(parse(br#"{"tool_calls": [1, 2, 3, 4] x}"#, 3).is_err());
        assert_eq!(
            parse(br#"{"tool_calls": {"a": 1}}"#, 3).unwrap(),
            (json!({"tool_calls": false}), 0)
        );
    }

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
        let parsed = read(body.to_string().as_bytes()).unwrap();
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
        assert!(read(b"{nope").is_err());
        assert_eq!(read(b"[1]").unwrap(), Value::Null);
        // Not JSON inside a field the batch reads, or after the object.
        assert!(read(br#"{"tool_calls": [1,]}"#).is_err());
        assert!(read(br#"{"junk": [1,], "tool_calls": []}"#).is_err());
        assert!(read(br#"{"tool_calls": []} x"#).is_err());
        assert!(read(b"[1,]").is_err());
    }

    /// A key given twice counts once, its last value, at every level.
    #[test]
    fn a_key_given_twice_reads_as_its_last_value() {
        let body = r#"{"session": "a", "tool_calls": [], "session": "b", "tool_calls": [
            {"id": "1", "id": "2", "function": {"name": "nope", "name": "echo", "arguments": "{}"}},
            {"function": null, "call_id": null, "id": "3"}
        ]}"#;
        assert_eq!(
            read(body.as_bytes()).unwrap(),
            json!({
                "session": "b",
                "tool_calls": [
                    {"id": "2", "function": {"name": "echo", "arguments": "{}"}},
                    {"function": false, "id": "3"}
                ]
            })
        );
    }

    /// Read again for a key given twice, an object keeps only the fields
    /// a batch knows: what else it holds is skipped unbuilt, escaped keys
    /// read as their text.
    #[test]
    fn a_key_given_twice_keeps_only_known_fields() {
        let fields = Fields::read(
            r#"{"tool\u005fcalls": [1], "junk": {"a": [1, 2]}, "session": "a", "session": "b"}"#,
            Batch::KEYS,
        )
        .unwrap();
        assert_eq!(fields.get("tool_calls").unwrap().get(), "[1]");
        assert_eq!(fields.get("session").unwrap().get(), r#""b""#);
        assert!(fields.get("format").is_none());
        assert!(fields.get("junk").is_none());
        assert!(Fields::read("[1]", Batch::KEYS).is_none());
        assert!(Fields::read(r#"{"a": 1} x"#, Batch::KEYS).is_none());
    }

    /// Ids and names are read as the JSON they are at any length (escapes
    /// and all); one that does not read as a scalar is refused, not
    /// dropped.
    #[test]
    fn small_fields_read_whole_or_are_refused() {
        let long = "x".repeat(5000);
        let body = format!(
            r#"{{"tool_calls": [{{"id": "{long}", "name": "\u0041b"}},
                {{"id": "\ud800", "call_id": 1e400, "type": ["function"], "name": {{"a": 1}}}}],
               "format": "\udfff"}}"#
        );
        assert_eq!(
            read(body.as_bytes()).unwrap(),
            json!({
                "tool_calls": [
                    {"id": long, "name": "Ab"},
                    {"id": false, "call_id": false, "type": false, "name": false}
                ],
                "format": false
            })
        );
    }
}
