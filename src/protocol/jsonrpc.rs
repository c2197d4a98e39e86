//! JSON-RPC 2.0 framing: ids, the incoming envelope, and encoding of outgoing messages.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::decode::{self, Envelope, Top};
use super::error::{ErrorObject, McpError};

/// Longest string request id accepted, in bytes (integer ids always fit). An id
/// is echoed on every frame of its request (for a listen stream: on every
/// notification, the acknowledgement and the completion), so it is capped: a
/// longer one is `-32600` Invalid Request, answered with `"id": null`.
pub const MAX_ID_LEN: usize = 256;

/// A JSON-RPC request id. It keeps its JSON type: `"1"` and `1` are different ids,
/// and the id is echoed verbatim (for example as a listen stream's subscription id).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl RequestId {
    /// Reads an id from a JSON value: a string or an integer that fits in `i64`.
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }

    /// The id as a JSON value of the same type.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::from(s.clone()),
        }
    }
}

/// A JSON-RPC request: has an `id`.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id, echoed on the response.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The `params` object, if present.
    pub params: Option<Map<String, Value>>,
}

/// A JSON-RPC notification: has no `id` key.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The `params` object (empty when absent).
    pub params: Map<String, Value>,
}

impl Notification {
    /// A notification with the given method and params.
    pub fn new(method: impl Into<String>, params: Map<String, Value>) -> Self {
        Notification {
            method: method.into(),
            params,
        }
    }

    /// `notifications/tools/list_changed`.
    pub fn tools_list_changed() -> Self {
        Self::new(super::methods::TOOLS_LIST_CHANGED, Map::new())
    }

    /// `notifications/prompts/list_changed`.
    pub fn prompts_list_changed() -> Self {
        Self::new(super::methods::PROMPTS_LIST_CHANGED, Map::new())
    }

    /// `notifications/resources/list_changed`.
    pub fn resources_list_changed() -> Self {
        Self::new(super::methods::RESOURCES_LIST_CHANGED, Map::new())
    }

    /// `notifications/resources/updated` for `uri`.
    pub fn resource_updated(uri: impl Into<String>) -> Self {
        let mut params = Map::new();
        params.insert("uri".into(), Value::String(uri.into()));
        Self::new(super::methods::RESOURCES_UPDATED, params)
    }
}

/// One incoming JSON-RPC message: a request or a notification.
#[derive(Clone, Debug, PartialEq)]
pub enum Incoming {
    /// A request (the `id` key is present).
    Request(Request),
    /// A notification (no `id` key).
    Notification(Notification),
}

/// Why an incoming body was rejected before it became a request, with the id to
/// echo when it could be read.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvelopeError {
    /// The request id, if it could be read.
    pub id: Option<RequestId>,
    /// The error (`-32700` or `-32600`).
    pub error: McpError,
}

impl Incoming {
    /// Parses one JSON-RPC message from bytes.
    ///
    /// A batch array, a posted response, a wrong `jsonrpc` version, a `null` or
    /// fractional id, a non-string method or non-object params are `-32600`;
    /// invalid JSON is `-32700`.
    ///
    /// The unknown keys of `params._meta` are never turned into JSON values when
    /// they are larger than the server would keep (see
    /// [`super::meta::MAX_EXTRA_META_BYTES`]): they are checked for syntax and
    /// skipped, so junk there costs its bytes, not a tree of allocations.
    pub fn parse(bytes: &[u8]) -> Result<Incoming, EnvelopeError> {
        let top = decode::parse_envelope(bytes).map_err(|e| EnvelopeError {
            id: None,
            error: McpError::Parse(format!("Invalid JSON: {e}")),
        })?;
        Self::from_top(top)
    }

    /// Validates an already parsed JSON value as one JSON-RPC message.
    pub fn from_value(value: Value) -> Result<Incoming, EnvelopeError> {
        Self::from_top(match value {
            Value::Object(mut obj) => Top::Object(Envelope {
                id: obj.remove("id"),
                jsonrpc: obj.remove("jsonrpc"),
                method: obj.remove("method"),
                params: obj.remove("params"),
                responds: obj.contains_key("result") || obj.contains_key("error"),
            }),
            Value::Array(_) => Top::Array,
            _ => Top::Other,
        })
    }

    fn from_top(top: Top) -> Result<Incoming, EnvelopeError> {
        let invalid = |id: Option<RequestId>, msg: &str| EnvelopeError {
            id,
            error: McpError::InvalidRequest(msg.to_owned()),
        };
        let envelope = match top {
            Top::Object(envelope) => envelope,
            Top::Array => {
                return Err(invalid(
                    None,
                    "batch arrays are not allowed; send one message per POST",
                ));
            }
            Top::Other => return Err(invalid(None, "a JSON-RPC message must be an object")),
        };
        let id = match envelope.id {
            None => None,
            Some(Value::String(s)) if s.len() > MAX_ID_LEN => {
                return Err(EnvelopeError {
                    id: None,
                    error: McpError::InvalidRequest(format!(
                        "id is {} bytes long; at most {MAX_ID_LEN} are allowed",
                        s.len()
                    )),
                });
            }
            Some(Value::String(s)) => Some(RequestId::String(s)),
            Some(v) => match RequestId::from_value(&v) {
                Some(id) => Some(id),
                None => return Err(invalid(None, "id must be a string or an integer")),
            },
        };
        if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
            return Err(invalid(id, "jsonrpc must be \"2.0\""));
        }
        let method = match envelope.method {
            Some(Value::String(m)) => m,
            Some(_) => return Err(invalid(id, "method must be a string")),
            None if envelope.responds => {
                return Err(invalid(
                    id,
                    "JSON-RPC responses may not be sent to the server",
                ));
            }
            None => return Err(invalid(id, "missing method")),
        };
        let params = match envelope.params {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return Err(invalid(id, "params must be an object")),
        };
        Ok(match id {
            Some(id) => Incoming::Request(Request { id, method, params }),
            None => Incoming::Notification(Notification {
                method,
                params: params.unwrap_or_default(),
            }),
        })
    }
}

/// Parses one JSON message from bytes as [`Incoming::parse`] does, without
/// validating the envelope: the unknown keys of `params._meta` larger than the
/// server would keep are checked for syntax and skipped, never built into a
/// tree (for transports that must look at a message before knowing what it
/// is, such as a 2025-era POST that may be a response).
pub fn parse_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    super::decode::parse_value(bytes)
}

#[derive(Serialize)]
struct ResultOut<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a Map<String, Value>,
}

#[derive(Serialize)]
struct ErrorOut<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: ErrorObject,
}

#[derive(Serialize)]
struct NotificationOut<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a Map<String, Value>,
}

/// Encodes a result response as compact JSON.
pub fn encode_result(id: &RequestId, result: &Map<String, Value>) -> Vec<u8> {
    to_vec(&ResultOut {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// Encodes an error response as compact JSON (`"id": null` when `id` is `None`).
pub fn encode_error(id: Option<&RequestId>, error: &McpError) -> Vec<u8> {
    to_vec(&ErrorOut {
        jsonrpc: "2.0",
        id,
        error: error.to_error_object(),
    })
}

/// Encodes a notification as compact JSON.
pub fn encode_notification(method: &str, params: &Map<String, Value>) -> Vec<u8> {
    to_vec(&NotificationOut {
        jsonrpc: "2.0",
        method,
        params,
    })
}

fn to_vec<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising maps with string keys and JSON values cannot fail.
    serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<Incoming, EnvelopeError> {
        Incoming::parse(v.to_string().as_bytes())
    }

    #[test]
    fn ids_keep_their_json_type() {
        let Incoming::Request(a) =
            parse(json!({"jsonrpc":"2.0","id":1,"method":"m","params":{}})).unwrap()
        else {
            panic!()
        };
        let Incoming::Request(b) =
            parse(json!({"jsonrpc":"2.0","id":"1","method":"m","params":{}})).unwrap()
        else {
            panic!()
        };
        assert_eq!(a.id, RequestId::Number(1));
        assert_eq!(b.id, RequestId::String("1".into()));
        assert_ne!(a.id, b.id);
        assert_eq!(serde_json::to_value(&a.id).unwrap(), json!(1));
        assert_eq!(serde_json::to_value(&b.id).unwrap(), json!("1"));
    }

    #[test]
    fn notification_is_told_by_the_absent_id_key() {
        let n = parse(json!({"jsonrpc":"2.0","method":"notifications/cancelled"})).unwrap();
        assert!(matches!(n, Incoming::Notification(_)));
        let err = parse(json!({"jsonrpc":"2.0","id":null,"method":"m"})).unwrap_err();
        assert_eq!(err.error.code(), -32600);
    }

    #[test]
    fn bad_envelopes_are_rejected_with_the_right_codes() {
        assert_eq!(Incoming::parse(b"{nope").unwrap_err().error.code(), -32700);
        assert_eq!(
            parse(json!([{"jsonrpc":"2.0","id":1,"method":"m"}]))
                .unwrap_err()
                .error
                .code(),
            -32600
        );
        let resp = parse(json!({"jsonrpc":"2.0","id":7,"result":{}})).unwrap_err();
        assert_eq!(resp.error.code(), -32600);
        assert_eq!(resp.id, Some(RequestId::Number(7)));
        assert_eq!(
            parse(json!({"jsonrpc":"1.0","id":1,"method":"m"}))
                .unwrap_err()
                .error
                .code(),
            -32600
        );
        assert_eq!(
            parse(json!({"jsonrpc":"2.0","id":1.5,"method":"m"}))
                .unwrap_err()
                .error
                .code(),
            -32600
        );
        assert_eq!(
            parse(json!({"jsonrpc":"2.0","id":1,"method":"m","params":[1]}))
                .unwrap_err()
                .error
                .code(),
            -32600
        );
    }

    #[test]
    fn long_ids_are_invalid_requests_without_an_echo() {
        let ok = "i".repeat(MAX_ID_LEN);
        assert!(parse(json!({"jsonrpc":"2.0","id":ok,"method":"m"})).is_ok());
        let long = "i".repeat(MAX_ID_LEN + 1);
        let err = parse(json!({"jsonrpc":"2.0","id":long,"method":"m"})).unwrap_err();
        assert_eq!(err.error.code(), -32600);
        assert_eq!(err.id, None);
    }

    #[test]
    fn large_unknown_meta_keys_are_skipped_at_decode_time() {
        let junk: Vec<String> = (0..5_000).map(|i| format!("{i}")).collect();
        let body = json!({"jsonrpc":"2.0","id":1,"method":"m","params":{
            "a": junk.clone(),
            "_meta": {"junk": junk, "small": 1, "progressToken": "t", "traceparent": "00-x"}}});
        let Incoming::Request(r) = parse(body).unwrap() else {
            panic!()
        };
        let params = r.params.unwrap();
        assert_eq!(params["a"].as_array().map(Vec::len), Some(5_000));
        let meta = params["_meta"].as_object().unwrap();
        assert!(meta.get("junk").is_none());
        assert_eq!(meta["small"], json!(1));
        assert_eq!(meta["progressToken"], json!("t"));
        assert_eq!(meta["traceparent"], json!("00-x"));
        // Still checked for syntax, and the same errors as before.
        let bad = br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"j":[1,}}}"#;
        assert_eq!(Incoming::parse(bad).unwrap_err().error.code(), -32700);
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"x":{}{}}}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert_eq!(
            Incoming::parse(deep.as_bytes()).unwrap_err().error.code(),
            -32700
        );
        let dup = br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#;
        let Incoming::Request(r) = Incoming::parse(dup).unwrap() else {
            panic!()
        };
        assert_eq!(
            r.id,
            RequestId::Number(2),
            "the last duplicate wins, as before"
        );
    }

    #[test]
    fn errors_without_id_encode_null() {
        let bytes = encode_error(None, &McpError::Parse("x".into()));
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["code"], json!(-32700));
    }
}
