//! The per-request `_meta` envelope of 2026-07-28 and its validation.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::McpError;
use super::keys;

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
    /// Every other `_meta` key, kept as sent (trace context, extensions...).
    pub extra: Map<String, Value>,
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
        let protocol_version = match meta.get(keys::PROTOCOL_VERSION) {
            Some(Value::String(v)) => v.clone(),
            Some(_) => {
                return Err(McpError::invalid_params(format!(
                    "Invalid params: {} must be a string",
                    keys::PROTOCOL_VERSION
                )));
            }
            None => return Err(missing(keys::PROTOCOL_VERSION)),
        };
        let client_capabilities = match meta.get(keys::CLIENT_CAPABILITIES) {
            Some(Value::Object(c)) => ClientCapabilities(c.clone()),
            Some(_) => {
                return Err(McpError::invalid_params(format!(
                    "Invalid params: {} must be an object",
                    keys::CLIENT_CAPABILITIES
                )));
            }
            None => return Err(missing(keys::CLIENT_CAPABILITIES)),
        };
        let client_info = match meta.get(keys::CLIENT_INFO) {
            None | Some(Value::Null) => None,
            Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| {
                McpError::invalid_params(format!("Invalid params: {}: {e}", keys::CLIENT_INFO))
            })?),
        };
        let log_level = match meta.get(keys::LOG_LEVEL) {
            None => None,
            Some(v) => Some(v.as_str().and_then(LogLevel::parse).ok_or_else(|| {
                McpError::invalid_params(format!(
                    "Invalid params: {} must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    keys::LOG_LEVEL
                ))
            })?),
        };
        let progress_token = match meta.get(keys::PROGRESS_TOKEN) {
            None => None,
            Some(Value::String(s)) => Some(ProgressToken::String(s.clone())),
            Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().map(ProgressToken::Number),
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: progressToken must be a string or an integer",
                ));
            }
        };
        let extra = meta
            .iter()
            .filter(|(k, _)| {
                ![
                    keys::PROTOCOL_VERSION,
                    keys::CLIENT_CAPABILITIES,
                    keys::CLIENT_INFO,
                    keys::LOG_LEVEL,
                    keys::PROGRESS_TOKEN,
                ]
                .contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
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

    #[test]
    fn unknown_version_is_unsupported() {
        let mut meta = RequestMeta::current();
        meta.protocol_version = "v999.0.0".into();
        assert_eq!(meta.check_version().unwrap_err().code(), -32022);
    }
}
