//! Pagination of the four list methods with sealed cursors.

use super::*;

impl<H: SubscriptionHandler> Suite<H> {
    /// The page of `items` the request's `cursor` points at, as `key` plus
    /// `nextCursor` when more follow. Cursors are sealed (offset, list kind,
    /// expiry); a tampered, foreign, expired or non-string cursor is `-32602`
    /// "Invalid cursor". A cursor past the end (the list shrank) gives an empty
    /// last page.
    pub(super) fn page(
        &self,
        kind: &str,
        key: &str,
        items: Vec<Value>,
        params: &Map<String, Value>,
        hint: CacheHint,
    ) -> Result<Map<String, Value>, McpError> {
        self.page_of(kind, key, &items, params, hint)
    }

    /// [`Suite::page`] of items held elsewhere: only the page is cloned.
    /// Every page of one list has the first page's `cacheScope` (sealed in
    /// its cursor), whatever the catalog gained meanwhile.
    pub(super) fn page_of(
        &self,
        kind: &str,
        key: &str,
        items: &[Value],
        params: &Map<String, Value>,
        mut hint: CacheHint,
    ) -> Result<Map<String, Value>, McpError> {
        let offset = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(token)) => {
                let payload = self
                    .inner
                    .sealer
                    .open(purpose::CURSOR, token)
                    .ok_or_else(invalid_cursor)?;
                if payload.get("k").and_then(Value::as_str) != Some(kind) {
                    return Err(invalid_cursor());
                }
                match payload.get("exp").and_then(Value::as_u64) {
                    Some(exp) if !seal::expired(exp) => {}
                    _ => return Err(invalid_cursor()),
                }
                if let Some(scope) = payload.get("s") {
                    hint.scope =
                        serde_json::from_value(scope.clone()).map_err(|_| invalid_cursor())?;
                }
                payload
                    .get("o")
                    .and_then(Value::as_u64)
                    .and_then(|o| usize::try_from(o).ok())
                    .ok_or_else(invalid_cursor)?
            }
            Some(_) => return Err(invalid_cursor()),
        };
        let total = items.len();
        let end = offset.saturating_add(self.inner.page_size).min(total);
        let page: Vec<Value> = items
            .iter()
            .skip(offset)
            .take(end.saturating_sub(offset))
            .cloned()
            .collect();
        let mut result = Map::new();
        result.insert(key.into(), Value::Array(page));
        if end < total {
            let payload = json!({
                "k": kind,
                "o": end,
                "s": hint.scope,
                "exp": seal::expiry(self.inner.cursor_ttl),
            });
            result.insert(
                "nextCursor".into(),
                Value::from(self.inner.sealer.seal(purpose::CURSOR, &payload)),
            );
        }
        hint.apply(&mut result);
        Ok(result)
    }
}
