//! A subscription notification encoded once for every stream that receives it.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use serde_json::value::RawValue;
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

/// Read back from its JSON-RPC text (what a Redis bus receives from another
/// node) with `SharedNotification::from_wire`: its values' text is copied
/// as it came, no JSON tree is built, nothing is encoded twice.
impl<'de> serde::Deserialize<'de> for SharedNotification {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        SharedNotification::from_wire(raw.get()).map_err(serde::de::Error::custom)
    }
}

/// Appends `value` as compact JSON. Serializing JSON values cannot fail.
fn put_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Which filter entry `method` needs; `param` reads a string parameter.
fn kind_of(method: &str, param: impl Fn(&str) -> Option<String>) -> Kind {
    match method {
        methods::TOOLS_LIST_CHANGED => Kind::ToolsListChanged,
        methods::PROMPTS_LIST_CHANGED => Kind::PromptsListChanged,
        methods::RESOURCES_LIST_CHANGED => Kind::ResourcesListChanged,
        methods::RESOURCES_UPDATED => match param("uri") {
            Some(uri) => Kind::ResourcesUpdated(uri.into()),
            None => Kind::Other,
        },
        methods::TASK_STATUS => match param("taskId") {
            Some(id) => Kind::TaskStatus(id.into()),
            None => Kind::Other,
        },
        _ => Kind::Other,
    }
}

/// A value to write into the encoded text: a JSON tree, or text already
/// encoded (read from another node, spliced as is).
#[derive(Clone, Copy)]
enum Val<'a> {
    Tree(&'a Value),
    Raw(&'a RawValue),
}

/// Appends `,"key":value` for each entry.
fn put_vals<'a>(out: &mut Vec<u8>, entries: impl Iterator<Item = (&'a str, Val<'a>)>) {
    for (key, value) in entries {
        out.push(b',');
        put_json(out, key);
        out.push(b':');
        match value {
            Val::Tree(v) => put_json(out, v),
            Val::Raw(raw) => out.extend_from_slice(raw.get().as_bytes()),
        }
    }
}

/// One JSON object's entries in order, keeping the first position and the last
/// value of a repeated key (as a `serde_json::Map` reads them).
#[derive(Default)]
struct RawEntries<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawEntries<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visit<'a> {
            type Value = RawEntries<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, &'a RawValue)> = Vec::new();
                let mut index: std::collections::HashMap<String, usize> = Default::default();
                while let Some((key, value)) = map.next_entry::<String, &'a RawValue>()? {
                    match index.get(&key) {
                        Some(&at) => entries[at].1 = value,
                        None => {
                            index.insert(key.clone(), entries.len());
                            entries.push((key, value));
                        }
                    }
                }
                Ok(RawEntries(entries))
            }
        }
        deserializer.deserialize_map(Visit(std::marker::PhantomData))
    }
}

impl RawEntries<'_> {
    fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// A string value's text, if `raw` is a JSON string.
fn raw_str(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|r| serde_json::from_str::<String>(r.get()).ok())
}

impl SharedNotification {
    /// Encodes `notification` once.
    pub fn new(notification: Notification) -> Self {
        let Notification { method, mut params } = notification;
        let kind = kind_of(&method, |key| {
            params.get(key).and_then(Value::as_str).map(str::to_owned)
        });
        let meta = match params.shift_remove("_meta") {
            Some(Value::Object(mut meta)) => {
                meta.shift_remove(keys::SUBSCRIPTION_ID);
                meta
            }
            // `_meta` must be an object; anything else cannot carry the id.
            _ => Map::new(),
        };
        Self::assemble(
            method.into(),
            kind,
            meta.iter().map(|(k, v)| (k.as_str(), Val::Tree(v))),
            !meta.is_empty(),
            params.iter().map(|(k, v)| (k.as_str(), Val::Tree(v))),
        )
    }

    /// Reads one notification's JSON-RPC text as the Redis bus carries it
    /// (its `Serialize` form) and encodes it for the streams of this node,
    /// copying its values' text as it came: no JSON tree is built, nothing
    /// is encoded twice. The same result as building it from the parsed
    /// notification.
    pub(crate) fn from_wire(text: &str) -> Result<Self, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Wire<'a> {
            method: String,
            #[serde(default, borrow)]
            params: RawEntries<'a>,
        }
        let Wire { method, params } = serde_json::from_str(text)?;
        let kind = kind_of(&method, |key| raw_str(params.get(key)));
        let meta = match params.get("_meta") {
            // `_meta` must be an object; anything else cannot carry the id.
            Some(raw) => serde_json::from_str::<RawEntries<'_>>(raw.get()).unwrap_or_default(),
            None => RawEntries::default(),
        };
        let meta: Vec<_> = meta
            .0
            .iter()
            .filter(|(k, _)| k != keys::SUBSCRIPTION_ID)
            .map(|(k, v)| (k.as_str(), Val::Raw(v)))
            .collect();
        Ok(Self::assemble(
            method.into(),
            kind,
            meta.iter().copied(),
            !meta.is_empty(),
            params
                .0
                .iter()
                .filter(|(k, _)| k != "_meta")
                .map(|(k, v)| (k.as_str(), Val::Raw(v))),
        ))
    }

    /// The head (up to the subscription id) and tail (after it) of the text.
    fn assemble<'a>(
        method: Box<str>,
        kind: Kind,
        meta: impl Iterator<Item = (&'a str, Val<'a>)>,
        meta_rest: bool,
        params: impl Iterator<Item = (&'a str, Val<'a>)>,
    ) -> Self {
        let mut head = Vec::with_capacity(96 + method.len());
        head.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
        put_json(&mut head, &*method);
        head.extend_from_slice(br#","params":{"#);
        let prefix_len = head.len();
        head.extend_from_slice(br#""_meta":{"#);
        put_json(&mut head, keys::SUBSCRIPTION_ID);
        head.push(b':');
        let mut tail = Vec::with_capacity(16);
        put_vals(&mut tail, meta);
        tail.push(b'}');
        put_vals(&mut tail, params);
        tail.extend_from_slice(b"}}");
        SharedNotification {
            inner: Arc::new(Inner {
                method,
                kind,
                head: head.into(),
                tail: tail.into(),
                prefix_len,
                meta_rest,
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

    /// The notification of `text` parsed into a tree, then encoded.
    fn from_tree(text: &str) -> Result<SharedNotification, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Wire {
            method: String,
            #[serde(default)]
            params: Map<String, Value>,
        }
        let wire: Wire = serde_json::from_str(text)?;
        Ok(SharedNotification::new(Notification::new(
            wire.method,
            wire.params,
        )))
    }

    #[test]
    fn read_from_the_wire_it_is_what_parsing_and_encoding_gives() {
        let texts = [
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://\"x\"","_meta":{"trace":[1,2],"io.modelcontextprotocol/subscriptionId":"forged"},"extra":{"k":"v"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            r#"{"method":"notifications/tasks","params":{"taskId":"t1","a":1,"a":2,"_meta":"nope","b":null}}"#,
            r#"{"method":"notifications/resources/updated","params":{"uri":7}}"#,
        ];
        for text in texts {
            let fast: SharedNotification = serde_json::from_str(text).expect("deserializes");
            let slow = from_tree(text).expect("parses");
            assert_eq!(fast.parts(), slow.parts(), "{text}");
            assert_eq!(fast.kind(), slow.kind(), "{text}");
            assert_eq!(fast.legacy(), slow.legacy(), "{text}");
            assert_eq!(fast.method(), slow.method());
        }
        for bad in [
            "[]",
            r#"{"params":{}}"#,
            r#"{"method":"m","params":[1]}"#,
            "{",
        ] {
            assert!(from_tree(bad).is_err(), "{bad}");
            assert!(
                serde_json::from_str::<SharedNotification>(bad).is_err(),
                "{bad}"
            );
        }
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
