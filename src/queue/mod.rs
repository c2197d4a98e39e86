//! The bounded many-to-one queue of the data path: a stream's inbox (events
//! into a stream actor) and a connection's outbox (frames out to the transport
//! writer) are both one of these.
//!
//! Built for the data path rather than taken from `tokio::sync::mpsc` (the
//! comparison is in `docs/benchmark.md`): a send is one short lock, the reader
//! takes everything queued in one lock (a whole batch per wake-up, then hands
//! it out without locking), and a sender wakes the reader only when it is
//! parked.
//!
//! The rules it keeps, each model-checked with loom (`scripts/loom.sh`):
//!
//! - **Bounded.** At most `capacity` items are queued, in the reader's batch
//!   or reserved by a [`Permit`]; a slot is given back as its item is handed
//!   to the reader, in the middle of a batch too.
//! - **First come, first served.** Senders that wait for room
//!   ([`Sender::reserve`], [`Sender::send`]) are handed freed slots in the
//!   order they started waiting, and [`Sender::try_send`] does not take a
//!   slot while any sender waits: a unary reply waiting on a busy pipe is not
//!   overtaken by stream traffic.
//! - **Cancellable.** A waiting future dropped (a `timeout` around it) leaves
//!   the line, or passes on the slot it was handed.
//! - **Items before the end.** The reader sees `None` only once every sender
//!   has gone and every item they queued was handed out.
//! - **The reader going ends every wait.** Waiting senders fail with
//!   [`Closed`], [`Sender::closed`] completes, queued items are dropped.
//!
//! And one it keeps for memory (unit tests and loom models): storage a
//! burst grew is given back when the reader next finds the queue empty,
//! down to [`IDLE_FLOOR`] items, with no allocator call under the lock. A
//! reader that parks after every batch of a long burst (a stream's writer and
//! its event feed) asks instead, with [`Receiver::tidy_on_call`], to give it
//! back only when its owner calls [`Receiver::tidy`], once the queue has been
//! idle for [`TIDY_AFTER`]: otherwise every batch of a burst reallocates.
//!
//! File by file: `sender.rs` and `receiver.rs` are the two sides, `shared.rs`
//! the state between them (slot count, waiting senders), `sync.rs` the
//! primitives (std, or loom's under the `loom` feature), `loom.rs` the models.
//! Beside it, `fanout.rs`: the one-to-many log a bus topic delivers through
//! (one append per message, a bounded backlog per subscriber).

pub(crate) mod fanout;
mod receiver;
mod sender;
mod shared;
mod sync;
mod wake_slot;

#[cfg(all(test, not(feature = "loom")))]
mod fanout_tests;
#[cfg(all(test, feature = "loom"))]
mod loom;
#[cfg(all(test, not(feature = "loom")))]
mod tests;

pub use receiver::Receiver;
pub use sender::{Permit, Sender};
pub use tokio::sync::mpsc::error::{TryRecvError, TrySendError};
pub(crate) use wake_slot::WakeSlot;

use shared::Shared;
use sync::Arc;

/// A bounded queue of `capacity` items (at least one): the sending side
/// (cheap to clone) and the one receiving side.
///
/// ```
/// let (tx, mut rx) = genmcp::queue::bounded(2);
/// tx.try_send("a").unwrap();
/// assert_eq!(rx.try_recv(), Ok("a"));
/// ```
pub fn bounded<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    with_idle_floor(capacity, IDLE_FLOOR)
}

/// [`bounded`] keeping `idle_floor` items of storage once idle (the loom
/// models use a small floor, so that a short burst goes past it).
fn with_idle_floor<T>(capacity: usize, idle_floor: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared::new(capacity, idle_floor));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            batch: std::collections::VecDeque::new(),
            tidy_on_call: false,
            grown: false,
        },
    )
}

/// Items of storage the queue and its reader's batch each keep once idle
/// (default 4).
///
/// Both grow with a burst, up to the queue's capacity (a connection's outbox
/// and a stream's mailbox: 64 by default), past the floor in one step of up
/// to 64 items rather than by doubling (`sender::GROWTH_STEP`). When the
/// reader finds nothing queued, each is shrunk back to this many items (and
/// to no less than it holds): a stream that is idle again holds what an idle
/// stream holds. 4 covers the batches of ordinary traffic (a reply and its
/// notifications, a few events between two reads), which then take and give
/// back no memory;
/// storage only ever shrinks when it grew past this. An outbox frame is 48
/// bytes, so the floor is 192 bytes per side. (It was 16 until the memory
/// measured after a burst showed the floors' 1.5 KiB per stream;
/// `docs/benchmark.md`.)
pub const IDLE_FLOOR: usize = 4;

/// How long the queue of a reader that tidies on call
/// ([`Receiver::tidy_on_call`]) stays idle before its owner gives storage
/// back (the stream's event feed: between once and twice this after the
/// last event): long enough that a burst, whose reader parks between
/// batches, keeps its storage; short enough that memory is back long before
/// anyone reads it.
pub const TIDY_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// The queue's reader has gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the queue's reader has gone")]
pub struct Closed;
