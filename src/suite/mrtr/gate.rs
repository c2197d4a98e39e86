//! The MRTR capability gate: an input request is sent only when the request
//! declared the client capability it needs (otherwise `-32021`).

use serde_json::{Map, Value, json};

use crate::protocol::{ClientCapabilities, McpError};
use crate::suite::common::InputRequired;

/// The capability an input request needs, as a `ClientCapabilities` fragment,
/// or `None` when `caps` declares it. Unknown methods are `-32603` (a server bug).
fn required_capability(
    request: &Value,
    caps: &ClientCapabilities,
) -> Result<Option<(String, Value)>, McpError> {
    let method = request
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = request.get("params");
    let sub = |cap: &str, sub: &str| {
        caps.0
            .get(cap)
            .and_then(Value::as_object)
            .is_some_and(|c| c.get(sub).is_some_and(|v| !v.is_null()))
    };
    match method {
        "elicitation/create" => {
            let url_mode =
                params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url");
            if !caps.declares("elicitation") {
                let need = if url_mode {
                    json!({"url": {}})
                } else {
                    json!({})
                };
                return Ok(Some(("elicitation".into(), need)));
            }
            if url_mode && !sub("elicitation", "url") {
                return Ok(Some(("elicitation".into(), json!({"url": {}}))));
            }
            // `elicitation: {}` means form only; a client that lists modes must
            // list `form` to get form-mode requests.
            let lists_modes = sub("elicitation", "form") || sub("elicitation", "url");
            if !url_mode && lists_modes && !sub("elicitation", "form") {
                return Ok(Some(("elicitation".into(), json!({"form": {}}))));
            }
            Ok(None)
        }
        "sampling/createMessage" => {
            let with_tools = params
                .and_then(|p| p.get("tools"))
                .is_some_and(|t| !t.is_null());
            if !caps.declares("sampling") {
                let need = if with_tools {
                    json!({"tools": {}})
                } else {
                    json!({})
                };
                return Ok(Some(("sampling".into(), need)));
            }
            if with_tools && !sub("sampling", "tools") {
                return Ok(Some(("sampling".into(), json!({"tools": {}}))));
            }
            Ok(None)
        }
        "roots/list" => Ok((!caps.declares("roots")).then(|| ("roots".into(), json!({})))),
        other => Err(McpError::internal(format!(
            "Internal error: input request method {other:?} is not one of elicitation/create, sampling/createMessage, roots/list"
        ))),
    }
}

/// `-32021` naming every capability the round needs and the request did not declare.
pub(crate) fn check_capabilities(
    round: &InputRequired,
    caps: &ClientCapabilities,
) -> Result<(), McpError> {
    let mut required = Map::new();
    for request in round.input_requests.values() {
        if let Some((cap, need)) = required_capability(request, caps)? {
            match (required.get_mut(&cap), need) {
                (Some(Value::Object(have)), Value::Object(more)) => have.extend(more),
                (_, need) => {
                    required.insert(cap, need);
                }
            }
        }
    }
    if required.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = required.keys().map(String::as_str).collect();
    Err(McpError::MissingClientCapability {
        message: format!(
            "Server requires the {} client capability for this request",
            names.join(", ")
        ),
        required,
    })
}
