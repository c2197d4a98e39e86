//! A scripted subscription handler for the final-frame tests: each bus message
//! tells the stream(s) it names what to do in one `handle_message` callback
//! (send a burst and continue, stop or panic; label a frame with another
//! stream's id; hand a clone of the channel to a background thread). Listen
//! ids starting with `attach` or `self` are fed [`FED`] events by an attached
//! stream or by `notify_self`. Two tools: `wait` (answers once released, see
//! [`Record::release`]) and `label` (sends a custom notification whose `_meta`
//! carries the subscription id given in its `label` argument).
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use genmcp::mux::SharedNotification;
use genmcp::prelude::*;
use serde_json::{Map, Value, json};

/// What ends a burst callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    Continue,
    Stop,
    Panic,
}

/// A bus message (topic "all"). `to: None` addresses every stream.
#[derive(Clone, Debug)]
pub enum Cmd {
    /// Sends `n` `tools/list_changed` (with `_meta.seq` = 0..n and a padding of
    /// `pad` bytes), ignoring refusals (which are recorded), then `then`.
    Burst {
        to: Option<RequestId>,
        n: usize,
        pad: usize,
        then: Then,
    },
    /// The stream `from` sends `tools/list_changed` labelled with `label` as its
    /// subscription id, once through `send_notification` (`seq` 0) and once
    /// through `send_shared` (`seq` 1).
    Forge { from: RequestId, label: Value },
    /// The stream `to` spawns a thread that keeps a clone of its channel and sends
    /// `resources/updated` for `bg://0` .. `bg://n-1` from there.
    Background { to: RequestId, n: usize, pad: usize },
    /// One `tools/list_changed` with `_meta.seq` = `seq` (what attached streams
    /// and `notify_self` feed).
    Seq { seq: usize, pad: usize },
}

/// Events fed to a stream by an attached stream or by `notify_self`.
pub const FED: usize = 100;
/// Padding of each fed event: more than the test pipes buffer.
pub const FED_PAD: usize = 300;

fn fed() -> impl Iterator<Item = Cmd> {
    (0..FED).map(|seq| Cmd::Seq { seq, pad: FED_PAD })
}

/// What the handler saw.
#[derive(Default)]
pub struct Record {
    pub subscribed: Mutex<Vec<RequestId>>,
    pub closed: Mutex<Vec<RequestId>>,
    pub refused: Mutex<Vec<(RequestId, ChannelError)>>,
    pub handled: AtomicUsize,
    /// Successful sends of the background threads.
    pub background_sent: AtomicUsize,
    /// Refused sends of the background threads.
    pub background_refused: Mutex<Vec<ChannelError>>,
    /// Releases one waiting `wait` tool call (`notify_one`).
    pub release: tokio::sync::Notify,
}

impl Record {
    pub fn closed(&self) -> Vec<RequestId> {
        self.closed.lock().unwrap().clone()
    }

    pub fn closed_count(&self, id: &RequestId) -> usize {
        self.closed
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == id)
            .count()
    }

    pub fn subscribed(&self) -> Vec<RequestId> {
        self.subscribed.lock().unwrap().clone()
    }

    pub fn refused_overflow(&self, id: &RequestId) -> bool {
        self.refused
            .lock()
            .unwrap()
            .iter()
            .any(|(r, e)| r == id && *e == ChannelError::Overflow)
    }
}

/// Called from `subscription_capabilities` for a listen channel (before the
/// stream is opened).
pub type CapsHook = Arc<dyn Fn(&Channel) + Send + Sync>;

pub struct Scripted {
    pub bus: Bus<Cmd>,
    pub record: Arc<Record>,
    pub caps_hook: Option<CapsHook>,
}

pub struct State {
    _sub: BusSubscription<Cmd>,
}

/// A `tools/list_changed` carrying `_meta.seq` and a padding.
pub fn tools_changed(seq: usize, pad: usize) -> Notification {
    let mut meta = Map::new();
    meta.insert("seq".into(), json!(seq));
    if pad > 0 {
        meta.insert("pad".into(), json!("p".repeat(pad)));
    }
    let mut params = Map::new();
    params.insert("_meta".into(), Value::Object(meta));
    Notification::new("notifications/tools/list_changed", params)
}

fn addressed(to: &Option<RequestId>, channel: &Channel) -> bool {
    to.as_ref().is_none_or(|id| id == channel.id())
}

impl SubscriptionHandler for Scripted {
    type Message = Cmd;
    type State = State;

    /// Rejects ids that are strings starting with `reject`; accepts the rest and
    /// joins the bus.
    fn subscribe(
        &self,
        _filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, Cmd>,
    ) -> Subscribe<State> {
        self.record.subscribed.lock().unwrap().push(cx.id().clone());
        if let RequestId::String(s) = cx.id().clone() {
            if s.starts_with("reject") {
                return Subscribe::Reject(McpError::invalid_params("rejected on purpose"));
            }
            if s.starts_with("attach") {
                cx.attach(futures_util::stream::iter(fed()));
            }
            if s.starts_with("self") {
                for cmd in fed() {
                    cx.notify_self(cmd);
                }
            }
        }
        Subscribe::Accept(State {
            _sub: self.bus.subscribe("all", cx.inbox()),
        })
    }

    fn handle_message(&self, msg: Cmd, channel: &Channel, _state: &mut State) -> Flow {
        self.record.handled.fetch_add(1, Ordering::SeqCst);
        let refuse = |e: ChannelError| {
            self.record
                .refused
                .lock()
                .unwrap()
                .push((channel.id().clone(), e));
        };
        match msg {
            Cmd::Burst { to, n, pad, then } => {
                if !addressed(&to, channel) {
                    return Flow::Continue;
                }
                for seq in 0..n {
                    if let Err(e) = channel.send_notification(tools_changed(seq, pad)) {
                        refuse(e);
                    }
                }
                match then {
                    Then::Continue => Flow::Continue,
                    Then::Stop => Flow::stop("burst then stop"),
                    Then::Panic => panic!("scripted: panics after a burst on purpose"),
                }
            }
            Cmd::Forge { from, label } => {
                if *channel.id() != from {
                    return Flow::Continue;
                }
                let forged = |seq: usize| {
                    let mut n = tools_changed(seq, 0);
                    if let Some(Value::Object(meta)) = n.params.get_mut("_meta") {
                        meta.insert(
                            "io.modelcontextprotocol/subscriptionId".into(),
                            label.clone(),
                        );
                    }
                    n
                };
                if let Err(e) = channel.send_notification(forged(0)) {
                    refuse(e);
                }
                if let Err(e) = channel.send_shared(SharedNotification::new(forged(1))) {
                    refuse(e);
                }
                Flow::Continue
            }
            Cmd::Seq { seq, pad } => {
                if let Err(e) = channel.send_notification(tools_changed(seq, pad)) {
                    refuse(e);
                }
                Flow::Continue
            }
            Cmd::Background { to, n, pad } => {
                if *channel.id() != to {
                    return Flow::Continue;
                }
                let channel = channel.clone();
                let record = self.record.clone();
                std::thread::spawn(move || {
                    for i in 0..n {
                        let mut params = Map::new();
                        params.insert("uri".into(), json!(format!("bg://{i}")));
                        params.insert("_meta".into(), json!({"pad": "b".repeat(pad)}));
                        match channel.send_notification(Notification::new(
                            "notifications/resources/updated",
                            params,
                        )) {
                            Ok(()) => {
                                record.background_sent.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) => record.background_refused.lock().unwrap().push(e),
                        }
                    }
                });
                Flow::Continue
            }
        }
    }

    fn handle_close(&self, channel: &Channel, _state: State) {
        self.record
            .closed
            .lock()
            .unwrap()
            .push(channel.id().clone());
    }

    fn subscription_capabilities(&self, channel: &Channel) -> SubscriptionCapabilities {
        if channel.is_listen()
            && let Some(hook) = &self.caps_hook
        {
            hook(channel);
        }
        SubscriptionCapabilities::none()
            .with_tools_list_changed(true)
            .with_resources_updated(true)
    }
}

/// A suite around a scripted handler, with the `wait` and `label` tools.
pub fn suite(bus: Bus<Cmd>, record: Arc<Record>, caps_hook: Option<CapsHook>) -> Suite<Scripted> {
    let catalog = Catalog::new();
    let waits = record.clone();
    catalog.add_tool(
        ToolBuilder::new("wait")
            .description("Answers once the test releases it")
            .handler(move |_call| {
                let record = waits.clone();
                async move {
                    record.release.notified().await;
                    Ok(CallToolResult::text("released").into())
                }
            }),
    );
    catalog.add_tool(
        ToolBuilder::new("label")
            .description("Sends a custom notification labelled with a subscription id")
            .handler(|call| async move {
                let label = call.arguments.get("label").cloned().unwrap_or(Value::Null);
                let mut params = Map::new();
                params.insert(
                    "_meta".into(),
                    json!({"io.modelcontextprotocol/subscriptionId": label, "trace": 1}),
                );
                call.channel
                    .send_notification(Notification::new("notifications/custom", params))
                    .map_err(|e| McpError::internal(e.to_string()))?;
                Ok(CallToolResult::text("sent").into())
            }),
    );
    Suite::builder(Implementation::new("final-frame", "1"))
        .catalog(catalog)
        .subscriptions(Scripted {
            bus,
            record,
            caps_hook,
        })
        .build()
}

/// The subscription id of a notification.
pub fn sub_id(v: &Value) -> &Value {
    &v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}

/// Whether `v` is a response (result or error) for `id`.
pub fn is_final_for(v: &Value, id: &Value) -> bool {
    v.get("method").is_none() && v.get("id") == Some(id)
}

/// Whether `v` belongs to the stream `id` (a notification labelled with it, or
/// a response for it).
pub fn is_for(v: &Value, id: &Value) -> bool {
    is_final_for(v, id) || (v.get("method").is_some() && sub_id(v) == id)
}

/// Checks the one-final-frame rule for `id` in a complete transcript: the
/// acknowledgement first, exactly one response for the id, and nothing for
/// the id after it. Returns the final frame.
pub fn the_one_final_frame<'a>(transcript: &'a [Value], id: &Value) -> &'a Value {
    let mine: Vec<&Value> = transcript.iter().filter(|v| is_for(v, id)).collect();
    assert!(!mine.is_empty(), "nothing for {id} in {transcript:#?}");
    assert_eq!(
        mine[0]["method"], "notifications/subscriptions/acknowledged",
        "the acknowledgement comes first for {id}"
    );
    let finals: Vec<usize> = mine
        .iter()
        .enumerate()
        .filter(|(_, v)| is_final_for(v, id))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        finals.len(),
        1,
        "exactly one final frame for {id}: {mine:#?}"
    );
    assert_eq!(
        finals[0],
        mine.len() - 1,
        "nothing for {id} after its final frame: {mine:#?}"
    );
    mine[finals[0]]
}

/// The `_meta.seq` values of the `tools/list_changed` notifications for `id`.
pub fn seqs(transcript: &[Value], id: &Value) -> Vec<u64> {
    transcript
        .iter()
        .filter(|v| v["method"] == "notifications/tools/list_changed" && sub_id(v) == id)
        .map(|v| v["params"]["_meta"]["seq"].as_u64().expect("a seq"))
        .collect()
}
