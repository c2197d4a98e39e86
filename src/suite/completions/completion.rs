//! Argument completion (`completion/complete`) for prompt arguments and resource
//! template variables.
//!
//! The suite checks the reference first (the prompt must exist and declare the
//! argument; the template must be listed and have the variable: `-32602`
//! otherwise), then asks the [`Completer`]. At most [`MAX_VALUES`] values are
//! sent; beyond that `hasMore` is set and `total` is the full count.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::mux::Channel;
use crate::protocol::McpError;
use crate::suite::common::BoxFuture;

/// Most values in one completion result (spec bound).
pub const MAX_VALUES: usize = 100;

/// What is being completed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionRef {
    /// `{"type":"ref/prompt","name":...}`.
    Prompt(String),
    /// `{"type":"ref/resource","uri":...}` (a resource template's `uriTemplate`).
    Resource(String),
}

/// One `completion/complete` request.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompletionRequest {
    /// The prompt or resource template.
    pub reference: CompletionRef,
    /// The argument (or template variable) name.
    pub argument: String,
    /// What the user typed so far.
    pub value: String,
    /// Values of the other arguments already chosen (`context.arguments`).
    pub context: BTreeMap<String, String>,
    /// The request's channel.
    pub channel: Channel,
}

/// Completion values.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Completion {
    /// Candidate values, best first.
    pub values: Vec<String>,
    /// Total number of candidates, if known.
    pub total: Option<u64>,
    /// Whether there are more candidates than `values`.
    pub has_more: bool,
}

impl Completion {
    /// A completion with these values.
    pub fn new(values: Vec<String>) -> Self {
        Completion {
            values,
            total: None,
            has_more: false,
        }
    }

    /// The `completion` object, capped to [`MAX_VALUES`].
    pub(crate) fn into_json(mut self) -> Value {
        if self.values.len() > MAX_VALUES {
            let total = self.values.len() as u64;
            self.values.truncate(MAX_VALUES);
            self.has_more = true;
            self.total = Some(self.total.unwrap_or(total).max(total));
        }
        let mut map = Map::new();
        map.insert("values".into(), json!(self.values));
        if let Some(t) = self.total {
            map.insert("total".into(), Value::from(t));
        }
        if self.has_more {
            map.insert("hasMore".into(), Value::Bool(true));
        }
        Value::Object(map)
    }
}

/// Completes arguments. Implement it, or use [`Completions`] (a static table) or
/// [`completer_fn`] (an async closure).
pub trait Completer: Send + Sync + 'static {
    /// Candidate values for one request.
    fn complete(&self, request: CompletionRequest) -> BoxFuture<Result<Completion, McpError>>;
}

type CompleteFn =
    dyn Fn(CompletionRequest) -> BoxFuture<Result<Completion, McpError>> + Send + Sync;

/// A completer from an async closure (see [`completer_fn`]).
pub struct FnCompleter(Arc<CompleteFn>);

impl Completer for FnCompleter {
    fn complete(&self, request: CompletionRequest) -> BoxFuture<Result<Completion, McpError>> {
        (self.0)(request)
    }
}

/// A completer from an async closure.
pub fn completer_fn<F, Fut>(f: F) -> FnCompleter
where
    F: Fn(CompletionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Completion, McpError>> + Send + 'static,
{
    FnCompleter(Arc::new(move |r| Box::pin(f(r))))
}

/// A static completion table: candidate values per prompt argument and per
/// template variable, filtered by prefix of what the user typed.
///
/// ```
/// use genmcp::suite::Completions;
/// let c = Completions::new()
///     .prompt_argument("greet", "who", ["Alice", "Bob", "Alfred"])
///     .template_variable("test://item/{id}", "id", ["1", "2"]);
/// # let _ = c;
/// ```
#[derive(Clone, Debug, Default)]
pub struct Completions {
    table: Vec<(CompletionRef, String, Vec<String>)>,
}

impl Completions {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Candidates for argument `argument` of prompt `prompt`.
    pub fn prompt_argument<I, S>(mut self, prompt: &str, argument: &str, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.table.push((
            CompletionRef::Prompt(prompt.to_owned()),
            argument.to_owned(),
            values.into_iter().map(Into::into).collect(),
        ));
        self
    }

    /// Candidates for variable `variable` of the template `uri_template`.
    pub fn template_variable<I, S>(mut self, uri_template: &str, variable: &str, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.table.push((
            CompletionRef::Resource(uri_template.to_owned()),
            variable.to_owned(),
            values.into_iter().map(Into::into).collect(),
        ));
        self
    }
}

impl Completer for Completions {
    fn complete(&self, request: CompletionRequest) -> BoxFuture<Result<Completion, McpError>> {
        let values: Vec<String> = self
            .table
            .iter()
            .filter(|(r, a, _)| *r == request.reference && *a == request.argument)
            .flat_map(|(_, _, v)| v.iter())
            .filter(|v| v.starts_with(&request.value))
            .cloned()
            .collect();
        Box::pin(async move { Ok(Completion::new(values)) })
    }
}

/// Parses `completion/complete` params into (reference, argument, value, context).
pub(crate) fn parse_request(
    params: &Map<String, Value>,
) -> Result<(CompletionRef, String, String, BTreeMap<String, String>), McpError> {
    let bad = |what: &str| McpError::invalid_params(format!("Invalid params: {what}"));
    let r = params
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("ref must be an object"))?;
    let reference = match r.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => CompletionRef::Prompt(
            r.get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("ref.name must be a string"))?
                .to_owned(),
        ),
        Some("ref/resource") => CompletionRef::Resource(
            r.get("uri")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("ref.uri must be a string"))?
                .to_owned(),
        ),
        _ => return Err(bad("ref.type must be ref/prompt or ref/resource")),
    };
    let arg = params
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("argument must be an object"))?;
    let name = arg
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("argument.name must be a string"))?
        .to_owned();
    let value = arg
        .get("value")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("argument.value must be a string"))?
        .to_owned();
    // `context?: {arguments?: {string: string}}`: a value of another shape
    // is refused as the other fields are, never dropped silently.
    let mut context = BTreeMap::new();
    let args = match params.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(c)) => match c.get("arguments") {
            None | Some(Value::Null) => None,
            Some(Value::Object(args)) => Some(args),
            Some(_) => return Err(bad("context.arguments must be an object of strings")),
        },
        Some(_) => return Err(bad("context must be an object")),
    };
    for (k, v) in args.into_iter().flatten() {
        let Some(s) = v.as_str() else {
            return Err(bad("context.arguments must be an object of strings"));
        };
        context.insert(k.clone(), s.to_owned());
    }
    Ok((reference, name, value, context))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_arguments_of_another_shape_are_invalid_params() {
        let base = json!({
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "a", "value": ""},
        });
        let with = |context: Value| {
            let mut p = base.as_object().cloned().unwrap_or_default();
            p.insert("context".into(), context);
            parse_request(&p)
        };
        for bad_context in [
            json!(5),
            json!({"arguments": [1]}),
            json!({"arguments": {"x": 1}}),
        ] {
            let err = with(bad_context.clone()).err();
            assert_eq!(err.map(|e| e.code()), Some(-32602), "{bad_context}");
        }
        let ok = with(json!({"arguments": {"x": "1"}})).ok();
        assert_eq!(
            ok.map(|(.., c)| c.get("x").cloned()),
            Some(Some("1".into()))
        );
        assert!(with(json!({})).is_ok());
    }

    #[test]
    fn values_are_capped() {
        let many: Vec<String> = (0..150).map(|i| i.to_string()).collect();
        let v = Completion::new(many).into_json();
        assert_eq!(v["values"].as_array().unwrap().len(), 100);
        assert_eq!(v["hasMore"], true);
        assert_eq!(v["total"], 150);
        assert_eq!(
            Completion::new(vec!["a".into()]).into_json(),
            json!({"values": ["a"]})
        );
    }

    #[test]
    fn params_are_parsed_and_checked() {
        let p = json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "x"},
            "context": {"arguments": {"b": "1"}}});
        let (r, a, v, c) = parse_request(p.as_object().unwrap()).unwrap();
        assert_eq!(r, CompletionRef::Prompt("p".into()));
        assert_eq!((a.as_str(), v.as_str()), ("a", "x"));
        assert_eq!(c.get("b").map(String::as_str), Some("1"));
        for bad in [
            json!({}),
            json!({"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}}),
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a"}}),
        ] {
            assert_eq!(
                parse_request(bad.as_object().unwrap()).unwrap_err().code(),
                -32602
            );
        }
    }
}
