//! The 2025 shapes of 2026-07-28 results and errors.

use serde_json::{Map, Value, json};

use crate::protocol::error::ErrorObject;
use crate::protocol::{McpError, RequestId, keys, methods};

/// A 2026-07-28 result as a 2025 client expects it: no `resultType`, cache
/// hints or server info.
pub(crate) fn legacy_result(mut result: Map<String, Value>) -> Map<String, Value> {
    result.remove("resultType");
    result.remove("ttlMs");
    result.remove("cacheScope");
    if let Some(Value::Object(meta)) = result.get_mut("_meta") {
        meta.remove(keys::SERVER_INFO);
        if meta.is_empty() {
            result.remove("_meta");
        }
    }
    result
}

/// A 2026-07-28 error as a 2025 client expects it: resource not found is
/// `-32002`; a missing client capability (`-32021`, new in 2026) is `-32602`.
pub(crate) fn legacy_error(method: &str, error: &McpError) -> ErrorObject {
    let mut obj = error.to_error_object();
    if method == methods::RESOURCES_READ
        && obj.code == -32602
        && obj.message == "Resource not found"
    {
        obj.code = -32002;
    }
    if obj.code == -32021 {
        obj.code = -32602;
    }
    obj
}

/// A JSON-RPC error response carrying `error` as it is.
pub(crate) fn encode_legacy_error(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id.map_or(Value::Null, RequestId::to_value),
        "error": error,
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_and_errors_take_their_2025_shape() {
        let result = json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "_meta": {keys::SERVER_INFO: {"name": "x"}}, "tools": []});
        let Value::Object(result) = result else {
            unreachable!()
        };
        assert_eq!(Value::Object(legacy_result(result)), json!({"tools": []}));
        let not_found = McpError::invalid_params_with("Resource not found", json!({"uri": "x"}));
        assert_eq!(
            legacy_error(methods::RESOURCES_READ, &not_found).code,
            -32002
        );
        assert_eq!(legacy_error(methods::TOOLS_CALL, &not_found).code, -32602);
    }
}
