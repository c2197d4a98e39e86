//! One shard's session: its `SSUBSCRIBE`s in step with the topics whose
//! channels hash to its slots, its `SPUBLISH`es, its messages checked and
//! delivered.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ::redis::aio::MultiplexedConnection;
use ::redis::{PushKind, Value};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

use super::super::RedisBusConfig;
use super::super::inbound::{Verifier, check_and_queue};
use super::super::link::{Link, Outgoing};
use super::super::publish::Publisher;
use super::super::slot;
use super::super::task::{End, now_ms, self_deliver};
use super::connect::Pushes;
use crate::pubsub::BusInner;
use crate::pubsub::local::lock;

/// One shard's session: its subscriptions, its publishes, its messages.
pub(super) struct Shard<M> {
    pub(super) addr: String,
    pub(super) ranges: Arc<Mutex<Vec<(u16, u16)>>>,
    pub(super) config: RedisBusConfig,
    pub(super) link: Arc<Link>,
    pub(super) bus: Weak<BusInner<M>>,
    pub(super) seq: Arc<AtomicU64>,
}

impl<M: Clone + Send + DeserializeOwned + 'static> Shard<M> {
    pub(super) async fn run(
        self,
        conn: MultiplexedConnection,
        pushes: Pushes,
        publish: mpsc::Receiver<Outgoing>,
        topics: watch::Receiver<()>,
        mut verifier: Verifier,
        ready: mpsc::Sender<(String, u64)>,
    ) -> (String, End, Verifier) {
        let end = self
            .session(conn, pushes, publish, topics, &mut verifier, ready)
            .await;
        (self.addr, end, verifier)
    }

    async fn session(
        &self,
        conn: MultiplexedConnection,
        mut pushes: Pushes,
        mut publish: mpsc::Receiver<Outgoing>,
        mut topics: watch::Receiver<()>,
        verifier: &mut Verifier,
        ready: mpsc::Sender<(String, u64)>,
    ) -> End {
        let command_timeout = self.config.command_timeout;
        // The channels subscribed (or being subscribed) on this shard: a
        // `sunsubscribe` push for one of them comes from the server (its slot
        // moved), not from this node.
        let subscribed: std::cell::RefCell<HashSet<String>> = Default::default();
        // This node's own SUNSUBSCRIBEs whose confirmation push has not been
        // read yet, per channel: such a push is not the server's, even when
        // the channel was subscribed again meanwhile.
        let unsubscribing: std::cell::RefCell<HashMap<String, u32>> = Default::default();
        let publisher = Publisher::new("SPUBLISH", &self.link, &self.config);
        // One counter for the node's shards: numbered in the order sent.
        let publishing = publisher.run(&mut publish, conn.clone(), || {
            self.seq.fetch_add(1, Ordering::Relaxed) + 1
        });
        let (checked_tx, mut checked) = mpsc::channel::<::redis::Msg>(self.config.max_inbound);
        let draining = async {
            loop {
                let push = match pushes.recv().await {
                    Ok(push) => push,
                    Err(reason) => return End::Lost(reason),
                };
                match push.kind {
                    PushKind::SMessage => {}
                    PushKind::Disconnection => return End::Lost("connection closed".into()),
                    PushKind::SUnsubscribe => {
                        let channel = match push.data.first() {
                            Some(Value::BulkString(c)) => String::from_utf8_lossy(c).into_owned(),
                            _ => continue,
                        };
                        {
                            let mut own = unsubscribing.borrow_mut();
                            if let Some(n) = own.get_mut(&channel) {
                                *n -= 1;
                                if *n == 0 {
                                    own.remove(&channel);
                                }
                                continue;
                            }
                        }
                        if subscribed.borrow().contains(&channel) {
                            return End::Lost(format!(
                                "the server unsubscribed {channel} (its slot moved)"
                            ));
                        }
                        continue;
                    }
                    _ => continue,
                }
                let Some(msg) = ::redis::Msg::from_push_info(push) else {
                    continue;
                };
                if let Err(reason) = check_and_queue(verifier, msg, &checked_tx, now_ms()) {
                    return End::Lost(reason);
                }
            }
        };
        let mut sub_conn = conn;
        let receiving = async {
            let mut ping = tokio::time::interval(self.config.ping_interval);
            ping.tick().await;
            let mut dirty = true;
            loop {
                if !dirty {
                    tokio::select! {
                        msg = checked.recv() => match msg {
                            Some(msg) => self_deliver(&self.bus, &self.link, &self.config, &msg).await,
                            None => return End::Lost("connection closed".into()),
                        },
                        changed = topics.changed() => {
                            if changed.is_err() {
                                return End::Shutdown;
                            }
                            dirty = true;
                        }
                        _ = ping.tick() => {
                            let ping_cmd = ::redis::cmd("PING");
                            let ping = ping_cmd.query_async::<Value>(&mut sub_conn);
                            match tokio::time::timeout(command_timeout, ping).await {
                                Ok(Ok(_)) => {}
                                Ok(Err(e)) => return End::Lost(format!("PING failed: {e}")),
                                Err(_) => return End::Lost(format!("PING unanswered in {command_timeout:?}")),
                            }
                        }
                    }
                    continue;
                }
                dirty = false;
                let Some(inner) = self.bus.upgrade() else {
                    return End::Shutdown;
                };
                // Before the topics are read: what this pass answers.
                let ticket = self.link.ticket();
                let ranges = lock(&self.ranges).clone();
                let wanted: HashSet<String> = inner
                    .local
                    .names()
                    .into_iter()
                    .map(|t| format!("{}{t}", self.link.prefix))
                    .filter(|c| slot::within(slot::of(c.as_bytes()), &ranges))
                    .collect();
                drop(inner);
                let (add, remove) = {
                    let mut subscribed = subscribed.borrow_mut();
                    let add: Vec<String> = wanted.difference(&subscribed).cloned().collect();
                    let remove: Vec<String> = subscribed.difference(&wanted).cloned().collect();
                    // Marked before the commands go: their own confirmations
                    // are then not taken for the server's.
                    *subscribed = wanted;
                    (add, remove)
                };
                // One channel per command: each is answered by one
                // confirmation, which the connection takes as its reply (an
                // `sunsubscribe` is also pushed: at most half the push queue
                // a pipeline, read between them).
                let chunk = (self.config.max_inbound / 2).max(1);
                let passes = add
                    .chunks(chunk)
                    .map(|c| ("SSUBSCRIBE", c))
                    .chain(remove.chunks(chunk).map(|c| ("SUNSUBSCRIBE", c)));
                for (verb, channels) in passes {
                    let mut pipe = ::redis::pipe();
                    for c in channels {
                        pipe.cmd(verb).arg(c).ignore();
                        if verb == "SUNSUBSCRIBE" {
                            *unsubscribing.borrow_mut().entry(c.clone()).or_default() += 1;
                        }
                    }
                    match tokio::time::timeout(command_timeout, pipe.exec_async(&mut sub_conn))
                        .await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return End::Lost(format!("{verb} failed: {e}")),
                        Err(_) => {
                            return End::Lost(format!("{verb} unanswered in {command_timeout:?}"));
                        }
                    }
                }
                // Every pass: the router learns which tickets are served.
                let _ = ready.send((self.addr.clone(), ticket)).await;
            }
        };
        tokio::select! {
            end = publishing => end,
            end = receiving => end,
            end = draining => end,
        }
    }
}
