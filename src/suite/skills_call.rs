//! The skills extension's methods in the suite: routing (`skills/list`,
//! `skills/get`, `resources/directory/read` only when advertised) and the
//! answers, paginated like the other lists.

use super::*;

/// Whether `method` is one the skills extension defines.
pub(super) fn is_skills_method(method: &str) -> bool {
    matches!(
        method,
        "skills/list" | "skills/get" | "resources/directory/read"
    )
}

impl<H: SubscriptionHandler> Suite<H> {
    /// Whether the skills extension's `method` is served: `skills/list` and
    /// `skills/get` when the suite has skills, `resources/directory/read` when
    /// they declare `directoryRead`.
    pub(super) fn serves_skills_method(&self, method: &str) -> bool {
        #[cfg(feature = "skills")]
        if let Some(skills) = &self.inner.skills {
            return match method {
                skills::DIRECTORY_READ => skills.serves_directory_read(),
                skills::LIST | skills::GET => true,
                _ => false,
            };
        }
        let _ = method;
        false
    }

    /// Answers one of the skills extension's methods (routing checked it is served).
    pub(super) fn answer_skills(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<Map<String, Value>, McpError> {
        #[cfg(feature = "skills")]
        if let Some(skills) = &self.inner.skills {
            let hint = skills.cache_hint();
            return match method {
                skills::LIST => {
                    let hint = hint.unwrap_or(self.inner.list_cache);
                    let snapshot = skills.snapshot();
                    self.page_of("skills", "skills", snapshot.entries(), params, hint)
                }
                skills::GET => {
                    let mut result = Map::new();
                    result.insert("skill".into(), skills.get(params)?);
                    hint.unwrap_or(self.inner.read_cache).apply(&mut result);
                    Ok(result)
                }
                skills::DIRECTORY_READ => {
                    let (dir, snapshot) = skills.directory(params)?;
                    let mut result = self.page_of(
                        &format!("dir:{dir}"),
                        "resources",
                        snapshot.children(&dir),
                        params,
                        hint.unwrap_or(self.inner.list_cache),
                    )?;
                    // A directory read is a paginated result, not a cacheable one.
                    result.remove("ttlMs");
                    result.remove("cacheScope");
                    Ok(result)
                }
                _ => Err(McpError::MethodNotFound(method.to_owned())),
            };
        }
        let _ = params;
        Err(McpError::MethodNotFound(method.to_owned()))
    }
}
