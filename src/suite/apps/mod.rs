//! MCP Apps (`io.modelcontextprotocol/ui`): typed helpers for interactive
//! views a host renders for a tool.
//!
//! - A view is a `ui://` resource of MIME type `text/html;profile=mcp-app`
//!   holding an HTML document ([`UiResource`]), with `_meta.ui` (`csp`,
//!   `permissions`, `domain`, `prefersBorder`) on its list entry and its read
//!   contents. [`UiResources`] serves a set of them.
//! - A tool names its view in `_meta.ui` (`resourceUri`, `visibility`) and in
//!   the older flat key `_meta["ui/resourceUri"]` that some hosts still read:
//!   [`ToolUi`], applied with [`ToolBuilder::ui`](crate::suite::ToolBuilder::ui).
//! - A suite given views ([`crate::suite::SuiteBuilder::apps`]) declares
//!   `extensions["io.modelcontextprotocol/ui"]` in `server/discover` and in a
//!   2025 `initialize`, and every result of a tool with a view carries a text
//!   block (one is added when the tool gave none), the fallback for hosts
//!   without the extension.
//!
//! No method is added: the host and the view talk over `postMessage`. See
//! `docs/apps.md`.

mod views;

use serde_json::{Map, Value, json};

pub use views::{UiResource, UiResources};

/// Why an MCP Apps helper refused its input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppsError {
    /// A view URI that does not start with `ui://`.
    #[error("an MCP Apps view must have a ui:// URI, not {0:?}")]
    NotUi(String),
}

/// The extension identifier (the key under `capabilities.extensions`).
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of a view.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// The URI scheme of views.
pub const SCHEME: &str = "ui://";
/// The deprecated flat `_meta` key naming a tool's view, still read by some hosts.
pub const LEGACY_RESOURCE_URI_KEY: &str = "ui/resourceUri";
/// The text block added to a result of a tool with a view that carried none.
pub const DEFAULT_FALLBACK_TEXT: &str = "The result is shown in the tool's view.";

/// Who may call a tool that has a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Visibility {
    /// The model (the tool is listed to it).
    Model,
    /// The view (through the host).
    App,
}

impl Visibility {
    fn as_str(self) -> &'static str {
        match self {
            Visibility::Model => "model",
            Visibility::App => "app",
        }
    }
}

/// A tool's view: `_meta.ui` and `_meta["ui/resourceUri"]`.
///
/// ```
/// use genmcp::suite::apps::{ToolUi, Visibility};
/// let ui = ToolUi::new("ui://notes/board").visibility([Visibility::App]);
/// assert_eq!(ui.to_meta()["resourceUri"], "ui://notes/board");
/// assert_eq!(ui.to_meta()["visibility"], serde_json::json!(["app"]));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ToolUi {
    resource_uri: String,
    visibility: Vec<Visibility>,
}

impl ToolUi {
    /// The view at `resource_uri` (a `ui://` URI), visible to the model and
    /// the view (the default). A URI that does not start with `ui://` is
    /// kept but logged as an error (no host would render it); use
    /// [`ToolUi::try_new`] to refuse it instead.
    pub fn new(resource_uri: impl Into<String>) -> Self {
        let resource_uri = resource_uri.into();
        if !resource_uri.starts_with(SCHEME) {
            tracing::error!(uri = %resource_uri, "an MCP Apps tool view must have a ui:// URI");
        }
        ToolUi {
            resource_uri,
            visibility: vec![Visibility::Model, Visibility::App],
        }
    }

    /// [`ToolUi::new`], refusing a URI that does not start with `ui://`.
    ///
    /// ```
    /// use genmcp::suite::apps::ToolUi;
    /// assert!(ToolUi::try_new("ui://notes/board").is_ok());
    /// assert!(ToolUi::try_new("https://example.com/board").is_err());
    /// ```
    pub fn try_new(resource_uri: impl Into<String>) -> Result<Self, AppsError> {
        let resource_uri = resource_uri.into();
        if !resource_uri.starts_with(SCHEME) {
            return Err(AppsError::NotUi(resource_uri));
        }
        Ok(Self::new(resource_uri))
    }

    /// Who may call the tool (`[App]` hides it from the model).
    pub fn visibility(mut self, visibility: impl IntoIterator<Item = Visibility>) -> Self {
        self.visibility = visibility.into_iter().collect();
        self
    }

    /// The view's URI.
    pub fn resource_uri(&self) -> &str {
        &self.resource_uri
    }

    /// The value of `_meta.ui`.
    pub fn to_meta(&self) -> Value {
        json!({
            "resourceUri": self.resource_uri,
            "visibility": self.visibility.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
        })
    }
}

/// The Content Security Policy a host applies to a view: the origins it may
/// reach (each list a set of origins such as `https://api.example.com`).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Csp {
    /// `connectDomains`: fetch / XHR / WebSocket.
    pub connect_domains: Vec<String>,
    /// `resourceDomains`: scripts, styles, images, fonts, media.
    pub resource_domains: Vec<String>,
    /// `frameDomains`: nested frames.
    pub frame_domains: Vec<String>,
    /// `baseUriDomains`: `<base href>`.
    pub base_uri_domains: Vec<String>,
}

/// Device permissions a view asks the host for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Permissions {
    /// `camera`.
    pub camera: bool,
    /// `microphone`.
    pub microphone: bool,
    /// `geolocation`.
    pub geolocation: bool,
    /// `clipboardWrite`.
    pub clipboard_write: bool,
}

/// `_meta.ui` of a view.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct UiMeta {
    /// `csp` (none: the host's strict default, no outside origin).
    pub csp: Option<Csp>,
    /// `permissions`.
    pub permissions: Option<Permissions>,
    /// `domain`: a dedicated origin the host may serve the view from.
    pub domain: Option<String>,
    /// `prefersBorder`: whether the host should draw a border around it.
    pub prefers_border: Option<bool>,
}

impl UiMeta {
    /// The `_meta.ui` object (`None` when nothing is set).
    pub fn to_json(&self) -> Option<Value> {
        let mut ui = Map::new();
        if let Some(csp) = &self.csp {
            let mut c = Map::new();
            for (key, list) in [
                ("connectDomains", &csp.connect_domains),
                ("resourceDomains", &csp.resource_domains),
                ("frameDomains", &csp.frame_domains),
                ("baseUriDomains", &csp.base_uri_domains),
            ] {
                if !list.is_empty() {
                    c.insert(key.into(), json!(list));
                }
            }
            ui.insert("csp".into(), Value::Object(c));
        }
        if let Some(p) = &self.permissions {
            let mut m = Map::new();
            for (key, on) in [
                ("camera", p.camera),
                ("microphone", p.microphone),
                ("geolocation", p.geolocation),
                ("clipboardWrite", p.clipboard_write),
            ] {
                if on {
                    m.insert(key.into(), json!({}));
                }
            }
            ui.insert("permissions".into(), Value::Object(m));
        }
        if let Some(d) = &self.domain {
            ui.insert("domain".into(), Value::from(d.clone()));
        }
        if let Some(b) = self.prefers_border {
            ui.insert("prefersBorder".into(), Value::Bool(b));
        }
        (!ui.is_empty()).then_some(Value::Object(ui))
    }
}

/// Whether a tool descriptor's `extra` names a view (`_meta.ui.resourceUri`
/// or the flat key).
pub(crate) fn has_view(extra: &Map<String, Value>) -> bool {
    extra.get("_meta").is_some_and(|m| {
        m["ui"]["resourceUri"].is_string() || m[LEGACY_RESOURCE_URI_KEY].is_string()
    })
}
