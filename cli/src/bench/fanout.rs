//! In-process fan-out: publish → N stream actors → encoded bytes, no sockets.
//!
//! N listen streams run on one actix System (one thread, so the figure is per
//! core), each under its own connection with its own outbox and writer task,
//! as on HTTP. Each event is one [`SharedNotification`] published on the
//! embedded [`Bus`] in bursts of 32 ([`Bus::publish_batch`], or one
//! [`Bus::publish`] per event: [`Fanout::run_each`]); every stream's
//! `handle_message` passes it to [`Channel::send_shared`]; each writer drains
//! its outbox into a reused byte buffer, as the SSE body does. What is timed: from the first publish until
//! the writers have encoded every frame.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix::Actor as _;
use tokio::sync::Notify;

use genmcp::mux::{Assigns, Channel, SharedNotification, outbox};
use genmcp::protocol::{
    Implementation, Notification, RequestId, RequestMeta, SubscriptionCapabilities,
    SubscriptionFilter,
};
use genmcp::pubsub::{Bus, BusSubscription};
use genmcp::runtime::{Connection, Limits, Server, spawn_listen};
use genmcp::subscription::{Flow, Subscribe, SubscribeCx, SubscriptionHandler};
use genmcp::suite::Suite;

const TOPIC: &str = "fanout";
/// Events published back to back before waiting for the writer: half the
/// default mailbox, so nothing overflows.
const BATCH: u64 = 32;

struct Forward {
    bus: Bus<SharedNotification>,
}

impl SubscriptionHandler for Forward {
    type Message = SharedNotification;
    type State = BusSubscription<SharedNotification>;

    fn subscribe(
        &self,
        _filter: &SubscriptionFilter,
        cx: &mut SubscribeCx<'_, SharedNotification>,
    ) -> Subscribe<Self::State> {
        Subscribe::Accept(self.bus.subscribe(TOPIC, cx.inbox()))
    }

    fn handle_message(
        &self,
        event: SharedNotification,
        channel: &Channel,
        _state: &mut Self::State,
    ) -> Flow {
        let _ = channel.send_shared(event);
        Flow::Continue
    }

    fn subscription_capabilities(&self, _channel: &Channel) -> SubscriptionCapabilities {
        SubscriptionCapabilities::none().with_tools_list_changed(true)
    }
}

/// N open streams, ready to be measured. Not `Send`: it owns its actix System.
pub struct Fanout {
    system: actix_rt::SystemRunner,
    bus: Bus<SharedNotification>,
    streams: usize,
    written: Rc<Cell<u64>>,
    target: Rc<Cell<u64>>,
    reached: Rc<Notify>,
    bytes: Rc<Cell<u64>>,
}

impl Fanout {
    /// Opens `streams` listen streams (their acknowledgements are drained).
    pub fn new(streams: usize) -> std::io::Result<Fanout> {
        let system = actix_rt::System::new();
        let bus: Bus<SharedNotification> = Bus::new();
        let written = Rc::new(Cell::new(0u64));
        let target = Rc::new(Cell::new(streams as u64));
        let reached = Rc::new(Notify::new());
        let bytes = Rc::new(Cell::new(0u64));
        let mut limits = Limits::default();
        limits.max_streams = streams + 1;
        limits.max_streams_per_connection = streams + 1;
        limits.outbox_capacity = 2 * BATCH as usize;
        let server = Server::new(limits.clone());
        let suite = Suite::builder(Implementation::new("fanout", env!("CARGO_PKG_VERSION")))
            .subscriptions(Forward { bus: bus.clone() })
            .build();
        let (w, t, r, b) = (
            written.clone(),
            target.clone(),
            reached.clone(),
            bytes.clone(),
        );
        let ready = reached.clone();
        system.block_on(async move {
            for i in 0..streams {
                let (tx, mut rx) = outbox(limits.outbox_capacity);
                let (done, _ended) = tokio::sync::oneshot::channel();
                let connection = Connection::exchange(server.clone(), tx.clone(), done).start();
                let (w, t, r, b) = (w.clone(), t.clone(), r.clone(), b.clone());
                actix_rt::spawn(async move {
                    let mut buf: Vec<u8> = Vec::new();
                    while let Some(frame) = rx.recv().await {
                        // One wake-up, one buffer: every ready frame.
                        let mut next = Some(frame);
                        let mut frames = 0;
                        while let Some(frame) = next.take() {
                            frame.write_to(&mut buf);
                            buf.extend_from_slice(b"\n\n");
                            frames += 1;
                            next = rx.try_recv().ok();
                        }
                        b.set(b.get() + buf.len() as u64);
                        buf.clear();
                        w.set(w.get() + frames);
                        if w.get() >= t.get() {
                            r.notify_one();
                        }
                    }
                });
                spawn_listen(
                    &suite,
                    &server,
                    &connection,
                    tx,
                    RequestId::Number(i as i64),
                    RequestMeta::current(),
                    Assigns::new(),
                    SubscriptionFilter::tools(),
                )
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            }
            // Every acknowledgement written: the streams are open.
            ready.notified().await;
            Ok::<_, std::io::Error>(())
        })?;
        Ok(Fanout {
            system,
            bus,
            streams,
            written,
            target,
            reached,
            bytes,
        })
    }

    /// Publishes `events` events to every stream and returns the time until the
    /// writer encoded all of them.
    pub fn run(&self, events: u64) -> Duration {
        self.run_with(events, true)
    }

    /// Like [`Fanout::run`], but each event is its own [`Bus::publish`] (the
    /// same bursts of 32 between waits): every event walks all the topic's
    /// inboxes.
    pub fn run_each(&self, events: u64) -> Duration {
        self.run_with(events, false)
    }

    fn run_with(&self, events: u64, batched: bool) -> Duration {
        let notification = SharedNotification::new(Notification::tools_list_changed());
        let burst: Vec<SharedNotification> = (0..BATCH).map(|_| notification.clone()).collect();
        let start = Instant::now();
        self.system.block_on(async {
            let mut sent = 0;
            while sent < events {
                let batch = BATCH.min(events - sent);
                if batched {
                    self.bus.publish_batch(TOPIC, &burst[..batch as usize]);
                } else {
                    for event in &burst[..batch as usize] {
                        self.bus.publish(TOPIC, event.clone());
                    }
                }
                sent += batch;
                self.target
                    .set(self.target.get() + batch * self.streams as u64);
                while self.written.get() < self.target.get() {
                    self.reached.notified().await;
                }
            }
        });
        start.elapsed()
    }

    /// Frames encoded so far (acknowledgements included).
    pub fn frames(&self) -> u64 {
        self.written.get()
    }

    /// Bytes encoded so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.get()
    }
}
