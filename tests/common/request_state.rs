//! The fixture tool whose answer carries a sealed `requestState`, called over
//! real HTTP: what the multi-node and spent-record tests share.

use std::net::SocketAddr;

use serde_json::{Value, json};

/// The conformance fixture tool that asks for input with a `requestState`.
pub const STATE_TOOL: &str = "test_input_required_result_request_state";

/// Calls [`STATE_TOOL`] on `addr` with `extra` merged into the params (an
/// `inputResponses` + `requestState` retry, say); asserts HTTP 200 and returns
/// the JSON-RPC reply.
pub fn state_call(addr: SocketAddr, id: i64, extra: Value) -> Value {
    let mut params = json!({"name": STATE_TOOL, "arguments": {}});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": super::VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let r = super::post(
        addr,
        &super::headers("tools/call", Some(STATE_TOOL)),
        &super::request(json!(id), "tools/call", params),
    );
    assert_eq!(r.status, 200);
    r.json()
}
