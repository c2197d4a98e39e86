//! `prompts/list`, `prompts/get`, the resource methods and `completion/complete`.

use super::*;

impl<H: SubscriptionHandler> Suite<H> {
    // ---- prompts -------------------------------------------------------------

    pub(super) fn list_prompts(
        &self,
        params: &Map<String, Value>,
    ) -> Result<Map<String, Value>, McpError> {
        let prompts: Vec<Value> = self
            .inner
            .catalog
            .prompts()
            .iter()
            .map(|p| p.descriptor().to_json())
            .collect();
        let hint = self.inner.prompts_cache.unwrap_or(self.inner.list_cache);
        self.page("prompts", "prompts", prompts, params, hint)
    }

    pub(super) async fn get_prompt(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let Some(Value::String(name)) = params.get("name") else {
            return Err(McpError::invalid_params(
                "Invalid params: prompts/get requires a string name",
            ));
        };
        let prompt = self.inner.catalog.prompt(name).ok_or_else(|| {
            McpError::invalid_params_with(format!("Unknown prompt: {name}"), json!({"name": name}))
        })?;
        let arguments = prompts::check_arguments(prompt.descriptor(), &params)?;
        let binding = Binding::new(methods::PROMPTS_GET, name, &json!(arguments))
            .by(channel.assigns().get::<Principal>());
        let retry = self.retry(&params, &binding).await?;
        let get = PromptGet {
            arguments,
            channel: channel.clone(),
            input_responses: retry.input_responses,
            request_state: retry.request_state,
        };
        match prompt.get(get).await? {
            PromptOutcome::Complete(result) => Ok(result.into_map()),
            PromptOutcome::InputRequired(round) => self.input_required(round, &channel, &binding),
        }
    }

    // ---- resources -----------------------------------------------------------

    /// The list hint over every provider: the smallest TTL, `private` if any is.
    pub(super) fn resources_hint(&self, providers: &[Arc<dyn ResourceProvider>]) -> CacheHint {
        let fallback = self.inner.resources_cache.unwrap_or(self.inner.list_cache);
        let mut hints = providers.iter().map(|p| p.cache().unwrap_or(fallback));
        let Some(first) = hints.next() else {
            return fallback;
        };
        hints.fold(first, |a, b| CacheHint {
            ttl_ms: a.ttl_ms.min(b.ttl_ms),
            scope: if a.scope == CacheScope::Private || b.scope == CacheScope::Private {
                CacheScope::Private
            } else {
                CacheScope::Public
            },
        })
    }

    pub(super) async fn list_resources(
        &self,
        params: &Map<String, Value>,
        channel: &Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let providers = self.inner.catalog.resource_providers();
        let mut resources = Vec::new();
        for provider in &providers {
            resources.extend(provider.list(channel).await?.iter().map(Resource::to_json));
        }
        let hint = self.resources_hint(&providers);
        self.page("resources", "resources", resources, params, hint)
    }

    pub(super) fn list_templates(
        &self,
        params: &Map<String, Value>,
    ) -> Result<Map<String, Value>, McpError> {
        let providers = self.inner.catalog.resource_providers();
        let templates: Vec<Value> = providers
            .iter()
            .flat_map(|p| p.templates())
            .map(|t| t.to_json())
            .collect();
        let hint = self.resources_hint(&providers);
        self.page("templates", "resourceTemplates", templates, params, hint)
    }

    pub(super) async fn read_resource(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let Some(Value::String(uri)) = params.get("uri") else {
            return Err(McpError::invalid_params(
                "Invalid params: resources/read requires a string uri",
            ));
        };
        let binding = Binding::new(methods::RESOURCES_READ, uri, &json!({}))
            .by(channel.assigns().get::<Principal>());
        let retry = self.retry(&params, &binding).await?;
        let mut providers: Vec<_> = self
            .inner
            .catalog
            .resource_providers()
            .into_iter()
            .filter(|p| uri.starts_with(p.prefix()))
            .collect();
        providers.sort_by_key(|p| std::cmp::Reverse(p.prefix().len()));
        for provider in providers {
            let read = ResourceRead {
                uri: uri.clone(),
                variables: Map::new(),
                channel: channel.clone(),
                input_responses: retry.input_responses.clone(),
                request_state: retry.request_state.clone(),
            };
            match provider.read(read).await? {
                ReadOutcome::NotFound => continue,
                ReadOutcome::Complete(r) if r.contents.is_empty() => continue,
                ReadOutcome::Complete(r) => {
                    let mut result = Map::new();
                    result.insert(
                        "contents".into(),
                        serde_json::to_value(&r.contents).unwrap_or_default(),
                    );
                    let hint = if retry.is_retry() {
                        NO_CACHE
                    } else {
                        r.cache
                            .or(provider.cache())
                            .unwrap_or(self.inner.read_cache)
                    };
                    hint.apply(&mut result);
                    return Ok(result);
                }
                ReadOutcome::InputRequired(round) => {
                    return self.input_required(round, &channel, &binding);
                }
            }
        }
        Err(not_found(uri))
    }

    // ---- completion ----------------------------------------------------------

    pub(super) async fn complete(
        &self,
        params: Map<String, Value>,
        channel: Channel,
    ) -> Result<Map<String, Value>, McpError> {
        let catalog = &self.inner.catalog;
        let completer = catalog
            .completer()
            .ok_or_else(|| McpError::MethodNotFound(methods::COMPLETE.into()))?;
        let (reference, argument, value, context) = completions::parse_request(&params)?;
        match &reference {
            CompletionRef::Prompt(name) => {
                let prompt = catalog.prompt(name).ok_or_else(|| {
                    McpError::invalid_params_with(
                        format!("Unknown prompt: {name}"),
                        json!({"name": name}),
                    )
                })?;
                if !prompt
                    .descriptor()
                    .arguments
                    .iter()
                    .any(|a| a.name == argument)
                {
                    return Err(McpError::invalid_params_with(
                        format!("Invalid params: prompt {name} has no argument {argument}"),
                        json!({"argument": argument}),
                    ));
                }
            }
            CompletionRef::Resource(uri) => {
                let template = catalog
                    .resource_providers()
                    .iter()
                    .flat_map(|p| p.templates())
                    .find(|t| t.uri_template == *uri)
                    .ok_or_else(|| {
                        McpError::invalid_params_with(
                            format!("Invalid params: no resource template {uri}"),
                            json!({"uri": uri}),
                        )
                    })?;
                if !template.variables().contains(&argument.as_str()) {
                    return Err(McpError::invalid_params_with(
                        format!("Invalid params: template {uri} has no variable {argument}"),
                        json!({"argument": argument}),
                    ));
                }
            }
        }
        let completion = completer
            .complete(CompletionRequest {
                reference,
                argument,
                value,
                context,
                channel,
            })
            .await?;
        let mut result = Map::new();
        result.insert("completion".into(), completion.into_json());
        Ok(result)
    }
}
