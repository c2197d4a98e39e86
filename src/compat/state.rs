//! What a 2025 session sets at run time, whatever carries it: its
//! `logging/setLevel` level and its `resources/subscribe` URIs (bounded).

use std::collections::BTreeSet;

use crate::protocol::{LogLevel, McpError};

/// The run-time state of one 2025 session.
#[derive(Clone, Debug, Default)]
pub(crate) struct SessionState {
    /// The `logging/setLevel` level.
    pub(crate) log_level: Option<LogLevel>,
    /// The `resources/subscribe` URIs, sorted.
    uris: BTreeSet<String>,
}

impl SessionState {
    /// The subscribed URIs, sorted.
    pub(crate) fn uris(&self) -> Vec<String> {
        self.uris.iter().cloned().collect()
    }

    /// How many URIs are subscribed.
    pub(crate) fn uri_count(&self) -> usize {
        self.uris.len()
    }

    /// Whether `uri` may be added: `Ok(false)` when it is there already,
    /// `-32602` when the set holds `max_uris` already.
    pub(crate) fn can_add(&self, uri: &str, max_uris: usize) -> Result<bool, McpError> {
        if self.uris.contains(uri) {
            return Ok(false);
        }
        if self.uris.len() >= max_uris {
            return Err(McpError::invalid_params(format!(
                "Invalid params: a session subscribes to at most {max_uris} resources"
            )));
        }
        Ok(true)
    }

    /// Drops every URI; returns how many there were.
    pub(crate) fn clear_uris(&mut self) -> usize {
        std::mem::take(&mut self.uris).len()
    }

    /// Adds (`subscribe`) or removes a URI; at most `max_uris` (`-32602` past
    /// it). Returns whether the set changed.
    pub(crate) fn change_uri(
        &mut self,
        uri: &str,
        subscribe: bool,
        max_uris: usize,
    ) -> Result<bool, McpError> {
        if !subscribe {
            return Ok(self.uris.remove(uri));
        }
        if !self.can_add(uri, max_uris)? {
            return Ok(false);
        }
        Ok(self.uris.insert(uri.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribed_uris_are_a_bounded_set() {
        let mut s = SessionState::default();
        assert!(s.change_uri("a://x", true, 1).unwrap());
        assert!(!s.change_uri("a://x", true, 1).unwrap());
        assert!(s.change_uri("a://y", true, 1).is_err());
        assert!(!s.change_uri("a://y", false, 1).unwrap());
        assert!(s.change_uri("a://x", false, 1).unwrap());
        assert!(s.uris().is_empty());
    }
}
