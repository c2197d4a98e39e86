//! One pass from the bytes of a JSON-RPC message to a JSON value, with
//! `params._meta` filtered on the way.
//!
//! The unknown keys of `params._meta` are kept only while their raw text fits
//! a generous multiple of what [`super::RequestMeta`] keeps (which then applies
//! the exact budget on compact JSON); the rest are checked for syntax and
//! skipped, never built into a tree, so junk there costs its bytes and not a
//! tree of allocations. Everything else is read as [`serde_json::from_slice`]
//! would read it, in the same single scan of the input.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use super::meta::{MAX_EXTRA_META_BYTES, MAX_TRACE_VALUE_LEN, TRACE_KEYS};
use super::meta::{is_known_key, ws_slack};

/// Parses one JSON message from bytes, as [`serde_json::from_slice`] does,
/// except that the unknown keys of `params._meta` larger than the server
/// would keep are checked for syntax and skipped.
pub(super) fn parse_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Level::Message.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// The top-level keys of a message that JSON-RPC reads, taken out in the one
/// pass without building the message's own object. A repeated key keeps its
/// last value, as in a JSON object.
#[derive(Debug, Default)]
pub(super) struct Envelope {
    pub(super) id: Option<Value>,
    pub(super) jsonrpc: Option<Value>,
    pub(super) method: Option<Value>,
    pub(super) params: Option<Value>,
    /// Whether a `result` or an `error` key is present (a response).
    pub(super) responds: bool,
}

/// What a message is at its top level.
#[derive(Debug)]
// Returned by value from one call and matched at once: boxing the envelope
// would add the allocation this type exists to avoid.
#[allow(clippy::large_enum_variant)]
pub(super) enum Top {
    /// An object: its envelope.
    Object(Envelope),
    /// An array (a batch).
    Array,
    /// Any other JSON value.
    Other,
}

/// Parses one JSON message from bytes into its [`Top`], with `params` read as
/// [`parse_value`] reads it. Every other key is still parsed (invalid JSON
/// anywhere is an error), then dropped.
pub(super) fn parse_envelope(bytes: &[u8]) -> Result<Top, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let top = de.deserialize_any(TopVisitor)?;
    de.end()?;
    Ok(top)
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other)
    }

    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        Level::Message.visit_seq(seq).map(|_| Top::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut envelope = Envelope::default();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "id" => envelope.id = Some(map.next_value()?),
                "jsonrpc" => envelope.jsonrpc = Some(map.next_value()?),
                "method" => envelope.method = Some(map.next_value()?),
                "params" => envelope.params = Some(map.next_value_seed(Level::Params)?),
                other => {
                    envelope.responds |= other == "result" || other == "error";
                    map.next_value::<Value>()?;
                }
            }
        }
        Ok(Top::Object(envelope))
    }
}

/// Where in the message a value sits, which decides how its object is read.
#[derive(Clone, Copy)]
enum Level {
    /// The message itself: its `params` is read as [`Level::Params`].
    Message,
    /// `params`: its `_meta` is read as [`Level::Meta`].
    Params,
    /// `params._meta`: unknown keys within the budget only.
    Meta,
}

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        // Room for the usual few keys at once (`name`, `arguments`, `_meta`;
        // the `_meta` keys of a request) instead of growing twice.
        let mut obj = Map::with_capacity(4);
        match self {
            Level::Message | Level::Params => {
                let nested = match self {
                    Level::Message => "params",
                    _ => "_meta",
                };
                while let Some(key) = map.next_key::<String>()? {
                    let value = if key == nested {
                        map.next_value_seed(self.inner())?
                    } else {
                        map.next_value::<Value>()?
                    };
                    obj.insert(key, value);
                }
            }
            Level::Meta => {
                let mut left = ws_slack(MAX_EXTRA_META_BYTES);
                while let Some(key) = map.next_key::<String>()? {
                    if is_known_key(&key) {
                        let value = map.next_value::<Value>()?;
                        obj.insert(key, value);
                        continue;
                    }
                    let raw = map.next_value::<&'de RawValue>()?;
                    let len = raw.get().len();
                    let keep = if TRACE_KEYS.contains(&key.as_str()) {
                        len <= ws_slack(MAX_TRACE_VALUE_LEN)
                    } else if len + key.len() <= left {
                        left -= len + key.len();
                        true
                    } else {
                        false
                    };
                    if keep {
                        let value = serde_json::from_str(raw.get())
                            .map_err(<A::Error as serde::de::Error>::custom)?;
                        obj.insert(key, value);
                    }
                }
            }
        }
        Ok(Value::Object(obj))
    }
}

impl Level {
    /// The level of the one nested object this level treats specially.
    fn inner(self) -> Level {
        match self {
            Level::Message => Level::Params,
            Level::Params | Level::Meta => Level::Meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn without_large_meta_it_reads_what_serde_json_reads() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,2.5,-3,null,true],"_meta":{"x":{"y":"z"},"progressToken":7}}}"#,
            r#"{"params":[1,2],"id":"s"}"#,
            r#"{"params":{"_meta":[1]}}"#,
            r#"{"params":{"_meta":{"k":1},"_meta":{"j":2}}}"#,
            r#"[{"params":{"_meta":{}}}]"#,
            r#" "just a string" "#,
            r#"{"a":{"params":{"_meta":{"x":1}}},"b":"\u00e9\n"}"#,
            "1e400",
        ] {
            let expected: Result<Value, _> = serde_json::from_slice(text.as_bytes());
            match (parse_value(text.as_bytes()), expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{text}"),
                (Err(_), Err(_)) => {}
                (got, expected) => panic!("{text}: {got:?} against {expected:?}"),
            }
        }
    }

    #[test]
    fn only_the_meta_of_params_is_filtered() {
        let big = "x".repeat(ws_slack(MAX_EXTRA_META_BYTES) + 1);
        let text = json!({"params": {"_meta": {"big": big, "small": 1, "traceparent": "t"}},
            "_meta": {"big": big}, "other": {"_meta": {"big": big}}})
        .to_string();
        let v = parse_value(text.as_bytes()).unwrap();
        assert_eq!(
            v["params"]["_meta"],
            json!({"small": 1, "traceparent": "t"})
        );
        assert_eq!(v["_meta"]["big"], json!(big));
        assert_eq!(v["other"]["_meta"]["big"], json!(big));
    }

    #[test]
    fn trailing_text_and_bad_syntax_in_skipped_keys_are_errors() {
        assert!(parse_value(br#"{"a":1} x"#).is_err());
        let big = "x".repeat(ws_slack(MAX_EXTRA_META_BYTES));
        let bad = format!(r#"{{"params":{{"_meta":{{"j":["{big}",}}}}}}"#);
        assert!(parse_value(bad.as_bytes()).is_err());
    }
}
