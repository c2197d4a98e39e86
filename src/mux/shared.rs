//! A subscription notification encoded once for every stream that receives it.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::protocol::{Notification, keys, methods};

/// Which filter entry a notification needs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    ToolsListChanged,
    PromptsListChanged,
    ResourcesListChanged,
    ResourcesUpdated(Box<str>),
    /// `notifications/tasks` for this task id.
    TaskStatus(Box<str>),
    /// Not a subscription notification: every listen stream refuses it.
    Other,
}

/// Aligned to two cache lines: the `Arc`'s reference counts, which every
/// stream's frame changes from whichever thread it runs on, then sit on a
/// different line from the bytes those threads read (no false sharing).
#[derive(Debug)]
#[repr(align(128))]
struct Inner {
    method: Box<str>,
    kind: Kind,
    head: Bytes,
    tail: Bytes,
    /// Length of `head` before `"_meta":{"<subscriptionId key>":`.
    prefix_len: usize,
    /// Whether `_meta` holds other keys than the subscription id.
    meta_rest: bool,
    /// The 2025-era text (no subscription id), encoded on first use by a
    /// legacy GET stream and then shared by all of them.
    legacy: OnceLock<Bytes>,
}

/// A subscription notification serialized once, to be sent on many listen
/// streams with [`crate::mux::Channel::send_shared`]: each stream splices in
/// only its own pre-encoded subscription id, so fanning it out allocates and
/// encodes nothing per stream. Cloning it is one reference-count increment,
/// which makes it a good bus message.
///
/// Any `_meta["io.modelcontextprotocol/subscriptionId"]` in the notification is
/// dropped: the runtime owns that key.
///
/// ```
/// use genmcp::mux::SharedNotification;
/// use genmcp::protocol::Notification;
/// let shared = SharedNotification::new(Notification::resource_updated("note://1"));
/// assert_eq!(shared.method(), "notifications/resources/updated");
/// assert_eq!(shared.uri(), Some("note://1"));
/// ```
#[derive(Clone, Debug)]
pub struct SharedNotification {
    inner: Arc<Inner>,
}

impl From<Notification> for SharedNotification {
    fn from(notification: Notification) -> Self {
        SharedNotification::new(notification)
    }
}

/// Serialized as the notification's JSON-RPC text without the subscription id
/// (what a [`crate::pubsub::Bus`] backed by Redis sends to the other nodes);
/// with `serde_json` the cached text is written as is, not re-encoded.
impl serde::Serialize for SharedNotification {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = std::str::from_utf8(self.legacy()).map_err(serde::ser::Error::custom)?;
        let raw = serde_json::value::RawValue::from_string(text.to_owned())
            .map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

/// Read back from its JSON-RPC text and encoded once again, for every stream
/// of the receiving node.
impl<'de> serde::Deserialize<'de> for SharedNotification {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            method: String,
            #[serde(default)]
            params: Map<String, Value>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(SharedNotification::new(Notification::new(
            wire.method,
            wire.params,
        )))
    }
}

/// Appends `value` as compact JSON. Serializing JSON values cannot fail.
fn put_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Appends `,"key":value` for each entry.
fn put_entries<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a String, &'a Value)>) {
    for (key, value) in entries {
        out.push(b',');
        put_json(out, key);
        out.push(b':');
        put_json(out, value);
    }
}

impl SharedNotification {
    /// Encodes `notification` once.
    pub fn new(notification: Notification) -> Self {
        let Notification { method, mut params } = notification;
        let kind = match method.as_str() {
            methods::TOOLS_LIST_CHANGED => Kind::ToolsListChanged,
            methods::PROMPTS_LIST_CHANGED => Kind::PromptsListChanged,
            methods::RESOURCES_LIST_CHANGED => Kind::ResourcesListChanged,
            methods::RESOURCES_UPDATED => match params.get("uri").and_then(Value::as_str) {
                Some(uri) => Kind::ResourcesUpdated(uri.into()),
                None => Kind::Other,
            },
            methods::TASK_STATUS => match params.get("taskId").and_then(Value::as_str) {
                Some(id) => Kind::TaskStatus(id.into()),
                None => Kind::Other,
            },
            _ => Kind::Other,
        };
        let meta = match params.shift_remove("_meta") {
            Some(Value::Object(mut meta)) => {
                meta.shift_remove(keys::SUBSCRIPTION_ID);
                meta
            }
            // `_meta` must be an object; anything else cannot carry the id.
            _ => Map::new(),
        };
        let mut head = Vec::with_capacity(96 + method.len());
        head.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
        put_json(&mut head, &method);
        head.extend_from_slice(br#","params":{"#);
        let prefix_len = head.len();
        head.extend_from_slice(br#""_meta":{"#);
        put_json(&mut head, keys::SUBSCRIPTION_ID);
        head.push(b':');
        let mut tail = Vec::with_capacity(16);
        put_entries(&mut tail, meta.iter());
        tail.push(b'}');
        put_entries(&mut tail, params.iter());
        tail.extend_from_slice(b"}}");
        SharedNotification {
            inner: Arc::new(Inner {
                method: method.into(),
                kind,
                head: head.into(),
                tail: tail.into(),
                prefix_len,
                meta_rest: !meta.is_empty(),
                legacy: OnceLock::new(),
            }),
        }
    }

    /// The notification method.
    pub fn method(&self) -> &str {
        &self.inner.method
    }

    /// The resource URI of a `notifications/resources/updated`.
    pub fn uri(&self) -> Option<&str> {
        match &self.inner.kind {
            Kind::ResourcesUpdated(uri) => Some(uri),
            _ => None,
        }
    }

    pub(crate) fn kind(&self) -> &Kind {
        &self.inner.kind
    }

    /// The text without the subscription id (and without `_meta` when that was
    /// its only key), as a 2025-era GET stream sends it: encoded once, on first
    /// use, for every legacy stream.
    pub(crate) fn legacy(&self) -> &Bytes {
        self.inner.legacy.get_or_init(|| {
            let inner = &*self.inner;
            let prefix = &inner.head[..inner.prefix_len];
            // tail = <,"k":v ...>} <,"p":v ...>}}
            let mut out = Vec::with_capacity(inner.head.len() + inner.tail.len());
            out.extend_from_slice(prefix);
            if inner.meta_rest {
                out.extend_from_slice(br#""_meta":{"#);
                out.extend_from_slice(inner.tail.get(1..).unwrap_or_default());
            } else {
                // Skip the `}` closing `_meta`, then the comma before the first
                // param, if any.
                let rest = inner.tail.get(1..).unwrap_or_default();
                out.extend_from_slice(rest.strip_prefix(b",").unwrap_or(rest));
            }
            out.into()
        })
    }

    /// The encoded text before the subscription id, and after it.
    pub(crate) fn parts(&self) -> (&Bytes, &Bytes) {
        (&self.inner.head, &self.inner.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spliced(shared: &SharedNotification, id: &str) -> Value {
        let (head, tail) = shared.parts();
        let text = [&head[..], id.as_bytes(), &tail[..]].concat();
        serde_json::from_slice(&text).expect("valid JSON")
    }

    #[test]
    fn a_notification_survives_serialization_for_another_node() {
        let mut params = Map::new();
        params.insert("uri".into(), json!("note://1"));
        params.insert("_meta".into(), json!({"trace": 7}));
        let shared = SharedNotification::new(Notification::new(methods::RESOURCES_UPDATED, params));
        let text = serde_json::to_string(std::slice::from_ref(&shared)).expect("serializes");
        let back: Vec<SharedNotification> = serde_json::from_str(&text).expect("deserializes");
        assert_eq!(back[0].uri(), Some("note://1"));
        assert_eq!(spliced(&back[0], "7"), spliced(&shared, "7"));
    }

    #[test]
    fn splicing_an_id_gives_the_same_json_as_encoding_whole() {
        let mut params = Map::new();
        params.insert("uri".into(), json!("a://x"));
        params.insert(
            "_meta".into(),
            json!({"trace": [1, 2], keys::SUBSCRIPTION_ID: "forged"}),
        );
        params.insert("extra".into(), json!({"k": "v\"q"}));
        let shared = SharedNotification::new(Notification::new(methods::RESOURCES_UPDATED, params));
        assert_eq!(shared.uri(), Some("a://x"));
        assert_eq!(
            spliced(&shared, "\"s-1\""),
            json!({"jsonrpc": "2.0", "method": methods::RESOURCES_UPDATED, "params": {
                "_meta": {keys::SUBSCRIPTION_ID: "s-1", "trace": [1, 2]},
                "uri": "a://x", "extra": {"k": "v\"q"}}})
        );
        let plain = SharedNotification::new(Notification::tools_list_changed());
        assert_eq!(
            spliced(&plain, "7"),
            json!({"jsonrpc": "2.0", "method": methods::TOOLS_LIST_CHANGED,
                   "params": {"_meta": {keys::SUBSCRIPTION_ID: 7}}})
        );
        assert_eq!(plain.kind(), &Kind::ToolsListChanged);
    }

    #[test]
    fn the_legacy_text_has_no_subscription_id() {
        let plain = SharedNotification::new(Notification::tools_list_changed());
        let v: Value = serde_json::from_slice(plain.legacy()).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "method": methods::TOOLS_LIST_CHANGED, "params": {}})
        );
        let updated = SharedNotification::new(Notification::resource_updated("a://x"));
        let v: Value = serde_json::from_slice(updated.legacy()).unwrap();
        assert_eq!(v["params"], json!({"uri": "a://x"}));
        let mut params = Map::new();
        params.insert("_meta".into(), json!({"trace": 1}));
        params.insert("uri".into(), json!("a://y"));
        let with_meta =
            SharedNotification::new(Notification::new(methods::RESOURCES_UPDATED, params));
        let v: Value = serde_json::from_slice(with_meta.legacy()).unwrap();
        assert_eq!(v["params"], json!({"_meta": {"trace": 1}, "uri": "a://y"}));
    }

    #[test]
    fn a_non_object_meta_is_replaced() {
        let mut params = Map::new();
        params.insert("_meta".into(), json!("nope"));
        let shared =
            SharedNotification::new(Notification::new(methods::TOOLS_LIST_CHANGED, params));
        assert_eq!(
            spliced(&shared, "1")["params"],
            json!({"_meta": {keys::SUBSCRIPTION_ID: 1}})
        );
    }
}
