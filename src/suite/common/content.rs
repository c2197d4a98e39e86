//! Content blocks and tool results ([`CallToolResult`], [`ToolOutcome`]).

use serde::Serialize;
use serde_json::{Map, Value};

use super::input_required::InputRequired;

/// The contents of a resource: text or a base64 blob.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ResourceContents {
    /// Text contents.
    Text {
        /// The resource URI.
        uri: String,
        /// MIME type.
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The text.
        text: String,
        /// `_meta` of the contents (e.g. MCP Apps' `ui`).
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<Map<String, Value>>,
    },
    /// Binary contents, base64-encoded.
    Blob {
        /// The resource URI.
        uri: String,
        /// MIME type.
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Base64 data.
        blob: String,
        /// `_meta` of the contents.
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<Map<String, Value>>,
    },
}

impl ResourceContents {
    /// Text contents with a MIME type.
    pub fn text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        ResourceContents::Text {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            text: text.into(),
            meta: None,
        }
    }

    /// Blob contents (already base64) with a MIME type.
    pub fn blob(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        base64: impl Into<String>,
    ) -> Self {
        ResourceContents::Blob {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            blob: base64.into(),
            meta: None,
        }
    }

    /// Sets one key of the contents' `_meta`.
    pub fn with_meta(mut self, key: impl Into<String>, value: Value) -> Self {
        let (ResourceContents::Text { meta, .. } | ResourceContents::Blob { meta, .. }) = &mut self;
        meta.get_or_insert_with(Map::new).insert(key.into(), value);
        self
    }
}

/// One content block of a tool result or prompt message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// `{"type":"text","text":...}`
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"image","data":<base64>,"mimeType":...}`
    Image {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// `{"type":"audio","data":<base64>,"mimeType":...}`
    Audio {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// `{"type":"resource_link","uri":...,"name":...}`
    ResourceLink {
        /// The linked URI.
        uri: String,
        /// Its name.
        name: String,
        /// Optional description, MIME type, ...
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
    /// `{"type":"resource","resource":{...}}`
    Resource {
        /// The embedded contents.
        resource: ResourceContents,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image block (base64 data).
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: base64.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio block (base64 data).
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio {
            data: base64.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An embedded resource block.
    pub fn resource(contents: ResourceContents) -> Self {
        Content::Resource { resource: contents }
    }

    /// A resource link block.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Content::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            extra: Map::new(),
        }
    }
}

/// The result of a `tools/call` that completed.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CallToolResult {
    /// The content blocks.
    pub content: Vec<Content>,
    /// Structured output (must match the tool's `outputSchema` when it has one).
    pub structured_content: Option<Value>,
    /// A tool-level failure the model can read and correct (not a protocol error).
    pub is_error: bool,
}

impl CallToolResult {
    /// A successful result with these blocks.
    pub fn new(content: Vec<Content>) -> Self {
        CallToolResult {
            content,
            ..Default::default()
        }
    }

    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Content::text(text)])
    }

    /// A tool-level failure (`isError: true`) with one text block.
    pub fn error(text: impl Into<String>) -> Self {
        CallToolResult {
            content: vec![Content::text(text)],
            structured_content: None,
            is_error: true,
        }
    }

    /// With structured content.
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured_content = Some(value);
        self
    }

    /// The result object (without `resultType` and `_meta`, which the suite adds).
    pub fn into_map(self) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert(
            "content".into(),
            serde_json::to_value(&self.content).unwrap_or(Value::Array(vec![])),
        );
        if let Some(s) = self.structured_content {
            map.insert("structuredContent".into(), s);
        }
        if self.is_error {
            map.insert("isError".into(), Value::Bool(true));
        }
        map
    }
}

/// What a tool returns.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ToolOutcome {
    /// Done.
    Complete(CallToolResult),
    /// Needs input from the client first.
    InputRequired(InputRequired),
}

impl From<CallToolResult> for ToolOutcome {
    fn from(r: CallToolResult) -> Self {
        ToolOutcome::Complete(r)
    }
}

impl From<InputRequired> for ToolOutcome {
    fn from(r: InputRequired) -> Self {
        ToolOutcome::InputRequired(r)
    }
}
