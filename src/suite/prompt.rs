//! Prompts: the descriptor served by `prompts/list` and the trait `prompts/get` runs.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::content::Content;
use super::tool::{BoxFuture, InputRequired};
use crate::mux::Channel;
use crate::protocol::McpError;

/// One declared prompt argument.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PromptArgument {
    /// Name.
    pub name: String,
    /// Display title.
    pub title: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Whether `prompts/get` must carry it (`-32602` otherwise).
    pub required: bool,
}

impl PromptArgument {
    /// An argument.
    pub fn new(name: impl Into<String>, description: Option<&str>, required: bool) -> Self {
        PromptArgument {
            name: name.into(),
            title: None,
            description: description.map(str::to_owned),
            required,
        }
    }

    fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("name".into(), Value::from(self.name.clone()));
        if let Some(t) = &self.title {
            map.insert("title".into(), Value::from(t.clone()));
        }
        if let Some(d) = &self.description {
            map.insert("description".into(), Value::from(d.clone()));
        }
        if self.required {
            map.insert("required".into(), Value::Bool(true));
        }
        Value::Object(map)
    }
}

/// What `prompts/list` says about a prompt.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PromptDescriptor {
    /// Unique name.
    pub name: String,
    /// Display title.
    pub title: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Declared arguments.
    pub arguments: Vec<PromptArgument>,
    /// Other fields (`icons`, `_meta`...), served as given.
    pub extra: Map<String, Value>,
}

impl PromptDescriptor {
    /// A descriptor without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        PromptDescriptor {
            name: name.into(),
            title: None,
            description: None,
            arguments: Vec::new(),
            extra: Map::new(),
        }
    }

    /// The `Prompt` object as served by `prompts/list`.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("name".into(), Value::from(self.name.clone()));
        if let Some(t) = &self.title {
            map.insert("title".into(), Value::from(t.clone()));
        }
        if let Some(d) = &self.description {
            map.insert("description".into(), Value::from(d.clone()));
        }
        if !self.arguments.is_empty() {
            map.insert(
                "arguments".into(),
                Value::Array(self.arguments.iter().map(PromptArgument::to_json).collect()),
            );
        }
        for (k, v) in &self.extra {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

/// One `prompts/get` as a prompt sees it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PromptGet {
    /// The arguments (strings), required ones already checked present.
    pub arguments: BTreeMap<String, String>,
    /// The request's channel.
    pub channel: Channel,
    /// `inputResponses` of an MRTR retry (empty on a first call).
    pub input_responses: Map<String, Value>,
    /// The verified state this prompt put in `requestState` last round.
    pub request_state: Option<Value>,
}

impl PromptGet {
    /// Argument `name`.
    pub fn arg(&self, name: &str) -> Option<&str> {
        self.arguments.get(name).map(String::as_str)
    }

    /// The `content` of an accepted elicitation answer to input request `key`.
    pub fn elicited(&self, key: &str) -> Option<&Map<String, Value>> {
        super::mrtr::elicited(&self.input_responses, key)
    }
}

/// `role` of a prompt message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
}

/// One message of a prompt: a role and one content block.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PromptMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: Content,
}

impl PromptMessage {
    /// A user message.
    pub fn user(content: Content) -> Self {
        PromptMessage {
            role: Role::User,
            content,
        }
    }

    /// An assistant message.
    pub fn assistant(content: Content) -> Self {
        PromptMessage {
            role: Role::Assistant,
            content,
        }
    }
}

/// The result of a `prompts/get` that completed.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct GetPromptResult {
    /// Optional description.
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
}

impl GetPromptResult {
    /// A result with these messages.
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        GetPromptResult {
            description: None,
            messages,
        }
    }

    /// A result with one user text message.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(vec![PromptMessage::user(Content::text(text))])
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The result object (without `resultType` and `_meta`).
    pub fn into_map(self) -> Map<String, Value> {
        let mut map = Map::new();
        if let Some(d) = self.description {
            map.insert("description".into(), Value::from(d));
        }
        map.insert(
            "messages".into(),
            serde_json::to_value(&self.messages).unwrap_or(Value::Array(vec![])),
        );
        map
    }
}

/// What a prompt returns.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PromptOutcome {
    /// Done.
    Complete(GetPromptResult),
    /// Needs input from the client first (MRTR).
    InputRequired(InputRequired),
}

impl From<GetPromptResult> for PromptOutcome {
    fn from(r: GetPromptResult) -> Self {
        PromptOutcome::Complete(r)
    }
}

impl From<InputRequired> for PromptOutcome {
    fn from(r: InputRequired) -> Self {
        PromptOutcome::InputRequired(r)
    }
}

/// A prompt. Implement it, or build one with [`PromptBuilder`].
pub trait Prompt: Send + Sync + 'static {
    /// The descriptor served by `prompts/list`.
    fn descriptor(&self) -> &PromptDescriptor;
    /// Renders the prompt.
    fn get(&self, get: PromptGet) -> BoxFuture<Result<PromptOutcome, McpError>>;
}

type PromptFn = dyn Fn(PromptGet) -> BoxFuture<Result<PromptOutcome, McpError>> + Send + Sync;

/// A prompt built from a descriptor and an async closure.
pub struct FnPrompt {
    descriptor: PromptDescriptor,
    f: Arc<PromptFn>,
}

impl Prompt for FnPrompt {
    fn descriptor(&self) -> &PromptDescriptor {
        &self.descriptor
    }

    fn get(&self, get: PromptGet) -> BoxFuture<Result<PromptOutcome, McpError>> {
        (self.f)(get)
    }
}

/// Builds a [`FnPrompt`].
///
/// ```
/// use genmcp::suite::{PromptBuilder, GetPromptResult};
/// let p = PromptBuilder::new("greet")
///     .description("Greets someone")
///     .argument("who", "Whom to greet", true)
///     .handler(|get| async move {
///         Ok(GetPromptResult::user_text(format!("Say hello to {}", get.arg("who").unwrap_or("?"))).into())
///     });
/// assert_eq!(genmcp::suite::Prompt::descriptor(&p).arguments.len(), 1);
/// ```
pub struct PromptBuilder {
    descriptor: PromptDescriptor,
}

impl PromptBuilder {
    /// Starts a prompt named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        PromptBuilder {
            descriptor: PromptDescriptor::new(name),
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

    /// Declares an argument.
    pub fn argument(mut self, name: impl Into<String>, description: &str, required: bool) -> Self {
        self.descriptor
            .arguments
            .push(PromptArgument::new(name, Some(description), required));
        self
    }

    /// Adds another descriptor field.
    pub fn field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.descriptor.extra.insert(key.into(), value);
        self
    }

    /// Finishes the prompt with its async handler.
    pub fn handler<F, Fut>(self, f: F) -> FnPrompt
    where
        F: Fn(PromptGet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PromptOutcome, McpError>> + Send + 'static,
    {
        FnPrompt {
            descriptor: self.descriptor,
            f: Arc::new(move |get| Box::pin(f(get))),
        }
    }
}

/// Reads and checks `prompts/get` arguments against the descriptor: values must
/// be strings, required ones present (`-32602` with `data.missing` otherwise).
/// Undeclared arguments are kept (the prompt may ignore them).
pub(crate) fn check_arguments(
    descriptor: &PromptDescriptor,
    params: &Map<String, Value>,
) -> Result<BTreeMap<String, String>, McpError> {
    let mut out = BTreeMap::new();
    match params.get("arguments") {
        None | Some(Value::Null) => {}
        Some(Value::Object(args)) => {
            for (k, v) in args {
                let Value::String(s) = v else {
                    return Err(McpError::invalid_params_with(
                        format!("Invalid params: prompt argument {k} must be a string"),
                        serde_json::json!({"argument": k}),
                    ));
                };
                out.insert(k.clone(), s.clone());
            }
        }
        Some(_) => {
            return Err(McpError::invalid_params(
                "Invalid params: prompt arguments must be an object of strings",
            ));
        }
    }
    let missing: Vec<&str> = descriptor
        .arguments
        .iter()
        .filter(|a| a.required && !out.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(McpError::invalid_params_with(
            format!(
                "Invalid params: prompt {} is missing required argument(s): {}",
                descriptor.name,
                missing.join(", ")
            ),
            serde_json::json!({ "missing": missing }),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_checked() {
        let mut d = PromptDescriptor::new("p");
        d.arguments.push(PromptArgument::new("a", None, true));
        d.arguments
            .push(PromptArgument::new("b", Some("opt"), false));
        let p = |v: Value| v.as_object().unwrap().clone();
        let ok = check_arguments(&d, &p(json!({"arguments": {"a": "1", "z": "2"}}))).unwrap();
        assert_eq!(ok.get("a").map(String::as_str), Some("1"));
        let err = check_arguments(&d, &p(json!({}))).unwrap_err();
        assert_eq!(err.to_error_object().data, Some(json!({"missing": ["a"]})));
        assert_eq!(
            check_arguments(&d, &p(json!({"arguments": {"a": 1}})))
                .unwrap_err()
                .code(),
            -32602
        );
        assert_eq!(
            d.to_json(),
            json!({"name": "p", "arguments": [{"name": "a", "required": true}, {"name": "b", "description": "opt"}]})
        );
        let msg = GetPromptResult::user_text("hi").into_map();
        assert_eq!(
            msg["messages"],
            json!([{"role": "user", "content": {"type": "text", "text": "hi"}}])
        );
    }
}
