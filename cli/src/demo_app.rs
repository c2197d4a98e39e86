//! The notes demo's MCP Apps view: `show_notes` lists the notes (text for
//! hosts without the extension, `structuredContent` for the view) and names
//! the view `ui://notes/board`, a small HTML document that renders the notes
//! the host hands it.

use genmcp::prelude::*;
use genmcp::suite::apps::{ToolUi, UiMeta, UiResource, UiResources};
use serde_json::json;

use crate::notes::Notes;

/// The view's URI.
pub const BOARD_URI: &str = "ui://notes/board";

/// The view: an HTML5 document speaking the MCP Apps `postMessage` protocol
/// (spec 2026-01-26): it sends `ui/initialize`, then
/// `ui/notifications/initialized` once the host answered, renders the
/// `ui/notifications/tool-result` the host sends, reports its size with
/// `ui/notifications/size-changed` and answers `ui/resource-teardown`.
pub const BOARD_HTML: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Notes</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 12px; }
  li { padding: 4px 0; border-bottom: 1px solid #ddd; list-style: none; }
  code { color: #666; font-size: 12px; }
</style>
</head>
<body>
<h1>Notes</h1>
<ul id="notes"><li>Waiting for the tool result...</li></ul>
<script>
  // MCP Apps (spec 2026-01-26): JSON-RPC over postMessage with the host.
  // ui/initialize, then ui/notifications/initialized once the host answered;
  // the host sends the tool's result in ui/notifications/tool-result.
  const list = document.getElementById("notes");
  const host = window.parent;
  const send = (msg) => host.postMessage({ jsonrpc: "2.0", ...msg }, "*");
  function render(result) {
    const notes = (result && result.structuredContent && result.structuredContent.notes) || [];
    list.replaceChildren(...notes.map((n) => {
      const li = document.createElement("li");
      li.textContent = n.text + " ";
      const code = document.createElement("code");
      code.textContent = n.uri;
      li.appendChild(code);
      return li;
    }));
    if (notes.length === 0) list.innerHTML = "<li>No notes yet.</li>";
  }
  window.addEventListener("message", (event) => {
    if (event.source !== host) return;
    const msg = event.data || {};
    if (msg.jsonrpc !== "2.0") return;
    if (msg.id === 1 && !msg.method) {
      if (msg.result) {
        send({ method: "ui/notifications/initialized", params: {} });
        new ResizeObserver(() => send({ method: "ui/notifications/size-changed",
          params: { width: document.documentElement.scrollWidth,
                    height: document.documentElement.scrollHeight } }))
          .observe(document.documentElement);
      } else {
        list.innerHTML = "<li>The host refused the view.</li>";
      }
    } else if (msg.method === "ui/notifications/tool-result") {
      render(msg.params);
    } else if (msg.method === "ui/resource-teardown" || msg.method === "ping") {
      send({ id: msg.id, result: {} });
    } else if (msg.method && msg.id !== undefined) {
      send({ id: msg.id, error: { code: -32601, message: "Method not found" } });
    }
  });
  send({ id: 1, method: "ui/initialize", params: { protocolVersion: "2026-01-26",
    appInfo: { name: "notes-board", version: "1.0.0" }, appCapabilities: {} } });
</script>
</body>
</html>
"#;

/// The view, to serve with `SuiteBuilder::apps`.
pub fn views() -> UiResources {
    let mut meta = UiMeta::default();
    meta.prefers_border = Some(true);
    UiResources::new().view(
        UiResource::new(BOARD_URI, "notes-board", BOARD_HTML)
            .title("Notes board")
            .description("The notes, as a list")
            .meta(meta),
    )
}

/// `show_notes`: every note, as text and as `structuredContent`, shown in
/// the view by hosts with MCP Apps.
pub fn show_notes_tool(notes: Notes) -> impl Tool {
    ToolBuilder::new("show_notes")
        .description("Shows every note (in the notes board view where the host supports MCP Apps)")
        .ui(ToolUi::new(BOARD_URI))
        .handler(move |_call| {
            let notes = notes.clone();
            async move {
                let all = notes.all().await?;
                let text = if all.is_empty() {
                    "No notes yet.".to_owned()
                } else {
                    all.iter()
                        .map(|(uri, text)| format!("{uri}: {text}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let structured = json!({"notes": all.iter()
                    .map(|(uri, text)| json!({"uri": uri, "text": text}))
                    .collect::<Vec<_>>()});
                Ok(CallToolResult::text(text)
                    .with_structured(structured)
                    .into())
            }
        })
}
