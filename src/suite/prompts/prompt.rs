//! Prompts: the descriptor served by `prompts/list` and the trait `prompts/get` runs.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use super::prompt_result::{GetPromptResult, PromptMessage, PromptOutcome, Role};
use crate::mux::Channel;
use crate::protocol::McpError;
use crate::suite::common::{BoxFuture, Builder, Common};
use crate::suite::mrtr;
use crate::suite::schemas::typed;

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
        let mut map = Common::head(&self.name, self.title.as_ref(), self.description.as_ref());
        if self.required {
            map.insert("required".into(), Value::Bool(true));
        }
        Value::Object(map)
    }
}

/// The prompt arguments of type `T`: one per property of its (object)
/// schema, in field order, with the property's `title` and `description` (doc
/// comments) and `required` when the schema requires it. Fields should be
/// `String` or `Option<String>`: prompt arguments are strings.
pub fn prompt_arguments<T: JsonSchema + ?Sized>() -> Vec<PromptArgument> {
    let schema = typed::input_schema::<T>();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, prop)| {
            let text = |k: &str| prop.get(k).and_then(Value::as_str).map(str::to_owned);
            let mut arg =
                PromptArgument::new(name.clone(), None, required.contains(&name.as_str()));
            arg.title = text("title");
            arg.description = text("description");
            arg
        })
        .collect()
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
        let mut map = Common::head(&self.name, self.title.as_ref(), self.description.as_ref());
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
        mrtr::elicited(&self.input_responses, key)
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

/// The prompt-specific part of a [`PromptBuilder`]: its arguments.
#[derive(Clone, Debug, Default)]
pub struct PromptParts {
    arguments: Vec<PromptArgument>,
}

/// Builds a [`FnPrompt`]: the shared setters of [`Builder`] (`title`,
/// `description`, `icon`, `meta`, `field`) plus arguments and a handler.
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
///
/// With typed arguments, the argument list comes from the type (field names,
/// doc comments, `Option` fields are optional):
///
/// ```
/// use genmcp::suite::{GetPromptResult, Prompt, PromptBuilder};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Review {
///     /// The code to review.
///     code: String,
///     /// What to focus on.
///     focus: Option<String>,
/// }
///
/// let p = PromptBuilder::new("review").typed(|args: Review, _get| async move {
///     let focus = args.focus.unwrap_or_else(|| "anything".into());
///     Ok(GetPromptResult::user_text(format!("Review for {focus}:\n{}", args.code)).into())
/// });
/// let names: Vec<_> = p.descriptor().arguments.iter().map(|a| (a.name.as_str(), a.required)).collect();
/// assert_eq!(names, [("code", true), ("focus", false)]);
/// assert_eq!(p.descriptor().arguments[0].description.as_deref(), Some("The code to review."));
/// ```
pub type PromptBuilder = Builder<PromptParts>;

impl Builder<PromptParts> {
    /// Starts a prompt named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Builder::with_kind(name, PromptParts::default())
    }

    /// Declares an argument.
    pub fn argument(mut self, name: impl Into<String>, description: &str, required: bool) -> Self {
        self.kind
            .arguments
            .push(PromptArgument::new(name, Some(description), required));
        self
    }

    fn descriptor(self) -> PromptDescriptor {
        let Common {
            name,
            title,
            description,
            extra,
        } = self.common;
        PromptDescriptor {
            name,
            title,
            description,
            arguments: self.kind.arguments,
            extra,
        }
    }

    /// Finishes the prompt with its async handler.
    pub fn handler<F, Fut>(self, f: F) -> FnPrompt
    where
        F: Fn(PromptGet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PromptOutcome, McpError>> + Send + 'static,
    {
        FnPrompt {
            descriptor: self.descriptor(),
            f: Arc::new(move |get| Box::pin(f(get))),
        }
    }

    /// Finishes a prompt whose arguments are an `A`: the declared arguments are
    /// derived from `A`'s schema (replacing any declared with
    /// [`argument`](Self::argument)), and arguments arrive deserialized. A
    /// missing required argument is `-32602` with `data.missing`, as for any
    /// prompt; arguments that do not deserialize are `-32602` too, and the
    /// handler does not run.
    pub fn typed<A, F, Fut>(mut self, f: F) -> FnPrompt
    where
        A: DeserializeOwned + JsonSchema + 'static,
        F: Fn(A, PromptGet) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<PromptOutcome, McpError>> + Send + 'static,
    {
        self.kind.arguments = prompt_arguments::<A>();
        let name = self.common.name.clone();
        FnPrompt {
            descriptor: self.descriptor(),
            f: Arc::new(
                move |get| match typed::prompt_arguments_of::<A>(&name, &get.arguments) {
                    Ok(args) => Box::pin(f(args, get)),
                    Err(e) => Box::pin(async move { Err(e) }),
                },
            ),
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
