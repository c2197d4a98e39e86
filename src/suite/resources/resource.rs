//! Resources: providers that own a URI prefix, list their resources and
//! templates, and read URIs (text or blob contents, or an MRTR round).
//!
//! Implement [`ResourceProvider`] for a repository of your own, or build one with
//! [`ResourceSet`] from static contents, async closures and URI templates.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value};

pub use super::template::ResourceTemplate;
use crate::mux::Channel;
use crate::protocol::{CacheHint, McpError};
use crate::suite::common::{BoxFuture, InputRequired, ResourceContents};
use crate::suite::mrtr;

/// A resource as listed by `resources/list`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Resource {
    /// The URI.
    pub uri: String,
    /// Programmatic name.
    pub name: String,
    /// Display title.
    pub title: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// MIME type.
    pub mime_type: Option<String>,
    /// Size in bytes, if known.
    pub size: Option<u64>,
    /// Other fields (`annotations`, `icons`, `_meta`...), served as given.
    pub extra: Map<String, Value>,
}

impl Resource {
    /// A resource with a URI and a name.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            extra: Map::new(),
        }
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Sets the size in bytes.
    pub fn size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }

    /// Adds another field.
    pub fn field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.insert(key.into(), value);
        self
    }

    /// The `Resource` object as served.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("uri".into(), Value::from(self.uri.clone()));
        map.insert("name".into(), Value::from(self.name.clone()));
        if let Some(t) = &self.title {
            map.insert("title".into(), Value::from(t.clone()));
        }
        if let Some(d) = &self.description {
            map.insert("description".into(), Value::from(d.clone()));
        }
        if let Some(m) = &self.mime_type {
            map.insert("mimeType".into(), Value::from(m.clone()));
        }
        if let Some(s) = self.size {
            map.insert("size".into(), Value::from(s));
        }
        for (k, v) in &self.extra {
            map.insert(k.clone(), v.clone());
        }
        Value::Object(map)
    }
}

/// One `resources/read` as a provider sees it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ResourceRead {
    /// The requested URI.
    pub uri: String,
    /// The template variables, when the URI matched a template of a [`ResourceSet`].
    pub variables: Map<String, Value>,
    /// The request's channel.
    pub channel: Channel,
    /// `inputResponses` of an MRTR retry (empty on a first read).
    pub input_responses: Map<String, Value>,
    /// The verified state this provider put in `requestState` last round.
    pub request_state: Option<Value>,
}

impl ResourceRead {
    /// The template variable `name` as a string.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.variables.get(name).and_then(Value::as_str)
    }

    /// The `content` of an accepted elicitation answer to input request `key`.
    pub fn elicited(&self, key: &str) -> Option<&Map<String, Value>> {
        mrtr::elicited(&self.input_responses, key)
    }
}

/// A completed read.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ReadResult {
    /// The contents (at least one; an empty list is answered as not found).
    pub contents: Vec<ResourceContents>,
    /// Cache hint of this result (default: the provider's, then the suite's).
    pub cache: Option<CacheHint>,
}

impl ReadResult {
    /// A result with these contents.
    pub fn new(contents: Vec<ResourceContents>) -> Self {
        ReadResult {
            contents,
            cache: None,
        }
    }

    /// With a cache hint.
    pub fn with_cache(mut self, hint: CacheHint) -> Self {
        self.cache = Some(hint);
        self
    }
}

/// What a provider answers to a read.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ReadOutcome {
    /// The contents.
    Complete(ReadResult),
    /// Needs input from the client first (MRTR).
    InputRequired(InputRequired),
    /// This provider has no such resource (the next provider is tried; if none
    /// has it: `-32602` "Resource not found" with `data.uri`).
    NotFound,
}

impl From<ReadResult> for ReadOutcome {
    fn from(r: ReadResult) -> Self {
        ReadOutcome::Complete(r)
    }
}

impl From<Vec<ResourceContents>> for ReadOutcome {
    fn from(c: Vec<ResourceContents>) -> Self {
        ReadOutcome::Complete(ReadResult::new(c))
    }
}

impl From<ResourceContents> for ReadOutcome {
    fn from(c: ResourceContents) -> Self {
        ReadOutcome::Complete(ReadResult::new(vec![c]))
    }
}

impl From<InputRequired> for ReadOutcome {
    fn from(r: InputRequired) -> Self {
        ReadOutcome::InputRequired(r)
    }
}

/// A repository of resources under one URI prefix.
///
/// The suite asks only providers whose [`prefix`](ResourceProvider::prefix) the
/// URI starts with, longest prefix first, until one does not answer
/// [`ReadOutcome::NotFound`].
pub trait ResourceProvider: Send + Sync + 'static {
    /// The URI prefix this provider owns (e.g. `"file:///project/"`; `""` owns all).
    fn prefix(&self) -> &str;
    /// The resources it lists (the suite paginates).
    fn list(&self, channel: &Channel) -> BoxFuture<Result<Vec<Resource>, McpError>>;
    /// The templates it lists.
    fn templates(&self) -> Vec<ResourceTemplate> {
        Vec::new()
    }
    /// Reads one URI.
    fn read(&self, read: ResourceRead) -> BoxFuture<Result<ReadOutcome, McpError>>;
    /// Cache hint of this provider's reads and of the lists it contributes to
    /// (`None`: the suite's defaults).
    fn cache(&self) -> Option<CacheHint> {
        None
    }
}

type ReadFn = dyn Fn(ResourceRead) -> BoxFuture<Result<ReadOutcome, McpError>> + Send + Sync;

enum Entry {
    Static(Resource, Vec<ResourceContents>),
    Dynamic(Resource, Arc<ReadFn>),
}

impl Entry {
    fn resource(&self) -> &Resource {
        match self {
            Entry::Static(r, _) | Entry::Dynamic(r, _) => r,
        }
    }
}

/// A [`ResourceProvider`] built from static contents, async closures and
/// templates.
///
/// ```
/// use genmcp::suite::{ResourceSet, Resource, ResourceContents, ResourceTemplate};
/// let set = ResourceSet::new("test://")
///     .text(Resource::new("test://hello", "hello").mime_type("text/plain"), "Hello!")
///     .template(ResourceTemplate::new("test://item/{id}", "item"), |read| async move {
///         let id = read.var("id").unwrap_or_default().to_owned();
///         Ok(ResourceContents::text(read.uri, "text/plain", format!("item {id}")).into())
///     });
/// # let _ = set;
/// ```
pub struct ResourceSet {
    prefix: String,
    entries: Vec<Entry>,
    templates: Vec<(ResourceTemplate, Arc<ReadFn>)>,
    cache: Option<CacheHint>,
}

impl ResourceSet {
    /// An empty set owning `prefix`.
    pub fn new(prefix: impl Into<String>) -> Self {
        ResourceSet {
            prefix: prefix.into(),
            entries: Vec::new(),
            templates: Vec::new(),
            cache: None,
        }
    }

    /// Sets the cache hint of this set's reads and lists.
    pub fn cache(mut self, hint: CacheHint) -> Self {
        self.cache = Some(hint);
        self
    }

    /// Adds a static resource with fixed contents.
    pub fn contents(mut self, resource: Resource, contents: Vec<ResourceContents>) -> Self {
        self.entries.push(Entry::Static(resource, contents));
        self
    }

    /// Adds a static text resource (MIME type from the resource, default `text/plain`).
    pub fn text(self, resource: Resource, text: impl Into<String>) -> Self {
        let mime = resource
            .mime_type
            .clone()
            .unwrap_or_else(|| "text/plain".into());
        let contents = ResourceContents::text(resource.uri.clone(), mime, text);
        self.contents(resource, vec![contents])
    }

    /// Adds a static blob resource (already base64; MIME type from the resource,
    /// default `application/octet-stream`).
    pub fn blob(self, resource: Resource, base64: impl Into<String>) -> Self {
        let mime = resource
            .mime_type
            .clone()
            .unwrap_or_else(|| "application/octet-stream".into());
        let contents = ResourceContents::blob(resource.uri.clone(), mime, base64);
        self.contents(resource, vec![contents])
    }

    /// Adds a listed resource read by an async closure.
    pub fn dynamic<F, Fut>(mut self, resource: Resource, read: F) -> Self
    where
        F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ReadOutcome, McpError>> + Send + 'static,
    {
        self.entries.push(Entry::Dynamic(
            resource,
            Arc::new(move |r| Box::pin(read(r))),
        ));
        self
    }

    /// Adds a template; URIs matching it are read by the closure, with
    /// [`ResourceRead::variables`] filled in.
    pub fn template<F, Fut>(mut self, template: ResourceTemplate, read: F) -> Self
    where
        F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ReadOutcome, McpError>> + Send + 'static,
    {
        self.templates
            .push((template, Arc::new(move |r| Box::pin(read(r)))));
        self
    }
}

impl ResourceProvider for ResourceSet {
    fn prefix(&self) -> &str {
        &self.prefix
    }

    fn list(&self, _channel: &Channel) -> BoxFuture<Result<Vec<Resource>, McpError>> {
        let list: Vec<Resource> = self.entries.iter().map(|e| e.resource().clone()).collect();
        Box::pin(async move { Ok(list) })
    }

    fn templates(&self) -> Vec<ResourceTemplate> {
        self.templates.iter().map(|(t, _)| t.clone()).collect()
    }

    fn read(&self, mut read: ResourceRead) -> BoxFuture<Result<ReadOutcome, McpError>> {
        for entry in &self.entries {
            match entry {
                Entry::Static(r, contents) if r.uri == read.uri => {
                    let outcome = ReadOutcome::from(contents.clone());
                    return Box::pin(async move { Ok(outcome) });
                }
                Entry::Dynamic(r, f) if r.uri == read.uri => return f(read),
                _ => {}
            }
        }
        for (template, f) in &self.templates {
            if let Some(vars) = template.matches(&read.uri) {
                read.variables = vars;
                return f(read);
            }
        }
        Box::pin(async { Ok(ReadOutcome::NotFound) })
    }

    fn cache(&self) -> Option<CacheHint> {
        self.cache
    }
}
