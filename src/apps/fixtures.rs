//! The conformance fixture catalog served by `genmcp serve --conformance`: every
//! tool, resource and prompt the official suite calls, by exact name.

use serde_json::json;

use crate::protocol::Implementation;
use crate::suite::{CallToolResult, Catalog, CatalogEvent, CatalogSubscriptions, Suite, ToolBuilder};

/// The fixture suite.
pub fn suite() -> Suite<CatalogSubscriptions> {
    let catalog = Catalog::new();
    catalog.add_tool(
        ToolBuilder::new("test_simple_text")
            .description("Returns a simple text response")
            .handler(|_call| async {
                Ok(CallToolResult::text("This is a simple text response for testing.").into())
            }),
    );
    let trigger = catalog.clone();
    catalog.add_tool(
        ToolBuilder::new("test_trigger_tool_change")
            .description("Changes the tool list and notifies listen streams")
            .input_schema(json!({"type": "object"}))
            .handler(move |_call| {
                let catalog = trigger.clone();
                async move {
                    catalog.publish(CatalogEvent::ToolsChanged);
                    Ok(CallToolResult::text("tool list changed").into())
                }
            }),
    );
    Suite::builder(Implementation::new("genmcp-conformance", env!("CARGO_PKG_VERSION")))
        .catalog(catalog.clone())
        .subscriptions(CatalogSubscriptions::new(&catalog))
        .build()
}
