//! A round of a multi round-trip request (MRTR): what a tool, prompt or
//! resource read returns when it needs input from the client first.

use serde_json::{Map, Value, json};

/// A round that needs input from the client (MRTR): `resultType: "input_required"`.
///
/// Each input request's method needs its client capability declared on the
/// request (`elicitation/create` → `elicitation` (`elicitation.url` for URL
/// mode), `sampling/createMessage` → `sampling` (`sampling.tools` when passing
/// tools), `roots/list` → `roots`); otherwise the suite answers `-32021` naming
/// every missing capability. The suite seals `state` into `requestState`.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct InputRequired {
    /// `inputRequests`: key -> `{"method": ..., "params": ...}`.
    pub input_requests: Map<String, Value>,
    /// State to carry to the retry; the suite seals it (integrity, binding to the
    /// tool and its arguments, expiry) into `requestState`.
    pub state: Option<Value>,
}

impl InputRequired {
    /// No requests yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an input request.
    pub fn request(mut self, key: impl Into<String>, method: &str, params: Value) -> Self {
        self.input_requests
            .insert(key.into(), json!({"method": method, "params": params}));
        self
    }

    /// Adds a form-mode `elicitation/create` request.
    pub fn elicit(self, key: impl Into<String>, message: &str, requested_schema: Value) -> Self {
        self.request(
            key,
            "elicitation/create",
            json!({"mode": "form", "message": message, "requestedSchema": requested_schema}),
        )
    }

    /// Adds a `sampling/createMessage` request with one user text message.
    pub fn sample(self, key: impl Into<String>, prompt: &str, max_tokens: u64) -> Self {
        self.request(
            key,
            "sampling/createMessage",
            json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": max_tokens,
            }),
        )
    }

    /// Adds a `roots/list` request.
    pub fn list_roots(self, key: impl Into<String>) -> Self {
        self.request(key, "roots/list", json!({}))
    }

    /// Sets the state carried to the retry.
    pub fn with_state(mut self, state: Value) -> Self {
        self.state = Some(state);
        self
    }

    /// Whether the round asks for nothing and carries no state (invalid: the
    /// suite answers `-32603`).
    pub fn is_empty(&self) -> bool {
        self.input_requests.is_empty() && self.state.is_none()
    }
}
