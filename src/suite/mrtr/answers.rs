//! Readers of MRTR answers (`inputResponses` values): elicitation content,
//! sampled text, roots.

use serde_json::{Map, Value};

/// The `content` of an accepted elicitation answer.
pub(crate) fn elicited<'a>(
    responses: &'a Map<String, Value>,
    key: &str,
) -> Option<&'a Map<String, Value>> {
    let answer = responses.get(key)?;
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer.get("content")?.as_object()
}

/// The text of a sampling answer (`content` a text block, or an array with one).
pub(crate) fn sampled_text<'a>(responses: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    let content = responses.get(key)?.get("content")?;
    let text_of = |c: &'a Value| {
        (c.get("type").and_then(Value::as_str) == Some("text"))
            .then(|| c.get("text").and_then(Value::as_str))
            .flatten()
    };
    match content {
        Value::Array(blocks) => blocks.iter().find_map(text_of),
        block => text_of(block),
    }
}

/// The root URIs of a `roots/list` answer.
pub(crate) fn roots<'a>(responses: &'a Map<String, Value>, key: &str) -> Option<Vec<&'a str>> {
    let roots = responses.get(key)?.get("roots")?.as_array()?;
    Some(
        roots
            .iter()
            .filter_map(|r| r.get("uri").and_then(Value::as_str))
            .collect(),
    )
}
