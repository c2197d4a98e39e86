//! A listen stream's frames on their way to the outbox while its actor handles
//! a turn of events: staged beside the spill, under the same lock, and moved
//! into the outbox a few at a time ([`STAGE_LIMIT`]) and at the end of the
//! turn, instead of one outbox lock and slot per frame.
//!
//! Only the hand-off changes: a frame staged is one the outbox had room for
//! as far as the channel knows, so the spill, its bound and the overflow are
//! decided as before, once a move finds the outbox full. The stream's writer
//! runs on the actor's thread, so it sees nothing later than it did.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;

use super::{CLOSED, Channel, Frame, lock};

/// Frames staged before they are moved into the outbox. The storage staging
/// grows past the spill's idle floor is given back by
/// [`Channel::tidy_staging`], once the stream is idle.
pub(super) const STAGE_LIMIT: usize = 16;

/// The frames waiting under the channel's lock: spilled ones (no outbox room)
/// or, during a turn, staged ones.
#[derive(Default)]
pub(super) struct Pending {
    frames: VecDeque<Frame>,
    /// The stream's actor is handling a turn of events.
    pub(super) staging: bool,
    /// A move during this turn found the outbox full: what waits is spill.
    pub(super) blocked: bool,
}

impl Deref for Pending {
    type Target = VecDeque<Frame>;

    fn deref(&self) -> &VecDeque<Frame> {
        &self.frames
    }
}

impl DerefMut for Pending {
    fn deref_mut(&mut self) -> &mut VecDeque<Frame> {
        &mut self.frames
    }
}

impl Pending {
    /// Whether a frame sent now is staged rather than sent or spilled.
    pub(super) fn stages(&self) -> bool {
        self.staging && !self.blocked
    }
}

impl Channel {
    /// The stream's actor starts a turn of events: its frames are staged.
    pub(crate) fn begin_staging(&self) {
        if self.inner.listen.is_some() {
            lock(&self.inner.pending).staging = true;
        }
    }

    /// The turn is over: staged frames go to the outbox. Returns whether frames
    /// are left waiting (the outbox is full): they are spill now, to be drained.
    pub(crate) fn end_staging(&self) -> bool {
        let Some(listen) = &self.inner.listen else {
            return false;
        };
        let mut pending = lock(&self.inner.pending);
        if !pending.staging {
            return false;
        }
        pending.staging = false;
        pending.blocked = false;
        self.move_staged(&mut pending);
        if pending.is_empty() {
            return false;
        }
        listen.spilled.store(true, Ordering::Release);
        true
    }

    /// Whether staging holds storage past the spill's idle floor (for the
    /// stream's idle timer).
    pub(crate) fn staging_grown(&self) -> bool {
        self.inner.listen.is_some()
            && lock(&self.inner.pending).capacity() > super::SPILL_IDLE_FLOOR
    }

    /// Gives staging's storage back to the spill's idle floor if nothing
    /// waits (a stream idle after a burst).
    pub(crate) fn tidy_staging(&self) {
        let mut pending = lock(&self.inner.pending);
        if pending.is_empty() && !pending.staging {
            pending.shrink_to(super::SPILL_IDLE_FLOOR);
        }
    }

    /// Moves what fits into the outbox; what is left is spill for the rest of
    /// the turn, flagged at once so that the actor stops taking events and
    /// drains it, as after any spill. A reader gone ends the channel (its
    /// frames are dropped).
    pub(super) fn move_staged(&self, pending: &mut Pending) {
        match self.inner.outbox.try_send_many(pending) {
            Ok(_) => {
                pending.blocked = !pending.is_empty();
                if let Some(listen) = &self.inner.listen
                    && pending.blocked
                {
                    listen.spilled.store(true, Ordering::Release);
                }
            }
            Err(_) => {
                self.inner.state.store(CLOSED, Ordering::Release);
                pending.clear();
            }
        }
    }
}
