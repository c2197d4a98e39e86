//! The 2026-07-28 types the runtime reasons about: the subscription filter, the
//! capability objects and the cache hints.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::McpError;

/// Longest resource URI accepted in `notifications.resourceSubscriptions`, in
/// bytes. A listen stream keeps its URIs for as long as it is open; a longer one
/// is `-32602`.
pub const MAX_RESOURCE_URI_LEN: usize = 2 * 1024;

/// The longest task id a listen's `notifications.taskIds` may name, in bytes
/// (genmcp's ids are 32 hex digits; longer ones cannot be known).
pub const MAX_TASK_ID_LEN: usize = 256;

/// `uris` without duplicates, first occurrence first, in O(n).
fn dedup<'a>(uris: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for uri in uris {
        if seen.insert(uri.as_str()) {
            out.push(uri.clone());
        }
    }
    out
}

/// What a `subscriptions/listen` request asks for, and (in the acknowledgement) what
/// the server agreed to honour. `false` and empty fields are left out on the wire.
///
/// ```
/// use genmcp::protocol::SubscriptionFilter;
/// let f = SubscriptionFilter { tools_list_changed: true, ..Default::default() };
/// assert_eq!(serde_json::to_string(&f).unwrap(), r#"{"toolsListChanged":true}"#);
/// ```
///
/// Build one with struct update syntax (`..Default::default()`): fields added in
/// later revisions come with a default, so that stays source-compatible.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tools_list_changed: bool,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub prompts_list_changed: bool,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub resources_list_changed: bool,
    /// `notifications/resources/updated` for these URIs (exact match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_subscriptions: Vec<String>,
    /// `notifications/tasks` for these task ids (the tasks extension). The
    /// runtime, not the subscription handler, decides which are honoured: the
    /// caller's own, known tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_ids: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl SubscriptionFilter {
    /// A filter for tool list changes only.
    pub fn tools() -> Self {
        SubscriptionFilter {
            tools_list_changed: true,
            ..Default::default()
        }
    }

    /// Reads `params.notifications` of a listen request. Missing or malformed is
    /// `-32602`, and so is a resource URI longer than [`MAX_RESOURCE_URI_LEN`];
    /// unknown fields are ignored here (the caller looks at extensions). Duplicate
    /// URIs are dropped (first occurrence kept).
    pub fn from_params(params: &Map<String, Value>) -> Result<SubscriptionFilter, McpError> {
        let value = params.get("notifications").ok_or_else(|| {
            McpError::invalid_params(
                "Invalid params: subscriptions/listen requires params.notifications",
            )
        })?;
        let obj = value.as_object().ok_or_else(|| {
            McpError::invalid_params("Invalid params: params.notifications must be an object")
        })?;
        let flag = |name: &str| -> Result<bool, McpError> {
            match obj.get(name) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(McpError::invalid_params(format!(
                    "Invalid params: notifications.{name} must be a boolean"
                ))),
            }
        };
        let not_uris = || {
            McpError::invalid_params(
                "Invalid params: notifications.resourceSubscriptions must be an array of URI strings",
            )
        };
        let resource_subscriptions = match obj.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut seen: HashSet<&str> = HashSet::with_capacity(items.len());
                let mut uris = Vec::with_capacity(items.len());
                for item in items {
                    let uri = item.as_str().ok_or_else(not_uris)?;
                    if uri.len() > MAX_RESOURCE_URI_LEN {
                        return Err(McpError::invalid_params(format!(
                            "Invalid params: a resource URI in notifications.resourceSubscriptions is {} bytes long; at most {MAX_RESOURCE_URI_LEN} are allowed",
                            uri.len()
                        )));
                    }
                    if seen.insert(uri) {
                        uris.push(uri.to_owned());
                    }
                }
                uris
            }
            Some(_) => return Err(not_uris()),
        };
        let task_ids = match obj.get("taskIds") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut ids = Vec::with_capacity(items.len());
                for item in items {
                    let id = item.as_str().filter(|id| id.len() <= MAX_TASK_ID_LEN);
                    let id = id.ok_or_else(|| {
                        McpError::invalid_params(format!(
                            "Invalid params: notifications.taskIds must be an array of task id strings of at most {MAX_TASK_ID_LEN} bytes"
                        ))
                    })?;
                    ids.push(id.to_owned());
                }
                ids.sort_unstable();
                ids.dedup();
                ids
            }
            Some(_) => {
                return Err(McpError::invalid_params(
                    "Invalid params: notifications.taskIds must be an array of task id strings",
                ));
            }
        };
        Ok(SubscriptionFilter {
            tools_list_changed: flag("toolsListChanged")?,
            prompts_list_changed: flag("promptsListChanged")?,
            resources_list_changed: flag("resourcesListChanged")?,
            resource_subscriptions,
            task_ids,
        })
    }

    /// Whether nothing is subscribed.
    pub fn is_empty(&self) -> bool {
        !self.tools_list_changed
            && !self.prompts_list_changed
            && !self.resources_list_changed
            && self.resource_subscriptions.is_empty()
            && self.task_ids.is_empty()
    }

    /// The part of `self` that is also in `other` (URIs keep `self`'s order, without
    /// duplicates).
    pub fn intersect(&self, other: &SubscriptionFilter) -> SubscriptionFilter {
        let theirs: HashSet<&str> = other
            .resource_subscriptions
            .iter()
            .map(String::as_str)
            .collect();
        let uris = dedup(
            self.resource_subscriptions
                .iter()
                .filter(|u| theirs.contains(u.as_str())),
        );
        SubscriptionFilter {
            tools_list_changed: self.tools_list_changed && other.tools_list_changed,
            prompts_list_changed: self.prompts_list_changed && other.prompts_list_changed,
            resources_list_changed: self.resources_list_changed && other.resources_list_changed,
            resource_subscriptions: uris,
            task_ids: {
                let theirs: HashSet<&str> = other.task_ids.iter().map(String::as_str).collect();
                dedup(
                    self.task_ids
                        .iter()
                        .filter(|id| theirs.contains(id.as_str())),
                )
            },
        }
    }

    /// The part of `self` the advertised capabilities allow (task ids are not
    /// the handler's to advertise: they are kept).
    pub fn allowed_by(&self, caps: &SubscriptionCapabilities) -> SubscriptionFilter {
        let uris = if caps.resources_updated {
            dedup(self.resource_subscriptions.iter())
        } else {
            Vec::new()
        };
        SubscriptionFilter {
            tools_list_changed: self.tools_list_changed && caps.tools_list_changed,
            prompts_list_changed: self.prompts_list_changed && caps.prompts_list_changed,
            resources_list_changed: self.resources_list_changed && caps.resources_list_changed,
            resource_subscriptions: uris,
            task_ids: self.task_ids.clone(),
        }
    }

    /// Whether a notification of `method` (and, for `resources/updated`, `uri`) falls
    /// inside this filter. URIs match exactly (a linear scan of at most
    /// `Limits::max_resource_uris` short strings).
    pub fn allows(&self, method: &str, uri: Option<&str>) -> bool {
        use super::methods;
        match method {
            methods::TOOLS_LIST_CHANGED => self.tools_list_changed,
            methods::PROMPTS_LIST_CHANGED => self.prompts_list_changed,
            methods::RESOURCES_LIST_CHANGED => self.resources_list_changed,
            methods::RESOURCES_UPDATED => {
                uri.is_some_and(|u| self.resource_subscriptions.iter().any(|s| s == u))
            }
            _ => false,
        }
    }
}

/// Which subscription notification kinds a handler can emit; folded into the
/// capabilities `server/discover` advertises. All `false` by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriptionCapabilities {
    /// Advertised as `tools.listChanged`.
    pub tools_list_changed: bool,
    /// Advertised as `prompts.listChanged`.
    pub prompts_list_changed: bool,
    /// Advertised as `resources.listChanged`.
    pub resources_list_changed: bool,
    /// Advertised as `resources.subscribe`.
    pub resources_updated: bool,
}

impl SubscriptionCapabilities {
    /// Every kind.
    pub fn all() -> Self {
        SubscriptionCapabilities {
            tools_list_changed: true,
            prompts_list_changed: true,
            resources_list_changed: true,
            resources_updated: true,
        }
    }

    /// No kind.
    pub fn none() -> Self {
        Self::default()
    }

    /// With `tools_list_changed` set.
    pub fn with_tools_list_changed(mut self, on: bool) -> Self {
        self.tools_list_changed = on;
        self
    }

    /// With `prompts_list_changed` set.
    pub fn with_prompts_list_changed(mut self, on: bool) -> Self {
        self.prompts_list_changed = on;
        self
    }

    /// With `resources_list_changed` set.
    pub fn with_resources_list_changed(mut self, on: bool) -> Self {
        self.resources_list_changed = on;
        self
    }

    /// With `resources_updated` set.
    pub fn with_resources_updated(mut self, on: bool) -> Self {
        self.resources_updated = on;
        self
    }

    /// Whether any kind is advertised.
    pub fn any(&self) -> bool {
        self.tools_list_changed
            || self.prompts_list_changed
            || self.resources_list_changed
            || self.resources_updated
    }
}

/// `tools` / `prompts` capability object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListChangedCapability {
    /// `listChanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
}

/// `resources` capability object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ResourcesCapability {
    /// `subscribe`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// `listChanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
}

/// The server capabilities advertised by `server/discover`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerCapabilities {
    /// `tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListChangedCapability>,
    /// `prompts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListChangedCapability>,
    /// `resources`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// `completions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completions: Option<Map<String, Value>>,
    /// `logging` (deprecated in 2026-07-28, still specified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logging: Option<Map<String, Value>>,
    /// `experimental`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experimental: Option<Map<String, Value>>,
    /// `extensions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
}

impl ServerCapabilities {
    /// Folds the subscription kinds a handler emits into the capability flags: each
    /// flag set forces its block to be present, even for an empty catalog.
    pub fn fold_subscriptions(&mut self, subs: &SubscriptionCapabilities) {
        if subs.tools_list_changed {
            self.tools.get_or_insert_with(Default::default).list_changed = Some(true);
        }
        if subs.prompts_list_changed {
            self.prompts
                .get_or_insert_with(Default::default)
                .list_changed = Some(true);
        }
        if subs.resources_list_changed {
            self.resources
                .get_or_insert_with(Default::default)
                .list_changed = Some(true);
        }
        if subs.resources_updated {
            self.resources
                .get_or_insert_with(Default::default)
                .subscribe = Some(true);
        }
    }
}

/// `cacheScope`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// No user-specific data: shared caches may serve it across principals.
    #[default]
    Public,
    /// Reusable within the same authorization context only.
    Private,
}

/// `ttlMs` + `cacheScope` on cacheable results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheHint {
    /// `ttlMs`, milliseconds a client may reuse the result.
    pub ttl_ms: u64,
    /// `cacheScope`.
    pub scope: CacheScope,
}

impl Default for CacheHint {
    /// `ttlMs: 0` (immediately stale), `cacheScope: "public"`: the safe default for
    /// lists that may change at run time.
    fn default() -> Self {
        CacheHint {
            ttl_ms: 0,
            scope: CacheScope::Public,
        }
    }
}

impl CacheHint {
    /// A hint with the given TTL and scope.
    pub fn new(ttl_ms: u64, scope: CacheScope) -> Self {
        CacheHint { ttl_ms, scope }
    }

    /// Writes `ttlMs` and `cacheScope` into a result object.
    pub fn apply(&self, result: &mut Map<String, Value>) {
        result.insert("ttlMs".into(), Value::from(self.ttl_ms));
        result.insert(
            "cacheScope".into(),
            Value::from(match self.scope {
                CacheScope::Public => "public",
                CacheScope::Private => "private",
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filter_parses_and_rejects() {
        let p = json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["a://1"]}});
        let f = SubscriptionFilter::from_params(p.as_object().unwrap()).unwrap();
        assert!(f.tools_list_changed && !f.prompts_list_changed);
        assert_eq!(f.resource_subscriptions, vec!["a://1"]);
        for bad in [
            json!({}),
            json!({"notifications": 3}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
        ] {
            assert_eq!(
                SubscriptionFilter::from_params(bad.as_object().unwrap())
                    .unwrap_err()
                    .code(),
                -32602
            );
        }
    }

    #[test]
    fn uris_are_capped_and_deduplicated() {
        let long = "u".repeat(MAX_RESOURCE_URI_LEN + 1);
        let p = json!({"notifications": {"resourceSubscriptions": ["a", long]}});
        assert_eq!(
            SubscriptionFilter::from_params(p.as_object().unwrap())
                .unwrap_err()
                .code(),
            -32602
        );
        let p = json!({"notifications": {"resourceSubscriptions": ["b", "a", "b", "a", "c"]}});
        let f = SubscriptionFilter::from_params(p.as_object().unwrap()).unwrap();
        assert_eq!(f.resource_subscriptions, vec!["b", "a", "c"]);
    }

    #[test]
    fn clamp_never_widens() {
        let requested = SubscriptionFilter {
            tools_list_changed: true,
            resource_subscriptions: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        let handler = SubscriptionFilter {
            tools_list_changed: true,
            prompts_list_changed: true,
            resource_subscriptions: vec!["b".into(), "c".into()],
            ..Default::default()
        };
        let caps = SubscriptionCapabilities::all();
        let honoured = handler.intersect(&requested).allowed_by(&caps);
        assert_eq!(
            honoured,
            SubscriptionFilter {
                tools_list_changed: true,
                resource_subscriptions: vec!["b".into()],
                ..Default::default()
            }
        );
        let no_tools =
            requested.allowed_by(&SubscriptionCapabilities::none().with_resources_updated(true));
        assert!(!no_tools.tools_list_changed);
        assert_eq!(
            serde_json::to_value(SubscriptionFilter::default()).unwrap(),
            json!({})
        );
    }

    #[test]
    fn folding_forces_blocks() {
        let mut caps = ServerCapabilities::default();
        caps.fold_subscriptions(
            &SubscriptionCapabilities::none()
                .with_tools_list_changed(true)
                .with_resources_updated(true),
        );
        assert_eq!(
            serde_json::to_value(&caps).unwrap(),
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}})
        );
    }
}
