//! An instrumented subscription handler for the runtime tests.

use std::sync::{Arc, Mutex};

use genmcp::prelude::*;
use serde_json::Value;

/// What the test publishes to probe streams (topic "all").
#[derive(Clone, Debug)]
pub enum Msg {
    /// Send this notification.
    Send(Notification),
    /// Panic inside handle_message of the stream with this listen id.
    PanicFor(RequestId),
    /// Return Flow::Stop.
    Stop,
}

/// How `subscribe` behaves.
#[derive(Clone, Debug)]
pub enum Mode {
    Accept,
    Narrow(SubscriptionFilter),
    Reject(McpError),
    Panic,
    /// Accept, and take a 2025 session's URI changes in place (recorded).
    InPlace,
    /// Accept; refuse every 2025 `resources/subscribe` with this error.
    RefuseChanges(McpError),
    /// Accept; panic in `change_uri`.
    PanicOnChange,
}

/// Shared record of what the handler saw.
#[derive(Default)]
pub struct Record {
    pub closed: Mutex<Vec<RequestId>>,
    pub refused: Mutex<Vec<ChannelError>>,
    pub handled: Mutex<u64>,
    /// How many times `subscribe` ran.
    pub subscribes: Mutex<u64>,
    /// The URI changes `change_uri` was told of: (uri, subscribed).
    pub changes: Mutex<Vec<(String, bool)>>,
}

pub struct Probe {
    pub bus: Bus<Msg>,
    pub mode: Mode,
    pub caps: SubscriptionCapabilities,
    pub record: Arc<Record>,
}

pub struct State {
    _sub: BusSubscription<Msg>,
}

impl SubscriptionHandler for Probe {
    type Message = Msg;
    type State = State;

    fn subscribe(
        &self,
        _filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, Msg>,
    ) -> Subscribe<State> {
        let state = || State {
            _sub: self.bus.subscribe("all", cx.inbox()),
        };
        *self.record.subscribes.lock().unwrap() += 1;
        match &self.mode {
            Mode::Accept | Mode::InPlace | Mode::RefuseChanges(_) | Mode::PanicOnChange => {
                Subscribe::Accept(state())
            }
            Mode::Narrow(f) => Subscribe::Narrow(f.clone(), state()),
            Mode::Reject(e) => Subscribe::Reject(e.clone()),
            Mode::Panic => panic!("probe: subscribe panics on purpose"),
        }
    }

    fn handle_message(&self, msg: Msg, channel: &Channel, _state: &mut State) -> Flow {
        *self.record.handled.lock().unwrap() += 1;
        match msg {
            Msg::Send(n) => {
                if let Err(e) = channel.send_notification(n) {
                    self.record.refused.lock().unwrap().push(e);
                }
                Flow::Continue
            }
            Msg::PanicFor(id) if *channel.id() == id => {
                panic!("probe: handle_message panics on purpose")
            }
            Msg::PanicFor(_) => Flow::Continue,
            Msg::Stop => Flow::stop("probe asked to stop"),
        }
    }

    fn change_uri(
        &self,
        change: UriChange<'_>,
        _channel: &Channel,
        _inbox: &Inbox<Msg>,
        _state: &mut State,
    ) -> UriChanged {
        let (uri, subscribed) = match change {
            UriChange::Subscribed(uri) => (uri, true),
            UriChange::Unsubscribed(uri) => (uri, false),
            _ => unreachable!("no other change exists"),
        };
        match &self.mode {
            Mode::InPlace => {
                let mut changes = self.record.changes.lock().unwrap();
                changes.push((uri.to_owned(), subscribed));
                UriChanged::Applied
            }
            Mode::RefuseChanges(e) => UriChanged::Reject(e.clone()),
            Mode::PanicOnChange => panic!("probe: change_uri panics on purpose"),
            _ if subscribed => UriChanged::Restart,
            _ => UriChanged::Applied,
        }
    }

    fn handle_close(&self, channel: &Channel, _state: State) {
        self.record
            .closed
            .lock()
            .unwrap()
            .push(channel.id().clone());
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        self.caps
    }
}

/// A running server with a probe handler.
pub struct ProbeServer {
    pub server: ServerThread,
    pub bus: Bus<Msg>,
    pub record: Arc<Record>,
}

impl ProbeServer {
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr
    }

    pub fn closed(&self) -> Vec<RequestId> {
        self.record.closed.lock().unwrap().clone()
    }

    pub fn subscribes(&self) -> u64 {
        *self.record.subscribes.lock().unwrap()
    }

    pub fn changes(&self) -> Vec<(String, bool)> {
        self.record.changes.lock().unwrap().clone()
    }

    pub fn refused(&self) -> Vec<ChannelError> {
        self.record.refused.lock().unwrap().clone()
    }

    pub fn metrics(&self) -> genmcp::runtime::Metrics {
        self.server.server.metrics()
    }

    /// Publishes until `n` subscribers are there (streams register asynchronously).
    pub fn wait_subscribers(&self, n: usize) {
        assert!(
            super::wait_until(std::time::Duration::from_secs(10), || self
                .bus
                .subscribers("all")
                .len()
                >= n),
            "expected {n} subscribers, have {}",
            self.bus.subscribers("all").len()
        );
    }
}

pub fn start(mode: Mode, caps: SubscriptionCapabilities, config: HttpConfig) -> ProbeServer {
    let bus: Bus<Msg> = Bus::new();
    let record = Arc::new(Record::default());
    let (b, r) = (bus.clone(), record.clone());
    let server = ServerThread::spawn(
        move || {
            Suite::builder(Implementation::new("probe", "1.2.3"))
                .instructions("probe server")
                .subscriptions(Probe {
                    bus: b,
                    mode,
                    caps,
                    record: r,
                })
                .build()
        },
        config,
    )
    .expect("server starts");
    ProbeServer {
        server,
        bus,
        record,
    }
}

pub fn config() -> HttpConfig {
    super::config()
}

pub fn send(n: Notification) -> Msg {
    Msg::Send(n)
}

pub fn sub_id(v: &Value) -> &Value {
    &v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
}
