//! The per-request `_meta` envelope of 2026-07-28 and its validation.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::McpError;
use super::keys;

/// Longest string progress token accepted, in bytes (integer tokens always fit).
/// The token is copied into every progress notification; a longer one is `-32602`.
pub const MAX_PROGRESS_TOKEN_LEN: usize = 256;

/// Largest `io.modelcontextprotocol/clientCapabilities` object accepted, in bytes
/// of compact JSON. It is kept for the life of the request (of a listen stream:
/// for as long as the stream is open); a larger one is `-32602`.
pub const MAX_CLIENT_CAPABILITIES_BYTES: usize = 16 * 1024;

/// Longest `name` or `version` of `io.modelcontextprotocol/clientInfo`, in bytes;
/// longer is `-32602`.
pub const MAX_CLIENT_INFO_FIELD_LEN: usize = 1024;

/// Budget, in bytes of compact JSON (keys included), for the `_meta` keys this
/// crate does not know and for the optional fields of `clientInfo` (`title`,
/// `icons`...), each budget separate. Keys are kept in the order sent while they
/// fit; the rest are dropped silently (not an error: `_meta` is open-ended, and a
/// server need not keep what it does not use).
pub const MAX_EXTRA_META_BYTES: usize = 4 * 1024;

/// The W3C Trace Context / Baggage keys, kept in [`RequestMeta::extra`] outside the
/// budget of [`MAX_EXTRA_META_BYTES`] when they are strings of at most
/// [`MAX_TRACE_VALUE_LEN`] bytes.
pub const TRACE_KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];

/// Longest trace-context value kept (the W3C Baggage limit, 8,192 bytes); a longer
/// one is dropped.
pub const MAX_TRACE_VALUE_LEN: usize = 8 * 1024;

/// Longest protocol version string echoed back in a `-32022` error, in bytes; a
/// longer requested version is truncated in the echo.
pub const MAX_VERSION_ECHO_LEN: usize = 64;

/// The size of `value` as compact JSON if it is at most `limit` bytes, computed
/// without encoding more than `limit + 1` bytes.
pub fn encoded_len_within(value: &Value, limit: usize) -> Option<usize> {
    struct Counter {
        n: usize,
        limit: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n = self.n.saturating_add(buf.len());
            if self.n > self.limit {
                Err(std::io::Error::other("over the limit"))
            } else {
                Ok(buf.len())
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter { n: 0, limit };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.n)
}

/// Copies the entries of `from` that fit in `budget` bytes (compact JSON of key
/// and value, plus 4 bytes of punctuation each), in order; the rest are dropped.
fn within_budget<'a>(
    from: impl Iterator<Item = (&'a String, &'a Value)>,
    budget: usize,
) -> Map<String, Value> {
    let mut kept = Map::new();
    let mut left = budget;
    for (k, v) in from {
        let Some(need) = left
            .checked_sub(k.len() + 4)
            .and_then(|room| encoded_len_within(v, room))
        else {
            continue;
        };
        left -= k.len() + 4 + need;
        kept.insert(k.clone(), v.clone());
    }
    kept
}

/// The keys of `_meta` this crate reads.
const KNOWN_KEYS: [&str; 5] = [
    keys::PROTOCOL_VERSION,
    keys::CLIENT_CAPABILITIES,
    keys::CLIENT_INFO,
    keys::LOG_LEVEL,
    keys::PROGRESS_TOKEN,
];

/// The values of the `_meta` keys this crate reads, found in one pass over
/// the map: a lookup per key would hash each of the eight key names on every
/// request.
#[derive(Default)]
struct Known<'a> {
    protocol_version: Option<&'a Value>,
    client_capabilities: Option<&'a Value>,
    client_info: Option<&'a Value>,
    log_level: Option<&'a Value>,
    progress_token: Option<&'a Value>,
    /// In the order of [`TRACE_KEYS`].
    trace: [Option<&'a Value>; 3],
}

impl<'a> Known<'a> {
    fn of(meta: &'a Map<String, Value>) -> Self {
        let mut known = Known::default();
        for (key, value) in meta {
            let slot = match key.as_str() {
                keys::PROTOCOL_VERSION => &mut known.protocol_version,
                keys::CLIENT_CAPABILITIES => &mut known.client_capabilities,
                keys::CLIENT_INFO => &mut known.client_info,
                keys::LOG_LEVEL => &mut known.log_level,
                keys::PROGRESS_TOKEN => &mut known.progress_token,
                other => match TRACE_KEYS.iter().position(|k| *k == other) {
                    Some(i) => &mut known.trace[i],
                    None => continue,
                },
            };
            *slot = Some(value);
        }
        known
    }
}

/// Whether `key` is one of the `_meta` keys this crate reads.
pub(crate) fn is_known_key(key: &str) -> bool {
    KNOWN_KEYS.contains(&key)
}

/// How many bytes of raw text the decoder admits for a budget of `n` bytes of
/// compact JSON: room for whitespace and escapes, still bounded.
pub(crate) const fn ws_slack(n: usize) -> usize {
    2 * n + 64
}

/// `s` cut to at most `max` bytes on a character boundary.
pub(crate) fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// An implementation description (`clientInfo` / `serverInfo`). Unknown fields are kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Fields this crate does not model (`title`, `description`, `icons`...), kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Implementation {
    /// An implementation with a name and a version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Implementation {
            name: name.into(),
            version: version.into(),
            extra: Map::new(),
        }
    }
}

/// The client capabilities declared on one request. Kept as the client sent them
/// (unknown and legacy fields included); read with the helpers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClientCapabilities(pub Map<String, Value>);

impl ClientCapabilities {
    /// Whether a top-level capability (`"elicitation"`, `"sampling"`, `"roots"`) is declared.
    pub fn declares(&self, capability: &str) -> bool {
        matches!(self.0.get(capability), Some(v) if !v.is_null())
    }

    /// Whether the extension `id` is declared under `extensions`.
    pub fn declares_extension(&self, id: &str) -> bool {
        self.0
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|ext| ext.get(id).is_some_and(|v| !v.is_null()))
    }
}

/// A progress token: a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressToken {
    /// Integer token.
    Number(i64),
    /// String token.
    String(String),
}

/// Log severity, lowest first, as in RFC 5424.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl LogLevel {
    /// Parses a level name as it appears on the wire.
    pub fn parse(s: &str) -> Option<LogLevel> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }
}

/// The validated `_meta` of one request: the only place a request's protocol version,
/// client capabilities and client identity live. Nothing of it outlives the request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMeta {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub client_capabilities: ClientCapabilities,
    /// `io.modelcontextprotocol/clientInfo`, when sent.
    pub client_info: Option<Implementation>,
    /// `io.modelcontextprotocol/logLevel`, when sent: logging is on for this request only then.
    pub log_level: Option<LogLevel>,
    /// `progressToken`, when sent.
    pub progress_token: Option<ProgressToken>,
    /// Every other `_meta` key the server keeps: the trace-context keys
    /// ([`TRACE_KEYS`]) and, in the order sent, the unknown keys that fit in
    /// [`MAX_EXTRA_META_BYTES`]; the rest are dropped.
    pub extra: Map<String, Value>,
}

/// Reads `clientInfo`: `name` and `version` strings of bounded length, other
/// fields within [`MAX_EXTRA_META_BYTES`].
fn client_info(value: &Value) -> Result<Implementation, McpError> {
    let invalid = |why: String| {
        McpError::invalid_params(format!("Invalid params: {}: {why}", keys::CLIENT_INFO))
    };
    let obj = value
        .as_object()
        .ok_or_else(|| invalid("must be an object".into()))?;
    let field = |name: &str| -> Result<String, McpError> {
        match obj.get(name) {
            Some(Value::String(s)) if s.len() <= MAX_CLIENT_INFO_FIELD_LEN => Ok(s.clone()),
            Some(Value::String(_)) => Err(invalid(format!(
                "{name} is longer than {MAX_CLIENT_INFO_FIELD_LEN} bytes"
            ))),
            Some(_) => Err(invalid(format!("{name} must be a string"))),
            None => Err(invalid(format!("missing field `{name}`"))),
        }
    };
    let name = field("name")?;
    let version = field("version")?;
    let extra = within_budget(
        obj.iter()
            .filter(|(k, _)| k.as_str() != "name" && k.as_str() != "version"),
        MAX_EXTRA_META_BYTES,
    );
    Ok(Implementation {
        name,
        version,
        extra,
    })
}

impl RequestMeta {
    /// A minimal valid `_meta` for the current protocol version (useful in tests
    /// and for in-process callers).
    pub fn current() -> Self {
        RequestMeta {
            protocol_version: super::PROTOCOL_VERSION.to_owned(),
            client_capabilities: ClientCapabilities::default(),
            client_info: None,
            log_level: None,
            progress_token: None,
            extra: Map::new(),
        }
    }

    /// The raw `_meta` protocol version string of a request, if present, without
    /// validating anything else (used for the header cross-check, which comes first).
    pub fn raw_version(params: Option<&Map<String, Value>>) -> Option<&str> {
        params?
            .get("_meta")?
            .as_object()?
            .get(keys::PROTOCOL_VERSION)?
            .as_str()
    }

    /// Validates a request's `params._meta`. Missing `params`, `_meta`,
    /// `protocolVersion` or `clientCapabilities`, a malformed `clientInfo`, an
    /// unknown log level or a bad progress token are `-32602`. The version itself
    /// is checked separately by [`RequestMeta::check_version`].
    ///
    /// What is kept is bounded: a progress token longer than
    /// [`MAX_PROGRESS_TOKEN_LEN`], capabilities larger than
    /// [`MAX_CLIENT_CAPABILITIES_BYTES`] or a `clientInfo` name or version longer
    /// than [`MAX_CLIENT_INFO_FIELD_LEN`] are `-32602`; unknown keys (of `_meta` and
    /// of `clientInfo`) past [`MAX_EXTRA_META_BYTES`] are dropped.
    pub fn from_params(params: Option<&Map<String, Value>>) -> Result<RequestMeta, McpError> {
        let missing = |what: &str| {
            McpError::invalid_params(format!(
                "Invalid params: missing required _meta field {what}"
            ))
        };
        let params = params.ok_or_else(|| {
            McpError::invalid_params("Invalid params: params with _meta is required")
        })?;
        let meta = match params.get("_meta") {
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: _meta must be an object",
                ));
            }
            None => {
                return Err(McpError::invalid_params(
                    "Invalid params: missing required _meta",
                ));
            }
        };
        let known = Known::of(meta);
        let protocol_version = match known.protocol_version {
            // Never a served version when this long: keep only what the -32022 echoes.
            Some(Value::String(v)) => truncate_str(v, MAX_VERSION_ECHO_LEN).to_owned(),
            Some(_) => {
                return Err(McpError::invalid_params(format!(
                    "Invalid params: {} must be a string",
                    keys::PROTOCOL_VERSION
                )));
            }
            None => return Err(missing(keys::PROTOCOL_VERSION)),
        };
        let client_capabilities = match known.client_capabilities {
            Some(v @ Value::Object(c)) => {
                if encoded_len_within(v, MAX_CLIENT_CAPABILITIES_BYTES).is_none() {
                    return Err(McpError::invalid_params(format!(
                        "Invalid params: {} is larger than {MAX_CLIENT_CAPABILITIES_BYTES} bytes",
                        keys::CLIENT_CAPABILITIES
                    )));
                }
                ClientCapabilities(c.clone())
            }
            Some(_) => {
                return Err(McpError::invalid_params(format!(
                    "Invalid params: {} must be an object",
                    keys::CLIENT_CAPABILITIES
                )));
            }
            None => return Err(missing(keys::CLIENT_CAPABILITIES)),
        };
        let client_info = match known.client_info {
            None | Some(Value::Null) => None,
            Some(v) => Some(client_info(v)?),
        };
        let log_level = match known.log_level {
            None => None,
            Some(v) => Some(v.as_str().and_then(LogLevel::parse).ok_or_else(|| {
                McpError::invalid_params(format!(
                    "Invalid params: {} must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    keys::LOG_LEVEL
                ))
            })?),
        };
        let progress_token = match known.progress_token {
            None => None,
            Some(Value::String(s)) if s.len() > MAX_PROGRESS_TOKEN_LEN => {
                return Err(McpError::invalid_params(format!(
                    "Invalid params: progressToken is {} bytes long; at most {MAX_PROGRESS_TOKEN_LEN} are allowed",
                    s.len()
                )));
            }
            Some(Value::String(s)) => Some(ProgressToken::String(s.clone())),
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().map(ProgressToken::Number),
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: progressToken must be a string or an integer",
                ));
            }
        };
        let mut extra = within_budget(
            meta.iter()
                .filter(|(k, _)| !is_known_key(k) && !TRACE_KEYS.contains(&k.as_str())),
            MAX_EXTRA_META_BYTES,
        );
        for (key, value) in TRACE_KEYS.iter().zip(known.trace) {
            if let Some(Value::String(v)) = value
                && v.len() <= MAX_TRACE_VALUE_LEN
            {
                extra.insert((*key).to_owned(), Value::String(v.clone()));
            }
        }
        Ok(RequestMeta {
            protocol_version,
            client_capabilities,
            client_info,
            log_level,
            progress_token,
            extra,
        })
    }

    /// `-32022` unless the version is one this server serves.
    pub fn check_version(&self) -> Result<(), McpError> {
        if super::SUPPORTED_VERSIONS.contains(&self.protocol_version.as_str()) {
            Ok(())
        } else {
            Err(McpError::unsupported_version(self.protocol_version.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn valid_meta_keeps_unknown_keys() {
        let p = params(json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": true}},
            "io.modelcontextprotocol/logLevel": "warning",
            "progressToken": 5,
            "traceparent": "00-abc",
        }}));
        let meta = RequestMeta::from_params(Some(&p)).unwrap();
        assert_eq!(meta.log_level, Some(LogLevel::Warning));
        assert_eq!(meta.progress_token, Some(ProgressToken::Number(5)));
        assert_eq!(meta.extra.get("traceparent"), Some(&json!("00-abc")));
        assert!(meta.client_capabilities.declares("roots"));
        assert!(meta.client_info.is_none());
        meta.check_version().unwrap();
    }

    #[test]
    fn missing_fields_are_invalid_params() {
        for p in [
            None,
            Some(params(json!({}))),
            Some(params(
                json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
            )),
            Some(params(
                json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            )),
            Some(params(
                json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/logLevel": "loud"}}),
            )),
        ] {
            assert_eq!(
                RequestMeta::from_params(p.as_ref()).unwrap_err().code(),
                -32602,
                "{p:?}"
            );
        }
    }

    fn meta_with(extra: Value) -> Map<String, Value> {
        let mut m = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        for (k, v) in extra.as_object().unwrap() {
            m[k] = v.clone();
        }
        params(json!({ "_meta": m }))
    }

    #[test]
    fn unknown_keys_are_kept_within_the_budget_and_trace_keys_always() {
        let junk: Vec<String> = (0..10_000).map(|i| format!("j{i}")).collect();
        let p = meta_with(json!({
            "small": 1,
            "junk": junk,
            "later": "x",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "baggage": "k".repeat(MAX_TRACE_VALUE_LEN + 1),
        }));
        let meta = RequestMeta::from_params(Some(&p)).unwrap();
        assert_eq!(meta.extra.get("small"), Some(&json!(1)));
        assert_eq!(meta.extra.get("later"), Some(&json!("x")));
        assert!(meta.extra.get("junk").is_none());
        assert!(meta.extra.get("traceparent").is_some());
        assert!(meta.extra.get("baggage").is_none());
        let kept = serde_json::to_vec(&meta.extra).unwrap().len();
        assert!(kept <= MAX_EXTRA_META_BYTES + 3 * MAX_TRACE_VALUE_LEN + 64);
    }

    #[test]
    fn oversized_fields_are_invalid_params() {
        let long = "t".repeat(MAX_PROGRESS_TOKEN_LEN + 1);
        let caps: Map<String, Value> = (0..2_000)
            .map(|i| (format!("c{i}"), json!({"x": i})))
            .collect();
        for p in [
            meta_with(json!({"progressToken": long})),
            meta_with(json!({"io.modelcontextprotocol/clientCapabilities": caps})),
            meta_with(
                json!({"io.modelcontextprotocol/clientInfo": {"name": "n".repeat(5000), "version": "1"}}),
            ),
            meta_with(json!({"io.modelcontextprotocol/clientInfo": {"name": "n"}})),
        ] {
            assert_eq!(
                RequestMeta::from_params(Some(&p)).unwrap_err().code(),
                -32602
            );
        }
        let ok = meta_with(json!({"progressToken": "t".repeat(MAX_PROGRESS_TOKEN_LEN),
            "io.modelcontextprotocol/clientInfo": {"name": "n", "version": "1", "title": "T", "icons": ["x".repeat(10_000)]}}));
        let meta = RequestMeta::from_params(Some(&ok)).unwrap();
        let info = meta.client_info.unwrap();
        assert_eq!(info.extra.get("title"), Some(&json!("T")));
        assert!(info.extra.get("icons").is_none());
    }

    #[test]
    fn a_long_version_is_truncated_in_the_echo() {
        let p = meta_with(json!({"io.modelcontextprotocol/protocolVersion": "é".repeat(1000)}));
        let meta = RequestMeta::from_params(Some(&p)).unwrap();
        assert!(meta.protocol_version.len() <= MAX_VERSION_ECHO_LEN);
        assert_eq!(meta.check_version().unwrap_err().code(), -32022);
    }

    #[test]
    fn encoded_length_is_exact_or_none() {
        let v = json!({"a": [1, "b"]});
        let n = v.to_string().len();
        assert_eq!(encoded_len_within(&v, n), Some(n));
        assert_eq!(encoded_len_within(&v, n - 1), None);
    }

    #[test]
    fn unknown_version_is_unsupported() {
        let mut meta = RequestMeta::current();
        meta.protocol_version = "v999.0.0".into();
        assert_eq!(meta.check_version().unwrap_err().code(), -32022);
    }
}
