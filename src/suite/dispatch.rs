//! What a suite answers before any catalog item runs: capabilities, routing,
//! `Mcp-Param-*` headers, `server/discover`, and the dispatch of unary requests.

use super::*;

impl<H: SubscriptionHandler> Suite<H> {
    /// The server implementation.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The subscription handler.
    pub fn handler(&self) -> Arc<H> {
        self.handler.clone()
    }

    /// Stamps `_meta["io.modelcontextprotocol/serverInfo"]` on a result (creating
    /// `_meta` if needed).
    pub fn stamp_result(&self, result: &mut Map<String, Value>) {
        let stamp = &self.inner.stamp;
        match result.get_mut("_meta") {
            Some(Value::Object(meta)) => meta.extend(stamp.clone()),
            Some(_) => {}
            // The common case: a copy of the `_meta` made once.
            None => {
                result.insert("_meta".into(), Value::Object(stamp.clone()));
            }
        }
    }

    /// The handler's subscription capabilities for the request on `channel`. A
    /// panicking handler advertises nothing (and the panic is logged), so one bad
    /// callback cannot take down a transport.
    pub fn subscription_capabilities(
        &self,
        channel: &Channel,
    ) -> crate::protocol::SubscriptionCapabilities {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.handler.subscription_capabilities(channel)
        }))
        .unwrap_or_else(|_| {
            tracing::error!("subscription_capabilities panicked; advertising nothing");
            crate::protocol::SubscriptionCapabilities::none()
        })
    }

    /// The capabilities advertised to the request on `channel`: a block for each
    /// kind the catalog serves, folded with the handler's subscription capabilities.
    pub fn capabilities(&self, channel: &Channel) -> ServerCapabilities {
        let catalog = &self.inner.catalog;
        let mut caps = ServerCapabilities::default();
        if catalog.has_tools() {
            caps.tools = Some(Default::default());
        }
        if catalog.has_prompts() {
            caps.prompts = Some(Default::default());
        }
        if catalog.has_resources() {
            caps.resources = Some(Default::default());
        }
        if catalog.has_completions() {
            caps.completions = Some(Map::new());
        }
        if self.inner.logging {
            caps.logging = Some(Map::new());
        }
        if self.serves_tasks() {
            caps.extensions
                .get_or_insert_with(Map::new)
                .insert(tasks::EXTENSION.into(), json!({}));
        }
        if self.inner.apps {
            caps.extensions
                .get_or_insert_with(Map::new)
                .insert(apps::EXTENSION.into(), json!({}));
        }
        #[cfg(feature = "skills")]
        if let Some(skills) = &self.inner.skills {
            caps.resources.get_or_insert_with(Default::default);
            caps.extensions
                .get_or_insert_with(Map::new)
                .insert(skills::EXTENSION.into(), skills.capability());
        }
        caps.fold_subscriptions(&self.subscription_capabilities(channel));
        caps
    }

    /// Whether the tasks extension is served: some tool may run as a task.
    pub fn serves_tasks(&self) -> bool {
        self.inner
            .catalog
            .tools()
            .iter()
            .any(|t| t.task_support() != TaskSupport::Forbidden)
    }

    /// Counts of the task store: records kept, unfinished, result bytes.
    pub fn task_stats(&self) -> tasks::TaskStats {
        self.inner.tasks.stats()
    }

    /// Server shutdown: running tasks get `deadline` to finish; those still
    /// running then end `failed` ("server shutting down").
    pub async fn drain_tasks(&self, deadline: Duration) {
        self.inner.tasks.drain(deadline).await;
    }

    /// The task supervisor (cheap to clone), for transports that drain it.
    pub(crate) fn task_supervisor(&self) -> tasks::Tasks {
        self.inner.tasks.clone()
    }

    /// Keeps, of a listen's `notifications.taskIds`, the ids the request on
    /// `channel` may watch: its owner's own known tasks, on this node or
    /// (shared through Redis) another (another principal's look unknown, so
    /// they are left out without a word), and none when no tool runs as a
    /// task.
    pub(crate) async fn watchable_task_ids(
        &self,
        ids: &[String],
        channel: &Channel,
    ) -> tasks::Watchable {
        if ids.is_empty() || !self.serves_tasks() {
            return tasks::Watchable::default();
        }
        self.inner
            .tasks
            .watchable_any(ids, &tasks::owner_of(channel))
            .await
    }

    /// Whether the unary `method` is served to the request on `channel`: exactly
    /// the kinds [`Suite::capabilities`] advertises to it (a kind the handler
    /// advertises list changes for is served even while the catalog holds none of
    /// it, with empty lists), so discover and routing never disagree.
    pub(super) fn serves(&self, method: &str, channel: &Channel) -> bool {
        if method == methods::DISCOVER {
            return true;
        }
        if skills_call::is_skills_method(method) {
            return self.serves_skills_method(method);
        }
        let Some(kind) = Kind::of(method) else {
            return tasks::is_task_method(method) && self.serves_tasks();
        };
        // A kind the catalog holds is advertised whatever the handler adds
        // (it only adds): served without building the capabilities, which
        // this runs on for every request.
        let catalog = &self.inner.catalog;
        let in_catalog = match kind {
            Kind::Tools => catalog.has_tools(),
            Kind::Prompts => catalog.has_prompts(),
            Kind::Resources => catalog.has_resources(),
            Kind::Completions => catalog.has_completions(),
        };
        if in_catalog {
            return true;
        }
        let caps = self.capabilities(channel);
        match kind {
            Kind::Tools => caps.tools.is_some(),
            Kind::Prompts => caps.prompts.is_some(),
            Kind::Resources => caps.resources.is_some(),
            Kind::Completions => caps.completions.is_some(),
        }
    }

    /// How `method` is served to the request on `channel`, or `-32601` when it is
    /// unknown, removed, or gated by a capability this server does not advertise.
    pub fn route(&self, method: &str, channel: &Channel) -> Result<Route, McpError> {
        if method == methods::LISTEN {
            return if self.subscription_capabilities(channel).any() || self.serves_tasks() {
                Ok(Route::Listen)
            } else {
                Err(McpError::MethodNotFound(method.to_owned()))
            };
        }
        if self.serves(method, channel) {
            Ok(Route::Unary)
        } else {
            Err(McpError::MethodNotFound(method.to_owned()))
        }
    }

    /// The `Mcp-Param-*` headers a `tools/call` must carry: one per `x-mcp-header`
    /// argument of the tool present in the body with a string, integer or boolean
    /// value (absent and `null` arguments need no header; other types are left to
    /// argument validation). Other methods and unknown tools need none.
    pub fn param_headers(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<Vec<ParamHeader>, McpError> {
        if method != methods::TOOLS_CALL {
            return Ok(Vec::new());
        }
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Ok(Vec::new());
        };
        let Some(entry) = self.inner.catalog.tool_entry(name) else {
            return Ok(Vec::new());
        };
        let Ok(schema) = &entry.schema else {
            return Ok(Vec::new());
        };
        let Some(arguments) = params.get("arguments").and_then(Value::as_object) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for param in &schema.headers {
            let value = match schemas::lookup(arguments, &param.path) {
                Some(v @ (Value::String(_) | Value::Bool(_))) => v.clone(),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
                _ => continue,
            };
            out.push(ParamHeader {
                header: format!("Mcp-Param-{}", param.name),
                value,
            });
        }
        Ok(out)
    }

    /// Answers one unary request. The result carries `resultType` and server info.
    pub fn call(
        &self,
        method: &str,
        params: Map<String, Value>,
        channel: Channel,
    ) -> BoxFuture<Result<Map<String, Value>, McpError>> {
        let suite = self.clone();
        let method = method.to_owned();
        Box::pin(async move {
            if !suite.serves(&method, &channel) {
                return Err(McpError::MethodNotFound(method));
            }
            let mut result = match method.as_str() {
                methods::DISCOVER => suite.discover(&channel),
                methods::TOOLS_LIST => suite.list_tools(&params)?,
                methods::TOOLS_CALL => suite.call_tool(params, channel).await?,
                methods::PROMPTS_LIST => suite.list_prompts(&params)?,
                methods::PROMPTS_GET => suite.get_prompt(params, channel).await?,
                methods::RESOURCES_LIST => suite.list_resources(&params, &channel).await?,
                methods::RESOURCES_TEMPLATES_LIST => suite.list_templates(&params)?,
                methods::RESOURCES_READ => suite.read_resource(params, channel).await?,
                methods::COMPLETE => suite.complete(params, channel).await?,
                m if skills_call::is_skills_method(m) => suite.answer_skills(m, &params)?,
                m if tasks::is_task_method(m) => {
                    tasks::answer(&suite.inner.tasks, m, &params, &channel).await?
                }
                _ => return Err(McpError::MethodNotFound(method)),
            };
            if !result.contains_key("resultType") {
                result.insert("resultType".into(), Value::from("complete"));
            }
            suite.stamp_result(&mut result);
            Ok(result)
        })
    }

    pub(super) fn discover(&self, channel: &Channel) -> Map<String, Value> {
        let mut result = Map::new();
        result.insert("resultType".into(), Value::from("complete"));
        result.insert(
            "supportedVersions".into(),
            Value::from(SUPPORTED_VERSIONS.to_vec()),
        );
        result.insert(
            "capabilities".into(),
            serde_json::to_value(self.capabilities(channel)).unwrap_or_default(),
        );
        if let Some(text) = &self.inner.instructions {
            result.insert("instructions".into(), Value::from(text.clone()));
        }
        self.inner.discover_cache.apply(&mut result);
        result
    }
}

/// The capability a unary method of the catalog is served under.
#[derive(Clone, Copy)]
enum Kind {
    Tools,
    Prompts,
    Resources,
    Completions,
}

impl Kind {
    fn of(method: &str) -> Option<Kind> {
        Some(match method {
            methods::TOOLS_LIST | methods::TOOLS_CALL => Kind::Tools,
            methods::PROMPTS_LIST | methods::PROMPTS_GET => Kind::Prompts,
            methods::RESOURCES_LIST
            | methods::RESOURCES_TEMPLATES_LIST
            | methods::RESOURCES_READ => Kind::Resources,
            methods::COMPLETE => Kind::Completions,
            _ => return None,
        })
    }
}
