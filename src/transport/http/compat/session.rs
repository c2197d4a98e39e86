//! 2025-era sessions: `Mcp-Session-Id` as a sealed, expiring token, and the
//! little a session remembers beyond it, in a bounded store.
//!
//! The token is sealed with the suite's key (the one that protects cursors and
//! `requestState`, under its own purpose) over `{sid, version, capabilities,
//! clientInfo, exp}`: any replica with the key accepts it, nothing is stored
//! to validate it, and a forged or expired one is refused (404).
//!
//! What a session sets at run time lives in the bounded
//! [`crate::compat::SessionStore`], keyed by [`Session::key`].

use serde_json::{Value, json};

use crate::compat::{ClientInit, StateKey};
use crate::protocol::{LogLevel, McpError};
use crate::suite::sealing::seal::{self, Sealer, purpose};

/// The `Mcp-Session-Id` header.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
/// [`SESSION_HEADER`] as a header name (for lookups; see
/// `headers::PROTOCOL_VERSION_HEADER`).
pub(crate) static SESSION_HEADER_NAME: actix_web::http::header::HeaderName =
    actix_web::http::header::HeaderName::from_static(SESSION_HEADER);

/// Longest `Mcp-Session-Id` accepted (longer is 404 without decoding).
const MAX_SESSION_ID_LEN: usize = 8 * 1024;

/// Largest `capabilities` + `clientInfo` kept in a session token.
const MAX_CLIENT_BYTES: usize = 4 * 1024;

/// One session, as read from its token.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// The random session id inside the token (key of its state).
    pub(crate) sid: String,
    /// What the client declared at `initialize` (the negotiated version,
    /// its capabilities and implementation).
    pub(crate) init: ClientInit,
    /// Expiry, ms since the epoch.
    pub(crate) expires: u64,
    /// The subject of the principal that initialized it, if any: only that
    /// principal may use it (any other gets 404, as for an unknown session).
    pub(crate) principal: Option<String>,
    /// The key its stored state is counted under: the principal of the
    /// request, or its client address without one (set when a request's
    /// session is read, empty until then).
    pub(crate) owner: String,
    /// Its `logging/setLevel` level, as read with the session.
    pub(crate) log_level: Option<LogLevel>,
}

impl Session {
    /// The key of its stored state.
    pub(crate) fn key(&self) -> StateKey<'_> {
        StateKey {
            sid: &self.sid,
            owner: &self.owner,
            expires: self.expires,
        }
    }
}

/// Seals a new session. `-32602` when the client's capabilities and info are
/// too large to carry in a header.
pub(crate) fn mint(
    sealer: &Sealer,
    ttl: std::time::Duration,
    init: ClientInit,
    principal: Option<&str>,
) -> Result<(String, Session), McpError> {
    let size = serde_json::to_vec(&init.capabilities).map_or(0, |v| v.len())
        + init
            .client_info
            .as_ref()
            .and_then(|i| serde_json::to_vec(i).ok())
            .map_or(0, |v| v.len());
    if size > MAX_CLIENT_BYTES {
        return Err(McpError::invalid_params(format!(
            "Invalid params: capabilities and clientInfo take {size} bytes; at most {MAX_CLIENT_BYTES} are kept for a session"
        )));
    }
    let sid = format!("{:016x}{:016x}", sealer.nonce(), sealer.nonce());
    let expires = seal::expiry(ttl);
    let payload = json!({
        "sid": sid,
        "v": init.version,
        "c": init.capabilities,
        "i": init.client_info,
        "exp": expires,
        "p": principal,
    });
    let token = sealer.seal(purpose::SESSION, &payload);
    Ok((
        token,
        Session {
            sid,
            init,
            expires,
            principal: principal.map(str::to_owned),
            owner: String::new(),
            log_level: None,
        },
    ))
}

/// Opens a session token: `None` if forged, malformed or expired.
pub(crate) fn open(sealer: &Sealer, token: &str) -> Option<Session> {
    if token.len() > MAX_SESSION_ID_LEN {
        return None;
    }
    let payload = sealer.open(purpose::SESSION, token)?;
    let expires = payload.get("exp")?.as_u64()?;
    if seal::expired(expires) {
        return None;
    }
    Some(Session {
        sid: payload.get("sid")?.as_str()?.to_owned(),
        init: ClientInit {
            version: payload.get("v")?.as_str()?.to_owned(),
            capabilities: payload.get("c")?.as_object()?.clone(),
            client_info: payload.get("i").filter(|i| i.is_object()).cloned(),
        },
        expires,
        principal: payload.get("p").and_then(Value::as_str).map(str::to_owned),
        owner: String::new(),
        log_level: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn init() -> ClientInit {
        ClientInit::from_params(&serde_json::Map::new())
    }

    #[test]
    fn tokens_open_only_unchanged_and_unexpired() {
        let sealer = Sealer::new([4; 32]);
        let (token, s) = mint(&sealer, Duration::from_secs(60), init(), None).unwrap();
        assert!(token.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        let opened = open(&sealer, &token).unwrap();
        assert_eq!(opened.sid, s.sid);
        assert_eq!(opened.init.version, "2025-11-25");
        assert!(open(&sealer, &format!("{token}x")).is_none());
        assert!(open(&Sealer::new([5; 32]), &token).is_none());
        let (expired, _) = mint(&sealer, Duration::ZERO, init(), None).unwrap();
        assert!(open(&sealer, &expired).is_none());
    }
}
