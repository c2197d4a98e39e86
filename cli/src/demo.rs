//! The notes demo served by `genmcp serve`: an in-memory notes store whose tools
//! publish change events on an embedded bus, a subscription handler that turns
//! them into notifications, and a `burst` tool for throughput measurement.

use serde_json::{Value, json};

pub use super::notes::Notes;
use genmcp::mux::{Channel, Principal, SharedNotification};
use genmcp::protocol::McpError;
use genmcp::protocol::{
    Implementation, Notification, SubscriptionCapabilities, SubscriptionFilter,
};
use genmcp::pubsub::{Bus, BusError, BusSubscription, Inbox};
use genmcp::subscription::{
    Flow, Subscribe, SubscribeCx, SubscriptionHandler, UriChange, UriChanged,
};
use genmcp::suite::{
    BoxFuture, CallToolResult, Catalog, ReadOutcome, Resource, ResourceContents, ResourceProvider,
    ResourceRead, Suite, TaskConfig, ToolBuilder,
};

/// Bus topics of the notes app. Each carries notifications encoded once
/// ([`SharedNotification`]), so a publish fans out without per-stream encoding.
pub mod topics {
    /// `notifications/tools/list_changed`.
    pub const TOOLS: &str = "tools";
    /// `notifications/prompts/list_changed`.
    pub const PROMPTS: &str = "prompts";
    /// `notifications/resources/list_changed` (a note was added or deleted).
    pub const NOTES: &str = "notes";
    /// `notifications/resources/updated` for one note.
    pub const NOTE_UPDATES: &str = "note-updates";
}

fn tools_changed() -> SharedNotification {
    Notification::tools_list_changed().into()
}

fn notes_changed() -> SharedNotification {
    Notification::resources_list_changed().into()
}

fn note_updated(uri: &str) -> SharedNotification {
    Notification::resource_updated(uri).into()
}

/// The subscription handler of the notes app: joins the bus topics the client
/// asked for and forwards each event as the matching notification.
///
/// With authentication on (`genmcp serve --auth-tokens` / `--jwks`), an
/// authenticated principal without the `admin` scope is narrowed to
/// `toolsListChanged` (the seed's downgrade example); admins, and every
/// client of a server without authentication, get what they asked for.
#[derive(Clone)]
pub struct NotesSubscriptions {
    bus: Bus<SharedNotification>,
}

impl NotesSubscriptions {
    /// A handler fed by `bus`.
    pub fn new(bus: Bus<SharedNotification>) -> Self {
        NotesSubscriptions { bus }
    }
}

/// The bus topics one notes stream has joined.
pub struct NotesStreamState {
    /// Held for the stream's life: dropping one leaves its topic.
    _subs: Vec<BusSubscription<SharedNotification>>,
    /// [`topics::NOTE_UPDATES`], joined once any note is subscribed.
    updates: Option<BusSubscription<SharedNotification>>,
}

/// Whether the principal of `assigns` is narrowed to `toolsListChanged`.
fn narrowed(assigns: &genmcp::mux::Assigns) -> bool {
    assigns.get::<Principal>().is_some_and(|p| !p.is_admin())
}

impl SubscriptionHandler for NotesSubscriptions {
    type Message = SharedNotification;
    type State = NotesStreamState;

    fn subscribe(
        &self,
        filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, SharedNotification>,
    ) -> Subscribe<Self::State> {
        let narrowed = narrowed(cx.assigns()).then(|| SubscriptionFilter {
            tools_list_changed: filter.tools_list_changed,
            ..Default::default()
        });
        let filter = narrowed.as_ref().unwrap_or(filter);
        let mut subs = Vec::new();
        let wanted = [
            (filter.tools_list_changed, topics::TOOLS),
            (filter.prompts_list_changed, topics::PROMPTS),
            (filter.resources_list_changed, topics::NOTES),
        ];
        for (on, topic) in wanted {
            if on {
                subs.push(self.bus.subscribe(topic, cx.inbox()));
            }
        }
        let updates = (!filter.resource_subscriptions.is_empty())
            .then(|| self.bus.subscribe(topics::NOTE_UPDATES, cx.inbox()));
        let state = NotesStreamState {
            _subs: subs,
            updates,
        };
        match narrowed {
            Some(honoured) => Subscribe::Narrow(honoured, state),
            None => Subscribe::Accept(state),
        }
    }

    /// A 2025 session's `resources/subscribe`: joins the note-updates topic
    /// once (the channel matches each update's URI); a narrowed principal is
    /// declined, as its `subscribe` would narrow the URI away.
    fn change_uri(
        &self,
        change: UriChange<'_>,
        channel: &Channel,
        inbox: &Inbox<SharedNotification>,
        state: &mut Self::State,
    ) -> UriChanged {
        let UriChange::Subscribed(_) = change else {
            return UriChanged::Applied;
        };
        if narrowed(channel.assigns()) {
            return UriChanged::Declined;
        }
        if state.updates.is_none() {
            state.updates = Some(self.bus.subscribe(topics::NOTE_UPDATES, inbox.clone()));
        }
        UriChanged::Applied
    }

    fn handle_message(
        &self,
        event: SharedNotification,
        channel: &Channel,
        _state: &mut Self::State,
    ) -> Flow {
        // Updates for notes this stream did not subscribe to are skipped; a
        // refused send (client gone, overflow) is noticed by the runtime.
        if channel.honours(&event) {
            let _ = channel.send_shared(event);
        }
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none()
            .with_tools_list_changed(true)
            .with_resources_list_changed(true)
            .with_resources_updated(true)
    }
}

/// The notes, served as resources (`resources/list`, `resources/read`).
impl ResourceProvider for Notes {
    fn prefix(&self) -> &str {
        "note://"
    }

    fn list(&self, _channel: &Channel) -> BoxFuture<Result<Vec<Resource>, McpError>> {
        let notes = self.clone();
        Box::pin(async move {
            Ok(notes
                .all()
                .await?
                .into_iter()
                .map(|(uri, _)| {
                    let name = uri.trim_start_matches("note://").to_owned();
                    Resource::new(uri, format!("note {name}")).mime_type("text/plain")
                })
                .collect())
        })
    }

    fn read(&self, read: ResourceRead) -> BoxFuture<Result<ReadOutcome, McpError>> {
        let notes = self.clone();
        Box::pin(async move {
            Ok(match notes.get(&read.uri).await? {
                Some(text) => ResourceContents::text(read.uri, "text/plain", text).into(),
                None => ReadOutcome::NotFound,
            })
        })
    }
}

/// Largest `count` the `burst` tool accepts.
pub const MAX_BURST: u64 = 1_000_000;

fn text_arg(args: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Events per message to the other nodes when `burst` publishes on a Redis bus.
const BURST_CHUNK: usize = 64;

/// A tool answer for a publish the other nodes did not get: a short stable
/// reason for the client ([`BusError::public_message`]); the details (the
/// Redis address, the OS error) go to the log only.
fn bus_failed(e: &BusError) -> CallToolResult {
    tracing::warn!(error = %e, "demo: an event did not reach the other nodes");
    CallToolResult::error(format!(
        "the change was made on this node only: {}",
        e.public_message()
    ))
}

/// The demo suite and the bus its tools publish on: an embedded bus and a
/// random sealing key. See [`suite_with`].
pub fn suite() -> (Suite<NotesSubscriptions>, Bus<SharedNotification>) {
    suite_with(Bus::new(), None)
}

/// The demo suite publishing on `bus` (embedded, or shared with other nodes
/// through Redis: [`Bus::redis`]), sealing `requestState`s and cursors with
/// `secret` (`None`: a random key of this process). On a Redis bus, spent
/// `requestState`s are recorded in Redis too
/// ([`genmcp::suite::shared_spent::RedisSpentRecord`]). A tool whose event could not
/// reach the other nodes says so in an error result.
pub fn suite_with(
    bus: Bus<SharedNotification>,
    secret: Option<[u8; 32]>,
) -> (Suite<NotesSubscriptions>, Bus<SharedNotification>) {
    suite_with_tasks(bus, secret, TaskConfig::default())
}

/// [`suite_with`] with the lifetime and bounds of tasks (`export_notes`
/// runs as one).
pub fn suite_with_tasks(
    bus: Bus<SharedNotification>,
    secret: Option<[u8; 32]>,
    tasks: TaskConfig,
) -> (Suite<NotesSubscriptions>, Bus<SharedNotification>) {
    suite_with_skills(bus, secret, tasks, None)
}

/// [`suite_with_tasks`] serving `skills` too (`genmcp serve --skills DIR`).
pub fn suite_with_skills(
    bus: Bus<SharedNotification>,
    secret: Option<[u8; 32]>,
    tasks: TaskConfig,
    skills: Option<genmcp::suite::Skills>,
) -> (Suite<NotesSubscriptions>, Bus<SharedNotification>) {
    suite_with_options(bus, secret, tasks, skills, false)
}

/// [`suite_with_skills`], and with `apps` the MCP Apps example: the
/// `show_notes` tool and its `ui://notes/board` view
/// ([`crate::demo_app`]; `genmcp serve --apps`).
pub fn suite_with_options(
    bus: Bus<SharedNotification>,
    secret: Option<[u8; 32]>,
    tasks: TaskConfig,
    skills: Option<genmcp::suite::Skills>,
    apps: bool,
) -> (Suite<NotesSubscriptions>, Bus<SharedNotification>) {
    // On a Redis bus every node shares the notes.
    let notes = bus.once().map(Notes::shared).unwrap_or_default();
    let catalog = Catalog::new();
    catalog.add_resources(notes.clone());
    catalog.add_tool(super::demo_export::export_tool(notes.clone()));
    if apps {
        catalog.add_tool(super::demo_app::show_notes_tool(notes.clone()));
    }

    let (n, b) = (notes.clone(), bus.clone());
    catalog.add_tool(
        ToolBuilder::new("add_note")
            .description(
                "Stores a note and returns its URI; `uri` updates an existing note instead",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}, "uri": {"type": "string"}},
                "required": ["text"]
            }))
            .handler(move |call| {
                let (notes, bus) = (n.clone(), b.clone());
                async move {
                    let text = text_arg(&call.arguments, "text").unwrap_or_default();
                    match text_arg(&call.arguments, "uri") {
                        Some(uri) if notes.update(&uri, &text).await? => {
                            if let Err((_, e)) =
                                bus.try_publish(topics::NOTE_UPDATES, note_updated(&uri))
                            {
                                return Ok(bus_failed(&e).into());
                            }
                            Ok(CallToolResult::text(uri).into())
                        }
                        Some(uri) => Ok(CallToolResult::error(format!("no note {uri}")).into()),
                        None => {
                            let uri = notes.add(&text).await?;
                            let sent = bus
                                .try_publish(topics::NOTES, notes_changed())
                                .and(bus.try_publish(topics::NOTE_UPDATES, note_updated(&uri)));
                            if let Err((_, e)) = sent {
                                return Ok(bus_failed(&e).into());
                            }
                            Ok(CallToolResult::text(uri).into())
                        }
                    }
                }
            }),
    );

    let (n, b) = (notes.clone(), bus.clone());
    catalog.add_tool(
        ToolBuilder::new("delete_note")
            .description("Deletes the note at `uri`")
            .input_schema(json!({
                "type": "object",
                "properties": {"uri": {"type": "string"}},
                "required": ["uri"]
            }))
            .handler(move |call| {
                let (notes, bus) = (n.clone(), b.clone());
                async move {
                    let uri = text_arg(&call.arguments, "uri").unwrap_or_default();
                    if !notes.delete(&uri).await? {
                        return Ok(CallToolResult::error(format!("no note {uri}")).into());
                    }
                    let sent = bus
                        .try_publish(topics::NOTES, notes_changed())
                        .and(bus.try_publish(topics::NOTE_UPDATES, note_updated(&uri)));
                    if let Err((_, e)) = sent {
                        return Ok(bus_failed(&e).into());
                    }
                    Ok(CallToolResult::text(format!("deleted {uri}")).into())
                }
            }),
    );

    // A weak handle: the tool lives in the catalog it changes, and a strong one
    // would keep the catalog alive forever.
    let (c, b) = (catalog.downgrade(), bus.clone());
    catalog.add_tool(
        ToolBuilder::new("toggle_extra_tool")
            .description("Adds or removes the tool `extra_tool`, changing the tool list")
            .handler(move |_call| {
                let (catalog, bus) = (c.upgrade(), b.clone());
                async move {
                    let Some(catalog) = catalog else {
                        return Ok(CallToolResult::error("the server is shutting down").into());
                    };
                    let added = if catalog.remove_tool("extra_tool") {
                        false
                    } else {
                        catalog.add_tool(
                            ToolBuilder::new("extra_tool")
                                .description("Exists only while toggled on")
                                .handler(|_call| async {
                                    Ok(CallToolResult::text("extra").into())
                                }),
                        );
                        true
                    };
                    if let Err((_, e)) = bus.try_publish(topics::TOOLS, tools_changed()) {
                        return Ok(bus_failed(&e).into());
                    }
                    Ok(CallToolResult::text(if added {
                        "extra_tool added"
                    } else {
                        "extra_tool removed"
                    })
                    .into())
                }
            }),
    );

    catalog.add_tool(
        ToolBuilder::new("whoami")
            .description(
                "The authenticated principal of this request: {\"principal\": subject or null, \"admin\": bool}",
            )
            .handler(|call| async move {
                let who = call.channel.assigns().get::<Principal>();
                let summary = json!({
                    "principal": who.map(Principal::subject),
                    "admin": who.is_some_and(Principal::is_admin),
                });
                Ok(CallToolResult::text(summary.to_string())
                    .with_structured(summary)
                    .into())
            }),
    );

    let b = bus.clone();
    catalog.add_tool(
        ToolBuilder::new("burst")
            .description(
                "Throughput probe: publishes `count` tools/list_changed events (or, with kind \
                 \"resources\" and `uri`, resources/updated for that URI) to every listening \
                 stream, each in order, and returns once all were handed over",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0, "maximum": MAX_BURST},
                    "kind": {"type": "string", "enum": ["tools", "resources"]},
                    "uri": {"type": "string"}
                },
                "required": ["count"]
            }))
            .handler(move |call| {
                let bus = b.clone();
                async move {
                    let count = call
                        .arguments
                        .get("count")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    if count > MAX_BURST {
                        return Ok(CallToolResult::error(format!(
                            "count must be at most {MAX_BURST}"
                        ))
                        .into());
                    }
                    let (topic, event) = match text_arg(&call.arguments, "kind").as_deref() {
                        Some("resources") => match text_arg(&call.arguments, "uri") {
                            Some(uri) => (topics::NOTE_UPDATES, note_updated(&uri)),
                            None => {
                                return Ok(
                                    CallToolResult::error("kind \"resources\" needs a uri").into()
                                );
                            }
                        },
                        _ => (topics::TOOLS, tools_changed()),
                    };
                    let inboxes = bus.subscribers(topic);
                    let streams = inboxes.len();
                    let local = futures_util::future::join_all(inboxes.into_iter().map(|inbox| {
                        let event = event.clone();
                        async move {
                            for _ in 0..count {
                                if inbox.send(event.clone()).await.is_err() {
                                    break;
                                }
                            }
                        }
                    }));
                    // The other nodes (a Redis bus): the same events, in order,
                    // a chunk per message, waiting for room in the queue.
                    let remote = async {
                        if !bus.is_distributed() {
                            return Ok(());
                        }
                        let chunk = vec![event.clone(); BURST_CHUNK.min(count as usize)];
                        let mut left = count as usize;
                        while left > 0 {
                            let n = left.min(BURST_CHUNK);
                            bus.publish_remote_wait(topic, &chunk[..n]).await?;
                            left -= n;
                        }
                        Ok::<(), BusError>(())
                    };
                    let (_, remote) = futures_util::future::join(local, remote).await;
                    if let Err(e) = remote {
                        return Ok(bus_failed(&e).into());
                    }
                    let summary = json!({"streams": streams, "count": count});
                    Ok(CallToolResult::text(summary.to_string())
                        .with_structured(summary)
                        .into())
                }
            }),
    );

    let mut builder = Suite::builder(Implementation::new(
        "genmcp-notes",
        env!("CARGO_PKG_VERSION"),
    ))
    .instructions(
        "A notes demo: add_note, delete_note, toggle_extra_tool, whoami; listen for changes.",
    )
    .catalog(catalog)
    .tasks(tasks)
    .subscriptions(NotesSubscriptions::new(bus.clone()));
    if let Some(secret) = secret {
        builder = builder.secret(secret);
    }
    if let Some(skills) = skills {
        // The demo's streams hear resource list changes on its bus.
        let b = bus.clone();
        skills.on_change(move || {
            let _ = b.try_publish(topics::NOTES, notes_changed());
        });
        builder = builder.skills(skills);
    }
    if apps {
        builder = builder.apps(super::demo_app::views());
    }
    if let Some(record) = genmcp::suite::shared_spent::RedisSpentRecord::for_bus(&bus) {
        builder = builder.spent_record(record);
    }
    let suite = builder.shared_tasks(&bus).build();
    (suite, bus)
}
