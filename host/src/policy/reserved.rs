//! Keys the JSON reader gives a meaning of its own. serde_json, with the
//! `raw_value` feature the host uses, builds an object whose first key is
//! `$serde_json::private::RawValue` from the JSON text in its string: a
//! value the bytes do not spell, and a tree a count of the bytes' values
//! never saw. JSON from callers with such a key, at any depth, is refused
//! (MCP messages in `serve/jsonrpc`, tool arguments given as text in
//! `host/checks`): what a check reads is then what a guest gets.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// What keys the JSON reader reserves begin with.
pub(crate) const RESERVED: &str = "$serde_json::private::";

/// The error a reserved key gives while reading (see [`is_reserved_error`]).
const RESERVED_ERROR: &str = "a key the JSON reader reserves";

/// Fails on a key the JSON reader reserves.
pub(crate) fn checked<E: serde::de::Error>(key: &str) -> Result<(), E> {
    match key.starts_with(RESERVED) {
        true => Err(E::custom(RESERVED_ERROR)),
        false => Ok(()),
    }
}

/// Whether a reading failed on a reserved key.
pub(crate) fn is_reserved_error(error: &serde_json::Error) -> bool {
    error.to_string().starts_with(RESERVED_ERROR)
}

/// Any key but a reserved one.
pub(crate) struct Plain;

impl<'de> serde::Deserialize<'de> for Plain {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = Plain;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Plain, E> {
                checked(key).map(|()| Plain)
            }
        }
        de.deserialize_str(Name)
    }
}

/// The visitor methods of a walk that accepts every number, boolean and
/// `null` as it is (`Value = ()`).
macro_rules! accept_scalars {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    };
}
pub(crate) use accept_scalars;

/// The visitor method of a walk that accepts every string as it is.
macro_rules! accept_strings {
    () => {
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
    };
}
pub(crate) use accept_strings;

/// Whether the JSON `text` has a reserved key anywhere (text that is not
/// JSON has none: its reader says what is wrong with it).
pub(crate) fn has_reserved_key(text: &str) -> bool {
    // Spelled without escapes the prefix is in the text; with them, a
    // backslash is. Text with neither (most arguments) is not walked.
    if !text.contains('\\') && !text.contains(RESERVED) {
        return false;
    }
    let mut de = serde_json::Deserializer::from_str(text);
    match Walk.deserialize(&mut de) {
        Ok(()) => false,
        Err(e) => is_reserved_error(&e),
    }
}

/// Walks a JSON value, building nothing, failing on a reserved key.
struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    crate::policy::reserved::accept_scalars!();
    crate::policy::reserved::accept_strings!();
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<Plain>()?.is_some() {
            map.next_value_seed(Walk)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_keys_are_found_at_any_depth_escaped_or_not() {
        for text in [
            r#"{"$serde_json::private::RawValue":"1"}"#,
            r#"{"a":[1,{"b":{"x":1,"$serde_json::private::Number":"2"}}]}"#,
            r#"{"\u0024serde_json::private::RawValue":"1"}"#,
        ] {
            assert!(has_reserved_key(text), "{text}");
        }
        for text in [
            r#"{"a":"$serde_json::private::RawValue"}"#,
            r#"{"x$serde_json::private::RawValue":1}"#,
            "not json",
            "[]",
        ] {
            assert!(!has_reserved_key(text), "{text}");
        }
    }
}
