//! What `prompts/get` answers: messages with a role and a content block.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::suite::common::{Content, InputRequired};

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
