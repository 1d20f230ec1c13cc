//! The two chat fields whose JSON type varies by server: `delta.content` (a string, or
//! Mistral's content parts) and `function.arguments` (a string of JSON, or the JSON itself).
//! Each is read without failing the chunk, and borrowed where it is a string: this is the
//! per-event path.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

/// `function.arguments`: a string of JSON, as the API defines it, or (TGI 2.x, llama.cpp
/// for a while) the JSON itself. The stream stays readable either way: the object is kept
/// as its JSON text and marked, and the canary says what arrived.
pub(super) enum Arguments<'a> {
    Text(Cow<'a, str>),
    Json(Value),
}

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Arguments<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string of JSON, or JSON")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(v)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Borrowed("")))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                let value = Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Arguments::Json(value))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<Self::Value, A::Error> {
                let value = Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Arguments::Json(value))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Arguments::Json(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Arguments::Json(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Arguments::Json(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Arguments::Json(Value::from(v)))
            }
        }
        deserializer.deserialize_any(Visit(std::marker::PhantomData))
    }
}

/// `delta.content`: a string (everyone), or an array of typed parts (Mistral's reasoning
/// models: `[{"type": "thinking", "thinking": [{"type": "text", "text": …}]}]`). The string
/// form is the per-event path and stays borrowed; the rare array form is kept as JSON.
pub(super) enum Content<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Value>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed("")))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut parts = Vec::new();
                while let Some(part) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(Content::Parts(parts))
            }
        }
        deserializer.deserialize_any(Visit(std::marker::PhantomData))
    }
}
