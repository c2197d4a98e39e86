//! Tool schemas: one compiled JSON Schema validator per tool for its input
//! (arguments) and, when it declares one, its output (`structuredContent`).
//! The `x-mcp-header` annotations of the input schema are checked at the same
//! time (see `headers.rs`). The validator is `validator.rs` with the
//! `schema-validation` feature, else `unvalidated.rs` (every instance valid).

use serde_json::{Value, json};

use super::headers::{HeaderParam, header_params};
use super::validator::{Validator, build, errors};
use crate::protocol::McpError;
use crate::suite::common::CallToolResult;

/// Most validation errors reported in one `-32602` `data.errors`.
pub const MAX_REPORTED_ERRORS: usize = 20;

/// Why a tool was refused when added (see [`crate::suite::Catalog::try_add_tool`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The input schema is not an object schema, or does not compile (bad
    /// keyword values, an unresolvable or external `$ref`...).
    #[error("tool {tool}: invalid input schema: {message}")]
    InvalidSchema {
        /// The tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// An `x-mcp-header` annotation breaks a rule of the spec (reference §6.5).
    #[error("tool {tool}: invalid x-mcp-header annotation: {message}")]
    InvalidHeaderAnnotation {
        /// The tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The output schema is not a JSON object, or does not compile.
    #[error("tool {tool}: invalid output schema: {message}")]
    InvalidOutputSchema {
        /// The tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

/// A tool's compiled schemas.
pub(crate) struct CompiledSchema {
    input: Validator,
    output: Option<Validator>,
    pub headers: Vec<HeaderParam>,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("headers", &self.headers)
            .field("output", &self.output.is_some())
            .finish()
    }
}

impl CompiledSchema {
    /// Compiles the `input` schema of tool `tool` (checking its `x-mcp-header`
    /// annotations) and its `output` schema, if any.
    pub(crate) fn compile(
        tool: &str,
        input: &Value,
        output: Option<&Value>,
    ) -> Result<CompiledSchema, ToolError> {
        let invalid = |message: String| ToolError::InvalidSchema {
            tool: tool.to_owned(),
            message,
        };
        let root = input
            .as_object()
            .ok_or_else(|| invalid("the input schema must be a JSON object".into()))?;
        if root.get("type") != Some(&Value::from("object")) {
            return Err(invalid(
                "the input schema must have \"type\": \"object\" at its root".into(),
            ));
        }
        let compiled = build(input).map_err(invalid)?;
        let headers =
            header_params(input).map_err(|message| ToolError::InvalidHeaderAnnotation {
                tool: tool.to_owned(),
                message,
            })?;
        let output = match output {
            None => None,
            Some(schema) => {
                let invalid = |message: String| ToolError::InvalidOutputSchema {
                    tool: tool.to_owned(),
                    message,
                };
                if !schema.is_object() {
                    return Err(invalid("the output schema must be a JSON object".into()));
                }
                Some(build(schema).map_err(invalid)?)
            }
        };
        Ok(CompiledSchema {
            input: compiled,
            output,
            headers,
        })
    }

    /// Validates `arguments` (an object): `-32602` with `data.errors`
    /// (`instancePath`, `schemaPath`, `message`; at most
    /// [`MAX_REPORTED_ERRORS`]) when invalid.
    pub(crate) fn validate(&self, tool: &str, arguments: &Value) -> Result<(), McpError> {
        if self.input.is_valid(arguments) {
            return Ok(());
        }
        let (errors, first) = errors(&self.input, arguments);
        Err(McpError::invalid_params_with(
            format!(
                "Invalid params: arguments do not match the input schema of tool {tool}: {first}"
            ),
            json!({ "errors": errors }),
        ))
    }

    /// Checks a completed result against the output schema. A tool with an
    /// output schema must give every successful result (`isError` unset) a
    /// `structuredContent` that conforms; otherwise the result is replaced by
    /// an `isError: true` result saying so (the non-conforming content is
    /// never sent) and the detail is logged. Error results pass unchanged but
    /// for a non-conforming `structuredContent`, which is left out; tools
    /// without an output schema pass unchanged.
    pub(crate) fn check_output(&self, tool: &str, mut result: CallToolResult) -> CallToolResult {
        let Some(validator) = &self.output else {
            return result;
        };
        if result.is_error {
            // An error result's `structuredContent`, when it has one, must
            // conform too (reference §8.5): one that does not is left out,
            // the error itself is sent.
            if result
                .structured_content
                .as_ref()
                .is_some_and(|s| !validator.is_valid(s))
            {
                tracing::warn!(
                    tool,
                    "an error result's structuredContent does not match the outputSchema; left out"
                );
                result.structured_content = None;
            }
            return result;
        }
        let Some(structured) = &result.structured_content else {
            tracing::warn!(
                tool,
                "a tool with an outputSchema returned no structuredContent"
            );
            return CallToolResult::error(format!(
                "Output validation error: tool {tool} declares an outputSchema but returned no structuredContent"
            ));
        };
        if validator.is_valid(structured) {
            return result;
        }
        let (errors, first) = errors(validator, structured);
        let errors = Value::Array(errors);
        tracing::warn!(tool, %errors, "structuredContent does not match the outputSchema");
        CallToolResult::error(format!(
            "Output validation error: the structuredContent of tool {tool} does not match its outputSchema: {first}"
        ))
    }
}

/// The text of the `isError` result that answers arguments refused by a
/// tool's input schema (or by its typed arguments): the message, then each
/// error reported (`<instancePath>: <message>`), for the model to correct
/// its call.
pub(crate) fn input_error_text(error: &McpError) -> String {
    let mut text = error.to_string();
    if let McpError::InvalidParams {
        data: Some(data), ..
    } = error
        && let Some(errors) = data["errors"].as_array()
        && errors.len() > 1
    {
        for e in errors {
            let path = e["instancePath"].as_str().unwrap_or("");
            let message = e["message"].as_str().unwrap_or("");
            text.push_str(&format!(
                "\n- {}: {message}",
                if path.is_empty() { "/" } else { path }
            ));
        }
    }
    text
}

/// The value at `path` in `arguments`, if present.
pub(crate) use super::headers::lookup;

/// Longest validation message reported per error.
pub(crate) const MAX_MESSAGE_LEN: usize = 300;

/// `message` cut to at most `max` bytes (on a character boundary) plus `…`.
pub(crate) fn truncate(mut message: String, max: usize) -> String {
    if message.len() > max {
        let mut cut = max;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_that_are_not_object_schemas_are_refused() {
        for schema in [json!("string"), json!({"type": "string"})] {
            assert!(
                matches!(
                    CompiledSchema::compile("t", &schema, None),
                    Err(ToolError::InvalidSchema { .. })
                ),
                "{schema}"
            );
        }
    }

    #[cfg(feature = "schema-validation")]
    #[test]
    fn bad_schemas_are_reported_not_panicked() {
        for schema in [
            json!({"type": "object", "properties": {"a": {"type": 12}}}),
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}),
            json!({"type": "object", "properties": {"a": {"pattern": "(("}}}),
        ] {
            assert!(
                matches!(
                    CompiledSchema::compile("t", &schema, None),
                    Err(ToolError::InvalidSchema { .. })
                ),
                "{schema}"
            );
        }
    }

    #[cfg(feature = "schema-validation")]
    #[test]
    fn arguments_are_validated_with_paths() {
        let s = CompiledSchema::compile(
            "t",
            &json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                "additionalProperties": false}),
            None,
        )
        .unwrap();
        s.validate("t", &json!({"n": 1})).unwrap();
        let err = s.validate("t", &json!({"n": "x"})).unwrap_err();
        assert_eq!(err.code(), -32602);
        let data = err.to_error_object().data.unwrap();
        assert_eq!(data["errors"][0]["instancePath"], "/n");
        assert!(
            data["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("integer")
        );
        let err = s.validate("t", &json!({})).unwrap_err();
        assert_eq!(
            err.to_error_object().data.unwrap()["errors"][0]["instancePath"],
            ""
        );
    }

    #[cfg(feature = "schema-validation")]
    #[test]
    fn output_is_checked_only_when_an_output_schema_is_declared() {
        let out =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let input = json!({"type": "object"});
        let s = CompiledSchema::compile("t", &input, Some(&out)).unwrap();
        let good = CallToolResult::text("{}").with_structured(json!({"n": 1}));
        assert_eq!(s.check_output("t", good.clone()), good);
        let refused = s.check_output(
            "t",
            CallToolResult::text("x").with_structured(json!({"n": "1"})),
        );
        assert!(refused.is_error && refused.structured_content.is_none());
        let missing = s.check_output("t", CallToolResult::text("x"));
        assert!(missing.is_error);
        // Error results pass as they are, but for a structuredContent that
        // does not conform, which is left out.
        let error = CallToolResult::error("failed");
        assert_eq!(s.check_output("t", error.clone()), error);
        let conforming = CallToolResult::error("failed").with_structured(json!({"n": 2}));
        assert_eq!(s.check_output("t", conforming.clone()), conforming);
        let stray = s.check_output(
            "t",
            CallToolResult::error("failed").with_structured(json!("oops")),
        );
        assert!(stray.is_error && stray.structured_content.is_none());
        // Without an output schema anything goes.
        let free = CompiledSchema::compile("t", &input, None).unwrap();
        let any = CallToolResult::text("x").with_structured(json!([1, 2]));
        assert_eq!(free.check_output("t", any.clone()), any);
        for bad in [json!("not a schema"), json!({"type": 12})] {
            assert!(matches!(
                CompiledSchema::compile("t", &input, Some(&bad)),
                Err(ToolError::InvalidOutputSchema { .. })
            ));
        }
    }
}
