//! `tools/list` and `tools/call`, and the MRTR helpers every call path uses.

use super::*;

impl<H: SubscriptionHandler> Suite<H> {
    pub(super) fn list_tools(
        &self,
        params: &Map<String, Value>,
    ) -> Result<Map<String, Value>, McpError> {
        let tools: Vec<Value> = self
            .inner
            .catalog
            .tools()
            .iter()
            .map(|t| t.descriptor().to_json())
            .collect();
        let hint = self.inner.tools_cache.unwrap_or(self.inner.list_cache);
        self.page("tools", "tools", tools, params, hint)
    }

    pub(super) async fn retry(
        &self,
        params: &Map<String, Value>,
        binding: &Binding,
    ) -> Result<Retry, McpError> {
        mrtr::parse_retry(&self.inner.sealer, &self.inner.spent, params, binding).await
    }

    pub(super) fn input_required(
        &self,
        round: InputRequired,
        channel: &Channel,
        binding: &Binding,
    ) -> Result<Map<String, Value>, McpError> {
        mrtr::input_required_result(
            &self.inner.sealer,
            self.inner.request_state_ttl,
            round,
            &channel.meta().client_capabilities,
            binding,
        )
    }

    /// `tools/call`. The tool is looked up before anything else is read (an
    /// unknown tool is answered at once, whatever the arguments), and the
    /// arguments are moved out of the params, never copied: validated against
    /// the input schema, digested for MRTR binding, then handed to the tool. A
    /// completed result is checked against the tool's output schema.
    pub(super) async fn call_tool(
        &self,
        mut params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let name = match params.remove("name") {
            Some(Value::String(n)) => n,
            _ => {
                return Err(McpError::invalid_params(
                    "Invalid params: tools/call requires a string name",
                ));
            }
        };
        let Some(entry) = self.inner.catalog.tool_entry(&name) else {
            return Err(McpError::invalid_params_with(
                format!("Unknown tool: {name}"),
                json!({ "name": name }),
            ));
        };
        let view = apps::has_view(&entry.tool.descriptor().extra);
        let support = entry.tool.task_support();
        let declared = tasks::declared(&channel);
        if support == TaskSupport::Required && !declared {
            return Err(tasks::extension_required());
        }
        let schema = match &entry.schema {
            Ok(schema) => schema,
            Err(e) => {
                // The detail (compiler messages, schema fragments) is for the
                // operator, not the client.
                tracing::error!(tool = %name, error = %e, "tools/call refused: the tool's schema is invalid");
                return Err(McpError::internal("Internal error: tool unavailable"));
            }
        };
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(object @ Value::Object(_)) => object,
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: arguments must be an object",
                ));
            }
        };
        if let Err(invalid) = schema.validate(&name, &arguments) {
            // Bad input is a tool execution error the model can correct
            // (SEP-1303): a result with `isError`, and the tool never runs.
            return Ok(CallToolResult::error(schemas::input_error_text(&invalid)).into_map());
        }
        let binding = Binding::new(methods::TOOLS_CALL, &name, &arguments)
            .by(channel.assigns().get::<Principal>());
        let retry = self.retry(&params, &binding).await?;
        let Value::Object(arguments) = arguments else {
            return Err(McpError::internal("Internal error"));
        };
        let mut call = ToolCall {
            arguments,
            channel: channel.clone(),
            input_responses: retry.input_responses,
            request_state: retry.request_state,
            task: None,
        };
        if declared && support != TaskSupport::Forbidden {
            let tool = entry.tool.clone();
            let checked = entry.clone();
            let started = self
                .inner
                .tasks
                .start(
                    tasks::owner_of(&channel),
                    support == TaskSupport::Required,
                    move |cx| {
                        call.task = Some(cx);
                        tool.call(call)
                    },
                    move |result| {
                        let result = with_fallback(view, result);
                        match &checked.schema {
                            Ok(schema) => schema.check_output(&name, result),
                            Err(_) => result,
                        }
                    },
                )
                .await?;
            return match started {
                tasks::Started::Mrtr(round) => self.input_required(round, &channel, &binding),
                tasks::Started::Direct(result) => Ok(result.into_map()),
                tasks::Started::Task(created) => Ok(created),
            };
        }
        match entry.tool.call(call).await? {
            ToolOutcome::Complete(result) => Ok(schema
                .check_output(&name, with_fallback(view, result))
                .into_map()),
            ToolOutcome::InputRequired(round) => self.input_required(round, &channel, &binding),
        }
    }
}

/// A result of a tool with an MCP Apps view always carries a text block, the
/// fallback of hosts without the extension (one is added when it has none).
fn with_fallback(view: bool, mut result: CallToolResult) -> CallToolResult {
    if view
        && !result
            .content
            .iter()
            .any(|c| matches!(c, Content::Text { .. }))
    {
        let text = match &result.structured_content {
            Some(v) => v.to_string(),
            None => apps::DEFAULT_FALLBACK_TEXT.to_owned(),
        };
        result.content.push(Content::text(text));
    }
    result
}
