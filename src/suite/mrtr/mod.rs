//! Multi round-trip requests (MRTR): reading `inputResponses` / `requestState` on
//! a retry, and turning an [`InputRequired`] round into an `input_required` result.
//!
//! `requestState` is sealed ([`seal`]) over a payload that binds the
//! method, the tool / prompt name or resource URI, a SHA-256 digest of the
//! canonical JSON of the arguments, an expiry, a per-suite sequence number (so
//! consecutive rounds always differ) and the handler's state value.

mod answers;
mod gate;

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::mux::Principal;
use crate::protocol::{ClientCapabilities, McpError};
use crate::suite::common::InputRequired;
use crate::suite::sealing::seal::{self, Sealer, purpose};
use crate::suite::sealing::spent::{Spend, Spender};
pub(crate) use answers::{elicited, roots, sampled_text};
pub(crate) use gate::check_capabilities;

/// What a request is bound to: the state sealed for one cannot be replayed on another.
#[derive(Clone, Debug)]
pub(crate) struct Binding {
    pub method: String,
    pub name: String,
    pub digest: String,
    /// The subject of the principal the request is from, if any: a state
    /// issued to one principal is refused for any other (and for none).
    pub principal: Option<String>,
}

impl Binding {
    pub(crate) fn new(method: &str, name: &str, arguments: &Value) -> Self {
        Binding {
            method: method.to_owned(),
            name: name.to_owned(),
            digest: seal::digest(arguments),
            principal: None,
        }
    }

    /// Bound to `principal` too.
    pub(crate) fn by(mut self, principal: Option<&Principal>) -> Self {
        self.principal = principal.map(|p| p.subject().to_owned());
        self
    }
}

/// The MRTR part of a request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Retry {
    pub input_responses: Map<String, Value>,
    pub request_state: Option<Value>,
}

impl Retry {
    /// Whether the request continues an earlier round (its result must not be cached).
    pub(crate) fn is_retry(&self) -> bool {
        !self.input_responses.is_empty() || self.request_state.is_some()
    }
}

fn invalid_state(reason: &str) -> McpError {
    McpError::invalid_params_with(
        format!("Invalid params: invalid requestState ({reason})"),
        json!({ "reason": reason }),
    )
}

/// Reads `inputResponses` and verifies `requestState` of a request bound to `binding`.
///
/// `inputResponses` must be an object whose values are objects (`-32602`
/// otherwise, `null` included); `requestState` must be a string sealed by this
/// suite for the same method, name, arguments and principal, not expired and
/// not spent before (`-32602`; a replay or another principal gets the same
/// error as a tampered state). It is spent here, in `spent`; when `spent`
/// cannot be reached the retry is refused ([`unverifiable_state`]).
pub(crate) async fn parse_retry(
    sealer: &Sealer,
    spent: &Spender,
    params: &Map<String, Value>,
    binding: &Binding,
) -> Result<Retry, McpError> {
    let input_responses = match params.get("inputResponses") {
        None => Map::new(),
        Some(Value::Object(map)) => {
            if let Some((key, _)) = map.iter().find(|(_, v)| !v.is_object()) {
                return Err(McpError::invalid_params_with(
                    format!(
                        "Invalid params: inputResponses.{key} must be an object (an ElicitResult, CreateMessageResult or ListRootsResult)"
                    ),
                    json!({ "key": key }),
                ));
            }
            map.clone()
        }
        Some(_) => {
            return Err(McpError::invalid_params(
                "Invalid params: inputResponses must be an object",
            ));
        }
    };
    let request_state = match params.get("requestState") {
        None => None,
        Some(Value::String(token)) => {
            let (nonce, exp, state) = open_state(sealer, token, binding)?;
            spend_state(spent, nonce, exp).await?;
            Some(state)
        }
        Some(_) => return Err(invalid_state("requestState must be a string")),
    };
    Ok(Retry {
        input_responses,
        request_state,
    })
}

/// The reason given for a tampered, replayed or misappropriated state: the
/// client learns nothing about which.
const TAMPERED: &str = "integrity check failed";

/// The nonce, expiry and handler state of a sealed state verified for
/// `binding` (not yet spent).
fn open_state(
    sealer: &Sealer,
    token: &str,
    binding: &Binding,
) -> Result<(u64, u64, Value), McpError> {
    let payload = sealer
        .open(purpose::REQUEST_STATE, token)
        .ok_or_else(|| invalid_state(TAMPERED))?;
    let field = |k: &str| payload.get(k).and_then(Value::as_str);
    if field("m") != Some(binding.method.as_str()) || field("n") != Some(binding.name.as_str()) {
        return Err(invalid_state("issued for another request"));
    }
    if field("d") != Some(binding.digest.as_str()) {
        return Err(invalid_state("issued for other arguments"));
    }
    if payload.get("p").and_then(Value::as_str) != binding.principal.as_deref() {
        return Err(invalid_state(TAMPERED));
    }
    let exp = match payload.get("exp").and_then(Value::as_u64) {
        Some(exp) if !seal::expired(exp) => exp,
        _ => return Err(invalid_state("expired")),
    };
    let nonce = payload
        .get("q")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid_state(TAMPERED))?;
    let state = payload.get("s").cloned().unwrap_or(Value::Null);
    Ok((nonce, exp, state))
}

/// The refusal of a retry whose state could not be checked for replay (the
/// spent record is unreachable): the state is not honoured, and the client is
/// told it may retry (`-32603`; see `docs/auth.md`).
fn unverifiable_state() -> McpError {
    McpError::internal(
        "Internal error: cannot check requestState against replay (the spent-state record is \
         unavailable); it was not honoured, retry later",
    )
}

/// Spends a verified state: once honoured, a state is refused.
async fn spend_state(spent: &Spender, nonce: u64, exp: u64) -> Result<(), McpError> {
    match spent.spend(nonce, exp, seal::now_ms()).await {
        Ok(Spend::Fresh) => Ok(()),
        Ok(Spend::Replayed) => Err(invalid_state(TAMPERED)),
        Ok(Spend::Full(wait_ms)) => Err(McpError::limit_exceeded(
            "max_spent_request_states",
            "Server busy: too many request states in use; retry later",
            wait_ms.div_ceil(1_000),
        )),
        Err(e) => {
            tracing::warn!(error = %e, "requestState refused: cannot check it against replay");
            Err(unverifiable_state())
        }
    }
}

/// The `input_required` result of a round: capability-gated, its state sealed
/// into `requestState`. No `ttlMs` / `cacheScope` (input-required results are
/// not cacheable).
pub(crate) fn input_required_result(
    sealer: &Sealer,
    ttl: Duration,
    round: InputRequired,
    caps: &ClientCapabilities,
    binding: &Binding,
) -> Result<Map<String, Value>, McpError> {
    if round.is_empty() {
        return Err(McpError::internal(
            "Internal error: an input_required round needs input requests or state",
        ));
    }
    for (key, request) in &round.input_requests {
        if !request.is_object() {
            return Err(McpError::internal(format!(
                "Internal error: input request {key} is not an object"
            )));
        }
    }
    check_capabilities(&round, caps)?;
    let mut result = Map::new();
    result.insert("resultType".into(), Value::from("input_required"));
    if !round.input_requests.is_empty() {
        result.insert("inputRequests".into(), Value::Object(round.input_requests));
    }
    if let Some(state) = round.state {
        let mut payload = json!({
            "m": binding.method,
            "n": binding.name,
            "d": binding.digest,
            "exp": seal::expiry(ttl),
            "q": sealer.nonce(),
            "s": state,
        });
        if let (Some(p), Some(obj)) = (&binding.principal, payload.as_object_mut()) {
            obj.insert("p".into(), Value::from(p.as_str()));
        }
        let token = sealer.seal(purpose::REQUEST_STATE, &payload);
        if token.len() > seal::MAX_TOKEN_LEN {
            // The retry would be refused: say so now, naming the limit.
            return Err(McpError::internal(format!(
                "Internal error: the request state is {} bytes sealed; at most {} are accepted back",
                token.len(),
                seal::MAX_TOKEN_LEN
            )));
        }
        result.insert("requestState".into(), Value::from(token));
    }
    Ok(result)
}

#[cfg(test)]
mod tests;
