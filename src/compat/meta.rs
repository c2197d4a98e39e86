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
/// the request's own `_meta` (progress token, trace keys), validated and
/// bounded exactly like a modern one.
pub(crate) fn request_meta(
    capabilities: &Map<String, Value>,
    client_info: Option<&Value>,
    log_level: Option<LogLevel>,
    client_meta: Option<&Value>,
) -> Result<Map<String, Value>, McpError> {
    let mut meta = match client_meta {
        Some(Value::Object(m)) => m.clone(),
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
    meta.remove(keys::CLIENT_INFO);
    meta.remove(keys::LOG_LEVEL);
    if let Some(level) = log_level {
        meta.insert(
            keys::LOG_LEVEL.into(),
            serde_json::to_value(level).unwrap_or(Value::Null),
        );
    }
    if let Some(info) = client_info {
        let mut with_info = meta.clone();
        with_info.insert(keys::CLIENT_INFO.into(), info.clone());
        if parse_meta(&with_info).is_ok() {
            return Ok(with_info);
        }
    }
    parse_meta(&meta)?;
    Ok(meta)
}

/// Validates a `_meta` object as a 2026-07-28 request's.
pub(crate) fn parse_meta(meta: &Map<String, Value>) -> Result<RequestMeta, McpError> {
    let mut params = Map::new();
    params.insert("_meta".into(), Value::Object(meta.clone()));
    RequestMeta::from_params(Some(&params))
}

impl ClientInit {
    /// [`request_meta`] for this client, validated.
    pub(crate) fn meta(
        &self,
        log_level: Option<LogLevel>,
        client_meta: Option<&Value>,
    ) -> Result<(Map<String, Value>, RequestMeta), McpError> {
        let meta = request_meta(
            &self.capabilities,
            self.client_info.as_ref(),
            log_level,
            client_meta,
        )?;
        let parsed = parse_meta(&meta)?;
        Ok((meta, parsed))
    }
}
