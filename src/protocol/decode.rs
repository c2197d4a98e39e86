//! One pass from the bytes of a JSON-RPC message to a JSON value, with
//! `params._meta` filtered on the way.
//!
//! The unknown keys of `params._meta` are kept only while their raw text fits
//! a generous multiple of what [`super::RequestMeta`] keeps (which then applies
//! the exact budget on compact JSON); the rest are checked for syntax and
//! skipped, never built into a tree, so junk there costs its bytes and not a
//! tree of allocations. Everything else is read as [`serde_json::from_slice`]
//! would read it, in one scan of the input (the `_meta` values kept are read
//! a second time from their raw text).
//!
//! Nesting: the scan counts depth from the top of the message, so a value in
//! `params` may nest two or three levels less deep than
//! `serde_json::from_slice` of that value alone would allow (its limit is
//! 128); a kept `_meta` value, parsed again on its own, up to three more.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

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
/// anywhere is an error), then dropped. A message that is not an object is
/// read whole by [`parse_value`], only to be told apart.
pub(super) fn parse_envelope(bytes: &[u8]) -> Result<Top, serde_json::Error> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        // Not an object (it does not start with `{`): a batch or a scalar.
        return Ok(match parse_value(bytes)? {
            Value::Array(_) => Top::Array,
            _ => Top::Other,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let envelope = de.deserialize_map(EnvelopeVisitor)?;
    de.end()?;
    Ok(Top::Object(envelope))
}

struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let mut envelope = Envelope::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
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
        Ok(envelope)
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
        use serde::de::Error as _;
        // Room for the usual few keys at once (`name`, `arguments`, `_meta`;
        // the `_meta` keys of a request) instead of growing twice.
        let mut obj = Map::with_capacity(4);
        let mut left = ws_slack(MAX_EXTRA_META_BYTES);
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            if std::mem::take(&mut first) && is_number_token(&key) {
                let text: String = map.next_value()?;
                return serde_json::from_str(&text).map_err(A::Error::custom);
            }
            let value = match self {
                Level::Message | Level::Params if key == self.nested_key() => {
                    map.next_value_seed(self.inner())?
                }
                Level::Message | Level::Params => map.next_value::<Value>()?,
                Level::Meta if is_known_key(&key) => map.next_value::<Value>()?,
                Level::Meta => {
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
                    if !keep {
                        continue;
                    }
                    serde_json::from_str(raw.get()).map_err(A::Error::custom)?
                }
            };
            obj.insert(key, value);
        }
        Ok(Value::Object(obj))
    }
}

/// The key serde_json hands a number under when its `arbitrary_precision`
/// feature is on (any crate of an application can turn it on): the number is
/// then a map of this one key to the number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Whether `key`, the first of a map, makes the map a number: only when
/// serde_json hands numbers over as maps, so a client's own key of that name
/// is an ordinary key otherwise.
fn is_number_token(key: &str) -> bool {
    key == NUMBER_TOKEN && numbers_as_maps()
}

/// Whether this build's serde_json hands numbers to a visitor as maps.
fn numbers_as_maps() -> bool {
    static AS_MAPS: OnceLock<bool> = OnceLock::new();
    *AS_MAPS.get_or_init(|| {
        struct Probe;
        impl<'de> Visitor<'de> for Probe {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<bool, A::Error> {
                Ok(true)
            }
        }
        let mut de = serde_json::Deserializer::from_str("1");
        de.deserialize_any(Probe).unwrap_or(false)
    })
}

/// A map key, borrowed from the input when it has no escapes (serde's own
/// `Cow<str>` always allocates).
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(V)
    }
}

impl Level {
    /// The key of the one nested object this level treats specially.
    fn nested_key(self) -> &'static str {
        match self {
            Level::Message => "params",
            Level::Params | Level::Meta => "_meta",
        }
    }

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
    fn serde_jsons_number_token_is_an_ordinary_key_in_this_build() {
        // Without serde_json's `arbitrary_precision` numbers arrive as
        // numbers, and a client's key that looks like its token is kept.
        assert!(!numbers_as_maps());
        let text = r#"{"params":{"$serde_json::private::Number":"5"},"id":5}"#;
        let v = parse_value(text.as_bytes()).unwrap();
        assert_eq!(v, serde_json::from_str::<Value>(text).unwrap());
        let Top::Object(envelope) = parse_envelope(text.as_bytes()).unwrap() else {
            panic!("an object");
        };
        assert_eq!(envelope.id, Some(json!(5)));
        assert!(matches!(parse_envelope(b"5").unwrap(), Top::Other));
    }

    #[test]
    fn escaped_keys_are_the_keys_they_spell() {
        let text =
            r#"{"\u0069d":1,"jsonrpc":"2.0","method":"m","par\u0061ms":{"\u005fmeta":{"x":1}}}"#;
        let Top::Object(envelope) = parse_envelope(text.as_bytes()).unwrap() else {
            panic!("an object");
        };
        assert_eq!(envelope.id, Some(json!(1)));
        assert_eq!(envelope.params, Some(json!({"_meta": {"x": 1}})));
    }

    #[test]
    fn trailing_text_and_bad_syntax_in_skipped_keys_are_errors() {
        assert!(parse_value(br#"{"a":1} x"#).is_err());
        let big = "x".repeat(ws_slack(MAX_EXTRA_META_BYTES));
        let bad = format!(r#"{{"params":{{"_meta":{{"j":["{big}",}}}}}}"#);
        assert!(parse_value(bad.as_bytes()).is_err());
    }
}
