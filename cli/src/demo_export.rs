//! The demo's long-running tool, `export_notes`: runs as a task when the
//! client declares the tasks extension, reports its progress as status
//! messages, and asks one question (an elicitation) half way.

use std::time::Duration;

use serde_json::{Value, json};

use super::demo::Notes;
use genmcp::protocol::McpError;
use genmcp::suite::{CallToolResult, FnTool, InputRequired, TaskSupport, ToolBuilder};

/// How long each of the export's two steps takes.
const STEP: Duration = Duration::from_secs(2);

fn confirm_schema() -> Value {
    json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]})
}

/// Whether an elicitation answer accepted with `confirm: true`.
fn confirmed(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer["content"]["confirm"].as_bool() == Some(true)
}

/// `export_notes`: counts the notes, asks whether to export them, then
/// "exports" them (a summary as the result). Without the tasks extension it
/// asks through an ordinary multi round-trip and answers at once.
pub(crate) fn export_tool(notes: Notes) -> FnTool {
    ToolBuilder::new("export_notes")
        .description(
            "Exports every note (slowly). Runs as a task when the client supports tasks: \
             status messages while it works, and one confirmation question",
        )
        .task_support(TaskSupport::Optional)
        .handler(move |call| {
            let notes = notes.clone();
            async move {
                let Some(task) = call.task() else {
                    return match call.elicited("confirm") {
                        Some(c) if c.get("confirm").and_then(Value::as_bool) == Some(true) => {
                            Ok(summary(&notes).await?.into())
                        }
                        Some(_) => Ok(CallToolResult::text("export cancelled by the user").into()),
                        None => Ok(InputRequired::new()
                            .elicit("confirm", "Export all notes?", confirm_schema())
                            .into()),
                    };
                };
                task.set_status_message("counting notes");
                tokio::select! {
                    _ = tokio::time::sleep(STEP) => {}
                    _ = task.cancelled() => return Ok(CallToolResult::text("export cancelled").into()),
                }
                let count = notes.all().await?.len();
                let answer = task
                    .elicit(&format!("Export {count} notes?"), confirm_schema())
                    .await;
                if !answer.as_ref().is_ok_and(confirmed) {
                    return Ok(CallToolResult::text("export cancelled by the user").into());
                }
                task.set_status_message(format!("exporting {count} notes"));
                tokio::select! {
                    _ = tokio::time::sleep(STEP) => {}
                    _ = task.cancelled() => return Ok(CallToolResult::text("export cancelled").into()),
                }
                Ok(summary(&notes).await?.into())
            }
        })
}

async fn summary(notes: &Notes) -> Result<CallToolResult, McpError> {
    let all = notes.all().await?;
    let summary =
        json!({"exported": all.len(), "uris": all.iter().map(|(u, _)| u).collect::<Vec<_>>()});
    Ok(CallToolResult::text(summary.to_string()).with_structured(summary))
}
