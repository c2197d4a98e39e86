//! This node's publishes to Redis, for both engines: each batch waiting in
//! the bus's queue is numbered, sealed and sent as one pipeline of
//! `PUBLISH` (one server) or `SPUBLISH` (one cluster shard).

use std::time::Duration;

use ::redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;

use super::RedisBusConfig;
use super::keys::BusKeys;
use super::link::{Link, Outgoing};
use super::task::{End, now_ms};
use super::wire::{self, Header};

/// Publishes taken from the queue per pipeline at most.
const BATCH: usize = 256;

/// How one engine publishes.
pub(super) struct Publisher<'a> {
    /// `PUBLISH` or `SPUBLISH`.
    verb: &'static str,
    /// This node's id, in every header.
    node: u64,
    key: Option<&'a BusKeys>,
    command_timeout: Duration,
}

impl<'a> Publisher<'a> {
    /// Publishes with `verb` as `link`'s node, sealed and timed out as
    /// `config` says.
    pub(super) fn new(verb: &'static str, link: &Link, config: &'a RedisBusConfig) -> Self {
        Publisher {
            verb,
            node: link.node,
            key: config.key.as_ref(),
            command_timeout: config.command_timeout,
        }
    }

    /// Sends what `queue` holds, a pipeline per wake-up, until the queue
    /// closes (`Shutdown`) or a pipeline fails or goes unanswered (`Lost`).
    /// `next_seq` numbers the messages in the order they are sent.
    pub(super) async fn run(
        &self,
        queue: &mut mpsc::Receiver<Outgoing>,
        mut conn: MultiplexedConnection,
        mut next_seq: impl FnMut() -> u64,
    ) -> End {
        let mut batch: Vec<Outgoing> = Vec::with_capacity(BATCH);
        loop {
            if queue.recv_many(&mut batch, BATCH).await == 0 {
                return End::Shutdown;
            }
            let mut pipe = ::redis::pipe();
            let sent_ms = now_ms();
            // The set now (a SIGHUP may have changed it): its current key tags.
            let keys = self.key.map(BusKeys::keys);
            let key = keys.as_deref().and_then(<[_]>::first);
            for mut out in batch.drain(..) {
                if out.marker {
                    pipe.cmd(self.verb)
                        .arg(out.channel)
                        .arg(out.payload)
                        .ignore();
                    continue;
                }
                let header = Header {
                    node: self.node,
                    seq: next_seq(),
                    sent_ms,
                };
                wire::seal(&mut out.payload, header, key, out.channel.as_bytes());
                pipe.cmd(self.verb)
                    .arg(out.channel)
                    .arg(out.payload)
                    .ignore();
            }
            let verb = self.verb;
            let timeout = self.command_timeout;
            match tokio::time::timeout(timeout, pipe.exec_async(&mut conn)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return End::Lost(format!("{verb} failed: {e}")),
                Err(_) => return End::Lost(format!("{verb} unanswered in {timeout:?}")),
            }
        }
    }
}
