//! Views: `ui://` resources holding an HTML document (as text, or as bytes
//! served as a base64 blob), and the provider that serves a set of them.

use std::sync::Arc;

use serde_json::json;

use super::{AppsError, MIME_TYPE, SCHEME, UiMeta};
use crate::mux::Channel;
use crate::protocol::McpError;
use crate::suite::common::{BoxFuture, ResourceContents};
use crate::suite::resources::{ReadOutcome, Resource, ResourceProvider, ResourceRead};

/// A view: a `ui://` resource holding an HTML document, read as text
/// ([`UiResource::new`]) or as a base64 blob ([`UiResource::blob`]).
#[derive(Clone, Debug, PartialEq)]
pub struct UiResource {
    uri: String,
    name: String,
    title: Option<String>,
    description: Option<String>,
    body: Body,
    meta: UiMeta,
}

/// What a view serves.
#[derive(Clone, Debug, PartialEq)]
enum Body {
    Text(String),
    Blob(Arc<[u8]>),
}

impl UiResource {
    /// The view `uri` (it must start with `ui://`) named `name`, serving `html`
    /// as text.
    pub fn new(uri: impl Into<String>, name: impl Into<String>, html: impl Into<String>) -> Self {
        Self::with_body(uri.into(), name.into(), Body::Text(html.into()))
    }

    /// The view `uri` (it must start with `ui://`) named `name`, serving the
    /// HTML document `bytes` as a base64 `blob` (same MIME type and `_meta.ui`
    /// as a text view): for a document kept as bytes, e.g. in another
    /// encoding than UTF-8 or built by a bundler.
    ///
    /// ```
    /// use genmcp::suite::apps::UiResource;
    /// let view = UiResource::blob("ui://app/main", "main", b"<!doctype html><p>hi</p>".to_vec());
    /// let contents = serde_json::to_value(view.contents()).unwrap();
    /// assert_eq!(contents["blob"], "PCFkb2N0eXBlIGh0bWw+PHA+aGk8L3A+");
    /// assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    /// ```
    pub fn blob(
        uri: impl Into<String>,
        name: impl Into<String>,
        bytes: impl Into<Vec<u8>>,
    ) -> Self {
        Self::with_body(uri.into(), name.into(), Body::Blob(Arc::from(bytes.into())))
    }

    fn with_body(uri: String, name: String, body: Body) -> Self {
        UiResource {
            uri,
            name,
            title: None,
            description: None,
            body,
            meta: UiMeta::default(),
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

    /// Sets `_meta.ui`.
    pub fn meta(mut self, meta: UiMeta) -> Self {
        self.meta = meta;
        self
    }

    /// The URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The list entry (`resources/list`): MIME type and `_meta.ui`.
    pub fn resource(&self) -> Resource {
        let mut r = Resource::new(self.uri.clone(), self.name.clone()).mime_type(MIME_TYPE);
        if let Some(t) = &self.title {
            r = r.title(t.clone());
        }
        if let Some(d) = &self.description {
            r = r.description(d.clone());
        }
        if let Some(ui) = self.meta.to_json() {
            r = r.field("_meta", json!({ "ui": ui }));
        }
        r
    }

    /// The read contents: the HTML as text (or as a base64 blob), with
    /// `_meta.ui`.
    pub fn contents(&self) -> ResourceContents {
        let c = match &self.body {
            Body::Text(html) => ResourceContents::text(self.uri.clone(), MIME_TYPE, html.clone()),
            Body::Blob(bytes) => ResourceContents::blob(
                self.uri.clone(),
                MIME_TYPE,
                data_encoding::BASE64.encode(bytes),
            ),
        };
        match self.meta.to_json() {
            Some(ui) => c.with_meta("ui", ui),
            None => c,
        }
    }
}

/// The views a suite serves (the `ui://` resource provider).
#[derive(Clone, Debug, Default)]
pub struct UiResources {
    views: Vec<UiResource>,
}

impl UiResources {
    /// No view yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces, by URI) a view. A URI that does not start with
    /// `ui://` is refused (nothing changes; an error is logged); use
    /// [`UiResources::try_view`] to get the refusal as an error.
    pub fn view(self, view: UiResource) -> Self {
        if !view.uri.starts_with(SCHEME) {
            tracing::error!(uri = %view.uri, "an MCP Apps view must have a ui:// URI; not served");
            return self;
        }
        self.try_view(view).unwrap_or_default()
    }

    /// Adds (or replaces, by URI) a view; [`AppsError::NotUi`] when its URI
    /// does not start with `ui://`.
    ///
    /// ```
    /// use genmcp::suite::apps::{UiResource, UiResources};
    /// let views = UiResources::new().try_view(UiResource::new("ui://a/main", "main", "<p>a</p>"));
    /// assert!(views.is_ok());
    /// let refused = UiResources::new().try_view(UiResource::new("https://a/main", "main", "<p>a</p>"));
    /// assert!(refused.is_err());
    /// ```
    pub fn try_view(mut self, view: UiResource) -> Result<Self, AppsError> {
        if !view.uri.starts_with(SCHEME) {
            return Err(AppsError::NotUi(view.uri));
        }
        self.views.retain(|v| v.uri != view.uri);
        self.views.push(view);
        Ok(self)
    }
}

impl ResourceProvider for UiResources {
    fn prefix(&self) -> &str {
        SCHEME
    }

    fn list(&self, _channel: &Channel) -> BoxFuture<Result<Vec<Resource>, McpError>> {
        let list = self.views.iter().map(UiResource::resource).collect();
        Box::pin(async move { Ok(list) })
    }

    fn read(&self, read: ResourceRead) -> BoxFuture<Result<ReadOutcome, McpError>> {
        let outcome = match self.views.iter().find(|v| v.uri == read.uri) {
            Some(v) => ReadOutcome::from(v.contents()),
            None => ReadOutcome::NotFound,
        };
        Box::pin(async move { Ok(outcome) })
    }
}
