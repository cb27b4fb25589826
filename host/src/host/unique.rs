//! Arguments given as JSON text, read into a value, noting whether a key
//! is given twice in one object. The guest gets the text, unless it has
//! such a key: a reader that keeps a repeated key's first value would read
//! other arguments than the ones the host checked (the schema, the argument
//! rules), which keep its last, so the guest then gets the value checked,
//! written again.

use std::cell::Cell;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `text` as a JSON value (a key given twice keeps its last value), and
/// whether a key was given twice in one object; or why it is not JSON.
pub(super) fn read(text: &str) -> Result<(Value, bool), serde_json::Error> {
    let repeated = Cell::new(false);
    let mut reader = serde_json::Deserializer::from_str(text);
    let value = Unique(&repeated).deserialize(&mut reader)?;
    reader.end()?;
    Ok((value, repeated.get()))
}

#[derive(Clone, Copy)]
struct Unique<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = seq.next_element_seed(self)? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self)?;
            if object.insert(key, value).is_some() {
                self.0.set(true);
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_twice_in_one_object_is_noted_anywhere() {
        for text in [
            r#"{"text": 5, "text": "ok"}"#,
            r#"{"a": [{"b": 1, "c": 2, "b": 3}]}"#,
            r#"{"a": {"x": 1}, "b": 2, "a": {"x": 1}}"#,
            r#"{"t\u0065xt": 1, "text": 2}"#,
        ] {
            let (value, repeated) = read(text).unwrap();
            assert!(repeated, "{text}");
            assert_eq!(
                value,
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
        }
    }

    /// Everything reads as serde_json reads it; only a repeated key is
    /// noted.
    #[test]
    fn json_without_a_repeated_key_reads_as_a_value_does() {
        for text in [
            r#"{"text": "hi", "n": 1, "f": 1.5e-7, "big": 18446744073709551615, "neg": -3}"#,
            r#"{"a": {"a": {"a": [1, {"a": null}, true, false, "a"]}}, "b": {"a": 2}}"#,
            r#"{"esc": "\u00e9\n\"", "": 0, "list": [[], {}, [{}]]}"#,
            r#"[1, 2, {"x": 0.1}]"#,
            "\"text\"",
            "12",
        ] {
            let (value, repeated) = read(text).unwrap();
            assert!(!repeated, "{text}");
            assert_eq!(
                value,
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
        }
        for text in ["{", "[1,]", r#"{"a": 1} x"#, "nope", ""] {
            assert!(read(text).is_err(), "{text}");
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(read(&deep).is_err());
    }
}
