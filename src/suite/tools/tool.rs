//! Tools: the descriptor served by `tools/list` and the trait `tools/call` runs.

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::mux::Channel;
use crate::protocol::McpError;
use crate::suite::common::{BoxFuture, Builder, Common, ToolOutcome};
use crate::suite::mrtr;
use crate::suite::schemas::typed::{self, CallError};
use crate::suite::tasks::{TaskCx, TaskSupport};

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
        let mut map = Common::head(&self.name, self.title.as_ref(), self.description.as_ref());
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
    /// The task this call runs as, if it became one (see [`TaskSupport`]).
    pub task: Option<TaskCx>,
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
            task: None,
        }
    }

    /// The task this call runs as: status messages, input requests,
    /// cancellation. `None` when answered directly.
    pub fn task(&self) -> Option<&TaskCx> {
        self.task.as_ref()
    }

    /// The raw answer to input request `key` of the previous round, if sent.
    pub fn input(&self, key: &str) -> Option<&Value> {
        self.input_responses.get(key)
    }

    /// The `content` of an accepted elicitation answer to input request `key`
    /// (`{"action":"accept","content":{...}}`); `None` if absent, declined or cancelled.
    pub fn elicited(&self, key: &str) -> Option<&Map<String, Value>> {
        mrtr::elicited(&self.input_responses, key)
    }

    /// The text of a sampling answer to input request `key`, if it is text.
    pub fn sampled_text(&self, key: &str) -> Option<&str> {
        mrtr::sampled_text(&self.input_responses, key)
    }

    /// The root URIs of a `roots/list` answer to input request `key`.
    pub fn roots(&self, key: &str) -> Option<Vec<&str>> {
        mrtr::roots(&self.input_responses, key)
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
    /// Whether the tool never, may or must run as a task (default: never).
    fn task_support(&self) -> TaskSupport {
        TaskSupport::Forbidden
    }
}

type ToolFn = dyn Fn(ToolCall) -> BoxFuture<Result<ToolOutcome, McpError>> + Send + Sync;

/// A tool built from a descriptor and an async closure (see [`ToolBuilder`]).
pub struct FnTool {
    descriptor: ToolDescriptor,
    f: Arc<ToolFn>,
    task_support: TaskSupport,
}

impl Tool for FnTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call(&self, call: ToolCall) -> BoxFuture<Result<ToolOutcome, McpError>> {
        (self.f)(call)
    }

    fn task_support(&self) -> TaskSupport {
        self.task_support
    }
}

/// The tool-specific part of a [`ToolBuilder`]: schemas and annotations.
#[derive(Clone, Debug)]
pub struct ToolParts {
    input_schema: Value,
    output_schema: Option<Value>,
    annotations: Option<Value>,
    task_support: TaskSupport,
}

/// Builds a [`FnTool`]: the shared setters of [`Builder`] (`title`,
/// `description`, `icon`, `meta`, `field`) plus schemas, annotations and a
/// handler.
///
/// A typed tool takes its arguments as a Rust type and returns a Rust type;
/// both schemas are generated (see [`input_schema`](crate::suite::input_schema)):
///
/// ```
/// use genmcp::suite::{CallError, Tool, ToolBuilder};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     /// First term.
///     a: i64,
///     /// Second term.
///     b: i64,
/// }
///
/// #[derive(Serialize, JsonSchema)]
/// struct Sum {
///     sum: i64,
/// }
///
/// let add = ToolBuilder::new("add")
///     .description("Adds two integers")
///     .typed(|args: AddArgs, _call| async move {
///         let sum = args.a.checked_add(args.b).ok_or_else(|| CallError::tool("overflow"))?;
///         Ok(Sum { sum })
///     });
/// let d = add.descriptor();
/// assert_eq!(d.input_schema["required"], serde_json::json!(["a", "b"]));
/// assert_eq!(d.output_schema.as_ref().unwrap()["properties"]["sum"]["type"], "integer");
/// ```
///
/// A hand-written tool:
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
pub type ToolBuilder = Builder<ToolParts>;

impl Builder<ToolParts> {
    /// Names the tool's MCP Apps view: `_meta.ui` (`resourceUri`,
    /// `visibility`) and the older flat `_meta["ui/resourceUri"]` some hosts
    /// still read. Results of the tool always carry a text block (see
    /// [`crate::suite::apps`]).
    pub fn ui(self, ui: crate::suite::apps::ToolUi) -> Self {
        let uri = ui.resource_uri().to_owned();
        self.meta("ui", ui.to_meta()).meta(
            crate::suite::apps::LEGACY_RESOURCE_URI_KEY,
            Value::from(uri),
        )
    }

    /// Starts a tool named `name` with an empty object input schema.
    pub fn new(name: impl Into<String>) -> Self {
        Builder::with_kind(
            name,
            ToolParts {
                input_schema: json!({"type": "object"}),
                output_schema: None,
                annotations: None,
                task_support: TaskSupport::Forbidden,
            },
        )
    }

    /// Whether the tool never (the default), may or must run as a task
    /// (the `io.modelcontextprotocol/tasks` extension; see `docs/tasks.md`).
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.kind.task_support = support;
        self
    }

    /// Sets the input schema (served verbatim, validated against before each call).
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.kind.input_schema = schema;
        self
    }

    /// Sets the output schema (served verbatim; every successful result's
    /// `structuredContent` is validated against it).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.kind.output_schema = Some(schema);
        self
    }

    /// Sets the annotations.
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.kind.annotations = Some(annotations);
        self
    }

    fn descriptor(self) -> ToolDescriptor {
        let Common {
            name,
            title,
            description,
            extra,
        } = self.common;
        ToolDescriptor {
            name,
            title,
            description,
            input_schema: self.kind.input_schema,
            output_schema: self.kind.output_schema,
            annotations: self.kind.annotations,
            extra,
        }
    }

    /// Finishes the tool with its async handler.
    pub fn handler<F, Fut>(self, f: F) -> FnTool
    where
        F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutcome, McpError>> + Send + 'static,
    {
        FnTool {
            task_support: self.kind.task_support,
            descriptor: self.descriptor(),
            f: Arc::new(move |call| Box::pin(f(call))),
        }
    }

    /// Finishes a tool whose arguments are an `A` (input schema generated from
    /// it) and whose handler returns any [`ToolOutcome`] (content blocks,
    /// MRTR rounds). Arguments that pass the schema but do not deserialize are
    /// answered `-32602` like a schema failure; the handler does not run.
    pub fn typed_args<A, F, Fut>(self, f: F) -> FnTool
    where
        A: DeserializeOwned + JsonSchema + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutcome, McpError>> + Send + 'static,
    {
        let builder = self.input_schema(typed::input_schema::<A>());
        let name = builder.common.name.clone();
        FnTool {
            task_support: builder.kind.task_support,
            descriptor: builder.descriptor(),
            f: Arc::new(
                move |call| match typed::tool_arguments::<A>(&name, &call.arguments) {
                    Ok(args) => Box::pin(f(args, call)),
                    Err(e) => Box::pin(async move { Ok(typed::input_error(&e)) }),
                },
            ),
        }
    }

    /// Finishes a typed tool: arguments arrive as an `A`, the handler returns
    /// an `O` or a [`CallError`]. Both schemas are generated; the output is sent
    /// as `structuredContent` plus a text block with the same JSON (and, like
    /// every output, validated against the output schema).
    pub fn typed<A, O, F, Fut>(self, f: F) -> FnTool
    where
        A: DeserializeOwned + JsonSchema + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(A, ToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, CallError>> + Send + 'static,
    {
        let builder = self
            .input_schema(typed::input_schema::<A>())
            .output_schema(typed::output_schema::<O>());
        let name = builder.common.name.clone();
        FnTool {
            task_support: builder.kind.task_support,
            descriptor: builder.descriptor(),
            f: Arc::new(
                move |call| match typed::tool_arguments::<A>(&name, &call.arguments) {
                    Ok(args) => {
                        let name = name.clone();
                        let fut = f(args, call);
                        Box::pin(async move { typed::finish(&name, fut.await) })
                    }
                    Err(e) => Box::pin(async move { Ok(typed::input_error(&e)) }),
                },
            ),
        }
    }
}
