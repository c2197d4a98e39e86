//! What tools and prompts have in common: a name, a title, a description,
//! icons, `_meta` and any other descriptor field. [`ToolBuilder`] and
//! [`PromptBuilder`] are both a [`Builder`], so these setters exist once.
//!
//! [`ToolBuilder`]: crate::suite::ToolBuilder
//! [`PromptBuilder`]: crate::suite::PromptBuilder

use serde::Serialize;
use serde_json::{Map, Value};

/// An icon of a tool or prompt (`icons` in MCP: `src`, `mimeType?`, `sizes?`,
/// `theme?`).
///
/// ```
/// use genmcp::suite::Icon;
/// let icon = Icon::new("https://example.com/icon.png").mime_type("image/png").size("48x48");
/// assert_eq!(
///     serde_json::to_value(&icon).unwrap(),
///     serde_json::json!({"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]})
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Icon {
    /// The image URI (`https:` or `data:`).
    pub src: String,
    /// Its MIME type.
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The sizes it is available in (`"48x48"`, `"any"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<String>,
    /// `"light"` or `"dark"`: the background it is designed for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
}

impl Icon {
    /// An icon at `src`.
    pub fn new(src: impl Into<String>) -> Self {
        Icon {
            src: src.into(),
            mime_type: None,
            sizes: Vec::new(),
            theme: None,
        }
    }

    /// With a MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// With one more size.
    pub fn size(mut self, size: impl Into<String>) -> Self {
        self.sizes.push(size.into());
        self
    }

    /// With a theme (`"light"` or `"dark"`).
    pub fn theme(mut self, theme: impl Into<String>) -> Self {
        self.theme = Some(theme.into());
        self
    }
}

/// The fields every descriptor has.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Common {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub extra: Map<String, Value>,
}

impl Common {
    /// `name`, `title`, `description`: the head of a descriptor's JSON.
    pub(crate) fn head(
        name: &str,
        title: Option<&String>,
        description: Option<&String>,
    ) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("name".into(), Value::from(name));
        if let Some(t) = title {
            map.insert("title".into(), Value::from(t.as_str()));
        }
        if let Some(d) = description {
            map.insert("description".into(), Value::from(d.as_str()));
        }
        map
    }
}

/// A builder of a described item: the setters a tool and a prompt share, and
/// a kind-specific part `K` ([`ToolParts`](crate::suite::ToolParts) or
/// [`PromptParts`](crate::suite::PromptParts)) with its own setters and finishers.
///
/// ```
/// use genmcp::suite::{Icon, ToolBuilder, PromptBuilder};
/// use serde_json::json;
/// let tool = ToolBuilder::new("t").title("T").description("d")
///     .icon(Icon::new("https://example.com/t.png"))
///     .meta("com.example/owner", json!("ops"));
/// let prompt = PromptBuilder::new("p").title("P").description("d")
///     .icon(Icon::new("https://example.com/p.png"));
/// # let _ = (tool, prompt);
/// ```
#[derive(Clone, Debug)]
pub struct Builder<K> {
    pub(crate) common: Common,
    pub(crate) kind: K,
}

impl<K> Builder<K> {
    pub(crate) fn with_kind(name: impl Into<String>, kind: K) -> Self {
        Builder {
            common: Common {
                name: name.into(),
                ..Common::default()
            },
            kind,
        }
    }

    /// Sets the display title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.common.title = Some(title.into());
        self
    }

    /// Sets the description (for the model).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.common.description = Some(description.into());
        self
    }

    /// Adds an icon (served in `icons`, in the order added).
    pub fn icon(mut self, icon: Icon) -> Self {
        let value = serde_json::to_value(&icon).unwrap_or(Value::Null);
        match self.common.extra.get_mut("icons") {
            Some(Value::Array(icons)) => icons.push(value),
            _ => {
                self.common
                    .extra
                    .insert("icons".into(), Value::Array(vec![value]));
            }
        }
        self
    }

    /// Sets one key of the descriptor's `_meta`.
    pub fn meta(mut self, key: impl Into<String>, value: Value) -> Self {
        match self.common.extra.get_mut("_meta") {
            Some(Value::Object(meta)) => {
                meta.insert(key.into(), value);
            }
            _ => {
                let mut meta = Map::new();
                meta.insert(key.into(), value);
                self.common
                    .extra
                    .insert("_meta".into(), Value::Object(meta));
            }
        }
        self
    }

    /// Adds any other descriptor field, served as given (replaces `icons` or
    /// `_meta` when named so).
    pub fn field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.common.extra.insert(key.into(), value);
        self
    }
}
