//! [`SuiteBuilder`]: the settings of a [`Suite`] and the items it starts with.

use super::*;

/// Builds a [`Suite`].
///
/// Defaults: every cache hint `ttlMs: 0`, `public`; page size
/// [`DEFAULT_PAGE_SIZE`]; cursors live [`DEFAULT_CURSOR_TTL`], request states
/// [`DEFAULT_REQUEST_STATE_TTL`]; a random token key per suite.
pub struct SuiteBuilder<H> {
    info: Implementation,
    instructions: Option<String>,
    discover_cache: CacheHint,
    list_cache: CacheHint,
    tools_cache: Option<CacheHint>,
    prompts_cache: Option<CacheHint>,
    resources_cache: Option<CacheHint>,
    read_cache: CacheHint,
    page_size: usize,
    cursor_ttl: Duration,
    request_state_ttl: Duration,
    secret: Option<[u8; 32]>,
    keys: Option<SealingKeys>,
    max_spent: usize,
    spent_record: Option<Arc<dyn SpentRecord>>,
    logging: bool,
    catalog: Catalog,
    task_config: TaskConfig,
    shared_tasks: Option<tasks::SharedTasks>,
    #[cfg(feature = "skills")]
    skills: Option<skills::Skills>,
    apps: bool,
    handler: H,
}

impl Suite<NoSubscriptions> {
    /// Starts a suite for the server `info`.
    pub fn builder(info: Implementation) -> SuiteBuilder<NoSubscriptions> {
        SuiteBuilder {
            info,
            instructions: None,
            discover_cache: CacheHint::default(),
            list_cache: CacheHint::default(),
            tools_cache: None,
            prompts_cache: None,
            resources_cache: None,
            read_cache: CacheHint::default(),
            page_size: DEFAULT_PAGE_SIZE,
            cursor_ttl: DEFAULT_CURSOR_TTL,
            request_state_ttl: DEFAULT_REQUEST_STATE_TTL,
            secret: None,
            keys: None,
            max_spent: DEFAULT_MAX_SPENT_REQUEST_STATES,
            spent_record: None,
            logging: false,
            catalog: Catalog::new(),
            task_config: TaskConfig::default(),
            shared_tasks: None,
            #[cfg(feature = "skills")]
            skills: None,
            apps: false,
            handler: NoSubscriptions,
        }
    }
}

impl<H: SubscriptionHandler> SuiteBuilder<H> {
    /// `instructions` for `server/discover`.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Cache hint of `server/discover` (default `ttlMs: 0`, `public`).
    pub fn discover_cache(mut self, hint: CacheHint) -> Self {
        self.discover_cache = hint;
        self
    }

    /// Cache hint of the list results not set more precisely (default
    /// `ttlMs: 0`, `public`).
    pub fn list_cache(mut self, hint: CacheHint) -> Self {
        self.list_cache = hint;
        self
    }

    /// Cache hint of `tools/list` (default: [`SuiteBuilder::list_cache`]).
    pub fn tools_cache(mut self, hint: CacheHint) -> Self {
        self.tools_cache = Some(hint);
        self
    }

    /// Cache hint of `prompts/list` (default: [`SuiteBuilder::list_cache`]).
    pub fn prompts_cache(mut self, hint: CacheHint) -> Self {
        self.prompts_cache = Some(hint);
        self
    }

    /// Cache hint of `resources/list` and `resources/templates/list` for
    /// providers without their own hint (default: [`SuiteBuilder::list_cache`]).
    pub fn resources_cache(mut self, hint: CacheHint) -> Self {
        self.resources_cache = Some(hint);
        self
    }

    /// Cache hint of `resources/read` when neither the result nor its provider
    /// sets one (default `ttlMs: 0`, `public`).
    pub fn read_cache(mut self, hint: CacheHint) -> Self {
        self.read_cache = hint;
        self
    }

    /// Items per page of the four list methods (default [`DEFAULT_PAGE_SIZE`];
    /// at least 1).
    pub fn page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }

    /// How long a pagination cursor stays valid (default [`DEFAULT_CURSOR_TTL`]).
    pub fn cursor_ttl(mut self, ttl: Duration) -> Self {
        self.cursor_ttl = ttl;
        self
    }

    /// How long an MRTR `requestState` stays valid (default
    /// [`DEFAULT_REQUEST_STATE_TTL`]).
    pub fn request_state_ttl(mut self, ttl: Duration) -> Self {
        self.request_state_ttl = ttl;
        self
    }

    /// How many spent MRTR `requestState`s are remembered at once (default
    /// [`DEFAULT_MAX_SPENT_REQUEST_STATES`], about 3.3 MB). Each state is
    /// honoured once: it is remembered until it expires, and while this many
    /// unexpired states are remembered a further retry is refused with
    /// `-32603` / HTTP 429 "retry later" rather than forgetting one. The record
    /// is per process (see `docs/security.md`); unused with a
    /// [`SuiteBuilder::spent_record`].
    pub fn max_spent_request_states(mut self, max: usize) -> Self {
        self.max_spent = max.max(1);
        self
    }

    /// Records spent MRTR `requestState`s in `record` instead of this
    /// process's memory (default: in memory, see
    /// [`SuiteBuilder::max_spent_request_states`]). Nodes that share a
    /// [`SuiteBuilder::secret`] must share a record too, or a state spent on
    /// one node is honoured once more on each other node; `genmcp serve --bus
    /// redis://…` uses a Redis-backed one
    /// (`genmcp::suite::shared_spent::RedisSpentRecord`). When `record` fails,
    /// the retry is refused (`-32603`, see `docs/auth.md`).
    pub fn spent_record(mut self, record: Arc<dyn SpentRecord>) -> Self {
        self.spent_record = Some(record);
        self
    }

    /// Advertises `logging` (deprecated in 2026-07-28, still specified): say so
    /// when tools send `notifications/message` with `Channel::send_log` (which
    /// only ever sends when a request set `io.modelcontextprotocol/logLevel`).
    pub fn logging(mut self) -> Self {
        self.logging = true;
        self
    }

    /// The key that signs cursors and request states (default: 32 random bytes
    /// per suite). Give every replica of a multi-node deployment the same key.
    pub fn secret(mut self, key: [u8; 32]) -> Self {
        self.secret = Some(key);
        self
    }

    /// Seals with this live key set (several keys, one current: see
    /// [`KeySet`]), overriding [`SuiteBuilder::secret`]. Keep a clone to
    /// replace the set while the suite serves ([`SealingKeys::replace`], what
    /// `genmcp serve` does on `SIGHUP`); see `docs/auth.md` for the rotation.
    pub fn keys(mut self, keys: SealingKeys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Uses `catalog` (shared: changes made through any clone are served). Call
    /// it before adding items through the builder.
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Adds a tool to the catalog (see [`Catalog::add_tool`]).
    pub fn tool(self, tool: impl Tool) -> Self {
        self.catalog.add_tool(tool);
        self
    }

    /// Adds a tool, refusing one whose schema is invalid (see [`Catalog::try_add_tool`]).
    pub fn try_tool(self, tool: impl Tool) -> Result<Self, ToolError> {
        self.catalog.try_add_tool(tool)?;
        Ok(self)
    }

    /// Adds a prompt to the catalog.
    pub fn prompt(self, prompt: impl Prompt) -> Self {
        self.catalog.add_prompt(prompt);
        self
    }

    /// Adds a resource provider to the catalog.
    pub fn resources(self, provider: impl ResourceProvider) -> Self {
        self.catalog.add_resources(provider);
        self
    }

    /// Sets the catalog's completer.
    pub fn completer(self, completer: impl Completer) -> Self {
        self.catalog.set_completer(completer);
        self
    }

    /// Serves `skills` (the skills extension, SEP-2640): `skills/list`,
    /// `skills/get`, `resources/directory/read` when they declare
    /// `directoryRead`, their files as `skill://` resources of the catalog
    /// (so `resources` is advertised too), and the capability
    /// `extensions["io.modelcontextprotocol/skills"]`. Later changes to
    /// `skills` are served at once and told to listen streams as resource list
    /// changes. See `docs/skills.md`.
    #[cfg(feature = "skills")]
    #[cfg_attr(docsrs, doc(cfg(feature = "skills")))]
    pub fn skills(mut self, skills: skills::Skills) -> Self {
        self.skills = Some(skills);
        self
    }

    /// Serves MCP Apps views (`ui://` resources of the catalog, so
    /// `resources` is advertised too) and declares the extension
    /// `io.modelcontextprotocol/ui` (in `server/discover` and a 2025
    /// `initialize`). Name a view from a tool with
    /// [`ToolBuilder::ui`](crate::suite::ToolBuilder::ui). See `docs/apps.md`.
    pub fn apps(mut self, views: apps::UiResources) -> Self {
        self.catalog.add_resources(views);
        self.apps = true;
        self
    }

    /// Sets the subscription handler.
    pub fn subscriptions<H2: SubscriptionHandler>(self, handler: H2) -> SuiteBuilder<H2> {
        SuiteBuilder {
            info: self.info,
            instructions: self.instructions,
            discover_cache: self.discover_cache,
            list_cache: self.list_cache,
            tools_cache: self.tools_cache,
            prompts_cache: self.prompts_cache,
            resources_cache: self.resources_cache,
            read_cache: self.read_cache,
            page_size: self.page_size,
            cursor_ttl: self.cursor_ttl,
            request_state_ttl: self.request_state_ttl,
            secret: self.secret,
            keys: self.keys,
            max_spent: self.max_spent,
            spent_record: self.spent_record,
            logging: self.logging,
            catalog: self.catalog,
            task_config: self.task_config,
            shared_tasks: self.shared_tasks,
            #[cfg(feature = "skills")]
            skills: self.skills,
            apps: self.apps,
            handler,
        }
    }

    /// The lifetime and bounds of tasks (default [`TaskConfig::default`]; see
    /// `docs/tasks.md`). Tasks are served when a tool declares
    /// [`TaskSupport`] other than `Forbidden`.
    pub fn tasks(mut self, config: TaskConfig) -> Self {
        self.task_config = config;
        self
    }

    /// Shares tasks with the other nodes of a Redis `bus`: records copied to
    /// the bus's Redis server, readable, updatable and cancellable from any
    /// node, status on every node's listen streams, and a lease per node
    /// ([`TaskConfig::lease`]) so a lost node's tasks end `failed` (see
    /// `docs/tasks.md`). Nothing changes for an embedded bus (one node).
    /// `genmcp serve --bus redis://…` does this.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn shared_tasks(
        mut self,
        bus: &crate::pubsub::Bus<crate::mux::SharedNotification>,
    ) -> Self {
        if let Some(keys) = bus.once() {
            self.shared_tasks = Some(tasks::SharedTasks::new(keys, bus.clone()));
        }
        self
    }

    /// The suite.
    pub fn build(self) -> Suite<H> {
        let sealer = Sealer::with_keys(match (self.keys, self.secret) {
            (Some(keys), _) => keys,
            (None, Some(key)) => SealingKeys::new(KeySet::new(key)),
            (None, None) => SealingKeys::new(KeySet::new(Sealer::random_key())),
        });
        #[cfg(feature = "skills")]
        if let Some(skills) = &self.skills {
            skills.attach(self.catalog.downgrade());
            self.catalog
                .add_resources(skills::SkillsProvider(skills.clone()));
        }
        if !self.apps {
            for tool in self.catalog.tools() {
                let d = tool.descriptor();
                if apps::has_view(&d.extra) {
                    tracing::warn!(tool = %d.name,
                        "this tool names an MCP Apps view but the suite serves none \
                         (SuiteBuilder::apps): the extension io.modelcontextprotocol/ui is not declared");
                }
            }
        }
        let mut stamp = Map::new();
        stamp.insert(
            keys::SERVER_INFO.into(),
            serde_json::to_value(&self.info).unwrap_or(Value::Null),
        );
        Suite {
            inner: Arc::new(Inner {
                info: self.info,
                stamp,
                instructions: self.instructions,
                discover_cache: self.discover_cache,
                list_cache: self.list_cache,
                tools_cache: self.tools_cache,
                prompts_cache: self.prompts_cache,
                resources_cache: self.resources_cache,
                read_cache: self.read_cache,
                page_size: self.page_size,
                cursor_ttl: self.cursor_ttl,
                request_state_ttl: self.request_state_ttl,
                sealer,
                spent: Spender::new(match self.spent_record {
                    Some(record) => Store::Shared(record),
                    None => Store::Local(SpentStates::new(self.max_spent)),
                }),
                logging: self.logging,
                catalog: self.catalog,
                tasks: {
                    let tasks = tasks::Tasks::new(self.task_config);
                    if let Some(shared) = self.shared_tasks {
                        tasks.share(shared);
                    }
                    tasks
                },
                #[cfg(feature = "skills")]
                skills: self.skills,
                apps: self.apps,
            }),
            handler: Arc::new(self.handler),
        }
    }
}
