//! What a node checks on each message from Redis before delivering it: its
//! size, its frame, its tag under the bus key, and that it is not a replay
//! (a sequence number newer than the last seen from its node, a clock within
//! the replay window), with a bounded table of the nodes seen.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::dropped::{self, DropReason};
use super::keys::BusKeys;
use super::wire;

/// What to do with one message.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict<'a> {
    /// Deliver this JSON.
    Deliver(&'a [u8]),
    /// This node published it: skip it, silently.
    Own,
    /// Drop it, counted under this reason.
    Drop(DropReason),
}

/// The last message seen from one node.
struct Seen {
    seq: u64,
    at: Instant,
}

/// The checks of one bus; lives as long as the bus (across reconnections,
/// so a reconnection does not open a window for replays).
pub(super) struct Verifier {
    key: Option<BusKeys>,
    own: u64,
    max_frame: usize,
    window_ms: u64,
    window: Duration,
    max_nodes: usize,
    seen: HashMap<u64, Seen>,
}

impl Verifier {
    /// The checks of node `own`: frames up to `max_frame` bytes, authenticated
    /// with `key` if there is one, at most `max_nodes` nodes remembered.
    pub(super) fn new(
        key: Option<BusKeys>,
        own: u64,
        max_frame: usize,
        window: Duration,
        max_nodes: usize,
    ) -> Self {
        Verifier {
            key,
            own,
            max_frame,
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            window,
            max_nodes: max_nodes.max(1),
            seen: HashMap::new(),
        }
    }

    /// The verdict on `bytes` received on `channel`, at `now_ms` by this
    /// node's clock (ms since the Unix epoch) and `now`.
    pub(super) fn check<'a>(
        &mut self,
        channel: &[u8],
        bytes: &'a [u8],
        now_ms: u64,
        now: Instant,
    ) -> Verdict<'a> {
        if bytes.len() > self.max_frame {
            return Verdict::Drop(DropReason::Oversized);
        }
        let frame = match wire::decode(bytes) {
            Ok(frame) => frame,
            Err(_) => return Verdict::Drop(DropReason::Malformed),
        };
        let h = frame.header;
        if h.node == self.own {
            return Verdict::Own;
        }
        let Some(keys) = &self.key else {
            return Verdict::Deliver(frame.body);
        };
        // Any key of the set (the current first): during a rolling rotation
        // the other nodes may tag with another key of the set.
        if !keys
            .keys()
            .iter()
            .any(|key| frame.verify(Some(key), channel).is_ok())
        {
            return Verdict::Drop(DropReason::Forged);
        }
        if h.sent_ms.saturating_add(self.window_ms) < now_ms
            || h.sent_ms > now_ms.saturating_add(self.window_ms)
        {
            return Verdict::Drop(DropReason::Replayed);
        }
        match self.seen.get_mut(&h.node) {
            Some(seen) if h.seq <= seen.seq => return Verdict::Drop(DropReason::Replayed),
            Some(seen) => {
                seen.seq = h.seq;
                seen.at = now;
            }
            None => {
                self.make_room(now);
                self.seen.insert(
                    h.node,
                    Seen {
                        seq: h.seq,
                        at: now,
                    },
                );
            }
        }
        Verdict::Deliver(frame.body)
    }

    /// Makes room for one more node when the table is full: forgets the nodes
    /// not heard from for twice the replay window (their old messages are
    /// refused by the window anyway), else the one heard from least recently.
    fn make_room(&mut self, now: Instant) {
        if self.seen.len() < self.max_nodes {
            return;
        }
        let idle = self.window.saturating_mul(2);
        self.seen
            .retain(|_, s| now.saturating_duration_since(s.at) <= idle);
        if self.seen.len() < self.max_nodes {
            return;
        }
        if let Some(oldest) = self.seen.iter().min_by_key(|(_, s)| s.at).map(|(n, _)| *n) {
            self.seen.remove(&oldest);
            tracing::warn!(
                max_nodes = self.max_nodes,
                "event bus: more nodes than max_nodes within the replay window; \
                 the least recently heard one was forgotten"
            );
        }
    }
}

/// Checks one message from Redis (at `now_ms`, this machine's clock) and
/// queues it for delivery when it passes; a dropped one is counted. `Err`
/// says why the connection is to be treated as lost: `queue`'s
/// `max_inbound` messages already wait (counted `backlog`), the node does not
/// keep up.
pub(super) fn check_and_queue(
    verifier: &mut Verifier,
    msg: ::redis::Msg,
    queue: &mpsc::Sender<::redis::Msg>,
    now_ms: u64,
) -> Result<(), String> {
    let verdict = verifier.check(
        msg.get_channel_name().as_bytes(),
        msg.get_payload_bytes(),
        now_ms,
        Instant::now(),
    );
    match verdict {
        Verdict::Deliver(_) => {}
        Verdict::Own => return Ok(()),
        Verdict::Drop(reason) => {
            dropped::count(reason, msg.get_channel_name());
            return Ok(());
        }
    }
    if queue.try_send(msg).is_err() {
        dropped::count(DropReason::Backlog, "");
        return Err(format!(
            "{} messages from Redis already wait for delivery (max_inbound): \
             this node cannot keep up",
            queue.max_capacity()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::redis::wire::{BusKey, Header, buffer, seal};

    const NOW: u64 = 1_800_000_000_000;

    fn frame(key: Option<&BusKey>, node: u64, seq: u64, sent_ms: u64) -> Vec<u8> {
        let mut f = buffer(2);
        f.extend_from_slice(b"[]");
        seal(&mut f, Header { node, seq, sent_ms }, key, b"c");
        f
    }

    fn verifier(secret: Option<&[u8; 32]>, max_nodes: usize) -> Verifier {
        Verifier::new(
            secret.map(BusKeys::new),
            1,
            1024,
            Duration::from_secs(60),
            max_nodes,
        )
    }

    #[test]
    fn with_a_key_only_fresh_authentic_messages_pass() {
        let key = BusKey::derive(&[9; 32]);
        let mut v = verifier(Some(&[9; 32]), 16);
        let t = Instant::now();
        let f = frame(Some(&key), 2, 5, NOW);
        assert_eq!(v.check(b"c", &f, NOW, t), Verdict::Deliver(b"[]"));
        assert_eq!(
            v.check(b"c", &f, NOW, t),
            Verdict::Drop(DropReason::Replayed),
            "the same message again"
        );
        let older = frame(Some(&key), 2, 4, NOW);
        assert_eq!(
            v.check(b"c", &older, NOW, t),
            Verdict::Drop(DropReason::Replayed)
        );
        let newer = frame(Some(&key), 2, 6, NOW);
        assert_eq!(v.check(b"c", &newer, NOW, t), Verdict::Deliver(b"[]"));
        let stale = frame(Some(&key), 3, 1, NOW - 61_000);
        assert_eq!(
            v.check(b"c", &stale, NOW, t),
            Verdict::Drop(DropReason::Replayed)
        );
        let other = BusKey::derive(&[8; 32]);
        let forged = frame(Some(&other), 2, 7, NOW);
        assert_eq!(
            v.check(b"c", &forged, NOW, t),
            Verdict::Drop(DropReason::Forged)
        );
        let unkeyed = frame(None, 2, 8, NOW);
        assert_eq!(
            v.check(b"c", &unkeyed, NOW, t),
            Verdict::Drop(DropReason::Forged)
        );
        assert_eq!(
            v.check(b"c", &frame(Some(&key), 1, 9, NOW), NOW, t),
            Verdict::Own
        );
        assert_eq!(
            v.check(b"c", b"0123456789abcdef[1]", NOW, t),
            Verdict::Drop(DropReason::Malformed),
            "the unversioned format of earlier builds"
        );
        assert_eq!(
            v.check(b"c", &[0u8; 2048], NOW, t),
            Verdict::Drop(DropReason::Oversized)
        );
    }

    #[test]
    fn without_a_key_anything_well_formed_passes() {
        let mut v = verifier(None, 16);
        let t = Instant::now();
        let f = frame(None, 2, 5, 0);
        assert_eq!(v.check(b"c", &f, NOW, t), Verdict::Deliver(b"[]"));
        assert_eq!(v.check(b"c", &f, NOW, t), Verdict::Deliver(b"[]"));
    }

    #[test]
    fn the_table_of_nodes_is_bounded_and_keeps_the_recent_ones() {
        let key = BusKey::derive(&[9; 32]);
        let mut v = verifier(Some(&[9; 32]), 3);
        let t = Instant::now();
        for node in 10..20 {
            let f = frame(Some(&key), node, 1, NOW);
            assert_eq!(v.check(b"c", &f, NOW, t), Verdict::Deliver(b"[]"));
            assert!(v.seen.len() <= 3);
        }
        // The most recent node is still known: its message is a replay.
        let f = frame(Some(&key), 19, 1, NOW);
        assert_eq!(
            v.check(b"c", &f, NOW, t),
            Verdict::Drop(DropReason::Replayed)
        );
    }

    #[test]
    fn any_key_of_the_set_is_accepted_and_a_change_applies_at_once() {
        let (old, new) = ([9u8; 32], [8u8; 32]);
        let keys = BusKeys::new(&old);
        let mut v = Verifier::new(Some(keys.clone()), 1, 1024, Duration::from_secs(60), 16);
        let t = Instant::now();
        let (k_old, k_new) = (BusKey::derive(&old), BusKey::derive(&new));
        assert_eq!(
            v.check(b"c", &frame(Some(&k_new), 2, 1, NOW), NOW, t),
            Verdict::Drop(DropReason::Forged),
            "a key not in the set"
        );
        // The rotation's middle: the new key current, the old still accepted.
        keys.set(&new, [&old]);
        assert_eq!(
            v.check(b"c", &frame(Some(&k_new), 2, 2, NOW), NOW, t),
            Verdict::Deliver(b"[]")
        );
        assert_eq!(
            v.check(b"c", &frame(Some(&k_old), 3, 1, NOW), NOW, t),
            Verdict::Deliver(b"[]")
        );
        // The old key dropped: its messages are forged from now on.
        keys.set(&new, []);
        assert_eq!(
            v.check(b"c", &frame(Some(&k_old), 3, 2, NOW), NOW, t),
            Verdict::Drop(DropReason::Forged)
        );
        assert_eq!(
            v.check(b"c", &frame(Some(&k_new), 2, 3, NOW), NOW, t),
            Verdict::Deliver(b"[]")
        );
    }
}
