//! The three task methods on the wire: negotiation, `taskId`, ownership.

use serde_json::{Map, Value, json};

use super::EXTENSION;
use crate::mux::Channel;
use crate::protocol::McpError;

/// `-32021` naming the tasks extension.
pub(crate) fn extension_required() -> McpError {
    let mut required = Map::new();
    required.insert("extensions".into(), json!({ EXTENSION: {} }));
    McpError::MissingClientCapability {
        message: format!("This request requires the {EXTENSION} extension"),
        required,
    }
}

/// Whether the request on `channel` declares the tasks extension (only the
/// current request's declaration counts).
pub(crate) fn declared(channel: &Channel) -> bool {
    channel
        .meta()
        .client_capabilities
        .declares_extension(EXTENSION)
}

/// Who owns the tasks a request creates or reads: its principal, else its
/// client address, else (stdio) the local user.
pub(crate) fn owner_of(channel: &Channel) -> String {
    crate::mux::limit_key(channel.assigns()).unwrap_or_else(|| "local".to_owned())
}

/// `params.taskId`, after the extension check.
pub(crate) fn task_id(channel: &Channel, params: &Map<String, Value>) -> Result<String, McpError> {
    if !declared(channel) {
        return Err(extension_required());
    }
    match params.get("taskId") {
        Some(Value::String(id)) => Ok(id.clone()),
        _ => Err(McpError::invalid_params(
            "Invalid params: taskId must be a string",
        )),
    }
}

/// Answers `tasks/get`, `tasks/update` or `tasks/cancel` (`method`) with
/// `tasks`. The order of checks: the extension (`-32021`), `taskId`
/// (`-32602`), then the lookup (`-32602` for unknown, expired and another
/// principal's tasks alike).
pub(crate) async fn answer(
    tasks: &super::Tasks,
    method: &str,
    params: &Map<String, Value>,
    channel: &Channel,
) -> Result<Map<String, Value>, McpError> {
    let id = task_id(channel, params)?;
    let owner = owner_of(channel);
    let mut result = match method {
        METHOD_GET => tasks.get_any(&id, &owner).await?,
        METHOD_UPDATE => {
            let empty = Map::new();
            let responses = match params.get("inputResponses") {
                Some(Value::Object(map)) => map,
                None | Some(Value::Null) => &empty,
                Some(_) => {
                    return Err(McpError::invalid_params(
                        "Invalid params: inputResponses must be an object",
                    ));
                }
            };
            tasks.update_any(&id, &owner, responses).await?;
            Map::new()
        }
        METHOD_CANCEL => {
            tasks.cancel_any(&id, &owner).await?;
            Map::new()
        }
        other => return Err(McpError::MethodNotFound(other.to_owned())),
    };
    result.insert("resultType".into(), Value::from("complete"));
    Ok(result)
}

/// `tasks/get`.
pub const METHOD_GET: &str = "tasks/get";
/// `tasks/update`.
pub const METHOD_UPDATE: &str = "tasks/update";
/// `tasks/cancel`.
pub const METHOD_CANCEL: &str = "tasks/cancel";
/// `notifications/tasks`: a task's status on a listen stream.
pub const NOTIFICATION: &str = "notifications/tasks";

/// Whether `method` is one of the three task methods.
pub fn is_task_method(method: &str) -> bool {
    matches!(method, METHOD_GET | METHOD_UPDATE | METHOD_CANCEL)
}
