//! Tools: the descriptor served by `tools/list` and the trait `tools/call` runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::content::CallToolResult;
use crate::mux::Channel;
use crate::protocol::McpError;

/// A boxed `Send` future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What `tools/list` says about a tool. `input_schema` (and `output_schema`) are
/// served verbatim.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolDescriptor {
    /// Unique name.
    pub name: String,
    /// Display title.
    pub title: Option<String>,
    /// Description for the model.
    pub description: Option<String>,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`.
    pub output_schema: Option<Value>,
    /// `annotations` (`readOnlyHint`, `destructiveHint`, ...).
    pub annotations: Option<Value>,
    /// Other fields (`icons`, `_meta`, ...), served as given.
    pub extra: Map<String, Value>,
}

impl ToolDescriptor {
    /// A descriptor with an empty object input schema.
    pub fn new(name: impl Into<String>) -> Self {
        ToolDescriptor {
            name: name.into(),
            title: None,
            description: None,
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            extra: Map::new(),
        }
    }

    /// The `Tool` object as served by `tools/list`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("name".into(), Value::from(self.name.clone()));
        if let Some(t) = &self.title {
            map.insert("title".into(), Value::from(t.clone()));
        }
        if let Some(d) = &self.description {
            map.insert("description".into(), Value::from(d.clone()));
        }
        map.insert("inputSchema".into(), self.input_schema.clone());
        if let Some(o) = &self.output_schema {
            map.insert("outputSchema".into(), o.clone());
        }
        if let Some(a) = &self.annotations {
            map.insert("annotations".into(), a.clone());
        }
        for (k, v) in &self.extra {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

/// One `tools/call` as a tool sees it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ToolCall {
    /// The arguments, already validated against the input schema.
    pub arguments: Map<String, Value>,
    /// The request's channel: progress, logs, client metadata.
    pub channel: Channel,
    /// `inputResponses` of a multi round-trip retry (empty on a first call).
    pub input_responses: Map<String, Value>,
    /// The verified state this tool put in `requestState` last round, if any.
    pub request_state: Option<Value>,
}

impl ToolCall {
    /// A first-round call (no input responses, no request state): what a tool sees
    /// for `arguments` on `channel`. Useful to unit-test a [`Tool`].
    pub fn new(arguments: Map<String, Value>, channel: Channel) -> Self {
        ToolCall {
            arguments,
            channel,
            input_responses: Map::new(),
            request_state: None,
        }
    }

    /// The raw answer to input request `key` of the previous round, if sent.
    pub fn input(&self, key: &str) -> Option<&Value> {
        self.input_responses.get(key)
    }

    /// The `content` of an accepted elicitation answer to input request `key`
    /// (`{"action":"accept","content":{...}}`); `None` if absent, declined or cancelled.
    pub fn elicited(&self, key: &str) -> Option<&Map<String, Value>> {
        super::mrtr::elicited(&self.input_responses, key)
    }

    /// The text of a sampling answer to input request `key`, if it is text.
    pub fn sampled_text(&self, key: &str) -> Option<&str> {
        super::mrtr::sampled_text(&self.input_responses, key)
    }

    /// The root URIs of a `roots/list` answer to input request `key`.
    pub fn roots(&self, key: &str) -> Option<Vec<&str>> {
        super::mrtr::roots(&self.input_responses, key)
    }
}

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

/// What a tool returns.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ToolOutcome {
    /// Done.
    Complete(CallToolResult),
    /// Needs input from the client first.
    InputRequired(InputRequired),
}

impl From<CallToolResult> for ToolOutcome {
    fn from(r: CallToolResult) -> Self {
        ToolOutcome::Complete(r)
    }
}

impl From<InputRequired> for ToolOutcome {
    fn from(r: InputRequired) -> Self {
        ToolOutcome::InputRequired(r)
    }
}

/// A tool. Implement it on your own type, or build one from a closure with
/// [`ToolBuilder`].
///
/// Return `Ok(CallToolResult::error(..))` for failures the model should see and
/// correct (bad input values, an API that failed); return `Err(McpError)` only for
/// protocol errors.
pub trait Tool: Send + Sync + 'static {
    /// The descriptor served by `tools/list`.
    fn descriptor(&self) -> &ToolDescriptor;
    /// Runs one call.
    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolOutcome, McpError>>;
}

type ToolFn = dyn Fn(ToolCall) -> BoxFuture<Result<ToolOutcome, McpError>> + Send + Sync;

/// A tool built from a descriptor and an async closure.
///
/// ```
/// use genmcp::suite::{ToolBuilder, CallToolResult};
/// use serde_json::json;
/// let echo = ToolBuilder::new("echo")
///     .description("Echoes its text argument")
///     .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
///     .handler(|call| async move {
///         let text = call.arguments["text"].as_str().unwrap_or_default().to_owned();
///         Ok(CallToolResult::text(text).into())
///     });
/// assert_eq!(genmcp::suite::Tool::descriptor(&echo).name, "echo");
/// ```
pub struct FnTool {
    descriptor: ToolDescriptor,
    f: Arc<ToolFn>,
}

impl Tool for FnTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolOutcome, McpError>> {
        (self.f)(call)
    }
}

/// Builds a [`FnTool`].
pub struct ToolBuilder {
    descriptor: ToolDescriptor,
}

impl ToolBuilder {
    /// Starts a tool named `name` with an empty object input schema.
    pub fn new(name: impl Into<String>) -> Self {
        ToolBuilder {
            descriptor: ToolDescriptor::new(name),
        }
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.descriptor.title = Some(title.into());
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.descriptor.description = Some(description.into());
        self
    }

    /// Sets the input schema (served verbatim, validated against before each call).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.descriptor.input_schema = schema;
        self
    }

    /// Sets the output schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.descriptor.output_schema = Some(schema);
        self
    }

    /// Sets the annotations.
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.descriptor.annotations = Some(annotations);
        self
    }

    /// Adds another descriptor field (e.g. `icons`, `_meta`).
    pub fn field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.descriptor.extra.insert(key.into(), value);
        self
    }

    /// Finishes the tool with its async handler.
    pub fn handler<F, Fut>(self, f: F) -> FnTool
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutcome, McpError>> + Send + 'static,
    {
        FnTool {
            descriptor: self.descriptor,
            f: Arc::new(move |call| Box::pin(f(call))),
        }
    }
}
