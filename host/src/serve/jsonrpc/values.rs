//! Counts the values of a JSON text without building them, and reads what
//! the top level of a message says of its kind in the same pass.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::policy::reserved::{Plain, checked, is_reserved_error};

pub(super) enum Counted {
    Over,
    /// A key the JSON reader gives a meaning of its own
    /// ([`crate::policy::reserved`]).
    Reserved,
    Invalid(serde_json::Error),
}

/// What the top level of a message says of its kind, read in the pass
/// that counts its values.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Top {
    /// The `method`, when it is a string of at most 64 bytes.
    pub(super) method: Option<String>,
    /// Whether it has an `id` (of any type).
    pub(super) id: bool,
    /// Whether it has a `result` or an `error`: an answer, not a request.
    pub(super) answer: bool,
}

/// Whether `bytes` hold at most `max` JSON values; and what the top
/// level of the message says of its kind.
pub(super) fn within(bytes: &[u8], max: usize) -> Result<Top, Counted> {
    let mut left = max;
    let mut top = Top::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let root = Root {
        left: &mut left,
        top: &mut top,
    };
    match root.deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => Ok(top),
        Err(_) if left == 0 => Err(Counted::Over),
        Err(e) if is_reserved_error(&e) => Err(Counted::Reserved),
        Err(e) => Err(Counted::Invalid(e)),
    }
}

/// The message itself: counted like any value, its keys noted in `top`.
struct Root<'a> {
    left: &'a mut usize,
    top: &'a mut Top,
}

impl<'de> DeserializeSeed<'de> for Root<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        *self.left -= 1;
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Root<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    crate::policy::reserved::accept_scalars!();
    crate::policy::reserved::accept_strings!();
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Count(self.left).visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        Count(&mut *self.left).container()?;
        while let Some(key) = map.next_key::<Key>()? {
            match self.left.checked_sub(1) {
                Some(left) => *self.left = left,
                None => return Err(serde::de::Error::custom("too many values")),
            }
            match key {
                Key::Method => {
                    let method = Method {
                        left: &mut *self.left,
                        into: &mut self.top.method,
                    };
                    map.next_value_seed(method)?;
                    continue;
                }
                Key::Id => self.top.id = true,
                Key::Answer => self.top.answer = true,
                Key::Other => {}
            }
            map.next_value_seed(Count(&mut *self.left))?;
        }
        Ok(())
    }
}

/// A key of the message's top level, as far as its kind goes.
enum Key {
    Method,
    Id,
    Answer,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Name;
        impl Visitor<'_> for Name {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                checked(key)?;
                Ok(match key {
                    "method" => Key::Method,
                    "id" => Key::Id,
                    "result" | "error" => Key::Answer,
                    _ => Key::Other,
                })
            }
        }
        de.deserialize_str(Name)
    }
}

/// The `method`'s value: counted, and kept when it is a short string.
struct Method<'a> {
    left: &'a mut usize,
    into: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Method<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        if *self.left == 0 {
            return Err(serde::de::Error::custom("too many values"));
        }
        *self.left -= 1;
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Method<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    crate::policy::reserved::accept_scalars!();
    fn visit_str<E>(self, method: &str) -> Result<(), E> {
        *self.into = (method.len() <= 64).then(|| method.to_string());
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Count(self.left).visit_seq(seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        Count(self.left).visit_map(map)
    }
}

struct Count<'a>(&'a mut usize);

/// What an array or an object counts, in values: built, each costs
/// about as much as that many scalars (a map or a vector of its own).
pub(super) const CONTAINER: usize = 16;

impl Count<'_> {
    /// Counts the rest of what an array or object costs.
    fn container<E: serde::de::Error>(&mut self) -> Result<(), E> {
        match self.0.checked_sub(CONTAINER - 1) {
            Some(left) => {
                *self.0 = left;
                Ok(())
            }
            None => {
                *self.0 = 0;
                Err(E::custom("too many values"))
            }
        }
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        if *self.0 == 0 {
            return Err(serde::de::Error::custom("too many values"));
        }
        *self.0 -= 1;
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    crate::policy::reserved::accept_scalars!();
    crate::policy::reserved::accept_strings!();
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.container()?;
        while seq.next_element_seed(Count(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.container()?;
        // Each key is a string kept with its value: it counts too.
        while map.next_key::<Plain>()?.is_some() {
            match self.0.checked_sub(1) {
                Some(left) => *self.0 = left,
                None => return Err(serde::de::Error::custom("too many values")),
            }
            map.next_value_seed(Count(&mut *self.0))?;
        }
        Ok(())
    }
}
