//! The count of messages from Redis that a bus refused, by reason, for the
//! whole process (every Redis bus adds to it): exported on `/metrics` as
//! `genmcp_bus_messages_dropped_total{reason}`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a message from Redis was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// Its tag is not the shared key's: written by someone without the key
    /// (or by a node with another key, or without one).
    Forged,
    /// Authentic, but its sequence number is not newer than the last one seen
    /// from its node, or its clock is outside the replay window: sent again.
    Replayed,
    /// Larger than [`super::RedisBusConfig::max_payload`].
    Oversized,
    /// Not a frame of a version this build reads, or its JSON does not decode
    /// into the bus's message type.
    Malformed,
    /// [`super::RedisBusConfig::max_inbound`] messages already waited for
    /// delivery: the node is not keeping up; the connection is dropped, its
    /// streams completed, and it reconnects.
    Backlog,
}

impl DropReason {
    /// Every reason, in the order of [`dropped_messages`].
    pub const ALL: [DropReason; 5] = [
        DropReason::Forged,
        DropReason::Replayed,
        DropReason::Oversized,
        DropReason::Malformed,
        DropReason::Backlog,
    ];

    /// The metric's label: `forged`, `replayed`, `oversized`, `malformed`,
    /// `backlog`.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Forged => "forged",
            DropReason::Replayed => "replayed",
            DropReason::Oversized => "oversized",
            DropReason::Malformed => "malformed",
            DropReason::Backlog => "backlog",
        }
    }

    fn index(self) -> usize {
        match self {
            DropReason::Forged => 0,
            DropReason::Replayed => 1,
            DropReason::Oversized => 2,
            DropReason::Malformed => 3,
            DropReason::Backlog => 4,
        }
    }
}

static COUNTS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// Counts one dropped message; logs it as a warning the 1st, 2nd, 4th, 8th...
/// time for its reason (a flood of forgeries cannot flood the log).
pub(super) fn count(reason: DropReason, topic: &str) {
    let n = COUNTS[reason.index()].fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        tracing::warn!(
            reason = reason.as_str(),
            topic,
            dropped = n,
            "event bus: a message from Redis was dropped (counted in \
             genmcp_bus_messages_dropped_total)"
        );
    } else {
        tracing::debug!(
            reason = reason.as_str(),
            topic,
            "event bus: message dropped"
        );
    }
}

/// How many messages from Redis every bus of this process has dropped since
/// start, by reason.
///
/// ```
/// use genmcp::pubsub::redis::{DropReason, dropped_messages};
/// let counts = dropped_messages();
/// assert_eq!(counts[0].0, DropReason::Forged);
/// ```
pub fn dropped_messages() -> [(DropReason, u64); 5] {
    DropReason::ALL.map(|r| (r, COUNTS[r.index()].load(Ordering::Relaxed)))
}
