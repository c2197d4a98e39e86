//! `initialize`: version negotiation and the result built from the suite's
//! `server/discover`.

use serde_json::{Map, Value};

use super::LEGACY_VERSIONS;
use crate::mux::Channel;
use crate::protocol::methods;
use crate::subscription::SubscriptionHandler;
use crate::suite::Suite;

/// The extensions a 2025 session is served, and so declared in its
/// `initialize` result: skills (its methods are routed on 2025 sessions) and
/// MCP Apps (no methods). The tasks extension is 2026-07-28 only.
pub(crate) const LEGACY_EXTENSIONS: &[&str] = &[
    "io.modelcontextprotocol/skills",
    "io.modelcontextprotocol/ui",
];

/// The version a 2025 server answers `initialize` with: the requested one if
/// served, otherwise the newest (2025-11-25 rules; 2026-07-28 is not
/// negotiated through `initialize`).
pub(crate) fn negotiate(requested: &str) -> &'static str {
    LEGACY_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LEGACY_VERSIONS[0])
}

/// The `initialize` result for `version`: `capabilities` and `instructions`
/// from the suite's `server/discover` as `channel` sees it (without
/// `extensions`), `serverInfo` from the suite.
pub(crate) async fn initialize_result<H: SubscriptionHandler>(
    suite: &Suite<H>,
    version: &str,
    channel: Channel,
) -> Map<String, Value> {
    let discover = suite
        .call(methods::DISCOVER, Map::new(), channel)
        .await
        .unwrap_or_default();
    let mut result = Map::new();
    result.insert("protocolVersion".into(), Value::from(version));
    let mut capabilities = match discover.get("capabilities") {
        Some(Value::Object(c)) => c.clone(),
        _ => Map::new(),
    };
    if let Some(Value::Object(extensions)) = capabilities.remove("extensions") {
        let kept: Map<String, Value> = extensions
            .into_iter()
            .filter(|(k, _)| LEGACY_EXTENSIONS.contains(&k.as_str()))
            .collect();
        if !kept.is_empty() {
            capabilities.insert("extensions".into(), Value::Object(kept));
        }
    }
    result.insert("capabilities".into(), Value::Object(capabilities));
    result.insert(
        "serverInfo".into(),
        serde_json::to_value(suite.info()).unwrap_or(Value::Null),
    );
    if let Some(instructions) = discover.get("instructions") {
        result.insert("instructions".into(), instructions.clone());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_version_is_echoed_and_any_other_gets_the_newest() {
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-11-25"), "2025-11-25");
        assert_eq!(negotiate("2026-07-28"), "2025-11-25");
        assert_eq!(negotiate("2024-11-05"), "2025-11-25");
    }
}
