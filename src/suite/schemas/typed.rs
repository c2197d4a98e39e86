//! Typed tools and prompts: JSON Schemas generated from Rust types (crate
//! `schemars`, JSON Schema 2020-12), arguments deserialized into those types,
//! typed results turned into `structuredContent`.
//!
//! Generated schemas are adjusted for MCP clients: subschemas are inlined (no
//! `$ref`/`$defs` except for recursive types), the root `title` (the Rust type
//! name) and `$schema` are dropped (2020-12 is MCP's default dialect, so
//! `$schema` says nothing and some clients refuse it), and an input schema
//! always has `"type": "object"` at its root.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::schema::{MAX_MESSAGE_LEN, truncate};
use crate::protocol::McpError;
use crate::suite::common::{CallToolResult, InputRequired, ToolOutcome};

fn generate<T: JsonSchema + ?Sized>(contract: Contract) -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
        s.contract = contract;
    });
    let mut value = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(root) = &mut value {
        root.remove("title");
        root.remove("$schema");
    }
    value
}

/// The input schema MCP gets for arguments of type `T`: generated for
/// deserialization, with `"type": "object"` first at the root (added when the
/// type's schema has no `type`, e.g. an enum of structs; a type whose schema is
/// another type, such as a string, gives a schema the catalog refuses).
///
/// ```
/// use serde::Deserialize;
/// use schemars::JsonSchema;
/// /// Where to post.
/// #[derive(Deserialize, JsonSchema)]
/// struct Post {
///     /// The message text.
///     text: String,
///     room: Option<String>,
/// }
/// let schema = genmcp::suite::input_schema::<Post>();
/// assert_eq!(schema["type"], "object");
/// assert_eq!(schema["properties"]["text"]["description"], "The message text.");
/// assert_eq!(schema["required"], serde_json::json!(["text"]));
/// assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
/// ```
pub fn input_schema<T: JsonSchema + ?Sized>() -> Value {
    match generate::<T>(Contract::Deserialize) {
        Value::Bool(true) => json!({"type": "object"}),
        Value::Object(root) if !root.contains_key("type") => {
            let mut out = Map::new();
            out.insert("type".into(), Value::from("object"));
            out.extend(root);
            Value::Object(out)
        }
        other => other,
    }
}

/// The output schema MCP gets for results of type `T` (generated for
/// serialization). Object types are the most widely understood by clients.
pub fn output_schema<T: JsonSchema + ?Sized>() -> Value {
    generate::<T>(Contract::Serialize)
}

/// The `-32602` a deserialization failure gives: the same shape as a schema
/// validation failure (`data.errors[]` with `instancePath`, `schemaPath`,
/// `message`).
fn invalid(what: &str, error: &serde_json::Error) -> McpError {
    let message = truncate(error.to_string(), MAX_MESSAGE_LEN);
    McpError::invalid_params_with(
        format!("Invalid params: {what}: {message}"),
        json!({"errors": [{"instancePath": "", "schemaPath": "", "message": message}]}),
    )
}

/// The result of a typed tool whose arguments do not deserialize: a tool
/// execution error the model can correct (SEP-1303), as a schema failure is.
pub(crate) fn input_error(error: &McpError) -> ToolOutcome {
    CallToolResult::error(super::schema::input_error_text(error)).into()
}

/// Deserializes the arguments of tool `tool` (borrowed: nothing is copied but
/// what `A` owns).
pub(crate) fn tool_arguments<A: DeserializeOwned>(
    tool: &str,
    arguments: &Map<String, Value>,
) -> Result<A, McpError> {
    A::deserialize(arguments).map_err(|e| {
        invalid(
            &format!("arguments do not match the input schema of tool {tool}"),
            &e,
        )
    })
}

/// Deserializes the (string) arguments of prompt `prompt`.
pub(crate) fn prompt_arguments_of<A: DeserializeOwned>(
    prompt: &str,
    arguments: &BTreeMap<String, String>,
) -> Result<A, McpError> {
    let map: Map<String, Value> = arguments
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    A::deserialize(&map)
        .map_err(|e| invalid(&format!("arguments do not match prompt {prompt}"), &e))
}

/// Why a typed tool did not produce its output.
///
/// ```
/// use genmcp::suite::{CallError, InputRequired};
/// use genmcp::protocol::McpError;
/// let shown_to_the_model = CallError::tool("the room is closed");
/// let protocol: CallError = McpError::invalid_params("no such room").into();
/// let ask_first: CallError = InputRequired::new().list_roots("roots").into();
/// # let _ = (shown_to_the_model, protocol, ask_first);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CallError {
    /// A failure the model should see and may correct: an `isError: true`
    /// result with this text.
    Tool(String),
    /// A protocol error: a JSON-RPC error reply.
    Protocol(McpError),
    /// Not done yet: the client must answer these input requests first (MRTR).
    InputRequired(InputRequired),
}

impl CallError {
    /// A tool-level failure (`isError: true`) with this text.
    pub fn tool(message: impl Into<String>) -> Self {
        CallError::Tool(message.into())
    }
}

impl From<McpError> for CallError {
    fn from(e: McpError) -> Self {
        CallError::Protocol(e)
    }
}

impl From<InputRequired> for CallError {
    fn from(r: InputRequired) -> Self {
        CallError::InputRequired(r)
    }
}

/// A typed tool's answer as the suite sends it: the output as
/// `structuredContent` plus one text block with the same JSON.
pub(crate) fn finish<O: Serialize>(
    tool: &str,
    result: Result<O, CallError>,
) -> Result<ToolOutcome, McpError> {
    match result {
        Ok(output) => match serde_json::to_value(&output) {
            Ok(value) => Ok(CallToolResult::text(value.to_string())
                .with_structured(value)
                .into()),
            Err(e) => {
                tracing::error!(tool, error = %e, "a typed tool result could not be serialized");
                Err(McpError::internal("Internal error"))
            }
        },
        Err(CallError::Tool(message)) => Ok(CallToolResult::error(message).into()),
        Err(CallError::Protocol(e)) => Err(e),
        Err(CallError::InputRequired(round)) => Ok(round.into()),
    }
}

/// The arguments of a tool that takes none: the schema `{"type": "object"}`,
/// and any object deserializes into it (its members are ignored).
///
/// ```
/// use genmcp::suite::{NoArgs, ToolBuilder};
/// let clock = ToolBuilder::new("now").typed(|_: NoArgs, _call| async { Ok(42u64) });
/// assert_eq!(genmcp::suite::Tool::descriptor(&clock).input_schema, serde_json::json!({"type": "object"}));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoArgs;

impl<'de> Deserialize<'de> for NoArgs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| NoArgs)
    }
}

impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind", rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Shape {
        Circle { r: f64 },
        Square { side: f64 },
    }

    #[test]
    fn an_object_root_is_added_when_the_type_has_none() {
        let schema = input_schema::<Shape>();
        let keys: Vec<&str> = schema
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys[0], "type");
        assert_eq!(schema["type"], "object");
        assert!(schema.get("oneOf").is_some(), "{schema}");
        assert_eq!(input_schema::<Value>(), json!({"type": "object"}));
        assert_eq!(input_schema::<NoArgs>(), json!({"type": "object"}));
        // A non-object type keeps its schema (and the catalog refuses it).
        assert_eq!(input_schema::<String>()["type"], "string");
    }

    #[test]
    fn deserialization_failures_look_like_validation_failures() {
        let args = json!({"kind": "circle", "r": "wide"});
        let err = tool_arguments::<Shape>("shapes", args.as_object().unwrap())
            .err()
            .unwrap();
        let object = err.to_error_object();
        assert_eq!(object.code, -32602);
        assert!(object.message.starts_with(
            "Invalid params: arguments do not match the input schema of tool shapes: "
        ));
        let item = &object.data.unwrap()["errors"][0];
        assert!(item["instancePath"].is_string() && item["schemaPath"].is_string());
        assert!(item["message"].as_str().is_some_and(|m| !m.is_empty()));
        let ok = tool_arguments::<NoArgs>("x", json!({"a": [1]}).as_object().unwrap());
        assert_eq!(ok.ok(), Some(NoArgs));
    }

    #[test]
    fn finish_maps_every_outcome() {
        let done = finish("t", Ok(json!({"a": 1}))).unwrap();
        let ToolOutcome::Complete(result) = done else {
            panic!("complete")
        };
        assert_eq!(result.structured_content, Some(json!({"a": 1})));
        assert_eq!(
            result.content,
            vec![crate::suite::common::Content::text(r#"{"a":1}"#)]
        );
        let ToolOutcome::Complete(failed) = finish::<()>("t", Err(CallError::tool("no"))).unwrap()
        else {
            panic!("complete")
        };
        assert!(failed.is_error);
        let round = InputRequired::new().list_roots("r");
        assert_eq!(
            finish::<()>("t", Err(round.clone().into())).unwrap(),
            ToolOutcome::InputRequired(round)
        );
        let err = finish::<()>("t", Err(McpError::invalid_params("x").into())).unwrap_err();
        assert_eq!(err.code(), -32602);
    }
}
