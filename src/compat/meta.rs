//! The 2026-07-28 `_meta` of a 2025 request, built from what the client said
//! at `initialize`.

use serde_json::{Map, Value};

use crate::protocol::{LogLevel, McpError, RequestMeta, keys};

/// What a 2025 client declared at `initialize`: the negotiated version, its
/// capabilities and its implementation.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClientInit {
    /// The negotiated protocol version (one of [`super::LEGACY_VERSIONS`]).
    pub(crate) version: String,
    /// The client capabilities.
    pub(crate) capabilities: Map<String, Value>,
    /// The client implementation (`clientInfo`), if an object.
    pub(crate) client_info: Option<Value>,
}

impl ClientInit {
    /// Reads `initialize` params: the version is negotiated
    /// ([`super::negotiate`]), capabilities default to none.
    pub(crate) fn from_params(params: &Map<String, Value>) -> Self {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        ClientInit {
            version: super::negotiate(requested).to_owned(),
            capabilities: match params.get("capabilities") {
                Some(Value::Object(c)) => c.clone(),
                _ => Map::new(),
            },
            client_info: params.get("clientInfo").filter(|i| i.is_object()).cloned(),
        }
    }
}

/// The 2026-07-28 `_meta` of a request of a 2025 session: its capabilities and
/// client info from `initialize`, its log level from `logging/setLevel`, and
/// the request's own `_meta` (progress token, trace keys; its unknown keys
/// already bounded when the body was parsed), validated and bounded exactly
/// like a modern one. Returns it parsed and as the map the suite gets; the
/// client's `_meta` is moved, never copied.
pub(crate) fn request_meta(
    capabilities: &Map<String, Value>,
    client_info: Option<&Value>,
    log_level: Option<LogLevel>,
    client_meta: Option<Value>,
) -> Result<(RequestMeta, Map<String, Value>), McpError> {
    let mut meta = match client_meta {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    meta.insert(
        keys::PROTOCOL_VERSION.into(),
        Value::from(crate::protocol::PROTOCOL_VERSION),
    );
    meta.insert(
        keys::CLIENT_CAPABILITIES.into(),
        Value::Object(capabilities.clone()),
    );
    meta.remove(keys::LOG_LEVEL);
    if let Some(level) = log_level {
        meta.insert(
            keys::LOG_LEVEL.into(),
            serde_json::to_value(level).unwrap_or(Value::Null),
        );
    }
    match client_info {
        Some(info) => {
            meta.insert(keys::CLIENT_INFO.into(), info.clone());
        }
        None => {
            meta.remove(keys::CLIENT_INFO);
        }
    }
    match parse_meta(meta) {
        Ok(parsed) => Ok(parsed),
        // A client info the 2026 rules refuse is left out rather than failing
        // every request of the session.
        Err((mut meta, _)) if client_info.is_some() => {
            meta.remove(keys::CLIENT_INFO);
            parse_meta(meta).map_err(|(_, e)| e)
        }
        Err((_, e)) => Err(e),
    }
}

/// Validates `meta` as a 2026-07-28 request's `_meta` (moved in and handed
/// back, with the error when it is refused).
#[allow(clippy::type_complexity)]
pub(crate) fn parse_meta(
    meta: Map<String, Value>,
) -> Result<(RequestMeta, Map<String, Value>), (Map<String, Value>, McpError)> {
    let mut params = Map::new();
    params.insert("_meta".into(), Value::Object(meta));
    let parsed = RequestMeta::from_params(Some(&params));
    let meta = match params.remove("_meta") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    match parsed {
        Ok(parsed) => Ok((parsed, meta)),
        Err(e) => Err((meta, e)),
    }
}

impl ClientInit {
    /// [`request_meta`] for this client, validated.
    pub(crate) fn meta(
        &self,
        log_level: Option<LogLevel>,
        client_meta: Option<Value>,
    ) -> Result<(Map<String, Value>, RequestMeta), McpError> {
        let (parsed, meta) = request_meta(
            &self.capabilities,
            self.client_info.as_ref(),
            log_level,
            client_meta,
        )?;
        Ok((meta, parsed))
    }
}
